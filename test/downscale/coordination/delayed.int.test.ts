// Delayed downscale end to end: a StatefulSet mirrors a ReplicaTemplate that
// the real kubectl scales; Stateward asks the leaving pods (simulated on
// their kwok loopback IPs) when they were first prepared and removes only
// the tail whose delay has passed; an upscale withdraws it with DELETE; a
// hanging pod holds back only its own group.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { resources, type Event, type KubeObject, type Pod, type StatefulSet } from '../../../src/runtime/kube/types.ts';
import { freePorts } from '../../cluster/ports.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';
import { kubectl } from '../../support/kubectl.ts';
import { OperatorProcess } from '../../support/operator-process.ts';
import { PodEndpoints } from '../../support/pod-endpoints.ts';
import { createReplicaTemplate, mirrorAnnotations, REPLICA_TEMPLATE } from '../../support/replica-templates.ts';
import { createGroup, testClient, waitGroupSettled } from '../../support/rollout-group.ts';

const cluster = testCluster();
const HOUR_S = 3600;

/**
 * Zones (each its own rollout group, mirroring ReplicaTemplate `tmpl-<zone>`
 * with a 1h delayed downscale), their pods served as endpoints, and one
 * operator.
 */
async function setup(t: TestContext, zones: string[], replicas: number, flags: string[] = []) {
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  const [port] = (await freePorts(1)) as [number];
  for (const zone of zones) await createReplicaTemplate(cluster, kube, namespace, `tmpl-${zone}`, replicas);
  await createGroup(
    kube,
    namespace,
    Object.fromEntries(zones.map((z) => [z, { replicas, group: `group-${z}` }])),
    zones,
  );
  await waitGroupSettled(kube, namespace, 60_000, zones);
  const pods = (await kube.list<Pod>(resources.pods, { namespace })).items.map((p) => ({
    name: p.metadata!.name!,
    ip: p.status!.podIP!,
  }));
  const endpoints = new PodEndpoints();
  await endpoints.serve(pods, port);
  t.after(() => endpoints.close());
  for (const zone of zones) {
    await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
      metadata: {
        annotations: {
          ...mirrorAnnotations(`tmpl-${zone}`),
          'grafana.com/rollout-delayed-downscale': '1h',
          'grafana.com/rollout-prepare-delayed-downscale-url': `http://pod.invalid:${port}/prepare-delayed-downscale`,
        },
      },
    });
  }
  const operator = await OperatorProcess.start(cluster, namespace, ['-reconcile.interval=1s', ...flags]);
  t.after(() => operator.stop());
  await operator.waitReady();
  return { namespace, kube, endpoints, operator };
}

/** Stateward withdraws any earlier preparation on first sight; a test backdating one must wait for that. */
async function waitFirstCancel(endpoints: PodEndpoints, pods: string[]): Promise<void> {
  await waitFor(
    'a DELETE to every pod',
    () => pods.every((pod) => endpoints.callsTo(pod).includes('DELETE /prepare-delayed-downscale')),
    { timeoutMs: 20_000 },
  );
}

