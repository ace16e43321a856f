// Replica coordination end to end: the real kubectl scales a leader or a
// ReplicaTemplate, and Stateward moves the followers and mirrors.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { resources, type StatefulSet } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { createReplicaTemplate, mirrorAnnotations } from '../support/replica-templates.ts';
import { createGroup, testClient, waitGroupSettled } from '../support/rollout-group.ts';

const cluster = testCluster();

async function replicas(namespace: string): Promise<Record<string, number | undefined>> {
  const sets = (await testClient(cluster).list<StatefulSet>(resources.statefulSets, { namespace })).items;
  return Object.fromEntries(sets.map((s) => [s.metadata!.name!.replace('ingester-zone-', ''), s.spec?.replicas]));
}

async function operator(t: TestContext, namespace: string): Promise<OperatorProcess> {
  const op = await OperatorProcess.start(cluster, namespace, ['-reconcile.interval=1s']);
  t.after(() => op.stop());
  await op.waitReady();
  return op;
}

describe('replica coordination', () => {
  it('moves a whole leader chain (b follows a, c follows b) up and down after the leader, in one pass', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await createGroup(kube, namespace, { all: { replicas: 2 } });
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', { metadata: { annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-a' } } });
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-c' }, 'merge', { metadata: { annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-b' } } });
    await waitGroupSettled(kube, namespace);
    const op = await operator(t, namespace);
    assert.ok((await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=4')).ok);
    await waitFor('followers at 4', async () => JSON.stringify(await replicas(namespace)) === JSON.stringify({ a: 4, b: 4, c: 4 }), { timeoutMs: 20_000 });
    // The API shows the new replicas before the operator's log line arrives through the pipe.
    const upLines = () => op.logs.split('\n').filter((l) => /scaled ingester-zone-[bc] from 2 to 4/.test(l));
    await waitFor('both followers logged as scaled', () => upLines().length >= 2, { timeoutMs: 5000 });
    assert.equal(upLines().length, 2, 'each follower patched once');
    assert.ok((await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=1')).ok);
    await waitFor('followers at 1', async () => JSON.stringify(await replicas(namespace)) === JSON.stringify({ a: 1, b: 1, c: 1 }), { timeoutMs: 20_000 });
  });

  it('mirrors a ReplicaTemplate that kubectl scales, and writes status.replicas back', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await createReplicaTemplate(cluster, kube, namespace, 'ingester', 2);
    await createGroup(kube, namespace, { all: { replicas: 2 } }, ['a']);
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-a' }, 'merge', { metadata: { annotations: mirrorAnnotations('ingester') } });
    await operator(t, namespace);
    assert.ok((await kubectl(cluster, '-n', namespace, 'scale', 'replicatemplate', 'ingester', '--replicas=3')).ok);
    await waitFor('zone a at 3', async () => (await replicas(namespace))['a'] === 3, { timeoutMs: 20_000 });
    await waitFor('status.replicas written back', async () => (await kubectl(cluster, '-n', namespace, 'get', 'replicatemplate', 'ingester', '-o', 'jsonpath={.status.replicas}')).out === '3', { timeoutMs: 20_000 });
  });
});
