// A list-then-watch cache of one kind of object (the list streamed in the
// watch where the server allows: a watch-list), built to survive what real
// clusters do to watches: apiserver restarts, 410 Gone after compaction,
// half-open connections that never deliver another byte, and errors of every
// kind. See docs/runtime.md for the guarantees.
import { KubeApiError, isForbidden, isGone, isNotFound } from '../kube/errors.ts';
import type { KubeClient, WatchEvent } from '../kube/client.ts';
import type { KubeObject, ResourceType, Status } from '../kube/types.ts';
import { abortReason, type Clock, type Timer, systemClock } from '../clock.ts';
import { type Logger, nopLogger } from '../log/logger.ts';
import { IndexedStore, objectKey, stripManagedFields, type IndexFunc } from './store.ts';
import type { InformerMetrics } from './informermetrics.ts';
import type { NamespaceScope } from './namespacescope.ts';
import { backoffDelay } from '../workqueue/ratelimiter.ts';

export interface InformerHandlers<T extends KubeObject> {
  /** isInitialList: the object came with the first list, not a later change. */
  onAdd?(object: T, isInitialList: boolean): void;
  /** Also called with old === new on each periodic resync. */
  onUpdate?(oldObject: T, newObject: T): void;
  onDelete?(object: T): void;
}

export interface InformerOptions<T extends KubeObject> {
  client: KubeClient;
  type: ResourceType;
  /** One namespace, or every namespace when undefined. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Lists and watches PartialObjectMetadata only: apiVersion, kind, metadata. */
  metadataOnly?: boolean;
  /** Runs on every object before it is cached; default drops managedFields. */
  transform?: (object: T) => T;
  indexers?: Record<string, IndexFunc<T>>;
  /** Re-deliver every cached object as an update this often; 0 = never. */
  resyncPeriodMs?: number;
  /** Restart a watch that delivered nothing (not even a bookmark) for this long. */
  idleTimeoutMs?: number;
  /** Items per list page. */
  pageSize?: number;
  /**
   * Fill the cache from a watch-list (KEP-3157: the watch streams every
   * object, then a bookmark marks the end of the initial list) instead of a
   * paged LIST then a watch: one request instead of two or more, as
   * client-go's reflector does. Default true; a server that refuses it (400
   * or 422: the WatchList feature off), or that ignores it (older than 1.27:
   * its first bookmark does not end the initial events), is listed instead
   * from then on.
   */
  watchList?: boolean;
  backoff?: { initialMs: number; maxMs: number };
  /**
   * The resource may not be served (a CRD not installed yet) or not be
   * permitted (an install that kept an older Role): a 404 or 403 on list
   * counts as an empty, synced cache — readiness must not wait for it — and
   * the list is retried every 5 minutes (`backoff` overrides) until it
   * succeeds, and at once when a user of the cache asks (`lookAgain`, before
   * a decision the resource could change). `unavailable` says which, so the
   * user of the cache can degrade knowingly.
   */
  optional?: boolean;
  /**
   * The namespaces this install acts in (namespacescope.ts): objects of any
   * other are cached but neither delivered nor returned, and are delivered
   * (onAdd, as if listed) or taken back (onDelete) when their namespace
   * enters or leaves the scope.
   */
  namespaceScope?: NamespaceScope;
  /**
   * Keep the cache current by LIST alone, never a watch: for an install whose
   * RBAC grants list but not watch (Reloader's chart on workloads). Every
   * `intervalMs` (±10 %) the whole list replaces the cache and the
   * differences are delivered as they would be after a relist: adds, updates
   * (resourceVersion changed) and deletes. Changes show up one interval late
   * at worst; each poll counts as a relist in the metrics.
   */
  poll?: { intervalMs: number };
  clock?: Clock;
  logger?: Logger;
  metrics?: InformerMetrics;
}

const DEFAULTS = {
  // The apiserver sends a bookmark about once a minute on an idle watch.
  idleTimeoutMs: 5 * 60_000,
  pageSize: 500,
  backoff: { initialMs: 800, maxMs: 30_000 },
  // An optional resource that is not served or not permitted is looked for
  // again every 5 minutes (±20 %): an idle operator in a cluster without the
  // ZoneAwarePodDisruptionBudget CRD makes no request but its watches
  // (client-go's reflector would relist every 30 s). Where a CRD installed
  // later must count at once (a budget created right after it), the user of
  // the cache calls lookAgain() before deciding, rather than this schedule
  // polling fast for minutes after every start.
  unavailableBackoff: { initialMs: 5 * 60_000, maxMs: 5 * 60_000 },
};

