import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { EventPlanner, defaultPlannerLimits } from '../../../src/runtime/events/planner.ts';
import type { Outcome, PlannerLimits, Write } from '../../../src/runtime/events/planner.ts';

const SEC = 1000;
const MIN = 60 * SEC;
const T0 = 1_700_000_000_000;
const WINDOW = defaultPlannerLimits.seriesWindowMs;
const INTERVAL = defaultPlannerLimits.patchIntervalMs;

function occ(key: string, name: string, spamKey = 'obj') {
  return { key, spamKey, name, namespace: 'ns', payload: name };
}

// --- deterministic behaviour ------------------------------------------------

describe('EventPlanner', () => {
  it('creates on the first occurrence and coalesces repeats until the interval has passed', () => {
    const p = new EventPlanner<string>();
    const first = p.observe(occ('k', 'e1'), T0);
    assert.equal(first.outcome, 'create');
    assert.deepEqual(first.writes, [{ op: 'create', key: 'k', name: 'e1', namespace: 'ns', payload: 'e1' }]);

    const second = p.observe(occ('k', 'ignored'), T0 + 1 * SEC);
    assert.deepEqual(second, { outcome: 'coalesce', writes: [], dueAt: T0 + INTERVAL });
    assert.equal(p.observe(occ('k', 'ignored'), T0 + 2 * SEC).outcome, 'coalesce');
    assert.equal(p.nextDueAt(), T0 + INTERVAL);
    assert.deepEqual(p.due(T0 + INTERVAL - 1), []);

    assert.deepEqual(p.due(T0 + INTERVAL), [
      { op: 'patch', key: 'k', name: 'e1', namespace: 'ns', payload: 'e1', count: 3, lastObservedTime: T0 + 2 * SEC },
    ]);
    assert.equal(p.nextDueAt(), undefined);
    assert.equal(p.pendingCount, 0);
  });

  it('patches at once when the last write of the series is 30 s old', () => {
    const p = new EventPlanner<string>();
    p.observe(occ('k', 'e1'), T0);
    assert.equal(p.observe(occ('k', 'x'), T0 + INTERVAL - 1).outcome, 'coalesce');
    const plan = p.observe(occ('k', 'x'), T0 + INTERVAL);
    assert.equal(plan.outcome, 'patch');
    assert.deepEqual(plan.writes, [
      { op: 'patch', key: 'k', name: 'e1', namespace: 'ns', payload: 'e1', count: 3, lastObservedTime: T0 + INTERVAL },
    ]);
    assert.equal(p.pendingCount, 0);
    // The next repeat waits for 30 s after that patch.
    assert.deepEqual(p.observe(occ('k', 'x'), T0 + INTERVAL + 1).dueAt, T0 + 2 * INTERVAL);
  });

  it('ends a series after 6 minutes of quiet, not before', () => {
    const p = new EventPlanner<string>();
    p.observe(occ('k', 'e1'), T0);
    assert.equal(p.observe(occ('k', 'e2'), T0 + WINDOW).outcome, 'patch'); // exactly 6 min: still the series
    const after = p.observe(occ('k', 'e3'), T0 + 2 * WINDOW + 1);
    assert.equal(after.outcome, 'create');
    assert.equal(after.writes[0]?.name, 'e3');
  });

  it('writes an ended series its unwritten repeats before starting a new one', () => {
    const p = new EventPlanner<string>();
    p.observe(occ('k', 'e1'), T0);
    p.observe(occ('k', 'x'), T0 + SEC); // coalesced; due() is never called
    const plan = p.observe(occ('k', 'e2'), T0 + SEC + WINDOW + 1);
    assert.deepEqual(
      plan.writes.map((w) => [w.op, w.name, w.op === 'patch' ? w.count : 1]),
      [
        ['patch', 'e1', 2],
        ['create', 'e2', 1],
      ],
    );
  });

  it('lets an object burst 25 creates, then one per 5 minutes; series patches are free', () => {
    const p = new EventPlanner<string>();
    for (let i = 0; i < 25; i++) assert.equal(p.observe(occ(`k${i}`, `e${i}`), T0).outcome, 'create');
    assert.equal(p.observe(occ('k25', 'e25'), T0).outcome, 'drop-spam');
    // The budget is spent, yet the existing series still aggregate and get written.
    assert.equal(p.observe(occ('k0', 'x'), T0 + INTERVAL).outcome, 'patch');
    assert.equal(p.observe(occ('k1', 'x'), T0 + INTERVAL + 1).outcome, 'patch');
    // Another object has its own budget.
    assert.equal(p.observe(occ('other', 'o1', 'obj2'), T0).outcome, 'create');

    assert.equal(p.observe(occ('k26', 'e26'), T0 + 5 * MIN - 1).outcome, 'drop-spam');
    assert.equal(p.observe(occ('k26', 'e26'), T0 + 5 * MIN).outcome, 'create');
    assert.equal(p.observe(occ('k27', 'e27'), T0 + 5 * MIN).outcome, 'drop-spam');
  });

  it('drains every pending series at once on shutdown', () => {
    const p = new EventPlanner<string>();
    p.observe(occ('a', 'ea'), T0);
    p.observe(occ('b', 'eb'), T0);
    p.observe(occ('a', 'x'), T0 + 1);
    p.observe(occ('b', 'x'), T0 + 2);
    p.observe(occ('b', 'x'), T0 + 3);
    const drained = p.drain(T0 + 4);
    assert.deepEqual(
      drained.map((w) => [w.name, w.count]),
      [
        ['ea', 2],
        ['eb', 3],
      ],
    );
    assert.equal(p.pendingCount, 0);
    assert.deepEqual(p.due(T0 + 10 * MIN), []);
  });

  it('forgets the least recently used series beyond maxSeries', () => {
    const p = new EventPlanner<string>({ maxSeries: 2 });
    p.observe(occ('a', 'ea'), T0);
    p.observe(occ('b', 'eb'), T0 + 1);
    p.observe(occ('a', 'x'), T0 + 2); // a is now the most recent
    p.observe(occ('c', 'ec'), T0 + 3); // evicts b
    assert.equal(p.size, 2);
    assert.equal(p.observe(occ('a', 'x'), T0 + 4).outcome, 'coalesce');
    assert.equal(p.observe(occ('b', 'eb2'), T0 + 5).outcome, 'create');
  });

  it('rejects nonsensical limits', () => {
    assert.throws(() => new EventPlanner({ maxSeries: 0 }), /maxSeries/);
    assert.throws(() => new EventPlanner({ patchIntervalMs: -1 }), /patchIntervalMs/);
    assert.throws(() => new EventPlanner({ spamBurst: 1.5 }), /spamBurst/);
  });
});

