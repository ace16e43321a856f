// The connection policy against the real apiserver (docs/runtime.md, "Which
// cluster"): the operator started with neither -kubernetes.config-file nor
// -kubernetes.api-url, from a KUBECONFIG of two files (the context in one,
// the cluster and user in the other), merged as kubectl merges them.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { testCluster } from '../../cluster/testing.ts';
import { OperatorProcess } from '../../support/operator-process.ts';

const cluster = testCluster();

interface AdminKubeconfig {
  clusters: unknown[];
  users: unknown[];
  contexts: { name: string; context: Record<string, unknown> }[];
}

async function tempDir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'stateward-connection-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe('connection policy', () => {
  it('runs the operator from a merged two-file KUBECONFIG, without -kubernetes.config-file or -api-url', async (t) => {
    const namespace = await cluster.namespace(t);
    const dir = await tempDir(t);
    const admin = parse(await readFile(cluster.kubeconfigPath, 'utf8')) as AdminKubeconfig;
    // The first file: only contexts (one of them broken, so only -kubernetes.context picks the good one).
    const contexts = join(dir, 'contexts.yaml');
    await writeFile(
      contexts,
      JSON.stringify({
        contexts: [
          { name: 'elsewhere', context: { cluster: 'nowhere', user: 'nobody' } },
          { name: 'mine', context: { ...admin.contexts[0]!.context, namespace } },
        ],
        'current-context': 'elsewhere',
      }),
    );
    // The second: the cluster and the user, and a current-context the first file's overrides.
    const credentials = join(dir, 'credentials.yaml');
    await writeFile(
      credentials,
      JSON.stringify({ clusters: admin.clusters, users: admin.users, 'current-context': 'mine' }),
    );
    const env = { KUBECONFIG: [join(dir, 'absent.yaml'), contexts, credentials].join(delimiter), HOME: dir };
    const broken = await OperatorProcess.start(cluster, namespace, [], { kubeconfigFlags: false, env });
    t.after(() => broken.stop());
    assert.equal((await broken.exited).code, 1, 'the current context of the merged files names no defined cluster');
    assert.match(broken.logs, /KUBECONFIG: context \\"elsewhere\\" names cluster \\"nowhere\\", which is not defined/);

    const operator = await OperatorProcess.start(cluster, namespace, ['-kubernetes.context=mine'], {
      kubeconfigFlags: false,
      env,
    });
    t.after(() => operator.stop());
    await operator.waitReady(60_000);
    assert.doesNotMatch(operator.logs, /level=error/);
  });
});
