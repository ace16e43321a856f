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

{{/* A shipped webhook configuration's name in this release: suffixed with the namespace, so two installs never collide. */}}
{{- define "stateward.webhookName" -}}
{{- $root := index . 0 -}}
{{ printf "%s-%s" (index . 1) $root.Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The files of files/webhooks this release installs, as JSON. */}}
{{- define "stateward.webhookFiles" -}}
{{- $files := list -}}
{{- if .Values.webhooks.enabled }}{{ $files = concat $files (list "no-downscale" "prepare-downscale" "pod-eviction") }}{{ end -}}
{{- if .Values.reschedule.enabled }}{{ $files = append $files "reschedule-on-eviction" }}{{ end -}}
{{ toJson $files }}
{{- end }}

{{/* -webhooks.ca-bundle-configurations: the names of the configurations this release installs (templates/webhooks.yaml), as JSON. */}}
{{- define "stateward.webhookNames" -}}
{{- $names := list -}}
{{- range $file := include "stateward.webhookFiles" . | fromJsonArray }}
{{- range $doc := regexSplit "(?m)^---$" ($.Files.Get (printf "files/webhooks/%s.yaml" $file)) -1 }}
{{- $cfg := fromYaml $doc -}}
{{- if $cfg.kind }}{{ $names = append $names (include "stateward.webhookName" (list $ $cfg.metadata.name)) }}{{ end -}}
{{- end }}
{{- end }}
{{- toJson $names }}
{{- end }}

{{/*
The namespaces this install acts in, as a webhook namespaceSelector's
matchExpressions (JSON): the listed namespaces (or, narrowed by a selector,
the release namespace), the selector's terms and the ignored namespaces;
empty when nothing narrows the install's own namespace (or the whole
cluster), whose webhooks keep the shipped selectors.
*/}}
{{- define "stateward.scopeExpressions" -}}
{{- $e := list -}}
{{- $narrowed := or .Values.namespaceSelector.matchLabels .Values.namespaceSelector.matchExpressions .Values.namespacesToIgnore -}}
{{- if .Values.watchNamespaces -}}
{{- $e = append $e (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" .Values.watchNamespaces) -}}
{{- else if and $narrowed (not .Values.clusterWide) -}}
{{- /* Namespaced: still the release namespace only, narrowed further by the selector. */ -}}
{{- $e = append $e (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" (list .Release.Namespace)) -}}
{{- end -}}
{{- range $k, $v := (.Values.namespaceSelector.matchLabels | default dict) -}}
{{- $e = append $e (dict "key" $k "operator" "In" "values" (list $v)) -}}
{{- end -}}
{{- range $x := (.Values.namespaceSelector.matchExpressions | default list) -}}
{{- $e = append $e $x -}}
{{- end -}}
{{- if .Values.namespacesToIgnore -}}
{{- $e = append $e (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" .Values.namespacesToIgnore) -}}
{{- end -}}
{{ toJson $e }}
{{- end }}

{{/* namespaceSelector as the label selector string -kubernetes.namespace-selector takes ("" when none). */}}
{{- define "stateward.namespaceSelectorFlag" -}}
{{- $terms := list -}}
{{- range $k, $v := (.Values.namespaceSelector.matchLabels | default dict) -}}
{{- $terms = append $terms (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- range $x := (.Values.namespaceSelector.matchExpressions | default list) -}}
{{- if eq $x.operator "In" }}{{ $terms = append $terms (printf "%s in (%s)" $x.key (join "," $x.values)) }}
{{- else if eq $x.operator "NotIn" }}{{ $terms = append $terms (printf "%s notin (%s)" $x.key (join "," $x.values)) }}
{{- else if eq $x.operator "Exists" }}{{ $terms = append $terms $x.key }}
{{- else if eq $x.operator "DoesNotExist" }}{{ $terms = append $terms (printf "!%s" $x.key) }}
{{- else }}{{ fail (printf "namespaceSelector.matchExpressions: operator %q is not In, NotIn, Exists or DoesNotExist" $x.operator) }}
{{- end -}}
{{- end -}}
{{ join "," $terms }}
{{- end }}

{{/* The features whose permissions are granted, as in src/rbac/permissions.ts. */}}
{{- define "stateward.features" -}}
{{- $f := list "rollouts" -}}
{{- if .Values.leaderElection.enabled }}{{ $f = append $f "leader-election" }}{{ end -}}
{{- if .Values.webhooks.enabled }}{{ $f = append $f "webhooks" }}{{ end -}}
{{- if .Values.reschedule.enabled }}{{ $f = append $f "reschedule" }}{{ end -}}
{{- if .Values.configRestarts.enabled }}{{ $f = append $f "config-restarts" }}{{ end -}}
{{- if include "stateward.namespaceSelectorFlag" . }}{{ $f = append $f "namespace-selector" }}{{ end -}}
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
{{- /* The webhook configurations carry this release's names (stateward.webhookName). */ -}}
{{- if and (has "admissionregistration.k8s.io" $rule.apiGroups) $rule.resourceNames -}}
{{- $names := list -}}
{{- range $n := $rule.resourceNames }}{{ $names = append $names (include "stateward.webhookName" (list $root $n)) }}{{ end -}}
{{- $_ := set $rule "resourceNames" $names -}}
{{- end -}}
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
{{- if and .Values.clusterWide .Values.watchNamespaces -}}
{{- fail "clusterWide and watchNamespaces exclude each other: the whole cluster, or the namespaces listed" -}}
{{- end -}}
{{- if and .Values.reschedule.enabled (not .Values.webhooks.enabled) -}}
{{- fail "reschedule.enabled needs webhooks.enabled=true (the reschedule webhook is served over the webhooks' HTTPS server)" -}}
{{- end -}}
{{- end }}