async function replicasOf(namespace: string, zone: string): Promise<number | undefined> {
  return (
    await testClient(cluster).get<StatefulSet>(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` })
  ).spec?.replicas;
}

async function templateStatus(namespace: string, zone: string): Promise<number | undefined> {
  const template = await testClient(cluster).get<KubeObject & { status?: { replicas?: number } }>(REPLICA_TEMPLATE, {
    namespace,
    name: `tmpl-${zone}`,
  });
  return template.status?.replicas;
}

async function scaleTemplate(namespace: string, zone: string, replicas: number): Promise<void> {
  const scaled = await kubectl(
    cluster,
    '-n',
    namespace,
    'scale',
    'replicatemplate',
    `tmpl-${zone}`,
    `--replicas=${replicas}`,
  );
  assert.ok(scaled.ok, scaled.out);
}

async function eventsOf(namespace: string, reason: string): Promise<Event[]> {
  return (await testClient(cluster).list<Event>(resources.events, { namespace })).items.filter(
    (e) => e.reason === reason,
  );
}

describe('delayed downscale', () => {
  it('removes only the tail of pods prepared for the whole delay, and an upscale cancels it with DELETE', async (t) => {
    const { namespace, endpoints } = await setup(t, ['a'], 5);
    const zone = (i: number) => `ingester-zone-a-${i}`;
    // On first sight nothing is being scaled down: any earlier preparation is withdrawn.
    await waitFirstCancel(endpoints, [0, 1, 2, 3, 4].map(zone));
    const start = endpoints.calls.length;
    const since = (pod: string) =>
      endpoints.calls
        .slice(start)
        .filter((c) => c.pod === pod)
        .map((c) => `${c.method} ${c.path}`);
    const now = Math.floor(Date.now() / 1000);
    // Pod 3 was prepared 2h ago; pod 4, the last one, has not been prepared yet.
    endpoints.preparedAt.set(zone(3), now - 2 * HOUR_S);
    await scaleTemplate(namespace, 'a', 2);
    const waiting = await waitFor(
      'the waiting Event',
      async () => (await eventsOf(namespace, 'DelayedDownscaleWaiting'))[0],
      { timeoutMs: 20_000 },
    );
    assert.match(
      waiting.note ?? '',
      /not scaling ingester-zone-a from 5 to 2 yet: configured downscale delay 1h0m0s has not been reached for any pods at the end of statefulset replicas range/,
    );
    assert.equal(await replicasOf(namespace, 'a'), 5, 'the last pod is not past the delay: nothing may go');
    assert.ok(endpoints.preparedAt.has(zone(4)) && endpoints.preparedAt.has(zone(2)), 'the leaving pods were asked');
    assert.equal(endpoints.preparedAt.get(zone(3)), now - 2 * HOUR_S, 'an earlier preparation is kept');
    for (const i of [0, 1])
      assert.ok(
        since(zone(i)).every((c) => c === 'DELETE /prepare-delayed-downscale'),
        'staying pods only get DELETE',
      );
    for (const i of [2, 3, 4])
      assert.ok(
        since(zone(i)).length > 0 && since(zone(i)).every((c) => c === 'POST /prepare-delayed-downscale'),
        'leaving pods only get POST',
      );
    assert.equal(
      endpoints.calls.find((c) => c.pod === zone(4))!.host,
      `${zone(4)}.ingester-zone-a.${namespace}.svc.cluster.local.:${endpoints.calls[0]!.host.split(':').at(-1)}`,
    );

    // Pod 4 too is now past the delay, pod 2 is not: the tail of two goes.
    endpoints.preparedAt.set(zone(4), now - 2 * HOUR_S);
    await waitFor('zone a at 3 replicas', async () => (await replicasOf(namespace, 'a')) === 3, { timeoutMs: 20_000 });
    await waitFor('status.replicas written back', async () => (await templateStatus(namespace, 'a')) === 3, {
      timeoutMs: 20_000,
    });
    assert.equal(await replicasOf(namespace, 'a'), 3, 'pod 2 stays until its own delay has passed');

    // Back up to 5: at once, and the still-prepared pod 2 is told to cancel.
    const before = endpoints.calls.length;
    await scaleTemplate(namespace, 'a', 5);
    await waitFor('zone a back at 5', async () => (await replicasOf(namespace, 'a')) === 5, { timeoutMs: 20_000 });
    await waitFor('pod 2 cancelled', () => !endpoints.preparedAt.has(zone(2)), { timeoutMs: 20_000 });
    const after = endpoints.calls
      .slice(before)
      .filter((c) => c.pod === zone(2))
      .map((c) => c.method);
    assert.equal(after.at(-1), 'DELETE');
    await waitFor('status.replicas written back', async () => (await templateStatus(namespace, 'a')) === 5, {
      timeoutMs: 20_000,
    });
  });

  it('a hanging pod holds back only its own group; a failing one gets a Warning Event', async (t) => {
    // Pod calls may take 60 s here: far longer than the whole test may wait.
    const { namespace, endpoints, operator } = await setup(t, ['a', 'b', 'c'], 2, ['-pods.client-timeout=60s']);
    await waitFirstCancel(
      endpoints,
      ['a', 'b', 'c'].flatMap((zone) => [`ingester-zone-${zone}-0`, `ingester-zone-${zone}-1`]),
    );
    const now = Math.floor(Date.now() / 1000);
    for (const zone of ['a', 'b', 'c']) endpoints.preparedAt.set(`ingester-zone-${zone}-1`, now - 2 * HOUR_S);
    endpoints.hang.add('ingester-zone-a-1');
    endpoints.status.set('ingester-zone-c-1', 500);
    for (const zone of ['a', 'b', 'c']) await scaleTemplate(namespace, zone, 1);
    await waitFor('zone b at 1 replica', async () => (await replicasOf(namespace, 'b')) === 1, { timeoutMs: 20_000 });
    const failed = await waitFor(
      'the Warning Event for zone c',
      async () => (await eventsOf(namespace, 'DelayedDownscaleFailed'))[0],
      { timeoutMs: 20_000 },
    );
    assert.equal(failed.type, 'Warning');
    assert.match(
      failed.note ?? '',
      /not scaling ingester-zone-c from 2 to 1 yet: failed prepare pods for delayed downscale: pod ordinal 1: HTTP POST request returned non-2xx status code: 500/,
    );
    assert.equal(await replicasOf(namespace, 'a'), 2, 'zone a still waits for its pod');
    assert.equal(await replicasOf(namespace, 'c'), 2);
    assert.ok(endpoints.callsTo('ingester-zone-a-1').length >= 1, 'zone a asked its pod and is waiting on it');
    // Not even zone a's own group waits: its reconciles keep completing while the call hangs.
    const lastReconcile = () =>
      operator.metric('rollout_operator_last_successful_group_reconcile_timestamp_seconds{rollout_group="group-a"}');
    const first = (await lastReconcile()) ?? 0;
    await waitFor('another completed reconcile of group-a', async () => ((await lastReconcile()) ?? 0) > first, {
      timeoutMs: 10_000,
    });
    // The pod recovers: zone c goes down on a later reconcile.
    endpoints.status.delete('ingester-zone-c-1');
    await waitFor('zone c at 1 replica', async () => (await replicasOf(namespace, 'c')) === 1, { timeoutMs: 20_000 });
  });
});
