import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { PerKeyTokenBuckets, RateLimitExceededError, TokenBucket } from '../../../src/runtime/workqueue/tokenbucket.ts';

/** Starts a wait and records when (fake time) it settles and how. */
function track(clock: FakeClock, promise: Promise<void>) {
  const state: { at?: number; error?: unknown } = {};
  promise.then(
    () => void (state.at = clock.now()),
    (error: unknown) => {
      state.at = clock.now();
      state.error = error;
    },
  );
  return state;
}

describe('TokenBucket', { timeout: 10_000 }, () => {
  it('allows the burst at once, then paces at qps', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(5, 10, clock);
    for (let i = 0; i < 10; i++) assert.ok(bucket.tryTake(), `burst token ${i}`);
    assert.equal(bucket.tryTake(), false);
    const waits = [track(clock, bucket.wait()), track(clock, bucket.wait()), track(clock, bucket.wait())];
    await clock.advance(1000);
    assert.deepEqual(
      waits.map((w) => w.at),
      [200, 400, 600],
    );
    assert.ok(waits.every((w) => w.error === undefined));
  });

  it('refills up to burst and no further', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(5, 3, clock);
    while (bucket.tryTake());
    await clock.advance(60_000);
    assert.equal(bucket.tokens(), 3);
    assert.ok(bucket.tryTake() && bucket.tryTake() && bucket.tryTake());
    assert.equal(bucket.tryTake(), false);
  });

  it('rejects at once when the token would come after the deadline, and keeps the token', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(5, 1, clock, { key: 'apps' });
    assert.ok(bucket.tryTake());
    const first = track(clock, bucket.wait()); // token at 200
    const late = bucket.wait({ deadline: clock.now() + 300 }); // would be 400
    await assert.rejects(late, (error: unknown) => {
      assert.ok(error instanceof RateLimitExceededError);
      assert.equal(error.key, 'apps');
      assert.equal(error.waitMs, 400);
      assert.equal(error.allowedMs, 300);
      assert.match(error.message, /apps.*400ms.*exceed the deadline/);
      return true;
    });
    assert.equal(clock.now(), 0, 'rejected without waiting');
    // The refused reservation took nothing: the next waiter gets the 400 slot.
    const next = track(clock, bucket.wait());
    await clock.advance(1000);
    assert.equal(first.at, 200);
    assert.equal(next.at, 400);
  });

  it('accepts a deadline the token meets exactly, and rejects a deadline already past', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(10, 1, clock);
    assert.ok(bucket.tryTake());
    const ok = track(clock, bucket.wait({ deadline: 100 }));
    await clock.advance(100);
    assert.deepEqual(ok, { at: 100 });
    await clock.advance(1000); // full again
    await assert.rejects(bucket.wait({ deadline: clock.now() - 1 }), RateLimitExceededError);
    assert.equal(bucket.tokens(), 1);
  });

  it('an abort cancels the reservation and rejects with the reason', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(5, 1, clock);
    assert.ok(bucket.tryTake());
    const first = track(clock, bucket.wait()); // 200
    const controller = new AbortController();
    const aborted = track(clock, bucket.wait({ signal: controller.signal })); // 400
    await clock.advance(50);
    const reason = new Error('caller gave up');
    controller.abort(reason);
    await clock.advance(0);
    assert.equal(aborted.error, reason);
    assert.equal(aborted.at, 50);
    // Its slot was given back: the next waiter gets 400, not 600.
    const next = track(clock, bucket.wait());
    await clock.advance(1000);
    assert.equal(first.at, 200);
    assert.equal(next.at, 400);
    assert.equal(clock.pending, 0);
  });

  it('rejects with the reason of a signal aborted before the call, taking nothing', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(5, 1, clock);
    const controller = new AbortController();
    controller.abort(new Error('already'));
    await assert.rejects(bucket.wait({ signal: controller.signal }), /already/);
    assert.equal(bucket.tokens(), 1);
  });

  it('keeps later reservations in place when an earlier one is cancelled', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(5, 1, clock);
    assert.ok(bucket.tryTake());
    const controller = new AbortController();
    const a = track(clock, bucket.wait({ signal: controller.signal })); // 200
    const b = track(clock, bucket.wait()); // 400
    controller.abort(new Error('x'));
    await clock.advance(1000);
    assert.ok(a.error instanceof Error);
    assert.equal(b.at, 400);
  });

  it('qps 0 and Infinity are unlimited and never wait', async () => {
    for (const qps of [0, Infinity]) {
      const clock = new FakeClock(0);
      const bucket = new TokenBucket(qps, 1, clock);
      assert.ok(bucket.unlimited);
      for (let i = 0; i < 1000; i++) assert.ok(bucket.tryTake());
      await bucket.wait({ deadline: clock.now() });
      assert.equal(clock.pending, 0);
      assert.equal(bucket.reserve().delayMs, 0);
    }
  });

  it('maxWaitMs bounds waits that have no deadline', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(1, 1, clock, { maxWaitMs: 1500 });
    assert.ok(bucket.tryTake());
    const first = track(clock, bucket.wait()); // 1000
    await assert.rejects(bucket.wait(), (e: unknown) => e instanceof RateLimitExceededError && e.waitMs === 2000);
    await clock.advance(1000);
    assert.equal(first.at, 1000);
  });

  it('validates its parameters', () => {
    assert.throws(() => new TokenBucket(-1, 1), RangeError);
    assert.throws(() => new TokenBucket(5, 0), RangeError);
    assert.throws(() => new TokenBucket(5, 1.5), RangeError);
    assert.doesNotThrow(() => new TokenBucket(0, 0));
  });

  it('a wall clock stepping forward mints no tokens (no burst)', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(1, 2, clock);
    assert.ok(bucket.tryTake() && bucket.tryTake());
    clock.step(60_000);
    assert.equal(bucket.tryTake(), false, 'a step is not time passing');
    assert.equal(bucket.tokens(), 0);
    const waited = track(clock, bucket.wait());
    await clock.advance(999);
    assert.equal(waited.at, undefined);
    await clock.advance(1);
    assert.equal(waited.at, 61_000, 'one token a second of real time');
  });

  it('a wall clock stepping backwards neither stalls accrual nor loses what accrued (no stall)', async () => {
    const clock = new FakeClock(10_000);
    const bucket = new TokenBucket(1, 1, clock);
    assert.ok(bucket.tryTake());
    await clock.advance(500);
    clock.step(-5_000);
    assert.equal(bucket.tryTake(), false, 'half a second since the take: half a token');
    await clock.advance(500);
    assert.ok(bucket.tryTake(), 'a full second since the take');
    clock.step(-60_000);
    const waited = track(clock, bucket.wait());
    await clock.advance(1000);
    assert.ok(
      waited.at !== undefined && waited.error === undefined,
      'the next token a second later, whatever the wall clock says',
    );
  });

  it('deadlines are on the monotonic clock, so a step neither expires nor extends them', async () => {
    const clock = new FakeClock(0);
    const bucket = new TokenBucket(5, 1, clock);
    assert.ok(bucket.tryTake());
    clock.step(60_000);
    const ok = track(clock, bucket.wait({ deadline: clock.monotonic() + 300 })); // token at 200
    await clock.advance(200);
    assert.deepEqual(ok, { at: 60_200 });
    clock.step(-120_000);
    await assert.rejects(
      bucket.wait({ deadline: clock.monotonic() + 100 }),
      RateLimitExceededError,
      'token at 400 is past a deadline 100 ms away',
    );
  });
});

