{{/* The chart's name, or nameOverride. */}}
{{- define "pacer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride, else the release name
when it contains the chart's name, else "<release>-<name>". 52 characters at
most, so that "<prefix>-controller" stays a DNS label.
*/}}
{{- define "pacer.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := include "pacer.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The metrics Service's name, the longest: "<prefix>-controller-metrics" with
the prefix cut to 44 characters so that it stays within a DNS label's 63
(the other names keep their 52-character prefix, so no object of an
installed release is renamed).
*/}}
{{- define "pacer.metricsServiceName" -}}
{{- printf "%s-controller-metrics" (include "pacer.fullname" . | trunc 44 | trimSuffix "-") }}
{{- end }}

{{/* The controller's objects: Deployment, Service, ClusterRole, ... */}}
{{- define "pacer.controllerName" -}}
{{- printf "%s-controller" (include "pacer.fullname" .) }}
{{- end }}

{{- define "pacer.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "pacer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pacer
{{- end }}

{{- define "pacer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pacer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pacer.controllerLabels" -}}
{{ include "pacer.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "pacer.controllerSelectorLabels" -}}
{{ include "pacer.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "pacer.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pacer.controllerName" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pacer.leaseName" -}}
{{- default (include "pacer.controllerName" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/*
An image reference from {repository, tag, digest}: "repo:tag" (tag default
the appVersion), or with a digest "repo@sha256:..." so that every node runs
the same bytes whatever the tag points at later; a tag given with the digest
is kept for people ("repo:tag@sha256:..."): the runtime pulls by the digest.
*/}}
{{- define "pacer.imageRef" -}}
{{- $image := index . 0 -}}
{{- $appVersion := index . 1 -}}
{{- if $image.digest -}}
{{- if $image.tag -}}
{{- printf "%s:%s@%s" $image.repository $image.tag $image.digest -}}
{{- else -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- end -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default $appVersion $image.tag) -}}
{{- end -}}
{{- end }}

{{- define "pacer.image" -}}
{{- include "pacer.imageRef" (list .Values.image .Chart.AppVersion) }}
{{- end }}

{{- define "pacer.workerImage" -}}
{{- include "pacer.imageRef" (list .Values.workerImage .Chart.AppVersion) }}
{{- end }}
