// Short chaos soaks in the test run, judged by the independent monitor:
// about two minutes of rollouts, scaling, drains and config changes
// (restarting Deployments, a CronJob and a Job in each namespace) with
// every kind of fault drawn (a fixed seed), then 90 s of the same workload
// with only wall-clock steps of the operator replicas. The first gates one
// group by a health check against a real Prometheus (a bad release and
// Prometheus outages among its faults) and drains nodes under the Couchbase
// and Strimzi reschedule profiles, with stand-ins for their operators, and
// rotates the versions a Secrets Store CSI class mounts in a Deployment per
// group (a driver stand-in writing the pods' statuses), each rotation to
// restart it exactly once. Faults stop the run's
// shared control-plane components only within this file; everything is
// restored before a test ends, whatever happens.
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ComponentName } from '../cluster/process.ts';
import { testCluster } from '../cluster/testing.ts';
import { FAULT_KINDS } from './faults.ts';
import { LIBFAKETIME } from '../support/faketime.ts';
import { runSoak, summarize, type SoakOptions } from './soak.ts';

const cluster = testCluster();
const root = fileURLToPath(new URL('../..', import.meta.url));
const COMPONENTS: ComponentName[] = ['etcd', 'apiserver', 'controller-manager', 'scheduler', 'kwok'];

async function soak(t: TestContext, name: string, o: Omit<SoakOptions, 'cluster' | 'runDir' | 'log'>) {
  t.after(async () => {
    for (const component of COMPONENTS) {
      await cluster.resumeComponent(component).catch(() => undefined);
      await cluster.startComponent(component).catch(() => undefined);
    }
    for (const node of cluster.nodes) await cluster.uncordon(node.name).catch(() => undefined);
  });
  const runDir = join(root, 'test-artifacts', 'soak', `${name}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  mkdirSync(runDir, { recursive: true });
  const logFile = join(runDir, 'soak.log');
  const report = await runSoak({
    cluster,
    runDir,
    log: (line) => appendFileSync(logFile, `[${new Date().toISOString()}] ${line}\n`),
    ...o,
  });
  t.diagnostic(summarize(report));
  t.diagnostic(`run log: ${logFile}`);
  assert.deepEqual(report.violations, []);
  assert.ok(report.settled, 'everything settled after the faults stopped');
  return report;
}

describe('chaos soak', { timeout: 600_000 }, () => {
  it('two minutes of work under every kind of fault: no promise broken, and every kind of work done', async (t) => {
    const report = await soak(t, 'test', {
      minutes: 2,
      seed: 20261122,
      namespaces: 2,
      faultIntervalMs: [4000, 10_000],
      actionIntervalMs: [1000, 3000],
      minTimeBetweenZonesDownscale: '10s',
      quiesceTimeoutMs: 90_000,
      healthGates: true,
      profileDrainIntervalMs: [4000, 12_000],
    });
    assert.ok(report.rolloutsCompleted > 0, 'rollouts completed');
    assert.ok(report.restartsApplied > 0, 'config restarts applied');
    assert.ok((report.monitor['cronJobJobsStarted'] ?? 0) > 0, 'CronJobs started Jobs on config changes');
    assert.ok((report.monitor['jobRecreations'] ?? 0) > 0, 'Jobs re-created on config changes');
    assert.ok(report.evictionsDecided.total > 0, 'evictions decided');
    assert.ok((report.monitor['evictionsOfReadyPods'] ?? 0) > 0, 'a drain evicted Ready pods');
    assert.ok(report.faults.injected > 0, 'faults injected');
    assert.ok(
      (report.monitor['downscales'] ?? 0) > 0 && (report.monitor['upscales'] ?? 0) > 0,
      'groups scaled both ways',
    );
    const drains = report.profileDrains;
    assert.ok(drains.completed >= 2, `kubectl drains under both profiles completed: ${drains.completed}`);
    for (const profile of ['couchbase', 'strimzi'] as const) {
      assert.ok((report.monitor[`rescheduleAnnotations.${profile}`] ?? 0) > 0, `${profile} pods annotated`);
      assert.ok(drains.moves[profile] > 0, `the ${profile} stand-in moved pods`);
    }
    assert.ok((report.monitor['rescheduleUnselectedEvictions'] ?? 0) > 0, 'pods no profile selects were evicted');
    const rotations = report.monitor['csiRotations'] ?? 0;
    assert.ok(rotations >= 1, `CSI rotations seen by the monitor: ${rotations}`);
    assert.equal(report.csiRotations['rotation'], rotations, 'the monitor saw every rotation the stand-in made');
    assert.equal(report.monitor['csiRotationsRestarted'], rotations, 'each rotation restarted');
    assert.equal(report.monitor['csiRestarts'], rotations, 'one restart per rotation');
  });

  it('wall-clock steps of the operator replicas: min-time, budgets and leadership hold', async (t) => {
    assert.ok(existsSync(LIBFAKETIME), `${LIBFAKETIME} is installed (.ci/run installs Debian's faketime)`);
    const report = await soak(t, 'test-clock', {
      minutes: 1.5,
      seed: 7,
      namespaces: 2,
      faultIntervalMs: [2000, 5000],
      actionIntervalMs: [1000, 2500],
      faultWeights: Object.fromEntries(FAULT_KINDS.map((k) => [k, k === 'operator-clock-step' ? 1 : 0])),
      minTimeBetweenZonesDownscale: '20s',
      quiesceTimeoutMs: 90_000,
      profileDrains: false,
      csiRotations: false,
    });
    assert.ok((report.faults.byKind['operator-clock-step'] ?? 0) >= 3, 'clock steps injected');
    assert.ok((report.monitor['preparedDownscales'] ?? 0) > 0, 'prepared downscales happened under stepped clocks');
    assert.ok((report.monitor['evictionsOfReadyPods'] ?? 0) > 0, 'a drain evicted Ready pods under stepped clocks');
    assert.ok((report.monitor['cronJobJobsStarted'] ?? 0) > 0, 'a CronJob started Jobs under stepped clocks');
    assert.ok((report.monitor['jobRecreations'] ?? 0) > 0, 'a Job was re-created under stepped clocks');
  });
});
