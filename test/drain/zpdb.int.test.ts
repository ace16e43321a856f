// Zone-aware disruption budgets end to end: the real `kubectl drain` against
// the pod-eviction webhook on the real control plane, with an independent
// monitor checking that no more than one zone is ever disrupted.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../src/runtime/kube/errors.ts';
import { resources, type KubeObject, type Lease, type Pod } from '../../src/runtime/kube/types.ts';
import { zpdbResource } from '../../src/drain/zpdb/config.ts';
import { LEDGER_LABEL } from '../../src/drain/zpdb/ledger.ts';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { RoundRobinProxy } from '../support/round-robin-proxy.ts';
import { createGroup, InvariantMonitor, testClient, waitGroupSettled, ZONES } from '../support/rollout-group.ts';
import { installLoopbackWebhook, loopbackWebhook } from '../support/webhooks.ts';

const cluster = testCluster();
const crd = fileURLToPath(new URL('../../deploy/crds/zone-aware-pod-disruption-budgets.yaml', import.meta.url));
const isReady = (p: Pod) => !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

/** 3 zones × 2 pods under a ZPDB of maxUnavailable 1, `replicas` operators behind one webhook address, and a monitor. */
async function setup(t: TestContext, replicas = 1) {
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  // Drains select only this test's pods: other namespaces' pods on the node are not ours to move.
  const tag = randomBytes(4).toString('hex');
  await createGroup(kube, namespace, { all: { replicas: 2, readyDelay: '4s', podLabels: { 'stateward.dev/drain-test': tag } } });
  const applied = await kubectl(cluster, 'apply', '-f', crd);
  assert.ok(applied.ok, applied.out);
  const zpdb = { apiVersion: 'rollout-operator.grafana.com/v1', kind: 'ZoneAwarePodDisruptionBudget', metadata: { name: 'ingester', namespace }, spec: { maxUnavailable: 1, selector: { matchLabels: { 'rollout-group': 'ingester' } } } } as KubeObject;
  await waitFor('the ZPDB to be created', () => kube.create(zpdbResource, zpdb).catch(() => undefined), { timeoutMs: 30_000 });
  await waitGroupSettled(kube, namespace);
  const ports = await freePorts(replicas);
  const operators: OperatorProcess[] = [];
  for (const port of ports) {
    const op = await OperatorProcess.start(cluster, namespace, ['-server-tls.enabled', `-server-tls.port=${port}`, '-server-tls.self-signed-cert.dns-name=localhost']);
    t.after(() => op.stop());
    operators.push(op);
  }
  await Promise.all(operators.map((o) => o.waitReady()));
  let port = ports[0]!;
  let proxy: RoundRobinProxy | undefined;
  if (replicas > 1) {
    proxy = new RoundRobinProxy(ports);
    port = await proxy.listen();
    t.after(() => proxy?.close());
  }
  await installLoopbackWebhook(t, kube, {
    name: `pod-eviction-${namespace}`,
    namespace,
    validating: true,
    webhooks: [loopbackWebhook({
      name: `pod-eviction-${namespace}.grafana.com`,
      namespace,
      port,
      path: '/admission/pod-eviction',
      sideEffects: 'NoneOnDryRun',
      rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods/eviction'], scope: 'Namespaced' }],
    })],
  });
  const monitor = new InvariantMonitor(kube, namespace, Object.fromEntries(ZONES.map((z) => [`ingester-zone-${z}`, 1])));
  await monitor.start();
  t.after(() => monitor.stop());
  return { namespace, kube, tag, monitor, operators, proxy };
}

async function podsOf(kube: KubeClient, namespace: string): Promise<Pod[]> {
  return (await kube.list<Pod>(resources.pods, { namespace })).items;
}

/** POST an Eviction; resolves to the HTTP code (201 when allowed). */
async function evict(kube: KubeClient, namespace: string, name: string, dryRun = false): Promise<{ code: number; message: string }> {
  try {
    await kube.request('POST', `/api/v1/namespaces/${namespace}/pods/${name}/eviction`, {
      body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace }, ...(dryRun ? { deleteOptions: { dryRun: ['All'] } } : {}) },
    });
    return { code: 201, message: '' };
  } catch (error) {
    if (error instanceof KubeApiError) return { code: error.code, message: error.message };
    throw error;
  }
}

