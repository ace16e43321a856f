// The planner's view of one rollout group: plain data distilled from the
// StatefulSets and pods in the informer caches, so the planner stays pure.
import type { Pod, StatefulSet } from '../runtime/kube/types.ts';
import { isPaused, MAX_UNAVAILABLE_ANNOTATION } from './annotations.ts';

export interface PodView {
  name: string;
  uid: string;
  ordinal: number;
  /** controller-revision-hash; '' when missing. */
  revision: string;
  /** Phase Running, every container ready and running, not terminating (rollout-operator's test). */
  ready: boolean;
  terminating: boolean;
  /** Why it cannot start, when a container waits for a reason that will not clear by itself. */
  stuckReason?: string;
}

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
}

export interface GroupSnapshot {
  namespace: string;
  group: string;
  statefulSets: StatefulSetView[];
}

/** Container waiting reasons that mean "this pod will not become Ready without a new spec". */
export const STUCK_REASONS = new Set([
  'CrashLoopBackOff',
  'ImagePullBackOff',
  'ErrImagePull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);

export function podOrdinal(name: string): number {
  const match = /-(\d+)$/.exec(name);
  return match ? Number(match[1]) : Number.MAX_SAFE_INTEGER;
}

export function podView(pod: Pod): PodView {
  const status = pod.status;
  const terminating = Boolean(pod.metadata?.deletionTimestamp);
  const containers = status?.containerStatuses ?? [];
  const running = status?.phase === 'Running' && containers.length > 0 && containers.every((c) => c.ready && c.state?.running);
  // rollout-operator (IsPodRunningAndReady) reads the container statuses
  // only, which misses two ways a pod stops serving while its containers
  // still say ready: the node lifecycle controller sets Ready=False on the
  // pods of a node that stopped reporting, and readiness gates hold Ready at
  // False. Either way the pod is out of its Services, so another zone must
  // not be disrupted on its account. The Ready condition, when the pod has
  // one, must agree.
  const readyCondition = status?.conditions?.find((c) => c.type === 'Ready');
  const conditionAgrees = readyCondition === undefined || readyCondition.status === 'True';
  const waiting = [...(status?.initContainerStatuses ?? []), ...containers].map((c) => c.state?.waiting?.reason).find((r) => r !== undefined && STUCK_REASONS.has(r));
  return {
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    ordinal: podOrdinal(pod.metadata?.name ?? ''),
    revision: pod.metadata?.labels?.['controller-revision-hash'] ?? '',
    ready: running && conditionAgrees && !terminating,
    terminating,
    ...(waiting ? { stuckReason: waiting } : {}),
  };
}

function selectorMatches(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/**
 * A StatefulSet's pods: those it controls (ownerReference uid), plus orphans
 * its selector matches, which the StatefulSet controller is about to adopt.
 * No `name` label is needed (rollout-operator requires one, its issue #15).
 */
export function podsOf(set: StatefulSet, candidates: Pod[]): Pod[] {
  const uid = set.metadata?.uid;
  const selector = set.spec?.selector?.matchLabels;
  return candidates.filter((pod) => {
    const controller = pod.metadata?.ownerReferences?.find((r) => r.controller);
    if (controller) return controller.uid === uid;
    return selectorMatches(selector, pod.metadata?.labels);
  });
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
    ...(set.metadata?.annotations?.[MAX_UNAVAILABLE_ANNOTATION] !== undefined ? { maxUnavailableAnnotation: set.metadata.annotations[MAX_UNAVAILABLE_ANNOTATION] } : {}),
    paused: isPaused(set.metadata?.annotations),
    pods: pods.map(podView).sort((a, b) => a.ordinal - b.ordinal || a.name.localeCompare(b.name)),
  };
}

/**
 * The planner's snapshot of one rollout group: each of `sets` (the group's
 * StatefulSets of `namespace`) with its pods found among `candidatesOf(set)`
 * (those it controls plus orphans it selects, see podsOf). The controller
 * passes indexed lookups from its caches; `stateward status` passes every pod
 * it listed, so both plan on the same view.
 */
export function groupSnapshot(namespace: string, group: string, sets: readonly StatefulSet[], candidatesOf: (set: StatefulSet) => Pod[]): GroupSnapshot {
  return {
    namespace,
    group,
    statefulSets: sets.map((set) => statefulSetView(set, podsOf(set, candidatesOf(set)))),
  };
}
