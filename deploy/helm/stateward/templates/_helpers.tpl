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
{{- /* Every profile (the flags', the Strimzi one, the file's) is served at /admission/reschedule-on-eviction; the namespaces opted in by label reach the file's there. */ -}}
{{- if or .Values.reschedule.enabled .Values.reschedule.profiles }}{{ $files = append $files "reschedule-on-eviction" }}{{ end -}}
{{- if .Values.reschedule.strimzi.enabled }}{{ $files = append $files "strimzi-drain-cleaner" }}{{ end -}}
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
{{- if include "stateward.rescheduleOn" . }}{{ $f = append $f "reschedule" }}{{ end -}}
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
{{- /* Only those it installs: the reschedule feature names Strimzi's configuration too, installed with reschedule.strimzi.enabled only. */ -}}
{{- $keep := true -}}
{{- if and (has "admissionregistration.k8s.io" $rule.apiGroups) $rule.resourceNames -}}
{{- $installed := include "stateward.webhookNames" $root | fromJsonArray -}}
{{- $names := list -}}
{{- range $n := $rule.resourceNames }}{{ $name := include "stateward.webhookName" (list $root $n) }}{{ if has $name $installed }}{{ $names = append $names $name }}{{ end }}{{ end -}}
{{- /* Never a rule without names: that would grant patch on every configuration. */ -}}
{{- $keep = gt (len $names) 0 -}}
{{- $rule = merge (dict "resourceNames" $names) (omit $rule "resourceNames") -}}
{{- end -}}
{{- if and $keep (not (has $rule $rules)) }}{{ $rules = append $rules $rule }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{ toJson $rules }}
{{- end }}

{{/* "true" when any reschedule profile is configured: the flags' (Couchbase), the Strimzi one, or the file's. */}}
{{- define "stateward.rescheduleOn" -}}
{{- if or .Values.reschedule.enabled .Values.reschedule.strimzi.enabled .Values.reschedule.profiles }}true{{ end -}}
{{- end }}

{{/* The profiles file of reschedule.profiles (-reschedule.profiles-file's format). */}}
{{- define "stateward.rescheduleProfiles" -}}
{{ toYaml (dict "profiles" .Values.reschedule.profiles) }}
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
{{- if and .Values.reschedule.strimzi.enabled (not .Values.webhooks.enabled) -}}
{{- fail "reschedule.strimzi.enabled needs webhooks.enabled=true (Strimzi Drain Cleaner's /drainer webhook is served over the webhooks' HTTPS server)" -}}
{{- end -}}
{{- if and .Values.reschedule.profiles (not .Values.webhooks.enabled) -}}
{{- fail "reschedule.profiles needs webhooks.enabled=true (the profiles are served by the reschedule webhook, over the webhooks' HTTPS server)" -}}
{{- end -}}
{{- if not (has (int .Values.reschedule.strimzi.denyCode) (list 429 500)) -}}
{{- fail (printf "reschedule.strimzi.denyCode is %v: 429 (drains wait for the pod to move) or 500 (as Drain Cleaner: the drain fails and is run again)" .Values.reschedule.strimzi.denyCode) -}}
{{- end -}}
{{- end }}
