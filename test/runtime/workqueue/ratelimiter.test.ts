import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../src/runtime/clock.ts';
import {
  BucketRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  defaultControllerRateLimiter,
  jitteredBackoff,
  type RateLimiter,
} from '../../../src/runtime/workqueue/ratelimiter.ts';

describe('ItemExponentialFailureRateLimiter', { timeout: 10_000 }, () => {
  it('doubles per failure from base and stops at max', () => {
    const limiter = new ItemExponentialFailureRateLimiter(5, 100);
    const delays = Array.from({ length: 7 }, () => limiter.when('a'));
    assert.deepEqual(delays, [5, 10, 20, 40, 80, 100, 100]);
    assert.equal(limiter.numRequeues('a'), 7);
  });

  it('tracks items separately and forget resets one item', () => {
    const limiter = new ItemExponentialFailureRateLimiter(1, 1000);
    limiter.when('a');
    limiter.when('a');
    limiter.when('b');
    limiter.forget('a');
    assert.equal(limiter.numRequeues('a'), 0);
    assert.equal(limiter.numRequeues('b'), 1);
    assert.equal(limiter.when('a'), 1);
    assert.equal(limiter.when('b'), 2);
  });

  it('caps at max even after so many failures that 2^n overflows', () => {
    const limiter = new ItemExponentialFailureRateLimiter(5, 1_000_000);
    let last = 0;
    for (let i = 0; i < 2000; i++) last = limiter.when('x');
    assert.equal(last, 1_000_000);
  });
});

describe('BucketRateLimiter', { timeout: 10_000 }, () => {
  it('lets the burst through, then queues reservations one token apart', () => {
    const clock = new FakeClock(0);
    const limiter = new BucketRateLimiter(10, 3, clock);
    assert.deepEqual([limiter.when('a'), limiter.when('b'), limiter.when('c')], [0, 0, 0]);
    assert.equal(limiter.when('d'), 100);
    assert.equal(limiter.when('e'), 200);
    assert.equal(limiter.numRequeues('d'), 0);
  });

  it('refills continuously with time', async () => {
    const clock = new FakeClock(0);
    const limiter = new BucketRateLimiter(10, 1, clock);
    assert.equal(limiter.when('a'), 0);
    assert.equal(limiter.when('b'), 100);
    await clock.advance(150);
    // b's token came at 100; the next is due at 200, 50ms from now.
    assert.equal(limiter.when('c'), 50);
  });
});

describe('MaxOfRateLimiter', { timeout: 10_000 }, () => {
  it('returns the largest delay and forwards forget to all', () => {
    const clock = new FakeClock(0);
    const exp = new ItemExponentialFailureRateLimiter(50, 10_000);
    const bucket = new BucketRateLimiter(10, 1, clock);
    const limiter: RateLimiter = new MaxOfRateLimiter(exp, bucket);
    assert.equal(limiter.when('a'), 50); // exp 50, bucket 0
    assert.equal(limiter.when('a'), 100); // exp 100, bucket 100
    assert.equal(limiter.when('b'), 200); // exp 50, bucket 200
    assert.equal(limiter.numRequeues('a'), 2);
    limiter.forget('a');
    assert.equal(exp.numRequeues('a'), 0);
  });

  it('refuses to be built empty', () => {
    assert.throws(() => new MaxOfRateLimiter(), RangeError);
  });
});

describe('defaultControllerRateLimiter', { timeout: 10_000 }, () => {
  it('is exponential from 5ms per item until the overall burst of 100 is spent', () => {
    const clock = new FakeClock(0);
    const limiter = defaultControllerRateLimiter(clock);
    assert.deepEqual([limiter.when('a'), limiter.when('a'), limiter.when('a')], [5, 10, 20]);
    for (let i = 0; i < 97; i++) limiter.when(`k${i}`);
    // Burst of 100 used up: the next token is 100ms away (10 qps).
    assert.equal(limiter.when('fresh'), 100);
  });

  it('caps the per-item delay at 1000s', () => {
    const limiter = defaultControllerRateLimiter(new FakeClock(0));
    let last = 0;
    for (let i = 0; i < 40; i++) last = limiter.when('a');
    assert.equal(last, 1_000_000);
  });
});

describe('jitteredBackoff', { timeout: 10_000 }, () => {
  it('grows by factor up to max without jitter', () => {
    const backoff = jitteredBackoff({ initialMs: 100, maxMs: 1000, factor: 3 });
    const delays = Array.from({ length: 5 }, () => backoff.next());
    assert.deepEqual(delays, [100, 300, 900, 1000, 1000]);
    assert.equal(backoff.attempts, 5);
    backoff.reset();
    assert.equal(backoff.attempts, 0);
    assert.equal(backoff.next(), 100);
  });

  it('stretches each delay by random × jitter', () => {
    const randoms = [0, 0.5, 0.999];
    const backoff = jitteredBackoff({ initialMs: 100, maxMs: 400, factor: 2, jitter: 0.5, random: () => randoms.shift()! });
    assert.deepEqual([backoff.next(), backoff.next(), backoff.next()], [100, 250, 400 + 0.999 * 0.5 * 400]);
  });

  it('stays within [d, d × (1 + jitter)] for real randomness', () => {
    const backoff = jitteredBackoff({ initialMs: 10, maxMs: 80, factor: 2, jitter: 0.2 });
    const bases = [10, 20, 40, 80, 80, 80];
    for (const base of bases) {
      const d = backoff.next();
      assert.ok(d >= base && d <= base * 1.2, `${d} not in [${base}, ${base * 1.2}]`);
    }
  });

  it('rejects nonsense parameters', () => {
    assert.throws(() => jitteredBackoff({ initialMs: 100, maxMs: 10 }), RangeError);
    assert.throws(() => jitteredBackoff({ initialMs: 1, maxMs: 10, factor: 0.5 }), RangeError);
    assert.throws(() => jitteredBackoff({ initialMs: 1, maxMs: 10, jitter: -1 }), RangeError);
  });
});
