// Sends reload alerts (alertsinks.ts says what) without ever holding a
// restart back: notify() only queues. The queue is bounded (a chat service
// that is down must not grow the operator's memory; the oldest alert goes
// first, counted and logged), a few alerts are in flight at once, each
// attempt has a deadline, and an answer that may succeed later (5xx, 429, no
// answer, a broken connection) is tried again after a growing pause, a few
// times. Any other answer (4xx, a redirect — Reloader refuses those too)
// will not change, so it is not retried.
//
// Also the -webhook-url call (ReloadWebhook), which the restart controller
// awaits instead of restarting: it throws when the call fails, so the
// controller retries it and does not record the change as applied.
//
// Webhook URLs are credentials: logs and errors name scheme and host only.
import type { Agent } from 'node:http';
import { Counter, type Registry } from 'prom-client';
import type { Logger } from '../runtime/log/logger.ts';
import { proxyFor } from '../runtime/kube/proxy.ts';
import { closePool, connectionPool, exchange } from '../runtime/kube/transport.ts';
import { backoffDelay } from '../runtime/workqueue/ratelimiter.ts';
import { alertPayload, redactedEndpoint, reloadWebhookBody, type AlertBody, type ReloadReport } from './alertsinks.ts';
import type { AlertTarget } from './alertflags.ts';

export interface ReloadAlertsOptions {
  /** Alerts waiting to be sent at most; a new one beyond pushes out the oldest. */
  queueSize?: number;
  /** Alerts in flight at once. */
  concurrency?: number;
  /** One attempt's deadline, connection to the end of the answer. */
  timeoutMs?: number;
  /** Attempts per alert, the first included. */
  maxAttempts?: number;
  /** Pause before the second attempt; doubles each time, up to maxBackoffMs (and a 429's Retry-After, within it). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** For HTTPS_PROXY/HTTP_PROXY/NO_PROXY when the target names no proxy. */
  env?: NodeJS.ProcessEnv;
  /** CA certificates (PEM) trusted for an https webhook instead of Node's own (a private CA; tests). */
  ca?: string;
}

const DEFAULTS = {
  queueSize: 100,
  concurrency: 2,
  timeoutMs: 10_000,
  maxAttempts: 4,
  backoffMs: 1_000,
  maxBackoffMs: 30_000,
} as const;

/** Answer bytes read at most (they are only a status to us), so a talkative receiver costs nothing. */
const MAX_ANSWER_BYTES = 4096;

/** How one attempt ended. */
type Attempt =
  | { readonly ok: true; readonly status: number }
  | {
      readonly ok: false;
      readonly retry: boolean;
      readonly reason: string;
      /** The answer's status, when there was an answer. */
      readonly status?: number;
      readonly retryAfterMs?: number;
    };