/** The annotation of the bookmark that ends a watch-list's initial events. */
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

/** A server that does not do watch-lists says so with 400 or 422 (the WatchList feature gate off). */
function isWatchListRefused(error: unknown): boolean {
  return error instanceof KubeApiError && (error.code === 400 || error.code === 422);
}

export class Informer<T extends KubeObject> {
  private readonly options: InformerOptions<T>;
  private readonly store: IndexedStore<T>;
  private readonly handlers = new Set<InformerHandlers<T>>();
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly transform: (object: T) => T;
  private resourceVersion = '';
  private synced = false;
  private syncWaiters: (() => void)[] = [];
  private stopController: AbortController | undefined;
  private loop: Promise<void> | undefined;
  private resyncTimer: Timer | undefined;
  /** Ends the wait between looks at an unavailable optional resource early (lookAgain). */
  private wake: AbortController | undefined;
  /** Callers of lookAgain waiting for the look in progress (or the next one) to end. */
  private lookWaiters: (() => void)[] = [];
  /** When (monotonic) the last look at an unavailable optional resource ended. */
  private lookedAt: number | undefined;
  /** Whether the cache is filled by a watch-list; false once the server refused one. */
  private watchList: boolean;
  private unsubscribeScope: (() => void) | undefined;

  constructor(options: InformerOptions<T>) {
    this.options = options;
    this.store = new IndexedStore(options.indexers ?? {});
    this.clock = options.clock ?? systemClock;
    this.transform = options.transform ?? stripManagedFields;
    this.log = (options.logger ?? nopLogger).child({ informer: this.name });
    this.watchList = options.watchList ?? true;
  }

  /** The namespace this informer caches; undefined for all namespaces (or a cluster-scoped type). */
  get namespace(): string | undefined {
    return this.options.namespace;
  }

  get name(): string {
    const scope = this.options.namespace ? `${this.options.namespace}/` : '';
    return `${scope}${this.options.type.resource}${this.options.labelSelector ? `{${this.options.labelSelector}}` : ''}`;
  }

  /** Registers handlers; objects already cached are delivered to them as adds. Returns an unregister function. */
  addHandlers(handlers: InformerHandlers<T>): () => void {
    this.handlers.add(handlers);
    if (this.synced) for (const object of this.list()) this.call(handlers, 'onAdd', object, true);
    return () => this.handlers.delete(handlers);
  }

  start(): void {
    if (this.loop) return;
    this.unsubscribeScope = this.options.namespaceScope?.onChange((namespace, admitted) =>
      this.rescope(namespace, admitted),
    );
    this.stopController = new AbortController();
    const poll = this.options.poll;
    this.loop = poll
      ? this.runPolling(this.stopController.signal, poll.intervalMs)
      : this.run(this.stopController.signal);
    this.scheduleResync();
  }

  async stop(): Promise<void> {
    this.stopController?.abort(new Error('informer stopped'));
    this.resyncTimer?.cancel();
    this.unsubscribeScope?.();
    await this.loop;
    this.loop = undefined;
    for (const waiter of this.lookWaiters.splice(0)) waiter();
  }

