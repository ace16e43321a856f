// Config-change restarts, the imperative shell: watches workloads (every
// kind in workloadkinds.ts) and ConfigMaps/Secrets — whose
// content is hashed as it is decoded and never cached (digest.ts), so every
// config's checksum is known from LISTs and the watch alone — and, for each
// opted-in workload, decides with restartplan.ts and patches.
//
// Per workload key, on any relevant change: observe the change (debounce
// state), then reconcile when due: decide, patch the applied checksums (and
// the restart trigger) in ONE merge patch with a resourceVersion
// precondition (restartwrites.ts: per kind, how the restart is written),
// and record an Event. The decisions live on the workload (the annotation),
// so a restart of the operator or a new leader picks up exactly what was not
// applied yet. Every completed restart goes through `restarted`.
import { Gauge } from 'prom-client';
import type { FlagSet } from '../runtime/flags/flagset.ts';
import { informerFor, type Informer } from '../runtime/informer/informer.ts';
import { isAlreadyExists, isConflict, isNotFound, isRetryable, KubeApiError } from '../runtime/kube/errors.ts';
import { backoffDelay } from '../runtime/workqueue/ratelimiter.ts';
import { resources, type KubeObject, type Pod, type StatefulSet } from '../runtime/kube/types.ts';
import type { Logger } from '../runtime/log/logger.ts';
import type { Capability, Runtime } from '../runtime/operator.ts';
import { Controller, type Reconciler } from '../runtime/controller/runner.ts';
import type { HandlerResult } from '../runtime/workqueue/workqueue.ts';
import { INDEX, workloadCache } from '../workloads/cache.ts';
import { ensureChecksumKey } from './checksumkey.ts';
import { configDigester, type ConfigDigest } from './digest.ts';
import { checksumScheme } from './hash.ts';
import { appliedChecksumsOf, MISSING, restartTimestampOf, type WorkloadKind } from './checksums.ts';
import { observeChange, type PendingChange } from './debounce.ts';
import {
  nextOutdatedPod,
  onDeleteEvent,
  restartMode,
  skipNotices,
  updateTarget,
  type OnDeleteWorkload,
} from './ondelete.ts';
import { decideRestart, type RestartDecision } from './restartplan.ts';
import { recreateStep, type Job, type RecreateStep } from './jobrestarts.ts';
import { pauseDecision, type PausableDeployment } from './pauseperiod.ts';
import { hasUnfinishedWrite, kindWarnings, planRestartWrite } from './restartwrites.ts';
import { eventApiVersion, JOBS, kindByPrefix, WORKLOAD_KINDS, type WorkloadKindSpec } from './workloadkinds.ts';
import { configKey, parseConfigKey, type ConfigKind } from './references.ts';
import { mayOptIn, watchedConfigs, type WatchedConfigs, type WorkloadLike } from './optins.ts';
import { CsiClassView, csiInformers, type ClassPodStatusDigest, type CsiOptions } from './csiinformers.ts';
import { withClasses, type WatchedWithClasses } from './csioptins.ts';
import { classKey, parseClassKey } from './csireferences.ts';
import { RestartMetrics } from './restartmetrics.ts';
import { annotationPatch } from './patches.ts';
import type { AlertSettings } from './alertflags.ts';
import type { ReloadReport } from './alertsinks.ts';
import { ReloadAlertMetrics, ReloadAlerts, ReloadWebhook } from './reloadalerts.ts';
import type { EventReasons } from './reloaderflags.ts';
import { restartEvents, type RestartOutcome } from './reloaderevents.ts';
import type { RestartScope } from './reloaderscope.ts';
import type { ReloaderInstallMode } from './reloaderinstall.ts';
import { CONFIG_RESTART_PAUSED_ANNOTATION, EVICT_ONDELETE_ANNOTATION } from '../vocabulary/keys.ts';
import { pauseNotices, restartPause, type RestartPause } from './restartpause.ts';
import { labelledConfigs, restartCauses } from './selectedconfigs.ts';

/** The config restarts' own flags. */
export interface RestartFlagValues {
  enabled: boolean;
  gracePeriodMs: number;
  maxWaitMs: number;
  checksumKeySecret: string;
}

/** Their own flags, and what Reloader's flags and the alert flags add (main.ts resolves them). */
export interface RestartOptions extends RestartFlagValues {
  /** What Reloader's filter flags leave in scope (reloaderscope.ts); DEFAULT_SCOPE without them. */
  scope: RestartScope;
  /** Reasons of the restart Events: Stateward's, or Reloader's in its drop-in mode. */
  eventReasons: EventReasons;
  /** Reloader's METRICS_COUNT_BY_NAMESPACE. */
  countByNamespace: boolean;
  /** Alerts after each restart, and the -webhook-url mode. */
  alerts: AlertSettings;
  /** Reloader's install (its chart's RBAC): workloads polled, not watched; pods not read (reloaderinstall.ts). */
  reloaderInstall?: ReloaderInstallMode;
}

/** xing's settings (same names and env variables) plus Stateward's switch and debounce cap. */
export function registerRestartFlags(fs: FlagSet): () => RestartFlagValues {
  const enabled = fs.bool(
    'config-restarts.enabled',
    false,
    'Restart opted-in Deployments, StatefulSets, DaemonSets, CronJobs, Jobs and Argo Rollouts when the ConfigMaps and Secrets they use change (needs list/watch on ConfigMaps and Secrets).',
  );
  const grace = fs.int(
    'restart-grace-period',
    5,
    'Seconds a config change waits for further changes before the restart (xing; each change within it extends it, up to -restart-max-wait).',
    { env: 'RESTART_GRACE_PERIOD' },
  );
  fs.int(
    'restart-check-period',
    500,
    'Accepted for xing compatibility; Stateward schedules each restart for the moment it is due instead of polling.',
    { env: 'RESTART_CHECK_PERIOD' },
  );
  fs.string(
    'ignored-errors',
    '',
    'Accepted for xing compatibility; Stateward never exits on an object it cannot use (it warns with an Event).',
    { env: 'IGNORED_ERRORS' },
  );
  const maxWait = fs.duration(
    'restart-max-wait',
    60_000,
    'Longest a burst of config changes may hold a restart back, so a config that keeps changing still rolls.',
  );
  const keySecret = fs.string(
    'config-restarts.checksum-key-secret',
    'stateward-config-checksum-key',
    'Secret, in the operator namespace, holding the HMAC key of config checksums (created when missing).',
  );
  return () => ({
    enabled: enabled.value,
    gracePeriodMs: Math.max(0, grace.value) * 1000,
    maxWaitMs: maxWait.value,
    checksumKeySecret: keySecret.value,
  });
}

const CONFIG_PAGE_SIZE = 2000;

/** How long a released Job's copy is retried on failures a retry can mend (createReleasedJob). */
const RECREATE_RETRY_MS = 120_000;

