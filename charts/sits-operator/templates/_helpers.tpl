{{/* Names and labels shared by every template. */}}

{{- define "sits-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sits-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sits-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sits-operator.selectorLabels" -}}
app.kubernetes.io/name: sits-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sits-operator.labels" -}}
{{ include "sits-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret holding the alert webhook's bearer token: the user's, or the chart's. */}}
{{- define "sits-operator.alertWebhookSecret" -}}
{{- default (printf "%s-alert-webhook" (include "sits-operator.fullname" .)) .Values.alertWebhook.auth.existingSecret -}}
{{- end -}}
