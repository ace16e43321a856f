// Fuzzing delayed downscale's planning and decision with the replica counts
// a StatefulSet may carry: spec.replicas and the desired count are any
// int32, while only a few pods exist (any of them, anywhere in the range).
// For every input:
// - planning and deciding return within a time bound (work follows the pods
//   that exist, never the length of an ordinal range);
// - calls go only to pods that exist: DELETE to those staying, POST to those
//   leaving, and the first ordinal of the leaving range without a pod is
//   named (it cannot answer);
// - the decision never removes more than the consecutive pods at the top of
//   the range that were prepared at least the delay ago.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { delayedDownscaleCalls, delayedDownscaleDecision, ordinalsOf } from '../../src/downscale/coordination/delay.ts';
import { params, within, PARSE_BUDGET_MS } from './support.ts';
import { assertReaching, SKIP } from '../support/reach.ts';

const BUDGET_MS = PARSE_BUDGET_MS;
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const NOW = Date.UTC(2024, 0, 2, 12, 0, 0);
const STS = 'ingester-zone-a';

const int32 = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: -2, max: 12 }) },
  { weight: 2, arbitrary: fc.integer({ min: INT32_MIN, max: INT32_MAX }) },
  { weight: 1, arbitrary: fc.constantFrom(INT32_MIN, -1, 0, INT32_MAX - 1, INT32_MAX) },
);

/** An ordinal near 0, current or desired (where the boundaries are), or anywhere. */
const nearby = fc.record({
  base: fc.constantFrom('zero', 'current', 'desired', 'anywhere'),
  offset: fc.integer({ min: -4, max: 4 }),
  anywhere: fc.integer({ min: 0, max: INT32_MAX }),
});

/** What a pod answers a POST: a timestamp this many seconds ago, or an error. */
const answer = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0, max: 8 * 3600 }).map((age) => Math.floor(NOW / 1000) - age) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<number | { error: string }>(
      0,
      { error: 'HTTP POST request returned non-2xx status code: 500' },
      { error: 'no answer within 5000 ms' },
    ),
  },
);

const scenario = fc.record({
  current: int32,
  desired: int32,
  /** Often a downscale by a few: desired = current − this. */
  by: fc.option(fc.integer({ min: -1, max: 8 }), { freq: 2 }),
  pods: fc.array(nearby, { maxLength: 24 }),
  /** Often every pod of the leaving range exists (when it is short), but for these holes. */
  fill: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
  holes: fc.array(fc.integer({ min: 0, max: 12 }), { maxLength: 1 }),
  /** Names in the cache that are not pods of the StatefulSet (or not canonical ordinals). */
  strangers: fc.array(
    fc.constantFrom(
      `${STS}-`,
      `${STS}-01`,
      `${STS}--1`,
      `${STS}-x`,
      `${STS}-a-1`,
      'other-0',
      `${STS}-99999999999999999999`,
    ),
    { maxLength: 3 },
  ),
  answers: fc.array(answer, { minLength: 24, maxLength: 24 }),
  delaySeconds: fc.integer({ min: 1, max: 4 * 3600 }),
});

