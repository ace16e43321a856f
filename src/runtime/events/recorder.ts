// The imperative shell of event recording: turns a controller's
// `recorder.event(...)` into the writes the planner decides on and carries
// them out against an EventSink, off the caller's path. event() never throws
// and never waits; a bounded queue (oldest dropped first) feeds one worker
// that retries transport and server errors with exponential backoff on the
// injected clock, then gives up with a log line.
//
// The planner's windows (series, spam budget, patch interval) and the 403
// pause run on the monotonic clock: a wall clock stepping forward would end
// series and refill spam budgets at once, one stepping back would hold
// patches and pauses for the size of the step. Event times written to the
// API (eventTime, series.lastObservedTime) are wall clock.
import { randomBytes } from 'node:crypto';
import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';
import { backoffDelay } from '../workqueue/ratelimiter.ts';
import type { Clock, Timer } from '../clock.ts';
import {
  NOTE_LIMIT_BYTES,
  REPORTING_INSTANCE_LIMIT_BYTES,
  buildEvent,
  eventName,
  isomorphicKey,
  microTime,
  spamKey,
  truncateUtf8,
  validateFacts,
  validateReporter,
} from './event.ts';
import type { EventFacts, EventSeriesJson, EventSink, EventType, EventsV1EventJson, ObjectRef } from './event.ts';
import { EventPlanner, defaultPlannerLimits } from './planner.ts';
import type { PlannerLimits, Write } from './planner.ts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type EventLogger = (level: LogLevel, msg: string, fields: Record<string, unknown>) => void;

export interface EventRecorderLimits extends PlannerLimits {
  /** Writes waiting for the worker at most; the oldest is dropped beyond (client-go: 1000). */
  queueSize: number;
  /** Tries per write, the first included. */
  maxAttempts: number;
  /** Backoff before the second try; doubles per try up to retryMaxMs. */
  retryBaseMs: number;
  retryMaxMs: number;
}

export const defaultRecorderLimits: Readonly<EventRecorderLimits> = Object.freeze({
  ...defaultPlannerLimits,
  queueSize: 1000,
  maxAttempts: 5,
  retryBaseMs: 1000,
  retryMaxMs: 30_000,
});

export interface EventRecorderOptions {
  sink: EventSink;
  clock: Clock;
  /** Qualified name of the reporting controller, e.g. "stateward.dev/rollout". */
  reportingController: string;
  /** This replica, e.g. the pod name. */
  reportingInstance: string;
  logger?: EventLogger;
  /** Registry for the stateward_events_* metrics; none are exported without it. */
  registry?: Registry;
  limits?: Partial<EventRecorderLimits>;
}

export type DropCause = 'spam' | 'queue-full' | 'api-error' | 'forbidden' | 'invalid' | 'shutdown';

/** After a 403, Events of that namespace are dropped without a call for this long. */
const FORBIDDEN_PAUSE_MS = 5 * 60_000;

interface Job {
  op: 'create' | 'patch';
  name: string;
  namespace: string;
  /** The Event as first created, without its series. */
  event: EventsV1EventJson;
  series?: EventSeriesJson;
}

/** The HTTP status an error carries, if any. */
function statusOf(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; statusCode?: unknown; status?: unknown };
  for (const v of [e.code, e.statusCode, e.status]) if (typeof v === 'number') return v;
  return undefined;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function counter<L extends string>(
  registry: Registry | undefined,
  name: string,
  help: string,
  labelNames: L[],
): Counter<L> {
  // Several recorders (one per controller) may share a registry.
  const existing = registry?.getSingleMetric(name);
  if (existing instanceof Counter) return existing;
  return new Counter({ name, help, labelNames, registers: registry ? [registry] : [] });
}

export class EventRecorder {
  private readonly sink: EventSink;
  private readonly clock: Clock;
  private readonly reportingController: string;
  private readonly reportingInstance: string;
  private readonly logger: EventLogger | undefined;
  private readonly limits: Readonly<EventRecorderLimits>;
  private readonly planner: EventPlanner<EventsV1EventJson>;

  private readonly emitted: Counter<'type' | 'reason'>;
  private readonly dropped: Counter<'cause'>;
  private readonly patches: Counter<string>;

  private readonly queue: Job[] = [];
  /** Queued (not started) jobs by Event name, so a newer series count replaces an older one. */
  private readonly queuedByName = new Map<string, Job>();
  private running = false;
  private idleWaiters: (() => void)[] = [];
  private overflowing = false;

  private timer: Timer | undefined;
  private timerAt: number | undefined;
  private stopped = false;
  private readonly stopping = new AbortController();

