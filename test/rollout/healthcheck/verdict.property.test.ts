// The health gate's decision (issue 36): given check results over time, no
// transition happens while any Pause-policy check fails or lacks its
// consecutive passes, and every transition is preceded by passing
// evaluations or a recorded override. With both thresholds at 1 it is
// rollout-operator's rule.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { POLICIES, type CheckSpec, type Policy } from '../../../src/rollout/healthcheck/resource.ts';
import {
  bypassActive,
  decideCheck,
  decideGate,
  MAX_BYPASS_MS,
  policyFor,
  tally,
  type CheckResult,
  type CheckTally,
  type GateVerdict,
  type Outcome,
} from '../../../src/rollout/healthcheck/verdict.ts';
import { assertReaching, SKIP } from '../../support/reach.ts';

const OUTCOMES: readonly Outcome[] = ['pass', 'fail', 'no_data', 'error'];

function spec(name: string, fields: Partial<CheckSpec> = {}): CheckSpec {
  return {
    name,
    query: 'q{${targetMatchers}}[${range}]',
    successQuery: '${current} < bool 1',
    currentRangeMs: 300_000,
    baselineRangeMs: 600_000,
    queryTimeoutMs: 10_000,
    queryRetries: 3,
    onFailure: 'Pause',
    onNoData: 'Pause',
    onError: 'Pause',
    successThreshold: 1,
    failureThreshold: 1,
    disabled: false,
    ...fields,
  };
}

const result = (check: string, outcome: Outcome, at = 0): CheckResult => ({
  check,
  outcome,
  message: `${outcome} at ${at}`,
  at,
});

const policyArb = fc.constantFrom<Policy>(...POLICIES);

const checksArb = (thresholds: fc.Arbitrary<number>) =>
  fc
    .array(
      fc.record({
        successThreshold: thresholds,
        failureThreshold: thresholds,
        onFailure: policyArb,
        onNoData: policyArb,
        onError: policyArb,
        disabled: fc.oneof({ arbitrary: fc.constant(false), weight: 5 }, { arbitrary: fc.constant(true), weight: 1 }),
      }),
      { minLength: 1, maxLength: 4 },
    )
    .map((fields) => fields.map((f, i) => spec(`check-${i}`, f)));

/** One evaluation of the gate: whether the bake time had passed, and each check's outcome (undefined: not run). */
interface Round {
  baked: boolean;
  outcomes: (Outcome | undefined)[];
}

/**
 * Checks and their evaluations over time. Outcomes lean towards passes so
 * that runs of passes long enough to open the gate are common; a check is
 * sometimes not run in a round (the gate stops at the first Pause, leaving
 * later checks' tallies as they were). The bake time is over from some
 * round on, as it is for a gate held long enough, and sometimes not yet.
 */
const historyArb = (thresholds: fc.Arbitrary<number> = fc.integer({ min: 1, max: 3 }), passWeight = 6) =>
  fc
    .tuple(checksArb(thresholds), fc.integer({ min: 0, max: 12 }), fc.boolean())
    .chain(([checks, length, bypass]) =>
      fc.record({
        checks: fc.constant(checks),
        bypass: fc.constant(bypass),
        bakedFrom: fc.integer({ min: 0, max: length + 1 }),
        rounds: fc.array(
          fc.array(
            fc.oneof(
              { arbitrary: fc.constant<Outcome>('pass'), weight: passWeight },
              { arbitrary: fc.constantFrom<Outcome>('fail', 'no_data', 'error'), weight: 3 },
              { arbitrary: fc.constant(undefined), weight: 1 },
            ),
            { minLength: checks.length, maxLength: checks.length },
          ),
          { minLength: length, maxLength: length },
        ),
      }),
    )
    .map(({ checks, bypass, bakedFrom, rounds }) => ({
      checks,
      bypass,
      rounds: rounds.map((outcomes, i): Round => ({ baked: i >= bakedFrom, outcomes })),
      // The bake time's state at the decision: over when the last round was baked.
      bakeLeftMs: bakedFrom <= rounds.length - 1 || (rounds.length === 0 && bakedFrom === 0) ? 0 : 45_000,
    }));

type History = { outcome: Outcome; baked: boolean }[];

