// The rollout planner: a pure function from a group snapshot to what to do
// now. The four guarantees live here and are property-tested:
//   1. pods of two StatefulSets are never rolled at the same time;
//   2. a StatefulSet is rolled only while every other StatefulSet of the
//      group has all its pods Ready (missing pods count as not Ready);
//   3. nothing is rolled unless every StatefulSet uses OnDelete;
//   4. rolling never makes more than rollout-max-unavailable pods of a
//      StatefulSet unavailable.
// Order follows rollout-operator: StatefulSets by name, except that the one
// StatefulSet already having not-Ready pods goes first; pods by ascending
// ordinal; paused StatefulSets are passed over.
// A StatefulSet whose status the StatefulSet controller has not written yet
// (see statusPending) makes the group wait: rollout-operator fails the
// reconcile there ("currentRevision is empty"), which made a healthy new
// group count as failing (issue 17).
import { parseMaxUnavailable } from './annotations.ts';
import type { PodView } from '../vocabulary/pods.ts';
import type { GroupSnapshot, StatefulSetView } from './snapshot.ts';

export type DeletionReason =
  /** A Ready pod on an old revision, within the max-unavailable budget. */
  | 'update'
  /** An old-revision pod that is already unavailable (crash-looping, stuck, not Ready): replacing it cannot lower availability. */
  | 'replace-unavailable';

export interface Deletion {
  statefulSet: string;
  pod: string;
  uid: string;
  reason: DeletionReason;
  /** e.g. the container's waiting reason for a stuck pod. */
  detail?: string;
}

export type WaitCode =
  | 'several-statefulsets-not-ready'
  | 'max-unavailable-reached'
  | 'pods-terminating'
  | 'updated-pods-not-ready'
  | 'paused-statefulset-not-ready'
  /** The StatefulSet controller has not written the status for the current spec yet (statusPending). */
  | 'statefulset-status-pending';

export const STATUS_PENDING_WAIT = 'statefulset-status-pending' satisfies WaitCode;

export interface SetSummary {
  name: string;
  replicas: number;
  pods: number;
  ready: number;
  updated: number;
  maxUnavailable: number;
  paused: boolean;
  state: 'up-to-date' | 'rolling' | 'waiting' | 'paused' | 'pending' | 'blocked';
}

export interface Plan {
  namespace: string;
  group: string;
  deletions: Deletion[];
  /** StatefulSets whose status.currentRevision should become their updateRevision. */
  revisionUpdates: { statefulSet: string; revision: string }[];
  /** The StatefulSet being rolled, if any. */
  rolling?: string;
  waiting?: { code: WaitCode; statefulSet?: string; message: string };
  /** The group cannot be rolled at all (a StatefulSet is not OnDelete). */
  blocked?: { statefulSet: string; message: string };
  /**
   * Reconcile failures (counted as failed reconciles, retried). The planner
   * itself reports none today: a StatefulSet without a status yet, which
   * rollout-operator reports as an error, is a wait here.
   */
  errors: { statefulSet: string; message: string }[];
  /** Bad annotations and the like: reported, then worked around. */
  warnings: { statefulSet: string; message: string }[];
  sets: SetSummary[];
  /** Every pod of every StatefulSet is on its update revision and Ready. */
  complete: boolean;
}

/** Pods that count as unavailable: not Ready (terminating included) plus missing ones. */
export function unavailableCount(set: StatefulSetView): number {
  const podLevel = set.pods.filter((p) => !p.ready).length + Math.max(0, set.replicas - set.pods.length);
  const statusLevel = Math.max(0, set.statusReplicas - set.readyReplicas);
  return Math.max(podLevel, statusLevel);
}

/** rollout-operator's "has not-Ready pods", made stricter: status or pods say so, or pods are missing. */
export function hasNotReadyPods(set: StatefulSetView): boolean {
  return (
    set.statusReplicas !== set.readyReplicas ||
    set.pods.length < Math.max(set.statusReplicas, set.replicas) ||
    set.pods.some((p) => !p.ready)
  );
}

