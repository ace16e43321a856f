// Every Kubernetes permission Stateward needs, by feature and by where it
// applies. The one source of truth for RBAC: deploy/generate.ts renders it
// into the kustomize components and the Helm chart's data file, a test fails
// when those are stale, and the least-privilege e2e test runs the operator
// under exactly what is rendered. Each rule says why it exists, so a
// reviewer can check it against the code that makes the call.

/**
 * Where a rule applies:
 *  - managed: every namespace Stateward manages (its own in namespaced mode;
 *    the whole cluster with -kubernetes.watch-namespaces=*),
 *  - own: the operator's own namespace only (its Secrets and Leases),
 *  - cluster: cluster-scoped resources.
 */
export type Scope = 'managed' | 'own' | 'cluster';

export interface Rule {
  scope: Scope;
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
  why: string;
}

/** Features an install turns on; `rollouts` is always on. */
export const FEATURES = [
  'rollouts',
  'leader-election',
  'webhooks',
  'reschedule',
  'config-restarts',
  'namespace-selector',
] as const;
export type Feature = (typeof FEATURES)[number];

// Defaults of the flags naming these objects; an install that changes one of
// the flags must extend its RBAC (documented in docs/getting-started.md).
export const LEADER_LEASE = 'stateward-leader';
export const CERTIFICATE_SECRET = 'rollout-operator-self-signed-certificate';
export const CHECKSUM_KEY_SECRET = 'stateward-config-checksum-key';
/** Not a flag: src/rollout/status.ts STATUS_CONFIGMAP. */
export const ROLLOUT_STATUS_CONFIGMAP = 'stateward-rollout-status';
export const ZONE_TRACKER_CONFIGMAP = 'rollout-operator-zone-tracker';
export const RESCHEDULE_TRACKING_CONFIGMAP = 'stateward-reschedule-tracking';

/**
 * The webhook configurations the overlays and the chart ship (deploy/kustomize/components/{webhooks,reschedule}),
 * the only ones CA injection may patch; the overlays and the chart pass the same names to
 * -webhooks.ca-bundle-configurations. The chart suffixes each with `-<release namespace>`.
 */
export const WEBHOOK_CONFIGURATIONS = {
  validating: ['stateward-no-downscale', 'stateward-pod-eviction', 'stateward-zpdb-validation'],
  mutating: ['stateward-prepare-downscale'],
} as const;
export const RESCHEDULE_WEBHOOK_CONFIGURATION = 'stateward-reschedule-on-eviction';
/**
 * Strimzi Drain Cleaner's configuration (/drainer), shipped by the strimzi-drain-cleaner component and the chart's
 * reschedule.strimzi values; part of the reschedule feature, whose Strimzi profile it serves. Not in
 * caBundleConfigurations: the overlays do not ship it (the component passes its own flag).
 */
export const STRIMZI_WEBHOOK_CONFIGURATION = 'stateward-strimzi-drain-cleaner';

/** -webhooks.ca-bundle-configurations of an install: the shipped configurations of its features. */
export function caBundleConfigurations(features: readonly Feature[]): string[] {
  if (!features.includes('webhooks')) return [];
  return [
    ...WEBHOOK_CONFIGURATIONS.validating,
    ...WEBHOOK_CONFIGURATIONS.mutating,
    ...(features.includes('reschedule') ? [RESCHEDULE_WEBHOOK_CONFIGURATION] : []),
  ];
}

// Why some verbs stay without resourceNames (Kubernetes forces it):
const CREATE_BY_NAME = 'create cannot be limited by resourceNames: the name is not in the request URL';

