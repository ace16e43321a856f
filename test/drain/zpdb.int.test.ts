// Zone-aware disruption budgets end to end: the real `kubectl drain` against
// the pod-eviction webhook on the real control plane, with an independent
// monitor checking that no more than one zone is ever disrupted.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import {
  resources,
  type ConfigMap,
  type Event,
  type KubeObject,
  type Lease,
  type Pod,
} from '../../src/runtime/kube/types.ts';
import { Informer } from '../../src/runtime/informer/informer.ts';
import { STATUS_CONFIGMAP, ZPDB_WAIT_CODE } from '../../src/rollout/status.ts';
import { zpdbResource } from '../../src/drain/zpdb/zpdbresource.ts';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { faketimeEnv, LIBFAKETIME } from '../support/faketime.ts';
import { RoundRobinProxy } from '../support/round-robin-proxy.ts';
import { evict, evictOnceAllowed, reviewEviction } from '../support/evictions.ts';
import {
  changeTemplate,
  createGroup,
  InvariantMonitor,
  isReady,
  testClient,
  waitGroupSettled,
  waitRolledOut,
  ZONES,
} from '../support/rollout-group.ts';
import { evictionWebhook, installLoopbackWebhook, loopbackWebhook } from '../support/webhooks.ts';
import { LEDGER_LABEL } from '../../src/vocabulary/keys.ts';

const cluster = testCluster();
const crd = fileURLToPath(new URL('../../deploy/crds/zone-aware-pod-disruption-budgets.yaml', import.meta.url));

const SELECTOR = { matchLabels: { 'rollout-group': 'ingester' } };

/**
 * Zones × 2 pods under a ZPDB (default maxUnavailable 1), `replicas`
 * operators behind one webhook address (eviction and ZPDB validation), and
 * a monitor.
 */
async function setup(
  t: TestContext,
  o: {
    replicas?: number;
    zones?: string[];
    spec?: Record<string, unknown>;
    readyDelay?: string;
    env?: (replica: number) => NodeJS.ProcessEnv;
  } = {},
) {
  const { replicas = 1, zones = ZONES, spec = { maxUnavailable: 1, selector: SELECTOR }, readyDelay = '4s' } = o;
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  // Drains select only this test's pods: other namespaces' pods on the node are not ours to move.
  const tag = randomBytes(4).toString('hex');
  await createGroup(
    kube,
    namespace,
    { all: { replicas: 2, readyDelay, podLabels: { 'stateward.dev/drain-test': tag } } },
    zones,
  );
  const applied = await kubectl(cluster, 'apply', '-f', crd);
  assert.ok(applied.ok, applied.out);
  const zpdb = {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'ZoneAwarePodDisruptionBudget',
    metadata: { name: 'ingester', namespace },
    spec,
  } as KubeObject;
  await waitFor('the ZPDB to be created', () => kube.create(zpdbResource, zpdb).catch(() => undefined), {
    timeoutMs: 30_000,
  });
  await waitGroupSettled(kube, namespace, 60_000, zones);
  const ports = await freePorts(replicas);
  const operators: OperatorProcess[] = [];
  for (const [i, port] of ports.entries()) {
    const op = await OperatorProcess.start(
      cluster,
      namespace,
      ['-server-tls.enabled', `-server-tls.port=${port}`, '-server-tls.self-signed-cert.dns-name=localhost'],
      { env: o.env?.(i) ?? {} },
    );
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
    webhooks: [
      evictionWebhook(namespace, port),
      loopbackWebhook({
        name: `zpdb-validation-${namespace}.grafana.com`,
        namespace,
        port,
        path: '/admission/zpdb-validation',
        sideEffects: 'None',
        rules: [
          {
            apiGroups: ['rollout-operator.grafana.com'],
            apiVersions: ['v1'],
            operations: ['CREATE', 'UPDATE'],
            resources: ['zoneawarepoddisruptionbudgets'],
            scope: 'Namespaced',
          },
        ],
      }),
    ],
  });
  const monitor = new InvariantMonitor(
    kube,
    namespace,
    Object.fromEntries(zones.map((z) => [`ingester-zone-${z}`, 1])),
  );
  await monitor.start();
  t.after(() => monitor.stop());
  return { namespace, kube, tag, monitor, operators, proxy, ports };
}

