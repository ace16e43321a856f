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

/**
 * The one exponential backoff of the runtime: the delay before retry
 * `attempt` (1-based) is initialMs × 2^(attempt−1), capped at maxMs, then
 * spread by up to ±`spread` of itself (0.2: anywhere in 80–120 %), so
 * replicas that failed together do not retry together.
 */
export function backoffDelay(
  attempt: number,
  options: { initialMs: number; maxMs: number; spread?: number; random?: () => number },
): number {
  const { initialMs, maxMs, spread = 0, random = Math.random } = options;
  const base = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
  return spread > 0 ? base * (1 - spread + random() * 2 * spread) : base;
}
