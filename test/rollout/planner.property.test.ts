// Property tests: for every group fast-check can think of, every plan keeps
// the four guarantees, and a plan makes progress whenever progress is allowed.
// Groups include StatefulSets whose status the StatefulSet controller has not
// written yet (new ones) or not caught up with (a spec just changed).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parseMaxUnavailable } from '../../src/rollout/annotations.ts';
import {
  hasNotReadyPods,
  planGroup,
  STATUS_PENDING_WAIT,
  statusPending,
  unavailableCount,
  type Plan,
} from '../../src/rollout/planner.ts';
import type { Pod } from '../../src/runtime/kube/types.ts';
import { podView, STUCK_REASONS, type PodView } from '../../src/vocabulary/pods.ts';
import { planDecidesNothing } from '../../src/rollout/resync.ts';
import type { GroupSnapshot, StatefulSetView } from '../../src/rollout/snapshot.ts';
import { assertReaching, SKIP } from '../support/reach.ts';

const revisions = ['rev-old', 'rev-new'];

const podArb = (set: string, ordinal: number) =>
  fc
    .record({
      revision: fc.constantFrom(...revisions, ''),
      ready: fc.boolean(),
      terminating: fc.boolean(),
      stuck: fc.boolean(),
    })
    .map(({ revision, ready, terminating, stuck }): PodView => ({
      name: `${set}-${ordinal}`,
      uid: `${set}-${ordinal}-uid`,
      ordinal,
      revision,
      ready: ready && !terminating && !stuck,
      terminating,
      ...(stuck && !ready ? { stuckReason: 'CrashLoopBackOff' } : {}),
    }));

const setArb = (zone: string) =>
  fc
    .record({
      replicas: fc.integer({ min: 0, max: 6 }),
      missing: fc.integer({ min: 0, max: 2 }),
      extra: fc.integer({ min: 0, max: 1 }),
      strategy: fc.constantFrom('OnDelete', 'OnDelete', 'OnDelete', 'OnDelete', 'RollingUpdate'),
      annotation: fc.option(fc.constantFrom('1', '2', '3', '50%', '100%', '0', '-1', 'abc', '150%', ' 2 '), {
        nil: undefined,
      }),
      paused: fc.boolean(),
      statusLag: fc.integer({ min: -1, max: 1 }),
      currentIsUpdate: fc.boolean(),
      // Mostly a status written for the current spec; else none yet (a new
      // StatefulSet: no revisions), half of one, or one of an older generation.
      status: fc.oneof(
        { arbitrary: fc.constant('current'), weight: 12 },
        { arbitrary: fc.constantFrom('no-observed-generation', 'none', 'no-current', 'no-update', 'stale'), weight: 4 },
      ),
    })
    .chain((cfg) => {
      const name = `ingester-${zone}`;
      const count = Math.max(0, cfg.replicas - cfg.missing) + cfg.extra;
      return fc.tuple(...Array.from({ length: count }, (_, i) => podArb(name, i))).map((pods): StatefulSetView => {
        const ready = pods.filter((p) => p.ready).length;
        return {
          name,
          namespace: 'ns',
          uid: `${name}-uid`,
          updateStrategy: cfg.strategy,
          replicas: cfg.replicas,
          statusReplicas: pods.length,
          readyReplicas: Math.max(0, Math.min(pods.length, ready + cfg.statusLag)),
          currentRevision:
            cfg.status === 'none' || cfg.status === 'no-current' ? '' : cfg.currentIsUpdate ? 'rev-new' : 'rev-old',
          updateRevision: cfg.status === 'none' || cfg.status === 'no-update' ? '' : 'rev-new',
          ...(cfg.status === 'none' ? {} : { generation: 4 }),
          ...(cfg.status === 'none' || cfg.status === 'no-observed-generation'
            ? {}
            : { observedGeneration: cfg.status === 'stale' ? 3 : 4 }),
          ...(cfg.annotation !== undefined ? { maxUnavailableAnnotation: cfg.annotation } : {}),
          paused: cfg.paused,
          pods,
        };
      });
    });