/**
 * Why the status of `set` cannot be planned on yet, or undefined when it can.
 * The StatefulSet controller writes currentRevision, updateRevision and
 * observedGeneration together, in every sync. So "not written yet" is:
 * - no currentRevision or updateRevision: never written (a StatefulSet just
 *   created, or a controller-manager that is not running), so there is no
 *   revision to compare pods with;
 * - observedGeneration < metadata.generation: written for an older spec
 *   (just after a template change, until the controller has computed its new
 *   updateRevision). Pods compared with that stale updateRevision would look
 *   up to date, and the group would be rolled in the wrong order or its
 *   currentRevision advanced to a revision that is no longer the update one.
 * Either lasts milliseconds with a healthy controller, and its status write
 * is a watch event that reconciles the group again. A missing
 * observedGeneration with both revisions present counts as written.
 */
export function statusPending(set: StatefulSetView): string | undefined {
  if (!set.currentRevision || !set.updateRevision) {
    return `the StatefulSet controller has not written the status of ${set.name} yet (no ${!set.currentRevision ? 'currentRevision' : 'updateRevision'})`;
  }
  if (set.generation !== undefined && set.observedGeneration !== undefined && set.observedGeneration < set.generation) {
    return `the status of ${set.name} is of generation ${set.observedGeneration}, its spec of generation ${set.generation}; the StatefulSet controller has not caught up yet`;
  }
  return undefined;
}

const needsUpdate = (set: StatefulSetView) => (p: PodView) => p.revision !== set.updateRevision;

const byName = (a: StatefulSetView, b: StatefulSetView) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/**
 * The order the planner goes through a group's StatefulSets: by name, except
 * that the one StatefulSet already disrupted (having not-Ready pods) is
 * finished first. With several disrupted, the planner waits (name order).
 */
export function rollOrder<T extends StatefulSetView>(statefulSets: readonly T[]): T[] {
  const sets = [...statefulSets].sort(byName);
  const notReady = sets.filter(hasNotReadyPods);
  return notReady.length === 1 ? [notReady[0]!, ...sets.filter((s) => s !== notReady[0])] : sets;
}