export const PERMISSIONS: Record<Feature, Rule[]> = {
  rollouts: [
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['pods'],
      verbs: ['get', 'list', 'watch', 'delete'],
      why: 'cache pods; delete them to roll a group (uid-preconditioned)',
    },
    {
      scope: 'managed',
      apiGroups: ['apps'],
      resources: ['statefulsets'],
      verbs: ['get', 'list', 'watch', 'patch'],
      why: 'cache StatefulSets; patch spec.replicas (leader/follower, mirroring) and the health-check start stamp',
    },
    {
      scope: 'managed',
      apiGroups: ['apps'],
      resources: ['statefulsets/status'],
      verbs: ['update'],
      why: 'advance status.currentRevision once a StatefulSet is rolled',
    },
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['create'],
      why: `create the rollout status ConfigMap ${ROLLOUT_STATUS_CONFIGMAP} (${CREATE_BY_NAME})`,
    },
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['patch'],
      resourceNames: [ROLLOUT_STATUS_CONFIGMAP],
      why: 'rewrite the rollout status ConfigMap (one JSON Patch per write, no read), and no other',
    },
    {
      scope: 'managed',
      apiGroups: ['events.k8s.io'],
      resources: ['events'],
      verbs: ['create', 'patch'],
      why: 'Events on the objects acted on (patch folds repeats into a series)',
    },
    {
      scope: 'managed',
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs: ['get', 'list', 'watch', 'create', 'update'],
      why: 'zone-aware budget ledgers: rolling deletes and evictions commit to them. Not by name: each is named after its budget (`stateward-zpdb-<budget>-<hash>`), and list/watch cannot be limited by name. Never deleted',
    },
    {
      scope: 'managed',
      apiGroups: ['rollout-operator.grafana.com'],
      resources: ['zoneawarepoddisruptionbudgets'],
      verbs: ['get', 'list', 'watch'],
      why: 'rolling deletes ask the zone-aware budgets first',
    },
    {
      scope: 'managed',
      apiGroups: ['rollout-operator.grafana.com'],
      resources: ['rollouthealthchecks'],
      verbs: ['get', 'list', 'watch'],
      why: 'health-gated rollouts: the RolloutHealthChecks a StatefulSet names (the Secrets holding their query credentials are granted per Secret by the user, see docs/health-gates.md)',
    },
    {
      scope: 'managed',
      apiGroups: ['rollout-operator.grafana.com'],
      resources: ['replicatemplates/scale'],
      verbs: ['get'],
      why: 'mirror replicas from a ReplicaTemplate (other mirrored kinds need get on <plural>/scale too)',
    },
    {
      scope: 'managed',
      apiGroups: ['rollout-operator.grafana.com'],
      resources: ['replicatemplates/status'],
      verbs: ['patch'],
      why: 'write-back of status.replicas to a ReplicaTemplate',
    },
  ],
  'leader-election': [
    {
      scope: 'own',
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs: ['create'],
      why: `create the leader Lease (${CREATE_BY_NAME})`,
    },
    {
      scope: 'own',
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs: ['get', 'update'],
      resourceNames: [LEADER_LEASE],
      why: 'hold, renew and release the leader Lease',
    },
  ],
  webhooks: [
    {
      scope: 'own',
      apiGroups: [''],
      resources: ['secrets'],
      verbs: ['create'],
      why: `store the self-signed certificate the first time (${CREATE_BY_NAME})`,
    },
    {
      scope: 'own',
      apiGroups: [''],
      resources: ['secrets'],
      verbs: ['get', 'update'],
      resourceNames: [CERTIFICATE_SECRET],
      why: 'read and renew the self-signed certificate',
    },
    {
      scope: 'own',
      apiGroups: [''],
      resources: ['secrets'],
      verbs: ['list', 'watch'],
      resourceNames: [CERTIFICATE_SECRET],
      why: 'notice the certificate Secret changed or deleted by someone else (names only, through a metadata.name field selector)',
    },
    {
      scope: 'cluster',
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['validatingwebhookconfigurations', 'mutatingwebhookconfigurations'],
      verbs: ['list', 'watch'],
      why: 'watch the configurations labelled for this operator (CA injection, failure-policy metric); list/watch cannot be limited by name',
    },
    {
      scope: 'cluster',
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['validatingwebhookconfigurations'],
      verbs: ['patch'],
      resourceNames: [...WEBHOOK_CONFIGURATIONS.validating],
      why: 'inject the CA into the shipped configurations only (-webhooks.ca-bundle-configurations names them)',
    },
    {
      scope: 'cluster',
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['mutatingwebhookconfigurations'],
      verbs: ['patch'],
      resourceNames: [...WEBHOOK_CONFIGURATIONS.mutating],
      why: 'inject the CA into the shipped prepare-downscale configuration only',
    },
    {
      scope: 'managed',
      apiGroups: ['apps'],
      resources: ['deployments', 'replicasets'],
      verbs: ['get', 'list', 'watch'],
      why: 'no-downscale: cache the labels of Deployments and ReplicaSets (metadata only), the parents of /scale requests; get reads one not cached yet',
    },
    {
      scope: 'managed',
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs: ['get', 'create', 'update'],
      why: 'prepare-downscale: the per-group lock Lease, released by clearing its holder (no delete), and each downscale recorded on it before it is allowed (annotation `stateward.dev/last-downscales`). Not by name: it is named after the rollout-group label (`stateward-downscale-<group>-<hash>`)',
    },
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['create'],
      why: `prepare-downscale: create the zone tracker ConfigMap with -use-zone-tracker (${CREATE_BY_NAME})`,
    },
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['get', 'update'],
      resourceNames: [ZONE_TRACKER_CONFIGMAP],
      why: 'prepare-downscale: read and record in the zone tracker ConfigMap (-zone-tracker.config-map-name), and no other',
    },
  ],
  reschedule: [
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['pods'],
      verbs: ['patch'],
      why: 'annotate a pod its operator should move (cao.couchbase.com/reschedule)',
    },
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['create'],
      why: `create the tracking ConfigMap ${RESCHEDULE_TRACKING_CONFIGMAP} (${CREATE_BY_NAME})`,
    },
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['get', 'patch'],
      resourceNames: [RESCHEDULE_TRACKING_CONFIGMAP],
      why: 'read and write tracking records (-reschedule.tracking-config-map), and no other ConfigMap',
    },
    {
      scope: 'cluster',
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['validatingwebhookconfigurations'],
      verbs: ['patch'],
      resourceNames: [RESCHEDULE_WEBHOOK_CONFIGURATION, STRIMZI_WEBHOOK_CONFIGURATION],
      why: 'inject the CA into the shipped reschedule-on-eviction and strimzi-drain-cleaner (/drainer) configurations only',
    },
    {
      scope: 'cluster',
      apiGroups: [''],
      resources: ['nodes'],
      verbs: ['get'],
      why: 'a tracking record never releases a pod on a cordoned or draining node',
    },
  ],
  'config-restarts': [
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['configmaps', 'secrets'],
      verbs: ['list', 'watch'],
      why: 'watch configs; each is hashed as it is decoded and only its checksum cached (no GETs)',
    },
    {
      scope: 'managed',
      apiGroups: ['apps'],
      resources: ['deployments', 'daemonsets'],
      verbs: ['list', 'watch', 'patch'],
      why: "cache opted-in workloads; one patch records checksums and restarts (and a pause-period's pause and resume)",
    },
    {
      scope: 'managed',
      apiGroups: ['apps'],
      resources: ['statefulsets'],
      verbs: ['patch'],
      why: 'restart StatefulSets (already granted by rollouts)',
    },
    {
      scope: 'managed',
      apiGroups: [''],
      resources: ['pods/eviction'],
      verbs: ['create'],
      why: 'evict outdated pods of opted-in OnDelete workloads one at a time',
    },
    {
      scope: 'managed',
      apiGroups: ['secrets-store.csi.x-k8s.io'],
      resources: ['secretproviderclasspodstatuses', 'secretproviderclasses'],
      verbs: ['list', 'watch'],
      why: 'with --enable-csi-integration: the versions each pod mounted (statuses, digested), and ignore/match on classes (metadata only); optional, an install without them still starts',
    },
    {
      scope: 'managed',
      apiGroups: ['batch'],
      resources: ['cronjobs'],
      verbs: ['list', 'watch', 'patch'],
      why: 'cache opted-in CronJobs; patch records the checksums (and the Job it started) after a restart',
    },
    {
      scope: 'managed',
      apiGroups: ['batch'],
      resources: ['jobs'],
      verbs: ['list', 'watch', 'create', 'delete', 'patch'],
      why: 'cache opted-in Jobs; create starts a Job from a CronJob or re-creates a Job; delete (uid-preconditioned) removes the Job being re-created; patch records checksums and sets or lifts the finalizer that holds it until then',
    },
    {
      scope: 'managed',
      apiGroups: ['argoproj.io'],
      resources: ['rollouts'],
      verbs: ['list', 'watch', 'patch'],
      why: 'cache opted-in Argo Rollouts when the CRD is installed (optional: without it or this rule, none are cached); one patch records checksums and restarts (template or spec.restartAt)',
    },
    {
      // Managed, not cluster: it is read cluster-wide only, where managed rules are a ClusterRole; a
      // listed-namespaces install stays on Roles (no ClusterRole) and reads no Namespace (docs/restarts.md).
      scope: 'managed',
      apiGroups: [''],
      resources: ['namespaces'],
      verbs: ['list', 'watch'],
      why: 'cluster-wide: cache Namespaces (metadata only) for stateward.dev/config-restart-paused; optional, without it no namespace is paused',
    },
    {
      scope: 'own',
      apiGroups: [''],
      resources: ['secrets'],
      verbs: ['create'],
      why: `create the checksum HMAC key Secret the first time (${CREATE_BY_NAME})`,
    },
    {
      scope: 'own',
      apiGroups: [''],
      resources: ['secrets'],
      verbs: ['get'],
      resourceNames: [CHECKSUM_KEY_SECRET],
      why: 'read the checksum HMAC key',
    },
  ],
  // -kubernetes.namespace-selector (docs/multiple-installs.md): installs that split one cluster.
  'namespace-selector': [
    {
      scope: 'cluster',
      apiGroups: [''],
      resources: ['namespaces'],
      verbs: ['list', 'watch'],
      why: '-kubernetes.namespace-selector: cache the names of the namespaces whose labels match it (metadata only, the selector applied by the API server), so objects of no other namespace are acted on',
    },
  ],
};

