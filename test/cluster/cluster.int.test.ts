// Proof that the local cluster is a real Kubernetes control plane: the
// StatefulSet, disruption and scheduler controllers act, the Eviction API
// enforces PodDisruptionBudgets, RBAC refuses a ServiceAccount what its Role
// does not grant, and the machine's kubectl talks to it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import {
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  PolicyV1Api,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Pod,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import { waitFor } from './probe.ts';
import { testCluster } from './testing.ts';
import { ZONE_LABEL } from '../../src/vocabulary/keys.ts';

const exec = promisify(execFile);
const cluster = testCluster();

function statefulSet(
  name: string,
  replicas: number,
  strategy: 'OnDelete' | 'RollingUpdate' = 'RollingUpdate',
): V1StatefulSet {
  return {
    metadata: { name },
    spec: {
      replicas,
      serviceName: name,
      selector: { matchLabels: { app: name } },
      updateStrategy: { type: strategy },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: ZONE_LABEL,
              whenUnsatisfiable: 'DoNotSchedule',
              labelSelector: { matchLabels: { app: name } },
            },
          ],
          containers: [{ name: 'main', image: 'example.invalid/app:1' }],
        },
      },
    },
  };
}

const isReady = (pod: V1Pod) => pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

async function readyPods(core: CoreV1Api, namespace: string, app: string, count: number): Promise<V1Pod[]> {
  return waitFor(
    `${count} Ready pods of ${namespace}/${app}`,
    async () => {
      const pods = (await core.listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items;
      const ready = pods.filter((p) => isReady(p) && !p.metadata?.deletionTimestamp);
      return ready.length === count ? ready : undefined;
    },
    { timeoutMs: 60_000 },
  );
}

describe('local cluster', () => {
  it('runs a 3-replica StatefulSet to 3 Ready pods spread across the three zones', async (t) => {
    const namespace = await cluster.namespace(t);
    const kc = cluster.clientNodeConfig();
    const apps = kc.makeApiClient(AppsV1Api);
    const core = kc.makeApiClient(CoreV1Api);
    await apps.createNamespacedStatefulSet({ namespace, body: statefulSet('db', 3) });
    const pods = await readyPods(core, namespace, 'db', 3);
    const nodeZone = new Map(cluster.nodes.map((n) => [n.name, n.zone]));
    const zones = pods.map((p) => nodeZone.get(p.spec?.nodeName ?? '')).sort();
    assert.deepEqual(zones, ['zone-a', 'zone-b', 'zone-c']);
    await waitFor(
      'StatefulSet status readyReplicas=3',
      async () => {
        const sts = await apps.readNamespacedStatefulSet({ name: 'db', namespace });
        return sts.status?.readyReplicas === 3;
      },
      { timeoutMs: 30_000 },
    );
  });

  it('recreates a deleted pod from the current revision', async (t) => {
    const namespace = await cluster.namespace(t);
    const kc = cluster.clientNodeConfig();
    const apps = kc.makeApiClient(AppsV1Api);
    const core = kc.makeApiClient(CoreV1Api);
    await apps.createNamespacedStatefulSet({ namespace, body: statefulSet('db', 2) });
    const before = (await readyPods(core, namespace, 'db', 2)).find((p) => p.metadata?.name === 'db-1');
    assert.ok(before?.metadata?.uid);
    await core.deleteNamespacedPod({ name: 'db-1', namespace });
    const after = await waitFor(
      'db-1 recreated and Ready',
      async () => {
        const pod = await core.readNamespacedPod({ name: 'db-1', namespace });
        return pod.metadata?.uid !== before.metadata?.uid && isReady(pod) ? pod : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const sts = await apps.readNamespacedStatefulSet({ name: 'db', namespace });
    assert.equal(after.metadata?.labels?.['controller-revision-hash'], sts.status?.updateRevision);
  });

  it('moves updateRevision on a template change of an OnDelete StatefulSet while pods keep the old revision', async (t) => {
    const namespace = await cluster.namespace(t);
    const kc = cluster.clientNodeConfig();
    const apps = kc.makeApiClient(AppsV1Api);
    const core = kc.makeApiClient(CoreV1Api);
    await apps.createNamespacedStatefulSet({ namespace, body: statefulSet('db', 3, 'OnDelete') });
    await readyPods(core, namespace, 'db', 3);
    const original = await waitFor(
      'status.updateRevision',
      async () => (await apps.readNamespacedStatefulSet({ name: 'db', namespace })).status?.updateRevision,
      { timeoutMs: 30_000 },
    );
    await apps.patchNamespacedStatefulSet(
      {
        name: 'db',
        namespace,
        body: { spec: { template: { spec: { containers: [{ name: 'main', image: 'example.invalid/app:2' }] } } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    const updated = await waitFor(
      'a new updateRevision',
      async () => {
        const status = (await apps.readNamespacedStatefulSet({ name: 'db', namespace })).status;
        return status?.updateRevision !== original && status?.observedGeneration === 2 ? status : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(updated.currentRevision, original, 'currentRevision stays until pods are replaced');
    const pods = (await core.listNamespacedPod({ namespace, labelSelector: 'app=db' })).items;
    assert.equal(pods.length, 3);
    for (const pod of pods)
      assert.equal(
        pod.metadata?.labels?.['controller-revision-hash'],
        original,
        `${pod.metadata?.name} was not replaced`,
      );
  });

  it('answers an eviction that would break a PodDisruptionBudget with 429', async (t) => {
    const namespace = await cluster.namespace(t);
    const kc = cluster.clientNodeConfig();
    const apps = kc.makeApiClient(AppsV1Api);
    const core = kc.makeApiClient(CoreV1Api);
    const policy = kc.makeApiClient(PolicyV1Api);
    await apps.createNamespacedStatefulSet({ namespace, body: statefulSet('db', 2) });
    await readyPods(core, namespace, 'db', 2);
    await policy.createNamespacedPodDisruptionBudget({
      namespace,
      body: { metadata: { name: 'db' }, spec: { minAvailable: 2, selector: { matchLabels: { app: 'db' } } } },
    });
    // The disruption controller must have observed the budget before the API enforces it.
    await waitFor(
      'PDB status observed with currentHealthy=2',
      async () => {
        const pdb = await policy.readNamespacedPodDisruptionBudget({ name: 'db', namespace });
        return pdb.status?.observedGeneration === pdb.metadata?.generation && pdb.status?.currentHealthy === 2;
      },
      { timeoutMs: 30_000 },
    );
    await assert.rejects(
      core.createNamespacedPodEviction({ name: 'db-0', namespace, body: { metadata: { name: 'db-0', namespace } } }),
      (error: { code?: number; body?: string }) => {
        assert.equal(error.code, 429);
        assert.match(String(error.body), /disruption budget/i);
        return true;
      },
    );
  });

  it('works with the machine kubectl and the printed kubeconfig', async () => {
    const { stdout } = await exec('kubectl', [
      '--kubeconfig',
      cluster.kubeconfigPath,
      'get',
      'nodes',
      '-L',
      ZONE_LABEL,
      '--no-headers',
    ]);
    const rows = stdout
      .trim()
      .split('\n')
      .map((line) => line.trim().split(/\s+/));
    for (const node of cluster.nodes) {
      const row = rows.find((r) => r[0] === node.name);
      assert.ok(row, `kubectl lists ${node.name}`);
      assert.equal(row[1], 'Ready');
      assert.equal(row.at(-1), node.zone);
    }
  });

  it('refuses a ServiceAccount what its Role does not grant', async (t) => {
    const namespace = await cluster.namespace(t);
    const kc = cluster.clientNodeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'reader' } } });
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'pod-reader' },
        rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace }],
      },
    });
    const saConfig = new KubeConfig();
    saConfig.loadFromFile(await cluster.serviceAccountKubeconfig(namespace, 'reader'));
    const asReader = saConfig.makeApiClient(CoreV1Api);
    // Granted: RBAC bindings take effect as soon as the authorizer's cache sees them.
    await waitFor(
      'the Role to be enforced',
      async () => (await asReader.listNamespacedPod({ namespace })).items !== undefined,
      { timeoutMs: 10_000 },
    );
    const forbidden = (error: { code?: number }) => error.code === 403;
    await assert.rejects(asReader.listNamespacedSecret({ namespace }), forbidden);
    await assert.rejects(
      asReader.createNamespacedPod({
        namespace,
        body: { metadata: { name: 'x' }, spec: { containers: [{ name: 'c', image: 'x' }] } },
      }),
      forbidden,
    );
    await assert.rejects(asReader.listNamespacedPod({ namespace: 'default' }), forbidden);
    const { stdout } = await exec('kubectl', [
      '--kubeconfig',
      await cluster.serviceAccountKubeconfig(namespace, 'reader'),
      'auth',
      'can-i',
      'delete',
      'pods',
      '-n',
      namespace,
    ]).catch((error: { stdout: string }) => ({ stdout: error.stdout }));
    assert.equal(stdout.trim(), 'no');
  });

  it('schedules nothing while the scheduler is stopped, and catches up when it starts again', async (t) => {
    const namespace = await cluster.namespace(t);
    const core = cluster.core();
    await cluster.stopComponent('scheduler');
    try {
      await core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name: 'waiting', labels: { app: 'waiting' } },
          spec: { containers: [{ name: 'c', image: 'example.invalid/x' }] },
        },
      });
      // The pod exists and is Pending with no node; nothing else could bind it.
      const pod = await core.readNamespacedPod({ name: 'waiting', namespace });
      assert.equal(pod.spec?.nodeName, undefined);
    } finally {
      await cluster.startComponent('scheduler');
    }
    await readyPods(core, namespace, 'waiting', 1);
  });

  it('keeps its state across an apiserver restart', async (t) => {
    const namespace = await cluster.namespace(t);
    const core = cluster.core();
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'survivor' }, data: { k: 'v' } } });
    await cluster.restartComponent('apiserver');
    const cm = await waitFor(
      'the ConfigMap after restart',
      async () => (await cluster.core().readNamespacedConfigMap({ name: 'survivor', namespace })).data,
      { timeoutMs: 30_000 },
    );
    assert.deepEqual(cm, { k: 'v' });
  });

  it('cordons and uncordons nodes', async () => {
    const node = cluster.nodes[0]!.name;
    const core = cluster.core();
    await cluster.cordon(node);
    try {
      assert.equal((await core.readNode({ name: node })).spec?.unschedulable, true);
    } finally {
      await cluster.uncordon(node);
    }
    assert.notEqual((await core.readNode({ name: node })).spec?.unschedulable, true);
  });

  it('applies stateward.dev/max-pods to a running node at its next heartbeat, and back', async () => {
    const node = cluster.nodes[1]!.name;
    const core = cluster.core();
    const capacity = async () => (await core.readNode({ name: node })).status?.capacity?.['pods'];
    const annotate = (value: string | null) =>
      core.patchNode(
        { name: node, body: { metadata: { annotations: { 'stateward.dev/max-pods': value } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    const before = await capacity();
    await annotate('2345');
    try {
      await waitFor('capacity 2345', async () => (await capacity()) === '2345', { timeoutMs: 45_000 });
      assert.equal((await core.readNode({ name: node })).status?.allocatable?.['pods'], '2345');
    } finally {
      await annotate(null);
    }
    await waitFor(`capacity back to ${before}`, async () => (await capacity()) === (before ?? '110'), {
      timeoutMs: 45_000,
    });
  });
});
