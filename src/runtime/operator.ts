// Assembles the shared runtime every capability uses — API client, caches,
// events, HTTP surface, leader election — runs the capabilities, and shuts
// everything down in order on SIGTERM.
import { randomBytes } from 'node:crypto';
import { Gauge, type Registry } from 'prom-client';
import { type Clock, systemClock } from './clock.ts';
import type { RuntimeConfig } from './runtimeflags.ts';
import { EventRecorder } from './events/recorder.ts';
import { kubeEventSink } from './events/event.ts';
import { clusterRejections } from './http/clusterlabel.ts';
import { exposedCollect, gcReports, HeapRelease, loopUtilization } from './heaprelease.ts';
import { HttpServer } from './http/server.ts';
import { Informer, type InformerOptions } from './informer/informer.ts';
import { informerMetrics, type InformerMetrics } from './informer/informermetrics.ts';
import { NamespaceFilter } from './informer/namespacescope.ts';
import { KubeClient } from './kube/client.ts';
import { KubeApiError } from './kube/errors.ts';
import type { KubeConfig } from './kube/kubeconfig.ts';
import { apiClientMetrics } from './kube/apimetrics.ts';
import { resources, type KubeObject, type ResourceType } from './kube/types.ts';
import { LeaderElector } from './leaderelection/elector.ts';
import { LeadershipTerms } from './leaderelection/terms.ts';
import type { Logger } from './log/logger.ts';
import type { V8Profiler } from './pprof/profiler.ts';
import { PerKeyTokenBuckets } from './workqueue/tokenbucket.ts';
import { TimestampSightings } from './sightings.ts';

/** What a capability gets from the runtime: the one way to do each thing. */
export interface Runtime {
  readonly config: RuntimeConfig;
  readonly client: KubeClient;
  readonly logger: Logger;
  readonly registry: Registry;
  /** now() for timestamps written to or compared with the API; monotonic() for every duration within the process. */
  readonly clock: Clock;
  readonly events: EventRecorder;
  readonly http: HttpServer;
  /** This process as the holder of Leases: unique per process (see Operator.identity). */
  readonly identity: string;
  /** Timestamps shared through the API (min-time stamps, ZPDB ledgers) as this process saw them: one per process, for every capability. */
  readonly sightings: TimestampSightings;
  /**
   * Shared informers: one per (type, namespace scope, selectors), created on
   * first request; one per watched namespace, or only `ownNamespace` for the
   * operator's own objects (its certificate Secret), whatever the watch scope.
   */
  informers<T extends KubeObject>(type: ResourceType, options?: SharedInformerOptions<T>): Informer<T>[];
  /** True while this replica may act (always true without leader election). */
  isLeader(): boolean;
  /** Aborts when the process begins to shut down: for work a capability does in setup(), before it serves or leads. */
  readonly stopping: AbortSignal;
  /**
   * Adds a condition to /ready: `check` returns undefined once its part is
   * ready, else what is missing (shown in the 503 body). The Service sends
   * traffic to a replica only while every condition holds.
   */
  readiness(name: string, check: () => string | undefined): void;
}

export type SharedInformerOptions<T extends KubeObject> = Omit<
  InformerOptions<T>,
  'client' | 'type' | 'namespace' | 'clock' | 'logger' | 'metrics'
> & { ownNamespace?: boolean };

export interface CapabilityHandle {
  /** Runs only while this replica leads; must stop promptly when the signal aborts. */
  lead?(signal: AbortSignal): Promise<void>;
  /** Runs on every replica (webhooks), from start to shutdown. */
  serve?(signal: AbortSignal): Promise<void>;
}

export interface Capability {
  readonly name: string;
  setup(runtime: Runtime): CapabilityHandle | Promise<CapabilityHandle>;
}

export interface OperatorOptions {
  config: RuntimeConfig;
  kubeConfig: KubeConfig;
  logger: Logger;
  registry: Registry;
  capabilities: Capability[];
  clock?: Clock;
  version: string;
}

