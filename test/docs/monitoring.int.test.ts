// Every metric the alerting rules and the dashboard read exists in the
// /metrics of an operator running with every capability on (histogram
// series by their family), so neither can query a name that never existed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testCluster } from '../cluster/testing.ts';
import { expressions } from './monitoring.ts';
import { familyOf, metricNames } from './promql.ts';
import { familiesWhen, startEverything } from './surface.ts';

const cluster = testCluster();

describe('monitoring against the metrics the operator exposes', { timeout: 120000 }, () => {
  it('reads only metrics the operator registers', async (t) => {
    const uses = new Map<string, string[]>();
    for (const { where, expr } of expressions()) {
      for (const name of metricNames(expr)) uses.set(name, [...(uses.get(name) ?? []), where]);
    }
    // Floors, so a broken reader cannot pass vacuously.
    assert.ok(uses.size >= 30, `only ${uses.size} metric names found in deploy/monitoring`);
    assert.ok(
      uses.has('rollout_operator_group_reconcile_duration_seconds_bucket'),
      'a histogram bucket series is read',
    );

    const op = await startEverything(cluster, t);
    const families = await familiesWhen(op, (f) => [...uses.keys()].every((name) => familyOf(name, f) !== undefined));
    assert.ok(families.size >= 35, `only ${families.size} metric families read from /metrics`);
    const unknown = [...uses]
      .filter(([name]) => familyOf(name, families) === undefined)
      .map(([name, where]) => `${name} (${where.join('; ')})`);
    assert.deepEqual(unknown, [], 'metrics deploy/monitoring reads that the operator does not expose');
  });
});
