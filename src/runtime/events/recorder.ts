// The imperative shell of event recording: turns a capability's
// `events.event(...)` into the writes the planner decides on and makes them
// off the caller's path. event() never throws and never waits; a bounded queue
// (oldest dropped first) feeds one worker that retries transport errors, 429
// and 5xx with backoff, then gives up with a log line.
//
// The planner's windows and the 403 pause run on the monotonic clock: a wall
// clock stepping forward would end series and refill spam budgets at once.
// Times written to the API (eventTime, series.lastObservedTime) are wall clock.
import { randomBytes } from 'node:crypto';
import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';
import type { Clock, Timer } from '../clock.ts';
import { microTime } from '../kube/time.ts';
import { nopLogger } from '../log/logger.ts';
import type { Logger } from '../log/logger.ts';
import { backoffDelay } from '../workqueue/ratelimiter.ts';
import {
  NOTE_LIMIT_BYTES,
  REPORTING_INSTANCE_LIMIT_BYTES,
  buildEvent,
  eventName,
  seriesKey,
  spamKey,
  truncateUtf8,
} from './event.ts';
import type { EventSink, EventType, EventsV1EventJson, ObjectRef } from './event.ts';
import { EventPlanner } from './eventplanner.ts';
import type { Write } from './eventplanner.ts';

export interface EventRecorderOptions {
  sink: EventSink;
  clock: Clock;
  /** Qualified name of the reporting controller, e.g. "stateward.dev/operator". */
  reportingController: string;
  /** This replica, e.g. the pod name. */
  reportingInstance: string;
  logger?: Logger;
  /** Registry for the stateward_events_* metrics. */
  registry?: Registry;
}

export type DropCause = 'spam' | 'queue-full' | 'api-error' | 'forbidden' | 'shutdown';

/** Writes waiting at most (client-go: 1000). */
export const QUEUE_SIZE = 1000;
/** Tries per write, the first included; backoff 1 s doubling to 30 s between them. */
export const MAX_ATTEMPTS = 5;
/** After a 403, Events of that namespace are dropped without a call for this long. */
export const FORBIDDEN_PAUSE_MS = 5 * 60_000;

type Job = Write<EventsV1EventJson>;

function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

function counter<L extends string>(registry: Registry | undefined, name: string, help: string, labelNames: L[]) {
  return new Counter<L>({ name, help, labelNames, registers: registry ? [registry] : [] });
}

export class EventRecorder {
  private readonly planner = new EventPlanner<EventsV1EventJson>();
  private readonly queue: Job[] = [];
  /** Namespaces where a write was refused (403), until when (monotonic) their Events are dropped. */
  private readonly forbiddenUntil = new Map<string, number>();
  private readonly stopping = new AbortController();
  private readonly log: Logger;
  private readonly reportingInstance: string;
  private opts: EventRecorderOptions;
  private readonly emitted: Counter<'type' | 'reason'>;
  private readonly dropped: Counter<'cause'>;
  private readonly patches: Counter;
  private worker: Promise<void> | undefined;
  private timer: Timer | undefined;
  private timerAt: number | undefined;
  private overflowing = false;

  constructor(opts: EventRecorderOptions) {
    this.opts = opts;
    this.log = opts.logger ?? nopLogger;
    // Pod names may be longer than the API allows here; their tail is the unique part.
    this.reportingInstance = opts.reportingInstance.slice(-REPORTING_INSTANCE_LIMIT_BYTES);
    const { registry } = opts;
    this.emitted = counter(
      registry,
      'stateward_events_emitted_total',
      'Events reported by controllers and webhooks, before aggregation and spam filtering.',
      ['type', 'reason'],
    );
    this.dropped = counter(
      registry,
      'stateward_events_dropped_total',
      'Event occurrences or writes given up, by cause.',
      ['cause'],
    );
    this.patches = counter(
      registry,
      'stateward_events_series_patches_total',
      'Series updates written to existing Events.',
      [],
    );
  }

  /**
   * Writes through `sink` from now on: an install whose RBAC grants Events
   * only in another API group (Reloader's chart: core/v1, coreevents.ts)
   * swaps it in once, before any capability records an Event.
   */
  useSink(sink: EventSink): void {
    this.opts = { ...this.opts, sink };
  }

  /**
   * Reports that `action` happened (or was refused) to `regarding` because of
   * `reason`. Never throws and never waits: the write, if any, happens later.
   */
  event(
    regarding: ObjectRef,
    type: EventType,
    reason: string,
    action: string,
    note: string,
    related?: ObjectRef,
  ): void {
    try {
      if (this.stopping.signal.aborted) return this.drop('shutdown');
      this.emitted.inc({ type, reason });
      const facts = {
        regarding,
        related,
        type,
        reason,
        action,
        note: truncateUtf8(note, NOTE_LIMIT_BYTES),
        reportingController: this.opts.reportingController,
        reportingInstance: this.reportingInstance,
      };
      const { clock } = this.opts;
      const payload = buildEvent(facts, eventName(regarding.name, randomBytes(8).toString('hex')), clock.now());
      const plan = this.planner.observe(seriesKey(facts), spamKey(regarding), payload, clock.monotonic(), clock.now());
      if (plan.outcome === 'drop-spam') this.drop('spam');
      this.enqueue(plan.writes);
      if (plan.outcome === 'coalesce') this.arm();
    } catch (err) {
      this.log.error('event recording failed', { error: String(err), reason, action });
    }
  }

