// The planner's view of one rollout group: plain data distilled from the
// StatefulSets and pods in the informer caches, so the planner stays pure.
import type { Pod, StatefulSet } from '../runtime/kube/types.ts';
import { podsOf, podView, type PodView } from '../vocabulary/pods.ts';
import { isPaused } from './annotations.ts';
import {
  HEALTH_CHECK_ANNOTATION,
  HEALTH_CHECK_BYPASS_ANNOTATION,
  HEALTH_CHECK_STARTED_AT_ANNOTATION,
  HEALTH_CHECK_STARTED_REVISION_ANNOTATION,
  MAX_UNAVAILABLE_ANNOTATION,
} from '../vocabulary/keys.ts';
import type { GateVerdict } from './healthcheck/verdict.ts';
import { parseRfc3339 } from '../vocabulary/rfc3339.ts';
import { compareCodeUnits } from '../runtime/order.ts';

export interface StatefulSetView {
  name: string;
  namespace: string;
  uid: string;
  updateStrategy: string;
  /** spec.replicas (Kubernetes defaults it to 1). */
  replicas: number;
  statusReplicas: number;
  readyReplicas: number;
  currentRevision: string;
  updateRevision: string;
  /** metadata.generation: bumped by every spec change. */
  generation?: number;
  /** status.observedGeneration: the generation the StatefulSet controller's status describes. */
  observedGeneration?: number;
  maxUnavailableAnnotation?: string;
  paused: boolean;
  pods: PodView[];
  /** grafana.com/rollout-health-check: the RolloutHealthCheck gating this StatefulSet's start. */
  healthCheck?: string;
  /**
   * When this StatefulSet started rolling to its present updateRevision
   * (grafana.com/rollout-health-check-started-at, epoch ms). Set only when
   * the stamp was written for that revision: one left by an earlier
   * rollout does not count.
   */
  startedAt?: number;
  /** The stamp is there but not for this revision, or does not parse: the executor rewrites or clears it. */
  staleStamp?: boolean;
  /** stateward.dev/rollout-health-check-bypass-until, as written. */
  bypassUntil?: string;
}

export interface GroupSnapshot {
  namespace: string;
  group: string;
  statefulSets: StatefulSetView[];
  /** The health gate's verdicts by StatefulSet name, for the revision it would start (see planner's gateFor). */
  gates?: ReadonlyMap<string, GateVerdict>;
}

/** The health-check annotations of a StatefulSet, as the planner reads them. */
function healthCheckFields(set: StatefulSet): Partial<StatefulSetView> {
  const annotations = set.metadata?.annotations ?? {};
  const fields: Partial<StatefulSetView> = {};
  const check = annotations[HEALTH_CHECK_ANNOTATION];
  if (check !== undefined && check !== '') fields.healthCheck = check;
  const bypass = annotations[HEALTH_CHECK_BYPASS_ANNOTATION];
  if (bypass !== undefined) fields.bypassUntil = bypass;
  const stamp = annotations[HEALTH_CHECK_STARTED_AT_ANNOTATION];
  if (stamp !== undefined) {
    const at = parseRfc3339(stamp);
    const revision = annotations[HEALTH_CHECK_STARTED_REVISION_ANNOTATION];
    const updateRevision = set.status?.updateRevision ?? '';
    if (typeof at === 'number' && updateRevision !== '' && revision === updateRevision) fields.startedAt = at;
    else fields.staleStamp = true;
  }
  return fields;
}

export function statefulSetView(set: StatefulSet, pods: Pod[]): StatefulSetView {
  return {
    name: set.metadata?.name ?? '',
    namespace: set.metadata?.namespace ?? '',
    uid: set.metadata?.uid ?? '',
    updateStrategy: set.spec?.updateStrategy?.type ?? 'RollingUpdate',
    replicas: set.spec?.replicas ?? 1,
    statusReplicas: set.status?.replicas ?? 0,
    readyReplicas: set.status?.readyReplicas ?? 0,
    currentRevision: set.status?.currentRevision ?? '',
    updateRevision: set.status?.updateRevision ?? '',
    ...(set.metadata?.generation !== undefined ? { generation: set.metadata.generation } : {}),
    ...(set.status?.observedGeneration !== undefined ? { observedGeneration: set.status.observedGeneration } : {}),
    ...(set.metadata?.annotations?.[MAX_UNAVAILABLE_ANNOTATION] !== undefined
      ? { maxUnavailableAnnotation: set.metadata.annotations[MAX_UNAVAILABLE_ANNOTATION] }
      : {}),
    paused: isPaused(set.metadata?.annotations),
    ...healthCheckFields(set),
    pods: pods.map(podView).sort((a, b) => a.ordinal - b.ordinal || compareCodeUnits(a.name, b.name)),
  };
}

/**
 * The planner's snapshot of one rollout group: each of `sets` (the group's
 * StatefulSets of `namespace`) with its pods found among `candidatesOf(set)`
 * (those it controls plus orphans it selects, see podsOf). The controller
 * passes indexed lookups from its caches; `stateward status` passes every pod
 * it listed, so both plan on the same view.
 */
export function groupSnapshot(
  namespace: string,
  group: string,
  sets: readonly StatefulSet[],
  candidatesOf: (set: StatefulSet) => Pod[],
): GroupSnapshot {
  return {
    namespace,
    group,
    statefulSets: sets.map((set) => statefulSetView(set, podsOf(set, candidatesOf(set)))),
  };
}
