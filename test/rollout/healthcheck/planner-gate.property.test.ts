// The planner with health gates (issue 36), for every group fast-check can
// think of: a gated StatefulSet never starts without an open verdict, the
// first StatefulSet of a rollout is never gated, a group without the
// annotation plans as before, and the gate evaluates the right pods.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { gateFor, hasNotReadyPods, planGroup, type GateRequest, type Plan } from '../../../src/rollout/planner.ts';
import type { GroupSnapshot, StatefulSetView } from '../../../src/rollout/snapshot.ts';
import type { GateVerdict } from '../../../src/rollout/healthcheck/verdict.ts';
import type { PodView } from '../../../src/vocabulary/pods.ts';
import { assertReaching, SKIP } from '../../support/reach.ts';

const CHECK = 'ingester-health';
const T0 = Date.parse('2026-11-29T05:00:00Z');

/** How far a StatefulSet has rolled: all pods updated, some, or none. */
type Progress = 'done' | 'partial' | 'fresh';

const podArb = (set: string, ordinal: number, progress: Progress) =>
  fc
    .record({
      // Mostly as its StatefulSet's progress says; sometimes any revision (a pod the controller just recreated).
      revision: fc.oneof(
        {
          arbitrary:
            progress === 'partial' ? fc.constantFrom('new', 'old') : fc.constant(progress === 'done' ? 'new' : 'old'),
          weight: 8,
        },
        { arbitrary: fc.constantFrom('new', 'old', 'none'), weight: 1 },
      ),
      // Mostly Ready: a group with two disrupted StatefulSets waits before any gate.
      ready: fc.oneof({ arbitrary: fc.constant(true), weight: 20 }, { arbitrary: fc.constant(false), weight: 1 }),
      terminating: fc.oneof({ arbitrary: fc.constant(false), weight: 30 }, { arbitrary: fc.constant(true), weight: 1 }),
    })
    .map(({ revision, ready, terminating }): PodView => ({
      name: `${set}-${ordinal}`,
      uid: `${set}-${ordinal}-uid`,
      ordinal,
      revision: revision === 'none' ? '' : `${set}-${revision}`,
      ready: ready && !terminating,
      terminating,
    }));

/** The health-check fields: mostly bound to the check, a start stamp mostly where pods are updated. */
const gateFieldsArb = (progress: Progress) =>
  fc.record({
    bound: fc.oneof({ arbitrary: fc.constant(true), weight: 4 }, { arbitrary: fc.constant(false), weight: 1 }),
    stamp: fc.oneof(
      {
        arbitrary: fc.integer({ min: 0, max: 3_600_000 }).map((ms) => ({ startedAt: T0 + ms })),
        // A fresh StatefulSet carries a stamp too once it is about to roll: the stamp is written before the deletes.
        weight: progress === 'fresh' ? 1 : 6,
      },
      { arbitrary: fc.constant({ staleStamp: true }), weight: 1 },
      { arbitrary: fc.constant({}), weight: progress === 'fresh' ? 6 : 1 },
    ),
    bypassUntil: fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 6 },
      { arbitrary: fc.constantFrom('2026-11-29T07:00:00Z', 'tomorrow'), weight: 1 },
    ),
  });

const setArb = (zone: string, progress: Progress) =>
  fc
    .record({
      replicas: fc.integer({ min: 1, max: 4 }),
      missing: fc.oneof({ arbitrary: fc.constant(0), weight: 20 }, { arbitrary: fc.constant(1), weight: 1 }),
      strategy: fc.oneof(
        { arbitrary: fc.constant('OnDelete'), weight: 40 },
        { arbitrary: fc.constant('RollingUpdate'), weight: 1 },
      ),
      paused: fc.oneof({ arbitrary: fc.constant(false), weight: 12 }, { arbitrary: fc.constant(true), weight: 1 }),
      statusWritten: fc.oneof(
        { arbitrary: fc.constant(true), weight: 40 },
        { arbitrary: fc.constant(false), weight: 1 },
      ),
      annotation: fc.option(fc.constantFrom('1', '2', '50%'), { nil: undefined }),
      gate: gateFieldsArb(progress),
    })
    .chain((cfg) => {
      const name = `ingester-${zone}`;
      const count = Math.max(0, cfg.replicas - cfg.missing);
      return fc
        .tuple(...Array.from({ length: count }, (_, i) => podArb(name, i, progress)))
        .map((pods): StatefulSetView => {
          const ready = pods.filter((p) => p.ready).length;
          return {
            name,
            namespace: 'mimir',
            uid: `${name}-uid`,
            updateStrategy: cfg.strategy,
            replicas: cfg.replicas,
            statusReplicas: pods.length,
            readyReplicas: ready,
            currentRevision: progress === 'done' ? `${name}-new` : `${name}-old`,
            updateRevision: cfg.statusWritten ? `${name}-new` : '',
            generation: 2,
            observedGeneration: 2,
            ...(cfg.annotation !== undefined ? { maxUnavailableAnnotation: cfg.annotation } : {}),
            paused: cfg.paused,
            pods,
            ...(cfg.gate.bound ? { healthCheck: CHECK } : {}),
            ...cfg.gate.stamp,
            ...(cfg.gate.bypassUntil !== undefined ? { bypassUntil: cfg.gate.bypassUntil } : {}),
          };
        });
    });