  /** Resolves once every queued write has been made or given up. */
  async flush(): Promise<void> {
    while (this.worker) await this.worker;
  }

  /** Stops recording: later events are dropped, unwritten repeats are written now, retries get one last try. */
  async stop(): Promise<void> {
    if (!this.stopping.signal.aborted) {
      this.stopping.abort();
      this.timer?.cancel();
      this.enqueue(this.planner.drain(this.opts.clock.monotonic()));
    }
    await this.flush();
  }

  /** Keeps one timer armed for the earliest series whose counted repeats are due. */
  private arm(): void {
    const next = this.planner.nextDueAt();
    if (next === this.timerAt || this.stopping.signal.aborted) return;
    this.timer?.cancel();
    this.timerAt = next;
    if (next === undefined) return;
    const { clock } = this.opts;
    this.timer = clock.setTimer(next - clock.monotonic(), () => {
      this.timerAt = undefined;
      this.enqueue(this.planner.due(clock.monotonic()));
      this.arm();
    });
  }

  private enqueue(writes: Job[]): void {
    for (const job of writes) {
      if (this.queue.length >= QUEUE_SIZE) {
        this.queue.shift();
        this.drop('queue-full');
        if (!this.overflowing) this.log.warn('event queue full; dropping the oldest writes', { queueSize: QUEUE_SIZE });
        this.overflowing = true;
      }
      this.queue.push(job);
    }
    this.worker ??= this.work();
  }

  private async work(): Promise<void> {
    // Start after the caller's synchronous code: no sink call on its stack.
    await Promise.resolve();
    try {
      for (let job = this.queue.shift(); job; job = this.queue.shift()) await this.run(job);
    } finally {
      this.worker = undefined;
      this.overflowing = false;
    }
  }

  /** Makes one write, retrying what may succeed later. Never throws. */
  private async run(job: Job): Promise<void> {
    const { clock } = this.opts;
    const event = job.payload;
    const { namespace } = event.metadata;
    if ((this.forbiddenUntil.get(namespace) ?? 0) > clock.monotonic()) return this.drop('forbidden');
    const fields = {
      event: `${namespace}/${event.metadata.name}`,
      reason: event.reason,
      op: job.series ? 'patch' : 'create',
    };
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.write(job);
      } catch (err) {
        const status = statusOf(err);
        if (status === 403) {
          // RBAC without Events (an install that kept an older Role), or a
          // namespace being deleted: say so once, and stop asking for a while.
          this.forbiddenUntil.set(namespace, clock.monotonic() + FORBIDDEN_PAUSE_MS);
          this.log.warn(
            'not permitted to write Events in this namespace; its Events are dropped for 5m (grant events.k8s.io events create,patch: deploy/kustomize/rbac/PERMISSIONS.md)',
            { ...fields, error: String(err) },
          );
          return this.drop('forbidden');
        }
        const retryable = status === undefined || status === 429 || status >= 500;
        if (!retryable || attempt >= MAX_ATTEMPTS || this.stopping.signal.aborted) {
          this.log.error('event write failed; giving up', { ...fields, attempts: attempt, status, error: String(err) });
          return this.drop('api-error');
        }
        // stop() cuts the wait short: one last try, then give up.
        await clock
          .sleep(backoffDelay(attempt, { initialMs: 1000, maxMs: 30_000 }), this.stopping.signal)
          .catch(() => {});
      }
    }
  }

  private async write(job: Job): Promise<void> {
    const { sink } = this.opts;
    const event = job.payload;
    const { namespace, name } = event.metadata;
    const series = job.series && { count: job.series.count, lastObservedTime: microTime(job.series.lastObservedTime) };
    if (series) {
      try {
        await sink.patch(namespace, name, { series });
        this.patches.inc();
        return;
      } catch (err) {
        // Deleted (TTL or by hand) while the series went on: create it afresh, below.
        if (statusOf(err) !== 404) throw err;
      }
    }
    try {
      await sink.create(namespace, series ? { ...event, series } : event);
    } catch (err) {
      // 409: an earlier try succeeded though its answer was lost; its series may be older than ours.
      if (statusOf(err) !== 409) throw err;
      if (series) await sink.patch(namespace, name, { series });
    }
  }

  private drop(cause: DropCause): void {
    this.dropped.inc({ cause });
  }
}
