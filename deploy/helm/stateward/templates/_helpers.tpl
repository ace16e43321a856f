{{- define "stateward.labels" -}}
app.kubernetes.io/name: stateward
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "stateward.selector" -}}
app.kubernetes.io/name: stateward
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Cluster-scoped objects carry the namespace: two installs never collide. */}}
{{- define "stateward.clusterName" -}}
{{ printf "%s-%s" .Release.Name .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The features whose permissions are granted, as in src/rbac/permissions.ts. */}}
{{- define "stateward.features" -}}
{{- $f := list "rollouts" -}}
{{- if .Values.leaderElection.enabled }}{{ $f = append $f "leader-election" }}{{ end -}}
{{- if .Values.webhooks.enabled }}{{ $f = append $f "webhooks" }}{{ end -}}
{{- if .Values.reschedule.enabled }}{{ $f = append $f "reschedule" }}{{ end -}}
{{- if .Values.configRestarts.enabled }}{{ $f = append $f "config-restarts" }}{{ end -}}
{{ toJson $f }}
{{- end }}

{{/* Rules of the enabled features for the given scopes, merged in order (see policyRules). */}}
{{- define "stateward.rules" -}}
{{- $root := index . 0 -}}
{{- $scopes := index . 1 -}}
{{- $rbac := $root.Files.Get "files/rbac.yaml" | fromYaml -}}
{{- $rules := list -}}
{{- range $feature := include "stateward.features" $root | fromJsonArray -}}
{{- range $scope := $scopes -}}
{{- range $rule := index (index $rbac $feature) $scope -}}
{{- if not (has $rule $rules) }}{{ $rules = append $rules $rule }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{ toJson $rules }}
{{- end }}

{{- define "stateward.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicas > 1 needs leaderElection.enabled=true: two replicas without an election would both act" -}}
{{- end -}}
{{- if and .Values.reschedule.enabled (not .Values.webhooks.enabled) -}}
{{- fail "reschedule.enabled needs webhooks.enabled=true (the reschedule webhook is served over the webhooks' HTTPS server)" -}}
{{- end -}}
{{- end }}