  /**
   * For an optional resource that is not served or not permitted: look for
   * it again now, unless a look ended less than `freshMs` ago, and resolve
   * once that look is over — the cache then holds what it found, so a budget
   * created right after its CRD counts in the decision that follows.
   * Concurrent callers share one look. Resolves at once when the resource is
   * available (its watch keeps the cache current), and when `signal` aborts
   * (the caller decides on the cache as it is). Never rejects.
   */
  lookAgain(freshMs: number, signal?: AbortSignal): Promise<void> {
    if (!this.loop || this.unavailableNow === undefined || signal?.aborted) return Promise.resolve();
    if (this.lookedAt !== undefined && this.clock.monotonic() - this.lookedAt < freshMs) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        signal?.removeEventListener('abort', done);
        resolve();
      };
      signal?.addEventListener('abort', done, { once: true });
      this.lookWaiters.push(done);
      // Between looks: end the wait. During one: its end answers.
      this.wake?.abort();
    });
  }

  /**
   * Whether an optional resource is still unavailable with no look ended in
   * the last `freshMs`: a lookAgain that returned on its caller's deadline,
   * the look still running.
   */
  lookUnfinished(freshMs: number): boolean {
    if (!this.loop || this.unavailableNow === undefined) return false;
    return this.lookedAt === undefined || this.clock.monotonic() - this.lookedAt >= freshMs;
  }

  /** A look at an unavailable optional resource ended (found, still missing, or failed). */
  private looked(): void {
    this.lookedAt = this.clock.monotonic();
    for (const waiter of this.lookWaiters.splice(0)) waiter();
  }

  hasSynced(): boolean {
    return this.synced;
  }

  /** Resolves once the first list is in the cache; rejects if the signal aborts first. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(abortReason(signal!));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.syncWaiters.push(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.visible(this.store.get(namespace ? `${namespace}/${name}` : name));
  }

  getByKey(key: string): T | undefined {
    return this.visible(this.store.get(key));
  }

  list(): T[] {
    const all = this.store.list();
    return this.options.namespaceScope ? all.filter((o) => this.inScope(o)) : all;
  }

  byIndex(indexName: string, value: string): T[] {
    const all = this.store.byIndex(indexName, value);
    return this.options.namespaceScope ? all.filter((o) => this.inScope(o)) : all;
  }

  get size(): number {
    return this.options.namespaceScope ? this.list().length : this.store.size;
  }

  private inScope(object: T): boolean {
    return this.options.namespaceScope?.admits(object.metadata?.namespace) ?? true;
  }

  private visible(object: T | undefined): T | undefined {
    return object !== undefined && this.inScope(object) ? object : undefined;
  }

  /** A namespace entered (its objects delivered as if listed) or left (taken back) the scope. */
  private rescope(namespace: string, admitted: boolean): void {
    for (const object of this.store.list()) {
      if (object.metadata?.namespace !== namespace) continue;
      for (const handlers of this.handlers)
        if (admitted) this.call(handlers, 'onAdd', object, true);
        else this.call(handlers, 'onDelete', object);
    }
  }

  /** The resourceVersion the cache is current to. */
  get lastResourceVersion(): string {
    return this.resourceVersion;
  }

  // ---- the reflector loop --------------------------------------------------------

  private async run(signal: AbortSignal): Promise<void> {
    const backoff = this.options.backoff ?? DEFAULTS.backoff;
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (!this.resourceVersion && !this.watchList) await this.relist(signal);
        const delivered = await this.watch(signal);
        // A watch that delivered events was healthy: start backing off from scratch.
        // One that ended without a single event (not even a bookmark) is
        // treated like a failure, so a server closing at once is not hammered.
        if (delivered > 0) {
          failures = 0;
          continue;
        }
        failures++;
        await this.clock.sleep(backoffDelay(failures, { ...backoff, spread: 0.2 }), signal);
      } catch (error) {
        if (signal.aborted) break;
        if (this.watchList && !this.resourceVersion && isWatchListRefused(error)) {
          this.watchList = false;
          this.log.info('the server does not stream lists in watches (watch-list); listing instead', {
            err: error instanceof Error ? error.message : String(error),
          });
          continue;
        }
        if (this.options.optional && (isNotFound(error) || isForbidden(error))) {
          failures++;
          this.unavailableAsEmpty(isNotFound(error) ? 'not-served' : 'forbidden', error);
          this.looked();
          const recheck = this.options.backoff ?? DEFAULTS.unavailableBackoff;
          const wake = new AbortController();
          this.wake = wake;
          try {
            await this.clock.sleep(
              backoffDelay(failures, { ...recheck, spread: 0.2 }),
              AbortSignal.any([signal, wake.signal]),
            );
          } catch {
            if (signal.aborted) break;
          } finally {
            this.wake = undefined;
          }
          continue;
        }
        // Any other failure also ends a look someone waits for: they decide on the cache as it is.
        if (this.lookWaiters.length > 0) this.looked();
        if (isGone(error)) {
          this.options.metrics?.watchRestart(this.options.type, 'gone');
          this.log.info('resourceVersion too old (410 Gone); relisting', { resourceVersion: this.resourceVersion });
          this.resourceVersion = '';
          continue;
        }
        failures++;
        const delay = backoffDelay(failures, { ...backoff, spread: 0.2 });
        this.options.metrics?.watchRestart(this.options.type, 'error');
        this.log.warn('list/watch failed; retrying', {
          err: error instanceof Error ? error.message : String(error),
          retryInMs: Math.round(delay),
          failures,
        });
        try {
          await this.clock.sleep(delay, signal);
        } catch {
          break;
        }
      }
    }
  }

  /**
   * The polling loop (options.poll): list, deliver the differences, wait an
   * interval, again. Failures back off as the watch loop's do; an optional
   * resource not served or not permitted is empty until a later poll finds it.
   */
  private async runPolling(signal: AbortSignal, intervalMs: number): Promise<void> {
    const backoff = this.options.backoff ?? DEFAULTS.backoff;
    let failures = 0;
    while (!signal.aborted) {
      let delay: number;
      try {
        await this.relist(signal);
        failures = 0;
        // Spread, so several polled kinds started together do not list in lockstep.
        delay = intervalMs * (0.9 + Math.random() * 0.2);
      } catch (error) {
        if (signal.aborted) break;
        failures++;
        if (this.options.optional && (isNotFound(error) || isForbidden(error))) {
          this.unavailableAsEmpty(isNotFound(error) ? 'not-served' : 'forbidden', error);
          this.looked();
          delay = Math.max(intervalMs, backoffDelay(failures, { ...backoff, spread: 0.2 }));
        } else {
          if (this.lookWaiters.length > 0) this.looked();
          delay = backoffDelay(failures, { ...backoff, spread: 0.2 });
          this.options.metrics?.watchRestart(this.options.type, 'error');
          this.log.warn('list (polling) failed; retrying', {
            err: error instanceof Error ? error.message : String(error),
            retryInMs: Math.round(delay),
            failures,
          });
        }
      }
      const wake = new AbortController();
      this.wake = wake;
      try {
        await this.clock.sleep(delay, AbortSignal.any([signal, wake.signal]));
      } catch {
        if (signal.aborted) break;
      } finally {
        this.wake = undefined;
      }
    }
  }

  private reported: 'not-served' | 'forbidden' | undefined;
  private unavailableNow: 'not-served' | 'forbidden' | undefined;

  /** Why an optional resource's cache is empty for now (undefined once a list succeeded). */
  get unavailable(): 'not-served' | 'forbidden' | undefined {
    return this.unavailableNow;
  }

  /** An optional resource is not served or not permitted: an empty cache, synced, relisted later. */
  private unavailableAsEmpty(why: 'not-served' | 'forbidden', error: unknown): void {
    this.replace([]);
    this.resourceVersion = '';
    this.unavailableNow = why;
    if (this.reported !== why) {
      this.reported = why;
      if (why === 'not-served')
        this.log.info(
          'resource not served (is its CRD installed?); treated as empty until it appears (looked for again every 5m, and before each decision it could change)',
          {
            resource: this.options.type.resource,
          },
        );
      else
        this.log.warn(
          'not permitted to list this resource (RBAC); treated as empty and retried, see deploy/kustomize/rbac/PERMISSIONS.md',
          { resource: this.options.type.resource, err: error instanceof Error ? error.message : String(error) },
        );
    }
    if (!this.synced) {
      this.synced = true;
      for (const waiter of this.syncWaiters.splice(0)) waiter();
    }
  }

  /** Lists everything (paged), replaces the cache, and emits the differences. */
  private async relist(signal: AbortSignal): Promise<void> {
    const { client, type, namespace, labelSelector, fieldSelector, metadataOnly } = this.options;
    const items: T[] = [];
    let continueToken: string | undefined;
    let resourceVersion = '';
    let limit: number | undefined = this.options.pageSize ?? DEFAULTS.pageSize;
    for (;;) {
      let page;
      try {
        page = await client.list<T>(type, {
          namespace,
          labelSelector,
          fieldSelector,
          metadataOnly,
          limit,
          continue: continueToken,
          signal,
        });
      } catch (error) {
        if (isGone(error) && continueToken) {
          // The continue token expired mid-way (compaction): list again in one piece.
          items.length = 0;
          continueToken = undefined;
          limit = undefined;
          continue;
        }
        throw error;
      }
      // An empty metadata-only list comes back with "items": null.
      for (const item of page.items ?? []) items.push(this.prepare(item, page.kind));
      resourceVersion = page.metadata?.resourceVersion ?? '';
      continueToken = page.metadata?.continue || undefined;
      if (!continueToken) break;
    }
    this.listed(items, resourceVersion);
  }

  /** A whole list arrived (a LIST, or a watch-list's initial events): it replaces the cache, which is synced. */
  private listed(items: T[], resourceVersion: string): void {
    const { type } = this.options;
    this.options.metrics?.relist(type);
    if (this.reported) {
      this.log.info(this.reported === 'not-served' ? 'resource served now' : 'resource permitted now', {
        resource: type.resource,
      });
      this.reported = undefined;
    }
    const wasUnavailable = this.unavailableNow !== undefined;
    this.unavailableNow = undefined;
    this.replace(items);
    this.resourceVersion = resourceVersion;
    if (!this.synced) {
      this.synced = true;
      this.log.debug('synced', { objects: items.length, resourceVersion });
      for (const waiter of this.syncWaiters.splice(0)) waiter();
    }
    if (wasUnavailable) this.looked();
  }

  /**
   * Watches from the current resourceVersion until the stream ends; returns
   * how many events it applied. Without one (a watch-list), the stream's
   * initial events are gathered and replace the cache at the bookmark that
   * ends them; a stream that ends before it leaves the cache as it was.
   */
  private async watch(signal: AbortSignal): Promise<number> {
    const { client, type, namespace, labelSelector, fieldSelector, metadataOnly } = this.options;
    const idleTimeoutMs = this.options.idleTimeoutMs ?? DEFAULTS.idleTimeoutMs;
    const stream = new AbortController();
    const combined = AbortSignal.any([signal, stream.signal]);
    let idleTimer: Timer | undefined;
    let idle = false;
    const armWatchdog = () => {
      idleTimer?.cancel();
      idleTimer = this.clock.setTimer(idleTimeoutMs, () => {
        idle = true;
        stream.abort(new Error(`watch idle for ${idleTimeoutMs} ms`));
      });
    };
    let delivered = 0;
    /** The initial events of a watch-list, until the bookmark that ends them. */
    let initial = this.resourceVersion ? undefined : new Map<string, T>();
    armWatchdog();
    try {
      // The server ends a watch after timeoutSeconds; spread them so many
      // informers do not reconnect in lockstep (5-10 minutes, as client-go).
      const timeoutSeconds = Math.floor(300 + Math.random() * 300);
      // Transformed as each line is decoded: the raw object (a Secret's values) never reaches this frame.
      const decode = (object: T) => this.prepare(object);
      for await (const event of client.watch<T>(type, {
        namespace,
        labelSelector,
        fieldSelector,
        metadataOnly,
        resourceVersion: this.resourceVersion,
        sendInitialEvents: initial !== undefined,
        timeoutSeconds,
        decode,
        signal: combined,
      })) {
        armWatchdog();
        delivered++;
        if (!initial) {
          this.apply(event);
          continue;
        }
        if (event.type === 'ERROR') this.apply(event);
        const metadata = event.object.metadata;
        if (event.type === 'BOOKMARK') {
          if (metadata?.annotations?.[INITIAL_EVENTS_END] !== 'true') {
            // A server older than watch-lists (1.27) ignores sendInitialEvents
            // and never marks the end of the initial events; its first
            // bookmark (within about a minute) says so. List instead from now
            // on. Not tested: a current apiserver marks the end even of a
            // plain watch from "now", so none behaves this way any more.
            this.watchList = false;
            this.log.info('the server does not mark the end of a watch-list; listing instead');
            return delivered;
          }
          this.listed([...initial.values()], metadata.resourceVersion ?? '');
          initial = undefined;
        } else if (event.type === 'DELETED') initial.delete(objectKey(event.object));
        else initial.set(objectKey(event.object), event.object);
      }
    } catch (error) {
      if (idle && !signal.aborted) {
        this.options.metrics?.watchRestart(type, 'idle');
        this.log.warn('watch delivered nothing within the idle timeout; reconnecting', { idleTimeoutMs });
        return delivered;
      }
      throw error;
    } finally {
      idleTimer?.cancel();
    }
    return delivered;
  }

  private apply(event: WatchEvent<T>): void {
    const { type } = this.options;
    if (event.type === 'ERROR') {
      const status = event.object as unknown as Status;
      throw new KubeApiError({
        code: status.code ?? 500,
        reason: status.reason ?? 'WatchError',
        message: status.message ?? 'error event in watch stream',
        method: 'WATCH',
        path: type.resource,
      });
    }
    const rv = event.object.metadata?.resourceVersion;
    if (event.type === 'BOOKMARK') {
      if (rv) this.resourceVersion = rv;
      return;
    }
    this.options.metrics?.event(type, event.type);
    const object = event.object; // prepared by the watch (decode)
    const key = objectKey(object);
    if (event.type === 'DELETED') {
      const previous = this.store.delete(key);
      this.emitDelete(previous ?? object);
    } else {
      this.upsert(key, object, false);
    }
    if (rv) this.resourceVersion = rv;
  }

  private prepare(object: T, listKind?: string): T {
    let prepared = object;
    // List items carry no apiVersion/kind; fill them so cached objects look alike.
    if (!prepared.kind && listKind?.endsWith('List')) prepared = { ...prepared, kind: listKind.slice(0, -4) };
    try {
      return this.transform(prepared);
    } catch (error) {
      this.log.warn('transform failed; caching the object untransformed', {
        err: String(error),
        key: objectKey(object),
      });
      return prepared;
    }
  }

  private upsert(key: string, object: T, isInitialList: boolean): void {
    const current = this.store.get(key);
    if (current?.metadata?.uid && object.metadata?.uid && current.metadata.uid !== object.metadata.uid) {
      // Deleted and recreated under the same name while we were not looking
      // (seen only through a relist): delivered as it happened, a delete with
      // the object gone from the cache, then an add, so a handler that reads
      // the cache sees the moment in between.
      this.emitDelete(this.store.delete(key)!);
      this.store.set(key, object);
      this.emit('onAdd', object, isInitialList);
      return;
    }
    const previous = this.store.set(key, object);
    if (!previous) {
      this.emit('onAdd', object, isInitialList);
    } else if (previous.metadata?.resourceVersion !== object.metadata?.resourceVersion && this.inScope(object)) {
      for (const handlers of this.handlers) this.call(handlers, 'onUpdate', previous, object);
    }
  }

  private replace(items: T[]): void {
    const initial = !this.synced;
    const seen = new Set<string>();
    for (const item of items) {
      const key = objectKey(item);
      seen.add(key);
      this.upsert(key, item, initial);
    }
    for (const key of this.store.keys()) {
      if (!seen.has(key)) this.emitDelete(this.store.delete(key)!);
    }
  }

  private emit(kind: 'onAdd', object: T, isInitialList: boolean): void {
    if (!this.inScope(object)) return;
    for (const handlers of this.handlers) this.call(handlers, kind, object, isInitialList);
  }

  private emitDelete(object: T): void {
    if (!this.inScope(object)) return;
    for (const handlers of this.handlers) this.call(handlers, 'onDelete', object);
  }

  private call(handlers: InformerHandlers<T>, kind: 'onAdd' | 'onUpdate' | 'onDelete', a: T, b?: T | boolean): void {
    try {
      if (kind === 'onAdd') handlers.onAdd?.(a, b as boolean);
      else if (kind === 'onUpdate') handlers.onUpdate?.(a, b as T);
      else handlers.onDelete?.(a);
    } catch (error) {
      // A failing handler must not stop the cache from following the cluster.
      this.log.error('informer handler threw', {
        handler: kind,
        key: objectKey(a),
        err: error instanceof Error ? error.message : String(error),
      });
    }
  }

  private scheduleResync(): void {
    const period = this.options.resyncPeriodMs ?? 0;
    if (period <= 0) return;
    this.resyncTimer = this.clock.setTimer(period, () => {
      if (this.synced)
        for (const object of this.list())
          for (const handlers of this.handlers) this.call(handlers, 'onUpdate', object, object);
      if (!this.stopController?.signal.aborted) this.scheduleResync();
    });
  }
}

/** ±20 % jitter, so many informers failing together do not retry together. */
/**
 * Of the informers Runtime.informers() gave for a type (one per watched
 * namespace, or one for all), the one that caches `namespace`.
 */
export function informerFor<I extends { readonly namespace: string | undefined }>(
  informers: readonly I[],
  namespace: string,
): I | undefined {
  return informers.find((i) => i.namespace === undefined || i.namespace === namespace);
}

/** The object a set of per-namespace informers holds, or undefined when it is not cached (or the cache has not synced). */
export function cached<T extends KubeObject>(
  informers: Informer<T>[],
): (namespace: string, name: string) => T | undefined {
  return (namespace, name) => {
    const informer = informerFor(informers, namespace);
    return informer?.hasSynced() ? informer.get(namespace, name) : undefined;
  };
}
