// What Stateward is doing and why it waits, as one JSON-stable report built
// by a pure function from the objects a client can list. The CLI
// (`stateward status`), the kubectl plugin and the operator's web view all
// render this same report; the rollout part reuses the rollout planner, so
// the reason shown is the reason the operator acts on.
//
// The schema is versioned (apiVersion stateward.dev/v1, kind Status): fields
// may be added, never renamed or removed without a new version; a test pins it.
import type { SetSummary } from '../rollout/planner.ts';
import type { KubeObject, Lease, Node, Pod, StatefulSet } from '../runtime/kube/types.ts';
import type { GateReport } from '../rollout/healthcheck/healthgates.ts';
import type { RolloutTimeline } from '../rollout/rollouttimeline.ts';

export const STATUS_API_VERSION = 'stateward.dev/v1';

export interface StatusInput {
  /** Milliseconds since the epoch: every "remaining" figure is relative to it. */
  now: number;
  /** Namespaces to report, in order; objects of other namespaces are ignored. */
  namespaces: string[];
  statefulSets: StatefulSet[];
  pods: Pod[];
  /** ZoneAwarePodDisruptionBudgets (rollout-operator.grafana.com/v1). */
  zpdbs: KubeObject[];
  /** Leases: budget ledgers (label stateward.dev/zpdb-ledger) among others. */
  leases: Lease[];
  deployments: KubeObject[];
  daemonSets: KubeObject[];
  /** Metadata is enough (name, namespace): content is never needed. */
  configMaps: KubeObject[];
  secrets: KubeObject[];
  /** The operator's own per-group status (ConfigMap stateward-rollout-status), when readable. */
  operatorStatus?: KubeObject[];
  /**
   * The health gates' last reports by `<namespace>/<group>`, when the caller
   * holds them (the web view, in the operator); otherwise they are read from
   * the operator's status ConfigMap.
   */
  healthGates?: ReadonlyMap<string, GateReport>;
  /**
   * The groups' rollout timelines by `<namespace>/<group>`, when the caller
   * holds them (the web view, in the operator); otherwise they are read from
   * the operator's status ConfigMap.
   */
  timelines?: ReadonlyMap<string, RolloutTimeline>;
  /** Nodes, for the zone of each StatefulSet's pods (topology.kubernetes.io/zone), when readable. */
  nodes?: Node[];
  /**
   * Resources that could not be listed (plural names, e.g. "secrets"): what
   * depends on them is left out rather than guessed (a config is not called
   * missing when Secrets could not be read).
   */
  unreadable?: string[];
}

export interface StatusReport {
  apiVersion: typeof STATUS_API_VERSION;
  kind: 'Status';
  generatedAt: string;
  namespaces: NamespaceStatus[];
  /** StatusInput.unreadable: the report is partial without them. */
  unreadable?: string[];
}

export interface NamespaceStatus {
  namespace: string;
  groups: GroupStatusView[];
  budgets: BudgetView[];
  restarts: RestartView[];
}

export interface GroupStatusView {
  name: string;
  phase: 'complete' | 'rolling' | 'waiting' | 'blocked' | 'failing';
  /** What happens now, in words: e.g. "rolling ingester-zone-b: deleting ingester-zone-b-2", "idle". */
  action: string;
  waitReason?: { code: string; statefulSet?: string; message: string };
  blocked?: string;
  /** The StatefulSet being rolled, if any. */
  rolling?: string;
  /** What the operator last published for this group (its status ConfigMap), when readable. */
  operator?: { phase: string; since: string; waitCode?: string };
  /** The health gate of the next StatefulSet, as the operator last evaluated it (only the operator queries Prometheus). */
  healthGate?: GateReport;
  /** The group's last rollout, StatefulSet by StatefulSet, as the operator recorded it (src/rollout/rollouttimeline.ts). */
  timeline?: RolloutTimeline;
  /** For a blocked group: what `stateward doctor` says to do about it (its fix, with the finding's code). */
  fixes?: { code: string; object: string; fix: string }[];
  warnings: string[];
  /** In the order the group rolls them. */
  statefulSets: StatefulSetRow[];
}

export interface PodCell {
  name: string;
  ordinal: number;
  /** On the StatefulSet's update revision. */
  updated: boolean;
  ready: boolean;
  terminating: boolean;
  /** e.g. CrashLoopBackOff, when stuck. */
  stuckReason?: string;
}

/** The planner's per-StatefulSet summary, as the report shows it. */
export interface StatefulSetRow extends SetSummary {
  /** topology zone of the pods' nodes or the zone label, when known. */
  zone?: string;
  currentRevision?: string;
  updateRevision?: string;
  /** Every pod by ordinal, missing ones left out: the zones × pods grid of the web view. */
  podGrid: PodCell[];
  scaling?: ScalingView;
}

export interface ScalingView {
  /** grafana.com/rollout-downscale-leader. */
  leader?: string;
  /** Mirrored reference resource, "Kind/name". */
  mirrorOf?: string;
  /** Replicas the coordination wants now, when it differs from spec.replicas. */
  desiredReplicas?: number;
  /** Why the desired replicas are not applied yet (min-time, leader not ready, …). */
  holdReason?: string;
  lastDownscale?: string;
  minTimeBetweenZonesDownscale?: string;
  minTimeRemainingMs?: number;
  delayedDownscale?: { delay: string; prepareUrl: string };
  errors: string[];
}

export interface BudgetView {
  name: string;
  /** "1" or "10%". */
  maxUnavailable: string;
  mode: 'zone' | 'partition';
  matchedStatefulSets: string[];
  /** Allowed evictions the caches do not yet show gone (from the ledger). */
  pendingEvictions: { pod: string; allowedAt: string }[];
  /** Invalid budgets are reported, not used. */
  error?: string;
  /** e.g. an unreadable ledger. */
  warnings?: string[];
}

export interface RestartView {
  kind: 'Deployment' | 'StatefulSet' | 'DaemonSet';
  name: string;
  /** The opt-ins in effect (xing, Reloader auto, …). */
  optIns: string[];
  configs: string[];
  missingConfigs: string[];
  lastRestart?: string;
  /** OnDelete workloads: pods not on the latest template. */
  outdatedPods?: number;
  mode: 'rolling' | 'rollout-group' | 'standalone-ondelete';
  /** Malformed or unsupported opt-in annotations. */
  warnings?: string[];
}
