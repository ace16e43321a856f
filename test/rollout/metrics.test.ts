import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { RolloutMetrics } from '../../src/rollout/metrics.ts';

describe('rollout metrics', () => {
  it("exports rollout-operator's group metrics under its names and deletes a removed group's series", async () => {
    const registry = new Registry();
    const metrics = new RolloutMetrics(registry);
    metrics.begin('ingester')('success');
    metrics.begin('ingester')('failure');
    metrics.begin('store-gateway')('success');
    metrics.podDeleted('ingester', 'update');
    let text = await registry.metrics();
    assert.match(text, /^rollout_operator_group_reconciles_total\{rollout_group="ingester"\} 2$/m);
    assert.match(text, /^rollout_operator_group_reconciles_failed_total\{rollout_group="ingester"\} 1$/m);
    assert.match(
      text,
      /^rollout_operator_group_reconciles_failed_total\{rollout_group="store-gateway"\} 0$/m,
      'failed series touched at first reconcile',
    );
    assert.match(text, /^rollout_operator_group_reconcile_duration_seconds_count\{rollout_group="ingester"\} 2$/m);
    assert.match(
      text,
      /^rollout_operator_last_successful_group_reconcile_timestamp_seconds\{rollout_group="ingester"\} \d+/m,
    );
    assert.match(text, /^# TYPE rollout_operator_group_reconcile_duration_seconds histogram$/m);
    metrics.forget('ingester');
    text = await registry.metrics();
    assert.doesNotMatch(text, /rollout_group="ingester"/);
    assert.match(text, /rollout_group="store-gateway"/);
  });
});
