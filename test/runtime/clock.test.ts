import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/runtime/clock.ts';

describe('FakeClock', () => {
  it('fires timers in due order, only when time reaches them', async () => {
    const clock = new FakeClock(0);
    const fired: string[] = [];
    clock.setTimer(30, () => fired.push('b'));
    clock.setTimer(10, () => fired.push('a'));
    const cancelled = clock.setTimer(20, () => fired.push('never'));
    cancelled.cancel();
    await clock.advance(9);
    assert.deepEqual(fired, []);
    await clock.advance(21);
    assert.deepEqual(fired, ['a', 'b']);
    assert.equal(clock.now(), 30);
  });

  it('runs async continuations woken by one timer before the next fires', async () => {
    const clock = new FakeClock(0);
    const seen: number[] = [];
    const loop = (async () => {
      for (let i = 0; i < 3; i++) {
        await clock.sleep(10);
        seen.push(clock.now());
      }
    })();
    await clock.advance(100);
    await loop;
    assert.deepEqual(seen, [10, 20, 30]);
  });

  it('advance moves the wall and the monotonic clock together', async () => {
    const clock = new FakeClock(1000);
    assert.equal(clock.monotonic(), 1000);
    await clock.advance(250);
    assert.deepEqual([clock.now(), clock.monotonic()], [1250, 1250]);
  });

  it('step moves only the wall clock, either way, and fires no timer', async () => {
    const clock = new FakeClock(0);
    const fired: number[] = [];
    clock.setTimer(100, () => fired.push(clock.monotonic()));
    clock.step(60_000);
    assert.deepEqual([clock.now(), clock.monotonic()], [60_000, 0]);
    await clock.advance(0);
    assert.deepEqual(fired, [], 'a forward step is not time passing');
    clock.step(-120_000);
    assert.deepEqual([clock.now(), clock.monotonic()], [-60_000, 0]);
    await clock.advance(100);
    assert.deepEqual(fired, [100], 'timers are due on monotonic time');
    assert.equal(clock.now(), -59_900);
  });

  it('rejects a sleep whose signal aborts, and cancels its timer', async () => {
    const clock = new FakeClock(0);
    const controller = new AbortController();
    const sleeping = clock.sleep(1000, controller.signal);
    controller.abort(new Error('deadline'));
    await assert.rejects(sleeping, /deadline/);
    assert.equal(clock.pending, 0);
  });
});
