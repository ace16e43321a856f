// Workloads that do not roll by themselves: how each kind restarts (rolling,
// a rollout group, or one pod at a time for a standalone OnDelete StatefulSet).
import type { KubeObject, Pod } from '../runtime/kube/types.ts';
import { podView } from '../vocabulary/pods.ts';
import { ROLLOUT_GROUP_LABEL } from '../vocabulary/keys.ts';
import { type WorkloadKind, type WorkloadRef, byKey } from './checksums.ts';

// ------------------------------------------------------------ non-rolling workloads

/**
 * How a template change reaches the pods:
 * - 'rolling': Kubernetes rolls them (a Deployment, or a StatefulSet or
 *   DaemonSet with RollingUpdate, the default).
 * - 'rollout-group': an OnDelete StatefulSet labelled `rollout-group`: the
 *   rollout capability replaces its pods zone by zone, so the restart flows
 *   into the coordinated rollout.
 * - 'standalone-ondelete': OnDelete with nobody replacing pods (a StatefulSet
 *   outside a rollout group, or any OnDelete DaemonSet; rollout groups are
 *   StatefulSets only). Nothing restarts until pods are deleted: report it
 *   (onDeleteEvent) and, if enabled, evict outdated pods one at a time
 *   (nextOutdatedPod).
 */
export type RestartMode = 'rolling' | 'rollout-group' | 'standalone-ondelete';

/** The parts of a Deployment, StatefulSet or DaemonSet that restartMode reads. */
export type RestartTarget = KubeObject & { spec?: { updateStrategy?: { type?: string } } };

export function restartMode(kind: WorkloadKind, workload: RestartTarget): { mode: RestartMode; reason: string } {
  const name = workload.metadata?.name ?? '';
  // Only StatefulSets and DaemonSets can be OnDelete; every other kind rolls
  // (or, for CronJobs and Jobs, is restarted by a new Job: workloadkinds.ts).
  if (kind !== 'StatefulSet' && kind !== 'DaemonSet')
    return { mode: 'rolling', reason: `${kind} ${name} takes a restart by itself` };
  const strategy = workload.spec?.updateStrategy?.type ?? 'RollingUpdate';
  if (strategy !== 'OnDelete') return { mode: 'rolling', reason: `${kind} ${name} has update strategy ${strategy}` };
  const group = workload.metadata?.labels?.[ROLLOUT_GROUP_LABEL];
  if (kind === 'StatefulSet' && group !== undefined) {
    return {
      mode: 'rollout-group',
      reason: `StatefulSet ${name} is OnDelete in rollout group ${group}: the rollout replaces its pods`,
    };
  }
  return {
    mode: 'standalone-ondelete',
    reason: `${kind} ${name} is OnDelete and in no rollout group: its pods keep the old configuration until deleted`,
  };
}

const STATEFULSET_REVISION_LABEL = 'controller-revision-hash';
// The apiserver counts a DaemonSet's template changes in this annotation and
// the DaemonSet controller stamps the count on each pod it creates; a
// DaemonSet's status names no revision, so this is how to tell outdated pods.
const DAEMONSET_GENERATION_ANNOTATION = 'deprecated.daemonset.template.generation';
const DAEMONSET_GENERATION_LABEL = 'pod-template-generation';

/** What an OnDelete workload's pods should be at: the revision, the pod label that carries it, how many pods there should be. */
export interface UpdateTarget {
  /** '' while the workload's controller has not caught up with its latest spec. */
  revision: string;
  revisionLabel: string;
  replicas: number;
}

export type OnDeleteWorkload = KubeObject & {
  spec?: { replicas?: number };
  status?: { observedGeneration?: number; updateRevision?: string; desiredNumberScheduled?: number };
};

/** For a StatefulSet or DaemonSet (the only kinds restartMode calls OnDelete); any other kind reads as a DaemonSet. */
export function updateTarget(kind: WorkloadKind, workload: OnDeleteWorkload): UpdateTarget {
  const observed =
    workload.status?.observedGeneration !== undefined &&
    workload.status.observedGeneration === workload.metadata?.generation;
  if (kind === 'StatefulSet') {
    return {
      revision: observed ? (workload.status?.updateRevision ?? '') : '',
      revisionLabel: STATEFULSET_REVISION_LABEL,
      replicas: workload.spec?.replicas ?? 1,
    };
  }
  return {
    revision: observed ? (workload.metadata?.annotations?.[DAEMONSET_GENERATION_ANNOTATION] ?? '') : '',
    revisionLabel: DAEMONSET_GENERATION_LABEL,
    replicas: workload.status?.desiredNumberScheduled ?? 0,
  };
}

/** Pods not at `updateRevision` (their revision label — see updateTarget — differs or is absent), by name. */
export function outdatedPods(
  pods: readonly Pod[],
  updateRevision: string,
  revisionLabel = STATEFULSET_REVISION_LABEL,
): string[] {
  return pods
    .filter((p) => p.metadata?.labels?.[revisionLabel] !== updateRevision)
    .map((p) => p.metadata?.name ?? '')
    .sort(byKey);
}