type Workload = KubeObject & { spec?: { updateStrategy?: { type?: string } } };
type Restart = Extract<RestartDecision, { action: 'restart' }>;
/** An Event and log line for the workload, given once while it lasts (notify). */
type Notice = { type: 'Normal' | 'Warning'; reason: string; message: string };

export class RestartController implements Reconciler {
  private readonly runtime: Runtime;
  private readonly o: RestartOptions;
  private readonly log: Logger;
  private readonly workloads = new Map<WorkloadKind, Informer<Workload>[]>();
  private readonly configs: Record<ConfigKind, Informer<ConfigDigest>[]>;
  private readonly pending = new Map<string, PendingChange>();
  private readonly pods: Informer<Pod>[];
  /** Per workload, the skip reasons and warnings already given as Events. */
  private readonly noticed = new Map<string, Set<string>>();
  /** Keys of the opted-in workloads whose outdated pods are evicted one at a time. */
  private readonly evicting = new Set<string>();
  /** Per workload, the uid of the pod we evicted last. */
  private readonly evicted = new Map<string, string>();
  /** Reverse index: config key → keys of the opted-in workloads watching it. */
  private readonly watchers = new Map<string, Set<string>>();
  private readonly watching = new Map<string, string[]>();
  /** Workloads with reload-list patterns: a config created later may match them. */
  private readonly patternWorkloads = new Set<string>();
  /** Per Job being re-created by this process: which configs changed, for the Event at the create. */
  private readonly recreating = new Map<string, string[]>();
  /** Workloads whose restart write failed since their last success: a failure alerts once, not at each retry. */
  private readonly failing = new Set<string>();
  /** With -alert-on-reload: an alert after each restart. */
  private readonly alerts: ReloadAlerts | undefined;
  /** With -webhook-url: called instead of restarting. */
  private readonly webhook: ReloadWebhook | undefined;
  /** The term-scoped loop: a queue of workload keys, 2 workers while leading. */
  private readonly controller: Controller;
  private readonly metrics: RestartMetrics;
  /** With --enable-csi-integration: the SecretProviderClass caches and checksums (csiinformers.ts). */
  private readonly csi: CsiClassView | undefined;
  /** Namespaces (metadata), for their pause annotation; none where they cannot be read (namespacePauseReadable). */
  private readonly namespaces: Informer<KubeObject>[];
  /** Opted-in workloads whose restarts are paused, and those of them with a change held (while leading). */
  private readonly paused = new Set<string>();
  private readonly holding = new Set<string>();

  /** `key`: the HMAC key of config checksums (ensureChecksumKey), needed before the config caches start. */
  constructor(runtime: Runtime, options: RestartOptions, key: Buffer, csi: CsiOptions = { enabled: false }) {
    this.runtime = runtime;
    this.o = options;
    this.log = runtime.logger.child({ controller: 'config-restarts' });
    this.controller = this.termLoop(runtime);
    // Reloader's install: its RBAC grants no pods and lists, not watches, workloads: each kind polled, nothing shared.
    const install = options.reloaderInstall;
    const shared = install ? { pods: [], statefulSets: [] } : workloadCache(runtime);
    this.pods = shared.pods;
    for (const spec of WORKLOAD_KINDS)
      this.workloads.set(spec.kind, workloadInformers(runtime, options, spec, shared.statefulSets));
    this.configs = {
      configmap: configInformers(runtime, options.scope, key, 'configmap'),
      secret: configInformers(runtime, options.scope, key, 'secret'),
    };
    this.metrics = new RestartMetrics(runtime.registry, () => this.trackedConfigs(), {
      countByNamespace: options.countByNamespace,
    });
    // Registered whenever config restarts run, so dashboards see them at zero with alerts off.
    const alertMetrics = new ReloadAlertMetrics(runtime.registry);
    const { alerts, webhookUrl } = options.alerts;
    if (alerts) this.alerts = new ReloadAlerts(alerts, { log: this.log, metrics: alertMetrics });
    if (webhookUrl) this.webhook = new ReloadWebhook(webhookUrl);
    this.csi = csi.enabled ? this.watchClasses(runtime, key) : undefined;
    this.namespaces = namespacePauseReadable(runtime, options) ? this.watchNamespaces(runtime) : [];
    pauseGauges(runtime, this.paused, this.holding);
    this.handleWorkloadEvents();
    this.handlePodEvents();
    this.handleConfigEvents();
  }

  /** The term-scoped loop: a queue of workload keys, 2 workers while leading. */
  private termLoop(runtime: Runtime): Controller {
    return new Controller({
      runtime,
      reconciler: this,
      workers: 2,
      queueName: 'config-restarts',
      failures: { logger: this.log, message: 'config restart reconcile failed; retrying', keyField: 'workload' },
      // Everything opted in is looked at once: changes made while no replica led are caught here.
      enqueueAll: () => {
        for (const spec of WORKLOAD_KINDS)
          for (const informer of this.workloads.get(spec.kind)!)
            for (const w of informer.list()) this.workloadChanged(spec, w);
      },
      afterTerm: () => {
        this.pending.clear();
        this.paused.clear();
        this.holding.clear();
        this.metrics.leadershipEnded();
      },
    });
  }

  /** A workload added or updated is looked at again (workloadChanged); one deleted is forgotten. */
  private handleWorkloadEvents(): void {
    for (const spec of WORKLOAD_KINDS) {
      for (const informer of this.workloads.get(spec.kind)!) {
        informer.addHandlers({
          onAdd: (w) => this.workloadChanged(spec, w),
          onUpdate: (_o, w) => this.workloadChanged(spec, w),
          onDelete: (w) => this.forget(this.keyOf(spec, w)),
        });
      }
    }
  }

  /**
   * Each eviction step waits for pods to come back Ready; the workload's own
   * status may report that before the pod cache shows it, so pod events of
   * an evicting workload bring the next step too.
   */
  private handlePodEvents(): void {
    for (const informer of this.pods) {
      const podChanged = (pod: Pod) => {
        const owner = pod.metadata?.ownerReferences?.find((o) => o.controller);
        const entry = WORKLOAD_KINDS.find((k) => k.kind === owner?.kind);
        if (!owner || !entry) return;
        const key = `${entry.prefix}/${pod.metadata?.namespace}/${owner.name}`;
        if (this.evicting.has(key)) this.controller.add(key);
      };
      informer.addHandlers({ onAdd: podChanged, onUpdate: (_o, pod) => podChanged(pod), onDelete: podChanged });
    }
  }

  /** A ConfigMap or Secret that moved starts (or extends) a burst of the workloads watching it (configChanged). */
  private handleConfigEvents(): void {
    for (const kind of ['configmap', 'secret'] as const) {
      for (const informer of this.configs[kind]) {
        informer.addHandlers({
          onAdd: (c) => this.configChanged(kind, c),
          onUpdate: (old, c) => {
            if (old.metadata?.resourceVersion === c.metadata?.resourceVersion) return;
            // Labels or annotations only: looked at (they may change what is watched), but no data moved.
            if (old.digest?.checksum === c.digest?.checksum && this.controller.running)
              this.metrics.reloadSkipped('no_data_change');
            this.configChanged(kind, c);
          },
          onDelete: (c) => this.configChanged(kind, c),
        });
      }
    }
  }

