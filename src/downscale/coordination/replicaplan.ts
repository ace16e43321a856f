// Replica scaling, pure decision core: follow-leader (rollout-operator's
// pkg/controller/replicas.go), the order in which a group's StatefulSets are
// adjusted; the mirror, delayed-downscale and validation parts are in
// mirror.ts, delay.ts and validate.ts. Time is passed in (epoch ms, the
// wall clock: it is compared with last-downscale timestamps), with the
// forward steps of that clock the executor noted (src/downscale/clocksteps.ts).
//
// MIN-TIME RULE (decided; the same rule as the prepare-downscale webhook,
// src/downscale/prepare/prepareplan.ts groupChecks):
//   A zone may be downscaled only when, for every OTHER StatefulSet of the
//   group that has a grafana.com/last-downscale annotation AND a
//   grafana.com/min-time-between-zones-downscale label,
//   now − its last-downscale ≥ that OTHER StatefulSet's min-time.
//   An unparsable last-downscale annotation (even without the label, as the
//   webhook) or an unparsable label (when it matters) is an error naming it.
// rollout-operator's controller used the follower's OWN label instead. With two
// rules the controller would decide a downscale was due, patch spec.replicas,
// and the webhook (which checks the other zone's label) would deny the very
// patch the controller attempted: a retry loop of denied patches, and a
// follower whose label differs from its peers' waits by one rule here and by
// another there. One rule means: what the controller attempts, the webhook
// admits.
import type { StatefulSet } from '../../runtime/kube/types.ts';
import {
  checkMinTimeBetweenZoneDownscales,
  lastDownscalesFromAnnotations,
  type CountedFromByName,
} from '../mintime.ts';
import { formatRfc3339 } from '../../vocabulary/rfc3339.ts';
import { forceReplicasOverride, replicasOf } from './scalingfields.ts';
import { annotationsOf, labelsOf, nameOf } from '../../vocabulary/metadata.ts';
import {
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  FORCE_REPLICAS_ANNOTATION_KEY,
  LAST_DOWNSCALE_ANNOTATION_KEY,
  PREPARE_DOWNSCALE_LABEL_KEY,
  UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY,
} from '../../vocabulary/keys.ts';
import { compareCodeUnits } from '../../runtime/order.ts';

/** What drove a decision: the leader's replicas, force-replicas, or nothing (stay). */
export type Cause = 'leader' | 'force' | 'none';

export type FollowerDecision = { desired: number; reason: string; cause: Cause; warning?: string } | { error: string };

// ------------------------------------------------------------ min-time rule

export type MinTimeOutcome =
  | { elapsed: true }
  | { elapsed: false; blockedBy: string; lastDownscale: number; minTime: number; reason: string }
  | { error: string };

/** The MIN-TIME RULE above, for downscaling `zone` (a StatefulSet name) at `now`. */
export function minimumTimeHasElapsed(input: {
  zone: string;
  group: readonly StatefulSet[];
  now: number;
  countedFrom?: CountedFromByName;
}): MinTimeOutcome {
  const check = checkMinTimeBetweenZoneDownscales({
    self: input.zone,
    group: input.group,
    lastDownscales: lastDownscalesFromAnnotations(input.group),
    now: input.now,
    countedFrom: input.countedFrom,
  });
  return 'error' in check ? { error: check.error } : check;
}

// ------------------------------------------------------------ follow-leader

/**
 * The leader named by the follower's grafana.com/rollout-downscale-leader
 * annotation: undefined when there is no annotation, an error when the group
 * has no StatefulSet of that name (rollout-operator: getLeaderForStatefulSet).
 */
export function leaderFor(
  follower: StatefulSet,
  group: readonly StatefulSet[],
): StatefulSet | undefined | { error: string } {
  const leaderName = annotationsOf(follower)[DOWNSCALE_LEADER_ANNOTATION_KEY];
  if (leaderName === undefined) return undefined;
  const leader = group.find((s) => nameOf(s) === leaderName);
  if (leader === undefined)
    return { error: `could not find leader for ${nameOf(follower)} using ${DOWNSCALE_LEADER_ANNOTATION_KEY}` };
  return leader;
}

