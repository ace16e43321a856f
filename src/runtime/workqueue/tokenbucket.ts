// A token bucket for calls to the Kubernetes API, with the semantics of
// golang.org/x/time/rate: tokens accrue continuously at `qps` up to `burst`;
// a caller reserves a token (possibly one that only exists in the future)
// and waits until its reserved time.
//
// Unlike a wait that can queue forever, `wait` takes a deadline: when the
// reservation would complete after it, the call is rejected at once and the
// token is not taken, so a backlog cannot grow behind callers that will give
// up anyway. qps 0 (or Infinity) means unlimited.
//
// All times here are clock.monotonic(): a wall clock stepping forward would
// mint a burst, one stepping back would stall accrual.

import { abortReason, systemClock, type Clock } from '../clock.ts';

/** Defaults of the API client limiter, per API group. */
export const DEFAULT_CLIENT_QPS = 5;
export const DEFAULT_CLIENT_BURST = 10;

/** Internal unit: one token is this many units, so integer qps × integer ms accrue exactly. */
const UNITS_PER_TOKEN = 1000;
/** Tolerance for floating-point noise in unit arithmetic (far below one token). */
const EPSILON_UNITS = 1e-6;

/** A wait was refused because the token would arrive too late. */
export class RateLimitExceededError extends Error {
  override readonly name = 'RateLimitExceededError';
  /** The bucket's key (e.g. an API group), if it has one. */
  readonly key: string | undefined;
  /** How long the caller would have had to wait for its token. */
  readonly waitMs: number;
  /** How long it was allowed to wait (time left to the deadline or maxWaitMs). */
  readonly allowedMs: number;

  constructor(key: string | undefined, waitMs: number, allowedMs: number) {
    const where = key === undefined ? '' : ` for ${JSON.stringify(key)}`;
    super(
      `rate limit${where}: waiting ${formatMs(waitMs)} for a token would exceed the deadline ` +
        `(${formatMs(Math.max(0, allowedMs))} left)`,
    );
    this.key = key;
    this.waitMs = waitMs;
    this.allowedMs = allowedMs;
  }
}

function formatMs(ms: number): string {
  return `${Number.isInteger(ms) ? ms : ms.toFixed(3)}ms`;
}

/** A token reserved from a bucket. */
export interface Reservation {
  /** False when the token could not be reserved within the allowed wait; nothing was taken then. */
  readonly ok: boolean;
  /** Milliseconds from the moment of reservation until the token is available (0 = now). */
  readonly delayMs: number;
  /** Monotonic time (clock.monotonic()) at which the token is available. */
  readonly readyAt: number;
  /**
   * Gives the token back as far as possible (x/time/rate's Cancel): tokens
   * reserved after this one keep their times, so only the part not already
   * promised to them is restored. No-op once the reservation's time passed.
   */
  cancel(): void;
}

export interface TokenBucketOptions {
  /** Reported in errors, e.g. the API group. */
  key?: string;
  /** Upper bound on any single wait, applied on top of a deadline; default unbounded. */
  maxWaitMs?: number;
}

export interface WaitOptions {
  /** Monotonic time (clock.monotonic()). If the token would only be available after it, reject at once. */
  deadline?: number;
  /** Aborting cancels the reservation and rejects with the signal's reason. */
  signal?: AbortSignal;
}

const noop = () => {};