  /** A workload deleted: nothing of it is kept. */
  private forget(key: string): void {
    this.pending.delete(key);
    this.noticed.delete(key);
    this.evicted.delete(key);
    this.evicting.delete(key);
    this.failing.delete(key);
    this.paused.delete(key);
    this.holding.delete(key);
    this.index(key, [], false);
  }

  private keyOf(spec: WorkloadKindSpec, w: KubeObject): string {
    return `${spec.prefix}/${w.metadata?.namespace}/${w.metadata?.name}`;
  }

  /** `view`: the workload as its kind's `view` shows it (metadata and pod template). */
  private watched(view: WorkloadLike): WatchedWithClasses {
    return withClasses(this.watchedConfigsOf(view), this.csi?.watched(view));
  }

  /** The ConfigMaps and Secrets a workload watches, less a kind --resources-to-ignore leaves out. */
  private watchedConfigsOf(view: WorkloadLike): WatchedConfigs {
    const all = this.watchedAnyKind(view);
    // --resources-to-ignore: that kind is not watched, so its configs are neither recorded nor reported missing.
    const { scope } = this.o;
    if (scope.ignoredConfigKind === undefined) return all;
    const kept = (c: { kind: ConfigKind }) => scope.configKindWatched(c.kind);
    const configs = all.configs.filter(kept);
    return {
      ...all,
      configs,
      keys: configs.map((c) => c.key),
      patterns: all.patterns.filter(kept),
      selected: all.selected.filter(kept),
    };
  }

  private watchedAnyKind(view: WorkloadLike): WatchedConfigs {
    return watchedConfigs(view, {
      autoReloadAll: this.o.scope.autoReloadAll,
      csiIntegration: this.csi !== undefined,
      configMeta: (kind, namespace, name) => this.configInformer(kind, namespace)?.get(namespace, name)?.metadata,
      configNames: (kind, namespace) =>
        (this.configInformer(kind, namespace)?.list() ?? [])
          .filter((c) => c.metadata?.namespace === namespace)
          .map((c) => c.metadata?.name ?? ''),
      configsOf: (kind, namespace) =>
        labelledConfigs(
          (this.configInformer(kind, namespace)?.list() ?? []).filter((c) => c.metadata?.namespace === namespace),
        ),
    });
  }

  /**
   * Namespaces, metadata only, for stateward.dev/config-restart-paused: a
   * change of it looks at every workload of the namespace again (lifting it
   * restarts those with a held change). Optional: RBAC written before it
   * leaves the cache empty (no namespace pauses) instead of keeping the
   * operator unready.
   */
  private watchNamespaces(runtime: Runtime): Informer<KubeObject>[] {
    const informers = runtime.informers<KubeObject>(resources.namespaces, { metadataOnly: true, optional: true });
    for (const informer of informers)
      informer.addHandlers({
        onUpdate: (old, ns) => {
          const before = old.metadata?.annotations?.[CONFIG_RESTART_PAUSED_ANNOTATION];
          if (before !== ns.metadata?.annotations?.[CONFIG_RESTART_PAUSED_ANNOTATION])
            this.namespaceChanged(ns.metadata?.name ?? '');
        },
      });
    return informers;
  }

  /** Every workload of the namespace, looked at again. */
  private namespaceChanged(namespace: string): void {
    if (!this.controller.running || namespace === '') return;
    for (const spec of WORKLOAD_KINDS)
      for (const w of informerFor(this.workloads.get(spec.kind)!, namespace)?.list() ?? [])
        if (w.metadata?.namespace === namespace) this.workloadChanged(spec, w);
  }

  /** What pauses this workload's restarts: itself, its Namespace, or a config it watches (restartpause.ts). */
  private pauseOf(view: WorkloadLike, watched: WatchedConfigs): RestartPause {
    const namespace = view.metadata?.namespace ?? '';
    const ns = this.namespaces.length > 0 ? informerFor(this.namespaces, '')?.get('', namespace) : undefined;
    return restartPause({
      workload: view.metadata?.annotations,
      ...(ns ? { namespace: { name: namespace, annotations: ns.metadata?.annotations } } : {}),
      configs: watched.configs.map((c) => ({
        key: c.key,
        annotations: this.configInformer(c.kind, c.namespace)?.get(c.namespace, c.name)?.metadata?.annotations,
      })),
    });
  }

  /** The SPCPS and class caches; a change of either is a class change for the workloads watching it. */
  private watchClasses(runtime: Runtime, key: Buffer): CsiClassView {
    const caches = csiInformers(runtime, key);
    const moved = (o: ClassPodStatusDigest) => this.classChanged(o.metadata?.namespace ?? '', o.mount.className);
    for (const informer of caches.statuses)
      informer.addHandlers({
        onAdd: moved,
        onUpdate: (old, o) => {
          if (old.metadata?.resourceVersion !== o.metadata?.resourceVersion) moved(o);
        },
        onDelete: moved,
      });
    const classMoved = (c: KubeObject) => this.classChanged(c.metadata?.namespace ?? '', c.metadata?.name ?? '');
    for (const informer of caches.classes)
      informer.addHandlers({ onAdd: classMoved, onUpdate: (_o, c) => classMoved(c), onDelete: classMoved });
    return new CsiClassView(caches, this.pods);
  }

  /** Every ConfigMap and Secret in the caches while leading; a standby tracks nothing. */
  private trackedConfigs(): number {
    let n = 0;
    if (this.controller.running)
      for (const informer of [...this.configs.configmap, ...this.configs.secret]) n += informer.size;
    return n;
  }

  private configInformer(kind: ConfigKind, namespace: string): Informer<ConfigDigest> | undefined {
    return informerFor(this.configs[kind], namespace);
  }

  private workloadChanged(spec: WorkloadKindSpec, w: Workload): void {
    const key = this.keyOf(spec, w);
    // A pause to end or a Job's re-creation to finish goes on whatever the opt-ins say now.
    const unfinished = hasUnfinishedWrite(spec, w);
    const view = spec.view(w);
    // Most workload updates (status churn of every Deployment and StatefulSet) concern no opted-in workload.
    if (!mayOptIn(view, { autoReloadAll: this.o.scope.autoReloadAll }) || spec.handledElsewhere(w) !== undefined) {
      if (this.watching.has(key) || this.patternWorkloads.has(key)) this.index(key, [], false);
      this.evicting.delete(key);
      if (unfinished) this.controller.add(key);
      return;
    }
    const watched = this.watched(view);
    const optedIn = watched.optIns.length > 0;
    this.reindex(key, watched);
    if (optedIn && this.evicts(spec, w)) this.evicting.add(key);
    else this.evicting.delete(key);
    // A malformed opt-in alone (a selector that does not parse) opts nothing in, but is said on the workload.
    if (optedIn || unfinished || watched.warnings.length > 0) this.controller.add(key);
  }