function drain(node: string, tag: string, ...extra: string[]) {
  return kubectl(cluster, 'drain', node, `--pod-selector=stateward.dev/drain-test=${tag}`, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=120s', ...extra);
}

describe('zone-aware pod disruption budgets', () => {
  it('kubectl drain takes one zone at a time: the next zone\'s eviction waits until the first recovers', async (t) => {
    const { namespace, kube, tag, monitor } = await setup(t);
    const pods = await podsOf(kube, namespace);
    const nodeOf = (zone: string) => pods.find((p) => p.metadata?.name?.startsWith(`ingester-zone-${zone}-`))!.spec!.nodeName!;
    const [nodeA, nodeB] = [nodeOf('a'), nodeOf('b')];
    t.after(() => cluster.uncordon(nodeA));
    t.after(() => cluster.uncordon(nodeB));

    // A server-side dry run changes nothing: no pod goes, no ledger is written.
    const dry = await drain(nodeA, tag, '--dry-run=server');
    assert.ok(dry.ok, dry.out);
    assert.equal((await kube.list<Lease>(resources.leases, { namespace, labelSelector: `${LEDGER_LABEL}=true` })).items.length, 0);
    assert.equal(monitor.transitions.length, 0, 'no pod changed');
    assert.equal((await kubectl(cluster, 'get', 'node', nodeA, '-o', 'jsonpath={.spec.unschedulable}')).out, '', 'not even cordoned');

    const drainA = drain(nodeA, tag);
    await waitFor('a zone-a pod down', () => monitor.transitions.some((tr) => tr.pod.startsWith('ingester-zone-a-') && !tr.to.endsWith('/ready')), { timeoutMs: 30_000, intervalMs: 20 });
    const zoneB = (await podsOf(kube, namespace)).find((p) => p.metadata?.name?.startsWith('ingester-zone-b-') && isReady(p))!;
    const refused = await evict(kube, namespace, zoneB.metadata!.name!);
    assert.equal(refused.code, 429, refused.message);
    assert.match(refused.message, /1 pod not ready in ingester-zone-a/);
    // kubectl retries refused evictions by itself; this one finishes once zone a is back.
    const drainB = drain(nodeB, tag);
    const [a, b] = await Promise.all([drainA, drainB]);
    assert.ok(a.ok, a.out);
    assert.ok(b.ok, b.out);
    assert.match(b.out, /evicted|drained/);
    await waitGroupSettled(kube, namespace);
    assert.deepEqual(monitor.violations, []);
    assert.equal(monitor.maxDisruptedAtOnce, 1);
    // A pod that no longer exists is "done" for kubectl (404), not an error that aborts a drain.
    const gone = await evict(kube, namespace, 'ingester-zone-c-9');
    assert.equal(gone.code, 404, gone.message);
  });

  it('two operator replicas serving one budget never allow two disruptions at once, under 20 concurrent evictions', async (t) => {
    const { namespace, kube, monitor, proxy, operators } = await setup(t, 2);
    const pods = (await podsOf(kube, namespace)).map((p) => p.metadata!.name!);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => evict(kube, namespace, pods[i % pods.length]!)));
    const allowed = results.filter((r) => r.code === 201).length;
    assert.ok(allowed >= 1, 'some eviction went through');
    // 404: a repeat for a pod already evicted and gone.
    const expected = (r: { code: number }) => r.code === 201 || r.code === 429 || r.code === 404;
    assert.ok(results.every(expected), JSON.stringify(results.filter((r) => !expected(r))));
    await waitGroupSettled(kube, namespace);
    assert.deepEqual(monitor.violations, []);
    assert.equal(monitor.maxDisruptedAtOnce, 1);
    assert.ok(proxy!.counts.every((c) => c > 0), `both replicas were asked: ${proxy!.counts.join(', ')}`);
    // Both replicas judged requests (not just accepted connections).
    for (const op of operators) assert.ok(((await op.metric('rollout_operator_zpdb_eviction_requests_total{reason="denied",status="429"}')) ?? 0) + ((await op.metric('rollout_operator_zpdb_eviction_requests_total{reason="allowed",status="200"}')) ?? 0) > 0);
  });
});
