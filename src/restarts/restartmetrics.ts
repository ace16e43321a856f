// xing's restart-controller metrics, same names, help texts and types (its
// "deployment" names cover StatefulSets and DaemonSets too), so dashboards
// and alerts written for xing keep working. The controller says what
// happened; this module knows which series that moves.
import { Counter, Gauge, type Registry } from 'prom-client';

export class RestartMetrics {
  private readonly versions: Counter;
  private readonly configs: Gauge;
  private readonly workloads: Gauge;
  private readonly annotationUpdates: Counter;
  private readonly restarts: Counter;
  private readonly processed: Counter;
  private readonly waiting: Gauge;

  /** `trackedConfigs`: how many ConfigMaps and Secrets are tracked, read at each scrape. */
  constructor(registry: Registry, trackedConfigs: () => number) {
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

  /** A standby tracks nothing: its gauges must not keep the last leader-time values. */
  leadershipEnded(): void {
    this.waiting.set(0);
    this.workloads.set(0);
  }
}