export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  readonly key: string | undefined;
  private readonly clock: Clock;
  private readonly maxWaitMs: number;
  /** Units available at `last`; negative while tokens are reserved ahead. */
  private units: number;
  /** When `units` was last brought up to date. */
  private last: number;
  /** Time of the latest reservation (x/time/rate's lastEvent). */
  private lastEvent: number;

  constructor(qps: number, burst: number, clock: Clock = systemClock, options: TokenBucketOptions = {}) {
    if (!(qps >= 0)) throw new RangeError(`qps must be >= 0 (0 = unlimited), got ${qps}`);
    const unlimited = qps === 0 || qps === Infinity;
    if (!unlimited && !(Number.isInteger(burst) && burst >= 1)) {
      throw new RangeError(`burst must be an integer >= 1 when qps is limited, got ${burst}`);
    }
    const maxWaitMs = options.maxWaitMs ?? Infinity;
    if (!(maxWaitMs >= 0)) throw new RangeError(`maxWaitMs must be >= 0, got ${maxWaitMs}`);
    this.qps = qps;
    this.burst = burst;
    this.clock = clock;
    this.key = options.key;
    this.maxWaitMs = maxWaitMs;
    this.units = burst * UNITS_PER_TOKEN;
    this.last = clock.monotonic();
    this.lastEvent = this.last;
  }

  /** True when qps is 0 or Infinity: every call proceeds at once. */
  get unlimited(): boolean {
    return this.qps === 0 || this.qps === Infinity;
  }

  /** Tokens available now; negative while reservations are queued ahead. */
  tokens(): number {
    if (this.unlimited) return Infinity;
    return this.advance(this.clock.monotonic()) / UNITS_PER_TOKEN;
  }

  /** Takes a token if one is available right now (x/time/rate's Allow). */
  tryTake(): boolean {
    return this.reserve(0).ok;
  }

  /**
   * Reserves one token if it is available within maxWaitMs (default: the
   * bucket's maxWaitMs). When not ok, the bucket is left unchanged.
   */
  reserve(maxWaitMs: number = this.maxWaitMs): Reservation {
    const now = this.clock.monotonic();
    if (this.unlimited) return { ok: true, delayMs: 0, readyAt: now, cancel: noop };

    const units = this.advance(now) - UNITS_PER_TOKEN;
    const delayMs = units < -EPSILON_UNITS ? -units / this.qps : 0;
    if (delayMs > Math.min(maxWaitMs, this.maxWaitMs)) {
      return { ok: false, delayMs, readyAt: now + delayMs, cancel: noop };
    }
    const readyAt = now + delayMs;
    this.last = now;
    this.units = units;
    this.lastEvent = readyAt;
    let cancelled = false;
    return {
      ok: true,
      delayMs,
      readyAt,
      cancel: () => {
        if (cancelled) return;
        cancelled = true;
        this.cancelAt(readyAt, this.clock.monotonic());
      },
    };
  }

  /**
   * Waits for a token. Rejects at once with RateLimitExceededError if the
   * token would come after the deadline (nothing is taken), and with the
   * signal's reason if the signal aborts (the reservation is cancelled).
   */
  async wait(opts: WaitOptions = {}): Promise<void> {
    const { deadline, signal } = opts;
    if (signal?.aborted) throw abortReason(signal);
    const now = this.clock.monotonic();
    const allowedMs = Math.min(this.maxWaitMs, deadline === undefined ? Infinity : deadline - now);
    const reservation = this.reserve(allowedMs);
    if (!reservation.ok) throw new RateLimitExceededError(this.key, reservation.delayMs, allowedMs);
    if (reservation.delayMs === 0) return;
    try {
      await this.clock.sleep(reservation.delayMs, signal);
    } catch (error) {
      reservation.cancel();
      throw error;
    }
  }

  /** Units that would be available at `now`, without changing state. */
  private advance(now: number): number {
    const elapsed = Math.max(0, now - this.last);
    const cap = this.burst * UNITS_PER_TOKEN;
    return Math.min(cap, this.units + elapsed * this.qps);
  }

  private cancelAt(readyAt: number, now: number): void {
    if (readyAt < now) return;
    // Tokens reserved after this one keep their slots: restore only what
    // was not promised to them.
    const restore = UNITS_PER_TOKEN - (this.lastEvent - readyAt) * this.qps;
    if (restore <= EPSILON_UNITS) return;
    this.units = Math.min(this.burst * UNITS_PER_TOKEN, this.advance(now) + restore);
    this.last = now;
    if (readyAt === this.lastEvent) {
      const previous = readyAt - UNITS_PER_TOKEN / this.qps;
      if (previous >= now) this.lastEvent = previous;
    }
  }
}

/** One bucket per key (e.g. per API group), all with the same qps and burst. */
export class PerKeyTokenBuckets {
  readonly qps: number;
  readonly burst: number;
  private readonly clock: Clock;
  private readonly maxWaitMs: number | undefined;
  private readonly buckets = new Map<string, TokenBucket>();

  constructor(
    qps: number = DEFAULT_CLIENT_QPS,
    burst: number = DEFAULT_CLIENT_BURST,
    clock: Clock = systemClock,
    options: { maxWaitMs?: number } = {},
  ) {
    // Validate once, up front, rather than on the first key.
    new TokenBucket(qps, burst, clock, options);
    this.qps = qps;
    this.burst = burst;
    this.clock = clock;
    this.maxWaitMs = options.maxWaitMs;
  }

  /** The bucket for key, created full on first use. */
  get(key: string): TokenBucket {
    let bucket = this.buckets.get(key);
    if (!bucket) {
      const options: TokenBucketOptions = { key };
      if (this.maxWaitMs !== undefined) options.maxWaitMs = this.maxWaitMs;
      bucket = new TokenBucket(this.qps, this.burst, this.clock, options);
      this.buckets.set(key, bucket);
    }
    return bucket;
  }

  wait(key: string, opts: WaitOptions = {}): Promise<void> {
    return this.get(key).wait(opts);
  }

  tryTake(key: string): boolean {
    return this.get(key).tryTake();
  }

  /** Keys that have a bucket. */
  keys(): string[] {
    return [...this.buckets.keys()];
  }
}
