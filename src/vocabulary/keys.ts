// Every label and annotation key Stateward reads or writes, in one place, with
// the exact names of the systems it stands in for. Capabilities import keys
// from here, never from each other, so one key has one definition.

// ---------------------------------------------------------- rollout-operator

/** The label that puts StatefulSets into one rollout group. */
export const ROLLOUT_GROUP_LABEL = 'rollout-group';
/** How many pods of a StatefulSet may be unavailable during a rollout (`N` or `P%`). */
export const MAX_UNAVAILABLE_ANNOTATION = 'rollout-max-unavailable';
export const PAUSED_ANNOTATION = 'grafana.com/rollout-paused';

export const NO_DOWNSCALE_LABEL_KEY = 'grafana.com/no-downscale';
export const NO_DOWNSCALE_LABEL_VALUE = 'true';

export const PREPARE_DOWNSCALE_LABEL_KEY = 'grafana.com/prepare-downscale';
export const PREPARE_DOWNSCALE_LABEL_VALUE = 'true';
export const PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY = 'grafana.com/prepare-downscale-http-path';
export const PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY = 'grafana.com/prepare-downscale-http-port';
/** Pods of a StatefulSet are found by this pod-template label (rollout-operator's rule, issue #15). */
export const POD_NAME_LABEL_KEY = 'name';

/**
 * A Go duration on a StatefulSet, read from its annotations first and, when
 * no annotation is set, from its labels: rollout-operator v0.39 (#463) made
 * it an annotation (it is configuration, never a selector) and keeps the
 * label as a deprecated fallback. Read it only through minTimeSetting()
 * (src/downscale/mintime.ts), which holds that precedence in one place.
 */
export const MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY = 'grafana.com/min-time-between-zones-downscale';
export const LAST_DOWNSCALE_ANNOTATION_KEY = 'grafana.com/last-downscale';

export const DOWNSCALE_LEADER_ANNOTATION_KEY = 'grafana.com/rollout-downscale-leader';
export const UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY = 'grafana.com/rollout-upscale-only-when-leader-ready';
export const FORCE_REPLICAS_ANNOTATION_KEY = 'grafana.com/rollout-force-replicas';
export const MIRROR_NAME_ANNOTATION_KEY = 'grafana.com/rollout-mirror-replicas-from-resource-name';
export const MIRROR_KIND_ANNOTATION_KEY = 'grafana.com/rollout-mirror-replicas-from-resource-kind';
export const MIRROR_API_VERSION_ANNOTATION_KEY = 'grafana.com/rollout-mirror-replicas-from-resource-api-version';
export const MIRROR_WRITE_BACK_ANNOTATION_KEY = 'grafana.com/rollout-mirror-replicas-from-resource-write-back';
export const DELAYED_DOWNSCALE_ANNOTATION_KEY = 'grafana.com/rollout-delayed-downscale';
export const DELAYED_DOWNSCALE_URL_ANNOTATION_KEY = 'grafana.com/rollout-prepare-delayed-downscale-url';

/** When a pod last became Ready and running; rollout-operator's pod observer writes it, Stateward only reads it. */
export const READY_TIME_ANNOTATION = 'grafana.com/ready-time';

/** Webhook configurations whose caBundle the operator keeps current. */
export const INJECT_LABEL = 'grafana.com/inject-rollout-operator-ca';
export const NAMESPACE_LABEL = 'grafana.com/namespace';

// ---------------------------------------------------------------- Kubernetes

export const ZONE_LABEL = 'topology.kubernetes.io/zone';

// --------------------------------------------- xing deployment-restart-controller

export const XING_ENABLED_ANNOTATION = 'com.xing.deployment-restart';
export const XING_ENABLED_VALUE = 'enabled';
export const XING_CHECKSUMS_ANNOTATION = 'com.xing.deployment-restart.applied-config-checksums';
export const XING_TIMESTAMP_ANNOTATION = 'com.xing.deployment-restart.timestamp';

// ---------------------------------------------------------- stakater/Reloader

export const RELOADER_AUTO_ANNOTATION = 'reloader.stakater.com/auto';
export const RELOADER_CONFIGMAP_AUTO_ANNOTATION = 'configmap.reloader.stakater.com/auto';
export const RELOADER_SECRET_AUTO_ANNOTATION = 'secret.reloader.stakater.com/auto';
export const RELOADER_CONFIGMAP_RELOAD_ANNOTATION = 'configmap.reloader.stakater.com/reload';
export const RELOADER_SECRET_RELOAD_ANNOTATION = 'secret.reloader.stakater.com/reload';
export const RELOADER_CONFIGMAP_EXCLUDE_ANNOTATION = 'configmaps.exclude.reloader.stakater.com/reload';
export const RELOADER_SECRET_EXCLUDE_ANNOTATION = 'secrets.exclude.reloader.stakater.com/reload';
export const RELOADER_SEARCH_ANNOTATION = 'reloader.stakater.com/search';
export const RELOADER_MATCH_ANNOTATION = 'reloader.stakater.com/match';
export const RELOADER_IGNORE_ANNOTATION = 'reloader.stakater.com/ignore';

// ----------------------------------------------------------------- Stateward

/** On a standalone OnDelete StatefulSet: `evict` replaces its outdated pods one at a time through the Eviction API. */
export const EVICT_ONDELETE_ANNOTATION = 'stateward.dev/config-restart-ondelete';
/**
 * On a workload, a Namespace, or a ConfigMap/Secret: `"true"` pauses config restarts of the workloads it covers
 * (that workload; every workload of the namespace; every workload watching that config). Changes are not lost:
 * the applied record is not advanced while paused, so lifting the pause restarts once if anything changed.
 */
export const CONFIG_RESTART_PAUSED_ANNOTATION = 'stateward.dev/config-restart-paused';
/** On a workload: a label selector; the ConfigMaps (Secrets) of its namespace it matches are watched, referenced or not. */
export const CONFIG_RESTART_CONFIGMAP_SELECTOR_ANNOTATION = 'stateward.dev/config-restart-configmap-selector';
export const CONFIG_RESTART_SECRET_SELECTOR_ANNOTATION = 'stateward.dev/config-restart-secret-selector';
/** A ZPDB ledger Lease: the label that finds them, the annotation holding the pending evictions. */
export const LEDGER_LABEL = 'stateward.dev/zpdb-ledger';
export const LEDGER_ANNOTATION = 'stateward.dev/pending-evictions';

// ------------------------------------------ health-gated rollouts (rollout-operator PR #469)

/** On a StatefulSet: the RolloutHealthCheck (same namespace) that gates its start. */
export const HEALTH_CHECK_ANNOTATION = 'grafana.com/rollout-health-check';
/** On a StatefulSet: when it started rolling; the group's earliest current one is the baseline time. */
export const HEALTH_CHECK_STARTED_AT_ANNOTATION = 'grafana.com/rollout-health-check-started-at';
/** Stateward's companion of the stamp: the updateRevision it was written for, so a stamp left by an earlier rollout never counts. */
export const HEALTH_CHECK_STARTED_REVISION_ANNOTATION = 'stateward.dev/rollout-health-check-revision';
/** On a StatefulSet: an RFC 3339 time until which its start may bypass a failing health gate (once, logged, an Event). */
export const HEALTH_CHECK_BYPASS_ANNOTATION = 'stateward.dev/rollout-health-check-bypass-until';
