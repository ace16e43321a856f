// The functional core of event recording: decides, for each occurrence of an
// event, whether the API sees a new Event, a series patch of an existing one,
// nothing yet (the repeat is coalesced into a later patch), or nothing at all
// (the object's spam budget is spent). It does no I/O and reads no clock:
// time comes in as `now`, names and payloads come in with the occurrence, and
// the writes to make come out. The executor (recorder.ts) carries them out.
// `now` only ever measures windows and intervals (the recorder passes its
// monotonic clock); the time written to the API as a series'
// lastObservedTime comes in with each occurrence (`observedAt`, wall clock).
//
// Guarantees (property-tested in test/runtime/events/planner.test.ts):
// - one series (one Event) gets at most one write per patchIntervalMs: its
//   create, then patches at least patchIntervalMs apart;
// - a series ends after seriesWindowMs without an occurrence; only then does
//   the next occurrence create a new Event;
// - creates per spam key never exceed a token bucket of spamBurst tokens
//   refilled one per spamRefillMs; patches never take tokens;
// - the count written last for a series equals the occurrences it aggregated,
//   once due() has flushed it;
// - memory is bounded by maxSeries and maxBuckets (least recently used
//   entries go first).

export interface PlannerLimits {
  /** A repeat within this long of the previous occurrence joins its series (client-go: 6 min). */
  seriesWindowMs: number;
  /** Minimum time between two writes of one series. */
  patchIntervalMs: number;
  /** Creates a regarding object may burst (client-go: 25). */
  spamBurst: number;
  /** One create token comes back per this many ms (client-go: 5 min). */
  spamRefillMs: number;
  /** Series remembered at most (LRU). */
  maxSeries: number;
  /** Token buckets remembered at most (LRU); a forgotten bucket counts as full. */
  maxBuckets: number;
}

export const defaultPlannerLimits: Readonly<PlannerLimits> = Object.freeze({
  seriesWindowMs: 6 * 60_000,
  patchIntervalMs: 30_000,
  spamBurst: 25,
  spamRefillMs: 5 * 60_000,
  maxSeries: 4096,
  maxBuckets: 4096,
});

export interface Occurrence<P> {
  /** Isomorphic key: equal keys aggregate into one series. */
  key: string;
  /** Token bucket this occurrence's create draws from. */
  spamKey: string;
  /** Name and namespace of the Event, used if this occurrence creates one. */
  name: string;
  namespace: string;
  /** Opaque to the planner; kept with the series and handed back in its writes. */
  payload: P;
  /** When it happened, as written to the API in a series' lastObservedTime (default: `now`). */
  observedAt?: number;
}

export interface CreateWrite<P> {
  op: 'create';
  key: string;
  name: string;
  namespace: string;
  payload: P;
}

export interface PatchWrite<P> {
  op: 'patch';
  key: string;
  name: string;
  namespace: string;
  payload: P;
  /** Occurrences in the series so far, the first included; always >= 2. */
  count: number;
  /** The latest occurrence's observedAt. */
  lastObservedTime: number;
}

export type Write<P> = CreateWrite<P> | PatchWrite<P>;

/**
 * What happened to the occurrence: `create` (a new Event), `patch` (its series
 * is written now), `coalesce` (counted; written by a later due()), or
 * `drop-spam`.
 */
export type Outcome = 'create' | 'patch' | 'coalesce' | 'drop-spam';

export interface Plan<P> {
  outcome: Outcome;
  /** Writes to make, in order. May include a final patch of an ended series. */
  writes: Write<P>[];
  /** For `coalesce`: when due() will write the series. */
  dueAt?: number;
}

interface Series<P> {
  key: string;
  name: string;
  namespace: string;
  payload: P;
  count: number;
  /** The count last handed out in a write (1 for the create). */
  written: number;
  lastObserved: number;
  /** The latest occurrence's observedAt. */
  lastObservedAt: number;
  lastWrite: number;
}

interface Bucket {
  /** Credit in ms of refill: one token is worth spamRefillMs. Integer arithmetic keeps it exact. */
  credit: number;
  at: number;
}

export class EventPlanner<P> {
  readonly limits: Readonly<PlannerLimits>;
  // Map iteration order is insertion order; touching re-inserts, so the first
  // entry is the least recently used.
  private readonly series = new Map<string, Series<P>>();
  private readonly pending = new Set<string>();
  private readonly buckets = new Map<string, Bucket>();

  constructor(limits: Partial<PlannerLimits> = {}) {
    this.limits = { ...defaultPlannerLimits, ...limits };
    for (const [name, value] of Object.entries(this.limits)) {
      const min = name === 'spamBurst' || name.startsWith('max') ? 1 : 0;
      if (!Number.isInteger(value) || value < min)
        throw new RangeError(`event planner: ${name} must be an integer >= ${min}`);
    }
  }

  /** Series currently remembered. */
  get size(): number {
    return this.series.size;
  }

  /** Token buckets currently remembered (a missing one is full). */
  get bucketCount(): number {
    return this.buckets.size;
  }

  /** Series with repeats counted but not yet written. */
  get pendingCount(): number {
    return this.pending.size;
  }