  constructor(opts: EventRecorderOptions) {
    const problems = validateReporter(opts.reportingController, opts.reportingInstance);
    if (problems.length > 0) throw new TypeError(`event recorder: ${problems.join('; ')}`);
    this.sink = opts.sink;
    this.clock = opts.clock;
    this.reportingController = opts.reportingController;
    // Pod names may be longer than the API allows here; their tail is the unique part.
    this.reportingInstance =
      opts.reportingInstance.length > REPORTING_INSTANCE_LIMIT_BYTES
        ? opts.reportingInstance.slice(-REPORTING_INSTANCE_LIMIT_BYTES)
        : opts.reportingInstance;
    this.logger = opts.logger;
    this.limits = { ...defaultRecorderLimits, ...opts.limits };
    for (const name of ['queueSize', 'maxAttempts', 'retryBaseMs', 'retryMaxMs'] as const) {
      const min = name.startsWith('retry') ? 0 : 1;
      if (!Number.isInteger(this.limits[name]) || this.limits[name] < min)
        throw new RangeError(`event recorder: ${name} must be an integer >= ${min}`);
    }
    const plannerLimits: Partial<PlannerLimits> = {};
    for (const name of Object.keys(defaultPlannerLimits) as (keyof PlannerLimits)[])
      plannerLimits[name] = this.limits[name];
    this.planner = new EventPlanner(plannerLimits);

    this.emitted = counter(
      opts.registry,
      'stateward_events_emitted_total',
      'Events reported by controllers and webhooks, before aggregation and spam filtering.',
      ['type', 'reason'],
    );
    this.dropped = counter(
      opts.registry,
      'stateward_events_dropped_total',
      'Event occurrences or writes given up, by cause.',
      ['cause'],
    );
    this.patches = counter(
      opts.registry,
      'stateward_events_series_patches_total',
      'Series updates written to existing Events.',
      [],
    );
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
      if (this.stopped) {
        this.drop('shutdown');
        this.log('debug', 'event after stop dropped', { reason, action });
        return;
      }
      const problems = validateFacts({ regarding, related, type, reason, action, note });
      if (problems.length > 0) {
        this.drop('invalid');
        this.log('warn', 'invalid event dropped', { problems, reason, action });
        return;
      }
      const facts: EventFacts = {
        regarding,
        related,
        type,
        reason,
        action,
        note: truncateUtf8(note, NOTE_LIMIT_BYTES),
        reportingController: this.reportingController,
        reportingInstance: this.reportingInstance,
      };
      const now = this.clock.monotonic();
      const wallNow = this.clock.now();
      this.emitted.inc({ type, reason });
      const name = eventName(regarding.name, randomBytes(8).toString('hex'));
      const payload = buildEvent(facts, name, wallNow);
      const plan = this.planner.observe(
        {
          key: isomorphicKey(facts),
          spamKey: spamKey(regarding),
          name,
          namespace: payload.metadata.namespace,
          payload,
          observedAt: wallNow,
        },
        now,
      );
      if (plan.outcome === 'drop-spam') {
        this.drop('spam');
        this.log('debug', 'event dropped by the spam filter', this.fields(payload));
      }
      this.submit(plan.writes);
      if (plan.dueAt !== undefined && (this.timerAt === undefined || plan.dueAt < this.timerAt)) this.arm();
    } catch (err) {
      this.log('error', 'event recording failed', { error: messageOf(err), reason, action });
    }
  }

  /** Resolves once every queued write has been made or given up. */
  flush(): Promise<void> {
    if (!this.running && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Stops recording: later events are dropped, repeats not yet written are
   * written now, retries stop waiting (each write gets one last try), and the
   * promise resolves when the queue is empty.
   */
  async stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.timer?.cancel();
      this.timer = undefined;
      this.timerAt = undefined;
      this.stopping.abort();
      this.submit(this.planner.drain(this.clock.monotonic()));
    }
    await this.flush();
  }

  // --- series timer -------------------------------------------------------

  /** Keeps one timer armed for the earliest series whose coalesced repeats are due. */
  private arm(): void {
    if (this.stopped) return;
    const next = this.planner.nextDueAt();
    if (next === this.timerAt) return;
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = next;
    if (next === undefined) return;
    this.timer = this.clock.setTimer(next - this.clock.monotonic(), () => {
      this.timer = undefined;
      this.timerAt = undefined;
      try {
        this.submit(this.planner.due(this.clock.monotonic()));
      } catch (err) {
        this.log('error', 'event series flush failed', { error: messageOf(err) });
      }
      this.arm();
    });
  }

  // --- queue and worker ---------------------------------------------------

  private submit(writes: Write<EventsV1EventJson>[]): void {
    for (const w of writes) {
      const job: Job = { op: w.op, name: w.name, namespace: w.namespace, event: w.payload };
      if (w.op === 'patch') job.series = { count: w.count, lastObservedTime: microTime(w.lastObservedTime) };
      this.enqueue(job);
    }
  }

  private enqueue(job: Job): void {
    const waiting = this.queuedByName.get(job.name);
    if (waiting && job.series) {
      // A newer count supersedes the one still waiting; a waiting create
      // simply creates the Event with its series.
      waiting.series = job.series;
      return;
    }
    if (this.queue.length >= this.limits.queueSize) {
      const oldest = this.queue.shift();
      if (oldest) {
        if (this.queuedByName.get(oldest.name) === oldest) this.queuedByName.delete(oldest.name);
        this.drop('queue-full');
        if (!this.overflowing)
          this.log('warn', 'event queue full; dropping the oldest writes', {
            queueSize: this.limits.queueSize,
            ...this.fields(oldest.event),
          });
        this.overflowing = true;
      }
    }
    this.queue.push(job);
    this.queuedByName.set(job.name, job);
    if (!this.running) {
      this.running = true;
      void this.work();
    }
  }

  private async work(): Promise<void> {
    try {
      // Start after the caller's synchronous code: no sink call on its stack.
      await Promise.resolve();
      for (let job = this.queue.shift(); job; job = this.queue.shift()) {
        if (this.queuedByName.get(job.name) === job) this.queuedByName.delete(job.name);
        await this.run(job);
      }
    } finally {
      this.running = false;
      this.overflowing = false;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }

  /** Makes one write, retrying what may succeed later. Never throws. */
  private async run(job: Job): Promise<void> {
    if ((this.forbiddenUntil.get(job.namespace) ?? 0) > this.clock.monotonic()) {
      this.drop('forbidden');
      return;
    }
    for (let attempt = 1; ; attempt++) {
      try {
        await this.attempt(job);
        return;
      } catch (err) {
        const status = statusOf(err);
        if (status === 403) {
          // RBAC without Events (an install that kept an older Role), or a
          // namespace being deleted: say so once, and stop asking for a while.
          this.forbiddenUntil.set(job.namespace, this.clock.monotonic() + FORBIDDEN_PAUSE_MS);
          this.drop('forbidden');
          this.log(
            'warn',
            'not permitted to write Events in this namespace; its Events are dropped for 5m (grant events.k8s.io events create,patch: deploy/kustomize/rbac/PERMISSIONS.md)',
            { ...this.fields(job.event), error: messageOf(err) },
          );
          return;
        }
        const retryable = status === undefined || status === 429 || status >= 500;
        if (!retryable || attempt >= this.limits.maxAttempts || this.stopped) {
          this.drop('api-error');
          this.log('error', 'event write failed; giving up', {
            ...this.fields(job.event),
            op: job.op,
            attempts: attempt,
            status,
            error: messageOf(err),
          });
          return;
        }
        const delay = backoffDelay(attempt, { initialMs: this.limits.retryBaseMs, maxMs: this.limits.retryMaxMs });
        this.log('debug', 'event write failed; retrying', {
          ...this.fields(job.event),
          op: job.op,
          attempt,
          delayMs: delay,
          status,
          error: messageOf(err),
        });
        try {
          await this.clock.sleep(delay, this.stopping.signal);
        } catch {
          // stop() cut the wait short: one last try, then give up.
        }
      }
    }
  }

  private async attempt(job: Job): Promise<void> {
    if (job.op === 'patch') {
      try {
        await this.sink.patch(job.namespace, job.name, { series: job.series });
        this.patches.inc();
        return;
      } catch (err) {
        if (statusOf(err) !== 404) throw err;
        // Deleted (TTL or by hand) while the series went on: create it afresh.
        this.log('info', 'event to update is gone; creating it again', this.fields(job.event));
        job.op = 'create';
      }
    }
    const body: EventsV1EventJson = job.series ? { ...job.event, series: job.series } : job.event;
    try {
      await this.sink.create(job.namespace, body);
    } catch (err) {
      if (statusOf(err) !== 409) throw err;
      // Already there: an earlier try succeeded though its answer was lost.
      // Its series, if it has one, may be older than ours.
      if (!job.series) return;
      job.op = 'patch';
      await this.sink.patch(job.namespace, job.name, { series: job.series });
      this.patches.inc();
    }
  }

  // --- reporting ----------------------------------------------------------

  /** Namespaces where a write was refused (403), until when their Events are dropped without a call. */
  private readonly forbiddenUntil = new Map<string, number>();

  private drop(cause: DropCause): void {
    this.dropped.inc({ cause });
  }

  private fields(event: EventsV1EventJson): Record<string, unknown> {
    return {
      event: `${event.metadata.namespace}/${event.metadata.name}`,
      regarding: `${event.regarding.kind} ${event.regarding.namespace ? `${event.regarding.namespace}/` : ''}${event.regarding.name}`,
      type: event.type,
      reason: event.reason,
      action: event.action,
    };
  }

  private log(level: LogLevel, msg: string, fields: Record<string, unknown>): void {
    try {
      this.logger?.(level, msg, fields);
    } catch {
      // A broken logger must not break the caller.
    }
  }
}