export function planGroup(snapshot: GroupSnapshot): Plan {
  const sets = [...snapshot.statefulSets].sort(byName);
  const plan: Plan = {
    namespace: snapshot.namespace,
    group: snapshot.group,
    deletions: [],
    revisionUpdates: [],
    errors: [],
    warnings: [],
    sets: [],
    complete: false,
  };
  const budgets = new Map<string, number>();
  for (const set of sets) {
    const max = parseMaxUnavailable(set.maxUnavailableAnnotation, set.replicas);
    if (max.warning) plan.warnings.push({ statefulSet: set.name, message: max.warning });
    budgets.set(set.name, max.value);
  }
  const summary = (set: StatefulSetView, state: SetSummary['state']): SetSummary => ({
    name: set.name,
    replicas: set.replicas,
    pods: set.pods.length,
    ready: set.pods.filter((p) => p.ready).length,
    updated: set.pods.filter((p) => !needsUpdate(set)(p)).length,
    maxUnavailable: budgets.get(set.name)!,
    paused: set.paused,
    state,
  });
  const finish = (states: Map<string, SetSummary['state']>): Plan => {
    plan.sets = sets.map((s) => summary(s, states.get(s.name) ?? 'pending'));
    // Without a current status, "every pod on its update revision" is unknown.
    plan.complete =
      !plan.blocked &&
      plan.errors.length === 0 &&
      sets.every(
        (s) => statusPending(s) === undefined && !hasNotReadyPods(s) && s.pods.every((p) => !needsUpdate(s)(p)),
      );
    return plan;
  };
  const states = new Map<string, SetSummary['state']>();

  const offending = sets.find((s) => s.updateStrategy !== 'OnDelete');
  if (offending) {
    plan.blocked = {
      statefulSet: offending.name,
      message: `StatefulSet ${offending.name} has ${offending.updateStrategy} update strategy while OnDelete is expected, skipping reconcile`,
    };
    for (const s of sets) states.set(s.name, 'blocked');
    return finish(states);
  }

  const notReady = sets.filter(hasNotReadyPods);
  if (notReady.length > 1) {
    plan.waiting = {
      code: 'several-statefulsets-not-ready',
      message: `waiting: ${notReady.length} StatefulSets have not-Ready pods (${notReady.map((s) => `${s.name}: ${unavailableCount(s)}`).join(', ')}); only one may be disrupted at a time`,
    };
    for (const s of notReady) states.set(s.name, 'waiting');
    return finish(states);
  }
  const order = rollOrder(sets);

  for (const set of order) {
    if (set.paused) {
      states.set(set.name, 'paused');
      // rollout-operator moves on past a paused StatefulSet even when that
      // one has not-Ready pods, and so rolls a second zone while the first is
      // disrupted. The guarantee wins here: wait until it is Ready again.
      if (hasNotReadyPods(set)) {
        plan.waiting = {
          code: 'paused-statefulset-not-ready',
          statefulSet: set.name,
          message: `waiting: paused StatefulSet ${set.name} has ${unavailableCount(set)} not-Ready pod(s); other StatefulSets are not rolled meanwhile`,
        };
        return finish(states);
      }
      continue;
    }
    // Where rollout-operator fails the reconcile ("currentRevision is empty"):
    // a StatefulSet the controller has not written a status for yet is not
    // broken, only new (or just changed). The group waits here, as it would
    // have stopped here; nothing after it in the order is rolled meanwhile.
    const pending = statusPending(set);
    if (pending) {
      plan.waiting = { code: STATUS_PENDING_WAIT, statefulSet: set.name, message: `waiting: ${pending}` };
      states.set(set.name, 'waiting');
      return finish(states);
    }
    const toUpdate = set.pods.filter(needsUpdate(set));
    if (toUpdate.length > 0) {
      plan.rolling = set.name;
      const unavailable = unavailableCount(set);
      const budget = budgets.get(set.name)!;
      // Already-unavailable old pods first: replacing them costs nothing.
      for (const pod of toUpdate) {
        if (!pod.ready && !pod.terminating) {
          plan.deletions.push({
            statefulSet: set.name,
            pod: pod.name,
            uid: pod.uid,
            reason: 'replace-unavailable',
            ...(pod.stuckReason ? { detail: pod.stuckReason } : {}),
          });
        }
      }
      const room = Math.max(0, budget - unavailable);
      for (const pod of toUpdate.filter((p) => p.ready).slice(0, room)) {
        plan.deletions.push({ statefulSet: set.name, pod: pod.name, uid: pod.uid, reason: 'update' });
      }
      if (plan.deletions.length === 0) {
        const terminating = set.pods.filter((p) => p.terminating).length;
        plan.waiting =
          terminating > 0 && terminating === unavailable
            ? {
                code: 'pods-terminating',
                statefulSet: set.name,
                message: `waiting: ${terminating} pod${terminating === 1 ? '' : 's'} of ${set.name} terminating`,
              }
            : {
                code: 'max-unavailable-reached',
                statefulSet: set.name,
                message: `waiting: ${unavailable} pod${unavailable === 1 ? '' : 's'} not Ready in ${set.name} (max unavailable ${budget})`,
              };
      }
      states.set(set.name, plan.deletions.length > 0 ? 'rolling' : 'waiting');
      return finish(states);
    }
    if (hasNotReadyPods(set)) {
      const unavailable = unavailableCount(set);
      plan.rolling = set.name;
      plan.waiting = {
        code: 'updated-pods-not-ready',
        statefulSet: set.name,
        message: `waiting: all pods of ${set.name} are updated but ${unavailable} ${unavailable === 1 ? 'is' : 'are'} not Ready`,
      };
      states.set(set.name, 'waiting');
      return finish(states);
    }
    if (set.currentRevision !== set.updateRevision)
      plan.revisionUpdates.push({ statefulSet: set.name, revision: set.updateRevision });
    states.set(set.name, 'up-to-date');
  }
  return finish(states);
}
