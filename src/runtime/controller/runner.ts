// The one controller loop of the operator, in controller-runtime's shape. A
// capability writes a Reconciler: reconcile(key) says what one key (an
// object, a rollout group) comes to — done, again after a delay
// (`{ requeueAfterMs }`), again after its back-off (`{ requeue: true }`), or
// a thrown error. A Controller runs it for each leadership term:
//
// - a fresh work queue per term, measured as `workqueue_*{name}`;
// - every key enqueued when the term starts (`enqueueAll`): what changed
//   while no replica led is caught there;
// - `workers` reconciles at once, never two of one key, each only while this
//   replica leads (a key taken while a late lease renewal makes isLeader()
//   false is put back for a moment, not dropped: runWorkers);
// - a failed reconcile logged as a warning naming its key, and retried with
//   the key's exponential back-off (5 ms doubling, client-go's);
// - on the term's end the queue shuts down, the work in hand finishes, and
//   `afterTerm` drops what the term kept, unless a later term has begun.
//
// Event handlers call add(key) at any time: it reaches the running term's
// queue, and nothing while no term runs (a new term enqueues everything).
//
// That last guard is where the lease-renewal race was found: a replica that
// lost the Lease and won it back started the next term while the lost one
// was still finishing, and the old term's cleanup cleared the new term's
// queue, so config changes were silently never applied (terms.ts). Terms
// no longer overlap, and a term still never touches a later term's queue.
import type { Logger } from '../log/logger.ts';
import type { Runtime } from '../operator.ts';
import { runWorkers, WorkQueue, workQueueMetrics, type HandlerResult } from '../workqueue/workqueue.ts';

/** What a capability writes: what one key comes to (controller-runtime's reconcile.Reconciler). */
export interface Reconciler {
  reconcile(key: string): Promise<HandlerResult> | HandlerResult;
}

/** One leadership term, as the hooks of a Controller see it. */
export interface Term {
  /** Aborts when the term's leadership ends. */
  readonly signal: AbortSignal;
  /** Adds a key to this term's queue (dropped once the term is ending). */
  add(key: string): void;
}

export interface ControllerOptions {
  /** The clock, the metrics registry and isLeader() of the operator. */
  runtime: Pick<Runtime, 'clock' | 'registry' | 'isLeader'>;
  reconciler: Reconciler;
  /** How many keys are reconciled at once (never two reconciles of one key). */
  workers: number;
  /** The queue's `name` in the `workqueue_*` metrics; absent, the queue is not measured. */
  queueName?: string;
  /** A failed reconcile: `logger.warn(message, { [keyField]: key, err })`, then a retry after the key's back-off. */
  failures: { logger: Logger; message: string; keyField: string };
  /** At the start of each term, the queue already current: add every key there is. */
  enqueueAll(term: Term): void;
  /** Runs beside the workers for the term (a periodic resync); must return soon after `term.signal` aborts. */
  alongside?(term: Term): Promise<void>;
  /** Once a term's workers have returned, unless a later term has begun: forget what the term kept. */
  afterTerm?(): void | Promise<void>;
}

export class Controller {
  private readonly o: ControllerOptions;
  /** The running term's queue; undefined while no term runs. */
  private queue: WorkQueue | undefined;

  constructor(options: ControllerOptions) {
    if (!(Number.isInteger(options.workers) && options.workers >= 1))
      throw new RangeError(`workers must be an integer >= 1, got ${options.workers}`);
    this.o = options;
  }

  /** Whether a term runs: keys added now are reconciled. */
  get running(): boolean {
    return this.queue !== undefined;
  }

  /** Queues a key in the running term; nothing while no term runs. */
  add(key: string): void {
    this.queue?.add(key);
  }

  /** Runs one leadership term: resolves once `signal` has aborted and the work in hand is done. */
  async run(signal: AbortSignal): Promise<void> {
    const { runtime, failures } = this.o;
    const queue = new WorkQueue({
      clock: runtime.clock,
      ...(this.o.queueName !== undefined ? { metrics: workQueueMetrics(runtime.registry, this.o.queueName) } : {}),
    });
    this.queue = queue;
    const term: Term = { signal, add: (key) => queue.add(key) };
    this.o.enqueueAll(term);
    signal.addEventListener('abort', () => queue.shutDown(), { once: true });
    await Promise.all([
      this.o.alongside?.(term),
      runWorkers(queue, this.o.workers, (key) => this.o.reconciler.reconcile(key), {
        whileLeading: () => runtime.isLeader(),
        onError: (key, error) =>
          failures.logger.warn(failures.message, {
            [failures.keyField]: key,
            err: error instanceof Error ? error.message : String(error),
          }),
      }),
    ]);
    // No later term runs beside this one (LeadershipTerms); leave its queue and state alone all the same.
    if (this.queue !== queue) return;
    this.queue = undefined;
    await this.o.afterTerm?.();
  }
}