const groupArb = fc
  .integer({ min: 1, max: 4 })
  .chain((zones) =>
    fc
      .tuple(...['a', 'b', 'c', 'd'].slice(0, zones).map((z) => setArb(`zone-${z}`)))
      .map((statefulSets): GroupSnapshot => ({ namespace: 'ns', group: 'ingester', statefulSets })),
  );

/** A StatefulSet at rest: OnDelete, its status written for its spec, every pod there and Ready on the update revision. */
function settled(set: StatefulSetView): StatefulSetView {
  const pods = Array.from({ length: Math.max(set.pods.length, set.replicas) }, (_, ordinal): PodView => ({
    name: `${set.name}-${ordinal}`,
    uid: `${set.name}-${ordinal}-uid`,
    ordinal,
    revision: 'rev-new',
    ready: true,
    terminating: false,
  }));
  return {
    ...set,
    updateStrategy: 'OnDelete',
    currentRevision: 'rev-new',
    updateRevision: 'rev-new',
    generation: 4,
    observedGeneration: 4,
    statusReplicas: pods.length,
    readyReplicas: pods.length,
    pods,
  };
}

/**
 * Groups at the edge of rest: every StatefulSet settled but at most one,
 * which is left as groupArb made it (through `left`), so that the groups a
 * plan decides nothing about, or rolls one StatefulSet of, are most of
 * those generated rather than the odd one in a hundred.
 */
const nearlySettledArb = (left: (set: StatefulSetView) => StatefulSetView = (set) => set) =>
  fc.tuple(groupArb, fc.nat()).map(([g, pick]): GroupSnapshot => {
    const index = pick % (g.statefulSets.length + 1); // one past the last: every StatefulSet settled
    return { ...g, statefulSets: g.statefulSets.map((set, i) => (i === index ? left(set) : settled(set))) };
  });

function deletedSets(plan: Plan): Set<string> {
  return new Set(plan.deletions.map((d) => d.statefulSet));
}

const byName = (g: GroupSnapshot, name: string) => g.statefulSets.find((s) => s.name === name)!;
const budgetOf = (set: StatefulSetView) => parseMaxUnavailable(set.maxUnavailableAnnotation, set.replicas).value;

