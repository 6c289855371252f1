{{/* Labels of every object of the release. */}}
{{- define "cftunnel.labels" -}}
app.kubernetes.io/name: cftunnel
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The pod selector; never changes between releases (a Deployment's selector is immutable). */}}
{{- define "cftunnel.selectorLabels" -}}
app.kubernetes.io/name: cftunnel
app.kubernetes.io/component: operator
{{- end }}

{{/* True in cert-manager mode. */}}
{{- define "cftunnel.certManager" -}}
{{- if eq .Values.certificates.mode "cert-manager" }}true{{ end }}
{{- end }}

{{/* cert-manager's CA-injection annotation, in cert-manager mode. */}}
{{- define "cftunnel.injectCA" -}}
{{- if include "cftunnel.certManager" . }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/cftunnel-webhook
{{- end }}
{{- end }}
