// Delayed downscale's pure parts at replica counts the apiserver accepts but
// no StatefulSet reaches: spec.replicas is any int32, so the ordinal ranges
// [0, desired) and [desired, current) may span 2^31 ordinals. The work must
// follow the pods that exist, never the length of a range (found by fuzzing:
// the leader allocated 2^31-element arrays and died out of memory).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  delayedDownscaleCalls,
  delayedDownscaleDecision,
  ordinalsOf,
} from '../../../src/downscale/coordination/delay.ts';
import { PARSE_BUDGET_MS, within } from '../../fuzz/support.ts';

const INT32_MAX = 2 ** 31 - 1;
const NOW = Date.UTC(2024, 0, 2, 12, 0, 0);
const HOUR = 3_600_000;
const longAgo = Math.floor(NOW / 1000) - 7200;
const BUDGET_MS = PARSE_BUDGET_MS;

describe('delayed downscale at int32 replica counts', { timeout: 30_000 }, () => {
  it('plans calls to the pods that exist only, for spec.replicas 2^31-1 (was: a 2^31-element array per range, out of memory)', () => {
    const existing = [0, 1, 2];
    const down = within(BUDGET_MS, 'delayedDownscaleCalls', () =>
      delayedDownscaleCalls({ current: INT32_MAX, desired: 0, existing }),
    );
    assert.deepEqual(
      down,
      { cancel: [], prepare: [0, 1, 2], missing: 3 },
      'POST to the 3 pods; ordinal 3 is the first that cannot answer',
    );
    const partial = within(BUDGET_MS, 'delayedDownscaleCalls', () =>
      delayedDownscaleCalls({ current: INT32_MAX, desired: 2, existing }),
    );
    assert.deepEqual(partial, { cancel: [0, 1], prepare: [2], missing: 3 });
    const stay = within(BUDGET_MS, 'delayedDownscaleCalls', () =>
      delayedDownscaleCalls({ current: INT32_MAX, desired: INT32_MAX, existing }),
    );
    assert.deepEqual(
      stay,
      { cancel: [0, 1, 2], prepare: [] },
      'DELETE to the pods that stay, which are the 3 that exist',
    );
    const up = within(BUDGET_MS, 'delayedDownscaleCalls', () =>
      delayedDownscaleCalls({ current: 3, desired: INT32_MAX, existing }),
    );
    assert.deepEqual(up, { cancel: [0, 1, 2], prepare: [] });
    const top = within(BUDGET_MS, 'delayedDownscaleCalls', () =>
      delayedDownscaleCalls({
        current: INT32_MAX,
        desired: INT32_MAX - 3,
        existing: [0, INT32_MAX - 1, INT32_MAX - 2, INT32_MAX - 3],
      }),
    );
    assert.deepEqual(
      top,
      { cancel: [0], prepare: [INT32_MAX - 3, INT32_MAX - 2, INT32_MAX - 1] },
      'every leaving pod exists: nothing missing',
    );
  });

  it('names the first missing ordinal of the leaving range, and only cancels pods that exist', () => {
    assert.deepEqual(delayedDownscaleCalls({ current: 6, desired: 2, existing: [4, 0, 2, 5, 1] }), {
      cancel: [0, 1],
      prepare: [2, 4, 5],
      missing: 3,
    });
    assert.deepEqual(delayedDownscaleCalls({ current: 6, desired: 2, existing: [0, 1, 3, 4, 5] }), {
      cancel: [0, 1],
      prepare: [3, 4, 5],
      missing: 2,
    });
    assert.deepEqual(delayedDownscaleCalls({ current: 6, desired: 2, existing: [0, 2, 3, 4] }), {
      cancel: [0],
      prepare: [2, 3, 4],
      missing: 5,
    });
    assert.deepEqual(delayedDownscaleCalls({ current: 6, desired: 2, existing: [] }), {
      cancel: [],
      prepare: [],
      missing: 2,
    });
    assert.deepEqual(
      delayedDownscaleCalls({ current: 5, desired: 3, existing: [0, 1, 2, 3, 4, 7] }),
      { cancel: [0, 1, 2], prepare: [3, 4] },
      'a pod beyond current is not called',
    );
    assert.deepEqual(
      delayedDownscaleCalls({ current: 5, desired: 3, existing: [4, 4, 3, 0, 1, 2] }),
      { cancel: [0, 1, 2], prepare: [3, 4] },
      'duplicates once',
    );
  });

  it("reads ordinals from the names of the StatefulSet's pods only", () => {
    assert.deepEqual(
      ordinalsOf('ingester-zone-a', [
        'ingester-zone-a-0',
        'ingester-zone-a-12',
        'ingester-zone-a-01',
        'ingester-zone-a-',
        'ingester-zone-a-x',
        'ingester-zone-ab-1',
        'ingester-zone-a--1',
        'ingester-zone-a-99999999999999999999',
        'other-3',
      ]),
      [0, 12],
    );
  });

  it('decides in time proportional to the answers, not to current - desired', () => {
    const few = new Map<number, number | { error: string }>([
      [0, longAgo],
      [1, longAgo],
      [2, longAgo],
    ]);
    const missing = within(BUDGET_MS, 'delayedDownscaleDecision', () =>
      delayedDownscaleDecision({ current: INT32_MAX, desired: 0, timestamps: few, delayMs: HOUR, now: NOW }),
    );
    assert.deepEqual(missing, { error: 'failed prepare pods for delayed downscale: no response from pod ordinal 3' });
    const named = new Map(few).set(3, { error: 'pod ingester-zone-a-3 does not exist' });
    const gone = within(BUDGET_MS, 'delayedDownscaleDecision', () =>
      delayedDownscaleDecision({ current: INT32_MAX, desired: 0, timestamps: named, delayMs: HOUR, now: NOW }),
    );
    assert.deepEqual(gone, {
      error: 'failed prepare pods for delayed downscale: pod ordinal 3: pod ingester-zone-a-3 does not exist',
    });
    const none = within(BUDGET_MS, 'delayedDownscaleDecision', () =>
      delayedDownscaleDecision({
        current: INT32_MAX,
        desired: -INT32_MAX - 1,
        timestamps: new Map(),
        delayMs: HOUR,
        now: NOW,
      }),
    );
    assert.deepEqual(none, {
      error: `failed prepare pods for delayed downscale: no response from pod ordinal ${-INT32_MAX - 1}`,
    });
    const tail = new Map<number, number | { error: string }>([
      [INT32_MAX - 3, NOW / 1000],
      [INT32_MAX - 2, longAgo],
      [INT32_MAX - 1, longAgo],
    ]);
    const allowed = within(BUDGET_MS, 'delayedDownscaleDecision', () =>
      delayedDownscaleDecision({
        current: INT32_MAX,
        desired: INT32_MAX - 3,
        timestamps: tail,
        delayMs: HOUR,
        now: NOW,
      }),
    );
    assert.deepEqual(allowed, { allowed: INT32_MAX - 2 });
  });
});
