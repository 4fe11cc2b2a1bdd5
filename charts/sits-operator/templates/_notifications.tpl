{{/*
The operator's notification settings as one JSON object (env SITS_NOTIFICATIONS, read by
operator/sits_operator/adapters/notification_settings.py). Credentials stay out of it: a
webhook's `urlFrom` becomes the variable SITS_NOTIFICATIONS_URL_<index> (from its Secret
key), its `headersFrom` Secret is mounted at /etc/sits/notifications/<index> (every key a
header); templates/deployment.yaml renders both.
*/}}
{{- define "sits-operator.notifications" -}}
{{- $n := .Values.notifications -}}
{{- $hooks := list -}}
{{- $names := list -}}
{{- range $i, $w := $n.webhooks -}}
{{- $name := required "notifications.webhooks[].name is required" $w.name -}}
{{- if has $name $names -}}
{{- fail (printf "notifications.webhooks: name %q is used twice" $name) -}}
{{- end -}}
{{- $names = append $names $name -}}
{{- $format := $w.format | default "json" -}}
{{- if not (has $format (list "slack" "json" "cloudevents")) -}}
{{- fail (printf "notifications.webhooks %s: format must be slack, json or cloudevents, not %q" $name $format) -}}
{{- end -}}
{{- $hook := dict "name" $name "format" $format "events" ($w.events | default list) -}}
{{- if $w.urlFrom -}}
{{- $_ := set $hook "urlEnv" (printf "SITS_NOTIFICATIONS_URL_%d" $i) -}}
{{- else -}}
{{- $_ := set $hook "url" (required (printf "notifications.webhooks %s: url or urlFrom is required" $name) $w.url) -}}
{{- end -}}
{{- if $w.headers -}}
{{- $_ := set $hook "headers" $w.headers -}}
{{- end -}}
{{- if $w.headersFrom -}}
{{- $_ := set $hook "headersDir" (printf "/etc/sits/notifications/%d" $i) -}}
{{- end -}}
{{- $hooks = append $hooks $hook -}}
{{- end -}}
{{- dict "webhooks" $hooks "queueSize" $n.queueSize "timeoutSeconds" $n.timeoutSeconds "maxAttempts" $n.maxAttempts "backoffSeconds" $n.backoffSeconds "maxBackoffSeconds" $n.maxBackoffSeconds "drainSeconds" $n.drainSeconds | toJson -}}
{{- end -}}
