// `stateward status` against the real control plane, with no operator
// running: the report is computed from the objects, so a rollout left
// half-done by hand must read as the operator would see it.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it, type TestContext } from 'node:test';
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type Lease, type Pod } from '../../src/runtime/kube/types.ts';
import { ledgerName } from '../../src/drain/zpdb/ledger.ts';
import { runStatus } from '../../src/status/cli.ts';
import type { StatusReport } from '../../src/status/model.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import {
  createGroup,
  createGroupBudget,
  testClient,
  waitGroupSettled,
  waitRevisionsPending,
  ZONES,
} from '../support/rollout-group.ts';
import { LEDGER_ANNOTATION, LEDGER_LABEL } from '../../src/vocabulary/keys.ts';

const cluster = testCluster();
const READY_DELAY = 'pod-ready.stage.kwok.x-k8s.io/delay';
const crd = fileURLToPath(new URL('../../deploy/crds/zone-aware-pod-disruption-budgets.yaml', import.meta.url));

async function status(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runStatus(argv, {
    out: (s) => out.push(s),
    err: (s) => err.push(s),
    env: {},
    isTTY: false,
    columns: 120,
  });
  return { code, out: out.join(''), err: err.join('') };
}

async function report(namespace: string, kubeconfig = cluster.kubeconfigPath): Promise<StatusReport> {
  const result = await status(['-n', namespace, '-o', 'json', '--kubeconfig', kubeconfig]);
  assert.equal(result.code, 0, result.err);
  return JSON.parse(result.out) as StatusReport;
}

const ingester = (r: StatusReport) => {
  const group = r.namespaces[0]?.groups.find((g) => g.name === 'ingester');
  assert.ok(group, 'the ingester group is reported');
  return group;
};

/** A new revision for every zone, whose pods take `delay` to become Ready. */
async function newRevision(kube: KubeClient, namespace: string, delay: string): Promise<void> {
  for (const zone of ZONES) {
    await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
      spec: { template: { metadata: { annotations: { version: '2', [READY_DELAY]: delay } } } },
    });
  }
  await waitRevisionsPending(kube, namespace);
}

async function setup(t: TestContext, replicas: number) {
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  await createGroup(kube, namespace, { all: { replicas } });
  await waitGroupSettled(kube, namespace);
  return { namespace, kube };
}

