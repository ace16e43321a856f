// A work queue of string keys with client-go's workqueue semantics:
//
// - a key added several times before it is processed is processed once
//   (FIFO in order of first add);
// - a key handed out by get() is never handed out again until done(key);
//   adding it meanwhile marks it dirty and it is queued again on done();
// - delayed adds (addAfter) keep only the earliest pending time per key;
// - rate-limited adds go through a RateLimiter;
// - after shutDown() new adds are dropped, get() keeps returning queued
//   keys and then resolves undefined.
//
// runWorkers() runs N async workers over a queue, the way a controller does.
//
// Every time kept here is clock.monotonic(): they are only ever compared
// with each other (delays, the duration metrics), never with the API.

import { Counter, Gauge, Histogram, exponentialBuckets, type Registry } from 'prom-client';
import { abortReason, systemClock, type Clock, type Timer } from '../clock.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './ratelimiter.ts';

// ---------------------------------------------------------------- metrics

/** What is in flight at one moment, read when metrics are scraped. */
export interface InFlightSnapshot {
  /** Sum over items being processed of how long each has been running. */
  unfinishedWorkSeconds: number;
  /** How long the oldest item being processed has been running. */
  longestRunningProcessorSeconds: number;
}

/** The metrics sink of one named queue. */
export interface WorkQueueMetrics {
  readonly name: string;
  setDepth(depth: number): void;
  added(): void;
  retried(): void;
  observeQueueDuration(seconds: number): void;
  observeWorkDuration(seconds: number): void;
  /** Installs the function read at scrape time for the in-flight gauges (one per name; last wins). */
  trackInFlight(probe: () => InFlightSnapshot): void;
}

interface SharedMetrics {
  depth: Gauge<'name'>;
  adds: Counter<'name'>;
  retries: Counter<'name'>;
  queueDuration: Histogram<'name'>;
  workDuration: Histogram<'name'>;
  probes: Map<string, () => InFlightSnapshot>;
}

const sharedByRegistry = new WeakMap<Registry, SharedMetrics>();

function sharedMetrics(registry: Registry): SharedMetrics {
  const existing = sharedByRegistry.get(registry);
  if (existing) return existing;
  const probes = new Map<string, () => InFlightSnapshot>();
  const registers = [registry];
  // client-go's buckets: 10ns .. 10s, by factors of 10.
  const buckets = exponentialBuckets(10e-9, 10, 10);
  const shared: SharedMetrics = {
    probes,
    depth: new Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue', labelNames: ['name'], registers }),
    adds: new Counter({
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames: ['name'],
      registers,
    }),
    retries: new Counter({
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames: ['name'],
      registers,
    }),
    queueDuration: new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: ['name'],
      buckets,
      registers,
    }),
    workDuration: new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes',
      labelNames: ['name'],
      buckets,
      registers,
    }),
  };
  // The in-flight gauges are computed when scraped, from each queue's probe,
  // so they are current without a background timer.
  const unfinished: Gauge<'name'> = new Gauge({
    name: 'workqueue_unfinished_work_seconds',
    help:
      'How many seconds of work has been done that is in progress and has not been observed by ' +
      'work_duration. Large values indicate stuck threads.',
    labelNames: ['name'],
    registers,
    collect() {
      for (const [name, probe] of probes) unfinished.set({ name }, probe().unfinishedWorkSeconds);
    },
  });
  const longest: Gauge<'name'> = new Gauge({
    name: 'workqueue_longest_running_processor_seconds',
    help: 'How many seconds has the longest running processor for workqueue been running',
    labelNames: ['name'],
    registers,
    collect() {
      for (const [name, probe] of probes) longest.set({ name }, probe().longestRunningProcessorSeconds);
    },
  });
  sharedByRegistry.set(registry, shared);
  return shared;
}

/**
 * Metrics for the queue `queueName`, registered on `registry` under
 * client-go's names with a `name` label. Calling this again for the same
 * registry (any queue name) reuses the metric objects.
 */
export function workQueueMetrics(registry: Registry, queueName: string): WorkQueueMetrics {
  const shared = sharedMetrics(registry);
  const labels = { name: queueName };
  if (!shared.probes.has(queueName)) {
    // Make every series of a new name visible from the start, at zero.
    shared.depth.set(labels, 0);
    shared.adds.inc(labels, 0);
    shared.retries.inc(labels, 0);
    shared.probes.set(queueName, () => ({ unfinishedWorkSeconds: 0, longestRunningProcessorSeconds: 0 }));
  }
  return {
    name: queueName,
    setDepth: (depth) => shared.depth.set(labels, depth),
    added: () => shared.adds.inc(labels),
    retried: () => shared.retries.inc(labels),
    observeQueueDuration: (seconds) => shared.queueDuration.observe(labels, seconds),
    observeWorkDuration: (seconds) => shared.workDuration.observe(labels, seconds),
    trackInFlight: (probe) => void shared.probes.set(queueName, probe),
  };
}