// --- properties ---------------------------------------------------------------

interface Step {
  dt: number;
  key: number;
  spam: number;
}

interface Observed {
  t: number;
  key: string;
  spamKey: string;
  outcome: Outcome;
}

interface TimedWrite {
  t: number;
  w: Write<string>;
}

/**
 * Drives a planner as the recorder does: before each occurrence, due() runs at
 * every instant the planner asked for (ticks), or never (lazy); at the end
 * every pending series is flushed and ended series are pruned.
 */
function simulate(limits: Partial<PlannerLimits>, steps: Step[], ticks: boolean) {
  const p = new EventPlanner<string>(limits);
  const observed: Observed[] = [];
  const writes: TimedWrite[] = [];
  const runDue = (until: number) => {
    for (let at = p.nextDueAt(); at !== undefined && at <= until; at = p.nextDueAt()) {
      for (const w of p.due(at)) writes.push({ t: at, w });
    }
  };
  let t = T0;
  steps.forEach((s, i) => {
    t += s.dt;
    if (ticks) runDue(t);
    const key = `k${s.key}`;
    const spamKey = `s${s.spam}`;
    const plan = p.observe({ key, spamKey, name: `e${i}`, namespace: 'ns', payload: key }, t);
    observed.push({ t, key, spamKey, outcome: plan.outcome });
    for (const w of plan.writes) writes.push({ t, w });
  });
  runDue(Number.MAX_SAFE_INTEGER);
  const end = t + p.limits.seriesWindowMs + 1;
  for (const w of p.due(end)) writes.push({ t: end, w });
  return { p, observed, writes };
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k) ?? [];
    list.push(item);
    out.set(k, list);
  }
  return out;
}

const dt = fc.oneof(
  fc.integer({ min: 0, max: 2 * SEC }), // tight loop
  fc.integer({ min: 0, max: 2 * MIN }), // requeues
  fc.integer({ min: 5 * MIN, max: 8 * MIN }), // around the end of a series
);
const steps = (keys: number, spams: number, delta: fc.Arbitrary<number> = dt) =>
  fc.array(
    fc.record({ dt: delta, key: fc.integer({ min: 0, max: keys - 1 }), spam: fc.integer({ min: 0, max: spams - 1 }) }),
    { maxLength: 150, size: 'max' },
  );
const noSpam: Partial<PlannerLimits> = { spamBurst: 1_000_000 };

