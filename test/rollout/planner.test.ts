// rollout-operator's controller table cases (its TestRolloutController_Reconcile
// names), ported as planner unit tests, plus the cases where Stateward does
// better.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planGroup, STATUS_PENDING_WAIT, statusPending } from '../../src/rollout/planner.ts';
import type { PodView } from '../../src/vocabulary/pods.ts';
import type { GroupSnapshot, StatefulSetView } from '../../src/rollout/snapshot.ts';
import { groupStatus } from '../../src/rollout/status.ts';

// rev-1 (old) and rev-2 (new, the update revision unless a case says otherwise); rev-3 for a third template.
type PodSpec = { rev?: 'old' | 'new' | 'third'; ready?: boolean; terminating?: boolean; stuck?: string };
const REVISIONS = { old: 'rev-1', new: 'rev-2', third: 'rev-3' } as const;

function sts(zone: string, replicas: number, pods: PodSpec[], extra: Partial<StatefulSetView> = {}): StatefulSetView {
  const name = `ingester-zone-${zone}`;
  const views: PodView[] = pods.map((p, i) => ({
    name: `${name}-${i}`,
    uid: `${name}-${i}-uid`,
    ordinal: i,
    revision: REVISIONS[p.rev ?? 'old'],
    ready: (p.ready ?? true) && !p.terminating,
    terminating: p.terminating ?? false,
    ...(p.stuck ? { stuckReason: p.stuck } : {}),
  }));
  return {
    name,
    namespace: 'ns',
    uid: `${name}-uid`,
    updateStrategy: 'OnDelete',
    replicas,
    statusReplicas: views.length,
    readyReplicas: views.filter((p) => p.ready).length,
    currentRevision: 'rev-1',
    updateRevision: 'rev-2',
    paused: false,
    pods: views,
    ...extra,
  };
}

const group = (...statefulSets: StatefulSetView[]): GroupSnapshot => ({
  namespace: 'ns',
  group: 'ingester',
  statefulSets,
});
const ready = (n: number, rev: 'old' | 'new' = 'old'): PodSpec[] => Array.from({ length: n }, () => ({ rev }));
const deleted = (g: GroupSnapshot) => planGroup(g).deletions.map((d) => d.pod);

