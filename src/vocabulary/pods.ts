// Pods as every capability reads them: the ordinal in a StatefulSet pod's
// name, whether it is ready in the sense rollouts, budgets, downscales and
// restarts all share, why it is stuck, and which StatefulSet it belongs to.
import type { Pod, StatefulSet } from '../runtime/kube/types.ts';
import { matchLabelsSelect } from './selectors.ts';

export interface PodView {
  name: string;
  uid: string;
  ordinal: number;
  /** controller-revision-hash; '' when missing. */
  revision: string;
  /** Phase Running, every container ready and running, not terminating (rollout-operator's test). */
  ready: boolean;
  terminating: boolean;
  /**
   * Why it cannot start, when it is not Ready and a container waits for a
   * reason that will not clear by itself. Never set on a Ready pod: a stuck
   * pod is a not-Ready one, as rollout-operator v0.39 defines it (#466).
   */
  stuckReason?: string;
}

/**
 * Container waiting reasons that mean "this pod will not become Ready without
 * a new spec", including every reason rollout-operator v0.39 counts as stuck
 * (#466: CrashLoopBackOff, InvalidImageName, CreateContainerConfigError,
 * CreateContainerError). They say why an old-revision pod is replaced; they do
 * not decide it: every not-Ready old-revision pod is (src/rollout/planner.ts).
 */
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
  const running =
    status?.phase === 'Running' && containers.length > 0 && containers.every((c) => c.ready && c.state?.running);
  // rollout-operator (IsPodRunningAndReady) reads the container statuses
  // only, which misses two ways a pod stops serving while its containers
  // still say ready: the node lifecycle controller sets Ready=False on the
  // pods of a node that stopped reporting, and readiness gates hold Ready at
  // False. Either way the pod is out of its Services, so another zone must
  // not be disrupted on its account. The Ready condition, when the pod has
  // one, must agree.
  const readyCondition = status?.conditions?.find((c) => c.type === 'Ready');
  const conditionAgrees = readyCondition === undefined || readyCondition.status === 'True';
  const ready = running && conditionAgrees && !terminating;
  const waiting = [...(status?.initContainerStatuses ?? []), ...containers]
    .map((c) => c.state?.waiting?.reason)
    .find((r) => r !== undefined && STUCK_REASONS.has(r));
  return {
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    ordinal: podOrdinal(pod.metadata?.name ?? ''),
    revision: pod.metadata?.labels?.['controller-revision-hash'] ?? '',
    ready,
    terminating,
    ...(waiting && !ready ? { stuckReason: waiting } : {}),
  };
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
    // An empty selector would adopt every pod: it selects none here.
    return (
      selector !== undefined && Object.keys(selector).length > 0 && matchLabelsSelect(selector, pod.metadata?.labels)
    );
  });
}
