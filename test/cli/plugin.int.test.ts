// The kubectl plugin, through the real kubectl's plugin mechanism: an
// executable named kubectl-stateward on PATH makes `kubectl stateward …`.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { testCluster } from '../cluster/testing.ts';
import { createGroup, testClient, waitGroupSettled } from '../support/rollout-group.ts';

const exec = promisify(execFile);
const cluster = testCluster();
const PLUGIN = fileURLToPath(new URL('../../bin/kubectl-stateward.mjs', import.meta.url));

describe('kubectl plugin', { timeout: 120_000 }, () => {
  it('kubectl stateward status and doctor run the same commands as stateward', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await createGroup(kube, namespace, { all: { replicas: 1 } });
    await waitGroupSettled(kube, namespace, 60_000);
    const bin = await mkdtemp(join(tmpdir(), 'kubectl-plugin-'));
    t.after(() => rm(bin, { recursive: true, force: true }));
    await symlink(PLUGIN, join(bin, 'kubectl-stateward'));
    // The plugin's `#!/usr/bin/env node` finds the project's Node 24 first.
    const env = {
      ...process.env,
      PATH: `${bin}:${dirname(process.execPath)}:${process.env['PATH'] ?? ''}`,
      KUBECONFIG: cluster.kubeconfigPath,
    };
    const listed = await exec('kubectl', ['plugin', 'list'], { env }).catch((error: { stdout: string }) => error);
    assert.match(listed.stdout, /kubectl-stateward/);
    const { stdout } = await exec('kubectl', ['stateward', 'status', '-n', namespace, '-o', 'json'], { env });
    const report = JSON.parse(stdout) as {
      kind: string;
      namespaces: { namespace: string; groups: { name: string; phase: string; statefulSets: { name: string }[] }[] }[];
    };
    assert.equal(report.kind, 'Status');
    assert.deepEqual(
      report.namespaces.map((n) => n.namespace),
      [namespace],
    );
    assert.deepEqual(
      report.namespaces[0]!.groups.map((g) => [g.name, g.phase, g.statefulSets.length]),
      [['ingester', 'complete', 3]],
    );
    const doctor = await exec('kubectl', ['stateward', 'doctor', '-n', namespace], { env }).then(
      (r) => ({ ...r, code: 0 }),
      (error: { stdout: string; stderr: string; code: number }) => error,
    );
    assert.equal(doctor.code, 0, `${doctor.stdout}${doctor.stderr}`);
    const usage = await exec('kubectl', ['stateward', 'bogus'], { env }).catch(
      (error: { stderr: string; code: number }) => error,
    );
    assert.equal((usage as { code?: number }).code, 2);
    assert.match((usage as { stderr: string }).stderr, /usage: kubectl stateward status\|doctor/);
  });
});