/** Folds rounds up to `upTo` (exclusive) with tally, as the executor does, and keeps each check's own history. */
function replay(checks: readonly CheckSpec[], rounds: readonly Round[], upTo = rounds.length) {
  const tallies = new Map<string, CheckTally>();
  const histories = new Map<string, History>(checks.map((c) => [c.name, []]));
  rounds.slice(0, upTo).forEach((round, r) => {
    checks.forEach((check, i) => {
      const outcome = round.outcomes[i];
      if (outcome === undefined || check.disabled) return; // the executor does not run a disabled check
      tallies.set(check.name, tally(tallies.get(check.name), result(check.name, outcome, r), round.baked));
      histories.get(check.name)!.push({ outcome, baked: round.baked });
    });
  });
  return { tallies, histories };
}

const isMiss = (e: { outcome: Outcome }) => e.outcome !== 'pass';

/** How many entries at the end of `history` satisfy `p`, in a row. */
function trailing(history: History, p: (e: History[number]) => boolean): number {
  let n = 0;
  for (let i = history.length - 1; i >= 0 && p(history[i]!); i--) n++;
  return n;
}

/** The last outcome's policy, when the last outcome is a miss. */
function lastPolicy(check: CheckSpec, history: History): Policy | undefined {
  const last = history.at(-1);
  return last && last.outcome !== 'pass' ? policyFor(check, last.outcome) : undefined;
}

/** What the issue says a check must show for the gate to open: its passes, after the bake, or a miss that does not pause. */
function letsThrough(check: CheckSpec, history: History): boolean {
  if (check.disabled) return true;
  const passedAfterBake = trailing(history, (e) => e.outcome === 'pass' && e.baked) >= check.successThreshold;
  const policy = lastPolicy(check, history);
  return passedAfterBake || (policy !== undefined && policy !== 'Pause');
}

/** A Pause-policy check whose last failureThreshold (or more) results in a row are misses. */
function pausing(check: CheckSpec, history: History): boolean {
  return (
    !check.disabled && lastPolicy(check, history) === 'Pause' && trailing(history, isMiss) >= check.failureThreshold
  );
}

/** The gate, from the histories alone (the model the properties compare with). */
function expectedState(checks: readonly CheckSpec[], histories: ReadonlyMap<string, History>, bypass: boolean) {
  if (bypass) return 'open';
  if (checks.some((c) => pausing(c, histories.get(c.name)!))) return 'pause';
  return checks.every((c) => letsThrough(c, histories.get(c.name)!)) ? 'open' : 'wait';
}