export class Operator {
  private readonly o: OperatorOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  readonly client: KubeClient;
  readonly http: HttpServer;
  readonly events: EventRecorder;
  private readonly informerMetrics: InformerMetrics;
  private readonly informerCache = new Map<string, Informer<KubeObject>>();
  /** What each cached informer was created with: a later request must agree (informerConflict). */
  private readonly informerOptions = new Map<
    string,
    Pick<InformerOptions<KubeObject>, 'transform' | 'indexers' | 'optional'>
  >();
  private readonly readinessChecks = new Map<string, () => string | undefined>();
  private elector: LeaderElector | undefined;
  private readonly stop = new AbortController();
  private readonly tasks: Promise<void>[] = [];
  private leading: AbortController | undefined;
  private readonly leaderGauge: Gauge;
  private readonly heapRelease: HeapRelease;
  /** With -server.pprof.enabled: the profiler behind /debug/pprof/. */
  private profiler: V8Profiler | undefined;
  /**
   * This process as the holder of Leases (leader election, the
   * prepare-downscale group locks): the configured identity (the pod name)
   * plus a random suffix, so a restarted pod, or two processes on one host,
   * are different holders.
   */
  readonly identity: string;
  readonly sightings: TimestampSightings;
  /** -kubernetes.namespace-selector / -kubernetes.namespaces-to-ignore: the namespaces acted in, for every shared informer. */
  private readonly namespaceFilter: NamespaceFilter | undefined;

  constructor(options: OperatorOptions) {
    this.o = options;
    this.clock = options.clock ?? systemClock;
    this.log = options.logger;
    const { config, registry } = options;
    this.client = new KubeClient({
      kubeConfig: options.kubeConfig,
      timeoutMs: config.clientTimeoutMs,
      // qps 0 disables client-side limiting, as in rollout-operator since v0.38.
      limiter:
        config.clientQps > 0 ? new PerKeyTokenBuckets(config.clientQps, config.clientBurst, this.clock) : undefined,
      metrics: apiClientMetrics(registry, { qps: config.clientQps }),
      clock: this.clock,
      userAgent: `stateward/${options.version}`,
      // rollout-operator's X-Cluster on every API request: its namespace.
      cluster: { label: config.namespace, rejections: clusterRejections(registry, this.log) },
    });
    this.http = new HttpServer({
      port: config.serverPort,
      registry,
      notReady: () => this.notReady(),
      logger: this.log,
      limits: config.httpLimits,
      clusterValidation: config.clusterValidation,
    });
    this.identity = `${config.leaderElection.identity}_${randomBytes(4).toString('hex')}`;
    this.sightings = new TimestampSightings(this.clock);
    this.events = new EventRecorder({
      sink: kubeEventSink(this.client),
      clock: this.clock,
      reportingController: 'stateward.dev/operator',
      reportingInstance: config.leaderElection.identity,
      registry,
      logger: this.log,
    });
    this.informerMetrics = informerMetrics(registry);
    this.namespaceFilter = this.splitScope();
    this.leaderGauge = new Gauge({
      name: 'stateward_leader_is_leader',
      help: '1 while this replica is the elected leader (always 1 without leader election).',
      registers: [registry],
    });
    // Memory back to the system after each burst of work (heaprelease.ts).
    // The system clock whatever the operator's: V8 reports GCs on performance.now().
    this.heapRelease = new HeapRelease({
      collect: exposedCollect(),
      onGc: gcReports(),
      rss: () => process.memoryUsage.rss(),
      utilization: loopUtilization(),
      clock: systemClock,
      logger: this.log,
      registry,
    });
  }

  /**
   * The scope of an install that shares the cluster with others
   * (docs/multiple-installs.md): with a selector, a namespaces cache listed
   * with it (readiness waits for it like any other) tells the filter which
   * namespaces are in.
   */
  private splitScope(): NamespaceFilter | undefined {
    const { namespaceSelector: selector, namespacesToIgnore: ignored } = this.o.config;
    if (selector === '' && ignored.length === 0) return undefined;
    const filter = new NamespaceFilter({ selector, ignored });
    if (selector === '') return filter;
    const namespaces = new Informer<KubeObject>({
      client: this.client,
      type: resources.namespaces,
      labelSelector: selector,
      metadataOnly: true,
      clock: this.clock,
      logger: this.log,
      metrics: this.informerMetrics,
    });
    namespaces.addHandlers({
      onAdd: (ns) => filter.observe(ns.metadata?.name ?? ''),
      onDelete: (ns) => filter.forget(ns.metadata?.name ?? ''),
    });
    this.informerCache.set(JSON.stringify(['', 'namespaces', 'scope', selector]), namespaces);
    return filter;
  }