  /** The reverse index for one workload, from what it watches now. */
  private reindex(wkey: string, watched: WatchedWithClasses): void {
    const optedIn = watched.optIns.length > 0;
    const patterns = watched.patterns.length + watched.classes.patterns.length + watched.selected.length;
    this.index(wkey, optedIn ? watched.keys : [], optedIn && patterns > 0);
  }

  private index(workload: string, keys: string[], hasPatterns: boolean): void {
    for (const old of this.watching.get(workload) ?? []) this.watchers.get(old)?.delete(workload);
    for (const key of keys) {
      let set = this.watchers.get(key);
      if (!set) this.watchers.set(key, (set = new Set()));
      set.add(workload);
    }
    if (keys.length > 0) this.watching.set(workload, keys);
    else this.watching.delete(workload);
    if (hasPatterns) this.patternWorkloads.add(workload);
    else this.patternWorkloads.delete(workload);
  }

  private workloadByKey(wkey: string): { entry: WorkloadKindSpec; workload: Workload | undefined } {
    const [prefix, namespace, name] = wkey.split('/') as [string, string, string];
    const entry = kindByPrefix(prefix)!;
    return { entry, workload: informerFor(this.workloads.get(entry.kind)!, namespace)?.get(namespace, name) };
  }

  /** A config moved: every watched workload of its namespace that references it starts (or extends) a burst. */
  private configChanged(kind: ConfigKind, c: KubeObject): void {
    this.metrics.configVersionSeen();
    // Only the leader acts; a new leader looks at every workload when it starts.
    if (!this.controller.running) return;
    if (!this.o.scope.configIncluded(kind, c.metadata?.labels)) {
      this.metrics.reloadSkipped('ignored_or_not_selected');
      return;
    }
    const namespace = c.metadata?.namespace ?? '';
    const key = configKey(kind, namespace, c.metadata?.name ?? '');
    // Indexed: only the workloads watching this config (and those whose reload patterns might match it).
    for (const wkey of new Set([...(this.watchers.get(key) ?? []), ...this.patternWorkloads])) {
      // Pods use configs of their own namespace only: other namespaces' patterns and selectors need no look.
      if (wkey.split('/')[1] !== namespace) continue;
      const { entry, workload } = this.workloadByKey(wkey);
      if (!workload) continue;
      // A config a selector or pattern matched may have gone (deleted, relabelled): that is a change too.
      const before = this.watching.get(wkey)?.includes(key) ?? false;
      const watched = this.watched(entry.view(workload));
      const now = watched.optIns.length > 0 && watched.keys.includes(key);
      if (!now && !before) continue;
      if (now !== before) this.reindex(wkey, watched);
      if (this.log.enabled('debug')) this.log.debug('config change noticed', { workload: wkey, config: key });
      this.observe(wkey, watched.keys);
    }
  }

  /** A SecretProviderClass's statuses or metadata moved: the workloads watching it start (or extend) a burst. */
  private classChanged(namespace: string, className: string): void {
    this.metrics.configVersionSeen();
    if (!this.controller.running || className === '') return;
    const key = classKey(namespace, className);
    for (const wkey of new Set([...(this.watchers.get(key) ?? []), ...this.patternWorkloads])) {
      const { entry, workload } = this.workloadByKey(wkey);
      if (!workload) continue;
      const view = entry.view(workload);
      const watched = this.watched(view);
      if (watched.optIns.length === 0 || !watched.keys.includes(key)) continue;
      if (this.log.enabled('debug')) this.log.debug('class change noticed', { workload: wkey, config: key });
      const current = this.currentChecksums(watched.keys);
      for (const [k, v] of this.classChecksums(entry, workload, view, watched)) current.set(k, v);
      this.observe(wkey, watched.keys, current);
    }
  }

  /** The classes' checksums as this workload sees them (csichecksum.ts), given its record. */
  private classChecksums(entry: WorkloadKindSpec, w: Workload, view: WorkloadLike, watched: WatchedWithClasses) {
    if (!this.csi || watched.classes.keys.length === 0) return new Map<string, string>();
    const restartAt = (w as { spec?: { restartAt?: unknown } }).spec?.restartAt;
    return this.csi.checksums(
      {
        kind: entry.kind,
        object: view,
        ...(typeof restartAt === 'string' ? { restartAt } : {}),
      },
      watched.classes,
      appliedChecksumsOf(w).checksums,
    );
  }

  private observe(wkey: string, keys: string[], known?: Map<string, string>): void {
    const current = known ?? this.currentChecksums(keys);
    // The debounce measures durations in this process: monotonic clock (decideRestart gets both).
    const state = observeChange(this.pending.get(wkey), this.runtime.clock.monotonic(), current);
    this.pending.set(wkey, state);
    this.metrics.changesWaiting(this.pending.size);
    this.controller.add(wkey);
  }

  /**
   * Checksums of the configs, from the caches. For `legacyKeys` — configs
   * whose applied checksum xing wrote — xing's checksum of the same content
   * too, so taking over from xing rewrites its values instead of restarting
   * everything once.
   */
  private currentChecksums(
    keys: string[],
    legacyKeys: ReadonlySet<string> = new Set(),
    legacyOut?: Map<string, string>,
  ): Map<string, string> {
    const out = new Map<string, string>();
    for (const key of keys) {
      const ref = parseConfigKey(key);
      if (!ref) continue;
      const digest = this.configInformer(ref.kind, ref.namespace)?.get(ref.namespace, ref.name)?.digest;
      out.set(key, digest?.checksum ?? MISSING);
      if (digest && legacyKeys.has(key)) legacyOut?.set(key, digest.legacy);
    }
    return out;
  }

  /**
   * Runs while this replica leads. The operator starts no new term before
   * this one has returned (LeadershipTerms), and the runner keeps a later
   * term's queue and debounce state safe all the same.
   */
  lead(signal: AbortSignal): Promise<void> {
    return this.controller.run(signal);
  }

  /** One workload (`<kind>/<namespace>/<name>`), timed for Reloader's reconcile metrics. */
  async reconcile(wkey: string): Promise<HandlerResult> {
    const started = performance.now();
    try {
      const result = await this.reconcileWorkload(wkey);
      this.metrics.reconciled('success', (performance.now() - started) / 1000);
      return result;
    } catch (error) {
      this.metrics.reconciled('error', (performance.now() - started) / 1000);
      throw error;
    }
  }