describe('rollout planner: rollout-operator controller cases', () => {
  it("should return error if some StatefulSet don't have OnDelete update strategy", () => {
    const plan = planGroup(group(sts('a', 2, ready(2)), sts('b', 2, ready(2), { updateStrategy: 'RollingUpdate' })));
    assert.equal(plan.blocked?.statefulSet, 'ingester-zone-b');
    assert.equal(
      plan.blocked?.message,
      'StatefulSet ingester-zone-b has RollingUpdate update strategy while OnDelete is expected, skipping reconcile',
    );
    assert.deepEqual(plan.deletions, []);
  });

  it('should do nothing if multiple StatefulSets have not-Ready pods reported by the StatefulSet', () => {
    const g = group(sts('a', 2, [{}, { ready: false }]), sts('b', 2, [{ ready: false }, {}]), sts('c', 2, ready(2)));
    const plan = planGroup(g);
    assert.deepEqual(plan.deletions, []);
    assert.equal(plan.waiting?.code, 'several-statefulsets-not-ready');
    assert.equal(plan.errors.length, 0, 'a wait, not a failure');
  });

  it('should do nothing if multiple StatefulSets have not-Ready pods but NOT reported by the StatefulSet status yet', () => {
    const g = group(
      sts('a', 2, [{}, { ready: false }], { readyReplicas: 2 }),
      sts('b', 2, [{ ready: false }, {}], { readyReplicas: 2 }),
      sts('c', 2, ready(2)),
    );
    assert.deepEqual(deleted(g), []);
  });

  it('should do nothing if multiple StatefulSets have not-Ready pods but ONLY reported by 1 StatefulSet status', () => {
    const g = group(
      sts('a', 2, [{}, { ready: false }]),
      sts('b', 2, [{ ready: false }, {}], { readyReplicas: 2 }),
      sts('c', 2, ready(2)),
    );
    assert.deepEqual(deleted(g), []);
  });

  it('should do nothing if all pods are updated', () => {
    const plan = planGroup(
      group(...['a', 'b', 'c'].map((z) => sts(z, 2, ready(2, 'new'), { currentRevision: 'rev-2' }))),
    );
    assert.deepEqual(plan.deletions, []);
    assert.deepEqual(plan.revisionUpdates, []);
    assert.ok(plan.complete);
  });

  it('should delete pods that needs to be updated, honoring the configured max unavailable', () => {
    const g = group(sts('a', 3, ready(3), { maxUnavailableAnnotation: '2' }), sts('b', 3, ready(3)));
    assert.deepEqual(deleted(g), ['ingester-zone-a-0', 'ingester-zone-a-1']);
  });

  it('should default max unavailable to 1 if set to an invalid value', () => {
    const plan = planGroup(
      group(sts('a', 3, ready(3), { maxUnavailableAnnotation: 'invalid' }), sts('b', 3, ready(3))),
    );
    assert.deepEqual(
      plan.deletions.map((d) => d.pod),
      ['ingester-zone-a-0'],
    );
    assert.equal(
      plan.warnings[0]?.message,
      'annotation rollout-max-unavailable="invalid" is not a number or a percentage; using 1',
    );
  });

  it('should give priority to StatefulSet with not-Ready pods and take not-Ready pods in account when honoring max unavailable', () => {
    const g = group(
      sts('a', 3, ready(3)),
      sts('b', 3, [{ rev: 'new', ready: false }, {}, {}], { maxUnavailableAnnotation: '2' }),
    );
    assert.deepEqual(deleted(g), ['ingester-zone-b-1'], 'zone-b first, one more pod within its budget of 2');
  });

  it('should do nothing if the number of not-Ready pods >= max unavailable', () => {
    const plan = planGroup(
      group(
        sts('a', 3, ready(3)),
        sts('b', 3, [{ rev: 'new', ready: false }, { rev: 'new', ready: false }, {}], {
          maxUnavailableAnnotation: '2',
        }),
      ),
    );
    assert.deepEqual(plan.deletions, []);
    assert.equal(plan.waiting?.message, 'waiting: 2 pods not Ready in ingester-zone-b (max unavailable 2)');
  });

  it('should not delete pods which are already terminating', () => {
    const plan = planGroup(group(sts('a', 3, [{ terminating: true }, {}, {}])));
    assert.deepEqual(plan.deletions, []);
    assert.equal(plan.waiting?.code, 'pods-terminating');
  });

  it('should update StatefulSet once all pods have been updated and are Ready', () => {
    const plan = planGroup(
      group(sts('a', 2, ready(2, 'new')), sts('b', 2, ready(2, 'new'), { currentRevision: 'rev-2' })),
    );
    assert.deepEqual(plan.revisionUpdates, [{ statefulSet: 'ingester-zone-a', revision: 'rev-2' }]);
  });

  it('should not update StatefulSet if all pods have been updated but some are not-Ready', () => {
    const plan = planGroup(group(sts('a', 2, [{ rev: 'new' }, { rev: 'new', ready: false }])));
    assert.deepEqual(plan.revisionUpdates, []);
    assert.equal(plan.waiting?.code, 'updated-pods-not-ready');
  });

  it('should not update StatefulSet if there are missing pods but not reported by the StatefulSet yet', () => {
    const plan = planGroup(group(sts('a', 3, ready(2, 'new'), { statusReplicas: 3, readyReplicas: 3 })));
    assert.deepEqual(plan.revisionUpdates, []);
  });

  it("should not proceed with the next StatefulSet if there's another one with not-Ready pods reported by the StatefulSet", () => {
    const g = group(
      sts('a', 2, ready(2, 'new'), { currentRevision: 'rev-2', readyReplicas: 1 }),
      sts('b', 2, ready(2)),
    );
    assert.deepEqual(deleted(g), []);
  });

  it("should not proceed with the next StatefulSet if there's another one with not-Ready pods NOT reported by the StatefulSet", () => {
    const g = group(
      sts('a', 2, [{ rev: 'new' }, { rev: 'new', ready: false }], { currentRevision: 'rev-2', readyReplicas: 2 }),
      sts('b', 2, ready(2)),
    );
    assert.deepEqual(deleted(g), []);
  });

  it("should not proceed with the next StatefulSet if there's another one with missing pods", () => {
    const g = group(sts('a', 3, ready(2, 'new'), { currentRevision: 'rev-2' }), sts('b', 2, ready(2)));
    assert.deepEqual(deleted(g), []);
  });

  it('should not delete pods for a paused StatefulSet', () => {
    const plan = planGroup(group(sts('a', 2, ready(2), { paused: true })));
    assert.deepEqual(plan.deletions, []);
    assert.equal(plan.sets[0]?.state, 'paused');
  });

  it('should skip paused StatefulSet and roll out the next one in the group', () => {
    assert.deepEqual(deleted(group(sts('a', 2, ready(2), { paused: true }), sts('b', 2, ready(2)))), [
      'ingester-zone-b-0',
    ]);
  });

  it('should roll out normally if rollout-paused annotation is not set to true', () => {
    assert.deepEqual(deleted(group(sts('a', 2, ready(2)), sts('b', 2, ready(2)))), ['ingester-zone-a-0']);
  });
});