  /** Decides what one occurrence at time `now` costs the API. */
  observe(occ: Occurrence<P>, now: number): Plan<P> {
    const writes: Write<P>[] = [];
    this.prune(now, writes);

    let s = this.series.get(occ.key);
    if (s && now - s.lastObserved > this.limits.seriesWindowMs) {
      // Ended, though prune did not reach it (time went backwards for an older entry).
      this.flushOne(s, writes);
      this.forget(s.key);
      s = undefined;
    }

    if (s) {
      s.count++;
      s.lastObserved = Math.max(s.lastObserved, now);
      s.lastObservedAt = occ.observedAt ?? now;
      this.series.delete(s.key);
      this.series.set(s.key, s);
      if (now - s.lastWrite >= this.limits.patchIntervalMs) {
        writes.push(this.patchOf(s));
        s.written = s.count;
        s.lastWrite = now;
        this.pending.delete(s.key);
        return { outcome: 'patch', writes };
      }
      this.pending.add(s.key);
      return { outcome: 'coalesce', writes, dueAt: s.lastWrite + this.limits.patchIntervalMs };
    }

    if (!this.take(occ.spamKey, now)) return { outcome: 'drop-spam', writes };

    const created: Series<P> = {
      key: occ.key,
      name: occ.name,
      namespace: occ.namespace,
      payload: occ.payload,
      count: 1,
      written: 1,
      lastObserved: now,
      lastObservedAt: occ.observedAt ?? now,
      lastWrite: now,
    };
    this.series.set(created.key, created);
    while (this.series.size > this.limits.maxSeries) {
      // Evicting drops the oldest series' unwritten repeats, if any: memory
      // stays bounded and its next occurrence starts a new Event.
      const oldest = this.series.keys().next().value;
      if (oldest === undefined) break;
      this.forget(oldest);
    }
    writes.push({
      op: 'create',
      key: created.key,
      name: created.name,
      namespace: created.namespace,
      payload: created.payload,
    });
    return { outcome: 'create', writes };
  }

  /** Patches of coalesced repeats whose series may be written again at `now`. */
  due(now: number): PatchWrite<P>[] {
    const writes: Write<P>[] = [];
    for (const key of [...this.pending]) {
      const s = this.series.get(key);
      if (!s) {
        this.pending.delete(key);
        continue;
      }
      if (now - s.lastWrite >= this.limits.patchIntervalMs) {
        this.flushOne(s, writes);
        s.lastWrite = now;
      }
    }
    this.prune(now, writes);
    return writes as PatchWrite<P>[];
  }

  /** When due() next has something to write; undefined if nothing is pending. */
  nextDueAt(): number | undefined {
    let next: number | undefined;
    for (const key of this.pending) {
      const s = this.series.get(key);
      if (!s) continue;
      const at = s.lastWrite + this.limits.patchIntervalMs;
      if (next === undefined || at < next) next = at;
    }
    return next;
  }

  /**
   * Patches of every pending series regardless of the interval: the last
   * writes at shutdown. Series are kept, so later occurrences still aggregate.
   */
  drain(now: number): PatchWrite<P>[] {
    const writes: Write<P>[] = [];
    for (const key of [...this.pending]) {
      const s = this.series.get(key);
      if (s) {
        this.flushOne(s, writes);
        s.lastWrite = Math.max(s.lastWrite, now);
      }
    }
    this.pending.clear();
    return writes as PatchWrite<P>[];
  }

  private patchOf(s: Series<P>): PatchWrite<P> {
    return {
      op: 'patch',
      key: s.key,
      name: s.name,
      namespace: s.namespace,
      payload: s.payload,
      count: s.count,
      lastObservedTime: s.lastObservedAt,
    };
  }

  private flushOne(s: Series<P>, writes: Write<P>[]): void {
    if (s.count > s.written) {
      writes.push(this.patchOf(s));
      s.written = s.count;
    }
    this.pending.delete(s.key);
  }

  private forget(key: string): void {
    this.series.delete(key);
    this.pending.delete(key);
  }

  /**
   * Forgets series that have ended, oldest first. Series are ordered by their
   * last occurrence, so the scan stops at the first one still alive. An ended
   * series with unwritten repeats gets its final patch (normally due() has
   * written it long before: it is due 30 s after the write, the series ends
   * 6 min after the last repeat).
   */
  private prune(now: number, writes: Write<P>[]): void {
    for (const s of this.series.values()) {
      if (now - s.lastObserved <= this.limits.seriesWindowMs) break;
      this.flushOne(s, writes);
      this.forget(s.key);
    }
    const full = this.limits.spamBurst * this.limits.spamRefillMs;
    for (const [key, b] of this.buckets) {
      if (now - b.at < full) break;
      this.buckets.delete(key); // refilled: the same as no bucket
    }
  }

  /** Takes a create token from the key's bucket if it has one. */
  private take(key: string, now: number): boolean {
    const full = this.limits.spamBurst * this.limits.spamRefillMs;
    const b = this.buckets.get(key);
    const credit = b ? Math.min(full, b.credit + Math.max(0, now - b.at)) : full;
    const ok = credit >= this.limits.spamRefillMs;
    const next: Bucket = { credit: ok ? credit - this.limits.spamRefillMs : credit, at: b ? Math.max(b.at, now) : now };
    this.buckets.delete(key);
    this.buckets.set(key, next);
    while (this.buckets.size > this.limits.maxBuckets) {
      const oldest = this.buckets.keys().next().value;
      if (oldest === undefined) break;
      this.buckets.delete(oldest);
    }
    return ok;
  }
}