  /** Finish earlier writes, decide, write the record (and restart), or wait. */
  private async reconcileWorkload(wkey: string): Promise<HandlerResult> {
    const { entry, workload: w } = this.workloadByKey(wkey);
    if (!w) {
      this.pending.delete(wkey);
      return;
    }
    if (entry.restart === 'recreate-job') {
      const step = recreateStep(w);
      if (step.step !== 'none') return this.continueRecreation(entry, w, step);
    }
    // Deleted (a Job's re-creation is above), or restarted through another object: nothing to restart.
    if (w.metadata?.deletionTimestamp || entry.handledElsewhere(w) !== undefined) {
      this.pending.delete(wkey);
      return;
    }
    const outcome = await this.reconcileConfigs(wkey, entry, w);
    // After a write, the update it makes brings the next look (and the pause's).
    if (outcome.wrote || entry.kind !== 'Deployment') return outcome.result;
    return this.endPause(wkey, entry, w as PausableDeployment, outcome.result);
  }

  /** The restart decision for one workload and its write: `wrote` when something was written. */
  private async reconcileConfigs(
    wkey: string,
    entry: WorkloadKindSpec,
    w: Workload,
  ): Promise<{ wrote: boolean; result: HandlerResult }> {
    const [, namespace, name] = wkey.split('/') as [string, string, string];
    const view = entry.view(w);
    const watched = this.watched(view);
    const applied = appliedChecksumsOf(w);
    const now = this.runtime.clock.monotonic();
    const previousTimestamp = restartTimestampOf(view);
    const { current, legacyCurrent } = this.checksumsNow(entry, w, view, watched, applied.checksums);
    const optedIn = watched.optIns.length > 0;
    const pause = optedIn ? this.pauseOf(view, watched) : { by: [], warnings: [] };
    const decision = decideRestart({
      workload: { kind: entry.kind, namespace, name },
      optedIn: watched.optIns.length > 0,
      applied: applied.checksums,
      current,
      legacyCurrent,
      ...(this.pending.has(wkey) ? { pending: this.pending.get(wkey)! } : {}),
      now,
      wallNow: this.runtime.clock.now(),
      settings: { gracePeriodMs: this.o.gracePeriodMs, maxWaitMs: this.o.maxWaitMs },
      onMissing: this.o.scope,
      paused: pause.by,
      ...(previousTimestamp !== undefined ? { previousTimestamp } : {}),
      ...(w.metadata?.resourceVersion ? { resourceVersion: w.metadata.resourceVersion } : {}),
    });
    this.metrics.workloadsTracked(this.watching.size);
    this.trackPause(wkey, pause, decision.held);
    this.notify(entry, w, [
      ...skipNotices({
        optedIn,
        warnings: [...watched.warnings, ...kindWarnings(entry, w)],
        annotationWarning: applied.warning,
        excluded: watched.excluded,
        // A class no pod of the workload mounts yet is not missing: nothing to compare (csichecksum.ts).
        missing: decision.missing.filter((k) => parseClassKey(k) === undefined),
        optional: watched.configs.filter((c) => c.reference?.optional).map((c) => c.key),
      }),
      ...pauseNotices(pause, decision.held, optedIn),
    ]);
    return this.carryOut(wkey, entry, w, decision, now);
  }

  /**
   * Every checksum the decision compares with the record: the configs' (and,
   * for those xing recorded, xing's checksum of the same content, so taking
   * over rewrites instead of restarting), the classes', and each selector's
   * membership (selectedconfigs.ts: its configs coming and going is a change too).
   */
  private checksumsNow(
    entry: WorkloadKindSpec,
    w: Workload,
    view: WorkloadLike,
    watched: WatchedWithClasses,
    applied: ReadonlyMap<string, string>,
  ): { current: Map<string, string>; legacyCurrent: Map<string, string> } {
    const legacyKeys = new Set(
      [...applied].filter(([, value]) => checksumScheme(value) === 'xing-legacy').map(([key]) => key),
    );
    const legacyCurrent = new Map<string, string>();
    const current = this.currentChecksums(watched.keys, legacyKeys, legacyCurrent);
    for (const [k, v] of this.classChecksums(entry, w, view, watched)) current.set(k, v);
    for (const set of watched.selected) current.set(set.key, set.checksum);
    return { current, legacyCurrent };
  }

  /**
   * Acts on the decision: nothing to write (then the outdated pods of an
   * evicting workload), wait for the burst, or write. A write that lost to
   * a newer version of the workload is decided again at once.
   */
  private async carryOut(
    wkey: string,
    entry: WorkloadKindSpec,
    w: Workload,
    decision: RestartDecision,
    now: number,
  ): Promise<{ wrote: boolean; result: HandlerResult }> {
    if (decision.action === 'nothing') {
      // A change was noticed, but the workload already has it applied.
      if (this.pending.has(wkey)) this.metrics.reloadSkipped('strategy_not_updated');
      this.pending.delete(wkey);
      this.metrics.changesWaiting(this.pending.size);
      return { wrote: false, result: await this.replaceOutdated(entry, w) };
    }
    if (decision.action === 'wait-until') {
      this.pending.set(wkey, decision.pending);
      this.metrics.changesWaiting(this.pending.size);
      return { wrote: false, result: { requeueAfterMs: Math.max(0, decision.until - now) } };
    }
    const written =
      decision.action === 'restart'
        ? // Named by the configs that caused it: a selector's membership entry by the configs that came or went.
          await this.writeRestart(wkey, entry, w, {
            ...decision,
            restartedBy: restartCauses(decision.restartedBy, decision.changes),
          })
        : await this.patchOrConflict(entry, w, decision.patch);
    // The workload changed since we looked: decide again on the new version.
    if (written === 'conflict') return { wrote: false, result: { requeueAfterMs: 0 } };
    this.pending.delete(wkey);
    this.metrics.changesWaiting(this.pending.size);
    if (decision.action === 'update-annotation-only') {
      this.metrics.checksumsApplied(false);
      this.log.info(`recorded config checksums: ${decision.reason}`, { workload: wkey });
      this.runtime.events.event(
        this.ref(entry, w),
        'Normal',
        'ConfigChecksumsRecorded',
        'Restart',
        `${decision.reason} (a first sighting restarts nothing)`,
      );
    }
    return { wrote: true, result: undefined };
  }

  /** The paused gauges' sets. */
  private trackPause(wkey: string, pause: RestartPause, held: readonly string[]): void {
    if (pause.by.length > 0) this.paused.add(wkey);
    else this.paused.delete(wkey);
    if (held.length > 0) this.holding.add(wkey);
    else this.holding.delete(wkey);
  }

  /** A merge patch of the workload; 'conflict' when its resourceVersion precondition failed. */
  private async patchOrConflict(entry: WorkloadKindSpec, w: KubeObject, patch: unknown): Promise<'done' | 'conflict'> {
    try {
      await this.runtime.client.patch(
        entry.type,
        { namespace: w.metadata?.namespace ?? '', name: w.metadata?.name ?? '' },
        'merge',
        patch,
        { timeoutMs: 15_000 },
      );
      return 'done';
    } catch (error) {
      if (isConflict(error)) return 'conflict';
      throw error;
    }
  }