async function podsOf(kube: KubeClient, namespace: string): Promise<Pod[]> {
  return (await kube.list<Pod>(resources.pods, { namespace })).items;
}

function drain(node: string, tag: string, ...extra: string[]) {
  return kubectl(
    cluster,
    'drain',
    node,
    `--pod-selector=stateward.dev/drain-test=${tag}`,
    '--ignore-daemonsets',
    '--delete-emptydir-data',
    '--timeout=120s',
    ...extra,
  );
}

describe('zone-aware pod disruption budgets', () => {
  it("kubectl drain takes one zone at a time: the next zone's eviction waits until the first recovers", async (t) => {
    const { namespace, kube, tag, monitor } = await setup(t);
    const pods = await podsOf(kube, namespace);
    const nodeOf = (zone: string) =>
      pods.find((p) => p.metadata?.name?.startsWith(`ingester-zone-${zone}-`))!.spec!.nodeName!;
    const [nodeA, nodeB] = [nodeOf('a'), nodeOf('b')];
    t.after(() => cluster.uncordon(nodeA));
    t.after(() => cluster.uncordon(nodeB));

    // A server-side dry run changes nothing: no pod goes, no ledger is written.
    const dry = await drain(nodeA, tag, '--dry-run=server');
    assert.ok(dry.ok, dry.out);
    assert.equal(
      (await kube.list<Lease>(resources.leases, { namespace, labelSelector: `${LEDGER_LABEL}=true` })).items.length,
      0,
    );
    assert.equal(monitor.transitions.length, 0, 'no pod changed');
    assert.equal(
      (await kubectl(cluster, 'get', 'node', nodeA, '-o', 'jsonpath={.spec.unschedulable}')).out,
      '',
      'not even cordoned',
    );

    const drainA = drain(nodeA, tag);
    await waitFor(
      'a zone-a pod down',
      () => monitor.transitions.some((tr) => tr.pod.startsWith('ingester-zone-a-') && !tr.to.endsWith('/ready')),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    const zoneB = (await podsOf(kube, namespace)).find(
      (p) => p.metadata?.name?.startsWith('ingester-zone-b-') && isReady(p),
    )!;
    const refused = await evict(kube, namespace, zoneB.metadata!.name!);
    assert.equal(refused.code, 429, refused.message);
    assert.match(refused.message, /1 pod (not ready|unknown) in ingester-zone-a/);
    // kubectl retries refused evictions by itself; this one finishes once zone a is back.
    const drainB = drain(nodeB, tag);
    const [a, b] = await Promise.all([drainA, drainB]);
    assert.ok(a.ok, a.out);
    assert.ok(b.ok, b.out);
    assert.match(b.out, /evicted|drained/);
    await waitGroupSettled(kube, namespace);
    assert.deepEqual(monitor.violations, [], monitor.report());
    assert.equal(monitor.maxDisruptedAtOnce, 1);
    // A pod that no longer exists is "done" for kubectl (404), not an error that aborts a drain.
    const gone = await evict(kube, namespace, 'ingester-zone-c-9');
    assert.equal(gone.code, 404, gone.message);
  });

  it('two operator replicas serving one budget never allow two disruptions at once, under 20 concurrent evictions', async (t) => {
    const { namespace, kube, monitor, proxy, operators } = await setup(t, { replicas: 2 });
    const pods = (await podsOf(kube, namespace)).map((p) => p.metadata!.name!);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => evict(kube, namespace, pods[i % pods.length]!)),
    );
    const allowed = results.filter((r) => r.code === 201).length;
    assert.ok(allowed >= 1, 'some eviction went through');
    // 404: a repeat for a pod already evicted and gone.
    const expected = (r: { code: number }) => r.code === 201 || r.code === 429 || r.code === 404;
    assert.ok(results.every(expected), JSON.stringify(results.filter((r) => !expected(r))));
    await waitGroupSettled(kube, namespace);
    assert.deepEqual(
      monitor.violations,
      [],
      `${monitor.report()}\nallowed:\n${operators
        .map((op, n) =>
          op.logs
            .split('\n')
            .filter((line) => line.includes('eviction allowed'))
            .map((line) => `replica ${n}: ${line}`)
            .join('\n'),
        )
        .join('\n')}`,
    );
    assert.equal(monitor.maxDisruptedAtOnce, 1);
    assert.ok(
      proxy!.counts.every((c) => c > 0),
      `both replicas were asked: ${proxy!.counts.join(', ')}`,
    );
    // Both replicas judged requests (not just accepted connections).
    for (const op of operators)
      assert.ok(
        ((await op.metric('rollout_operator_zpdb_eviction_requests_total{reason="denied",status="429"}')) ?? 0) +
          ((await op.metric('rollout_operator_zpdb_eviction_requests_total{reason="allowed",status="200"}')) ?? 0) >
          0,
      );
  });

  it('replicas whose wall clocks disagree by 10 minutes share one ledger: an allow recorded by the one behind still holds the zone', async (t) => {
    assert.ok(existsSync(LIBFAKETIME), `${LIBFAKETIME} is installed (.ci/run installs Debian's faketime)`);
    // Replica 0 runs 10 minutes behind (libfaketime; its monotonic clock is untouched).
    const { namespace, ports } = await setup(t, {
      replicas: 2,
      env: (i) => (i === 0 ? faketimeEnv({ fixed: '-10m' }) : {}),
    });
    // Reviews straight to each replica; nothing deletes the pod, so only the ledger remembers the allow.
    const first = await reviewEviction(ports[0]!, namespace, 'ingester-zone-a-0');
    assert.equal(first.allowed, true, first.message);
    const second = await reviewEviction(ports[1]!, namespace, 'ingester-zone-a-1');
    assert.equal(second.allowed, false, 'the other pod of the zone is refused while the first eviction is pending');
    assert.equal(second.code, 429);
    assert.match(second.message ?? '', /ingester-zone-a/);
    const otherZone = await reviewEviction(ports[1]!, namespace, 'ingester-zone-b-0');
    assert.equal(otherZone.allowed, false, 'and so is every other zone');
  });

  it('partition mode: a partition is disrupted in one zone at a time, other partitions are free; invalid budgets are refused', async (t) => {
    const { namespace, kube } = await setup(t, {
      zones: ['a', 'b'],
      spec: { maxUnavailable: 1, podNamePartitionRegex: '[a-z\\-]+-zone-[a-z]-([0-9]+)', selector: SELECTOR },
    });
    const invalid = {
      apiVersion: 'rollout-operator.grafana.com/v1',
      kind: 'ZoneAwarePodDisruptionBudget',
      metadata: { name: 'broken', namespace },
      spec: { maxUnavailable: 1, maxUnavailablePercentage: 50, selector: SELECTOR },
    } as KubeObject;
    await assert.rejects(
      kube.create(zpdbResource, invalid),
      /invalid value: only one of maxUnavailable or maxUnavailablePercentage may be set/,
    );
    assert.equal((await evict(kube, namespace, 'ingester-zone-a-0')).code, 201);
    const b0 = await evict(kube, namespace, 'ingester-zone-b-0');
    assert.equal(b0.code, 429);
    // Evicted pods show as terminating (not ready) or, once gone, missing (unknown).
    assert.match(b0.message, /1 pod (not ready|unknown) in partition 0/);
    assert.equal((await evict(kube, namespace, 'ingester-zone-b-1')).code, 201, 'another partition is free');
    const a1 = await evict(kube, namespace, 'ingester-zone-a-1');
    assert.equal(a1.code, 429);
    assert.match(a1.message, /1 pod (not ready|unknown) in partition 1/);
    await waitGroupSettled(kube, namespace, 60_000, ['a', 'b']);
    // The operator's caches see a-0 Ready a moment after the API does; kubectl would retry too.
    await evictOnceAllowed(kube, namespace, 'ingester-zone-b-0', 'b-0 allowed once a-0 is back');
  });

  it('crossZoneEvictionDelay: the same partition in another zone waits until the recovered pod has been Ready that long', async (t) => {
    const DELAY_MS = 6000;
    const { namespace, kube } = await setup(t, {
      zones: ['a', 'b'],
      readyDelay: '1s',
      spec: {
        maxUnavailable: 1,
        podNamePartitionRegex: '[a-z\\-]+-zone-[a-z]-([0-9]+)',
        crossZoneEvictionDelay: '6s',
        selector: SELECTOR,
      },
    });
    // The first eviction waits out the initial window after the pods became Ready.
    await waitFor('a-0 evicted', async () => (await evict(kube, namespace, 'ingester-zone-a-0')).code === 201, {
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    const readyAt = await waitFor(
      'the new a-0 Ready',
      async () => {
        const pod = await kube
          .get<Pod>(resources.pods, { namespace, name: 'ingester-zone-a-0' })
          .catch(() => undefined);
        const ready =
          pod && isReady(pod) ? pod.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime : undefined;
        return ready ? Date.parse(ready) : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    assert.equal((await evict(kube, namespace, 'ingester-zone-b-1')).code, 201, 'another partition is unaffected');
    const first = await evict(kube, namespace, 'ingester-zone-b-0');
    assert.equal(first.code, 429, 'the same partition waits for the delay');
    const allowedAt = await waitFor(
      'b-0 evicted',
      async () => ((await evict(kube, namespace, 'ingester-zone-b-0')).code === 201 ? Date.now() : undefined),
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    // Condition times have one-second resolution.
    assert.ok(allowedAt - readyAt >= DELAY_MS - 1000, `allowed ${allowedAt - readyAt} ms after a-0 became Ready`);
  });

  it('a rollout goes through under a ZPDB, and its deletes count against the budget evictions see', async (t) => {
    const { namespace, kube, monitor, operators } = await setup(t, { spec: { maxUnavailable: 1, selector: SELECTOR } });
    // rollout-max-unavailable 2 in zone a, but the ZPDB allows 1: the budget wins.
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-a' }, 'merge', {
      metadata: { annotations: { 'rollout-max-unavailable': '2' } },
    });
    // The group's published status says when the budget is what it waits for.
    const waits = new Set<string>();
    const statuses = new Informer<ConfigMap>({
      client: kube,
      type: resources.configMaps,
      namespace,
      fieldSelector: `metadata.name=${STATUS_CONFIGMAP}`,
    });
    const seen = (cm: ConfigMap) => {
      const code = (JSON.parse(cm.data?.['ingester'] ?? '{}') as { waitingFor?: { code?: string } }).waitingFor?.code;
      if (code) waits.add(code);
    };
    statuses.addHandlers({ onAdd: seen, onUpdate: (_old, cm) => seen(cm) });
    statuses.start();
    t.after(() => statuses.stop());
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    await waitRolledOut(kube, namespace);
    assert.deepEqual(monitor.violations, [], monitor.report());
    assert.ok(waits.has(ZPDB_WAIT_CODE), `the status said the budget held the group (saw ${[...waits].join(', ')})`);
    const allowed = await operators[0]!.metric(
      'rollout_operator_zpdb_eviction_requests_total{reason="allowed",status="200"}',
    );
    assert.ok((allowed ?? 0) >= 6, `every rolling delete was judged against the budget (${allowed})`);
  });

  it('an invalid budget that got into the cluster fails closed: evictions of its pods are denied (403, kubectl drain stops and says why), with a Warning Event on it, until it is fixed', async (t) => {
    // Created before the operator and its validation webhook: the CRD schema alone lets it in.
    const { namespace, kube, tag, monitor, operators } = await setup(t, {
      zones: ['a', 'b'],
      spec: { maxUnavailable: 1, maxUnavailablePercentage: 50, selector: SELECTOR },
    });
    const problem = 'invalid value: only one of maxUnavailable or maxUnavailablePercentage may be set';
    const denial = `ZoneAwarePodDisruptionBudget ${namespace}/ingester is invalid, evictions of the pods it selects are denied until it is fixed: ${problem}`;
    // Was: ignored, and these three evictions across two zones were all allowed.
    for (const pod of ['ingester-zone-a-0', 'ingester-zone-a-1', 'ingester-zone-b-0']) {
      const refused = await evict(kube, namespace, pod);
      assert.equal(refused.code, 403, `${pod}: ${refused.message}`);
      assert.ok(refused.message.endsWith(denial), refused.message);
    }
    const pods = await podsOf(kube, namespace);
    const node = pods.find((p) => p.metadata?.name === 'ingester-zone-b-1')!.spec!.nodeName!;
    t.after(() => cluster.uncordon(node));
    const drained = await drain(node, tag);
    assert.equal(drained.ok, false, drained.out);
    assert.ok(drained.out.includes(denial), drained.out);
    assert.equal(monitor.transitions.length, 0, 'no pod went down');

    const event = await waitFor(
      'the InvalidBudget Event',
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find((e) => e.reason === 'InvalidBudget'),
      { timeoutMs: 20_000 },
    );
    assert.equal(event.type, 'Warning');
    assert.equal(event.regarding?.name, 'ingester');
    assert.equal(event.note, `invalid, evictions of the pods it selects are denied until it is fixed: ${problem}`);
    const op = operators[0]!;
    assert.equal(await op.metric('rollout_operator_zpdb_configurations_observed_total{result="invalid"}'), 1);
    assert.ok(
      ((await op.metric('rollout_operator_zpdb_eviction_requests_total{reason="invalid-zpdb",status="403"}')) ?? 0) >=
        4,
    );

    // Fixed (through the validation webhook, which is installed now): the budget limits evictions again.
    await kube.patch(zpdbResource, { namespace, name: 'ingester' }, 'merge', {
      spec: { maxUnavailablePercentage: null },
    });
    await evictOnceAllowed(kube, namespace, 'ingester-zone-a-0', 'a-0 evicted under the fixed budget');
    const b0 = await evict(kube, namespace, 'ingester-zone-b-0');
    assert.equal(b0.code, 429, b0.message);
    await waitGroupSettled(kube, namespace, 60_000, ['a', 'b']);
    assert.deepEqual(monitor.violations, [], monitor.report());
  });

  it('unhealthyPodEvictionPolicy AlwaysAllow: a crash-looping pod is evicted while another zone is down too (refused under the default); Ready pods still wait', async (t) => {
    const { namespace, kube, operators } = await setup(t, { zones: ['a', 'b'] });
    // One pod crash-looping in each zone: under the default every eviction waits for the other zone.
    for (const name of ['ingester-zone-b-0', 'ingester-zone-a-0'])
      await kube.patch(resources.pods, { namespace, name }, 'merge', {
        metadata: { labels: { 'stateward.dev/simulate': 'crash-loop' } },
      });
    await waitFor(
      'a-0 and b-0 crash-looping',
      async () =>
        (await podsOf(kube, namespace)).filter(
          (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CrashLoopBackOff',
        ).length === 2,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // A dry run tells when the operator's caches have seen zone b go down (it records and deletes nothing).
    await waitFor(
      'a-0 refused on account of zone b',
      async () => /ingester-zone-b/.test((await evict(kube, namespace, 'ingester-zone-a-0', true)).message),
      { timeoutMs: 15_000, intervalMs: 250 },
    );
    const refused = await evict(kube, namespace, 'ingester-zone-a-0');
    assert.equal(refused.code, 429, refused.message);
    assert.match(refused.message, /1 pod not ready in ingester-zone-b/);

    // The CRD's schema names the two policies; the validation webhook would too.
    await assert.rejects(
      kube.patch(zpdbResource, { namespace, name: 'ingester' }, 'merge', {
        spec: { unhealthyPodEvictionPolicy: 'Always' },
      }),
      /unhealthyPodEvictionPolicy: Unsupported value: "Always"/,
    );
    await kube.patch(zpdbResource, { namespace, name: 'ingester' }, 'merge', {
      spec: { unhealthyPodEvictionPolicy: 'AlwaysAllow' },
    });
    // Retried until the operator has the new generation.
    await evictOnceAllowed(kube, namespace, 'ingester-zone-a-0', 'a-0 evicted under AlwaysAllow');
    // A Ready pod still goes through the budget: zone b is down.
    const ready = await evict(kube, namespace, 'ingester-zone-a-1');
    assert.equal(ready.code, 429, ready.message);
    assert.match(ready.message, /1 pod not ready in ingester-zone-b/);
    // And zone b's crash-looping pod goes too, though zone a is down now.
    const b0 = await evict(kube, namespace, 'ingester-zone-b-0');
    assert.equal(b0.code, 201, b0.message);

    const op = operators[0]!;
    assert.equal(
      await op.metric(
        'rollout_operator_zpdb_eviction_requests_total{reason="unhealthy-pod-always-allow",status="200"}',
      ),
      2,
    );
    assert.match(
      op.logs,
      /unhealthyPodEvictionPolicy is AlwaysAllow: evicted without spending the budget \(the budget alone would refuse: 1 pod not ready in ingester-zone-b\)/,
    );
    // Recreated from the template (no crash-loop label), both come back.
    await waitGroupSettled(kube, namespace, 60_000, ['a', 'b']);
  });
});
