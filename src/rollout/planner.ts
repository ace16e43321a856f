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
import { compareCodeUnits } from '../runtime/order.ts';
import type { GateVerdict } from './healthcheck/verdict.ts';

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
  | 'statefulset-status-pending'
  /** The health gate has not decided yet (not evaluated, baking, too few passes in a row). */
  | 'health-check-waiting'
  /** A Pause-policy health check failed: the next StatefulSet does not start. */
  | 'health-check-paused';

export const STATUS_PENDING_WAIT = 'statefulset-status-pending' satisfies WaitCode;

/**
 * Waits that are a rollout's own pace: its deleted pods terminating and
 * coming back, the StatefulSet controller catching up. A group waiting on
 * one of these is making progress; any other wait (another StatefulSet not
 * Ready, a paused one, a zone-aware budget's refusal) is a state of its own.
 */
export const PACE_WAITS: ReadonlySet<string> = new Set<WaitCode>([
  'max-unavailable-reached',
  'pods-terminating',
  'updated-pods-not-ready',
  STATUS_PENDING_WAIT,
]);

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
  /** The StatefulSet about to start rolling behind a health gate, and what the gate evaluates. */
  gate?: GateRequest;
}

/** What the executor evaluates for a gated StatefulSet (rollout-operator's candidate vs baseline). */
export interface GateRequest {
  statefulSet: string;
  /** Its update revision: the gate's verdict is for starting this one. */
  revision: string;
  check: string;
  /** Pods already on their update revision, in the StatefulSets that started rolling in this rollout. */
  candidates: string[];
  /** Pods not yet updated, in every StatefulSet of the group. */
  stable: string[];
  /** The earliest start stamp of the group: when the rollout began. */
  baselineAt: number;
  bypassUntil?: string;
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

const byName = (a: StatefulSetView, b: StatefulSetView) => compareCodeUnits(a.name, b.name);

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

type SetState = SetSummary['state'];

/** Each StatefulSet's max-unavailable budget, by name; bad annotations are reported in `warnings`. */
function maxUnavailableBudgets(sets: readonly StatefulSetView[], warnings: Plan['warnings']): Map<string, number> {
  const budgets = new Map<string, number>();
  for (const set of sets) {
    const max = parseMaxUnavailable(set.maxUnavailableAnnotation, set.replicas);
    if (max.warning) warnings.push({ statefulSet: set.name, message: max.warning });
    budgets.set(set.name, max.value);
  }
  return budgets;
}

function summarize(set: StatefulSetView, state: SetState, maxUnavailable: number): SetSummary {
  return {
    name: set.name,
    replicas: set.replicas,
    pods: set.pods.length,
    ready: set.pods.filter((p) => p.ready).length,
    updated: set.pods.filter((p) => !needsUpdate(set)(p)).length,
    maxUnavailable,
    paused: set.paused,
    state,
  };
}

/** Fills in plan.sets and plan.complete once the planner has decided. */
function finishPlan(
  plan: Plan,
  sets: readonly StatefulSetView[],
  budgets: ReadonlyMap<string, number>,
  states: ReadonlyMap<string, SetState>,
): Plan {
  plan.sets = sets.map((s) => summarize(s, states.get(s.name) ?? 'pending', budgets.get(s.name)!));
  // Without a current status, "every pod on its update revision" is unknown.
  plan.complete =
    !plan.blocked &&
    plan.errors.length === 0 &&
    sets.every((s) => statusPending(s) === undefined && !hasNotReadyPods(s) && s.pods.every((p) => !needsUpdate(s)(p)));
  return plan;
}

/** Guarantee 3: blocks the whole group when a StatefulSet does not use OnDelete. True when blocked. */
function blockUnlessOnDelete(plan: Plan, sets: readonly StatefulSetView[], states: Map<string, SetState>): boolean {
  const offending = sets.find((s) => s.updateStrategy !== 'OnDelete');
  if (!offending) return false;
  plan.blocked = {
    statefulSet: offending.name,
    message: `StatefulSet ${offending.name} has ${offending.updateStrategy} update strategy while OnDelete is expected, skipping reconcile`,
  };
  for (const s of sets) states.set(s.name, 'blocked');
  return true;
}

/** Guarantee 2: waits when more than one StatefulSet has not-Ready pods. True when waiting. */
function waitIfSeveralNotReady(plan: Plan, sets: readonly StatefulSetView[], states: Map<string, SetState>): boolean {
  const notReady = sets.filter(hasNotReadyPods);
  if (notReady.length <= 1) return false;
  plan.waiting = {
    code: 'several-statefulsets-not-ready',
    message: `waiting: ${notReady.length} StatefulSets have not-Ready pods (${notReady.map((s) => `${s.name}: ${unavailableCount(s)}`).join(', ')}); only one may be disrupted at a time`,
  };
  for (const s of notReady) states.set(s.name, 'waiting');
  return true;
}

/** A paused StatefulSet is passed over; true when the group must wait for it instead. */
function planPaused(plan: Plan, set: StatefulSetView, states: Map<string, SetState>): boolean {
  states.set(set.name, 'paused');
  // rollout-operator moves on past a paused StatefulSet even when that
  // one has not-Ready pods, and so rolls a second zone while the first is
  // disrupted. The guarantee wins here: wait until it is Ready again.
  if (!hasNotReadyPods(set)) return false;
  plan.waiting = {
    code: 'paused-statefulset-not-ready',
    statefulSet: set.name,
    message: `waiting: paused StatefulSet ${set.name} has ${unavailableCount(set)} not-Ready pod(s); other StatefulSets are not rolled meanwhile`,
  };
  return true;
}

/** Old-revision pods that are not Ready (and not already going away). */
function unavailableDeletions(set: StatefulSetView, toUpdate: readonly PodView[]): Deletion[] {
  const deletions: Deletion[] = [];
  for (const pod of toUpdate) {
    if (!pod.ready && !pod.terminating) {
      deletions.push({
        statefulSet: set.name,
        pod: pod.name,
        uid: pod.uid,
        reason: 'replace-unavailable',
        ...(pod.stuckReason ? { detail: pod.stuckReason } : {}),
      });
    }
  }
  return deletions;
}

/** Guarantee 4: Ready old-revision pods, by ordinal, as many as the budget leaves room for. */
function updateDeletions(
  set: StatefulSetView,
  toUpdate: readonly PodView[],
  budget: number,
  unavailable: number,
): Deletion[] {
  const room = Math.max(0, budget - unavailable);
  return toUpdate
    .filter((p) => p.ready)
    .slice(0, room)
    .map((pod): Deletion => ({ statefulSet: set.name, pod: pod.name, uid: pod.uid, reason: 'update' }));
}

/** Why nothing of `set` can be deleted now: its pods are terminating, or its budget is spent. */
function rollWaiting(set: StatefulSetView, unavailable: number, budget: number): NonNullable<Plan['waiting']> {
  const terminating = set.pods.filter((p) => p.terminating).length;
  return terminating > 0 && terminating === unavailable
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

/** Rolls `set`, whose pods `toUpdate` are on an old revision. */
function planRoll(
  plan: Plan,
  set: StatefulSetView,
  toUpdate: readonly PodView[],
  budget: number,
  states: Map<string, SetState>,
): void {
  plan.rolling = set.name;
  const unavailable = unavailableCount(set);
  // Already-unavailable old pods first: replacing them costs nothing.
  plan.deletions.push(...unavailableDeletions(set, toUpdate));
  plan.deletions.push(...updateDeletions(set, toUpdate, budget, unavailable));
  if (plan.deletions.length === 0) plan.waiting = rollWaiting(set, unavailable, budget);
  states.set(set.name, plan.deletions.length > 0 ? 'rolling' : 'waiting');
}

/**
 * rollout-operator's gate condition, with Stateward's stamps: `set` is bound
 * to a check, has not started rolling to its present revision (no current
 * start stamp), and another StatefulSet of the group has (it carries one).
 * The first StatefulSet of a rollout is never gated: there is nothing rolled
 * yet to judge. rollout-operator asks instead that none of its pods be on
 * the update revision; the stamp is stricter: a pod an upscale created on
 * the new revision does not let the rest of the zone roll past the gate.
 */
export function gateFor(set: StatefulSetView, sets: readonly StatefulSetView[]): GateRequest | undefined {
  if (set.healthCheck === undefined || set.startedAt !== undefined) return undefined;
  const started = sets.filter((s) => s.name !== set.name && s.startedAt !== undefined);
  if (started.length === 0) return undefined;
  const live = (p: PodView) => !p.terminating;
  return {
    statefulSet: set.name,
    revision: set.updateRevision,
    check: set.healthCheck,
    candidates: started.flatMap((s) =>
      s.pods.filter((p) => live(p) && p.revision === s.updateRevision).map((p) => p.name),
    ),
    stable: sets.flatMap((s) => s.pods.filter((p) => live(p) && p.revision !== s.updateRevision).map((p) => p.name)),
    baselineAt: Math.min(...started.map((s) => s.startedAt!)),
    ...(set.bypassUntil !== undefined ? { bypassUntil: set.bypassUntil } : {}),
  };
}

/** Holds `set` at its health gate unless the verdict is open. True when the group waits. */
function planGate(
  plan: Plan,
  set: StatefulSetView,
  request: GateRequest,
  verdict: GateVerdict | undefined,
  states: Map<string, SetState>,
): boolean {
  plan.gate = request;
  if (verdict?.state === 'open') return false;
  const paused = verdict?.state === 'pause';
  plan.waiting = {
    code: paused ? 'health-check-paused' : 'health-check-waiting',
    statefulSet: set.name,
    message: `waiting: ${set.name} ${paused ? 'is held by' : 'waits for'} health check ${request.check}: ${verdict?.message ?? 'not evaluated yet'}`,
  };
  states.set(set.name, 'waiting');
  return true;
}

/**
 * Plans one StatefulSet, in roll order. True when the group stops at it
 * (nothing after it in the order is rolled); false when it is up to date or
 * paused and the planner moves on.
 */
function planStatefulSet(
  plan: Plan,
  set: StatefulSetView,
  group: GroupSnapshot,
  budgets: ReadonlyMap<string, number>,
  states: Map<string, SetState>,
): boolean {
  if (set.paused) return planPaused(plan, set, states);
  // Where rollout-operator fails the reconcile ("currentRevision is empty"):
  // a StatefulSet the controller has not written a status for yet is not
  // broken, only new (or just changed). The group waits here, as it would
  // have stopped here; nothing after it in the order is rolled meanwhile.
  const pending = statusPending(set);
  if (pending) {
    plan.waiting = { code: STATUS_PENDING_WAIT, statefulSet: set.name, message: `waiting: ${pending}` };
    states.set(set.name, 'waiting');
    return true;
  }
  const toUpdate = set.pods.filter(needsUpdate(set));
  if (toUpdate.length > 0) {
    const gate = gateFor(set, group.statefulSets);
    if (gate && planGate(plan, set, gate, group.gates?.get(set.name), states)) return true;
    planRoll(plan, set, toUpdate, budgets.get(set.name)!, states);
    return true;
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
    return true;
  }
  if (set.currentRevision !== set.updateRevision)
    plan.revisionUpdates.push({ statefulSet: set.name, revision: set.updateRevision });
  states.set(set.name, 'up-to-date');
  return false;
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
  const budgets = maxUnavailableBudgets(sets, plan.warnings);
  const states = new Map<string, SetState>();
  if (blockUnlessOnDelete(plan, sets, states) || waitIfSeveralNotReady(plan, sets, states)) {
    return finishPlan(plan, sets, budgets, states);
  }
  for (const set of rollOrder(sets)) {
    if (planStatefulSet(plan, set, snapshot, budgets, states)) break;
  }
  return finishPlan(plan, sets, budgets, states);
}