  /**
   * A decided restart: written (or, with -webhook-url, the URL called
   * instead), counted in Reloader's metrics; a failure is reported once per
   * change and thrown, so the runner backs off and tries again.
   */
  private async writeRestart(
    wkey: string,
    entry: WorkloadKindSpec,
    w: Workload,
    decision: Restart,
  ): Promise<'done' | 'conflict'> {
    const namespace = w.metadata?.namespace ?? '';
    const started = performance.now();
    let written: 'done' | 'conflict';
    try {
      written = this.webhook
        ? await this.callWebhook(entry, w, decision)
        : await this.writeRestartOf(wkey, entry, w, decision);
    } catch (error) {
      const seconds = (performance.now() - started) / 1000;
      if (!isConflict(error)) this.restartFailed(entry, w, decision.restartedBy, error, seconds);
      throw error;
    }
    if (written === 'done') {
      this.failing.delete(wkey);
      this.metrics.reloadExecuted(true, namespace);
      this.metrics.reloadAction(entry.kind, 'success', (performance.now() - started) / 1000);
    }
    return written;
  }

  /** A restart write failed: counted each time; the Event and the alert only for the first failure of a change. */
  private restartFailed(entry: WorkloadKindSpec, w: KubeObject, keys: string[], error: unknown, seconds: number): void {
    const wkey = this.keyOf(entry, w);
    this.metrics.reloadExecuted(false, w.metadata?.namespace ?? '');
    this.metrics.reloadAction(entry.kind, 'error', seconds);
    if (this.failing.has(wkey)) return;
    this.failing.add(wkey);
    const message = error instanceof Error ? error.message : String(error);
    this.emit(entry, w, { ...this.outcomeBase(entry, w, keys), result: 'failed', error: message });
    if (!this.webhook) this.alerts?.notify(this.report(entry, w, keys, 'failed', message));
  }

  /**
   * -webhook-url: the URL is called instead of the restart (it throws when
   * the call fails: nothing is recorded, and the runner tries again); once it
   * answered, the checksums are recorded as applied. No resourceVersion
   * precondition on that record: a conflict would call the URL a second time
   * for one change, and the record only concerns the configs.
   */
  private async callWebhook(entry: WorkloadKindSpec, w: Workload, decision: Restart): Promise<'done'> {
    const keys = decision.restartedBy;
    await this.webhook!.call(this.report(entry, w, keys, 'reloaded', ''), { signal: this.runtime.stopping });
    await this.patchOrConflict(entry, w, annotationPatch({ applied: decision.applied }));
    this.metrics.checksumsApplied(false);
    const detail = '; -webhook-url called instead of a restart';
    this.log.info(`${keys.join(', ')} changed: -webhook-url called instead of a restart`, {
      workload: this.keyOf(entry, w),
    });
    this.emit(entry, w, { ...this.outcomeBase(entry, w, keys), result: 'restarted', detail });
    return 'done';
  }

  /** Writes a decided restart as its kind does (restartwrites.ts); 'conflict' when the workload moved first. */
  private async writeRestartOf(
    wkey: string,
    entry: WorkloadKindSpec,
    w: Workload,
    decision: Restart,
  ): Promise<'done' | 'conflict'> {
    const why = decision.restartedBy;
    const plan = planRestartWrite(entry, w, decision, this.runtime.clock.now());
    if (plan.write === 'patch') {
      if ((await this.patchOrConflict(entry, w, plan.patch)) === 'conflict') return 'conflict';
      this.restarted(entry, w, why, plan.note);
      return 'done';
    }
    if (plan.write === 'create-job') {
      try {
        await this.runtime.client.create(JOBS, plan.job, { timeoutMs: 15_000 });
      } catch (error) {
        // Same name = the same restart, started before a crash, conflict or failover: only the record is left.
        if (!isAlreadyExists(error)) throw error;
      }
      if ((await this.patchOrConflict(entry, w, plan.record)) === 'conflict') return 'conflict';
      this.restarted(entry, w, why, plan.note);
      return 'done';
    }
    // A Job: mark it (the intent is then on the Job), then go on at once with the steps that follow.
    let marked: Job;
    try {
      marked = await this.runtime.client.patch<Job>(
        entry.type,
        { namespace: w.metadata?.namespace ?? '', name: w.metadata?.name ?? '' },
        'merge',
        plan.mark,
        { timeoutMs: 15_000 },
      );
    } catch (error) {
      if (isConflict(error)) return 'conflict';
      throw error;
    }
    this.recreating.set(wkey, why);
    this.log.info(`re-creating Job: ${why.join(', ')} changed`, { workload: wkey });
    await this.continueRecreation(entry, marked, recreateStep(marked));
    return 'done';
  }

  /**
   * The steps of a Job's re-creation after its mark (jobrestarts.ts), each
   * read from the Job: delete it (held by our finalizer), then release it
   * and create the cleaned copy. Used right after the mark, and on any later
   * look at a marked Job (after a crash or failover).
   */
  private async continueRecreation(entry: WorkloadKindSpec, job: Job, step: RecreateStep): Promise<HandlerResult> {
    const namespace = job.metadata?.namespace ?? '';
    const name = job.metadata?.name ?? '';
    const wkey = this.keyOf(entry, job);
    if (step.step === 'delete') {
      let deleted: unknown;
      try {
        deleted = await this.runtime.client.delete(
          entry.type,
          { namespace, name },
          { uid: step.uid, propagationPolicy: 'Background', timeoutMs: 15_000 },
        );
      } catch (error) {
        if (isConflict(error) || isNotFound(error)) return { requeueAfterMs: 0 };
        throw error;
      }
      // Held by the finalizer, the answer is the Job being deleted: go on with it.
      const held = deleted as Job;
      if (held?.kind !== 'Job' || !held.metadata?.deletionTimestamp) return;
      step = recreateStep(held);
    }
    if (step.step === 'wait-for-finalizers') {
      this.log.info(`waiting for finalizers ${step.others.join(', ')} before re-creating the Job`, { workload: wkey });
      return { requeueAfterMs: 5000 };
    }
    if (step.step !== 'release-and-create') return;
    try {
      await this.runtime.client.patch(entry.type, { namespace, name }, 'merge', step.release, { timeoutMs: 15_000 });
    } catch (error) {
      if (isConflict(error)) return { requeueAfterMs: 0 };
      throw error;
    }
    const why = this.recreating.get(wkey) ?? [];
    this.recreating.delete(wkey);
    let created: Job;
    try {
      created = await this.createReleasedJob(step.job, wkey);
    } catch (error) {
      // The old Job is gone now: nothing is left to retry from (docs/restarts.md, Jobs), so say so plainly.
      const message = `re-creating Job ${name} failed after the old one was deleted, it is not re-created: ${error instanceof Error ? error.message : String(error)}`;
      this.log.error(message, { workload: wkey });
      this.runtime.events.event(this.ref(entry, job), 'Warning', 'ConfigChanged', 'Restart', message);
      return;
    }
    this.restarted(entry, created, why, `re-created Job ${name}`);
  }

