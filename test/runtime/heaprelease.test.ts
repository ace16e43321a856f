import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { assertReaching, SKIP } from '../support/reach.ts';
import { Registry } from 'prom-client';
import { FakeClock, type Clock } from '../../src/runtime/clock.ts';
import {
  HeapRelease,
  nextReleaseStep,
  RELEASE_POLICY,
  type ReleasePolicy,
  type ReleaseReading,
} from '../../src/runtime/heaprelease.ts';
import { nopLogger } from '../../src/runtime/log/logger.ts';

const MiB = 1024 * 1024;

describe('nextReleaseStep', () => {
  const policies = fc.record<ReleasePolicy>({
    checkMs: fc.integer({ min: 1, max: 10_000 }),
    idleUtilization: fc.double({ min: 0, max: 1, noNaN: true }),
    minGrowthBytes: fc.integer({ min: 0, max: 64 * MiB }),
    minIntervalMs: fc.integer({ min: 0, max: 120_000 }),
    maxPauseShare: fc.double({ min: 0.001, max: 1, noNaN: true }),
  });
  const readings = fc.record<ReleaseReading>({
    utilization: fc.double({ min: 0, max: 1, noNaN: true }),
    grownBytes: fc.integer({ min: -64 * MiB, max: 256 * MiB }),
    last: fc.option(
      fc.record({ sinceMs: fc.integer({ min: 0, max: 600_000 }), pauseMs: fc.integer({ min: 0, max: 5_000 }) }),
      { nil: undefined },
    ),
  });

  it('releases exactly when the heap grew enough, the loop is idle and the last release is far enough behind', () => {
    fc.assert(
      fc.property(readings, policies, (r, p) => {
        const step = nextReleaseStep(r, p);
        const farEnough =
          r.last === undefined || r.last.sinceMs >= Math.max(p.minIntervalMs, r.last.pauseMs / p.maxPauseShare);
        const expected = r.grownBytes >= p.minGrowthBytes && r.utilization <= p.idleUtilization && farEnough;
        assert.equal(step.kind === 'release', expected);
        // Too little to give back: no more checks until the next GC.
        if (r.grownBytes < p.minGrowthBytes) assert.equal(step.kind, 'stand-down');
      }),
      { numRuns: 2000 },
    );
  });

  it('waits at least a check, and never past the moment a release becomes allowed', () => {
    assertReaching(
      fc.tuple(readings, policies),
      ([r, p]) => {
        const step = nextReleaseStep(r, p);
        if (step.kind !== 'check-again') return SKIP;
        assert.ok(step.afterMs >= p.checkMs);
        if (r.utilization <= p.idleUtilization && r.last) {
          const gap = Math.max(p.minIntervalMs, r.last.pauseMs / p.maxPauseShare);
          assert.ok(step.afterMs <= Math.max(p.checkMs, gap - r.last.sinceMs));
          // ...and at that moment, with the loop still idle, it releases.
          const later = nextReleaseStep({ ...r, last: { ...r.last, sinceMs: r.last.sinceMs + step.afterMs } }, p);
          assert.equal(later.kind, 'release');
        }
      },
      { numRuns: 2000, floor: 0.2 },
    );
  });

  it('keeps releases to 1 % of the time by default: a 40 ms pause, then 4 s', () => {
    const grown = { utilization: 0, grownBytes: 64 * MiB };
    assert.deepEqual(nextReleaseStep({ ...grown, last: { sinceMs: 3_000, pauseMs: 40 } }), {
      kind: 'check-again',
      afterMs: 1_000,
    });
    assert.deepEqual(nextReleaseStep({ ...grown, last: { sinceMs: 4_000, pauseMs: 40 } }), { kind: 'release' });
    assert.equal(RELEASE_POLICY.maxPauseShare, 0.01);
  });
});

/** A process as HeapRelease sees it, with time that only moves when the test says (a collection takes `pauseMs`). */
class World {
  readonly fake = new FakeClock(0);
  rssBytes = 100 * MiB;
  loop = 0;
  collections = 0;
  pauseMs = 30;
  /** RSS after a collection. */
  floor = 60 * MiB;
  private listener: ((startedAt: number) => void) | undefined;
  private extra = 0;
  readonly clock: Clock = {
    now: () => this.fake.now() + this.extra,
    monotonic: () => this.fake.monotonic() + this.extra,
    setTimer: (ms, fn) => this.fake.setTimer(ms, fn),
    sleep: (ms, signal) => this.fake.sleep(ms, signal),
  };
  readonly registry = new Registry();
  readonly release: HeapRelease;

  constructor(collect = true) {
    this.release = new HeapRelease({
      collect: collect
        ? () => {
            const startedAt = this.clock.monotonic();
            this.collections++;
            this.extra += this.pauseMs;
            this.rssBytes = this.floor;
            // V8 reports the release's own GC afterwards, as perf_hooks does.
            queueMicrotask(() => this.listener?.(startedAt));
          }
        : undefined,
      onGc: (listener) => {
        this.listener = listener;
        return () => (this.listener = undefined);
      },
      rss: () => this.rssBytes,
      utilization: () => this.loop,
      clock: this.clock,
      logger: nopLogger,
      registry: this.registry,
    });
  }