export type KubeRule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };

/** The rules of `features` for one scope, as Kubernetes PolicyRules (equal rules merged, order kept). */
export function policyRules(features: readonly Feature[], scopes: readonly Scope[]): KubeRule[] {
  const out: KubeRule[] = [];
  const seen = new Set<string>();
  for (const feature of FEATURES) {
    if (!features.includes(feature)) continue;
    for (const rule of PERMISSIONS[feature]) {
      if (!scopes.includes(rule.scope)) continue;
      const kube: KubeRule = {
        apiGroups: rule.apiGroups,
        resources: rule.resources,
        verbs: rule.verbs,
        ...(rule.resourceNames ? { resourceNames: rule.resourceNames } : {}),
      };
      const key = JSON.stringify(kube);
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(kube);
    }
  }
  return out;
}

// ------------------------------------------------------------ the write policy
//
// RBAC cannot name what it cannot see: `create` carries no name in its URL,
// and the Leases Stateward keeps per budget and per rollout group are named
// after user objects, so cluster-wide the ServiceAccount may update every
// Lease (kube-system's leader elections included) and create ConfigMaps
// anywhere. A ValidatingAdmissionPolicy sees the object, so it holds the
// ServiceAccount's writes of these kinds to the names below.
// deploy/generate.ts renders it (deploy/kustomize/rbac/write-policy, the
// chart's files/write-policy.yaml).