/** Retry-After in seconds or as a date, in ms from now; undefined when absent or unreadable. */
function retryAfter(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** An error's message with the URL's secret parts cut out, should a layer below have quoted them. */
function safeReason(error: unknown, url: URL): string {
  let text = error instanceof Error ? error.message : String(error);
  for (const secret of [url.href, `${url.pathname}${url.search}`]) {
    if (secret.length > 1) text = text.replaceAll(secret, '…');
  }
  return text;
}

/** One POST of `payload`, judged: 2xx delivered; 5xx, 429 and failures to get an answer worth another try. */
async function postOnce(
  url: URL,
  pool: Agent,
  payload: AlertBody,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<Attempt> {
  const attemptSignal = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
  try {
    const answer = await exchange(url.href, {
      pool,
      method: 'POST',
      headers: { 'content-type': payload.contentType, 'user-agent': 'stateward' },
      body: payload.body,
      signal: attemptSignal,
    });
    try {
      let read = 0;
      for await (const chunk of answer.body) {
        read += chunk.length;
        if (read >= MAX_ANSWER_BYTES) break;
      }
    } finally {
      answer.close();
    }
    const { status } = answer;
    if (status >= 200 && status < 300) return { ok: true, status };
    const retry = status >= 500 || status === 429;
    const after = status === 429 ? retryAfter(answer.header('retry-after'), Date.now()) : undefined;
    return {
      ok: false,
      retry,
      reason: `answered ${status}`,
      status,
      ...(after === undefined ? {} : { retryAfterMs: after }),
    };
  } catch (error) {
    const timedOut = attemptSignal.aborted && !signal.aborted;
    return { ok: false, retry: true, reason: timedOut ? `no answer within ${timeoutMs} ms` : safeReason(error, url) };
  }
}

/** The connection pool for `url`: through `proxy`, else through the environment's proxy unless it bypasses. */
function poolFor(url: URL, proxy: URL | undefined, env: NodeJS.ProcessEnv, ca?: string): Agent {
  return connectionPool(url.protocol, { ca }, proxyFor(url.href, proxy?.href, env));
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * The alert counters. ReloadAlerts registers them when it is built; a caller
 * that wants them at zero while alerts are off (a metrics reference that
 * always lists them) registers them itself and hands them over.
 */
export class ReloadAlertMetrics {
  readonly sent: Counter;
  readonly failed: Counter;
  readonly dropped: Counter;
  readonly retries: Counter;

  constructor(registry: Registry) {
    const counter = (name: string, help: string) =>
      new Counter({ name: `stateward_config_restart_alerts_${name}_total`, help, registers: [registry] });
    this.sent = counter('sent', 'Reload alerts the alert webhook accepted.');
    this.failed = counter('failed', 'Reload alerts given up on: refused, or every attempt failed.');
    this.dropped = counter('dropped', 'Reload alerts never sent: pushed out of a full queue, or left at shutdown.');
    this.retries = counter('retries', 'Reload alert attempts after the first (5xx, 429, timeouts, network errors).');
  }
}

/** Reload alerts to one webhook, queued, sent in the background. */
export class ReloadAlerts {
  private readonly target: AlertTarget;
  private readonly log: Logger;
  private readonly metrics: ReloadAlertMetrics;
  private readonly o: Required<Omit<ReloadAlertsOptions, 'env' | 'ca'>>;
  private readonly pool: Agent;
  private readonly queue: ReloadReport[] = [];
  private readonly abort = new AbortController();
  /** Deliveries under way (sending, or pausing between attempts). */
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;
  /** Whether a drop was logged since the queue last ran empty: one warning per overflow, not one per alert. */
  private dropLogged = false;
  private idle: (() => void)[] = [];

  constructor(
    target: AlertTarget,
    deps: { log: Logger } & ({ registry: Registry } | { metrics: ReloadAlertMetrics }),
    options: ReloadAlertsOptions = {},
  ) {
    this.target = target;
    this.log = deps.log.child({ component: 'reload-alerts', sink: target.sink });
    this.metrics = 'metrics' in deps ? deps.metrics : new ReloadAlertMetrics(deps.registry);
    this.o = {
      queueSize: Math.max(1, options.queueSize ?? DEFAULTS.queueSize),
      concurrency: Math.max(1, options.concurrency ?? DEFAULTS.concurrency),
      timeoutMs: options.timeoutMs ?? DEFAULTS.timeoutMs,
      maxAttempts: Math.max(1, options.maxAttempts ?? DEFAULTS.maxAttempts),
      backoffMs: options.backoffMs ?? DEFAULTS.backoffMs,
      maxBackoffMs: options.maxBackoffMs ?? DEFAULTS.maxBackoffMs,
    };
    this.pool = poolFor(target.url, target.proxy, options.env ?? process.env, options.ca);
  }

  /** Queues an alert for `report` and returns at once; it is sent in the background. */
  notify(report: ReloadReport): void {
    if (this.stopped) {
      this.metrics.dropped.inc();
      this.log.debug('reload alert after stop, not sent', { workload: workloadOf(report) });
      return;
    }
    if (this.queue.length >= this.o.queueSize) {
      const oldest = this.queue.shift()!;
      this.metrics.dropped.inc();
      if (!this.dropLogged) {
        this.dropLogged = true;
        this.log.warn('reload alert queue full: dropping the oldest alerts until it drains', {
          endpoint: redactedEndpoint(this.target.url),
          queueSize: this.o.queueSize,
          dropped: workloadOf(oldest),
        });
      }
    }
    this.queue.push(report);
    this.pump();
  }

  /**
   * Stops taking alerts and sends what is queued, for at most `deadlineMs`;
   * then gives up on the rest (counted as dropped) and closes the connections.
   */
  async stop(deadlineMs = 5_000): Promise<void> {
    this.stopped = true;
    if (this.inFlight.size > 0 || this.queue.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const drained = new Promise<void>((resolve) => this.idle.push(resolve));
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadlineMs)));
      await Promise.race([drained, late]);
      clearTimeout(timer);
    }
    const left = this.queue.splice(0);
    if (left.length > 0) {
      this.metrics.dropped.inc(left.length);
      this.log.warn('reload alerts not sent before shutdown', { count: left.length });
    }
    // What is still in flight ends at once, counted as failed.
    this.abort.abort(new Error('reload alerts stopped'));
    await Promise.allSettled(this.inFlight);
    await closePool(this.pool);
  }

  private pump(): void {
    while (this.inFlight.size < this.o.concurrency && this.queue.length > 0) {
      const report = this.queue.shift()!;
      const delivery = this.deliver(report)
        .catch((error: unknown) => {
          // Not expected (deliver handles what a send can throw); never an unhandled rejection in the operator.
          this.metrics.failed.inc();
          this.log.error('reload alert failed unexpectedly', {
            workload: workloadOf(report),
            err: safeReason(error, this.target.url),
          });
        })
        .finally(() => {
          this.inFlight.delete(delivery);
          if (this.queue.length === 0) this.dropLogged = false;
          this.pump();
          if (this.inFlight.size === 0 && this.queue.length === 0) for (const resolve of this.idle.splice(0)) resolve();
        });
      this.inFlight.add(delivery);
    }
  }

  private async deliver(report: ReloadReport): Promise<void> {
    const { sink, url, additionalInfo } = this.target;
    const payload = alertPayload(sink, report, additionalInfo);
    const signal = this.abort.signal;
    let last: Attempt | undefined;
    for (let attempt = 1; attempt <= this.o.maxAttempts && !signal.aborted; attempt++) {
      if (attempt > 1) {
        this.metrics.retries.inc();
        const backoff = backoffDelay(attempt - 1, {
          initialMs: this.o.backoffMs,
          maxMs: this.o.maxBackoffMs,
          spread: 0.1,
        });
        const wanted = last && !last.ok && last.retryAfterMs !== undefined ? last.retryAfterMs : 0;
        await pause(Math.min(this.o.maxBackoffMs, Math.max(backoff, wanted)), signal);
        if (signal.aborted) break;
      }
      last = await postOnce(url, this.pool, payload, signal, this.o.timeoutMs);
      if (last.ok) {
        this.metrics.sent.inc();
        this.log.debug('reload alert sent', { workload: workloadOf(report), status: last.status, attempt });
        return;
      }
      if (!last.retry) break;
    }
    this.metrics.failed.inc();
    this.log.warn('reload alert not delivered', {
      endpoint: redactedEndpoint(url),
      workload: workloadOf(report),
      err: signal.aborted ? 'stopped' : last && !last.ok ? last.reason : 'not sent',
    });
  }
}