/** The Event for a standalone OnDelete workload whose template was just restarted. */
export function onDeleteEvent(
  workload: WorkloadRef,
  outdated: number,
  evicting: boolean,
): { type: 'Normal'; reason: string; message: string } {
  const pods = outdated === 1 ? '1 pod' : `${outdated} pods`;
  const then = evicting ? 'evicting them one at a time' : 'delete them to apply the new configuration';
  return {
    type: 'Normal',
    reason: 'ConfigRestartPending',
    message: `template updated, ${pods} outdated (${workload.kind} ${workload.name} uses OnDelete); ${then}`,
  };
}

export type EvictionStep =
  | { action: 'evict'; pod: string; outdated: number; reason: string }
  | { action: 'wait'; outdated: number; reason: string }
  | { action: 'done'; reason: string };

/**
 * The optional one-at-a-time eviction of a standalone OnDelete workload's
 * outdated pods (the caller evicts through the Eviction API, so PDBs hold).
 * Nothing while a pod is terminating or an updated pod is not ready (the new
 * revision may be broken). An outdated pod that is not ready goes first (its
 * eviction costs no availability), otherwise the highest ordinal (the order
 * a StatefulSet rolls in; DaemonSet pod names have no ordinal and go by name).
 */
export function nextOutdatedPod(
  pods: readonly Pod[],
  updateRevision: string,
  replicas?: number,
  revisionLabel = STATEFULSET_REVISION_LABEL,
): EvictionStep {
  if (updateRevision === '') return { action: 'wait', outdated: 0, reason: 'the update revision is not known yet' };
  const views = pods.map((pod) => ({ ...podView(pod), revision: pod.metadata?.labels?.[revisionLabel] ?? '' }));
  const outdated = views.filter((p) => p.revision !== updateRevision);
  if (outdated.length === 0) return { action: 'done', reason: `every pod is at revision ${updateRevision}` };
  // A pod already gone (evicted, its replacement not created yet) is unavailable too.
  if (replicas !== undefined && views.length < replicas)
    return { action: 'wait', outdated: outdated.length, reason: `${replicas - views.length} pod(s) missing` };
  const terminating = views.find((p) => p.terminating);
  if (terminating)
    return { action: 'wait', outdated: outdated.length, reason: `pod ${terminating.name} is terminating` };
  const updatedNotReady = views.find((p) => p.revision === updateRevision && !p.ready);
  if (updatedNotReady)
    return { action: 'wait', outdated: outdated.length, reason: `updated pod ${updatedNotReady.name} is not ready` };
  const order = (a: (typeof views)[number], b: (typeof views)[number]) =>
    Number(a.ready) - Number(b.ready) || b.ordinal - a.ordinal || byKey(a.name, b.name);
  const next = [...outdated].sort(order)[0]!;
  return {
    action: 'evict',
    pod: next.name,
    outdated: outdated.length,
    reason: `pod ${next.name} is at revision ${next.revision || '(none)'}, not ${updateRevision}`,
  };
}

/** A reason the engine will not act on part of a workload's configuration, for an Event on the workload. */
export interface SkipNotice {
  type: 'Normal' | 'Warning';
  reason: 'InvalidAnnotation' | 'ConfigMissing' | 'ConfigIgnored';
  message: string;
}

const EXCLUSION_REASONS: Record<'ignore-annotation' | 'exclude-list', string> = {
  'ignore-annotation': 'it is annotated reloader.stakater.com/ignore: "true"',
  'exclude-list': "it is in the workload's exclude list",
};

/**
 * Every skip with its reason, in a fixed order: malformed opt-in or checksum
 * annotations, watched configs that do not exist (nothing restarts for them
 * until they appear), and configs an exclusion keeps out. Nothing for a
 * workload that has not opted in: most workloads have not, and say nothing.
 */
export function skipNotices(input: {
  optedIn: boolean;
  warnings: readonly string[];
  annotationWarning?: string | undefined;
  excluded: readonly { key: string; reason: 'ignore-annotation' | 'exclude-list' }[];
  missing: readonly string[];
  /** Keys whose every use is `optional: true`: their absence is expected, not a fault. */
  optional?: readonly string[];
}): SkipNotice[] {
  const notices: SkipNotice[] = input.warnings.map((message) => ({
    type: 'Warning',
    reason: 'InvalidAnnotation',
    message,
  }));
  if (input.annotationWarning)
    notices.push({ type: 'Warning', reason: 'InvalidAnnotation', message: input.annotationWarning });
  if (!input.optedIn) return notices;
  for (const key of [...input.missing].sort(byKey)) {
    const optional = input.optional?.includes(key) ?? false;
    notices.push({
      type: optional ? 'Normal' : 'Warning',
      reason: 'ConfigMissing',
      message: `${optional ? 'optional ' : ''}${key} is referenced but not found: no restart for it until it exists (its last recorded checksum is kept)`,
    });
  }
  for (const { key, reason } of [...input.excluded].sort((a, b) => byKey(a.key, b.key))) {
    notices.push({
      type: 'Normal',
      reason: 'ConfigIgnored',
      message: `changes to ${key} restart nothing: ${EXCLUSION_REASONS[reason]}`,
    });
  }
  return notices;
}
