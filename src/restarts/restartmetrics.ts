// xing's restart-controller metrics, same names, help texts and types (its
// "deployment" names cover StatefulSets and DaemonSets too), and beside them
// Reloader's reloader_* ones (names, labels, help texts and buckets as
// Reloader's), so dashboards and alerts written for either keep working. The
// controller says what happened; this module knows which series that moves.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export interface RestartMetricsOptions {
  /** Reloader's METRICS_COUNT_BY_NAMESPACE=enabled: export reloader_reload_executed_total_by_namespace. */
  countByNamespace?: boolean;
}

/** Reloader's reloader_skipped_total reasons. */
export type ReloaderSkipReason = 'no_data_change' | 'strategy_not_updated' | 'ignored_or_not_selected';

export class RestartMetrics {
  private readonly versions: Counter;
  private readonly configs: Gauge;
  private readonly workloads: Gauge;
  private readonly annotationUpdates: Counter;
  private readonly restarts: Counter;
  private readonly processed: Counter;
  private readonly waiting: Gauge;
  private readonly reloader: ReloaderMetrics;

  /** `trackedConfigs`: how many ConfigMaps and Secrets are tracked, read at each scrape. */
  constructor(registry: Registry, trackedConfigs: () => number, options: RestartMetricsOptions = {}) {
    this.reloader = reloaderMetrics(registry, options.countByNamespace ?? false);
    this.versions = new Counter({
      name: 'deployment_restart_controller_resource_versions_total',
      help: 'The number of distinct resource versions observed.',
      registers: [registry],
    });
    // xing counts its whole catalog: every ConfigMap and Secret it watches.
    this.configs = new Gauge({
      name: 'deployment_restart_controller_configs_total',
      help: 'The number of tracked configs.',
      registers: [registry],
      collect: () => this.configs.set(trackedConfigs()),
    });
    this.workloads = new Gauge({
      name: 'deployment_restart_controller_deployments_total',
      help: 'The number of tracked deployments.',
      registers: [registry],
    });
    this.annotationUpdates = new Counter({
      name: 'deployment_restart_controller_deployment_annotation_updates_total',
      help: 'The number of deployment annotation updates.',
      registers: [registry],
    });
    this.restarts = new Counter({
      name: 'deployment_restart_controller_deployment_restarts_total',
      help: 'The number of deployment restarts triggered.',
      registers: [registry],
    });
    this.processed = new Counter({
      name: 'deployment_restart_controller_changes_processed_total',
      help: 'The number of resource changes processed.',
      registers: [registry],
    });
    this.waiting = new Gauge({
      name: 'deployment_restart_controller_changes_waiting_total',
      help: 'The number of changes waiting in the queue.',
      registers: [registry],
    });
  }

  /** A ConfigMap or Secret version came through the watch (or a LIST), on every replica. */
  configVersionSeen(): void {
    this.versions.inc();
  }

  /** How many workloads have a change waiting (debounced or not yet applied). */
  changesWaiting(count: number): void {
    this.waiting.set(count);
  }

  /** How many opted-in workloads watch at least one config. */
  workloadsTracked(count: number): void {
    this.workloads.set(count);
  }

  /** The checksum annotation of a workload was written: a restart if `restarted`, else a first sighting recorded. */
  checksumsApplied(restarted: boolean): void {
    this.processed.inc();
    this.annotationUpdates.inc();
    if (restarted) this.restarts.inc();
  }

  /**
   * A restart was written (`success`) or its write failed, in `namespace`
   * (reloader_reload_executed_total, and _by_namespace when enabled).
   */
  reloadExecuted(success: boolean, namespace: string): void {
    const label = success ? 'true' : 'false';
    this.reloader.executed.inc({ success: label });
    this.reloader.byNamespace?.inc({ success: label, namespace });
  }

  /** One restart write of a workload kind (`Deployment`, `CronJob`, …): its result and how long it took. */
  reloadAction(workloadKind: string, result: 'success' | 'error', latencySeconds: number): void {
    this.reloader.actions.inc({ workload_kind: workloadKind, result });
    this.reloader.actionLatency.observe({ workload_kind: workloadKind }, latencySeconds);
  }

  /** Something that could have restarted did not, for one of Reloader's reasons. */
  reloadSkipped(reason: ReloaderSkipReason): void {
    this.reloader.skipped.inc({ reason });
  }

  /** One reconcile of a workload ended: `error` when it threw (and is retried). */
  reconciled(result: 'success' | 'error', durationSeconds: number): void {
    this.reloader.reconciles.inc({ result });
    this.reloader.reconcileDuration.observe({ result }, durationSeconds);
  }

  /** A standby tracks nothing: its gauges must not keep the last leader-time values. */
  leadershipEnded(): void {
    this.waiting.set(0);
    this.workloads.set(0);
  }
}

interface ReloaderMetrics {
  executed: Counter<'success'>;
  byNamespace: Counter<'success' | 'namespace'> | undefined;
  reconciles: Counter<'result'>;
  reconcileDuration: Histogram<'result'>;
  actions: Counter<'workload_kind' | 'result'>;
  actionLatency: Histogram<'workload_kind'>;
  skipped: Counter<'reason'>;
}

/** Reloader's metrics that have a meaning here, as Reloader registers them. */
function reloaderMetrics(registry: Registry, countByNamespace: boolean): ReloaderMetrics {
  const registers = [registry];
  const executed = new Counter({
    name: 'reloader_reload_executed_total',
    help: 'Counter of reloads executed by Reloader.',
    labelNames: ['success'],
    registers,
  });
  // Reloader starts both series at 0, so rate() and absent() alerts see them before the first reload.
  executed.inc({ success: 'true' }, 0);
  executed.inc({ success: 'false' }, 0);
  return {
    executed,
    byNamespace: countByNamespace
      ? new Counter({
          name: 'reloader_reload_executed_total_by_namespace',
          help: 'Counter of reloads executed by Reloader by namespace.',
          labelNames: ['success', 'namespace'],
          registers,
        })
      : undefined,
    reconciles: new Counter({
      name: 'reloader_reconcile_total',
      help: 'Total number of reconcile/handler invocations by result.',
      labelNames: ['result'],
      registers,
    }),
    reconcileDuration: new Histogram({
      name: 'reloader_reconcile_duration_seconds',
      help: 'Time spent in reconcile/handler in seconds.',
      labelNames: ['result'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    actions: new Counter({
      name: 'reloader_action_total',
      help: 'Total number of reload actions by workload kind and result.',
      labelNames: ['workload_kind', 'result'],
      registers,
    }),
    actionLatency: new Histogram({
      name: 'reloader_action_latency_seconds',
      help: 'Time from event received to action applied in seconds.',
      labelNames: ['workload_kind'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    skipped: new Counter({
      name: 'reloader_skipped_total',
      help: 'Total number of skipped operations by reason.',
      labelNames: ['reason'],
      registers,
    }),
  };
}
