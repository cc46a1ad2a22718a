{{/* Names and labels shared by every template. */}}

{{- define "crimsonbench.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release> when it contains the chart name, else <release>-<chart>. */}}
{{- define "crimsonbench.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 54 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 54 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The operator's objects: Deployment, ServiceAccount, RBAC, Service (<fullname>-operator). */}}
{{- define "crimsonbench.operatorName" -}}
{{- printf "%s-operator" (include "crimsonbench.fullname" .) -}}
{{- end -}}

{{- define "crimsonbench.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "crimsonbench.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "crimsonbench.selectorLabels" -}}
app.kubernetes.io/name: {{ include "crimsonbench.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "crimsonbench.labels" -}}
{{ include "crimsonbench.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: crimsonbench
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The `release` label kube-prometheus-stack selects on, plus the object's own labels. */}}
{{- define "crimsonbench.monitoringLabels" -}}
{{- with .root.Values.metrics.prometheusRelease }}
release: {{ . | quote }}
{{- end }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "crimsonbench.peering" -}}
{{- if gt (int .Values.replicas) 1 -}}
{{- default (include "crimsonbench.fullname" .) .Values.kopf.peeringName -}}
{{- end -}}
{{- end -}}

{{/* An image by digest (immutable) when one is given, else by its version tag; the
schema refuses `latest`, so a node never runs whatever it last pulled under a name. */}}
{{- define "crimsonbench.image" -}}
{{- if .digest -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository (default .appVersion .tag) -}}
{{- end -}}
{{- end -}}

{{/* kopf run's arguments (the container command is kopf, or a shell for the priority). */}}
{{- define "crimsonbench.kopfArgs" -}}
- run
- -m
- crimsonbench.controller.main
{{- if .Values.watchNamespace }}
- --namespace={{ .Values.watchNamespace }}
{{- else }}
- --all-namespaces
{{- end }}
{{- with include "crimsonbench.peering" . }}
- --peering={{ . }}
{{- else }}
- --standalone
{{- end }}
- --liveness=http://0.0.0.0:{{ .Values.health.port }}/healthz
- --log-format={{ .Values.kopf.logFormat }}
{{- if .Values.kopf.verbose }}
- --verbose
{{- end }}
{{- range .Values.kopf.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
The trust boundary (values `targets`), as JSON lists of namespaces, in the order
crimsonbench.plan.target.TargetPolicy lists them:
rookNamespaces: where the listed CephClusters are; jobNamespaces: those and
targets.externalNamespaces (a run's Jobs run there); runNamespaces: each cluster's own
namespace and its allowedNamespaces, and targets.externalNamespaces (runs may live there).
*/}}
{{- define "crimsonbench.rookNamespaces" -}}
{{- $out := list -}}
{{- range .Values.targets.rook -}}
{{- $out = append $out (first (splitList "/" .cephCluster)) -}}
{{- end -}}
{{- toJson (uniq $out) -}}
{{- end -}}

{{- define "crimsonbench.jobNamespaces" -}}
{{- $out := include "crimsonbench.rookNamespaces" . | fromJsonArray -}}
{{- $out = concat $out .Values.targets.externalNamespaces -}}
{{- toJson (uniq $out) -}}
{{- end -}}

{{- define "crimsonbench.runNamespaces" -}}
{{- $out := list -}}
{{- range .Values.targets.rook -}}
{{- $out = append $out (first (splitList "/" .cephCluster)) -}}
{{- $out = concat $out (.allowedNamespaces | default list) -}}
{{- end -}}
{{- $out = concat $out .Values.targets.externalNamespaces -}}
{{- toJson (uniq $out) -}}
{{- end -}}

{{/* A Role and its RoleBinding: dict root, name, namespace, rules (text), what (comment). */}}
{{- define "crimsonbench.role" }}
---
# {{ .what }}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "crimsonbench.labels" .root | nindent 4 }}
rules:
  {{- .rules | indent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "crimsonbench.labels" .root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "crimsonbench.serviceAccountName" .root }}
    namespace: {{ .root.Release.Namespace }}
{{- end }}