describe('health gate decision over time (property)', () => {
  it('opens only on a bypass, or when every enabled check has its passes after the bake or a miss whose policy does not pause', () => {
    assertReaching(
      historyArb(),
      ({ checks, rounds, bakeLeftMs, bypass }) => {
        const { tallies, histories } = replay(checks, rounds);
        const verdict = decideGate(checks, tallies, bakeLeftMs, bypass);
        if (verdict.state !== 'open') return SKIP;
        if (bypass) {
          assert.ok(verdict.bypassed, 'a bypass is recorded as one');
          return SKIP; // counted: only the opens the checks decided (about 15% of inputs)
        }
        assert.equal(verdict.bypassed, false);
        for (const check of checks) {
          const history = histories.get(check.name)!;
          assert.ok(letsThrough(check, history), `${check.name} ${JSON.stringify(history)} ${verdict.message}`);
          const policy = lastPolicy(check, history);
          assert.ok(policy !== 'Pause', `${check.name}: opened while a Pause-policy check misses`);
        }
      },
      { numRuns: 3000, floor: 0.07 },
    );
  });

  it('pauses only when a Pause-policy check has missed failureThreshold times in a row, and never on a bypass', () => {
    assertReaching(
      historyArb(undefined, 2), // misses more often than passes, so that pauses are common
      ({ checks, rounds, bakeLeftMs, bypass }) => {
        const { tallies, histories } = replay(checks, rounds);
        const verdict = decideGate(checks, tallies, bakeLeftMs, bypass);
        if (verdict.state !== 'pause') return SKIP;
        assert.ok(!bypass && !verdict.bypassed);
        const culprit = checks.find((c) => pausing(c, histories.get(c.name)!));
        assert.ok(culprit, `paused with no Pause-policy check failing enough: ${verdict.message}`);
        // The first pausing check in spec order is the one named (rollout-operator stops at the first Pause).
        assert.ok(verdict.message.startsWith(`check ${culprit.name}: `), verdict.message);
      },
      { numRuns: 3000, floor: 0.05 }, // about 9%
    );
  });

  it('decides exactly as the model at every point in time: no transition between evaluations it would not make', () => {
    fc.assert(
      fc.property(historyArb(), ({ checks, rounds, bypass }) => {
        for (let upTo = 0; upTo <= rounds.length; upTo++) {
          const { tallies, histories } = replay(checks, rounds, upTo);
          const bakeLeftMs = upTo > 0 && rounds[upTo - 1]!.baked ? 0 : 30_000;
          const verdict = decideGate(checks, tallies, bakeLeftMs, bypass);
          assert.equal(verdict.state, expectedState(checks, histories, bypass), `after ${upTo} rounds`);
          assert.equal(verdict.bypassed, bypass);
          if (verdict.state !== 'open') assert.notEqual(verdict.message, '');
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('never opens while a Pause-policy check is missing, or passing but short of its passes, without a bypass', () => {
    assertReaching(
      historyArb(),
      ({ checks, rounds, bakeLeftMs }) => {
        const { tallies, histories } = replay(checks, rounds);
        const holding = checks.filter((c) => {
          const h = histories.get(c.name)!;
          if (c.disabled) return false;
          if (h.length === 0) return true;
          if (lastPolicy(c, h) === 'Pause') return true;
          return (
            h.at(-1)!.outcome === 'pass' && trailing(h, (e) => e.outcome === 'pass' && e.baked) < c.successThreshold
          );
        });
        if (holding.length === 0) return SKIP;
        assert.notEqual(decideGate(checks, tallies, bakeLeftMs, false).state, 'open');
        assert.equal(decideGate(checks, tallies, bakeLeftMs, true).state, 'open', 'a bypass lets it through');
      },
      { numRuns: 3000, floor: 0.3 }, // about 68%
    );
  });

  it('counts no pass made while baking', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 6 }), (threshold, baking) => {
        const check = spec('c', { successThreshold: threshold });
        let t: CheckTally | undefined;
        for (let i = 0; i < baking; i++) t = tally(t, result('c', 'pass'), false);
        if (t) assert.deepEqual([t.passes, t.misses], [0, 0]);
        for (let i = 1; i <= threshold; i++) {
          assert.notEqual(decideGate([check], new Map(t ? [['c', t]] : []), 0, false).state, 'open');
          t = tally(t, result('c', 'pass'), true);
          assert.equal(t.passes, i);
        }
        assert.equal(decideGate([check], new Map([['c', t!]]), 0, false).state, 'open');
      }),
    );
  });
});

describe("thresholds of 1 are rollout-operator's rule (property)", () => {
  // Every enabled check evaluated at least once, after the bake: the gate
  // follows each check's last result alone.
  it('a pass opens, a Pause-policy miss pauses at once, Warn opens with a warning, Disabled opens silently', () => {
    assertReaching(
      historyArb(fc.constant(1)).map((h) => ({ ...h, rounds: h.rounds.map((r) => ({ ...r, baked: true })) })),
      ({ checks, rounds }) => {
        const { tallies, histories } = replay(checks, rounds);
        const enabled = checks.filter((c) => !c.disabled);
        if (enabled.some((c) => histories.get(c.name)!.length === 0)) return SKIP;
        const verdict = decideGate(checks, tallies, 0, false);
        const policies = enabled.map((c) => lastPolicy(c, histories.get(c.name)!));
        const firstPause = policies.indexOf('Pause');
        if (firstPause >= 0) {
          assert.equal(verdict.state, 'pause');
          assert.ok(verdict.message.startsWith(`check ${enabled[firstPause]!.name}: `));
          // Warnings are those of the checks before the first Pause, as rollout-operator stops there.
          assert.equal(verdict.warnings.length, policies.slice(0, firstPause).filter((p) => p === 'Warn').length);
          return;
        }
        assert.equal(verdict.state, 'open', verdict.message);
        assert.equal(verdict.bypassed, false);
        const warned = enabled.filter((_, i) => policies[i] === 'Warn');
        assert.equal(verdict.warnings.length, warned.length);
        warned.forEach((c, i) => assert.ok(verdict.warnings[i]!.startsWith(`check ${c.name}: `)));
      },
      { numRuns: 3000, floor: 0.5 }, // about 89%
    );
  });

  it('a single check: each outcome under each policy', () => {
    for (const outcome of OUTCOMES) {
      for (const policy of POLICIES) {
        const check = spec('errors', { onFailure: policy, onNoData: policy, onError: policy });
        const t = tally(undefined, result('errors', outcome), true);
        const verdict = decideGate([check], new Map([['errors', t]]), 0, false);
        const expected: GateVerdict['state'] = outcome === 'pass' || policy !== 'Pause' ? 'open' : 'pause';
        assert.equal(verdict.state, expected, `${outcome} under ${policy}`);
        assert.equal(verdict.warnings.length, outcome !== 'pass' && policy === 'Warn' ? 1 : 0, `${outcome} ${policy}`);
      }
    }
  });
});

describe('tally, policyFor and decideCheck', () => {
  it('counts passes and misses in a row, each resetting the other', () => {
    let t = tally(undefined, result('c', 'fail'), true);
    assert.deepEqual([t.passes, t.misses], [0, 1]);
    t = tally(t, result('c', 'no_data'), true);
    t = tally(t, result('c', 'error'), false);
    assert.deepEqual([t.passes, t.misses, t.last?.outcome], [0, 3, 'error']);
    t = tally(t, result('c', 'pass'), false);
    assert.deepEqual([t.passes, t.misses], [0, 0], 'a pass while baking resets the misses, counts no pass');
    t = tally(t, result('c', 'pass'), true);
    t = tally(t, result('c', 'pass'), true);
    assert.deepEqual([t.passes, t.misses], [2, 0]);
    t = tally(t, result('c', 'fail'), true);
    assert.deepEqual([t.passes, t.misses], [0, 1]);
  });

  it('maps fail to onFailure, no data to onNoData, error to onError', () => {
    const check = spec('c', { onFailure: 'Warn', onNoData: 'Disabled', onError: 'Pause' });
    assert.equal(policyFor(check, 'fail'), 'Warn');
    assert.equal(policyFor(check, 'no_data'), 'Disabled');
    assert.equal(policyFor(check, 'error'), 'Pause');
  });

  it('says why a check holds the gate', () => {
    const check = spec('errors', { successThreshold: 3, failureThreshold: 2 });
    assert.deepEqual(decideCheck(check, undefined, 0), { kind: 'pending', why: 'check errors: not evaluated yet' });
    const baking = tally(undefined, result('errors', 'pass'), false);
    assert.deepEqual(decideCheck(check, baking, 12_300), {
      kind: 'pending',
      why: 'check errors: passing, baking for 13 s more',
    });
    const once = tally(undefined, result('errors', 'pass'), true);
    assert.deepEqual(decideCheck(check, once, 0), { kind: 'pending', why: 'check errors: 1 of 3 passes in a row' });
    const failed: CheckResult = { ...result('errors', 'fail'), current: 0.2, baseline: 0.01, message: 'returned 0' };
    const miss = tally(undefined, failed, true);
    const pending = decideCheck(check, miss, 0);
    assert.equal(pending.kind, 'pending');
    assert.equal(
      (pending as { why: string }).why,
      'check errors: fail (current 0.2, baseline 0.01): returned 0 (1 of 2 before pausing)',
    );
    const paused = decideCheck(check, tally(miss, failed, true), 0);
    assert.deepEqual(paused, { kind: 'pause', why: 'check errors: fail (current 0.2, baseline 0.01): returned 0' });
    const noData = decideCheck(
      spec('e'),
      tally(undefined, { ...result('e', 'no_data'), message: 'no sample' }, true),
      0,
    );
    assert.deepEqual(noData, { kind: 'pause', why: 'check e: no data: no sample' });
    assert.deepEqual(decideCheck(spec('e', { disabled: true }), undefined, 0), { kind: 'ignored' });
  });

  it('opens a gate without checks, or with every check disabled', () => {
    assert.equal(decideGate([], new Map(), 0, false).state, 'open');
    assert.equal(decideGate([spec('a', { disabled: true })], new Map(), 0, false).state, 'open');
    const verdict = decideGate([spec('a')], new Map(), 0, true);
    assert.deepEqual(verdict, { state: 'open', message: 'bypassed by annotation', warnings: [], bypassed: true });
  });

  it('waits with the first pending check named, and a later Pause still wins', () => {
    const checks = [spec('a'), spec('b'), spec('c')];
    const tallies = new Map([['c', tally(undefined, result('c', 'fail'), true)]]);
    const verdict = decideGate(checks, tallies, 0, false);
    assert.equal(verdict.state, 'pause');
    assert.ok(verdict.message.startsWith('check c: '));
    const waiting = decideGate(checks, new Map([['b', tally(undefined, result('b', 'pass'), true)]]), 0, false);
    assert.deepEqual([waiting.state, waiting.message], ['wait', 'check a: not evaluated yet']);
  });
});

describe('bypassActive', () => {
  const now = Date.parse('2026-11-29T06:00:00Z');

  it('is off without the annotation', () => {
    assert.deepEqual(bypassActive(undefined, now), { active: false });
  });

  it('lets the gate through until the time written, up to 24h ahead', () => {
    for (const value of [
      '2026-11-29T06:00:01Z',
      '2026-11-29T07:30:00Z',
      '2026-11-29T08:30:00+02:00',
      '2026-11-29T06:00:00.500Z',
      '2026-11-30T06:00:00Z', // exactly 24h
    ])
      assert.deepEqual(bypassActive(value, now), { active: true }, value);
    assert.equal(MAX_BYPASS_MS, 24 * 3_600_000);
  });

  it('is not honoured once expired', () => {
    for (const value of [
      '2026-11-29T06:00:00Z',
      '2026-11-29T05:59:59Z',
      '2026-11-29T07:00:00+02:00',
      '2025-01-01T00:00:00Z',
    ]) {
      const r = bypassActive(value, now);
      assert.equal(r.active, false, value);
      assert.equal(r.problem, `expired at ${value}`);
    }
  });

  it('is not honoured more than 24h ahead', () => {
    for (const value of ['2026-11-30T06:00:01Z', '2026-12-29T06:00:00Z', '2099-01-01T00:00:00Z']) {
      const r = bypassActive(value, now);
      assert.equal(r.active, false, value);
      assert.equal(r.problem, `${value} is more than 24h ahead; ignored`);
    }
  });

  const notRfc3339 = (value: string, at = now) => {
    const r = bypassActive(value, at);
    assert.equal(r.active, false, value);
    assert.ok(r.problem?.includes('as "2006-01-02T15:04:05Z07:00"'), `${value}: ${r.problem}`);
    return r.problem;
  };

  it('is not honoured unless an RFC 3339 time, and says so without echoing a long value', () => {
    for (const value of ['', 'true', 'tomorrow', '1795946400', '2026-11-29', 'Sun, 29 Nov 2026 07:00:00 GMT'])
      notRfc3339(value);
    assert.match(notRfc3339('2026-11-29T99:00:00Z')!, /hour out of range/);
    assert.ok(notRfc3339(`2026-11-29T07:00:00Z${'x'.repeat(1000)}`)!.length < 400);
  });

  // Date.parse, which bypassActive used at first, takes all of these: no
  // offset (the host's local time, so with TZ set the override would last
  // hours longer or shorter than written), no seconds, a day past the
  // month's end (2026-02-30 is 2 March), 24:00, an offset without a colon,
  // lower-case t and z (Go's time.RFC3339 refuses them).
  it('takes what Go takes as time.RFC3339 only, even when the time would be within the window', () => {
    for (const value of [
      '2026-11-29T07:00:00',
      '2026-11-29T07:00',
      '2026-02-30T07:00:00Z',
      '2026-11-29T24:00:00Z',
      '2026-11-29T07:00:00+0100',
      '2026-11-29t07:00:00z',
      '+002026-11-29T07:00:00Z',
    ])
      notRfc3339(value, Date.parse(value) - 3_600_000);
  });
});
