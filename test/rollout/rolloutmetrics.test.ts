import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { RolloutMetrics } from '../../src/rollout/rolloutmetrics.ts';

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

  it("counts a settled group's resyncs when read, one per interval, as if each had run", async () => {
    const registry = new Registry();
    let monotonic = 1_000;
    let wall = 1_700_000_000_000;
    const metrics = new RolloutMetrics(registry, { intervalMs: 5_000, monotonic: () => monotonic, now: () => wall });
    const value = async (name: string) => {
      const text = await registry.metrics();
      const line = text.split('\n').find((l) => l.startsWith(`${name}{rollout_group="ingester"} `));
      return line === undefined ? undefined : Number(line.split(' ')[1]);
    };
    metrics.settle('ingester');
    assert.equal(await value('rollout_operator_group_reconciles_total'), undefined, 'an unknown group is not settled');
    metrics.begin('ingester')('success');
    metrics.settle('ingester');
    const advance = (ms: number) => {
      monotonic += ms;
      wall += ms;
    };
    advance(4_999);
    assert.equal(await value('rollout_operator_group_reconciles_total'), 1);
    advance(7_001); // 12 s after settling: two resyncs, the last 2 s ago
    assert.equal(await value('rollout_operator_group_reconciles_total'), 3);
    assert.equal(await value('rollout_operator_group_reconcile_duration_seconds_count'), 3);
    assert.equal(await value('rollout_operator_group_reconciles_failed_total'), 0);
    assert.equal(
      await value('rollout_operator_last_successful_group_reconcile_timestamp_seconds'),
      (wall - 2_000) / 1000,
    );
    assert.equal(await value('rollout_operator_group_reconciles_total'), 3, 'reading again counts nothing twice');
    advance(3_000); // a resync came due 1 s before the change
    metrics.unsettle('ingester');
    advance(60_000);
    assert.equal(await value('rollout_operator_group_reconciles_total'), 4, 'counted up to the change, then no more');
    metrics.settle('ingester');
    metrics.forget('ingester');
    advance(60_000);
    assert.equal(await value('rollout_operator_group_reconciles_total'), undefined);
  });
});
