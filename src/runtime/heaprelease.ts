// Gives memory back to the system once a burst of work is over.
//
// An operator works in bursts: the first LISTs at start (7,000 ConfigMaps
// and Secrets, thousands of pods), a relist, a rollout, a wave of config
// changes. Each burst leaves V8's heap with pages it no longer needs and a
// pool of young-generation pages kept for the next burst. V8's own memory
// reducer is meant to return them when a process goes idle, but it judges
// idleness from the allocation rate it saw at the last GC; with no GC at idle
// that view never changes, so it can wait minutes, or (seen on an idle
// 30-pod operator with --trace-memory-reducer) never act at all. Measured
// with 7,000 ConfigMaps and Secrets: RSS 131 MiB after the sync, 97 MiB once
// the reducer finally ran 78 s later, with ~50 ms of CPU spent in that idle
// minute (docs/runtime.md).
//
// So the runtime does it itself, right after the burst: every GC V8 reports
// arms a check; once the event loop has spent a whole second (nearly) idle
// and RSS has grown by a worthwhile amount since the last release, one
// memory-reducing full GC runs (V8's "last resort" flavour: the collection
// the reducer would run, and it frees the pooled pages too). An idle process
// reports no GC, so nothing here runs at idle: no timer, no polling. It needs
// V8's gc function, which Node exposes only with --expose-gc (the image's
// ENTRYPOINT passes it); without it this is off and V8's reducer is left to
// act on its own.
//
// The cost: one full GC per burst, paused on the event loop (~20 ms at 30
// pods, ~40 ms with 7,000 configs), only after a second in which the loop
// was idle, and never more than 1 % of the time (RELEASE_POLICY).
import { PerformanceObserver, performance, type EventLoopUtilization } from 'node:perf_hooks';
import { Counter, type Registry } from 'prom-client';
import type { Clock, Timer } from './clock.ts';
import type { Logger } from './log/logger.ts';

export interface ReleasePolicy {
  /** How long the event loop must have been (nearly) idle before a release: also how often an armed check looks. */
  checkMs: number;
  /** Event-loop utilization over the last check at or below which the loop counts as idle. */
  idleUtilization: number;
  /** RSS growth since the last release (or the start) below which a release is not worth its pause. */
  minGrowthBytes: number;
  /** Releases are at least this far apart, whatever the bursts... */
  minIntervalMs: number;
  /** ...and at least as far as keeps their pauses to this share of the time (0.01: a 40 ms pause, then 4 s). */
  maxPauseShare: number;
}

export const RELEASE_POLICY: ReleasePolicy = {
  checkMs: 1000,
  idleUtilization: 0.02,
  minGrowthBytes: 4 * 1024 * 1024,
  minIntervalMs: 2_000,
  maxPauseShare: 0.01,
};

/** What an armed check sees. */
export interface ReleaseReading {
  /** Event-loop utilization since the previous check (0..1). */
  utilization: number;
  /** RSS now minus its lowest reading since the last release (RSS itself before the first). */
  grownBytes: number;
  /** The last release: how long ago it ended and how long it paused the loop; undefined before the first. */
  last: { sinceMs: number; pauseMs: number } | undefined;
}

export type ReleaseStep =
  /** Collect now. */
  | { kind: 'release' }
  /** Still busy, or too soon after the last release: look again later. */
  | { kind: 'check-again'; afterMs: number }
  /** Nothing worth giving back: disarmed until the next GC. */
  | { kind: 'stand-down' };

/** The decision of an armed check (pure: its guarantees are property-tested). */
export function nextReleaseStep(reading: ReleaseReading, policy: ReleasePolicy = RELEASE_POLICY): ReleaseStep {
  if (reading.grownBytes < policy.minGrowthBytes) return { kind: 'stand-down' };
  if (reading.utilization > policy.idleUtilization) return { kind: 'check-again', afterMs: policy.checkMs };
  if (reading.last) {
    const gap = Math.max(policy.minIntervalMs, reading.last.pauseMs / policy.maxPauseShare);
    if (reading.last.sinceMs < gap)
      return { kind: 'check-again', afterMs: Math.max(policy.checkMs, gap - reading.last.sinceMs) };
  }
  return { kind: 'release' };
}

/** A memory-reducing full collection (V8's gc with --expose-gc). */
export type Collect = () => void;