  /** A GC V8 reports now. */
  gc(): void {
    this.listener?.(this.clock.monotonic());
  }

  get subscribed(): boolean {
    return this.listener !== undefined;
  }

  async counter(): Promise<number> {
    const metric = await this.registry.getSingleMetric('stateward_heap_releases_total')?.get();
    return metric?.values[0]?.value ?? 0;
  }
}

describe('HeapRelease', () => {
  it('does nothing at all without V8 gc exposed', async () => {
    const w = new World(false);
    w.release.start();
    assert.equal(w.subscribed, false);
    assert.equal(w.fake.pending, 0);
    await w.fake.advance(60_000);
    assert.equal(w.collections, 0);
  });

  it('releases once start-up is over, then leaves an idle process alone: no timer, no collection', async () => {
    const w = new World();
    w.loop = 0.5; // start-up: lists being decoded
    w.release.start();
    assert.equal(w.release.armed, true);
    await w.fake.advance(5_000);
    assert.equal(w.collections, 0, 'never while the loop is busy');
    w.loop = 0;
    await w.fake.advance(1_000);
    assert.equal(w.collections, 1);
    assert.equal(w.rssBytes, 60 * MiB);
    assert.equal(await w.counter(), 1);
    // Its own GC, reported afterwards, does not arm another check; idle now: nothing is scheduled.
    await w.fake.advance(0);
    assert.equal(w.release.armed, false);
    assert.equal(w.fake.pending, 0);
    await w.fake.advance(600_000);
    assert.equal(w.collections, 1);
  });

  it('after a later burst, releases again once the loop is idle, no sooner than the pause budget allows', async () => {
    const w = new World();
    w.release.start();
    await w.fake.advance(1_000);
    assert.equal(w.collections, 1);
    const firstEnded = w.clock.monotonic();

    // A burst: GCs, a busy loop, RSS up 20 MiB.
    await w.fake.advance(100);
    w.loop = 0.9;
    w.rssBytes += 20 * MiB;
    w.gc();
    assert.equal(w.release.armed, true);
    await w.fake.advance(1_000);
    assert.equal(w.collections, 1, 'never while the loop is busy');
    w.loop = 0;
    w.pauseMs = 50; // the next release pauses 50 ms: 5 s before the one after it
    await w.fake.advance(1_000);
    assert.equal(w.collections, 1, 'the first release paused 30 ms: at 1 %, not within 3 s of it');
    await w.fake.advance(1_000);
    assert.equal(w.collections, 2);
    const secondEnded = w.clock.monotonic();
    assert.ok(secondEnded - firstEnded >= 3_000 + 50);

    await w.fake.advance(100);
    w.rssBytes += 20 * MiB;
    w.gc();
    await w.fake.advance(4_000);
    assert.equal(w.collections, 2, '50 ms at 1 %: not within 5 s of the last');
    await w.fake.advance(1_000);
    assert.equal(w.collections, 3);
  });

  it('stands down when the heap has not grown enough since the last release, until the next GC', async () => {
    const w = new World();
    w.release.start();
    await w.fake.advance(1_000);
    assert.equal(w.collections, 1);
    await w.fake.advance(100);
    w.rssBytes += RELEASE_POLICY.minGrowthBytes - 1;
    w.gc();
    await w.fake.advance(10_000);
    assert.equal(w.collections, 1);
    assert.equal(w.release.armed, false);
    // Growth from the lowest point: RSS V8 gave back on its own is not counted as growth later.
    w.rssBytes = 40 * MiB;
    w.gc();
    await w.fake.advance(1_000);
    w.rssBytes = 40 * MiB + RELEASE_POLICY.minGrowthBytes;
    w.gc();
    await w.fake.advance(1_000);
    assert.equal(w.collections, 2);
  });

  it('stop() cancels an armed check and unsubscribes', async () => {
    const w = new World();
    w.loop = 1;
    w.release.start();
    w.release.stop();
    assert.equal(w.subscribed, false);
    w.loop = 0;
    await w.fake.advance(60_000);
    assert.equal(w.collections, 0);
    assert.equal(w.fake.pending, 0);
  });
});

describe('HeapRelease in a real node process', () => {
  it('gives a burst of garbage back with V8 gc, once, and then stays idle', async () => {
    const child = fileURLToPath(new URL('heaprelease.child.ts', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', child], { timeout: 60_000 });
    const report = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
      releases: number;
      rssBefore: number;
      rssAfter: number;
      idleReleases: number;
      armedWhenIdle: boolean;
    };
    assert.ok(report.releases >= 1, `a release after the burst (${stdout})`);
    assert.ok(
      report.rssAfter < report.rssBefore - 16 * MiB,
      `RSS ${report.rssBefore / MiB} MiB → ${report.rssAfter / MiB} MiB`,
    );
    assert.equal(report.idleReleases, 0, 'none while idle');
    assert.equal(report.armedWhenIdle, false, 'nothing scheduled while idle');
  });

  it('is off, and says so at debug level, when node runs without --expose-gc', async () => {
    const child = fileURLToPath(new URL('heaprelease.child.ts', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [child, 'no-gc'], { timeout: 60_000 });
    assert.match(stdout, /heap release after bursts is off: node runs without --expose-gc/);
  });
});