/** Every Lease, ConfigMap and Secret Stateward names itself starts with this. */
export const NAME_PREFIX = 'stateward-';
/** Of src/drain/zpdb/ledger.ts ledgerName (a capability this one may not import: a test holds them equal). */
export const ZPDB_LEDGER_PREFIX = 'stateward-zpdb-';
/** Of src/downscale/prepare/handler.ts lockName (likewise). */
export const DOWNSCALE_LOCK_PREFIX = 'stateward-downscale-';

/** Names by prefix or exactly. */
export interface NameMatch {
  prefixes: readonly string[];
  names: readonly string[];
}

/** A kind Stateward writes, and the names it writes it under. */
export interface WrittenKind {
  apiGroup: string;
  /** The resource (plural), as in request.resource.resource. */
  resource: string;
  kind: string;
  /** In every namespace its RBAC reaches (the managed namespaces). */
  anywhere: NameMatch;
  /** In its own namespace only: the ServiceAccount's. */
  own: NameMatch;
  why: string;
}

const NONE: NameMatch = { prefixes: [], names: [] };

/**
 * The write policy's allow-list. The two names Stateward shares with
 * rollout-operator (its certificate Secret and zone tracker ConfigMap) are
 * allowed exactly: a drop-in keeps the objects rollout-operator left. Every
 * other name, those set by flags included, is allowed by prefix, so a flag
 * renamed within the prefix needs no change here.
 */
export const WRITTEN: readonly WrittenKind[] = [
  {
    apiGroup: 'coordination.k8s.io',
    resource: 'leases',
    kind: 'Lease',
    anywhere: { prefixes: [ZPDB_LEDGER_PREFIX, DOWNSCALE_LOCK_PREFIX], names: [] },
    own: { prefixes: [NAME_PREFIX], names: [] },
    why: `budget ledgers (\`${ZPDB_LEDGER_PREFIX}<budget>-<hash>\`) and prepare-downscale locks (\`${DOWNSCALE_LOCK_PREFIX}<group>-<hash>\`) where their workloads are; the leader Lease (-leader-election.lease-name, default ${LEADER_LEASE}) in its own namespace`,
  },
  {
    apiGroup: '',
    resource: 'configmaps',
    kind: 'ConfigMap',
    anywhere: { prefixes: [NAME_PREFIX], names: [ZONE_TRACKER_CONFIGMAP] },
    own: NONE,
    why: `the rollout status (${ROLLOUT_STATUS_CONFIGMAP}) and reschedule tracking (-reschedule.tracking-config-map, default ${RESCHEDULE_TRACKING_CONFIGMAP}) ConfigMaps, and the zone tracker under rollout-operator's name (-zone-tracker.config-map-name)`,
  },
  {
    apiGroup: '',
    resource: 'secrets',
    kind: 'Secret',
    anywhere: NONE,
    own: { prefixes: [NAME_PREFIX], names: [CERTIFICATE_SECRET] },
    why: `in its own namespace only: the checksum key (-config-restarts.checksum-key-secret, default ${CHECKSUM_KEY_SECRET}) and the certificate under rollout-operator's name (-server-tls.self-signed-cert.secret-name)`,
  },
];

/** The ServiceAccount the shipped manifests run Stateward as (deploy/kustomize/base, the chart). */
export const SERVICE_ACCOUNT = 'stateward';
