// Filtered properties, counted: a property that skips the inputs it is not
// about (by returning SKIP, or by fc.pre) passes just as well when it skips
// them all. assertReaching runs it like fc.assert, counts the generated
// inputs that reach its assertions, and fails below a floor, with the count
// in the message, so that a generator drifting away from what the property
// is about fails the test instead of thinning it silently.
import assert from 'node:assert/strict';
import fc from 'fast-check';

/** What a check returns for an input it is not about. */
export const SKIP = Symbol('skip');

export interface ReachOptions<T> extends fc.Parameters<[T]> {
  /** The least share (0–1) of generated inputs that must reach the assertions. */
  floor: number;
}

/**
 * fc.assert over `arb` with `check`, which returns SKIP (or fails an fc.pre)
 * on inputs it is not about; then at least `floor` of the generated inputs
 * must have reached its assertions.
 */
export function assertReaching<T>(
  arb: fc.Arbitrary<T>,
  check: (value: T) => typeof SKIP | void,
  options: ReachOptions<T>,
): void {
  const { floor, ...parameters } = options;
  const tally = { generated: 0, reached: 0 };
  fc.assert(
    fc.property(arb, (value) => {
      tally.generated++;
      if (check(value) !== SKIP) tally.reached++;
    }),
    parameters,
  );
  assertFloor(tally, floor);
}

/** assertReaching for a check that is asynchronous (fc.asyncProperty). */
export async function assertReachingAsync<T>(
  arb: fc.Arbitrary<T>,
  check: (value: T) => Promise<typeof SKIP | void>,
  options: ReachOptions<T>,
): Promise<void> {
  const { floor, ...parameters } = options;
  const tally = { generated: 0, reached: 0 };
  await fc.assert(
    fc.asyncProperty(arb, async (value) => {
      tally.generated++;
      if ((await check(value)) !== SKIP) tally.reached++;
    }),
    parameters,
  );
  assertFloor(tally, floor);
}

function assertFloor({ generated, reached }: { generated: number; reached: number }, floor: number): void {
  assert.ok(
    reached >= floor * generated,
    `only ${reached} of ${generated} generated inputs reached the assertions (${((100 * reached) / generated).toFixed(1)}%, floor ${100 * floor}%)`,
  );
}
