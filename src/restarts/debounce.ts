// When a config change is due: the grace period that waits for more changes,
// and the longest a burst may hold a restart back.
import { type CurrentChecksumsInput, MISSING, toMap } from './checksums.ts';

// ------------------------------------------------------------ settings

export interface RestartSettings {
  /** Quiet time after the latest change of a burst before acting (xing's RESTART_GRACE_PERIOD, 5 s). */
  gracePeriodMs: number;
  /** Longest a burst waits from its first change; values below gracePeriodMs count as gracePeriodMs. */
  maxWaitMs: number;
}

export const DEFAULT_GRACE_PERIOD_MS = 5_000;
export const DEFAULT_MAX_WAIT_MS = 60_000;
/**
 * Complete settings: a missing, negative or non-finite value takes its
 * default (validating flags is the flag layer's job; this never throws), and
 * maxWaitMs is raised to gracePeriodMs when below it.
 */
export function resolveRestartSettings(settings?: Partial<RestartSettings>): RestartSettings {
  const pick = (v: number | undefined, d: number) => (v !== undefined && Number.isFinite(v) && v >= 0 ? v : d);
  const gracePeriodMs = pick(settings?.gracePeriodMs, DEFAULT_GRACE_PERIOD_MS);
  const maxWaitMs = Math.max(gracePeriodMs, pick(settings?.maxWaitMs, DEFAULT_MAX_WAIT_MS));
  return { gracePeriodMs, maxWaitMs };
}

// ------------------------------------------------------------ debounce

/** One workload's burst of changes not acted on yet. Immutable. */
export interface PendingChange {
  /** When the burst's first change was observed. */
  readonly firstAt: number;
  /** When its latest change was observed. */
  readonly lastAt: number;
  /** How many changes it holds (for logs and the changes-waiting metric). */
  readonly observations: number;
  /**
   * For each referenced config, the first checksum seen during the burst
   * ('missing' is never recorded: a config's first sighting is when it
   * exists). R3 compares a reference not yet in the annotation against it.
   */
  readonly firstSeen: ReadonlyMap<string, string>;
}

export function withFirstSeen(
  firstSeen: ReadonlyMap<string, string>,
  current: CurrentChecksumsInput | undefined,
): ReadonlyMap<string, string> {
  if (current === undefined) return firstSeen;
  let out: Map<string, string> | undefined;
  for (const [key, value] of toMap(current)) {
    if (value === MISSING || firstSeen.has(key)) continue;
    out ??= new Map(firstSeen);
    out.set(key, value);
  }
  return out ?? firstSeen;
}

/**
 * A change relevant to the workload was observed at `now`: a referenced
 * config's checksum changed or it appeared, or the workload's references or
 * checksum annotation changed. Starts a burst or extends it. Pass the
 * workload's current checksums (after the change) so R3 can tell a config
 * that changed again from one merely added; without them R3 cannot fire for
 * that observation.
 */
export function observeChange(
  state: PendingChange | undefined,
  now: number,
  current?: CurrentChecksumsInput,
): PendingChange {
  if (state === undefined)
    return { firstAt: now, lastAt: now, observations: 1, firstSeen: withFirstSeen(new Map(), current) };
  return {
    firstAt: state.firstAt,
    // A clock that steps back never shortens the window.
    lastAt: Math.max(state.lastAt, now),
    observations: state.observations + 1,
    firstSeen: withFirstSeen(state.firstSeen, current),
  };
}

/** When the burst is acted on: min(last + grace, first + maxWait). */
export function dueAt(state: PendingChange, settings?: Partial<RestartSettings>): number {
  const s = resolveRestartSettings(settings);
  return Math.min(state.lastAt + s.gracePeriodMs, state.firstAt + s.maxWaitMs);
}

/** Whether the burst is due at `now` (≥, as xing's "age ≥ grace period"). */
export function due(state: PendingChange, now: number, settings?: Partial<RestartSettings>): boolean {
  return now >= dueAt(state, settings);
}
