// rollout-operator's group reconcile metrics, same names, types and labels,
// plus Stateward's own. Series of groups that disappear are deleted.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { DeletionReason } from './planner.ts';

/** How a settled group's resyncs are counted: one per interval, on the monotonic clock. */
export interface ResyncAccounting {
  intervalMs: number;
  /** Milliseconds, monotonic. */
  monotonic: () => number;
  /** Milliseconds since the epoch, for the last-success timestamp. */
  now: () => number;
}

export class RolloutMetrics {
  private readonly reconciles: Counter;
  private readonly failed: Counter;
  private readonly duration: Histogram;
  private readonly lastSuccess: Gauge;
  private readonly deleted: Counter;
  private readonly blocked: Gauge;
  private readonly known = new Set<string>();
  private readonly accounting: ResyncAccounting;
  /**
   * Settled groups (resync.ts): group → when (monotonic) their last resync was
   * counted. Their resyncs decide nothing and are not even scheduled; each
   * interval that passed counts as one successful reconcile when the metrics
   * are read, so what a scrape sees is what counting each one as it came
   * would have shown.
   */
  private readonly settled = new Map<string, number>();

  constructor(registry: Registry, accounting: ResyncAccounting = DEFAULT_ACCOUNTING) {
    this.accounting = accounting;
    const labelNames = ['rollout_group'];
    const collect = () => this.countSettledResyncs();
    this.reconciles = new Counter({
      name: 'rollout_operator_group_reconciles_total',
      help: 'Total number of reconciles started for a specific rollout group.',
      labelNames,
      collect,
      registers: [registry],
    });
    this.failed = new Counter({
      name: 'rollout_operator_group_reconciles_failed_total',
      help: 'Total number of reconciles failed for a specific rollout group.',
      labelNames,
      registers: [registry],
    });
    // Prometheus' default buckets, as rollout-operator's histogram uses.
    this.duration = new Histogram({
      name: 'rollout_operator_group_reconcile_duration_seconds',
      help: 'Total time spent running a reconcile for a specific rollout group.',
      labelNames,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
      collect,
    });
    this.lastSuccess = new Gauge({
      name: 'rollout_operator_last_successful_group_reconcile_timestamp_seconds',
      help: 'Time of the last successful reconcile for a specific rollout group.',
      labelNames,
      collect,
      registers: [registry],
    });
    this.deleted = new Counter({
      name: 'stateward_rollout_pods_deleted_total',
      help: 'Pods deleted to roll them to their update revision.',
      labelNames: ['rollout_group', 'reason'],
      registers: [registry],
    });
    this.blocked = new Gauge({
      name: 'stateward_rollout_group_blocked',
      help: '1 while a rollout group is skipped because one of its StatefulSets is not OnDelete.',
      labelNames,
      registers: [registry],
    });
  }

  /** Starts a reconcile; call the returned function with its outcome. */
  begin(group: string): (outcome: 'success' | 'failure') => void {
    this.known.add(group);
    const labels = { rollout_group: group };
    this.reconciles.inc(labels);
    // Touch the series so they exist from the first reconcile, as rollout-operator does.
    this.failed.inc(labels, 0);
    const stop = this.duration.startTimer(labels);
    return (outcome) => {
      stop();
      if (outcome === 'failure') this.failed.inc(labels);
      else this.lastSuccess.set(labels, Date.now() / 1000);
    };
  }

  /** The group settled just now, right after a successful reconcile: its resyncs are counted from here on. */
  settle(group: string): void {
    if (this.known.has(group)) this.settled.set(group, this.accounting.monotonic());
  }

  /** The group is no longer settled: its resyncs up to now are counted, and from now on counted as they run. */
  unsettle(group: string): void {
    this.countSettledResyncs(group);
    this.settled.delete(group);
  }

  private countSettledResyncs(only?: string): void {
    const { intervalMs, monotonic, now } = this.accounting;
    if (this.settled.size === 0 || intervalMs <= 0) return;
    const at = monotonic();
    for (const [group, since] of this.settled) {
      if (only !== undefined && group !== only) continue;
      const due = Math.floor((at - since) / intervalMs);
      if (due <= 0) continue;
      const counted = since + due * intervalMs;
      this.settled.set(group, counted);
      const labels = { rollout_group: group };
      this.reconciles.inc(labels, due);
      for (let i = 0; i < due; i++) this.duration.observe(labels, 0);
      this.lastSuccess.set(labels, (now() - (at - counted)) / 1000);
    }
  }

  podDeleted(group: string, reason: DeletionReason): void {
    this.deleted.inc({ rollout_group: group, reason });
  }

  setBlocked(group: string, blocked: boolean): void {
    this.blocked.set({ rollout_group: group }, blocked ? 1 : 0);
  }

  /** Deletes every series of a group that no longer exists. */
  forget(group: string): void {
    this.settled.delete(group);
    if (!this.known.delete(group)) return;
    const labels = { rollout_group: group };
    for (const metric of [this.reconciles, this.failed, this.duration, this.lastSuccess, this.blocked])
      metric.remove(labels);
    for (const reason of ['update', 'replace-unavailable'] as const)
      this.deleted.remove({ rollout_group: group, reason });
  }
}

const DEFAULT_ACCOUNTING: ResyncAccounting = {
  intervalMs: 5_000,
  monotonic: () => performance.now(),
  now: () => Date.now(),
};