/** The replicas a StatefulSet should have in follow-leader mode (rollout-operator: desiredStsReplicas). */
export function desiredFollowerReplicas(input: {
  follower: StatefulSet;
  group: readonly StatefulSet[];
  now: number;
  countedFrom?: CountedFromByName;
}): FollowerDecision {
  const { follower, group, now, countedFrom } = input;
  const name = nameOf(follower);
  const current = replicasOf(follower);
  const force = forceReplicasOverride(follower);
  const leader = leaderFor(follower, group);

  if (leader === undefined) {
    // force-replicas here is the mirror's business, or has no effect;
    // validateScalingMetadata reports the latter (it knows about mirrors).
    return { desired: current, cause: 'none', reason: `${name} has no ${DOWNSCALE_LEADER_ANNOTATION_KEY} annotation` };
  }
  if ('error' in leader) return leader;

  const warning = force !== undefined && 'warning' in force ? { warning: force.warning } : {};
  if (force !== undefined && 'replicas' in force) {
    return {
      desired: force.replicas,
      cause: 'force',
      reason: `${FORCE_REPLICAS_ANNOTATION_KEY} on ${name} is ${force.replicas}`,
    };
  }

  const leaderName = nameOf(leader);
  const target = replicasOf(leader);
  if (target > current) {
    if (annotationsOf(follower)[UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY] === 'true') {
      const ready = leader.status?.readyReplicas ?? 0;
      if (target !== ready) {
        return {
          desired: current,
          cause: 'none',
          reason: `leader ${leaderName} has ${target} replicas but ${ready} ready; ${name} waits before scaling up (${UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY})`,
          ...warning,
        };
      }
    }
    return {
      desired: target,
      cause: 'leader',
      reason: `following leader ${leaderName}: scaling up from ${current} to ${target}`,
      ...warning,
    };
  }
  if (target < current) {
    const elapsed = minimumTimeHasElapsed({ zone: name, group, now, countedFrom });
    if ('error' in elapsed) return elapsed;
    if (!elapsed.elapsed) {
      return {
        desired: current,
        cause: 'none',
        reason: `not following leader ${leaderName} down to ${target} yet: ${elapsed.reason}`,
        ...warning,
      };
    }
    return {
      desired: target,
      cause: 'leader',
      reason: `following leader ${leaderName}: scaling down from ${current} to ${target}`,
      ...warning,
    };
  }
  return {
    desired: current,
    cause: 'none',
    reason: `${name} already has its leader ${leaderName}'s ${current} replicas`,
    ...warning,
  };
}

// ------------------------------------------------------------ group order

function byName(a: StatefulSet, b: StatefulSet): number {
  return compareCodeUnits(nameOf(a), nameOf(b));
}

/**
 * The group in adjustment order: every leader before its followers, and
 * otherwise by name (rollout-operator's zone order). A leader missing from the
 * group is no edge (desiredFollowerReplicas reports it). A leader cycle
 * (including a StatefulSet leading itself) is an error listing the cycle.
 */