// ---------------------------------------------------------------- queue

export interface WorkQueueOptions {
  clock?: Clock;
  /** Used by addRateLimited; default defaultControllerRateLimiter(clock). */
  rateLimiter?: RateLimiter<string>;
  metrics?: WorkQueueMetrics;
}

export class WorkQueue {
  private readonly clock: Clock;
  private readonly rateLimiter: RateLimiter<string>;
  private readonly metrics: WorkQueueMetrics | undefined;
  /** Keys that need processing: queued, or added again while processing. */
  private readonly dirty = new Set<string>();
  /** Keys ready to hand out, in FIFO order (a Set keeps insertion order). */
  private readonly queue = new Set<string>();
  /** Keys handed out and not yet done, with the time they were handed out. */
  private readonly processing = new Map<string, number>();
  /** When each dirty key was added, for the queue-duration metric. */
  private readonly addedAt = new Map<string, number>();
  /** Delayed adds: the earliest pending time per key. */
  private readonly delayed = new Map<string, { readyAt: number; timer: Timer }>();
  /** get() calls waiting for a key; only non-empty while the queue is empty. */
  private readonly getters: ((key: string | undefined) => void)[] = [];
  private readonly drainWaiters: (() => void)[] = [];
  private shuttingDown = false;

  constructor(options: WorkQueueOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.rateLimiter = options.rateLimiter ?? defaultControllerRateLimiter<string>(this.clock);
    this.metrics = options.metrics;
    this.metrics?.trackInFlight(() => this.inFlight());
  }

