{{/* Name of every object of the release. */}}
{{- define "rmq-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rmq-operator.selectorLabels" -}}
app.kubernetes.io/name: rmq-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rmq-operator.labels" -}}
{{ include "rmq-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "rmq-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "rmq-operator.leaderElection" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicaCount) 1) -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{/* The CRD upgrade hook's labels: not the operator's selector labels, so neither the
operator's Service nor anything selecting the operator pods picks the hook's pod. */}}
{{- define "rmq-operator.crdHookLabels" -}}
app.kubernetes.io/name: rmq-operator-crds
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: crd-upgrade
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}
