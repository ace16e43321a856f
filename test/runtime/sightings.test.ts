import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { FakeClock } from '../../src/runtime/clock.ts';
import { TimestampSightings, timestampSightings } from '../../src/runtime/sightings.ts';

const SEC = 1000;
const MIN = 60 * SEC;
const HOUR = 60 * MIN;
const T0 = Date.UTC(2024, 0, 2, 12, 0, 0);

const one = (stamp: number) => new Map([['k', stamp]]);

describe('TimestampSightings', () => {
  it('counts a stamp from itself while clocks agree and nothing steps', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    assert.equal(s.look('scope', one(T0 - MIN), 'initial').get('k'), T0 - MIN);
    await clock.advance(5 * MIN);
    assert.equal(s.look('scope', one(T0 - MIN), 'live').get('k'), T0 - MIN);
  });

  it('a step of this clock after the first sighting changes nothing, either way', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look('scope', one(T0), 'initial');
    await clock.advance(2 * MIN);
    clock.step(HOUR);
    assert.equal(clock.now() - s.look('scope', one(T0), 'live').get('k')!, 2 * MIN, 'a forward step is not time passing');
    clock.step(-3 * HOUR);
    await clock.advance(MIN);
    assert.equal(clock.now() - s.look('scope', one(T0), 'live').get('k')!, 3 * MIN, 'nor does a backward step take time back');
  });

  it('a stamp that appears in a scope already watched counts from when it appeared, whatever it says', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look('scope', new Map(), 'initial');
    await clock.advance(3 * SEC);
    // Written by a replica whose clock is 10 minutes behind.
    const from = s.look('scope', one(clock.now() - 10 * MIN), 'live').get('k')!;
    assert.equal(from, clock.now());
    await clock.advance(MIN);
    assert.equal(clock.now() - s.look('scope', one(T0 + 3 * SEC - 10 * MIN), 'live').get('k')!, MIN);
  });

  it('a scope first seen live is new: its stamps count from now; one from an initial list is trusted to the wall clock', () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    assert.equal(s.look('new', one(T0 - 10 * MIN), 'live').get('k'), T0);
    assert.equal(s.look('listed', one(T0 - 10 * MIN), 'initial').get('k'), T0 - 10 * MIN);
  });

  it('a stamp from the future counts from when it was seen, not from that future', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    assert.equal(s.look('scope', one(T0 + HOUR), 'initial').get('k'), T0);
    await clock.advance(MIN);
    assert.equal(clock.now() - s.look('scope', one(T0 + HOUR), 'live').get('k')!, MIN);
  });

  it('a changed stamp is a new sighting; scopes and keys are kept apart', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look('a', new Map([['x', T0 - HOUR], ['y', T0 - HOUR]]), 'initial');
    s.look('b', new Map([['x', T0 - HOUR]]), 'initial');
    await clock.advance(MIN);
    const a = s.look('a', new Map([['x', T0 - 2 * HOUR], ['y', T0 - HOUR]]), 'live');
    assert.equal(a.get('x'), clock.now(), 'x changed: counted from now');
    assert.equal(a.get('y'), T0 - HOUR, 'y did not');
    assert.equal(s.look('b', new Map([['x', T0 - HOUR]]), 'live').get('x'), T0 - HOUR);
    assert.equal(s.size, 3);
  });

  it('forgets stamps and scopes not seen for a long time', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock, { forgetAfterMs: HOUR });
    s.look('gone', one(T0), 'initial');
    s.look('kept', one(T0), 'initial');
    await clock.advance(45 * MIN);
    s.look('kept', one(T0), 'live');
    await clock.advance(30 * MIN);
    s.look('kept', one(T0), 'live');
    assert.equal(s.size, 1);
  });

  it('is one per clock, so every capability of a process counts from the same sighting', () => {
    const clock = new FakeClock(T0);
    assert.equal(timestampSightings(clock), timestampSightings(clock));
    assert.notEqual(timestampSightings(clock), timestampSightings(new FakeClock(T0)));
  });

  it('never counts more time than really passed since a stamp that appeared while watched, whatever the clocks do', async () => {
    await fc.assert(fc.asyncProperty(
      fc.array(fc.record({ advance: fc.nat(10 * MIN), step: fc.integer({ min: -HOUR, max: HOUR }), skew: fc.integer({ min: -HOUR, max: HOUR }), write: fc.boolean() }), { minLength: 1, maxLength: 30 }),
      async (moves) => {
        const clock = new FakeClock(T0);
        const s = new TimestampSightings(clock);
        s.look('scope', new Map(), 'initial');
        let written: { stamp: number; at: number } | undefined;
        for (const m of moves) {
          if (m.write) {
            // Another replica writes a stamp with its own (skewed) clock, at true (monotonic) time `at`.
            written = { stamp: clock.now() + m.skew, at: clock.monotonic() };
          }
          clock.step(m.step);
          await clock.advance(m.advance);
          if (!written) continue;
          const from = s.look('scope', one(written.stamp), 'live').get('k')!;
          const counted = clock.now() - from;
          const truly = clock.monotonic() - written.at;
          if (counted > truly) return false;
        }
        return true;
      },
    ), { seed: 20261122, numRuns: 200 });
  });
});