describe('rollout planner guarantees (property)', () => {
  it('never rolls pods of two StatefulSets at once', () => {
    fc.assert(
      fc.property(groupArb, (g) => deletedSets(planGroup(g)).size <= 1),
      { numRuns: 2000 },
    );
  });

  it('rolls a StatefulSet only while every other StatefulSet of the group has all its pods Ready', () => {
    fc.assert(
      fc.property(groupArb, (g) => {
        const plan = planGroup(g);
        for (const rolled of deletedSets(plan)) {
          for (const other of g.statefulSets.filter((s) => s.name !== rolled)) {
            assert.ok(!hasNotReadyPods(other), `${rolled} rolled while ${other.name} has not-Ready or missing pods`);
            assert.ok(other.pods.length >= other.replicas && other.pods.every((p) => p.ready));
          }
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('rolls nothing when any StatefulSet of the group is not OnDelete', () => {
    fc.assert(
      fc.property(groupArb, (g) => {
        const plan = planGroup(g);
        if (g.statefulSets.some((s) => s.updateStrategy !== 'OnDelete')) {
          assert.equal(plan.deletions.length, 0);
          assert.equal(plan.revisionUpdates.length, 0);
          assert.ok(plan.blocked);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('never takes Ready pods beyond max-unavailable, and deletes only old-revision, non-terminating pods of unpaused StatefulSets', () => {
    fc.assert(
      fc.property(groupArb, (g) => {
        const plan = planGroup(g);
        for (const name of deletedSets(plan)) {
          const set = byName(g, name);
          assert.ok(!set.paused, 'paused StatefulSets are not rolled');
          const budget = budgetOf(set);
          const deleted = plan.deletions.filter((d) => d.statefulSet === name);
          const readyDeleted = deleted.filter((d) => set.pods.find((p) => p.name === d.pod)!.ready).length;
          assert.ok(
            unavailableCount(set) + readyDeleted <= Math.max(budget, unavailableCount(set)),
            'availability never drops below replicas - max-unavailable because of us',
          );
          assert.ok(readyDeleted <= Math.max(0, budget - unavailableCount(set)));
          assert.ok(
            readyDeleted <= Math.max(0, budget - v039Unavailable(set)),
            'no more Ready pods than rollout-operator v0.39 takes (#466)',
          );
          for (const d of deleted) {
            const pod = set.pods.find((p) => p.name === d.pod)!;
            assert.notEqual(pod.revision, set.updateRevision, 'only pods needing an update');
            assert.ok(!pod.terminating, 'terminating pods are not deleted again');
          }
          assert.equal(new Set(deleted.map((d) => d.pod)).size, deleted.length, 'no pod twice');
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('never rolls or advances a StatefulSet whose status is not written for its spec, and waits there instead of failing', () => {
    fc.assert(
      fc.property(groupArb, (g) => {
        const plan = planGroup(g);
        assert.deepEqual(plan.errors, [], 'a missing status is a wait, never a failed reconcile');
        for (const name of deletedSets(plan))
          assert.equal(
            statusPending(byName(g, name)),
            undefined,
            `${name} rolled on a status not written for its spec`,
          );
        for (const update of plan.revisionUpdates) {
          const set = byName(g, update.statefulSet);
          assert.equal(statusPending(set), undefined, `${set.name} advanced on a status not written for its spec`);
          assert.equal(update.revision, set.updateRevision);
        }
        if (plan.waiting?.code === STATUS_PENDING_WAIT) {
          assert.ok(plan.waiting.statefulSet && statusPending(byName(g, plan.waiting.statefulSet)) !== undefined);
          assert.equal(plan.complete, false);
        }
        if (g.statefulSets.some((s) => statusPending(s) !== undefined))
          assert.equal(plan.complete, false, 'not complete while a status is not known');
      }),
      { numRuns: 3000 },
    );
  });

  it('takes Ready pods in ascending ordinal order', () => {
    fc.assert(
      fc.property(groupArb, (g) => {
        const plan = planGroup(g);
        for (const name of deletedSets(plan)) {
          const set = byName(g, name);
          const taken = plan.deletions
            .filter((d) => d.reason === 'update')
            .map((d) => set.pods.find((p) => p.name === d.pod)!.ordinal);
          const eligible = set.pods
            .filter((p) => p.ready && p.revision !== set.updateRevision)
            .map((p) => p.ordinal)
            .sort((a, b) => a - b);
          assert.deepEqual(taken, eligible.slice(0, taken.length));
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('makes progress whenever progress is allowed', () => {
    assertReaching(
      groupArb,
      (g) => {
        const plan = planGroup(g);
        const allOnDelete = g.statefulSets.every((s) => s.updateStrategy === 'OnDelete');
        const notReady = g.statefulSets.filter(hasNotReadyPods);
        if (!allOnDelete || notReady.length > 1) return SKIP;
        if (notReady[0]?.paused) {
          // A disrupted zone that is paused holds the group (a deliberate difference from rollout-operator).
          assert.equal(plan.waiting?.code, 'paused-statefulset-not-ready');
          return;
        }
        // The first StatefulSet (in rollout order) that is not paused and not
        // finished; one whose status is not written for its spec stops the
        // walk there, as the planner cannot tell whether it is finished.
        const ordered = [
          ...notReady,
          ...[...g.statefulSets].sort((a, b) => a.name.localeCompare(b.name)).filter((s) => !notReady.includes(s)),
        ];
        const first = ordered.find(
          (s) =>
            !s.paused &&
            (statusPending(s) !== undefined ||
              hasNotReadyPods(s) ||
              s.pods.some((p) => p.revision !== s.updateRevision)),
        );
        if (first && statusPending(first) !== undefined) {
          assert.equal(plan.waiting?.code, STATUS_PENDING_WAIT);
          assert.equal(plan.waiting?.statefulSet, first.name);
          assert.deepEqual(plan.deletions, []);
          return;
        }
        if (!first) {
          // Nothing to roll: every unpaused StatefulSet whose currentRevision lags is brought up to date.
          for (const s of g.statefulSets.filter((x) => !x.paused && x.currentRevision !== x.updateRevision)) {
            assert.ok(
              plan.revisionUpdates.some((u) => u.statefulSet === s.name),
              `${s.name} currentRevision is advanced`,
            );
          }
          return;
        }
        const budget = budgetOf(first);
        const oldPods = first.pods.filter((p) => p.revision !== first.updateRevision);
        const canTakeReady = oldPods.some((p) => p.ready) && budget > unavailableCount(first);
        const canReplace = oldPods.some((p) => !p.ready && !p.terminating);
        if (canTakeReady || canReplace)
          assert.ok(plan.deletions.length > 0, `expected progress in ${first.name}: ${plan.waiting?.message}`);
        else assert.ok(plan.waiting, 'otherwise the plan says what it waits for');
      },
      { numRuns: 3000, floor: 0.15 },
    );
  });

  // The resync gate (resync.ts) skips a group whose last plan decided nothing
  // until one of its objects changes: that is sound only if the plan is a
  // function of the snapshot alone, and a plan deciding nothing leaves nothing to roll.
  it('plans from the snapshot alone: a copy planned later gives the same plan', () => {
    fc.assert(
      fc.property(groupArb, (g) => {
        const first = planGroup(g);
        assert.deepEqual(planGroup(structuredClone(g)), first);
      }),
      { numRuns: 1000 },
    );
  });

  it('decides nothing only when every pod of every unpaused StatefulSet is Ready on its update revision', () => {
    assertReaching(
      fc.oneof({ arbitrary: groupArb, weight: 1 }, { arbitrary: nearlySettledArb(), weight: 3 }),
      (g) => {
        if (!planDecidesNothing(planGroup(g))) return SKIP;
        for (const s of g.statefulSets) {
          assert.equal(s.updateStrategy, 'OnDelete');
          // Unpausing is an annotation change: an event, which unsettles the group.
          if (s.paused) continue;
          assert.equal(s.currentRevision, s.updateRevision, `${s.name} currentRevision`);
          assert.ok(s.pods.length >= s.replicas, `${s.name} has all its pods`);
          for (const p of s.pods) {
            assert.ok(p.ready && !p.terminating, `${p.name} Ready`);
            assert.equal(p.revision, s.updateRevision, `${p.name} revision`);
          }
        }
      },
      { numRuns: 3000, floor: 0.15 },
    );
  });
});

/**
 * What rollout-operator v0.39 counts against rollout-max-unavailable (#466):
 * pods on the update revision that are not Ready, terminating pods and
 * missing pods.
 */
function v039Unavailable(set: StatefulSetView): number {
  const counted = set.pods.filter((p) => p.terminating || (p.revision === set.updateRevision && !p.ready));
  return counted.length + Math.max(0, set.replicas - set.pods.length);
}

/** The StatefulSet the plan rolls, when it has pods on an old revision (and so could delete some). */
function rolledWithOldPods(g: GroupSnapshot, plan: Plan): StatefulSetView | undefined {
  const set = plan.rolling === undefined ? undefined : byName(g, plan.rolling);
  return set?.pods.some((p) => p.revision !== set.updateRevision) ? set : undefined;
}

/** A StatefulSet as it rolls: OnDelete, unpaused, its status written for a spec whose revision changed. */
const rolling = (set: StatefulSetView): StatefulSetView => ({
  ...set,
  updateStrategy: 'OnDelete',
  paused: false,
  currentRevision: 'rev-old',
  updateRevision: 'rev-new',
  generation: 4,
  observedGeneration: 4,
});

/** The reasons rollout-operator v0.39 counts as stuck (#466). */
const V039_STUCK = ['CrashLoopBackOff', 'InvalidImageName', 'CreateContainerConfigError', 'CreateContainerError'];

const containerArb = fc.record({
  name: fc.constant('c'),
  image: fc.constant('i'),
  imageID: fc.constant(''),
  ready: fc.boolean(),
  restartCount: fc.nat(5),
  state: fc.oneof(
    fc.constant({ running: { startedAt: '2026-01-01T00:00:00Z' } }),
    fc.constantFrom(...V039_STUCK, 'ImagePullBackOff', 'ContainerCreating', 'PodInitializing').map((reason) => ({
      waiting: { reason },
    })),
  ),
});

const podObjectArb = fc
  .record({
    phase: fc.constantFrom('Running', 'Pending'),
    terminating: fc.boolean(),
    containers: fc.array(containerArb, { minLength: 1, maxLength: 2 }),
    init: fc.array(containerArb, { maxLength: 1 }),
    readyCondition: fc.option(fc.constantFrom('True', 'False'), { nil: undefined }),
  })
  .map((p): Pod => ({
    metadata: { name: 'p-0', ...(p.terminating ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}) },
    status: {
      phase: p.phase,
      containerStatuses: p.containers,
      initContainerStatuses: p.init,
      ...(p.readyCondition ? { conditions: [{ type: 'Ready', status: p.readyCondition }] } : {}),
    },
  }));

describe('rollout planner and rollout-operator v0.39 (#466) (property)', () => {
  it('replaces every old-revision pod that is not Ready and not terminating in the StatefulSet it rolls (a failed update never holds a rollout back, #339), and deletes whenever rollout-operator v0.39 would unless the status reports more pods not Ready than its pods show', () => {
    assertReaching(
      fc.oneof({ arbitrary: groupArb, weight: 1 }, { arbitrary: nearlySettledArb(rolling), weight: 3 }),
      (g) => {
        const plan = planGroup(g);
        const set = rolledWithOldPods(g, plan);
        if (!set) return SKIP;
        const old = set.pods.filter((p) => p.revision !== set.updateRevision && !p.terminating);
        for (const pod of old.filter((p) => !p.ready))
          assert.ok(
            plan.deletions.some((d) => d.pod === pod.name && d.reason === 'replace-unavailable'),
            `${pod.name} replaced`,
          );
        const podLevel = set.pods.filter((p) => !p.ready).length + Math.max(0, set.replicas - set.pods.length);
        // Stateward waits for a status that says more pods are not Ready than its pods show.
        if (
          old.length === 0 ||
          budgetOf(set) <= v039Unavailable(set) ||
          set.statusReplicas - set.readyReplicas > podLevel
        )
          return SKIP; // counted as reaching only when it reaches the comparison with v0.39
        assert.ok(plan.deletions.length > 0, `v0.39 would delete in ${set.name}: ${plan.waiting?.message}`);
      },
      { numRuns: 3000, floor: 0.03 },
    );
  });

  it("calls a pod stuck only when it is not Ready, and every not-Ready pod waiting in one of v0.39's stuck reasons stuck", () => {
    fc.assert(
      fc.property(podObjectArb, (pod) => {
        const view = podView(pod);
        const waiting = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].map(
          (c) => c.state?.waiting?.reason,
        );
        if (view.stuckReason !== undefined) {
          assert.equal(view.ready, false, 'a stuck pod is not Ready');
          assert.ok(STUCK_REASONS.has(view.stuckReason) && waiting.includes(view.stuckReason));
        }
        if (!view.ready && waiting.some((r) => r !== undefined && V039_STUCK.includes(r)))
          assert.ok(view.stuckReason !== undefined, 'stuck as v0.39 sees it');
      }),
      { numRuns: 2000 },
    );
  });
});
