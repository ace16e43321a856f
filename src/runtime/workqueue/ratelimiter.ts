// Rate limiters for the work queue, with the semantics of client-go's
// workqueue rate limiters: `when(item)` says how long to wait before the
// item may be processed again, `forget(item)` clears its failure history.
// Plus a jittered exponential backoff for reconnect loops.

import { systemClock, type Clock } from '../clock.ts';
import { TokenBucket } from './tokenbucket.ts';

export interface RateLimiter<T = string> {
  /** Milliseconds to wait before the item is processed again; counts as a requeue. */
  when(item: T): number;
  /** Clears the item's history (call after a success). */
  forget(item: T): void;
  /** How many times the item has been requeued since it was last forgotten. */
  numRequeues(item: T): number;
}

/** Per item: base × 2^failures, capped at max. */
export class ItemExponentialFailureRateLimiter<T = string> implements RateLimiter<T> {
  readonly baseMs: number;
  readonly maxMs: number;
  private readonly failures = new Map<T, number>();

  constructor(baseMs: number, maxMs: number) {
    if (!(baseMs >= 0)) throw new RangeError(`baseMs must be >= 0, got ${baseMs}`);
    if (!(maxMs >= 0)) throw new RangeError(`maxMs must be >= 0, got ${maxMs}`);
    this.baseMs = baseMs;
    this.maxMs = maxMs;
  }

  when(item: T): number {
    const exp = this.failures.get(item) ?? 0;
    this.failures.set(item, exp + 1);
    // 2^exp overflows to Infinity for large exp; min() then yields max.
    return Math.min(this.baseMs * 2 ** exp, this.maxMs);
  }

  forget(item: T): void {
    this.failures.delete(item);
  }

  numRequeues(item: T): number {
    return this.failures.get(item) ?? 0;
  }
}

/**
 * One token bucket shared by all items: `when` reserves the next token and
 * returns how long until it is available, so reservations queue up.
 * qps 0 or Infinity means unlimited (always 0).
 */
export class BucketRateLimiter<T = string> implements RateLimiter<T> {
  private readonly bucket: TokenBucket;

  constructor(qps: number, burst: number, clock: Clock = systemClock) {
    this.bucket = new TokenBucket(qps, burst, clock);
  }

  when(_item: T): number {
    return this.bucket.reserve(Infinity).delayMs;
  }

  forget(_item: T): void {}

  numRequeues(_item: T): number {
    return 0;
  }
}

/** The largest delay of all limiters; every limiter sees every call. */
export class MaxOfRateLimiter<T = string> implements RateLimiter<T> {
  private readonly limiters: readonly RateLimiter<T>[];

  constructor(...limiters: RateLimiter<T>[]) {
    if (limiters.length === 0) throw new RangeError('MaxOfRateLimiter needs at least one limiter');
    this.limiters = limiters;
  }

  when(item: T): number {
    let max = 0;
    // Call every limiter (not short-circuit) so each records the requeue.
    for (const limiter of this.limiters) max = Math.max(max, limiter.when(item));
    return max;
  }

  forget(item: T): void {
    for (const limiter of this.limiters) limiter.forget(item);
  }

  numRequeues(item: T): number {
    let max = 0;
    for (const limiter of this.limiters) max = Math.max(max, limiter.numRequeues(item));
    return max;
  }
}

/** client-go's default: per-item exponential 5ms..1000s, and overall 10 qps with burst 100. */
export function defaultControllerRateLimiter<T = string>(clock: Clock = systemClock): RateLimiter<T> {
  return new MaxOfRateLimiter<T>(
    new ItemExponentialFailureRateLimiter<T>(5, 1_000_000),
    new BucketRateLimiter<T>(10, 100, clock),
  );
}

export interface JitteredBackoffOptions {
  /** First delay before jitter. */
  initialMs: number;
  /** Cap on the un-jittered delay. */
  maxMs: number;
  /** Growth per step, >= 1 (default 2). */
  factor?: number;
  /** Each delay d becomes d + random() × jitter × d (default 0). */
  jitter?: number;
  /** Source of randomness in [0, 1); injectable for tests. */
  random?: () => number;
}

export interface Backoff {
  /** The next delay in ms; each call advances one step. */
  next(): number;
  /** Back to initialMs (call after a success, e.g. a watch that stayed up). */
  reset(): void;
  /** Steps taken since the last reset. */
  readonly attempts: number;
}

/**
 * Successive delays initialMs × factor^n, capped at maxMs, each stretched by
 * up to `jitter` of itself (like apimachinery's wait.Backoff, jitter is
 * applied after the cap, so a delay can reach maxMs × (1 + jitter)).
 */
export function jitteredBackoff(options: JitteredBackoffOptions): Backoff {
  const { initialMs, maxMs, factor = 2, jitter = 0, random = Math.random } = options;
  if (!(initialMs >= 0)) throw new RangeError(`initialMs must be >= 0, got ${initialMs}`);
  if (!(maxMs >= initialMs)) throw new RangeError(`maxMs must be >= initialMs, got ${maxMs}`);
  if (!(factor >= 1)) throw new RangeError(`factor must be >= 1, got ${factor}`);
  if (!(jitter >= 0)) throw new RangeError(`jitter must be >= 0, got ${jitter}`);
  let current = initialMs;
  let attempts = 0;
  return {
    next() {
      const base = current;
      current = Math.min(current * factor, maxMs);
      attempts++;
      return jitter > 0 ? base + random() * jitter * base : base;
    },
    reset() {
      current = initialMs;
      attempts = 0;
    },
    get attempts() {
      return attempts;
    },
  };
}
