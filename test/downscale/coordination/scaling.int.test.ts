// Replica coordination end to end: the real kubectl scales a leader or a
// ReplicaTemplate, and Stateward moves the followers and mirrors.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { resources, type Event, type StatefulSet } from '../../../src/runtime/kube/types.ts';
import { freePorts } from '../../cluster/ports.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';
import { kubectl } from '../../support/kubectl.ts';
import { OperatorProcess } from '../../support/operator-process.ts';
import { serveNamespacePods } from '../../support/pod-endpoints.ts';
import { installLoopbackWebhook, loopbackWebhook } from '../../support/webhooks.ts';
import { createReplicaTemplate, mirrorAnnotations } from '../../support/replica-templates.ts';
import { createGroup, testClient, waitGroupSettled } from '../../support/rollout-group.ts';

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
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', {
      metadata: { annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-a' } },
    });
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-c' }, 'merge', {
      metadata: { annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-b' } },
    });
    await waitGroupSettled(kube, namespace);
    const op = await operator(t, namespace);
    assert.ok((await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=4')).ok);
    await waitFor(
      'followers at 4',
      async () => JSON.stringify(await replicas(namespace)) === JSON.stringify({ a: 4, b: 4, c: 4 }),
      { timeoutMs: 20_000 },
    );
    // The API shows the new replicas before the operator's log line arrives through the pipe.
    const upLines = () => op.logs.split('\n').filter((l) => /scaled ingester-zone-[bc] from 2 to 4/.test(l));
    await waitFor('both followers logged as scaled', () => upLines().length >= 2, { timeoutMs: 5000 });
    assert.equal(upLines().length, 2, 'each follower patched once');
    assert.ok((await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=1')).ok);
    await waitFor(
      'followers at 1',
      async () => JSON.stringify(await replicas(namespace)) === JSON.stringify({ a: 1, b: 1, c: 1 }),
      { timeoutMs: 20_000 },
    );
  });

  it('mirrors a ReplicaTemplate that kubectl scales, and writes status.replicas back', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await createReplicaTemplate(cluster, kube, namespace, 'ingester', 2);
    await createGroup(kube, namespace, { all: { replicas: 2 } }, ['a']);
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-a' }, 'merge', {
      metadata: { annotations: mirrorAnnotations('ingester') },
    });
    await operator(t, namespace);
    assert.ok((await kubectl(cluster, '-n', namespace, 'scale', 'replicatemplate', 'ingester', '--replicas=3')).ok);
    await waitFor('zone a at 3', async () => (await replicas(namespace))['a'] === 3, { timeoutMs: 20_000 });
    await waitFor(
      'status.replicas written back',
      async () =>
        (
          await kubectl(
            cluster,
            '-n',
            namespace,
            'get',
            'replicatemplate',
            'ingester',
            '-o',
            'jsonpath={.status.replicas}',
          )
        ).out === '3',
      { timeoutMs: 20_000 },
    );
  });

  it('moves a 3-zone chain down zone by zone, min-time apart, through the prepare-downscale webhook, and up at once', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const [podPort, webhookPort] = (await freePorts(2)) as [number, number];
    await createGroup(kube, namespace, { all: { replicas: 2 } });
    for (const [zone, leader] of [
      ['a', undefined],
      ['b', 'a'],
      ['c', 'b'],
    ] as const) {
      await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
        metadata: {
          labels: { 'grafana.com/prepare-downscale': 'true', 'grafana.com/min-time-between-zones-downscale': '4s' },
          annotations: {
            'grafana.com/prepare-downscale-http-path': 'prepare-shutdown',
            'grafana.com/prepare-downscale-http-port': String(podPort),
            ...(leader ? { 'grafana.com/rollout-downscale-leader': `ingester-zone-${leader}` } : {}),
          },
        },
      });
    }
    await waitGroupSettled(kube, namespace);
    const op = await OperatorProcess.start(cluster, namespace, [
      '-reconcile.interval=1s',
      '-server-tls.enabled',
      `-server-tls.port=${webhookPort}`,
      '-server-tls.self-signed-cert.dns-name=localhost',
    ]);
    t.after(() => op.stop());
    await op.waitReady();
    await installLoopbackWebhook(t, kube, {
      name: `prepare-downscale-${namespace}`,
      namespace,
      webhooks: [
        loopbackWebhook({
          name: `prepare-downscale-${namespace}.grafana.com`,
          namespace,
          port: webhookPort,
          path: '/admission/prepare-downscale',
          sideEffects: 'NoneOnDryRun',
        }),
      ],
    });
    assert.ok((await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=4')).ok);
    await waitFor(
      'the chain at 4',
      async () => JSON.stringify(await replicas(namespace)) === JSON.stringify({ a: 4, b: 4, c: 4 }),
      { timeoutMs: 20_000 },
    );
    await waitGroupSettled(kube, namespace);
    // Every pod answers prepare-shutdown, including the ones the upscale created.
    const endpoints = await serveNamespacePods(t, kube, namespace, podPort);

    const scaled = await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=1');
    assert.ok(scaled.ok, scaled.out);
    await waitFor(
      'the chain at 1',
      async () => JSON.stringify(await replicas(namespace)) === JSON.stringify({ a: 1, b: 1, c: 1 }),
      { timeoutMs: 40_000 },
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${op.logs.split('\n').slice(-60).join('\n')}`);
    });
    // Each zone's record is copied onto it once its downscale landed.
    const sets = await waitFor(
      'last-downscale on every zone',
      async () => {
        const items = (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items;
        return items.every((s) => s.metadata?.annotations?.['grafana.com/last-downscale']) ? items : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const at = (zone: string) =>
      Date.parse(
        sets.find((s) => s.metadata?.name === `ingester-zone-${zone}`)!.metadata!.annotations![
          'grafana.com/last-downscale'
        ]!,
      );
    assert.ok(at('b') - at('a') >= 4000, `b ${at('b') - at('a')} ms after a`);
    assert.ok(at('c') - at('b') >= 4000, `c ${at('c') - at('b')} ms after b`);
    // Each zone's leaving pods were prepared by the webhook, on the way down only.
    for (const zone of ['a', 'b', 'c']) {
      assert.deepEqual(
        endpoints.calls
          .filter((c) => c.pod.startsWith(`ingester-zone-${zone}-`))
          .map((c) => `${c.method} ${c.pod}`)
          .sort(),
        [1, 2, 3].map((i) => `POST ingester-zone-${zone}-${i}`),
      );
    }
    // One rule in controller and webhook: the controller never attempted a downscale the webhook denied.
    const attempts = op.logs.split('\n').filter((l) => /could not scale/.test(l));
    assert.deepEqual(attempts, [], 'no downscale attempt was denied');
  });

  it('holds a follower with upscale-only-when-leader-ready until its leader is Ready', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await createGroup(kube, namespace, { all: { replicas: 2 }, a: { replicas: 2, readyDelay: '6s' } }, ['a', 'b']);
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', {
      metadata: {
        annotations: {
          'grafana.com/rollout-downscale-leader': 'ingester-zone-a',
          'grafana.com/rollout-upscale-only-when-leader-ready': 'true',
        },
      },
    });
    await waitGroupSettled(kube, namespace, 60_000, ['a', 'b']);
    await operator(t, namespace);
    assert.ok((await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=3')).ok);
    const get = (zone: string) =>
      kube.get<StatefulSet>(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` });
    let heldWhileNotReady = 0;
    await waitFor(
      'zone b at 3',
      async () => {
        // b first: a's readiness only grows, so a read after b's shows at least what the operator saw.
        const b = await get('b');
        const a = await get('a');
        if (b.spec?.replicas === 3) {
          assert.equal(a.status?.readyReplicas, 3, 'b scaled up before its leader was Ready');
          return true;
        }
        if ((a.status?.readyReplicas ?? 0) < 3) heldWhileNotReady++;
        return false;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    assert.ok(heldWhileNotReady > 10, `b was seen held back ${heldWhileNotReady} times`);
  });

  it("writes a follower's replicas back to the resource it mirrors; its leader decides them (rollout-operator #255)", async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await createReplicaTemplate(cluster, kube, namespace, 'zone-b', 2);
    await createGroup(kube, namespace, { all: { replicas: 2 } }, ['a', 'b']);
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', {
      metadata: {
        annotations: {
          ...mirrorAnnotations('zone-b'),
          'grafana.com/rollout-downscale-leader': 'ingester-zone-a',
        },
      },
    });
    await waitGroupSettled(kube, namespace, 60_000, ['a', 'b']);
    await operator(t, namespace);
    assert.ok((await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=3')).ok);
    await waitFor('zone b at 3', async () => (await replicas(namespace))['b'] === 3, { timeoutMs: 20_000 });
    await waitFor(
      'status.replicas of zone-b written back',
      async () =>
        (
          await kubectl(
            cluster,
            '-n',
            namespace,
            'get',
            'replicatemplate',
            'zone-b',
            '-o',
            'jsonpath={.status.replicas}',
          )
        ).out === '3',
      { timeoutMs: 20_000 },
    );
    assert.equal((await replicas(namespace))['b'], 3, "the leader wins over the template's spec.replicas");
  });

  it('warns with an Event where force-replicas can have no effect', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await createGroup(kube, namespace, { all: { replicas: 1 } }, ['a']);
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-a' }, 'merge', {
      metadata: { annotations: { 'grafana.com/rollout-force-replicas': '3' } },
    });
    await operator(t, namespace);
    const event = await waitFor(
      'the warning Event',
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find(
          (e) => e.reason === 'InvalidScalingMetadata',
        ),
      { timeoutMs: 20_000 },
    );
    assert.equal(event.type, 'Warning');
    assert.equal(event.regarding?.name, 'ingester-zone-a');
    assert.match(event.note ?? '', /grafana\.com\/rollout-force-replicas has no effect: it applies only to followers/);
    assert.equal((await replicas(namespace))['a'], 1);
  });
});
