import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { FakeClock } from '../../src/runtime/clock.ts';
import { CLOCK_TOLERANCE_MS, TimestampSightings } from '../../src/runtime/sightings.ts';

const SEC = 1000;
const MIN = 60 * SEC;
const HOUR = 60 * MIN;
const T0 = Date.UTC(2024, 0, 2, 12, 0, 0);

const one = (stamp: number) => new Map([['k', stamp]]);

describe('TimestampSightings', () => {
  it('takes a stamp at its word while clocks agree and nothing steps', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    assert.deepEqual(s.look('scope', one(T0 - MIN), 'read').get('k'), { from: T0 - MIN });
    await clock.advance(5 * MIN);
    assert.deepEqual(s.look('scope', one(T0 - MIN), 'event').get('k'), { from: T0 - MIN });
  });

  it("takes at its word a stamp this process wrote between two reads (rollout-operator's zone-tracker scenario)", async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look('zone-a', one(T0 - HOUR), 'read'); // the tracker as read before zone-a's downscale
    await clock.advance(100);
    const written = clock.now(); // zone-a's downscale recorded
    await clock.advance(23 * SEC);
    assert.deepEqual(
      s.look('zone-a', one(written), 'read').get('k'),
      { from: written },
      'not counted from this second read',
    );
  });

  it('a stamp within the tolerance of this clock, ahead or behind, is taken at its word', () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look('a', new Map(), 'read');
    assert.deepEqual(s.look('a', one(T0 + CLOCK_TOLERANCE_MS), 'read').get('k'), { from: T0 + CLOCK_TOLERANCE_MS });
    assert.deepEqual(s.look('b', one(T0 - CLOCK_TOLERANCE_MS), 'event').get('k'), { from: T0 - CLOCK_TOLERANCE_MS });
  });

  it('a step of this clock after the first sighting changes nothing, either way', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look('scope', one(T0), 'read');
    await clock.advance(2 * MIN);
    clock.step(HOUR);
    const forward = s.look('scope', one(T0), 'read').get('k')!;
    assert.equal(clock.now() - forward.from, 2 * MIN, 'a forward step is not time passing');
    assert.equal(forward.evidence, 'stepped');
    clock.step(-3 * HOUR);
    await clock.advance(MIN);
    assert.equal(
      clock.now() - s.look('scope', one(T0), 'read').get('k')!.from,
      3 * MIN,
      'nor does a backward step take time back',
    );
  });

  it('a step of this clock between a look and the first sighting: counted from the sighting', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look('scope', new Map(), 'read');
    await clock.advance(MIN);
    const stamp = clock.now() - 10 * SEC; // a correct writer, 10 s before this look
    clock.step(30 * MIN);
    assert.deepEqual(s.look('scope', one(stamp), 'read').get('k'), { from: clock.now(), evidence: 'stepped' });
  });

  it("a stamp a watch delivers, older than a watch's latency allows, counts from when it was delivered", async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look('scope', new Map(), 'read');
    await clock.advance(3 * SEC);
    // Written by a replica whose clock is 10 minutes behind.
    const stamp = clock.now() - 10 * MIN;
    assert.deepEqual(s.look('scope', one(stamp), 'event').get('k'), { from: clock.now(), evidence: 'before-look' });
    await clock.advance(MIN);
    assert.equal(clock.now() - s.look('scope', one(stamp), 'read').get('k')!.from, MIN);
  });

  it('a stamp older than an earlier read that did not show it counts from when it was first seen', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look('scope', new Map(), 'read');
    await clock.advance(5 * MIN);
    const seen = clock.now();
    // Claims to predate the read five minutes ago, which did not show it.
    assert.deepEqual(s.look('scope', one(T0 - MIN), 'read').get('k'), { from: seen, evidence: 'before-look' });
    // A scope never looked at before has no such evidence.
    assert.deepEqual(s.look('fresh', one(T0 - MIN), 'read').get('k'), { from: T0 - MIN });
  });

  it('a stamp from the future counts from when it was seen, not from that future', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    assert.deepEqual(s.look('scope', one(T0 + HOUR), 'read').get('k'), { from: T0, evidence: 'ahead' });
    await clock.advance(MIN);
    assert.equal(clock.now() - s.look('scope', one(T0 + HOUR), 'event').get('k')!.from, MIN);
  });

  it('a changed stamp is a new sighting; scopes and keys are kept apart', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock);
    s.look(
      'a',
      new Map([
        ['x', T0 - HOUR],
        ['y', T0 - HOUR],
      ]),
      'read',
    );
    s.look('b', new Map([['x', T0 - HOUR]]), 'read');
    await clock.advance(MIN);
    const a = s.look(
      'a',
      new Map([
        ['x', T0 - 2 * HOUR],
        ['y', T0 - HOUR],
      ]),
      'read',
    );
    assert.deepEqual(
      a.get('x'),
      { from: clock.now(), evidence: 'before-look' },
      'x changed to a time before the last look',
    );
    assert.deepEqual(a.get('y'), { from: T0 - HOUR }, 'y did not change');
    assert.deepEqual(s.look('b', new Map([['x', T0 - HOUR]]), 'read').get('x'), { from: T0 - HOUR });
    assert.equal(s.size, 3);
  });

  it('forgets stamps and scopes not seen for a long time', async () => {
    const clock = new FakeClock(T0);
    const s = new TimestampSightings(clock, { forgetAfterMs: HOUR });
    s.look('gone', one(T0), 'read');
    s.look('kept', one(T0), 'read');
    await clock.advance(45 * MIN);
    s.look('kept', one(T0), 'read');
    await clock.advance(30 * MIN);
    s.look('kept', one(T0), 'read');
    assert.equal(s.size, 1);
  });

  const moves = fc.array(
    fc.record({
      advance: fc.nat(10 * MIN),
      step: fc.integer({ min: -HOUR, max: HOUR }),
      skew: fc.integer({ min: -HOUR, max: HOUR }),
      write: fc.boolean(),
      seen: fc.constantFrom('read' as const, 'event' as const),
    }),
    { minLength: 1, maxLength: 30 },
  );

  it('never counts more time than really passed since a write the scope was looked at just before, whatever the clocks do (beyond the tolerance)', async () => {
    await fc.assert(
      fc.asyncProperty(moves, async (ms) => {
        const clock = new FakeClock(T0);
        const s = new TimestampSightings(clock);
        let written: { stamp: number; at: number } | undefined;
        for (const m of ms) {
          if (m.write) {
            // This process reads the scope, then another replica writes a stamp with its own (skewed) clock.
            s.look('scope', new Map(), 'read');
            written = { stamp: clock.now() + m.skew, at: clock.monotonic() };
          }
          clock.step(m.step);
          await clock.advance(m.advance);
          if (!written) continue;
          const counted = clock.now() - s.look('scope', one(written.stamp), m.seen).get('k')!.from;
          const truly = clock.monotonic() - written.at;
          if (counted > truly + CLOCK_TOLERANCE_MS) return false;
        }
        return true;
      }),
      { seed: 20261125, numRuns: 300 },
    );
  });

  it('while clocks agree within the tolerance and never step, every stamp is taken at its word', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            advance: fc.nat(10 * MIN),
            skew: fc.integer({ min: -CLOCK_TOLERANCE_MS, max: CLOCK_TOLERANCE_MS }),
            write: fc.boolean(),
            look: fc.boolean(),
            seen: fc.constantFrom('read' as const, 'event' as const),
          }),
          { minLength: 1, maxLength: 30 },
        ),
        async (ms) => {
          const clock = new FakeClock(T0);
          const s = new TimestampSightings(clock);
          let stamp: number | undefined;
          for (const m of ms) {
            if (m.look) s.look('scope', stamp === undefined ? new Map() : one(stamp), 'read');
            // A write is seen by a watch moments later, or by the next read.
            if (m.write) stamp = clock.now() + m.skew;
            await clock.advance(m.advance);
            if (stamp === undefined) continue;
            const seen = m.advance === 0 ? m.seen : 'read';
            const got = s.look('scope', one(stamp), seen).get('k')!;
            if (got.from !== stamp || got.evidence !== undefined) return false;
          }
          return true;
        },
      ),
      { seed: 20261125, numRuns: 300 },
    );
  });
});
