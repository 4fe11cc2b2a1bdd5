{{/*
The Prometheus of values prometheus.*: the default policy's spec.prometheus
(templates/policy.yaml), and the Secrets the operator may read (templates/rbac-secrets.yaml).
*/}}

{{/* spec.prometheus of the default SitsPolicy, as YAML; unset fields left out. */}}
{{- define "sits-operator.prometheus" -}}
{{- $in := .Values.prometheus -}}
{{- $out := dict "url" $in.url "timeout" $in.timeout -}}
{{- range $field := list "bearerTokenSecretRef" "basicAuth" "tls" "headers" -}}
{{- with index $in $field }}{{ $_ := set $out $field . }}{{ end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The Secrets the operator may get in the release namespace, as a JSON list: those
values prometheus.* names, and prometheus.extraSecretNames. */}}
{{- define "sits-operator.prometheusSecretNames" -}}
{{- $in := .Values.prometheus -}}
{{- $names := list -}}
{{- with $in.bearerTokenSecretRef }}{{ $names = append $names .name }}{{ end -}}
{{- with $in.basicAuth }}{{ with .secretRef }}{{ $names = append $names .name }}{{ end }}{{ end -}}
{{- with $in.tls -}}
{{- with .caSecretRef }}{{ $names = append $names .name }}{{ end -}}
{{- with .certSecretRef }}{{ $names = append $names .name }}{{ end -}}
{{- end -}}
{{- range $in.extraSecretNames }}{{ if not . }}{{ fail "prometheus.extraSecretNames has an empty entry" }}{{ end }}{{ $names = append $names . }}{{ end -}}
{{- range $names }}{{ if not . }}{{ fail "a Secret named in prometheus.* has no name" }}{{ end }}{{ end -}}
{{- toJson (uniq $names) -}}
{{- end -}}