describe('stateward status on a cluster', { timeout: 180_000 }, () => {
  it('reports a rollout as the planner sees it: rolling, waiting for the replaced pod, then complete', async (t) => {
    const { namespace, kube } = await setup(t, 2);

    const settled = ingester(await report(namespace));
    assert.equal(settled.phase, 'complete');
    assert.equal(settled.action, 'idle');
    assert.deepEqual(
      settled.statefulSets.map((s) => [s.name, s.zone, s.updated, s.ready, s.replicas]),
      ZONES.map((z) => [`ingester-zone-${z}`, `zone-${z}`, 2, 2, 2]),
    );

    await newRevision(kube, namespace, '10s');
    const rolling = ingester(await report(namespace));
    assert.equal(rolling.phase, 'rolling');
    assert.equal(rolling.rolling, 'ingester-zone-a');
    assert.equal(rolling.action, 'rolling ingester-zone-a: deleting ingester-zone-a-0');
    assert.deepEqual(
      rolling.statefulSets.map((s) => [s.name, s.state, s.updated]),
      [
        ['ingester-zone-a', 'rolling', 0],
        ['ingester-zone-b', 'pending', 0],
        ['ingester-zone-c', 'pending', 0],
      ],
    );
    const table = await status(['-n', namespace, '--kubeconfig', cluster.kubeconfigPath]);
    assert.equal(table.code, 0, table.err);
    assert.match(table.out, /GROUP ingester {2}rolling {2}rolling ingester-zone-a: deleting ingester-zone-a-0/);

    // Do what the operator would: delete the first pod. Its replacement is on
    // the new revision and not Ready for 10s: the rollout must wait for it.
    await kube.delete(resources.pods, { namespace, name: 'ingester-zone-a-0' });
    const waiting = await waitFor(
      'the report to wait for the replaced pod',
      async () => {
        const group = ingester(await report(namespace));
        const a0 = group.statefulSets.find((s) => s.name === 'ingester-zone-a')?.podGrid.find((p) => p.ordinal === 0);
        return group.waitReason?.code === 'max-unavailable-reached' && a0?.updated && !a0.ready ? group : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    assert.equal(waiting.phase, 'waiting');
    assert.deepEqual(waiting.waitReason, {
      code: 'max-unavailable-reached',
      statefulSet: 'ingester-zone-a',
      message: 'waiting: 1 pod not Ready in ingester-zone-a (max unavailable 1)',
    });
    assert.equal(waiting.statefulSets[0]?.name, 'ingester-zone-a', 'the disrupted zone first');
    assert.equal(waiting.statefulSets[0]?.updated, 1);
    assert.equal(waiting.statefulSets[0]?.ready, 1);

    // Settle by hand: replace every other old pod at once.
    const old = (await kube.list<Pod>(resources.pods, { namespace })).items.filter(
      (p) => p.metadata?.name !== 'ingester-zone-a-0',
    );
    for (const pod of old) await kube.delete(resources.pods, { namespace, name: pod.metadata!.name! });
    const complete = await waitFor(
      'the report to say complete',
      async () => {
        const group = ingester(await report(namespace));
        return group.phase === 'complete' ? group : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    assert.equal(complete.waitReason, undefined);
    assert.deepEqual(
      complete.statefulSets.map((s) => [s.updated, s.ready]),
      [
        [2, 2],
        [2, 2],
        [2, 2],
      ],
    );
    assert.ok(complete.statefulSets.every((s) => s.podGrid.every((p) => p.updated && p.ready)));
  });

  it("shows a budget's pending eviction, and the rollout held by it", async (t) => {
    const { namespace, kube } = await setup(t, 1);
    const applied = await kubectl(cluster, 'apply', '-f', crd);
    assert.ok(applied.ok, applied.out);
    await createGroupBudget(kube, namespace);
    // An eviction of zone b's pod was just allowed: the ledger says so.
    const b0 = await kube.get<Pod>(resources.pods, { namespace, name: 'ingester-zone-b-0' });
    const entry = { [b0.metadata!.uid!]: { pod: 'ingester-zone-b-0', at: Date.now() } };
    await kube.create<Lease>(resources.leases, {
      metadata: {
        name: ledgerName('ingester'),
        namespace,
        labels: { [LEDGER_LABEL]: 'true' },
        annotations: { [LEDGER_ANNOTATION]: JSON.stringify(entry) },
      },
      spec: {},
    });
    await newRevision(kube, namespace, '1s');

    const r = await report(namespace);
    const [budget] = r.namespaces[0]!.budgets;
    assert.equal(budget?.name, 'ingester');
    assert.deepEqual(
      budget?.matchedStatefulSets,
      ZONES.map((z) => `ingester-zone-${z}`),
    );
    assert.deepEqual(
      budget?.pendingEvictions.map((p) => p.pod),
      ['ingester-zone-b-0'],
    );
    const group = ingester(r);
    assert.equal(group.phase, 'waiting');
    assert.equal(group.waitReason?.code, 'zpdb-denied');
    assert.equal(
      group.waitReason?.message,
      'waiting: deleting pod ingester-zone-a-0 would break its ZoneAwarePodDisruptionBudget: 1 pod not ready in ingester-zone-b',
    );
  });

  it('with a Role that may list only StatefulSets and pods: names each missing permission on stderr and shows the rest', async (t) => {
    const { namespace } = await setup(t, 1);
    const kc = cluster.clientNodeConfig();
    await kc
      .makeApiClient(CoreV1Api)
      .createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'reader' } } });
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'lister' },
        rules: [
          { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['list'] },
          { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'lister' },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace }],
      },
    });
    const kubeconfig = await cluster.serviceAccountKubeconfig(namespace, 'reader');

    // RBAC takes effect once the authorizer's cache sees the binding.
    const result = await waitFor(
      'the Role to be enforced',
      async () => {
        const r = await status(['--kubeconfig', kubeconfig]);
        return r.code === 0 && !/statefulsets|list pods/.test(r.err) ? r : undefined;
      },
      { timeoutMs: 20_000 },
    );
    // The namespace comes from the ServiceAccount kubeconfig's context.
    assert.match(result.out, new RegExp(`^NAMESPACE ${namespace}$`, 'm'));
    assert.match(result.out, /GROUP ingester {2}complete {2}idle/);
    assert.match(result.out, /ingester-zone-c +- +1\/1 +1\/1/);
    const warnings = result.err.trim().split('\n');
    assert.ok(
      warnings.every((w) => w.startsWith('warning: forbidden to list ')),
      result.err,
    );
    for (const missing of [
      'zoneawarepoddisruptionbudgets.rollout-operator.grafana.com',
      'leases.coordination.k8s.io',
      'deployments.apps',
      'daemonsets.apps',
      'configmaps',
      'secrets',
      'nodes',
    ]) {
      assert.ok(
        warnings.some((w) => w.includes(`(missing permission: list ${missing})`)),
        `a warning names list ${missing}:\n${result.err}`,
      );
    }
    assert.equal(warnings.length, 7);

    const json = await report(namespace, kubeconfig);
    assert.deepEqual(json.unreadable, [
      'configmaps',
      'daemonsets',
      'deployments',
      'leases',
      'nodes',
      'secrets',
      'zoneawarepoddisruptionbudgets',
    ]);
    assert.equal(ingester(json).statefulSets.length, 3);
  });

  it('says a namespace that does not exist does not exist (exit 1), instead of an empty report', async () => {
    const missing = await status(['-n', 'no-such-namespace-here', '--kubeconfig', cluster.kubeconfigPath]);
    assert.equal(missing.code, 1);
    assert.equal(missing.err, 'error: namespace "no-such-namespace-here" not found\n');
    assert.equal(missing.out, '');
  });
});