  /** A selector the API server cannot parse is a flag error: said at start, not retried forever. */
  private async checkNamespaceSelector(): Promise<void> {
    const selector = this.o.config.namespaceSelector;
    if (selector === '') return;
    try {
      await this.client.list(resources.namespaces, { labelSelector: selector, limit: 1 });
    } catch (error) {
      if (error instanceof KubeApiError && error.code === 400)
        throw new Error(`-kubernetes.namespace-selector=${selector}: the API server refused it: ${error.message}`);
      // Anything else (a refusal by RBAC, the API down) is the namespaces cache's to retry and report.
    }
  }

  /** Ready once every informer any capability asked for has synced. */
  ready(): boolean {
    return [...this.informerCache.values()].every((i) => i.hasSynced());
  }

  /** What /ready waits for: the caches, then every condition a capability registered. */
  notReady(): string | undefined {
    if (!this.ready()) return 'caches are still syncing';
    const missing: string[] = [];
    for (const [name, check] of this.readinessChecks) {
      const problem = check();
      if (problem !== undefined) missing.push(`${name}: ${problem}`);
    }
    return missing.length > 0 ? missing.join('; ') : undefined;
  }

  isLeader(): boolean {
    return this.elector ? this.elector.isLeader() : true;
  }

  private runtime(): Runtime {
    const { config } = this.o;
    return {
      config,
      client: this.client,
      logger: this.log,
      registry: this.o.registry,
      clock: this.clock,
      events: this.events,
      http: this.http,
      identity: this.identity,
      sightings: this.sightings,
      isLeader: () => this.isLeader(),
      stopping: this.stop.signal,
      readiness: (name, check) => void this.readinessChecks.set(name, check),
      informers: <T extends KubeObject>(
        type: ResourceType,
        { ownNamespace, ...options }: SharedInformerOptions<T> = {},
      ) => {
        const scopes = ownNamespace
          ? [config.namespace]
          : !type.namespaced || config.watchNamespaces.includes('*')
            ? [undefined]
            : [...config.watchNamespaces];
        return scopes.map((namespace) => {
          const key = JSON.stringify([
            type.group,
            type.resource,
            namespace,
            options.labelSelector,
            options.fieldSelector,
            options.metadataOnly,
          ]);
          const cached = this.informerOptions.get(key);
          if (cached) {
            // Shared, so it must be what this caller asked for: a conflict is a programming error, found at start-up.
            const conflict = informerConflict(cached, options as InformerOptions<KubeObject>);
            if (conflict)
              throw new Error(
                `informer for ${type.resource}${namespace ? ` in ${namespace}` : ''} requested twice with different ${conflict}`,
              );
            return this.informerCache.get(key) as unknown as Informer<T>;
          }
          const informer = new Informer<KubeObject>({
            ...(options as InformerOptions<KubeObject>),
            client: this.client,
            type,
            namespace,
            // The operator's own objects are its own whatever the scope.
            ...(type.namespaced && !ownNamespace && this.namespaceFilter
              ? { namespaceScope: this.namespaceFilter }
              : {}),
            clock: this.clock,
            logger: this.log,
            metrics: this.informerMetrics,
          });
          this.informerCache.set(key, informer);
          this.informerOptions.set(key, options as InformerOptions<KubeObject>);
          return informer as unknown as Informer<T>;
        });
      },
    };
  }