describe('rollout planner: better than rollout-operator', () => {
  it('replaces crash-looping old-revision pods at once, without spending the budget on healthy pods', () => {
    // Zone a was given a broken template (rev-1) that crash-loops; the fixed template is rev-2.
    const g = group(
      sts('a', 3, [{ ready: false, stuck: 'CrashLoopBackOff' }, { ready: false, stuck: 'CrashLoopBackOff' }, {}]),
      sts('b', 3, ready(3, 'new'), { currentRevision: 'rev-2' }),
    );
    const plan = planGroup(g);
    assert.deepEqual(
      plan.deletions.map((d) => [d.pod, d.reason, d.detail]),
      [
        ['ingester-zone-a-0', 'replace-unavailable', 'CrashLoopBackOff'],
        ['ingester-zone-a-1', 'replace-unavailable', 'CrashLoopBackOff'],
      ],
    );
  });

  it('holds the group when the one disrupted StatefulSet is paused, instead of rolling another zone', () => {
    const plan = planGroup(group(sts('a', 2, [{}, { ready: false }], { paused: true }), sts('b', 2, ready(2))));
    assert.deepEqual(plan.deletions, []);
    assert.equal(plan.waiting?.code, 'paused-statefulset-not-ready');
  });

  it('takes a percentage of spec.replicas, floored, at least 1', () => {
    assert.equal(deleted(group(sts('a', 10, ready(10), { maxUnavailableAnnotation: '25%' }))).length, 2);
    assert.equal(deleted(group(sts('a', 3, ready(3), { maxUnavailableAnnotation: '10%' }))).length, 1);
  });

  it('waits, without an error, for a StatefulSet whose status the StatefulSet controller has not written yet (rollout-operator: "currentRevision is empty", a failed reconcile)', () => {
    // A new group as kubectl apply creates it: zone a exists alone, no pods, no status.
    const alone = planGroup(
      group(sts('a', 1, [], { statusReplicas: 0, readyReplicas: 0, currentRevision: '', updateRevision: '' })),
    );
    assert.deepEqual(alone.errors, [], 'a wait, not a failure');
    assert.deepEqual(alone.deletions, []);
    assert.deepEqual(alone.revisionUpdates, []);
    assert.equal(alone.waiting?.code, STATUS_PENDING_WAIT);
    assert.equal(alone.waiting?.statefulSet, 'ingester-zone-a');
    assert.equal(
      alone.waiting?.message,
      'waiting: the StatefulSet controller has not written the status of ingester-zone-a yet (no currentRevision)',
    );
    assert.equal(alone.complete, false);
    assert.equal(alone.sets[0]?.state, 'waiting');
    assert.equal(groupStatus(alone, 0).phase, 'waiting');
    // Only updateRevision missing.
    assert.match(
      planGroup(group(sts('a', 2, ready(2), { updateRevision: '' }))).waiting?.message ?? '',
      /no updateRevision/,
    );
  });

  it('does not roll past a StatefulSet without status: the next zone waits too', () => {
    // Zone a up to date, zone b's status not written (its pods Ready), zone c needs an update: c is not rolled yet.
    const plan = planGroup(
      group(
        sts('a', 2, ready(2, 'new'), { currentRevision: 'rev-2' }),
        sts('b', 2, ready(2), { currentRevision: '', updateRevision: '' }),
        sts('c', 2, ready(2)),
      ),
    );
    assert.deepEqual(plan.deletions, []);
    assert.deepEqual(plan.errors, []);
    assert.equal(plan.waiting?.code, STATUS_PENDING_WAIT);
    assert.equal(plan.waiting?.statefulSet, 'ingester-zone-b');
    assert.deepEqual(
      plan.sets.map((s) => s.state),
      ['up-to-date', 'waiting', 'pending'],
    );
  });

  it('waits while the status is of an older generation than the spec (a template just changed): its updateRevision is stale', () => {
    // Pods match the stale updateRevision, so without the check zone a would look done
    // and zone b would be rolled before zone a, out of order.
    const stale = sts('a', 2, ready(2, 'new'), { currentRevision: 'rev-2', generation: 3, observedGeneration: 2 });
    const plan = planGroup(group(stale, sts('b', 2, ready(2))));
    assert.deepEqual(plan.deletions, []);
    assert.deepEqual(plan.errors, []);
    assert.equal(plan.waiting?.code, STATUS_PENDING_WAIT);
    assert.equal(
      plan.waiting?.message,
      'waiting: the status of ingester-zone-a is of generation 2, its spec of generation 3; the StatefulSet controller has not caught up yet',
    );
    assert.equal(plan.complete, false);
    // Caught up: zone a is done, zone b rolls.
    assert.deepEqual(deleted(group({ ...stale, observedGeneration: 3 }, sts('b', 2, ready(2)))), ['ingester-zone-b-0']);
    // No observedGeneration at all (revisions present): counts as written.
    assert.equal(statusPending(sts('a', 2, ready(2), { generation: 3 })), undefined);
  });

  it('does not advance currentRevision on a status older than the spec', () => {
    const plan = planGroup(group(sts('a', 2, ready(2, 'new'), { generation: 2, observedGeneration: 1 })));
    assert.deepEqual(plan.revisionUpdates, []);
    assert.equal(plan.waiting?.code, STATUS_PENDING_WAIT);
  });

  it('passes over a paused StatefulSet without status, as over any paused one', () => {
    assert.deepEqual(
      deleted(
        group(sts('a', 2, ready(2), { paused: true, currentRevision: '', updateRevision: '' }), sts('b', 2, ready(2))),
      ),
      ['ingester-zone-b-0'],
    );
  });

  it('summarises each StatefulSet for the group status', () => {
    const plan = planGroup(group(sts('a', 3, [{ rev: 'new' }, {}, {}]), sts('b', 3, ready(3))));
    assert.equal(plan.rolling, 'ingester-zone-a');
    assert.deepEqual(
      plan.sets.map((s) => [s.name, s.state, s.updated, s.ready, s.replicas]),
      [
        ['ingester-zone-a', 'rolling', 1, 3, 3],
        ['ingester-zone-b', 'pending', 0, 3, 3],
      ],
    );
  });
});