const verdictArb = fc
  .constantFrom<GateVerdict['state']>('open', 'wait', 'pause')
  .map((state): GateVerdict => ({ state, message: `gate ${state}`, warnings: [], bypassed: false }));

const ZONES = ['zone-a', 'zone-b', 'zone-c', 'zone-d'];

/**
 * A group mid-rollout, most of the time in order (the first zones done, one
 * partly rolled, the rest not started), otherwise each zone's progress
 * drawn alone; with verdicts for some of its StatefulSets.
 */
const ordered = (zones: number, done: number, partial: boolean) =>
  ZONES.slice(0, zones).map((_, i): Progress => (i < done ? 'done' : i === done && partial ? 'partial' : 'fresh'));

const groupArb = fc
  .constantFrom(1, 2, 3, 3, 3, 4)
  .chain((zones) =>
    fc.oneof(
      // At a gate: the first zones rolled, the next not started.
      {
        weight: 2,
        arbitrary: fc.integer({ min: 1, max: Math.max(1, zones - 1) }).map((done) => ordered(zones, done, false)),
      },
      {
        weight: 2,
        arbitrary: fc.tuple(fc.integer({ min: 0, max: zones }), fc.boolean()).map(([d, p]) => ordered(zones, d, p)),
      },
      {
        weight: 1,
        arbitrary: fc.array(fc.constantFrom<Progress>('done', 'partial', 'fresh'), {
          minLength: zones,
          maxLength: zones,
        }),
      },
    ),
  )
  .chain((progress) =>
    fc.tuple(
      fc.tuple(...progress.map((p, i) => setArb(ZONES[i]!, p))),
      fc.array(fc.option(verdictArb, { nil: undefined }), { minLength: progress.length, maxLength: progress.length }),
      fc.boolean(),
    ),
  )
  .map(([sets, verdicts, withGates]): GroupSnapshot => {
    const gates = new Map<string, GateVerdict>();
    sets.forEach((s, i) => verdicts[i] && gates.set(s.name, verdicts[i]));
    return { namespace: 'mimir', group: 'ingester', statefulSets: sets, ...(withGates ? { gates } : {}) };
  });

/** The group as before issue 36: none of the health-check fields, no verdicts. */
function withoutHealthChecks(g: GroupSnapshot): GroupSnapshot {
  return {
    namespace: g.namespace,
    group: g.group,
    statefulSets: g.statefulSets.map(
      ({ healthCheck: _h, startedAt: _s, staleStamp: _t, bypassUntil: _b, ...rest }): StatefulSetView => rest,
    ),
  };
}

const deletedSets = (plan: Plan) => new Set(plan.deletions.map((d) => d.statefulSet));
const gatedSets = (g: GroupSnapshot) => g.statefulSets.filter((s) => gateFor(s, g.statefulSets) !== undefined);
const HEALTH_WAITS = new Set(['health-check-waiting', 'health-check-paused']);
const sorted = (names: readonly string[]) => [...names].sort();