  /** Queues key unless it is already waiting; dropped after shutdown. */
  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    this.addedAt.set(key, this.clock.monotonic());
    this.metrics?.added();
    this.updateDepth();
    if (this.processing.has(key)) return; // queued again by done()
    this.queue.add(key);
    this.dispatch();
  }

  /**
   * The next key to process, waiting for one if needed. Resolves undefined
   * once the queue is shut down and empty. Call done(key) when finished.
   */
  get(): Promise<string | undefined> {
    const key = this.take();
    if (key !== undefined) return Promise.resolve(key);
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  /** Marks key as processed; if it was added meanwhile it is queued again. */
  done(key: string): void {
    const startedAt = this.processing.get(key);
    if (startedAt === undefined) return;
    this.processing.delete(key);
    this.metrics?.observeWorkDuration(this.seconds(startedAt));
    if (this.dirty.has(key)) {
      this.queue.add(key);
      this.dispatch();
    }
    this.checkDrained();
  }

  /** Adds key after ms; if key already has an earlier pending delayed add, this one is dropped. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    this.metrics?.retried();
    if (!(ms > 0)) {
      this.add(key);
      return;
    }
    const readyAt = this.clock.monotonic() + ms;
    const pending = this.delayed.get(key);
    if (pending) {
      if (pending.readyAt <= readyAt) return;
      pending.timer.cancel();
    }
    const timer = this.clock.setTimer(ms, () => {
      this.delayed.delete(key);
      this.add(key);
    });
    this.delayed.set(key, { readyAt, timer });
  }

  /** Adds key after the delay its rate limiter gives (counts as a requeue). */
  addRateLimited(key: string): void {
    if (this.shuttingDown) return;
    this.addAfter(key, this.rateLimiter.when(key));
  }

  /** Clears key's rate-limiting history (does not remove it from the queue). */
  forget(key: string): void {
    this.rateLimiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.rateLimiter.numRequeues(key);
  }

  /** Keys waiting to be handed out (not those in processing or delayed). */
  len(): number {
    return this.queue.size;
  }

  /** Keys handed out and not yet done. */
  processingCount(): number {
    return this.processing.size;
  }

  isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /**
   * Stops accepting keys and drops pending delayed adds. Keys already queued
   * are still handed out; then get() resolves undefined.
   */
  shutDown(): void {
    if (!this.shuttingDown) {
      this.shuttingDown = true;
      for (const { timer } of this.delayed.values()) timer.cancel();
      this.delayed.clear();
      // Getters only wait while the queue is empty: release them all.
      for (const resolve of this.getters.splice(0)) resolve(undefined);
    }
    this.checkDrained();
  }

  /**
   * shutDown(), then resolves once every queued key has been handed out and
   * every handed-out key is done. Needs workers still calling get();
   * rejects with the signal's reason if it aborts first.
   */
  async shutDownWithDrain(signal?: AbortSignal): Promise<void> {
    this.shutDown();
    if (this.isDrained()) return;
    if (signal?.aborted) throw abortReason(signal);
    let onDrained!: () => void;
    let onAbort: (() => void) | undefined;
    const aborted = await new Promise<boolean>((resolve) => {
      onDrained = () => resolve(false);
      onAbort = () => resolve(true);
      this.drainWaiters.push(onDrained);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    if (aborted) {
      const i = this.drainWaiters.indexOf(onDrained);
      if (i >= 0) this.drainWaiters.splice(i, 1);
      throw abortReason(signal!);
    }
  }

  private take(): string | undefined {
    const first = this.queue.values().next();
    if (first.done) return undefined;
    const key = first.value;
    this.queue.delete(key);
    this.dirty.delete(key);
    const now = this.clock.monotonic();
    this.processing.set(key, now);
    const addedAt = this.addedAt.get(key);
    this.addedAt.delete(key);
    if (addedAt !== undefined) this.metrics?.observeQueueDuration(Math.max(0, now - addedAt) / 1000);
    this.updateDepth();
    return key;
  }

  /** Hands queued keys to waiting getters. */
  private dispatch(): void {
    while (this.getters.length > 0 && this.queue.size > 0) {
      const key = this.take();
      this.getters.shift()!(key);
    }
  }

  private isDrained(): boolean {
    return this.shuttingDown && this.queue.size === 0 && this.processing.size === 0;
  }

  private checkDrained(): void {
    if (!this.isDrained()) return;
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }

  private updateDepth(): void {
    // Like client-go, depth counts every key waiting to be processed,
    // including ones added again while being processed.
    this.metrics?.setDepth(this.dirty.size);
  }

  private seconds(since: number): number {
    return Math.max(0, this.clock.monotonic() - since) / 1000;
  }

  private inFlight(): InFlightSnapshot {
    let total = 0;
    let longest = 0;
    for (const startedAt of this.processing.values()) {
      const s = this.seconds(startedAt);
      total += s;
      longest = Math.max(longest, s);
    }
    return { unfinishedWorkSeconds: total, longestRunningProcessorSeconds: longest };
  }
}

// ---------------------------------------------------------------- workers

/**
 * What a handler may return, as controller-runtime's reconcile.Result:
 * nothing (done: the key's retry history is forgotten); `{ requeueAfterMs }`
 * (done, and again after that delay, 0 meaning at once); `{ requeue: true }`
 * (again after the key's rate-limited back-off, as after an error, but none
 * is reported).
 */
export type HandlerResult = void | { requeueAfterMs: number } | { requeue: true };

export interface RunWorkersOptions {
  /** Called with every error a handler throws (the key is requeued rate-limited). */
  onError?: (key: string, error: unknown) => void;
  /**
   * The handler runs only while this holds (a leader's controllers: the
   * replica's lease renewed within its deadline). A key taken while it does
   * not is put back for NOT_LEADING_RETRY_MS instead of being handled or
   * dropped: a renewal answered late makes it false for a moment inside a
   * term that then goes on, and a key dropped in that moment waited for the
   * workload's next event (a config restart, whose last change had come,
   * was never applied: clean-clone CI of 2026-11-27). Leadership really lost
   * ends the term, whose queue shuts down and drops the retry.
   */
  whileLeading?: () => boolean;
}

/** How soon a key taken while not leading is tried again (a lease renewal is retried within 500 ms). */
export const NOT_LEADING_RETRY_MS = 500;

/**
 * Runs `concurrency` workers that take keys from the queue until it is shut
 * down and drained. Per key: success → forget; `{ requeueAfterMs }` →
 * forget + addAfter; `{ requeue: true }` → addRateLimited; thrown error →
 * addRateLimited + onError; not leading
 * (`whileLeading`) → addAfter NOT_LEADING_RETRY_MS. The queue never hands
 * one key to two workers at once.
 */
export async function runWorkers(
  queue: WorkQueue,
  concurrency: number,
  handler: (key: string) => Promise<HandlerResult> | HandlerResult,
  opts: RunWorkersOptions = {},
): Promise<void> {
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) {
    throw new RangeError(`concurrency must be an integer >= 1, got ${concurrency}`);
  }
  const worker = async () => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      try {
        if (opts.whileLeading && !opts.whileLeading()) {
          queue.addAfter(key, NOT_LEADING_RETRY_MS);
          continue;
        }
        const result = await handler(key);
        if (result && typeof result === 'object' && 'requeue' in result) {
          queue.addRateLimited(key);
          continue;
        }
        queue.forget(key);
        if (result && typeof result === 'object' && 'requeueAfterMs' in result) {
          queue.addAfter(key, result.requeueAfterMs);
        }
      } catch (error) {
        queue.addRateLimited(key);
        try {
          opts.onError?.(key, error);
        } catch {
          // A failing error reporter must not stop the worker.
        }
      } finally {
        queue.done(key);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}
