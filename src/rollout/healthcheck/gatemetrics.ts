// rollout-operator's health-check metrics (PR #469), same names and labels,
// plus Stateward's last-value gauge that status pages and alerts can read.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Outcome } from './verdict.ts';

export class HealthCheckMetrics {
  readonly observed: Counter;
  private readonly evaluations: Counter;
  private readonly blocked: Gauge;
  private readonly misconfiguredTotal: Counter;
  private readonly misconfigured: Gauge;
  private readonly queryDuration: Histogram;
  private readonly lastValue: Gauge;

  constructor(registry: Registry) {
    this.observed = new Counter({
      name: 'rollout_operator_health_check_configurations_observed_total',
      help: 'Total number of RolloutHealthCheck configurations observed (added or changed).',
      registers: [registry],
    });
    this.evaluations = new Counter({
      name: 'rollout_operator_health_check_evaluations_total',
      help: 'Total number of health check evaluations, by rollout group, check and result.',
      labelNames: ['rollout_group', 'check', 'result'],
      registers: [registry],
    });
    this.blocked = new Gauge({
      name: 'rollout_operator_health_check_blocked',
      help: 'Whether a rollout group is held by a failing health check (1) or not (0).',
      labelNames: ['rollout_group'],
      registers: [registry],
    });
    this.misconfiguredTotal = new Counter({
      name: 'rollout_operator_health_check_misconfigured_total',
      help: 'Total number of times a health check binding was found misconfigured.',
      labelNames: ['rollout_group'],
      registers: [registry],
    });
    this.misconfigured = new Gauge({
      name: 'rollout_operator_health_check_misconfigured',
      help: 'Whether a rollout group has a misconfigured health check binding (1) or not (0).',
      labelNames: ['rollout_group'],
      registers: [registry],
    });
    this.queryDuration = new Histogram({
      name: 'rollout_operator_health_check_query_duration_seconds',
      help: 'Time spent on one Prometheus query of a health check, retries included.',
      labelNames: ['rollout_group', 'check'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    this.lastValue = new Gauge({
      name: 'stateward_health_check_last_value',
      help: 'The last value a health check query returned, by rollout group, check and side (current or baseline).',
      labelNames: ['rollout_group', 'check', 'side'],
      registers: [registry],
    });
  }

  evaluated(group: string, check: string, result: Outcome, current?: number, baseline?: number): void {
    this.evaluations.inc({ rollout_group: group, check, result });
    if (current !== undefined) this.lastValue.set({ rollout_group: group, check, side: 'current' }, current);
    if (baseline !== undefined) this.lastValue.set({ rollout_group: group, check, side: 'baseline' }, baseline);
  }

  queried(group: string, check: string, seconds: number): void {
    this.queryDuration.observe({ rollout_group: group, check }, seconds);
  }

  setBlocked(group: string, blocked: boolean): void {
    this.blocked.set({ rollout_group: group }, blocked ? 1 : 0);
  }

  setMisconfigured(group: string, misconfigured: boolean, counted: boolean): void {
    if (counted) this.misconfiguredTotal.inc({ rollout_group: group });
    this.misconfigured.set({ rollout_group: group }, misconfigured ? 1 : 0);
  }

  /** Drops a group's series when it is gone, as the rollout metrics do. */
  forget(group: string): void {
    for (const gauge of [this.blocked, this.misconfigured]) gauge.remove({ rollout_group: group });
  }
}
