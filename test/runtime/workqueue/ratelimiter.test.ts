import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../src/runtime/clock.ts';
import {
  BucketRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  defaultControllerRateLimiter,
  backoffDelay,
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

describe('backoffDelay', { timeout: 10_000 }, () => {
  it('doubles from initialMs up to maxMs', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5].map((n) => backoffDelay(n, { initialMs: 100, maxMs: 1000 })),
      [100, 200, 400, 800, 1000],
    );
    assert.equal(backoffDelay(0, { initialMs: 100, maxMs: 1000 }), 100, 'attempt 0 is the first delay too');
  });

  it('spreads each delay by up to ±spread of itself', () => {
    assert.equal(backoffDelay(3, { initialMs: 100, maxMs: 1000, spread: 0.2, random: () => 0 }), 320);
    assert.equal(backoffDelay(3, { initialMs: 100, maxMs: 1000, spread: 0.2, random: () => 0.5 }), 400);
    for (let attempt = 1; attempt < 40; attempt++) {
      const d = backoffDelay(attempt, { initialMs: 10, maxMs: 80, spread: 0.2 });
      const base = Math.min(80, 10 * 2 ** (attempt - 1));
      assert.ok(d >= base * 0.8 && d <= base * 1.2, `${d} not within 20 % of ${base}`);
    }
  });
});