  /**
   * Creates the released Job's copy. From here the manifest lives only in
   * this process, so a failure a retry can mend (the connection dropped, the
   * API server restarting, a 429 or 5xx) is retried with back-off for up to
   * two minutes instead of losing the Job (found by the soak's review: one
   * reset at this moment lost it). A copy already there (our own earlier
   * attempt whose answer was lost) is the Job; a refusal (another 4xx) ends it.
   */
  private async createReleasedJob(manifest: Job, wkey: string): Promise<Job> {
    const start = this.runtime.clock.monotonic();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.runtime.client.create<Job>(JOBS, manifest, { timeoutMs: 15_000 });
      } catch (error) {
        if (isAlreadyExists(error)) {
          const { namespace = '', name = '' } = manifest.metadata ?? {};
          return await this.runtime.client.get<Job>(JOBS, { namespace, name }, { timeoutMs: 15_000 });
        }
        if (!isRetryable(error) || this.runtime.clock.monotonic() - start > RECREATE_RETRY_MS) throw error;
        const delay = backoffDelay(attempt, { initialMs: 500, maxMs: 10_000, spread: 0.2 });
        this.log.warn('re-creating a Job failed; retrying', {
          workload: wkey,
          err: error instanceof Error ? error.message : String(error),
          retryInMs: Math.round(delay),
        });
        await this.runtime.clock.sleep(delay, this.runtime.stopping);
      }
    }
  }

  /**
   * The one place a restart is reported as done: the metric, the log, the
   * Event (ConfigChanged, or Reloader's Reloaded) and the alert. `keys`: the
   * configs whose change caused it.
   */
  private restarted(entry: WorkloadKindSpec, w: KubeObject, keys: string[], note: string): void {
    const why = keys.join(', ') || 'the configuration';
    const wkey = this.keyOf(entry, w);
    const [, namespace, name] = wkey.split('/') as [string, string, string];
    this.metrics.checksumsApplied(true);
    const mode = restartMode(entry.kind, w);
    const how =
      mode.mode === 'rollout-group'
        ? `; its rollout group rolls it zone by zone`
        : mode.mode === 'standalone-ondelete'
          ? `; OnDelete: pods take the new template only when deleted`
          : note !== ''
            ? `; ${note}`
            : '';
    this.log.info(`restarted: ${why} changed${how}`, { workload: wkey });
    this.emit(entry, w, { ...this.outcomeBase(entry, w, keys), result: 'restarted', detail: how });
    this.alerts?.notify(this.report(entry, w, keys, 'reloaded', note));
    if (mode.mode === 'standalone-ondelete') {
      // Every pod runs the old template now.
      const notice = onDeleteEvent({ kind: entry.kind, namespace, name }, this.podsOf(w).length, this.evicts(entry, w));
      this.runtime.events.event(this.ref(entry, w), notice.type, notice.reason, 'Restart', notice.message);
    }
  }

  /** A restart's outcome without its result: the workload and the configs (`keys`) that caused it. */
  private outcomeBase(entry: WorkloadKindSpec, w: KubeObject, keys: readonly string[]) {
    const configs = keys.flatMap((key) => {
      const ref = parseConfigKey(key);
      return ref ? [{ kind: ref.kind, name: ref.name }] : [];
    });
    const workload = { kind: entry.kind, namespace: w.metadata?.namespace ?? '', name: w.metadata?.name ?? '' };
    return { workload, configs };
  }

  /** The Events of a restart's outcome, in Stateward's or Reloader's reasons (reloaderevents.ts). */
  private emit(entry: WorkloadKindSpec, w: KubeObject, outcome: RestartOutcome): void {
    for (const e of restartEvents(outcome, this.o.eventReasons))
      this.runtime.events.event(this.ref(entry, w), e.type, e.reason, 'Restart', e.message);
  }

  private report(
    entry: WorkloadKindSpec,
    w: KubeObject,
    configs: readonly string[],
    outcome: ReloadReport['outcome'],
    message: string,
  ): ReloadReport {
    const { namespace, name } = this.outcomeBase(entry, w, []).workload;
    return { kind: entry.kind, namespace, name, configs, outcome, message, at: this.runtime.clock.now() };
  }

  /** Runs on every replica until shutdown, then sends what alerts are queued (bounded) and closes connections. */
  async serve(signal: AbortSignal): Promise<void> {
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    await this.alerts?.stop();
    await this.webhook?.close();
  }

  /** A Deployment paused by a restart: resume it once its pause-period has passed, or look again then. */
  private async endPause(
    wkey: string,
    entry: WorkloadKindSpec,
    w: PausableDeployment,
    result: HandlerResult,
  ): Promise<HandlerResult> {
    const wallNow = this.runtime.clock.now();
    const pause = pauseDecision(w, wallNow);
    if (pause.action === 'none') return result;
    if (pause.action === 'wait') {
      const after = Math.max(0, pause.untilWall - wallNow);
      const other = result && 'requeueAfterMs' in result ? result.requeueAfterMs : undefined;
      return { requeueAfterMs: other === undefined ? after : Math.min(other, after) };
    }
    if ((await this.patchOrConflict(entry, w, pause.patch)) === 'conflict') return { requeueAfterMs: 0 };
    this.log.info(pause.reason, { workload: wkey });
    this.runtime.events.event(this.ref(entry, w), 'Normal', 'ConfigChanged', 'Resume', pause.reason);
    return result;
  }

  private podsOf(w: KubeObject): Pod[] {
    const namespace = w.metadata?.namespace ?? '';
    return informerFor(this.pods, namespace)?.byIndex(INDEX.podsByOwner, w.metadata?.uid ?? '') ?? [];
  }

  /** Opted in to having a standalone OnDelete StatefulSet's or DaemonSet's outdated pods evicted one at a time. */
  private evicts(entry: WorkloadKindSpec, w: KubeObject): boolean {
    // Reloader's install reads no pods: nothing to evict one at a time.
    if (this.o.reloaderInstall) return false;
    const kind = entry.kind;
    return (
      (kind === 'StatefulSet' || kind === 'DaemonSet') &&
      w.metadata?.annotations?.[EVICT_ONDELETE_ANNOTATION] === 'evict' &&
      restartMode(kind, w).mode === 'standalone-ondelete'
    );
  }

  /**
   * A standalone OnDelete StatefulSet or DaemonSet that opted in: evict its next outdated
   * pod through the Eviction API (PDBs hold; a 429 waits), one at a time,
   * each only once the updated ones are Ready. Pod and StatefulSet events
   * bring the next step.
   */
  private async replaceOutdated(entry: WorkloadKindSpec, w: Workload): Promise<void | { requeueAfterMs: number }> {
    if (!this.evicts(entry, w)) return;
    const target = updateTarget(entry.kind, w as OnDeleteWorkload);
    const pods = this.podsOf(w);
    const wkey = `${entry.prefix}/${w.metadata?.namespace}/${w.metadata?.name}`;
    // Our last eviction may not show in the cache yet: until its pod is seen going, it still counts as up.
    const last = this.evicted.get(wkey);
    if (last && pods.some((p) => p.metadata?.uid === last && !p.metadata.deletionTimestamp)) return;
    const step = nextOutdatedPod(pods, target.revision, target.replicas, target.revisionLabel);
    if (step.action !== 'evict') return;
    const namespace = w.metadata?.namespace ?? '';
    const pod = pods.find((p) => p.metadata?.name === step.pod);
    try {
      await this.runtime.client.request('POST', `/api/v1/namespaces/${namespace}/pods/${step.pod}/eviction`, {
        body: {
          apiVersion: 'policy/v1',
          kind: 'Eviction',
          metadata: { name: step.pod, namespace },
          deleteOptions: { preconditions: { uid: pod?.metadata?.uid } },
        },
        timeoutMs: 15_000,
      });
    } catch (error) {
      // A disruption budget said not now, or the pod changed: try again shortly.
      if (error instanceof KubeApiError && (error.code === 429 || error.code === 409 || error.code === 404))
        return { requeueAfterMs: 5000 };
      throw error;
    }
    this.evicted.set(wkey, pod?.metadata?.uid ?? '');
    const message = `evicted pod ${step.pod} to apply the new configuration (${step.outdated} outdated before it)`;
    this.log.info(message, { workload: `${entry.prefix}/${namespace}/${w.metadata?.name}` });
    this.runtime.events.event(this.ref(entry, w), 'Normal', 'EvictingOutdatedPod', 'Restart', message, {
      apiVersion: 'v1',
      kind: 'Pod',
      namespace,
      name: step.pod,
      uid: pod?.metadata?.uid ?? '',
    });
  }

  private ref(entry: WorkloadKindSpec, w: KubeObject) {
    return {
      apiVersion: eventApiVersion(entry),
      kind: entry.kind,
      namespace: w.metadata?.namespace,
      name: w.metadata?.name ?? '',
      uid: w.metadata?.uid ?? '',
    };
  }

  /**
   * Each skip reason and warning once per workload while it lasts: every
   * status update of the workload reconciles it, and the same Event each time
   * would bury the ones that matter.
   */
  private notify(entry: WorkloadKindSpec, w: KubeObject, notices: readonly Notice[]): void {
    const wkey = `${entry.prefix}/${w.metadata?.namespace}/${w.metadata?.name}`;
    const before = this.noticed.get(wkey) ?? new Set<string>();
    const now = new Set<string>();
    for (const notice of notices) {
      const id = `${notice.reason}\n${notice.message}`;
      now.add(id);
      if (before.has(id)) continue;
      if (notice.type === 'Warning') this.log.warn(notice.message, { workload: wkey });
      else this.log.info(notice.message, { workload: wkey });
      this.runtime.events.event(this.ref(entry, w), notice.type, notice.reason, 'Restart', notice.message);
    }
    if (now.size > 0) this.noticed.set(wkey, now);
    else this.noticed.delete(wkey);
  }
}

