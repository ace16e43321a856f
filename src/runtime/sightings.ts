// Timestamps in the API that another replica (or this one) wrote with its
// wall clock: grafana.com/last-downscale, the zone tracker's records, the
// ZPDB ledger's pending evictions. A reader compares them with its own wall
// clock to learn how much time has passed, and that goes wrong two ways:
//
// - this process's wall clock steps after it saw the timestamp (an NTP
//   correction, an operator's `date -s`): the elapsed time jumps by the step;
// - the writer's clock disagreed with the reader's: a stamp from a replica
//   running 10 minutes behind looks 10 minutes old the moment it appears.
//
// Both would let a safety wait (min-time between zone downscales, a pending
// eviction's hold) end early. So time since a stamp is measured from when
// this process saw it, on the monotonic clock, which never steps:
//
//   elapsed = (elapsed when first seen) + (monotonic time since)
//
// "Elapsed when first seen" is 0 for a stamp this process saw appear: in a
// scope (a StatefulSet, a ledger) it was already looking at, or in a scope
// first seen live (a watch delivered it after the initial list, or it was
// read while a synced watch had not delivered it yet). It was written at
// most a watch's latency ago, and 0 never counts time that did not pass.
// Only a stamp in a scope first seen in an initial list, predating this
// process's watch, is trusted to the wall clock: now − stamp, and 0 for a
// stamp from the future (a writer running ahead), which would otherwise hold
// a wait until that future came. So a wait counted from a stamp that
// appeared while this process watched never ends early, whatever the clocks
// of the writer and the reader do; it may end a watch's latency late.
//
// rollout-operator compares the stamp with time.Now() directly; a step or a
// skew between replicas shortens or lengthens its waits by that much.
import type { Clock } from './clock.ts';

interface Sighting {
  value: number;
  /** Elapsed since the stamp when first seen (ms, ≥ 0). */
  elapsedThen: number;
  /** Monotonic reading when first seen. */
  seenAt: number;
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
  /** Monotonic reading of the latest look at each scope. */
  private readonly looks = new Map<string, number>();
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
   * Looks at the stamps `scope` holds now (key → epoch ms), `seen` in an
   * initial list or live, and returns, per key, the wall time to count it
   * from: now minus the elapsed time above.
   * Equal to the stamp while clocks agree and nothing stepped. Keys absent
   * from `stamps` are left as they were (a partial look forgets nothing).
   */
  look(scope: string, stamps: ReadonlyMap<string, number>, seen: 'initial' | 'live'): Map<string, number> {
    const wall = this.clock.now();
    const mono = this.clock.monotonic();
    this.sweep(mono);
    const previousLook = this.looks.get(scope);
    this.looks.set(scope, mono);
    const sawItAppear = previousLook !== undefined || seen === 'live';
    let known = this.sightings.get(scope);
    if (!known) this.sightings.set(scope, (known = new Map<string, Sighting>()));
    const out = new Map<string, number>();
    for (const [key, value] of stamps) {
      let sighting = known.get(key);
      if (sighting?.value !== value) {
        const elapsedThen = sawItAppear ? 0 : Math.max(0, wall - value);
        sighting = { value, elapsedThen, seenAt: mono, lastSeen: mono };
        known.set(key, sighting);
      }
      sighting.lastSeen = mono;
      out.set(key, wall - (sighting.elapsedThen + (mono - sighting.seenAt)));
    }
    return out;
  }

  private sweep(mono: number): void {
    if (mono - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = mono;
    for (const [scope, at] of this.looks) if (mono - at > this.forgetAfterMs) this.looks.delete(scope);
    for (const [scope, stamps] of this.sightings) {
      for (const [key, seen] of stamps) if (mono - seen.lastSeen > this.forgetAfterMs) stamps.delete(key);
      if (stamps.size === 0 && !this.looks.has(scope)) this.sightings.delete(scope);
    }
  }
}

const byClock = new WeakMap<Clock, TimestampSightings>();

/**
 * The sightings of everyone using `clock`: in a process, the runtime's one
 * clock, so every capability counts a stamp from the same first sighting
 * (the StatefulSet informer may see a last-downscale the webhook then checks).
 */
export function timestampSightings(clock: Clock): TimestampSightings {
  let sightings = byClock.get(clock);
  if (!sightings) byClock.set(clock, (sightings = new TimestampSightings(clock)));
  return sightings;
}
