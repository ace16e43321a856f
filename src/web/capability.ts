// The web view (-web.enabled): read-only status pages on the operator's HTTP
// server (-server.port), built by buildStatus — the report `stateward
// status` prints — from the caches the operator already keeps: StatefulSets
// and pods (workloads/cache.ts), zone-aware budgets and their ledgers
// (drain/zpdb/evictions.ts). Nothing is listed or watched for the view
// alone, so turning it on adds no load on the API server. Kinds the operator
// does not cache (Deployments, DaemonSets, ConfigMaps, Secrets) are passed
// as unreadable: the report leaves out what depends on them rather than
// calling configs missing.
import type { RolloutGate } from '../rollout/healthcheck/rolloutgate.ts';
import { rolloutTimelines } from '../rollout/rollouttimeline.ts';
import type { ZpdbCaches } from '../drain/zpdb/evictions.ts';
import type { FlagSet } from '../runtime/flags/flagset.ts';
import { informerFor, type Informer } from '../runtime/informer/informer.ts';
import type { KubeObject, Lease, Pod, StatefulSet } from '../runtime/kube/types.ts';
import type { Capability, Runtime } from '../runtime/operator.ts';
import { buildStatus, RESOURCE } from '../status/build.ts';
import type { StatusReport } from '../status/model.ts';
import { INDEX, workloadCache } from '../workloads/cache.ts';
import { WebHandler, type ReportSource } from './routes.ts';

export interface WebOptions {
  enabled: boolean;
}

export function registerWebFlags(fs: FlagSet): () => WebOptions {
  const enabled = fs.bool(
    'web.enabled',
    false,
    'Serve read-only status pages under /status on the HTTP server (-server.port): rollout groups zone by zone, updated live.',
  );
  return () => ({ enabled: enabled.value });
}

/** Kinds the operator keeps no cache of (config restarts may, but only when enabled, and metadata only). */
const NOT_CACHED = [RESOURCE.deployments, RESOURCE.daemonSets, RESOURCE.configMaps, RESOURCE.secrets];

/** Reports over the operator's own informer caches. */
export class CacheReportSource implements ReportSource {
  private readonly runtime: Runtime;
  private readonly sets: Informer<StatefulSet>[];
  private readonly pods: Informer<Pod>[];
  private readonly zpdbs: Informer<KubeObject>[];
  private readonly ledgers: Informer<Lease>[];
  private readonly listeners = new Map<string, Set<() => void>>();
  /** The health gates' reports: held by the replica that leads (a standby's page shows a gate as not evaluated). */
  private readonly gates: RolloutGate | undefined;

  constructor(runtime: Runtime, budgets: ZpdbCaches, gates?: RolloutGate) {
    this.runtime = runtime;
    this.gates = gates;
    const workloads = workloadCache(runtime);
    this.sets = workloads.statefulSets;
    this.pods = workloads.pods;
    this.zpdbs = budgets.zpdbs;
    this.ledgers = budgets.ledgers;
    const notify = (object: KubeObject) => {
      const namespace = object.metadata?.namespace;
      if (namespace !== undefined) for (const listener of this.listeners.get(namespace) ?? []) listener();
    };
    const handlers = {
      onAdd: notify,
      // A periodic resync re-delivers the same object: nothing changed.
      onUpdate: (old: KubeObject, object: KubeObject) => (old === object ? undefined : notify(object)),
      onDelete: notify,
    };
    for (const informer of [...this.sets, ...this.pods, ...this.zpdbs, ...this.ledgers] as Informer<KubeObject>[])
      informer.addHandlers(handlers);
    // A timeline is recorded by the reconcile after a change: the page hears of it too.
    rolloutTimelines(runtime).onChange((namespace) => {
      for (const listener of this.listeners.get(namespace) ?? []) listener();
    });
  }

  private get wholeCluster(): boolean {
    return this.runtime.config.watchNamespaces.includes('*');
  }

  namespaces(): string[] {
    if (!this.wholeCluster) return [...this.runtime.config.watchNamespaces];
    const seen = new Set<string>();
    for (const informer of this.sets)
      for (const set of informer.list()) if (set.metadata?.namespace) seen.add(set.metadata.namespace);
    return [...seen].sort();
  }

  watches(namespace: string): boolean {
    return this.wholeCluster || this.runtime.config.watchNamespaces.includes(namespace);
  }

  ready(): boolean {
    return [...this.sets, ...this.pods, ...this.zpdbs, ...this.ledgers].every((i) => i.hasSynced());
  }

  report(namespace: string): StatusReport {
    const inNamespace = <T extends KubeObject>(objects: T[]) =>
      objects.filter((o) => o.metadata?.namespace === namespace);
    const statefulSets = inNamespace(informerFor(this.sets, namespace)?.list() ?? []);
    const podInformer = informerFor(this.pods, namespace);
    // Indexed: the pods of the namespace's StatefulSets and its orphans, never a scan of every pod.
    const pods = inNamespace([
      ...statefulSets.flatMap((s) => podInformer?.byIndex(INDEX.podsByOwner, s.metadata?.uid ?? '') ?? []),
      ...(podInformer?.byIndex(INDEX.orphanPods, '') ?? []),
    ]);
    return buildStatus({
      now: this.runtime.clock.now(),
      namespaces: [namespace],
      statefulSets,
      pods,
      zpdbs: inNamespace(informerFor(this.zpdbs, namespace)?.list() ?? []),
      leases: inNamespace(informerFor(this.ledgers, namespace)?.list() ?? []),
      ...(this.gates ? { healthGates: this.gates.latestReports(namespace) } : {}),
      timelines: rolloutTimelines(this.runtime).latest(namespace),
      deployments: [],
      daemonSets: [],
      configMaps: [],
      secrets: [],
      unreadable: [
        ...NOT_CACHED,
        ...(this.zpdbs.some((i) => i.unavailable === 'forbidden') ? [RESOURCE.zpdbs] : []),
        ...(this.ledgers.some((i) => i.unavailable === 'forbidden') ? [RESOURCE.leases] : []),
      ],
    });
  }

  subscribe(namespace: string, listener: () => void): () => void {
    let set = this.listeners.get(namespace);
    if (!set) this.listeners.set(namespace, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(namespace);
    };
  }
}

/** `budgets`: the ZPDB caches the operator's budgets read, so the page shows what they decide on. */
export function webCapability(
  options: () => WebOptions,
  budgets: (runtime: Runtime) => { caches: ZpdbCaches },
  gates?: (runtime: Runtime) => RolloutGate,
): Capability {
  return {
    name: 'web',
    setup(runtime) {
      if (!options().enabled) return {};
      const log = runtime.logger.child({ component: 'web' });
      const handler = new WebHandler(new CacheReportSource(runtime, budgets(runtime).caches, gates?.(runtime)), {
        logger: log,
      });
      runtime.http.route('/status', handler.handle);
      runtime.http.routePrefix('/status/', handler.handle);
      log.info('serving read-only status pages', { path: '/status', port: runtime.config.serverPort });
      return {
        // Every replica serves the view; open event streams end at shutdown so the HTTP server can close.
        async serve(signal) {
          if (!signal.aborted)
            await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          handler.close();
        },
      };
    },
  };
}