export function chainOrder(group: readonly StatefulSet[]): StatefulSet[] | { error: string; cycle: string[] } {
  const sorted = [...group].sort(byName);
  const byNameMap = new Map(sorted.map((s) => [nameOf(s), s] as const));
  const state = new Map<string, 'visiting' | 'done'>();
  const out: StatefulSet[] = [];

  // Iterative walk up the leader chain: a chain is a path (one leader each).
  for (const start of sorted) {
    if (state.get(nameOf(start)) === 'done') continue;
    const path: StatefulSet[] = [];
    let node: StatefulSet | undefined = start;
    while (node !== undefined) {
      const n = nameOf(node);
      const st = state.get(n);
      if (st === 'done') break;
      if (st === 'visiting') {
        const names = path.map(nameOf);
        const cycle = [...names.slice(names.indexOf(n)), n];
        return { error: `${DOWNSCALE_LEADER_ANNOTATION_KEY} annotations form a cycle: ${cycle.join(' -> ')}`, cycle };
      }
      state.set(n, 'visiting');
      path.push(node);
      const leaderName: string | undefined = annotationsOf(node)[DOWNSCALE_LEADER_ANNOTATION_KEY];
      node = leaderName === undefined ? undefined : byNameMap.get(leaderName);
    }
    // path = start, its leader, its leader's leader, …: emit root first.
    for (let i = path.length - 1; i >= 0; i--) {
      state.set(nameOf(path[i]!), 'done');
      out.push(path[i]!);
    }
  }
  return out;
}

// ------------------------------------------------------------ group plan

export interface ReplicaChange {
  statefulSet: string;
  from: number;
  to: number;
  reason: string;
  cause: Exclude<Cause, 'none'>;
}

export interface GroupReplicaPlan {
  /** In the order to apply them; each was computed seeing the earlier ones applied. */
  changes: ReplicaChange[];
  /** Per-StatefulSet errors (that StatefulSet is left alone), or one for a leader cycle (nothing changes). */
  errors: { statefulSet: string; error: string }[];
  warnings: { statefulSet: string; warning: string }[];
}

function cloneForSimulation(sts: StatefulSet): StatefulSet {
  return {
    ...sts,
    metadata: { ...sts.metadata, annotations: { ...sts.metadata?.annotations } },
    spec: { ...sts.spec! },
  };
}

/**
 * Follow-leader for a whole group in one pass. Unlike rollout-operator (which
 * patches one StatefulSet and ends the reconcile, so a chain a→b→c needs one
 * resync per link), this simulates each change on a copy of the group in
 * chainOrder, so c sees b's new replicas and the chain converges at once.
 *
 * A simulated downscale of a StatefulSet labelled grafana.com/prepare-downscale
 * =true also stamps its last-downscale with `now`, because the webhook will
 * do exactly that when the patch is admitted; later zones of the same pass
 * then honour its min-time as the webhook will.
 *
 * A leader cycle plans nothing for the group.
 */
export function planGroupReplicas(input: {
  group: readonly StatefulSet[];
  now: number;
  countedFrom?: CountedFromByName;
}): GroupReplicaPlan {
  const { group, now, countedFrom } = input;
  const plan: GroupReplicaPlan = { changes: [], errors: [], warnings: [] };
  const order = chainOrder(group);
  if (!Array.isArray(order)) {
    plan.errors.push({ statefulSet: order.cycle[0] ?? '', error: order.error });
    return plan;
  }
  const simulated = group.map(cloneForSimulation);
  const byNameMap = new Map(simulated.map((s) => [nameOf(s), s] as const));

  for (const original of order) {
    const name = nameOf(original);
    const sts = byNameMap.get(name)!;
    // A stamp simulated below is a new value: a step noted for the old one does not apply to it.
    const decision = desiredFollowerReplicas({ follower: sts, group: simulated, now, countedFrom });
    if ('error' in decision) {
      plan.errors.push({ statefulSet: name, error: decision.error });
      continue;
    }
    if (decision.warning !== undefined) plan.warnings.push({ statefulSet: name, warning: decision.warning });
    const from = replicasOf(sts);
    if (decision.desired === from || decision.cause === 'none') continue;
    plan.changes.push({
      statefulSet: name,
      from,
      to: decision.desired,
      reason: decision.reason,
      cause: decision.cause,
    });
    sts.spec!.replicas = decision.desired;
    if (decision.desired < from && labelsOf(sts)[PREPARE_DOWNSCALE_LABEL_KEY] === 'true') {
      sts.metadata!.annotations![LAST_DOWNSCALE_ANNOTATION_KEY] = formatRfc3339(now);
    }
  }
  return plan;
}
