// The README's metrics table against the metrics a running operator with
// every capability on really registers, in both directions, types included.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testCluster } from '../cluster/testing.ts';
import { readRepoFile, sectionTable } from './readme.ts';
import { documentedMetrics, familiesWhen, isRuntimeMetric, parseMetricRow, startEverything } from './surface.ts';

const cluster = testCluster();
const readme = readRepoFile('README.md');
const table = sectionTable(readme, 'Metrics', ['metric', 'type', 'labels', 'meaning']);

describe('README metrics table', { timeout: 120000 }, () => {
  it('documents every metric the operator exposes, and exposes every metric it documents, with their types', async (t) => {
    const op = await startEverything(cluster, t);
    const fullNames = table.rows.flatMap((row) => parseMetricRow(row).names);
    const exposed = await familiesWhen(op, (families) => fullNames.every((name) => families.has(name)));
    const ours = new Map([...exposed].filter(([name]) => !isRuntimeMetric(name)));
    // Floors, so a broken reader cannot pass vacuously.
    assert.ok(ours.size >= 35, `only ${ours.size} metric families read from /metrics`);
    assert.ok([...exposed.keys()].some(isRuntimeMetric), 'no process_/nodejs_ runtime metrics exposed');

    const documented = documentedMetrics(table, exposed);
    assert.deepEqual(
      documented.unresolved,
      [],
      'abbreviated names in the README that resolve to no single exposed metric',
    );

    const undocumented = [...ours.keys()].filter((name) => !documented.names.has(name));
    assert.deepEqual(undocumented, [], 'exposed metrics missing from the README metrics table');

    const absent = [...documented.names.keys()].filter((name) => !exposed.has(name));
    assert.deepEqual(absent, [], 'metrics in the README table that the operator does not register');

    for (const prefix of documented.patterns) {
      assert.ok(
        [...exposed.keys()].some((name) => name.startsWith(prefix)),
        `the README documents ${prefix}* but no such metric is exposed`,
      );
    }

    // Each row's type column names exactly the types of its metrics.
    const wrongTypes: string[] = [];
    for (const row of documented.rows) {
      const names = [...documented.names].filter(([, r]) => r === row).map(([name]) => name);
      if (names.length === 0) continue;
      const types = new Set(names.map((name) => exposed.get(name)));
      if ([...types].sort().join() !== [...row.types].sort().join())
        wrongTypes.push(
          `${names.join(', ')}: README says ${[...row.types].join(', ')}, exposed as ${[...types].join(', ')}`,
        );
    }
    assert.deepEqual(wrongTypes, []);
  });
});