/**
 * One kind's workload caches. StatefulSets: the cache the rollout capability
 * shares (with its indexers), `sharedStatefulSets`. Kinds out of scope: no
 * informer. Reloader's install: polled, nothing shared.
 */
function workloadInformers(
  runtime: Runtime,
  options: RestartOptions,
  spec: WorkloadKindSpec,
  sharedStatefulSets: Informer<StatefulSet>[],
): Informer<Workload>[] {
  const install = options.reloaderInstall;
  if (!options.scope.workloadKindIncluded(spec.kind)) return [];
  if (install)
    return runtime.informers<Workload>(spec.type, {
      poll: { intervalMs: install.pollIntervalMs },
      ...(spec.optional ? { optional: true } : {}),
    });
  if (spec.kind === 'StatefulSet') return sharedStatefulSets as Informer<Workload>[];
  return runtime.informers<Workload>(spec.type, spec.optional ? { optional: true } : {});
}

/**
 * One config kind's caches, digests only: Secret values never enter a cache.
 * Pages of 2,000: each page is hashed and dropped as it arrives, so a larger
 * page costs only transient memory, and 7,000 configs list in 4 requests
 * instead of 16 (each one waits its turn at the client rate limit, 5/s by
 * default). Reloader's --resources-to-ignore starts no informer for that
 * kind; its --resource-label-selector selects on the server, so the rest is
 * never hashed.
 */
function configInformers(
  runtime: Runtime,
  scope: RestartScope,
  key: Buffer,
  kind: ConfigKind,
): Informer<ConfigDigest>[] {
  return scope.configKindWatched(kind)
    ? runtime.informers<ConfigDigest>(kind === 'configmap' ? resources.configMaps : resources.secrets, {
        transform: configDigester(key, kind),
        pageSize: CONFIG_PAGE_SIZE,
        ...(scope.configSelectorText !== '' ? { labelSelector: scope.configSelectorText } : {}),
      })
    : [];
}

/**
 * Whether Namespaces can be read for their pause annotation: cluster-wide
 * only. A listed-namespaces install runs on Roles, which cannot list or
 * watch a cluster-scoped kind, and Reloader's install keeps to Reloader's
 * RBAC; there the pause is read from workloads and configs only
 * (docs/restarts.md).
 */
function namespacePauseReadable(runtime: Runtime, options: RestartOptions): boolean {
  return options.reloaderInstall === undefined && runtime.config.watchNamespaces.includes('*');
}

/** The paused workloads, read when scraped: Stateward's own names (README, Metrics). */
function pauseGauges(runtime: Runtime, paused: ReadonlySet<string>, holding: ReadonlySet<string>): void {
  new Gauge({
    name: 'stateward_config_restart_paused_workloads',
    help: 'Opted-in workloads whose config restarts are paused (stateward.dev/config-restart-paused on the workload, its namespace or a config it watches); on the leader.',
    registers: [runtime.registry],
    collect() {
      this.set(paused.size);
    },
  });
  new Gauge({
    name: 'stateward_config_restart_held_workloads',
    help: 'Paused workloads with a config change held: each restarts once when its pause is lifted; on the leader.',
    registers: [runtime.registry],
    collect() {
      this.set(holding.size);
    },
  });
}

export function restartsCapability(
  options: () => RestartOptions,
  csi: () => CsiOptions = () => ({ enabled: false }),
): Capability {
  return {
    name: 'config-restarts',
    async setup(runtime) {
      const o = options();
      if (!o.enabled) return {};
      // Before the config caches exist: their transform hashes with it.
      const key = await ensureChecksumKey(runtime.client, runtime.config.namespace, o.checksumKeySecret, {
        signal: runtime.stopping,
        clock: runtime.clock,
        log: runtime.logger,
      });
      const controller = new RestartController(runtime, o, key, csi());
      return { lead: (signal) => controller.lead(signal), serve: (signal) => controller.serve(signal) };
    },
  };
}