describe('EventPlanner properties', () => {
  it('writes one series at most once per 30 s: a create, then growing counts >= 2', () => {
    fc.assert(
      fc.property(steps(3, 1), fc.boolean(), (s, ticks) => {
        const { writes } = simulate(noSpam, s, ticks);
        for (const [name, list] of groupBy(writes, (x) => x.w.name)) {
          const [first, ...rest] = list;
          assert.ok(first);
          assert.equal(first.w.op, 'create', name);
          assert.equal(new Set(list.map((x) => x.w.key)).size, 1);
          let prev = first;
          let count = 1;
          for (const cur of rest) {
            assert.equal(cur.w.op, 'patch');
            if (cur.w.op !== 'patch') continue;
            assert.ok(cur.t - prev.t >= INTERVAL, `${name}: writes ${cur.t - prev.t} ms apart`);
            assert.ok(cur.w.count > count && cur.w.count >= 2);
            count = cur.w.count;
            prev = cur;
          }
        }
      }),
    );
  });

  it('bounds the writes of one distinct event by 1 + T/30s + quiet gaps', () => {
    fc.assert(
      fc.property(steps(3, 1), fc.boolean(), (s, ticks) => {
        const { observed, writes } = simulate(noSpam, s, ticks);
        for (const [key, list] of groupBy(writes, (x) => x.w.key)) {
          const times = observed.filter((o) => o.key === key).map((o) => o.t);
          const gaps = times.slice(1).filter((t, i) => t - times[i]! > WINDOW).length;
          const span = list.at(-1)!.t - list[0]!.t;
          assert.ok(
            list.length <= 1 + Math.floor(span / INTERVAL) + gaps,
            `${key}: ${list.length} writes over ${span} ms with ${gaps} gaps`,
          );
        }
      }),
    );
  });

  it('starts a new Event exactly when a series had 6 minutes of quiet', () => {
    fc.assert(
      fc.property(steps(3, 1), fc.boolean(), (s, ticks) => {
        const { observed } = simulate(noSpam, s, ticks);
        for (const list of groupBy(observed, (o) => o.key).values()) {
          list.forEach((o, i) => {
            const quiet = i === 0 || o.t - list[i - 1]!.t > WINDOW;
            assert.equal(o.outcome === 'create', quiet);
          });
        }
      }),
    );
  });

  it('writes each Event a final count equal to the occurrences it aggregated', () => {
    fc.assert(
      fc.property(steps(3, 1), fc.boolean(), (s, ticks) => {
        const { observed, writes } = simulate(noSpam, s, ticks);
        for (const [key, list] of groupBy(observed, (o) => o.key)) {
          // Model: occurrences split into runs wherever 6 minutes pass without one.
          const runs: number[] = [];
          list.forEach((o, i) => {
            if (i === 0 || o.t - list[i - 1]!.t > WINDOW) runs.push(1);
            else runs[runs.length - 1]! += 1;
          });
          const finals = [
            ...groupBy(
              writes.filter((x) => x.w.key === key),
              (x) => x.w.name,
            ).values(),
          ].map((ws) => Math.max(...ws.map((x) => (x.w.op === 'patch' ? x.w.count : 1))));
          assert.deepEqual(finals, runs);
        }
      }),
    );
  });

  it('never lets creates exceed the token bucket, and drops only when it is empty', () => {
    const limits: Partial<PlannerLimits> = { spamBurst: 3, spamRefillMs: 1000 };
    const burst = 3;
    const refill = 1000;
    fc.assert(
      fc.property(steps(40, 2, fc.integer({ min: 0, max: 1500 })), fc.boolean(), (s, ticks) => {
        const { observed } = simulate(limits, s, ticks);
        for (const list of groupBy(observed, (o) => o.spamKey).values()) {
          const creates: number[] = [];
          for (const o of list) {
            if (o.outcome === 'drop-spam') {
              // Empty bucket: since some earlier create, more tokens went than came back.
              const empty = creates.some((ti, i) => (creates.length - i) * refill > (burst - 1) * refill + (o.t - ti));
              assert.ok(empty, `dropped at ${o.t} with creates at ${creates.join(',')}`);
            }
            if (o.outcome === 'create') creates.push(o.t);
          }
          for (let i = 0; i < creates.length; i++) {
            for (let j = i; j < creates.length; j++) {
              assert.ok(
                (j - i + 1) * refill <= burst * refill + (creates[j]! - creates[i]!),
                `creates ${i}..${j} over budget`,
              );
            }
          }
        }
      }),
    );
  });

  it('keeps its memory bounded by maxSeries and maxBuckets', () => {
    fc.assert(
      fc.property(steps(60, 30), (s) => {
        const p = new EventPlanner<string>({ maxSeries: 8, maxBuckets: 4 });
        let t = T0;
        s.forEach((step, i) => {
          t += step.dt;
          p.observe({ key: `k${step.key}`, spamKey: `s${step.spam}`, name: `e${i}`, namespace: 'ns', payload: '' }, t);
          assert.ok(p.size <= 8);
          assert.ok(p.bucketCount <= 4);
        });
      }),
    );
  });
});