describe('rollout planner with health gates (property)', () => {
  it('never deletes a pod of a gated StatefulSet unless its verdict is open', () => {
    assertReaching(
      groupArb,
      (g) => {
        const gated = gatedSets(g);
        if (gated.length === 0) return SKIP;
        const plan = planGroup(g);
        for (const set of gated) {
          if (plan.deletions.some((d) => d.statefulSet === set.name))
            assert.equal(g.gates?.get(set.name)?.state, 'open', `${set.name} rolled past its gate`);
        }
      },
      { numRuns: 3000, floor: 0.2 }, // about 43%
    );
  });

  it('holds the group at a gate that is not open: nothing deleted anywhere, and the wait says which check and why', () => {
    assertReaching(
      groupArb,
      (g) => {
        const plan = planGroup(g);
        if (!plan.gate) return SKIP;
        const verdict = g.gates?.get(plan.gate.statefulSet);
        assert.deepEqual(
          plan.gate,
          gateFor(
            g.statefulSets.find((s) => s.name === plan.gate!.statefulSet)!,
            g.statefulSets,
          ),
        );
        if (verdict?.state === 'open') {
          assert.ok(!plan.waiting || !HEALTH_WAITS.has(plan.waiting.code), 'an open gate holds nothing');
          return;
        }
        assert.deepEqual(plan.deletions, []);
        assert.equal(plan.rolling, undefined);
        assert.equal(plan.waiting?.code, verdict?.state === 'pause' ? 'health-check-paused' : 'health-check-waiting');
        assert.equal(plan.waiting?.statefulSet, plan.gate.statefulSet);
        assert.ok(plan.waiting?.message.includes(`health check ${CHECK}`), plan.waiting?.message);
        assert.ok(plan.waiting?.message.includes(verdict?.message ?? 'not evaluated yet'), plan.waiting?.message);
        assert.equal(plan.complete, false);
        assert.equal(plan.sets.find((s) => s.name === plan.gate!.statefulSet)?.state, 'waiting');
      },
      { numRuns: 3000, floor: 0.07 }, // about 15%
    );
  });

  it('never gates the first StatefulSet of a rollout: without another current start stamp there is no gate', () => {
    assertReaching(
      groupArb,
      (g) => {
        for (const set of g.statefulSets) {
          const othersStarted = g.statefulSets.some((s) => s.name !== set.name && s.startedAt !== undefined);
          if (!othersStarted) assert.equal(gateFor(set, g.statefulSets), undefined, set.name);
        }
        if (g.statefulSets.some((s) => s.startedAt !== undefined)) return SKIP;
        const plan = planGroup(g);
        assert.equal(plan.gate, undefined);
        assert.ok(!plan.waiting || !HEALTH_WAITS.has(plan.waiting.code), plan.waiting?.message);
      },
      { numRuns: 3000, floor: 0.08 }, // about 18%
    );
  });

  it('gates only a bound StatefulSet with no stamp of its own, once another started', () => {
    fc.assert(
      fc.property(groupArb, (g) => {
        for (const set of g.statefulSets) {
          const request = gateFor(set, g.statefulSets);
          if (!request) continue;
          assert.equal(set.healthCheck, CHECK);
          assert.equal(set.startedAt, undefined);
          assert.ok(g.statefulSets.some((s) => s.name !== set.name && s.startedAt !== undefined));
          assert.deepEqual(
            [request.statefulSet, request.revision, request.check],
            [set.name, set.updateRevision, CHECK],
          );
          assert.equal(request.bypassUntil, set.bypassUntil);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('evaluates the updated pods of the started StatefulSets against every not-updated live pod, from the earliest stamp', () => {
    assertReaching(
      groupArb,
      (g) => {
        const requests = g.statefulSets.flatMap((s) => gateFor(s, g.statefulSets) ?? []);
        if (requests.length === 0) return SKIP;
        for (const request of requests) {
          const started = g.statefulSets.filter((s) => s.name !== request.statefulSet && s.startedAt !== undefined);
          const live = (s: StatefulSetView) => s.pods.filter((p) => !p.terminating);
          const candidates = started.flatMap((s) => live(s).filter((p) => p.revision === s.updateRevision));
          const stable = g.statefulSets.flatMap((s) => live(s).filter((p) => p.revision !== s.updateRevision));
          assert.deepEqual(sorted(request.candidates), sorted(candidates.map((p) => p.name)), 'candidates');
          assert.deepEqual(sorted(request.stable), sorted(stable.map((p) => p.name)), 'stable');
          assert.equal(request.baselineAt, Math.min(...started.map((s) => s.startedAt!)), 'baselineAt');
          assert.ok(!request.candidates.some((p) => request.stable.includes(p)), 'no pod on both sides');
          assert.equal(new Set(request.candidates).size, request.candidates.length, 'no candidate twice');
        }
      },
      { numRuns: 3000, floor: 0.2 }, // about 41%
    );
  });
});

describe('rollout planner without health checks, or with every gate open (property)', () => {
  it('plans exactly as before when no StatefulSet is bound to a check, whatever stamps and verdicts there are', () => {
    fc.assert(
      fc.property(groupArb, (bound) => {
        const g: GroupSnapshot = {
          ...bound,
          statefulSets: bound.statefulSets.map(({ healthCheck: _, ...rest }) => rest),
        };
        const plan = planGroup(g);
        assert.deepEqual(plan, planGroup(withoutHealthChecks(g)));
        assert.ok(!('gate' in plan));
      }),
      { numRuns: 2000 },
    );
  });

  it('plans exactly as before, but for naming the gate, when every gate is open', () => {
    assertReaching(
      groupArb,
      (g) => {
        const open = new Map(
          g.statefulSets.map((s): [string, GateVerdict] => [
            s.name,
            { state: 'open', message: 'every check passed', warnings: [], bypassed: false },
          ]),
        );
        const { gate, ...plan } = planGroup({ ...g, gates: open });
        assert.deepEqual(plan, planGroup(withoutHealthChecks(g)));
        if (!gate) return SKIP;
      },
      { numRuns: 2000, floor: 0.07 }, // about 15%
    );
  });

  it('keeps the planner guarantees with gates: one StatefulSet at a time, others all Ready', () => {
    fc.assert(
      fc.property(groupArb, (g) => {
        const plan = planGroup(g);
        const rolled = deletedSets(plan);
        assert.ok(rolled.size <= 1);
        for (const name of rolled)
          for (const other of g.statefulSets.filter((s) => s.name !== name))
            assert.ok(!hasNotReadyPods(other), `${name} rolled while ${other.name} is not Ready`);
      }),
      { numRuns: 2000 },
    );
  });
});

/** A StatefulSet of `replicas` Ready pods on `revision`. */
function zone(name: string, revision: 'old' | 'new', fields: Partial<StatefulSetView> = {}): StatefulSetView {
  const pods = Array.from({ length: 3 }, (_, ordinal): PodView => ({
    name: `${name}-${ordinal}`,
    uid: `${name}-${ordinal}-uid`,
    ordinal,
    revision: `${name}-${revision}`,
    ready: true,
    terminating: false,
  }));
  return {
    name,
    namespace: 'mimir',
    uid: `${name}-uid`,
    updateStrategy: 'OnDelete',
    replicas: 3,
    statusReplicas: 3,
    readyReplicas: 3,
    currentRevision: `${name}-old`,
    updateRevision: `${name}-new`,
    generation: 2,
    observedGeneration: 2,
    paused: false,
    pods,
    healthCheck: CHECK,
    ...fields,
  };
}

describe('rollout planner with health gates: a three-zone rollout', () => {
  const a = zone('ingester-zone-a', 'new', { startedAt: T0 + 60_000 });
  const b = zone('ingester-zone-b', 'old');
  const c = zone('ingester-zone-c', 'old');
  const group = (gates?: Map<string, GateVerdict>, ...sets: StatefulSetView[]): GroupSnapshot => ({
    namespace: 'mimir',
    group: 'ingester',
    statefulSets: sets.length > 0 ? sets : [a, b, c],
    ...(gates ? { gates } : {}),
  });
  const verdict = (state: GateVerdict['state']): GateVerdict => ({
    state,
    message: `it is ${state}`,
    warnings: [],
    bypassed: false,
  });

  it('rolls zone a ungated, then holds zone b at its gate until the verdict is open', () => {
    const first = planGroup(group(undefined, zone('ingester-zone-a', 'old'), b, c));
    assert.equal(first.gate, undefined);
    assert.deepEqual(
      first.deletions.map((d) => d.pod),
      ['ingester-zone-a-0'],
    );

    const held = planGroup(group());
    assert.deepEqual(held.deletions, []);
    assert.deepEqual(held.gate, {
      statefulSet: 'ingester-zone-b',
      revision: 'ingester-zone-b-new',
      check: CHECK,
      candidates: ['ingester-zone-a-0', 'ingester-zone-a-1', 'ingester-zone-a-2'],
      stable: [
        'ingester-zone-b-0',
        'ingester-zone-b-1',
        'ingester-zone-b-2',
        'ingester-zone-c-0',
        'ingester-zone-c-1',
        'ingester-zone-c-2',
      ],
      baselineAt: T0 + 60_000,
    } satisfies GateRequest);
    assert.deepEqual(held.waiting, {
      code: 'health-check-waiting',
      statefulSet: 'ingester-zone-b',
      message: `waiting: ingester-zone-b waits for health check ${CHECK}: not evaluated yet`,
    });
    assert.equal(
      planGroup(group(new Map([['ingester-zone-b', verdict('wait')]]))).waiting?.code,
      'health-check-waiting',
    );
    const paused = planGroup(group(new Map([['ingester-zone-b', verdict('pause')]])));
    assert.deepEqual(paused.waiting, {
      code: 'health-check-paused',
      statefulSet: 'ingester-zone-b',
      message: `waiting: ingester-zone-b is held by health check ${CHECK}: it is pause`,
    });
    const open = planGroup(group(new Map([['ingester-zone-b', verdict('open')]])));
    assert.deepEqual(
      open.deletions.map((d) => d.pod),
      ['ingester-zone-b-0'],
    );
    assert.equal(open.gate?.statefulSet, 'ingester-zone-b');
    assert.equal(open.waiting, undefined);
  });

  it('does not gate zone b again once its stamp is written; a pod of it already updated (an upscale) does not open the gate', () => {
    const stamped = planGroup(group(undefined, a, zone('ingester-zone-b', 'old', { startedAt: T0 + 600_000 }), c));
    assert.equal(stamped.gate, undefined);
    assert.deepEqual(
      stamped.deletions.map((d) => d.pod),
      ['ingester-zone-b-0'],
    );
    // rollout-operator would let zone b roll ungated here; the stamp rule holds it.
    const bOne = zone('ingester-zone-b', 'old');
    bOne.pods[0] = { ...bOne.pods[0]!, revision: 'ingester-zone-b-new' };
    const upscaled = planGroup(group(undefined, a, bOne, c));
    assert.equal(upscaled.gate?.statefulSet, 'ingester-zone-b');
    assert.deepEqual(upscaled.deletions, []);
  });

  it('gates zone c with both rolled zones as candidates and the earlier stamp as the baseline time', () => {
    const b2 = zone('ingester-zone-b', 'new', { startedAt: T0 + 600_000 });
    const plan = planGroup(group(undefined, b2, c, a));
    assert.equal(plan.gate?.statefulSet, 'ingester-zone-c');
    assert.equal(plan.gate?.candidates.length, 6);
    assert.deepEqual(plan.gate?.stable, ['ingester-zone-c-0', 'ingester-zone-c-1', 'ingester-zone-c-2']);
    assert.equal(plan.gate?.baselineAt, T0 + 60_000);
  });

  it('passes over a paused zone b and gates zone c; an unbound zone b rolls ungated', () => {
    const plan = planGroup(group(undefined, a, zone('ingester-zone-b', 'old', { paused: true }), c));
    assert.equal(plan.gate?.statefulSet, 'ingester-zone-c');
    const { healthCheck: _, ...unbound } = b;
    const free = planGroup(group(undefined, a, unbound, c));
    assert.equal(free.gate, undefined);
    assert.deepEqual(
      free.deletions.map((d) => d.pod),
      ['ingester-zone-b-0'],
    );
  });

  it('ignores a stamp left for another revision: zone a rolls again as the first, ungated', () => {
    const staleA = zone('ingester-zone-a', 'old', { staleStamp: true });
    const plan = planGroup(group(undefined, staleA, b, c));
    assert.equal(plan.gate, undefined);
    assert.deepEqual(
      plan.deletions.map((d) => d.pod),
      ['ingester-zone-a-0'],
    );
  });

  it('carries the bypass annotation to the gate', () => {
    const plan = planGroup(
      group(undefined, a, zone('ingester-zone-b', 'old', { bypassUntil: '2026-11-29T07:00:00Z' }), c),
    );
    assert.equal(plan.gate?.bypassUntil, '2026-11-29T07:00:00Z');
    assert.equal(plan.waiting?.code, 'health-check-waiting', 'the planner does not decide the bypass itself');
  });
});
