// xing's and Reloader's metrics as the registry exports them (src/restarts/restartmetrics.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { RestartMetrics } from '../../src/restarts/restartmetrics.ts';

/** The exposition's sample lines (no HELP/TYPE), for exact assertions. */
async function samples(registry: Registry): Promise<string[]> {
  return (await registry.metrics()).split('\n').filter((l) => l !== '' && !l.startsWith('#'));
}

function metrics(options: { countByNamespace?: boolean } = {}) {
  const registry = new Registry();
  return { registry, m: new RestartMetrics(registry, () => 3, options) };
}

describe('RestartMetrics: Reloader', () => {
  it('reloader_reload_executed_total starts with both series at 0, as Reloader', async () => {
    const { registry } = metrics();
    const lines = await samples(registry);
    assert.ok(lines.includes('reloader_reload_executed_total{success="true"} 0'));
    assert.ok(lines.includes('reloader_reload_executed_total{success="false"} 0'));
    assert.ok(!lines.some((l) => l.startsWith('reloader_reload_executed_total_by_namespace')));
  });

  it('reloads count by success, and by namespace only when enabled', async () => {
    const off = metrics();
    off.m.reloadExecuted(true, 'shop');
    off.m.reloadExecuted(false, 'shop');
    off.m.reloadExecuted(true, 'shop');
    const offLines = await samples(off.registry);
    assert.ok(offLines.includes('reloader_reload_executed_total{success="true"} 2'));
    assert.ok(offLines.includes('reloader_reload_executed_total{success="false"} 1'));
    assert.ok(!(await off.registry.metrics()).includes('by_namespace'));

    const on = metrics({ countByNamespace: true });
    on.m.reloadExecuted(true, 'shop');
    on.m.reloadExecuted(false, 'db');
    const onLines = await samples(on.registry);
    assert.ok(onLines.includes('reloader_reload_executed_total_by_namespace{success="true",namespace="shop"} 1'));
    assert.ok(onLines.includes('reloader_reload_executed_total_by_namespace{success="false",namespace="db"} 1'));
  });

  it('actions count by kind and result; their latency by kind', async () => {
    const { registry, m } = metrics();
    m.reloadAction('Deployment', 'success', 0.2);
    m.reloadAction('Deployment', 'error', 3);
    m.reloadAction('CronJob', 'success', 0.02);
    const lines = await samples(registry);
    assert.ok(lines.includes('reloader_action_total{workload_kind="Deployment",result="success"} 1'));
    assert.ok(lines.includes('reloader_action_total{workload_kind="Deployment",result="error"} 1'));
    assert.ok(lines.includes('reloader_action_total{workload_kind="CronJob",result="success"} 1'));
    assert.ok(lines.includes('reloader_action_latency_seconds_count{workload_kind="Deployment"} 2'));
    assert.ok(lines.includes('reloader_action_latency_seconds_bucket{le="0.25",workload_kind="Deployment"} 1'));
    assert.ok(lines.includes('reloader_action_latency_seconds_bucket{le="0.05",workload_kind="CronJob"} 1'));
    assert.ok(lines.includes('reloader_action_latency_seconds_bucket{le="60",workload_kind="Deployment"} 2'));
  });

  it('skips count by reason; reconciles by result with their duration', async () => {
    const { registry, m } = metrics();
    m.reloadSkipped('no_data_change');
    m.reloadSkipped('no_data_change');
    m.reloadSkipped('ignored_or_not_selected');
    m.reconciled('success', 0.004);
    m.reconciled('error', 0.5);
    const lines = await samples(registry);
    assert.ok(lines.includes('reloader_skipped_total{reason="no_data_change"} 2'));
    assert.ok(lines.includes('reloader_skipped_total{reason="ignored_or_not_selected"} 1'));
    assert.ok(lines.includes('reloader_reconcile_total{result="success"} 1'));
    assert.ok(lines.includes('reloader_reconcile_total{result="error"} 1'));
    assert.ok(lines.includes('reloader_reconcile_duration_seconds_bucket{le="0.005",result="success"} 1'));
    assert.ok(lines.includes('reloader_reconcile_duration_seconds_sum{result="error"} 0.5'));
  });

  it("the types are Reloader's: counters and histograms", async () => {
    const { registry } = metrics({ countByNamespace: true });
    const text = await registry.metrics();
    for (const [name, type] of [
      ['reloader_reload_executed_total', 'counter'],
      ['reloader_reload_executed_total_by_namespace', 'counter'],
      ['reloader_reconcile_total', 'counter'],
      ['reloader_reconcile_duration_seconds', 'histogram'],
      ['reloader_action_total', 'counter'],
      ['reloader_action_latency_seconds', 'histogram'],
      ['reloader_skipped_total', 'counter'],
    ]) {
      assert.ok(text.includes(`# TYPE ${name} ${type}\n`), name);
    }
  });
});

describe("RestartMetrics: xing's, unchanged beside Reloader's", () => {
  it('a restart moves xing counters; the tracked-configs gauge is read at scrape time', async () => {
    const { registry, m } = metrics();
    m.configVersionSeen();
    m.checksumsApplied(true);
    m.checksumsApplied(false);
    m.workloadsTracked(4);
    m.changesWaiting(2);
    const lines = await samples(registry);
    for (const line of [
      'deployment_restart_controller_resource_versions_total 1',
      'deployment_restart_controller_configs_total 3',
      'deployment_restart_controller_deployments_total 4',
      'deployment_restart_controller_deployment_annotation_updates_total 2',
      'deployment_restart_controller_deployment_restarts_total 1',
      'deployment_restart_controller_changes_processed_total 2',
      'deployment_restart_controller_changes_waiting_total 2',
    ]) {
      assert.ok(lines.includes(line), line);
    }
    m.leadershipEnded();
    const after = await samples(registry);
    assert.ok(after.includes('deployment_restart_controller_changes_waiting_total 0'));
    assert.ok(after.includes('deployment_restart_controller_deployments_total 0'));
  });
});
