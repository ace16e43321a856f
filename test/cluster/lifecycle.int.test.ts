// The harness's own promises: a component that cannot start is named with
// its log, and no process outlives its cluster, even when the owner is
// killed outright.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { clustersRoot, LocalCluster, readState, reapStaleClusters } from './cluster.ts';
import { processAlive, processesMentioning } from './lock.ts';
import { waitFor } from './probe.ts';

const cli = fileURLToPath(new URL('./cli.ts', import.meta.url));
const uniqueName = (prefix: string) => `${prefix}-${process.pid}-${Date.now().toString(36)}`;

describe('local cluster lifecycle', () => {
  it('names the component that does not come up and its log, and leaves nothing running', async () => {
    const name = uniqueName('broken');
    let error: Error | undefined;
    try {
      const cluster = await LocalCluster.start({ name, extraArgs: { apiserver: ['--no-such-flag=1'] }, log: () => {} });
      await cluster.teardown();
    } catch (e) {
      error = e as Error;
    }
    assert.ok(error, 'start must fail');
    assert.match(error.message, /^apiserver exited with code \d+; log: \S+apiserver\.log/);
    assert.match(error.message, /unknown flag: --no-such-flag/);
    // etcd was started before the apiserver (its --data-dir names the cluster); teardown must have stopped it.
    const stateDir = join(clustersRoot(), name);
    assert.deepEqual(processesMentioning(stateDir), []);
    assert.equal(existsSync(stateDir), false, 'state directory removed');
  });

  it('reaps the components of a cluster whose owner was killed with SIGKILL', async () => {
    const name = uniqueName('orphan');
    const owner = spawn(process.execPath, [cli, 'serve', '--name', name, '--nodes-per-zone', '1'], { stdio: 'ignore' });
    const stateDir = join(clustersRoot(), name);
    try {
      const state = await waitFor(
        'the orphan cluster to be ready',
        () => {
          const s = readState(stateDir);
          return s?.ready ? s : undefined;
        },
        {
          timeoutMs: 120_000,
          fail: () => (owner.exitCode !== null ? `owner exited with ${owner.exitCode}` : undefined),
        },
      );
      const pids = Object.values(state.components)
        .map((c) => c.pid)
        .filter((p): p is number => p !== undefined);
      assert.equal(pids.length, 5);
      owner.kill('SIGKILL');
      await waitFor('the owner to die', () => !processAlive(state.ownerPid), { timeoutMs: 10_000 });
      // SIGKILL gives the owner no chance to clean up: its components are still there.
      assert.ok(
        pids.some((pid) => processAlive(pid)),
        'components outlive a SIGKILLed owner',
      );
      await reapStaleClusters();
      await waitFor('every reaped component to exit', () => pids.every((pid) => !processAlive(pid)), {
        timeoutMs: 10_000,
      });
      assert.deepEqual(processesMentioning(stateDir), []);
      assert.equal(existsSync(stateDir), false);
    } finally {
      owner.kill('SIGKILL');
    }
  });
});
