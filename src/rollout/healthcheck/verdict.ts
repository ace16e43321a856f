// The health gate's decision, pure: from the results of a check's
// evaluations so far to whether the next StatefulSet may start rolling.
//
// rollout-operator's design decides on each evaluation alone (pass opens,
// anything else applies its policy). Stateward keeps the consecutive counts
// its PR only plans, so one lucky scrape cannot rush a rollout and one lost
// scrape cannot stop it:
//   - a check opens the gate after successThreshold passes in a row, each
//     made after the bake time (a pass while baking counts for nothing);
//   - a Pause-policy result pauses only after failureThreshold misses in a
//     row; before that the gate waits, without calling the zone unhealthy;
//   - a Warn or Disabled policy never holds the gate: Warn proceeds with a
//     warning, Disabled proceeds silently.
// With both thresholds at 1 (the defaults) this is rollout-operator's rule.
import type { CheckSpec, Policy } from './resource.ts';
import { parseRfc3339 } from '../../vocabulary/rfc3339.ts';

export type Outcome = 'pass' | 'fail' | 'no_data' | 'error';

export interface CheckResult {
  check: string;
  outcome: Outcome;
  /** The candidate pods' value (now, over currentRange), when the query answered one. */
  current?: number;
  /** The stable pods' value (at the baseline time, over baselineRange). */
  baseline?: number;
  /** What happened, for Events, status and logs. */
  message: string;
  at: number;
}

/** Consecutive counts of one check, within one gate (one StatefulSet's start to one revision). */
export interface CheckTally {
  passes: number;
  misses: number;
  last?: CheckResult;
}

export type CheckDecision =
  | { kind: 'pass' }
  | { kind: 'pending'; why: string }
  | { kind: 'warn'; why: string }
  | { kind: 'ignored' }
  | { kind: 'pause'; why: string };

export interface GateVerdict {
  state: 'open' | 'wait' | 'pause';
  /** Why the gate is not open (or, when open, that it passed). */
  message: string;
  /** Warn-policy checks that did not pass. */
  warnings: string[];
  /** Opened by the bypass annotation, not by the checks. */
  bypassed: boolean;
}

/** The tally after one more result. A pass during the bake time resets misses but counts no pass. */
export function tally(previous: CheckTally | undefined, result: CheckResult, baked: boolean): CheckTally {
  const before = previous ?? { passes: 0, misses: 0 };
  if (result.outcome === 'pass') return { passes: baked ? before.passes + 1 : 0, misses: 0, last: result };
  return { passes: 0, misses: before.misses + 1, last: result };
}

export function policyFor(check: CheckSpec, outcome: Exclude<Outcome, 'pass'>): Policy {
  return outcome === 'fail' ? check.onFailure : outcome === 'no_data' ? check.onNoData : check.onError;
}

function describe(result: CheckResult): string {
  const values =
    result.current !== undefined || result.baseline !== undefined
      ? ` (current ${result.current ?? 'none'}, baseline ${result.baseline ?? 'none'})`
      : '';
  return `check ${result.check}: ${result.outcome.replace('_', ' ')}${values}: ${result.message}`;
}

/** What one check says about the gate now. */
export function decideCheck(check: CheckSpec, state: CheckTally | undefined, bakeLeftMs: number): CheckDecision {
  if (check.disabled) return { kind: 'ignored' };
  const last = state?.last;
  if (!state || !last) return { kind: 'pending', why: `check ${check.name}: not evaluated yet` };
  if (last.outcome === 'pass') {
    if (state.passes >= check.successThreshold) return { kind: 'pass' };
    if (bakeLeftMs > 0)
      return {
        kind: 'pending',
        why: `check ${check.name}: passing, baking for ${Math.ceil(bakeLeftMs / 1000)} s more`,
      };
    return {
      kind: 'pending',
      why: `check ${check.name}: ${state.passes} of ${check.successThreshold} passes in a row`,
    };
  }
  const policy = policyFor(check, last.outcome);
  if (policy === 'Disabled') return { kind: 'ignored' };
  if (policy === 'Warn') return { kind: 'warn', why: describe(last) };
  if (state.misses >= check.failureThreshold) return { kind: 'pause', why: describe(last) };
  return { kind: 'pending', why: `${describe(last)} (${state.misses} of ${check.failureThreshold} before pausing)` };
}

/**
 * The gate over every check, in order: the first Pause decides (as in
 * rollout-operator); otherwise any pending check makes it wait; otherwise
 * it is open, with the Warn checks' warnings. A bypass opens it whatever the
 * checks say.
 */
export function decideGate(
  checks: readonly CheckSpec[],
  tallies: ReadonlyMap<string, CheckTally>,
  bakeLeftMs: number,
  bypass: boolean,
): GateVerdict {
  const warnings: string[] = [];
  let pending: string | undefined;
  for (const check of checks) {
    const decision = decideCheck(check, tallies.get(check.name), bakeLeftMs);
    if (decision.kind === 'pause')
      return bypass ? open(warnings, true) : { state: 'pause', message: decision.why, warnings, bypassed: false };
    if (decision.kind === 'warn') warnings.push(decision.why);
    if (decision.kind === 'pending') pending ??= decision.why;
  }
  if (bypass) return open(warnings, true);
  if (pending !== undefined) return { state: 'wait', message: pending, warnings, bypassed: false };
  return open(warnings, false);
}

function open(warnings: string[], bypassed: boolean): GateVerdict {
  return {
    state: 'open',
    message: bypassed ? 'bypassed by annotation' : 'every check passed',
    warnings,
    bypassed,
  };
}

/** The longest bypass accepted: a forgotten annotation must not disable the gate for good. */
export const MAX_BYPASS_MS = 24 * 3_600_000;

/** Whether the bypass annotation's value (an RFC 3339 time) lets the gate through now, and why not. */
export function bypassActive(value: string | undefined, now: number): { active: boolean; problem?: string } {
  if (value === undefined) return { active: false };
  const until = parseRfc3339(value);
  if (typeof until !== 'number') return { active: false, problem: until.error };
  if (until <= now) return { active: false, problem: `expired at ${value}` };
  if (until - now > MAX_BYPASS_MS) return { active: false, problem: `${value} is more than 24h ahead; ignored` };
  return { active: true };
}