export interface HeapReleaseOptions {
  /** The collection; undefined turns releases off. */
  collect: Collect | undefined;
  /** Calls back with the start (on clock.monotonic()) of every GC V8 reports; returns an unsubscribe. */
  onGc: (listener: (startedAt: number) => void) => () => void;
  rss: () => number;
  /** Event-loop utilization since the previous call. */
  utilization: () => number;
  clock: Clock;
  logger: Logger;
  registry?: Registry;
  policy?: ReleasePolicy;
}

export class HeapRelease {
  private readonly o: HeapReleaseOptions;
  private readonly policy: ReleasePolicy;
  private readonly releases: Counter | undefined;
  /** The lowest RSS read since the last release (0 before the first: start-up is a burst too). */
  private baseline = 0;
  private lastRelease: { endedAt: number; pauseMs: number } | undefined;
  /** The last release's own collections, reported after it: they must not arm the next check. */
  private releaseWindow = { from: 0, to: -1 };
  private timer: Timer | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(options: HeapReleaseOptions) {
    this.o = options;
    this.policy = options.policy ?? RELEASE_POLICY;
    this.releases = options.registry
      ? new Counter({
          name: 'stateward_heap_releases_total',
          help: 'Memory-reducing garbage collections run once a burst of work was over (none while node runs without --expose-gc).',
          registers: [options.registry],
        })
      : undefined;
  }

  start(): void {
    if (!this.o.collect) {
      this.o.logger.debug('heap release after bursts is off: node runs without --expose-gc');
      return;
    }
    if (this.unsubscribe) return;
    // No baseline yet: start-up itself (loading the code, the first LISTs) is the first burst.
    this.baseline = 0;
    this.unsubscribe = this.o.onGc((startedAt) => {
      if (startedAt < this.releaseWindow.from || startedAt > this.releaseWindow.to) this.arm();
    });
    // Armed from the start: a small start-up may need no GC after this point to leave its garbage behind.
    this.arm();
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.timer?.cancel();
    this.timer = undefined;
  }

  /** A check is scheduled. */
  get armed(): boolean {
    return this.timer !== undefined;
  }

  private arm(): void {
    if (this.timer || !this.unsubscribe) return;
    this.o.utilization(); // opens the window the first check reads
    this.schedule(this.policy.checkMs);
  }

  private schedule(ms: number): void {
    this.timer = this.o.clock.setTimer(ms, () => {
      this.timer = undefined;
      this.check();
    });
  }

  private check(): void {
    const rss = this.o.rss();
    // Growth from the lowest point: what V8's own reducer gave back is not growth.
    this.baseline = Math.min(this.baseline, rss);
    const step = nextReleaseStep(
      {
        utilization: this.o.utilization(),
        grownBytes: rss - this.baseline,
        last: this.lastRelease && {
          sinceMs: this.o.clock.monotonic() - this.lastRelease.endedAt,
          pauseMs: this.lastRelease.pauseMs,
        },
      },
      this.policy,
    );
    if (step.kind === 'check-again') this.schedule(step.afterMs);
    else if (step.kind === 'release') this.release(rss);
  }

  private release(before: number): void {
    const started = this.o.clock.monotonic();
    this.o.collect?.();
    const ended = this.o.clock.monotonic();
    this.lastRelease = { endedAt: ended, pauseMs: ended - started };
    this.releaseWindow = { from: started, to: ended };
    const after = this.o.rss();
    this.baseline = after;
    this.releases?.inc();
    this.o.logger.debug('heap released after a burst of work', {
      rssBeforeMiB: mib(before),
      rssAfterMiB: mib(after),
      pauseMs: Math.round(ended - started),
    });
  }
}

const mib = (bytes: number) => Math.round(bytes / 104_857.6) / 10;

/** V8's gc when node runs with --expose-gc, as the memory-reducing collection; else undefined. */
export function exposedCollect(): Collect | undefined {
  const gc = (globalThis as { gc?: (options?: object) => unknown }).gc;
  if (typeof gc !== 'function') return undefined;
  // "last-resort": V8's memory-reducing full collection (compacts, frees the pooled pages); a plain gc() keeps the pool.
  return () => void gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/** Every GC V8 reports (perf_hooks' 'gc' entries, delivered after the fact), by its start on performance.now(). */
export function gcReports(): HeapReleaseOptions['onGc'] {
  return (listener) => {
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) listener(entry.startTime);
    });
    observer.observe({ entryTypes: ['gc'] });
    return () => observer.disconnect();
  };
}

/** Event-loop utilization since the previous call. */
export function loopUtilization(): () => number {
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const delta = performance.eventLoopUtilization(now, last);
    last = now;
    return delta.utilization;
  };
}