describe('fuzz: delayed downscale at any int32 replica counts', { timeout: 120_000 }, () => {
  it('plans and decides in time, calls only pods that exist, and removes only the prepared tail', () => {
    assertReaching(
      scenario,
      ({ current, desired: anyDesired, by, pods, fill, holes, strangers, answers, delaySeconds }) => {
        const desired = by === null ? anyDesired : Math.max(INT32_MIN, current - by);
        const ordinal = ({ base, offset, anywhere }: { base: string; offset: number; anywhere: number }) =>
          base === 'anywhere' ? anywhere : (base === 'zero' ? 0 : base === 'current' ? current : desired) + offset;
        const filled =
          fill && current - desired <= 12
            ? Array.from(
                { length: Math.max(0, current - Math.max(desired, 0)) },
                (_, i) => Math.max(desired, 0) + i,
              ).filter((o) => !holes.includes(current - 1 - o))
            : [];
        const names = [
          ...[...pods.map(ordinal), ...filled].filter((o) => o >= 0 && o <= INT32_MAX).map((o) => `${STS}-${o}`),
          ...strangers,
        ];
        const existing = new Set(within(BUDGET_MS, 'ordinalsOf', () => ordinalsOf(STS, names)));
        for (const name of names)
          if (/^ingester-zone-a-(0|[1-9][0-9]{0,9})$/.test(name))
            assert.ok(existing.has(Number(name.slice(STS.length + 1))), name);
        assert.ok(existing.size <= names.length);

        const calls = within(BUDGET_MS, 'delayedDownscaleCalls', () =>
          delayedDownscaleCalls({ current, desired, existing }),
        );
        // Only pods that exist, each once, in order; DELETE to those staying, POST to those leaving.
        const staying = Math.min(current, desired);
        for (const o of calls.cancel) assert.ok(existing.has(o) && o < staying, `DELETE to ${o}`);
        for (const o of calls.prepare) assert.ok(existing.has(o) && o >= desired && o < current, `POST to ${o}`);
        for (const list of [calls.cancel, calls.prepare])
          for (let i = 1; i < list.length; i++) assert.ok(list[i - 1]! < list[i]!);
        assert.equal(
          calls.cancel.length,
          [...existing].filter((o) => o < staying).length,
          'every staying pod is told to cancel',
        );
        assert.equal(
          calls.prepare.length,
          [...existing].filter((o) => o >= desired && o < current).length,
          'every leaving pod is asked',
        );
        if (desired >= current) assert.equal(calls.missing, undefined);
        else if (calls.missing === undefined)
          assert.equal(calls.prepare.length, current - desired, 'nothing missing: every leaving pod exists');
        else {
          assert.ok(
            calls.missing >= desired && calls.missing < current && !existing.has(calls.missing),
            `missing ${calls.missing}`,
          );
          assert.equal(
            calls.prepare.filter((o) => o < calls.missing!).length,
            calls.missing - desired,
            'the first missing ordinal',
          );
        }

        // The answers, as DelayedDownscaleCalls hands them to the decision.
        const results = new Map<number, number | { error: string }>(
          calls.prepare.map((o, i) => [o, answers[i % answers.length]!]),
        );
        if (calls.missing !== undefined)
          results.set(calls.missing, { error: `pod ${STS}-${calls.missing} does not exist` });
        const delayMs = delaySeconds * 1000;
        const decision = within(BUDGET_MS, 'delayedDownscaleDecision', () =>
          delayedDownscaleDecision({ current, desired, timestamps: results, delayMs, now: NOW }),
        );
        if (desired >= current) {
          assert.deepEqual(decision, { allowed: desired });
          return SKIP;
        }
        if ('error' in decision) {
          assert.match(decision.error, /^(failed prepare pods for delayed downscale: |configured downscale delay )/);
          if (calls.missing !== undefined)
            assert.ok(decision.error.startsWith('failed prepare pods'), 'a pod that does not exist cannot answer');
          return SKIP;
        }
        // Counted as reaching from here: a downscale allowed, the prepared tail it removes (~8% of scenarios).
        // The consecutive prepared pods from the top, past the delay (walks at most the pods asked).
        let tail = 0;
        for (let o = current - 1; o >= desired; o--) {
          const result = results.get(o);
          if (typeof result !== 'number' || result === 0 || NOW - result * 1000 < delayMs) break;
          tail++;
        }
        assert.ok(decision.allowed >= desired && decision.allowed < current, `allowed ${decision.allowed}`);
        assert.ok(
          current - decision.allowed <= tail,
          `removes ${current - decision.allowed} pods, only ${tail} prepared at the top`,
        );
        assert.equal(calls.missing, undefined, 'a downscale goes ahead only when every leaving pod answered');
      },
      { ...params(1000, 51), floor: 0.03 },
    );
  });
});