// rollout-operator v0.39 (#466) recovers from a failed update (#339): pods on
// the update revision that are not Ready, terminating pods and missing pods
// hold rollout-max-unavailable; terminating pods are never deleted again.
// Stateward goes at least as far in every case, and never further with Ready
// pods: an old-revision pod that is not Ready is replaced at once (it costs
// no availability), and still counts when Ready pods are taken.
describe('rollout planner: recovery from a failed update (rollout-operator v0.39, #466)', () => {
  const stuck: PodSpec = { rev: 'new', ready: false, stuck: 'CrashLoopBackOff' };

  it("plans TestRolloutRecoversFromFailedUpdate step by step: a broken revision stops at zone a's first pod; the fixed one replaces it and rolls every zone", () => {
    const zones = ['a', 'b', 'c'];
    // The broken template (rev-2) published in every zone: zone a's first pod goes.
    assert.deepEqual(deleted(group(...zones.map((z) => sts(z, 2, ready(2))))), ['ingester-zone-a-0']);
    // It comes back on rev-2 and crash-loops: it holds zone a's budget, the other zones wait.
    const broken = planGroup(group(sts('a', 2, [stuck, {}]), sts('b', 2, ready(2)), sts('c', 2, ready(2))));
    assert.deepEqual(broken.deletions, []);
    assert.equal(broken.waiting?.code, 'max-unavailable-reached');
    assert.equal(broken.waiting?.statefulSet, 'ingester-zone-a');
    // The fixed template (rev-3): the crash-looping pod is now on an old revision and is replaced first, alone.
    const fixed = { updateRevision: 'rev-3' };
    const recovering = planGroup(
      group(sts('a', 2, [stuck, {}], fixed), sts('b', 2, ready(2), fixed), sts('c', 2, ready(2), fixed)),
    );
    assert.deepEqual(
      recovering.deletions.map((d) => [d.pod, d.reason, d.detail]),
      [['ingester-zone-a-0', 'replace-unavailable', 'CrashLoopBackOff']],
    );
    // While it terminates it is not deleted again, and it still holds the budget.
    const terminating = planGroup(
      group(
        sts('a', 2, [{ rev: 'new', terminating: true }, {}], fixed),
        sts('b', 2, ready(2), fixed),
        sts('c', 2, ready(2), fixed),
      ),
    );
    assert.deepEqual(terminating.deletions, []);
    assert.equal(terminating.waiting?.code, 'pods-terminating');
    // Back on rev-3 and Ready: zone a goes on, then zones b and c.
    assert.deepEqual(
      deleted(
        group(sts('a', 2, [{ rev: 'third' }, {}], fixed), sts('b', 2, ready(2), fixed), sts('c', 2, ready(2), fixed)),
      ),
      ['ingester-zone-a-1'],
    );
    const zoneADone = { ...fixed, currentRevision: 'rev-3' };
    assert.deepEqual(
      deleted(
        group(
          sts('a', 2, [{ rev: 'third' }, { rev: 'third' }], zoneADone),
          sts('b', 2, ready(2), fixed),
          sts('c', 2, ready(2), fixed),
        ),
      ),
      ['ingester-zone-b-0'],
    );
  });

  it('holds rollout-max-unavailable with pods on the update revision that are not Ready, terminating pods and missing pods', () => {
    const budget2 = { maxUnavailableAnnotation: '2' };
    const waits = (set: StatefulSetView) => {
      const plan = planGroup(group(set));
      assert.deepEqual(plan.deletions, [], set.pods.map((p) => `${p.name} ${p.revision}`).join(', '));
      return plan.waiting?.code;
    };
    // One updated pod starting up and one old pod terminating: a budget of 2 is spent.
    assert.equal(
      waits(sts('a', 4, [{ rev: 'new', ready: false }, { terminating: true }, {}, {}], budget2)),
      'max-unavailable-reached',
    );
    // One updated pod starting up and one missing.
    assert.equal(waits(sts('a', 4, [{ rev: 'new', ready: false }, {}, {}], budget2)), 'max-unavailable-reached');
    // A terminating pod on the update revision counts too, and is not deleted again.
    assert.equal(waits(sts('a', 3, [{ rev: 'new', terminating: true }, {}, {}])), 'pods-terminating');
    // With room left, the next Ready old pod by ordinal goes.
    assert.deepEqual(deleted(group(sts('a', 4, [{ rev: 'new', ready: false }, {}, {}, {}], budget2))), [
      'ingester-zone-a-1',
    ]);
  });

  it('replaces a crash-looping old-revision pod even while updated pods that are not Ready yet spend the budget', () => {
    // rollout-operator v0.39 counts a-0 (updated, starting up) only; Stateward too, and a-1 costs nothing to replace.
    const plan = planGroup(
      group(sts('a', 3, [{ rev: 'new', ready: false }, { ready: false, stuck: 'CrashLoopBackOff' }, {}])),
    );
    assert.deepEqual(
      plan.deletions.map((d) => [d.pod, d.reason]),
      [['ingester-zone-a-1', 'replace-unavailable']],
    );
  });

  it('takes no Ready pod beyond the budget while an old-revision pod is down, whatever keeps it down', () => {
    // a-2 fails its readiness probe (no stuck reason). Deleting a-0 as well would leave two pods down with a budget of 1.
    const down: PodSpec[] = [{}, {}, { ready: false }];
    assert.deepEqual(
      planGroup(group(sts('a', 3, down))).deletions.map((d) => [d.pod, d.reason]),
      [['ingester-zone-a-2', 'replace-unavailable']],
    );
    assert.deepEqual(deleted(group(sts('a', 3, down, { maxUnavailableAnnotation: '2' }))), [
      'ingester-zone-a-2',
      'ingester-zone-a-0',
    ]);
  });

  it('never deletes a terminating pod again, whatever its revision or waiting reason', () => {
    for (const pod of [
      { terminating: true },
      { terminating: true, stuck: 'CrashLoopBackOff' },
      { rev: 'new', terminating: true },
    ] satisfies PodSpec[]) {
      assert.deepEqual(
        deleted(group(sts('a', 3, [pod, {}, {}], { maxUnavailableAnnotation: '3' }))),
        ['ingester-zone-a-1', 'ingester-zone-a-2'],
        JSON.stringify(pod),
      );
    }
  });
});
