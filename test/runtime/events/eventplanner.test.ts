import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  EventPlanner,
  MAX_REMEMBERED,
  PATCH_INTERVAL_MS as INTERVAL,
  SERIES_WINDOW_MS as WINDOW,
  SPAM_BURST,
  SPAM_REFILL_MS,
} from '../../../src/runtime/events/eventplanner.ts';
import type { Outcome, Write } from '../../../src/runtime/events/eventplanner.ts';

const SEC = 1000;
const MIN = 60 * SEC;
const T0 = 1_700_000_000_000;

interface Payload {
  key: string;
  name: string;
}

/** One occurrence of series `key`, whose Event (if it creates one) is `name`; observed at `at` on both clocks. */
function observe(p: EventPlanner<Payload>, key: string, name: string, at: number, spamKey = 'obj') {
  return p.observe(key, spamKey, { key, name }, at, at);
}

const summary = (writes: Write<Payload>[]) => writes.map((w) => [w.payload.name, w.series?.count ?? 1]);

// --- deterministic behaviour ------------------------------------------------

describe('EventPlanner', () => {
  it('creates on the first occurrence and counts repeats until the interval has passed', () => {
    const p = new EventPlanner<Payload>();
    const first = observe(p, 'k', 'e1', T0);
    assert.equal(first.outcome, 'create');
    assert.deepEqual(first.writes, [{ payload: { key: 'k', name: 'e1' } }]);

    assert.deepEqual(observe(p, 'k', 'ignored', T0 + 1 * SEC), { outcome: 'coalesce', writes: [] });
    assert.equal(observe(p, 'k', 'ignored', T0 + 2 * SEC).outcome, 'coalesce');
    assert.equal(p.nextDueAt(), T0 + INTERVAL);
    assert.deepEqual(p.due(T0 + INTERVAL - 1), []);

    assert.deepEqual(p.due(T0 + INTERVAL), [
      { payload: { key: 'k', name: 'e1' }, series: { count: 3, lastObservedTime: T0 + 2 * SEC } },
    ]);
    assert.equal(p.nextDueAt(), undefined);
  });

  it('patches at once when the last write of the series is 30 s old', () => {
    const p = new EventPlanner<Payload>();
    observe(p, 'k', 'e1', T0);
    assert.equal(observe(p, 'k', 'x', T0 + INTERVAL - 1).outcome, 'coalesce');
    const plan = observe(p, 'k', 'x', T0 + INTERVAL);
    assert.equal(plan.outcome, 'patch');
    assert.deepEqual(plan.writes, [
      { payload: { key: 'k', name: 'e1' }, series: { count: 3, lastObservedTime: T0 + INTERVAL } },
    ]);
    // The next repeat waits for 30 s after that patch.
    assert.equal(observe(p, 'k', 'x', T0 + INTERVAL + 1).outcome, 'coalesce');
    assert.equal(p.nextDueAt(), T0 + 2 * INTERVAL);
  });

  it('writes lastObservedTime from the wall clock it is given, windows from the monotonic one', () => {
    const p = new EventPlanner<Payload>();
    p.observe('k', 'obj', { key: 'k', name: 'e1' }, 0, T0);
    p.observe('k', 'obj', { key: 'k', name: 'x' }, INTERVAL, T0 - 3 * MIN); // the wall clock stepped back
    assert.deepEqual(p.drain(INTERVAL), []);
    p.observe('k', 'obj', { key: 'k', name: 'x' }, INTERVAL + 1, T0 + 7);
    assert.deepEqual(p.drain(INTERVAL + 1)[0]?.series, { count: 3, lastObservedTime: T0 + 7 });
  });

  it('ends a series after 6 minutes of quiet, not before', () => {
    const p = new EventPlanner<Payload>();
    observe(p, 'k', 'e1', T0);
    assert.equal(observe(p, 'k', 'e2', T0 + WINDOW).outcome, 'patch'); // exactly 6 min: still the series
    const after = observe(p, 'k', 'e3', T0 + 2 * WINDOW + 1);
    assert.equal(after.outcome, 'create');
    assert.equal(after.writes[0]?.payload.name, 'e3');
  });

  it('writes an ended series its unwritten repeats before starting a new one', () => {
    const p = new EventPlanner<Payload>();
    observe(p, 'k', 'e1', T0);
    observe(p, 'k', 'x', T0 + SEC); // counted; due() is never called
    const plan = observe(p, 'k', 'e2', T0 + SEC + WINDOW + 1);
    assert.deepEqual(summary(plan.writes), [
      ['e1', 2],
      ['e2', 1],
    ]);
  });

  it('lets an object burst 25 creates, then one per 5 minutes; series patches are free', () => {
    assert.equal(SPAM_BURST, 25);
    assert.equal(SPAM_REFILL_MS, 5 * MIN);
    const p = new EventPlanner<Payload>();
    for (let i = 0; i < 25; i++) assert.equal(observe(p, `k${i}`, `e${i}`, T0).outcome, 'create');
    assert.equal(observe(p, 'k25', 'e25', T0).outcome, 'drop-spam');
    // The budget is spent, yet the existing series still aggregate and get written.
    assert.equal(observe(p, 'k0', 'x', T0 + INTERVAL).outcome, 'patch');
    assert.equal(observe(p, 'k1', 'x', T0 + INTERVAL + 1).outcome, 'patch');
    // Another object has its own budget.
    assert.equal(observe(p, 'other', 'o1', T0, 'obj2').outcome, 'create');

    assert.equal(observe(p, 'k26', 'e26', T0 + 5 * MIN - 1).outcome, 'drop-spam');
    assert.equal(observe(p, 'k26', 'e26', T0 + 5 * MIN).outcome, 'create');
    assert.equal(observe(p, 'k27', 'e27', T0 + 5 * MIN).outcome, 'drop-spam');
  });

  it('drains every unwritten count at once on shutdown', () => {
    const p = new EventPlanner<Payload>();
    observe(p, 'a', 'ea', T0);
    observe(p, 'b', 'eb', T0);
    observe(p, 'a', 'x', T0 + 1);
    observe(p, 'b', 'x', T0 + 2);
    observe(p, 'b', 'x', T0 + 3);
    assert.deepEqual(summary(p.drain(T0 + 4)), [
      ['ea', 2],
      ['eb', 3],
    ]);
    assert.equal(p.nextDueAt(), undefined);
    assert.deepEqual(p.due(T0 + 10 * MIN), []);
  });

  it(`remembers at most ${MAX_REMEMBERED} series, forgetting the least recently used`, () => {
    const p = new EventPlanner<Payload>();
    // Every series its own object, so the spam budget never interferes.
    for (let i = 0; i < MAX_REMEMBERED; i++) observe(p, `k${i}`, `e${i}`, T0, `obj${i}`);
    observe(p, 'k0', 'x', T0 + 1, 'obj0'); // k0 is now the most recent
    observe(p, 'new', 'en', T0 + 2, 'objn'); // forgets k1
    assert.equal(observe(p, 'k0', 'x', T0 + 3, 'obj0').outcome, 'coalesce');
    assert.equal(observe(p, `k${MAX_REMEMBERED - 1}`, 'x', T0 + 4, `obj${MAX_REMEMBERED - 1}`).outcome, 'coalesce');
    assert.equal(observe(p, 'k1', 'e1b', T0 + 5, 'obj1').outcome, 'create');
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
  w: Write<Payload>;
}

/**
 * Drives a planner as the recorder does: before each occurrence, due() runs at
 * every instant the planner asked for (ticks), or never (lazy); at the end
 * every pending series is flushed and ended series are pruned.
 */
function simulate(steps: Step[], ticks: boolean) {
  const p = new EventPlanner<Payload>();
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
    const plan = p.observe(key, spamKey, { key, name: `e${i}` }, t, t);
    observed.push({ t, key, spamKey, outcome: plan.outcome });
    for (const w of plan.writes) writes.push({ t, w });
  });
  runDue(Number.MAX_SAFE_INTEGER);
  const end = t + WINDOW + 1;
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

describe('EventPlanner properties', () => {
  it('writes one series at most once per 30 s: a create, then growing counts >= 2', () => {
    fc.assert(
      fc.property(steps(3, 1), fc.boolean(), (s, ticks) => {
        const { writes } = simulate(s, ticks);
        for (const [name, list] of groupBy(writes, (x) => x.w.payload.name)) {
          const [first, ...rest] = list;
          assert.ok(first);
          assert.equal(first.w.series, undefined, `${name} starts with its create`);
          assert.equal(new Set(list.map((x) => x.w.payload.key)).size, 1);
          let prev = first;
          let count = 1;
          for (const cur of rest) {
            const series = cur.w.series;
            assert.ok(series, `${name}: only its first write is a create`);
            assert.ok(cur.t - prev.t >= INTERVAL, `${name}: writes ${cur.t - prev.t} ms apart`);
            assert.ok(series.count > count && series.count >= 2);
            count = series.count;
            prev = cur;
          }
        }
      }),
    );
  });

  it('bounds the writes of one distinct event by 1 + T/30s + quiet gaps', () => {
    fc.assert(
      fc.property(steps(3, 1), fc.boolean(), (s, ticks) => {
        const { observed, writes } = simulate(s, ticks);
        for (const [key, list] of groupBy(writes, (x) => x.w.payload.key)) {
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
        const { observed } = simulate(s, ticks);
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
        const { observed, writes } = simulate(s, ticks);
        for (const [key, list] of groupBy(observed, (o) => o.key)) {
          // Model: occurrences split into runs wherever 6 minutes pass without one.
          const runs: number[] = [];
          list.forEach((o, i) => {
            if (i === 0 || o.t - list[i - 1]!.t > WINDOW) runs.push(1);
            else runs[runs.length - 1]! += 1;
          });
          const finals = [
            ...groupBy(
              writes.filter((x) => x.w.payload.key === key),
              (x) => x.w.payload.name,
            ).values(),
          ].map((ws) => Math.max(...ws.map((x) => x.w.series?.count ?? 1)));
          assert.deepEqual(finals, runs);
        }
      }),
    );
  });

  it('never lets creates exceed the token bucket, and drops only when it is empty', () => {
    const burst = SPAM_BURST;
    const refill = SPAM_REFILL_MS;
    fc.assert(
      fc.property(steps(60, 2, fc.integer({ min: 0, max: 20 * SEC })), fc.boolean(), (s, ticks) => {
        const { observed } = simulate(s, ticks);
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
});
