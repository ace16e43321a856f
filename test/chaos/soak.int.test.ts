// A short chaos soak in the test run: about two minutes of rollouts,
// scaling, drains and config changes with faults injected meanwhile (a fixed
// seed), judged by the independent monitor. Faults stop the run's shared
// control-plane components only within this test; everything is restored
// before it ends, whatever happens.
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ComponentName } from '../cluster/process.ts';
import { testCluster } from '../cluster/testing.ts';
import { runSoak, summarize } from './soak.ts';

const cluster = testCluster();
const root = fileURLToPath(new URL('../..', import.meta.url));
const COMPONENTS: ComponentName[] = ['etcd', 'apiserver', 'controller-manager', 'scheduler', 'kwok'];

describe('chaos soak', { timeout: 330_000 }, () => {
  it('two minutes of work under faults: no promise broken, and every kind of work done', async (t) => {
    t.after(async () => {
      for (const name of COMPONENTS) {
        await cluster.resumeComponent(name).catch(() => undefined);
        await cluster.startComponent(name).catch(() => undefined);
      }
      for (const node of cluster.nodes) await cluster.uncordon(node.name).catch(() => undefined);
    });
    const runDir = join(root, 'test-artifacts', 'soak', `test-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    mkdirSync(runDir, { recursive: true });
    const logFile = join(runDir, 'soak.log');
    const report = await runSoak({
      cluster,
      minutes: 2,
      seed: 20261122,
      namespaces: 2,
      runDir,
      log: (line) => appendFileSync(logFile, `[${new Date().toISOString()}] ${line}\n`),
      faultIntervalMs: [4000, 10_000],
      actionIntervalMs: [1000, 3000],
      minTimeBetweenZonesDownscale: '10s',
      quiesceTimeoutMs: 90_000,
    });
    t.diagnostic(summarize(report));
    t.diagnostic(`run log: ${logFile}`);
    assert.deepEqual(report.violations, []);
    assert.ok(report.settled, 'everything settled after the faults stopped');
    assert.ok(report.rolloutsCompleted > 0, 'rollouts completed');
    assert.ok(report.restartsApplied > 0, 'config restarts applied');
    assert.ok(report.evictionsDecided.total > 0, 'evictions decided');
    assert.ok((report.monitor['evictionsOfReadyPods'] ?? 0) > 0, 'a drain evicted Ready pods');
    assert.ok(report.faults.injected > 0, 'faults injected');
    assert.ok((report.monitor['downscales'] ?? 0) > 0 && (report.monitor['upscales'] ?? 0) > 0, 'groups scaled both ways');
  });
});
