// Timestamps in the API that another replica (or this one) wrote with its
// wall clock: grafana.com/last-downscale, the zone tracker's records, the
// ZPDB ledger's pending evictions. A reader compares them with its own wall
// clock to learn how much time has passed, as rollout-operator does. That is
// right while the clocks agree, and every stamp is taken at its word then:
// time since it is now − stamp.
//
// It goes wrong two ways, and each leaves evidence this process can see:
//
// - `ahead`: the stamp is ahead of this process's clock by more than
//   CLOCK_TOLERANCE_MS. The writer's clock runs ahead of ours (or ours was
//   stepped back). Taken at its word it would hold a wait until that future
//   came; it is counted from when this process saw it instead.
// - `before-look`: the stamp is older than a look of ours that could not
//   have missed it, by more than the tolerance. Either a watch just
//   delivered it (it was written at most a watch's latency ago), or this
//   process read the same scope earlier and the stamp was not there yet. The
//   writer's clock runs behind ours: taken at its word, a wait would end
//   early by the skew. It is counted from when this process saw it, the
//   latest moment it can have been written.
// - `stepped`: this process's wall clock stepped (an NTP correction, an
//   administrator's `date -s`): its wall−monotonic offset moved by more than
//   the tolerance, between the previous look at the scope and the first
//   sighting of the stamp (which clock is right is then unknown: counted
//   from the sighting), or after the sighting (counted on the monotonic
//   clock, which never steps, from the elapsed time seen at the sighting).
//
// Without evidence nothing is second-guessed: a stamp written by this very
// process a moment ago, or by a replica whose clock agrees, counts from
// itself, and a min-time wait ends exactly when rollout-operator's would.
// With evidence, a wait never ends earlier than the real time since the
// write allows; it may end later, by at most the sighting's distance from
// the write (a watch's latency, or the time until the next read).
//
// rollout-operator compares every stamp with time.Now() directly; a step or
// a skew between replicas shortens or lengthens its waits by that much.
import type { Clock } from './clock.ts';

/** Clocks that agree within this much are taken to agree (NTP keeps nodes within milliseconds). */
export const CLOCK_TOLERANCE_MS = 2_000;

/** Why a stamp is not counted from itself. */
export type ClockEvidence = 'ahead' | 'before-look' | 'stepped';

/**
 * How this process read a scope: `event` — a watch delivered this change
 * just now, so what is new in it was written at most a watch's latency ago;
 * `read` — a list or a GET, which may show stamps of any age (older than the
 * previous look at the same scope only if the writer's clock is behind).
 */
export type Seen = 'read' | 'event';

/** The wall time to count a stamp from, and why it is not the stamp itself when it is not. */
export interface Counted {
  from: number;
  evidence?: ClockEvidence;
}

interface Sighting {
  value: number;
  /** Set when the stamp was not taken at its word at first sight. */
  evidence: ClockEvidence | undefined;
  /** Elapsed since the stamp when first seen (ms, ≥ 0), as counted then. */
  elapsedThen: number;
  /** Monotonic reading when first seen. */
  seenAt: number;
  /** wall − monotonic when first seen: a change shows a step of the wall clock. */
  offsetThen: number;
  /** Monotonic reading when last seen, for forgetting. */
  lastSeen: number;
}

/** Scopes and stamps unseen this long are forgotten (a StatefulSet or budget gone, a wait long over). */
const DEFAULT_FORGET_AFTER_MS = 24 * 60 * 60_000;
/** Forgetting is a scan of every entry: at most this often. */
const SWEEP_EVERY_MS = 60_000;

export class TimestampSightings {
  private readonly clock: Clock;
  private readonly forgetAfterMs: number;
  /** The latest look at each scope: monotonic reading and wall − monotonic then. */
  private readonly looks = new Map<string, { mono: number; offset: number }>();
  /** By scope, then key. */
  private readonly sightings = new Map<string, Map<string, Sighting>>();
  private lastSweep: number;

  constructor(clock: Clock, options: { forgetAfterMs?: number } = {}) {
    this.clock = clock;
    this.forgetAfterMs = options.forgetAfterMs ?? DEFAULT_FORGET_AFTER_MS;
    this.lastSweep = clock.monotonic();
  }

  /** Stamps remembered. */
  get size(): number {
    let n = 0;
    for (const stamps of this.sightings.values()) n += stamps.size;
    return n;
  }

  /**
   * Looks at the stamps `scope` holds now (key → epoch ms) and returns, per
   * key, the wall time to count it from: the stamp itself unless there is
   * evidence against it (see above). Look at a scope also when it holds no
   * stamp: that look is what dates a stamp that appears later. Keys absent
   * from `stamps` are left as they were (a partial look forgets nothing).
   */
  look(scope: string, stamps: ReadonlyMap<string, number>, seen: Seen): Map<string, Counted> {
    const wall = this.clock.now();
    const mono = this.clock.monotonic();
    this.sweep(mono);
    const previousLook = this.looks.get(scope);
    this.looks.set(scope, { mono, offset: wall - mono });
    // The earliest a stamp new in this look can have been written, on the monotonic clock.
    const writtenNoEarlierThan = seen === 'event' ? mono : previousLook?.mono;
    const steppedSinceLook =
      previousLook !== undefined && Math.abs(wall - mono - previousLook.offset) > CLOCK_TOLERANCE_MS;
    let known = this.sightings.get(scope);
    if (!known) this.sightings.set(scope, (known = new Map<string, Sighting>()));
    const out = new Map<string, Counted>();
    for (const [key, value] of stamps) {
      let sighting = known.get(key);
      if (sighting?.value !== value) {
        sighting = firstSighting(value, wall, mono, writtenNoEarlierThan, steppedSinceLook);
        known.set(key, sighting);
      }
      sighting.lastSeen = mono;
      out.set(key, countFrom(sighting, wall, mono));
    }
    return out;
  }

  private sweep(mono: number): void {
    if (mono - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = mono;
    for (const [scope, at] of this.looks) if (mono - at.mono > this.forgetAfterMs) this.looks.delete(scope);
    for (const [scope, stamps] of this.sightings) {
      for (const [key, seen] of stamps) if (mono - seen.lastSeen > this.forgetAfterMs) stamps.delete(key);
      if (stamps.size === 0 && !this.looks.has(scope)) this.sightings.delete(scope);
    }
  }
}

function firstSighting(
  value: number,
  wall: number,
  mono: number,
  writtenNoEarlierThan: number | undefined,
  steppedSinceLook: boolean,
): Sighting {
  const base = { value, seenAt: mono, offsetThen: wall - mono, lastSeen: mono, elapsedThen: 0 };
  // Our own step first: it also makes the stamp look ahead or too old.
  if (steppedSinceLook) return { ...base, evidence: 'stepped' };
  if (value > wall + CLOCK_TOLERANCE_MS) return { ...base, evidence: 'ahead' };
  if (writtenNoEarlierThan !== undefined && value < wall - (mono - writtenNoEarlierThan) - CLOCK_TOLERANCE_MS)
    return { ...base, evidence: 'before-look' };
  return { ...base, evidence: undefined, elapsedThen: Math.max(0, wall - value) };
}

function countFrom(s: Sighting, wall: number, mono: number): Counted {
  const stepped = Math.abs(wall - mono - s.offsetThen) > CLOCK_TOLERANCE_MS;
  if (!s.evidence && !stepped) return { from: s.value };
  const from = wall - (s.elapsedThen + (mono - s.seenAt));
  return { from, evidence: s.evidence ?? 'stepped' };
}