  /** Starts everything; resolves when the operator has shut down. */
  async run(): Promise<void> {
    const { config, capabilities } = this.o;
    await this.checkNamespaceSelector();
    const runtime = this.runtime();
    const handles: { name: string; handle: CapabilityHandle }[] = [];
    for (const capability of capabilities) {
      try {
        handles.push({ name: capability.name, handle: await capability.setup(runtime) });
      } catch (error) {
        // A setup still waiting on the API (config restarts' checksum key) when a stop arrived.
        if (this.stop.signal.aborted) return this.shutdown();
        throw error;
      }
    }
    // Loaded only when on: without the flag neither the inspector session nor the encoder is in the process.
    if (config.pprofEnabled)
      this.profiler = await (
        await import('./pprof/pprofroutes.ts')
      ).servePprof(this.http, {
        logger: this.log,
        stopping: this.stop.signal,
      });
    await this.http.listen();
    this.heapRelease.start();
    for (const informer of this.informerCache.values()) informer.start();
    for (const { name, handle } of handles) {
      if (handle.serve) this.tasks.push(this.guard(name, handle.serve(this.stop.signal)));
    }
    // Act only on a complete picture of the cluster.
    await Promise.all([...this.informerCache.values()].map((i) => i.waitForSync(this.stop.signal))).catch(
      () => undefined,
    );
    if (this.stop.signal.aborted) return this.shutdown();
    this.log.info('caches synced', { informers: this.informerCache.size });

    // One term at a time: a lease lost and won back must not run two
    // generations of the controllers side by side (terms.ts says why).
    const terms = new LeadershipTerms((signal) =>
      handles.flatMap(({ name, handle }) => (handle.lead ? [this.guard(name, handle.lead(signal))] : [])),
    );
    const startLeading = (signal: AbortSignal) => {
      this.leaderGauge.set(1);
      this.tasks.push(
        terms.begin(signal, () => this.log.info('leading again once the previous term has finished its work in hand')),
      );
    };
    if (config.leaderElection.enabled) {
      const le = config.leaderElection;
      this.elector = new LeaderElector({
        client: this.client,
        namespace: le.leaseNamespace,
        name: le.leaseName,
        identity: this.identity,
        leaseDurationMs: le.leaseDurationMs,
        renewDeadlineMs: le.renewDeadlineMs,
        retryPeriodMs: le.retryPeriodMs,
        clock: this.clock,
        logger: this.log,
        onStartedLeading: startLeading,
        onStoppedLeading: () => this.leaderGauge.set(0),
      });
      this.leaderGauge.set(0);
      await this.elector.run(this.stop.signal);
    } else {
      this.leading = new AbortController();
      startLeading(AbortSignal.any([this.leading.signal, this.stop.signal]));
      await new Promise<void>((resolve) => this.stop.signal.addEventListener('abort', () => resolve(), { once: true }));
    }
    await this.shutdown();
  }

  /** Begins graceful shutdown; run() resolves once it is done. */
  requestStop(reason: string): void {
    if (this.stop.signal.aborted) return;
    this.log.info('shutting down', { reason });
    this.stop.abort(new Error(reason));
  }

  private async shutdown(): Promise<void> {
    // Order: stop acting (leader tasks see the abort; the elector already
    // released the lease), drain in-flight HTTP requests, stop caches, flush events.
    this.leaderGauge.set(0);
    this.heapRelease.stop();
    this.leading?.abort(new Error('shutting down'));
    const grace = this.o.config.shutdownGraceMs;
    await Promise.race([Promise.allSettled(this.tasks), this.clock.sleep(grace)]);
    await this.http.close(grace);
    this.profiler?.close();
    await Promise.all([...this.informerCache.values()].map((i) => i.stop()));
    await this.events.stop();
    await this.client.close();
    this.log.info('stopped');
  }

  private async guard(name: string, task: Promise<void>): Promise<void> {
    try {
      await task;
    } catch (error) {
      if (this.stop.signal.aborted) return;
      // A capability that dies takes the process down: Kubernetes restarts it
      // with fresh caches, which beats running half an operator.
      this.log.error('capability failed; stopping', {
        capability: name,
        err: error instanceof Error ? error.message : String(error),
      });
      this.requestStop(`capability ${name} failed`);
    }
  }
}

/**
 * Why a second request for a shared informer cannot be served by the first
 * one: a different transform or `optional`, or an indexer the first does not
 * have (by name and function). Asking for fewer indexers is fine.
 */
export function informerConflict(
  first: Pick<InformerOptions<KubeObject>, 'transform' | 'indexers' | 'optional'>,
  second: Pick<InformerOptions<KubeObject>, 'transform' | 'indexers' | 'optional'>,
): string | undefined {
  if (first.transform !== second.transform) return 'transforms';
  if (Boolean(first.optional) !== Boolean(second.optional)) return 'optional flags';
  for (const [name, index] of Object.entries(second.indexers ?? {}))
    if (first.indexers?.[name] !== index) return `indexers (${name})`;
  return undefined;
}
