// The functional core of event recording: decides, for each occurrence, whether
// the API sees a new Event, a series patch of an existing one, nothing yet (the
// repeat is counted and written by a later due()), or nothing at all (the
// object's budget of new Events is spent). No I/O and no clock: `now` comes in
// as monotonic milliseconds and only measures windows; `observedAt` is the wall
// time a series patch writes as lastObservedTime.
//
// Guarantees (property-tested in test/runtime/events/eventplanner.test.ts):
// - one series gets at most one write per PATCH_INTERVAL_MS: its create, then
//   patches at least that far apart;
// - a series ends after SERIES_WINDOW_MS without an occurrence; only then does
//   the next occurrence create a new Event;
// - creates per spam key stay within a token bucket of SPAM_BURST tokens
//   refilled one per SPAM_REFILL_MS (client-go's defaults); patches take none;
// - the count written last for a series equals its occurrences once due() or
//   drain() has flushed it;
// - memory is bounded by MAX_REMEMBERED series and buckets (least recently
//   used go first).

export const SERIES_WINDOW_MS = 6 * 60_000;
export const PATCH_INTERVAL_MS = 30_000;
export const SPAM_BURST = 25;
export const SPAM_REFILL_MS = 5 * 60_000;
export const MAX_REMEMBERED = 4096;

export interface Write<P> {
  payload: P;
  /** Absent for the create; for a patch, the series so far (count >= 2). */
  series?: { count: number; lastObservedTime: number };
}

export type Outcome = 'create' | 'patch' | 'coalesce' | 'drop-spam';

export interface Plan<P> {
  outcome: Outcome;
  /** Writes to make, in order; may include final patches of series that ended. */
  writes: Write<P>[];
}

interface Series<P> {
  key: string;
  payload: P;
  count: number;
  /** The count last written (1 for the create). */
  written: number;
  lastSeen: number;
  lastObservedAt: number;
  lastWrite: number;
}

const FULL_BUCKET = SPAM_BURST * SPAM_REFILL_MS;

export class EventPlanner<P> {
  // Map order is insertion order and a touch re-inserts: the first entry is
  // the least recently used, and series are ordered by their last occurrence.
  private readonly series = new Map<string, Series<P>>();
  /** Credit in ms of refill per spam key (one token = SPAM_REFILL_MS); a missing bucket is full. */
  private readonly buckets = new Map<string, { credit: number; at: number }>();

  /** Decides what one occurrence at monotonic time `now` costs the API. */
  observe(key: string, spamKey: string, payload: P, now: number, observedAt: number): Plan<P> {
    const writes: Write<P>[] = [];
    this.prune(now, writes);
    const s = this.series.get(key);
    if (s) {
      s.count++;
      s.lastSeen = now;
      s.lastObservedAt = observedAt;
      this.series.delete(key);
      this.series.set(key, s);
      if (now - s.lastWrite < PATCH_INTERVAL_MS) return { outcome: 'coalesce', writes };
      this.flush(s, now, writes);
      return { outcome: 'patch', writes };
    }
    if (!this.take(spamKey, now)) return { outcome: 'drop-spam', writes };
    this.series.set(key, {
      key,
      payload,
      count: 1,
      written: 1,
      lastSeen: now,
      lastObservedAt: observedAt,
      lastWrite: now,
    });
    // Forgetting the oldest series drops its unwritten repeats, if any: memory
    // stays bounded and its next occurrence starts a new Event.
    if (this.series.size > MAX_REMEMBERED) this.series.delete(this.series.keys().next().value!);
    writes.push({ payload });
    return { outcome: 'create', writes };
  }

  /** Patches of counted repeats whose series may be written again at `now`, and of series that ended. */
  due(now: number): Write<P>[] {
    const writes: Write<P>[] = [];
    for (const s of this.series.values()) if (now - s.lastWrite >= PATCH_INTERVAL_MS) this.flush(s, now, writes);
    this.prune(now, writes);
    return writes;
  }

  /** When due() next has something to write; undefined if every count is written. */
  nextDueAt(): number | undefined {
    let next: number | undefined;
    for (const s of this.series.values())
      if (s.count > s.written && (next === undefined || s.lastWrite + PATCH_INTERVAL_MS < next))
        next = s.lastWrite + PATCH_INTERVAL_MS;
    return next;
  }

  /** Patches of every unwritten count, interval or not: the last writes at shutdown. */
  drain(now: number): Write<P>[] {
    const writes: Write<P>[] = [];
    for (const s of this.series.values()) this.flush(s, now, writes);
    return writes;
  }

  private flush(s: Series<P>, now: number, writes: Write<P>[]): void {
    if (s.count <= s.written) return;
    writes.push({ payload: s.payload, series: { count: s.count, lastObservedTime: s.lastObservedAt } });
    s.written = s.count;
    s.lastWrite = now;
  }

  /** Forgets ended series (after a final patch of unwritten repeats) and refilled buckets, oldest first. */
  private prune(now: number, writes: Write<P>[]): void {
    for (const s of this.series.values()) {
      if (now - s.lastSeen <= SERIES_WINDOW_MS) break;
      this.flush(s, now, writes);
      this.series.delete(s.key);
    }
    for (const [key, b] of this.buckets) {
      if (now - b.at < FULL_BUCKET) break;
      this.buckets.delete(key);
    }
  }

  private take(key: string, now: number): boolean {
    const b = this.buckets.get(key);
    const credit = b ? Math.min(FULL_BUCKET, b.credit + (now - b.at)) : FULL_BUCKET;
    const ok = credit >= SPAM_REFILL_MS;
    this.buckets.delete(key);
    this.buckets.set(key, { credit: ok ? credit - SPAM_REFILL_MS : credit, at: now });
    if (this.buckets.size > MAX_REMEMBERED) this.buckets.delete(this.buckets.keys().next().value!);
    return ok;
  }
}