function workloadOf(report: ReloadReport): string {
  return `${report.kind} ${report.namespace}/${report.name}`;
}

/** A -webhook-url call failed; `status` is the answer's, when there was one. */
export class ReloadWebhookError extends Error {
  readonly status: number | undefined;
  constructor(message: string, status: number | undefined) {
    super(message);
    this.name = 'ReloadWebhookError';
    this.status = status;
  }
}

/**
 * The -webhook-url mode's caller: one POST per report, which the restart
 * controller awaits in place of the restart. Connections are pooled between
 * calls; close() at shutdown.
 */
export class ReloadWebhook {
  private readonly url: URL;
  private readonly pool: Agent;
  private readonly timeoutMs: number;

  constructor(url: URL, options: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}) {
    this.url = url;
    this.timeoutMs = options.timeoutMs ?? DEFAULTS.timeoutMs;
    this.pool = poolFor(url, undefined, options.env ?? process.env);
  }

  /** Resolves once the URL answered 2xx; throws a ReloadWebhookError otherwise (the caller retries). */
  async call(report: ReloadReport, options: { signal: AbortSignal }): Promise<void> {
    const result = await postOnce(this.url, this.pool, reloadWebhookBody(report), options.signal, this.timeoutMs);
    if (result.ok) return;
    if (options.signal.aborted) throw options.signal.reason;
    throw new ReloadWebhookError(
      `webhook ${redactedEndpoint(this.url)} for ${workloadOf(report)}: ${result.reason}`,
      result.status,
    );
  }

  async close(): Promise<void> {
    await closePool(this.pool);
  }
}

/** One -webhook-url call on a connection of its own: ReloadWebhook for callers that make one. */
export async function callReloadWebhook(
  url: URL,
  report: ReloadReport,
  options: { signal: AbortSignal; timeoutMs?: number; env?: NodeJS.ProcessEnv },
): Promise<void> {
  const webhook = new ReloadWebhook(url, options);
  try {
    await webhook.call(report, options);
  } finally {
    await webhook.close();
  }
}