describe('PerKeyTokenBuckets', { timeout: 10_000 }, () => {
  it('gives each key its own bucket with the same qps and burst', async () => {
    const clock = new FakeClock(0);
    const buckets = new PerKeyTokenBuckets(5, 2, clock);
    assert.ok(buckets.tryTake('apps') && buckets.tryTake('apps'));
    assert.equal(buckets.tryTake('apps'), false);
    assert.ok(buckets.tryTake('core'), 'another group is not affected');
    assert.equal(buckets.get('apps'), buckets.get('apps'));
    assert.deepEqual(buckets.keys().sort(), ['apps', 'core']);
    const waited = track(clock, buckets.wait('apps'));
    await clock.advance(200);
    assert.equal(waited.at, 200);
  });

  it('names the key in errors and defaults to 5 qps burst 10', async () => {
    const clock = new FakeClock(0);
    const buckets = new PerKeyTokenBuckets(undefined, undefined, clock);
    assert.equal(buckets.qps, 5);
    assert.equal(buckets.burst, 10);
    for (let i = 0; i < 10; i++) assert.ok(buckets.tryTake('policy'));
    await assert.rejects(
      buckets.wait('policy', { deadline: clock.now() + 100 }),
      (e: unknown) => e instanceof RateLimitExceededError && e.key === 'policy' && e.waitMs === 200,
    );
  });
});
