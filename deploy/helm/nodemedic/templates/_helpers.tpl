{{/* Names, labels and selectors shared by every template. */}}

{{/* The chart's name, or nameOverride. */}}
{{- define "nodemedic.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride, else the release name when it already contains
the chart's name (release "nodemedic" gives nodemedic-detector, nodemedic-drainer, ...), else
"<release>-<chart>". Cluster-scoped objects (ClusterRoles, the webhook) carry it too, so two releases
never collide.
*/}}
{{- define "nodemedic.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nodemedic.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "detector"). */}}
{{- define "nodemedic.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodemedic.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The recommended labels of every object of one component. */}}
{{- define "nodemedic.labels" -}}
helm.sh/chart: {{ include "nodemedic.chart" .ctx }}
{{ include "nodemedic.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: nodemedic
{{- end }}

{{/* An image reference: (dict "ctx" $ "image" .Values.detector.image). The tag defaults to the appVersion. */}}
{{- define "nodemedic.image" -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .ctx.Chart.AppVersion | toString) }}
{{- end }}

{{- define "nodemedic.rulesConfigMap" -}}
{{- .Values.detector.rulesConfigMap | default (printf "%s-detector-rules" (include "nodemedic.fullname" .)) }}
{{- end }}

{{/*
"true" when the own-node policy is rendered: detector.ownNodeOnly true, or "auto" (the default) on
Kubernetes 1.30+, where ValidatingAdmissionPolicy is GA and tokens carry the node-name claim.
*/}}
{{- define "nodemedic.ownNodeOnly" -}}
{{- $v := toString .Values.detector.ownNodeOnly }}
{{- if or (eq $v "true") (and (eq $v "auto") (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version)) }}true{{ end }}
{{- end }}

{{/*
"true" when the detector runs with its node's own credential (the kubelet's kubeconfig), as
deploy/kubelet-credential: detector.ownNodeOnly "kubelet", or "auto" (the default) before
Kubernetes 1.30, where the own-node policy cannot apply. Node authorization and NodeRestriction then
confine each detector to its own Node; cluster-wide mode is only ever an explicit false.
*/}}
{{- define "nodemedic.kubeletCredential" -}}
{{- $v := toString .Values.detector.ownNodeOnly }}
{{- if or (eq $v "kubelet") (and (eq $v "auto") (not (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version))) }}true{{ end }}
{{- end }}

{{/*
The keys of the NoExecute taints drainer.config names (problemTaints, afterDrainTaints), quoted for
the drainer's node policy: the only NoExecute taints its token may put on a Node.
*/}}
{{- define "nodemedic.noExecuteKeys" -}}
{{- $keys := list }}
{{- range (concat (.Values.drainer.config.problemTaints | default list) (.Values.drainer.config.afterDrainTaints | default list)) }}
{{- if hasSuffix ":NoExecute" . }}
{{- $keys = append $keys (printf "'%s'" (splitList "=" (trimSuffix ":NoExecute" .) | first)) }}
{{- end }}
{{- end }}
{{- join ", " ($keys | uniq) }}
{{- end }}
