// The process-wide answer to errors no code caught (see reportFaults).
import { Counter, type Registry } from 'prom-client';
import type { Logger } from './log/logger.ts';

/** Where uncaught exceptions and unhandled rejections are reported: process, or a stand-in in tests. */
export interface FaultSource {
  on(event: 'uncaughtException' | 'unhandledRejection', handler: (error: unknown) => void): void;
}

/**
 * What an error nobody caught does. No request can cause one: both servers
 * turn every failure of a request into an answer for that request (see
 * http/guard.ts; the raw-socket fuzzer holds them to it), so what
 * reaches here is a bug elsewhere.
 * - An unhandled rejection is a failed asynchronous operation whose caller
 *   did not wait for it: it is logged and counted, and the process keeps
 *   serving — the operation's own retry (the work queue, the next
 *   reconcile) recovers, and an admission webhook stays available.
 * - An uncaught exception left a synchronous call half done, so memory may
 *   be inconsistent: it is logged and counted, and the operator shuts down
 *   gracefully and exits 1, for Kubernetes to restart it with fresh caches
 *   (forced after twice the shutdown grace period if shutdown itself hangs).
 */
export function reportFaults(
  faults: FaultSource,
  o: { logger: Logger; registry: Registry; stop: (reason: string) => void; graceMs: number },
): { happened: boolean } {
  const { logger, registry, graceMs } = o;
  const state = { happened: false };
  const counter = new Counter({
    name: 'stateward_unhandled_errors_total',
    help: 'Errors no code caught: kind="rejection" (logged, the process keeps serving) or "exception" (logged, the process restarts).',
    labelNames: ['kind'],
    registers: [registry],
  });
  counter.inc({ kind: 'rejection' }, 0);
  counter.inc({ kind: 'exception' }, 0);
  faults.on('unhandledRejection', (reason) => {
    counter.inc({ kind: 'rejection' });
    logger.error(
      'unhandled promise rejection (a bug): the operation it belonged to failed; the process keeps serving',
      { err: reason },
    );
  });
  faults.on('uncaughtException', (error) => {
    counter.inc({ kind: 'exception' });
    logger.error('uncaught exception (a bug): shutting down so that Kubernetes restarts the process with fresh state', {
      err: error,
    });
    state.happened = true;
    o.stop('uncaught exception');
    if (faults === process) setTimeout(() => process.exit(1), 2 * graceMs + 5000).unref();
  });
  return state;
}
