// prepare-downscale end to end: the apiserver calls the webhook on a real
// `kubectl scale`, the webhook calls the leaving pods (served on their kwok
// loopback IPs), records the downscale, and holds the next zone's downscale
// back for min-time — across two operator replicas too.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import {
  resources,
  type ConfigMap,
  type KubeObject,
  type Lease,
  type Pod,
  type StatefulSet,
} from '../../../src/runtime/kube/types.ts';
import { freePorts } from '../../cluster/ports.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';
import { kubectl as run } from '../../support/kubectl.ts';
import { OperatorProcess } from '../../support/operator-process.ts';
import { installLoopbackWebhook, loopbackWebhook } from '../../support/webhooks.ts';
import { PodEndpoints } from '../../support/pod-endpoints.ts';
import { createGroup, testClient, waitGroupSettled } from '../../support/rollout-group.ts';

const cluster = testCluster();

const kubectl = (...args: string[]) => run(cluster, ...args);

/**
 * A group of two zones with prepare-downscale set up, simulated pod
 * endpoints, and `replicas` operator processes. With one replica a single
 * webhook serves both zones; with two, each zone's StatefulSet updates go to
 * a different replica (an objectSelector on the StatefulSet's zone label),
 * so concurrent downscales of the group meet in two processes.
 */
async function setup(
  t: TestContext,
  replicas = 1,
  extraFlags: string[] = [],
  minTime = '1h',
  // Where min-time is set (the label: rollout-operator before v0.39; the annotation: v0.39, #463), and the path.
  options: { minTimeAs?: 'label' | 'annotation'; path?: string } = {},
) {
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  const [podPort, ...webhookPorts] = await freePorts(1 + replicas);
  await createGroup(kube, namespace, { all: { replicas: 3 } }, ['a', 'b']);
  const minTimeKey = { 'grafana.com/min-time-between-zones-downscale': minTime };
  const asAnnotation = options.minTimeAs === 'annotation';
  for (const zone of ['a', 'b']) {
    await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
      metadata: {
        labels: {
          'grafana.com/prepare-downscale': 'true',
          ...(asAnnotation ? {} : minTimeKey),
          zone,
        },
        annotations: {
          'grafana.com/prepare-downscale-http-path': options.path ?? 'ingester/prepare-shutdown',
          'grafana.com/prepare-downscale-http-port': String(podPort),
          ...(asAnnotation ? minTimeKey : {}),
        },
      },
    });
  }
  await waitGroupSettled(kube, namespace, 60_000, ['a', 'b']);
  const pods = (await kube.list<Pod>(resources.pods, { namespace })).items.map((p) => ({
    name: p.metadata!.name!,
    ip: p.status!.podIP!,
  }));
  const endpoints = new PodEndpoints();
  await endpoints.serve(pods, podPort!);
  t.after(() => endpoints.close());
  const operators: OperatorProcess[] = [];
  for (const port of webhookPorts) {
    const operator = await OperatorProcess.start(cluster, namespace, [
      '-server-tls.enabled',
      `-server-tls.port=${port}`,
      '-server-tls.self-signed-cert.dns-name=localhost',
      ...extraFlags,
    ]);
    t.after(() => operator.stop());
    operators.push(operator);
  }
  await Promise.all(operators.map((o) => o.waitReady()));
  await installLoopbackWebhook(t, kube, {
    name: `prepare-downscale-${namespace}`,
    namespace,
    webhooks: webhookPorts.map((port, i) =>
      loopbackWebhook({
        name: `prepare-downscale-${i}-${namespace}.grafana.com`,
        namespace,
        port,
        path: '/admission/prepare-downscale',
        sideEffects: 'NoneOnDryRun',
        ...(webhookPorts.length > 1 ? { objectSelector: { matchLabels: { zone: ['a', 'b'][i] } } } : {}),
      }),
    ),
  });
  return { namespace, kube, endpoints, operators };
}

/** A zone tracker whose zones were last downscaled two hours ago: nothing blocks the first downscale. */
async function seedZoneTracker(kube: ReturnType<typeof testClient>, namespace: string): Promise<void> {
  const longAgo = new Date(Date.now() - 2 * 3600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  await kube.create<ConfigMap>(resources.configMaps, {
    metadata: { name: 'rollout-operator-zone-tracker', namespace },
    data: {
      'ingester-zone-a': JSON.stringify({ lastDownscaled: longAgo }),
      'ingester-zone-b': JSON.stringify({ lastDownscaled: longAgo }),
    },
  });
}

describe('prepare-downscale webhook', () => {
  it('prepares the leaving pods on their own IPs, records the downscale, and denies the next zone inside min-time', async (t) => {
    const { namespace, kube, endpoints } = await setup(t);
    const scaled = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=1');
    assert.ok(scaled.ok, scaled.out);
    assert.deepEqual(endpoints.calls.map((c) => `${c.method} ${c.pod} ${c.path}`).sort(), [
      'POST ingester-zone-a-1 /ingester/prepare-shutdown',
      'POST ingester-zone-a-2 /ingester/prepare-shutdown',
    ]);
    assert.match(
      endpoints.calls[0]!.host,
      new RegExp(`^ingester-zone-a-\\d\\.ingester-zone-a\\.${namespace}\\.svc\\.cluster\\.local\\.:\\d+$`),
    );
    // Recorded on the group's Lease before the allow; copied onto the StatefulSet once the downscale landed.
    const recorded = await waitFor(
      'last-downscale copied onto zone a',
      async () => {
        const a = await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' });
        return Date.parse(a.metadata?.annotations?.['grafana.com/last-downscale'] ?? '') || undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.ok(Math.abs(Date.now() - recorded) < 60_000, 'last-downscale recorded');

    const denied = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=2');
    assert.equal(denied.ok, false);
    assert.match(
      denied.out,
      new RegExp(
        `downscale of statefulsets/ingester-zone-b in ${namespace} from 3 to 2 replicas is not allowed because statefulset ingester-zone-a was downscaled at .* UTC and is configured to wait 1h0m0s between zone downscales`,
      ),
    );
    assert.equal(
      endpoints.calls.filter((c) => c.pod.startsWith('ingester-zone-b')).length,
      0,
      'no pod of zone b was called',
    );
    // Dry-run has no side effects: allowed without calling anyone.
    const before = endpoints.calls.length;
    assert.ok(
      (await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=2', '--dry-run=server'))
        .ok,
    );
    assert.equal(endpoints.calls.length, before);
  });

  it('min-time set only as an annotation (rollout-operator v0.39, #463) holds the next zone back; the path is cleaned as Go does (#468)', async (t) => {
    const { namespace, endpoints, operators } = await setup(t, 1, [], '1h', {
      minTimeAs: 'annotation',
      path: '//ingester/./prepare-shutdown/',
    });
    const scaled = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=2');
    assert.ok(scaled.ok, scaled.out);
    // Before #468's cleaning the pods were called at "/ingester/./prepare-shutdown/".
    assert.deepEqual(
      endpoints.calls.map((c) => `${c.method} ${c.pod} ${c.path}`),
      ['POST ingester-zone-a-2 /ingester/prepare-shutdown'],
    );
    // Before #463 the annotation was ignored and zone b went down at once.
    const denied = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=2');
    assert.equal(denied.ok, false, denied.out);
    assert.match(
      denied.out,
      new RegExp(
        `downscale of statefulsets/ingester-zone-b in ${namespace} from 3 to 2 replicas is not allowed because statefulset ingester-zone-a was downscaled at .* UTC and is configured to wait 1h0m0s between zone downscales`,
      ),
    );
    assert.equal(endpoints.calls.length, 1, 'no pod of zone b was called');
    assert.doesNotMatch(operators[0]!.logs, /is set as a label, which is deprecated/);
  });

  it('a client that updates /scale with the resourceVersion it read, as the HorizontalPodAutoscaler does, is not made to conflict by the record (grafana/rollout-operator #303)', async (t) => {
    const { namespace, kube, endpoints } = await setup(t, 1, [], '1h', { minTimeAs: 'annotation' });
    // The HPA controller's write: GET the Scale, change spec.replicas, PUT it back with the resourceVersion read.
    const hpaScale = async (name: string, replicas: number) => {
      const scale = await kube.get<KubeObject & { spec?: { replicas?: number } }>(resources.statefulSets, {
        namespace,
        name,
        subresource: 'scale',
      });
      return kube.update(resources.statefulSets, { ...scale, spec: { replicas } }, { subresource: 'scale' });
    };
    // Before: the webhook patched grafana.com/last-downscale on this StatefulSet during admission, and the PUT got
    // 409 "the object has been modified" every time.
    const scaled = await hpaScale('ingester-zone-a', 1);
    assert.equal(scaled.spec?.replicas, 1);
    assert.equal(endpoints.calls.filter((c) => c.method === 'POST').length, 2, 'the leaving pods were prepared');
    // Recorded on the group's Lease before the allow, copied onto the StatefulSet after it landed.
    const leases = (await kube.list<Lease>(resources.leases, { namespace })).items;
    const records = leases.map((l) => l.metadata?.annotations?.['stateward.dev/last-downscales']).find(Boolean);
    assert.ok(records && 'ingester-zone-a' in JSON.parse(records), `recorded on the Lease: ${records}`);
    await waitFor(
      'last-downscale copied onto zone a',
      async () =>
        (await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' })).metadata
          ?.annotations?.['grafana.com/last-downscale'],
      { timeoutMs: 30_000 },
    );
    // And min-time still holds zone b back, for the HPA as for anyone.
    await assert.rejects(hpaScale('ingester-zone-b', 2), /is configured to wait 1h0m0s between zone downscales/);
  });

  it('min-time as a label still applies, and its deprecation is logged once per process', async (t) => {
    const { namespace, operators } = await setup(t);
    assert.ok((await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=2')).ok);
    const denied = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=2');
    assert.match(denied.out, /is configured to wait 1h0m0s between zone downscales/);
    // Both zones carry the label and both changed since: still one line.
    const deprecations = () => operators[0]!.logs.match(/is set as a label, which is deprecated/g)?.length ?? 0;
    await waitFor('the deprecation warning', () => deprecations() > 0, { timeoutMs: 10_000 });
    assert.equal(deprecations(), 1, operators[0]!.logs);
  });

  it('undoes the preparation with DELETE and denies when a pod fails to prepare', async (t) => {
    const { namespace, endpoints } = await setup(t);
    endpoints.status.set('ingester-zone-a-1', 500);
    const denied = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=1');
    assert.equal(denied.ok, false);
    assert.match(denied.out, /because one or more pods failed to prepare for shutdown\./);
    const deletes = endpoints.calls
      .filter((c) => c.method === 'DELETE')
      .map((c) => c.pod)
      .sort();
    assert.deepEqual(deletes, ['ingester-zone-a-1', 'ingester-zone-a-2']);
  });

  it('lets exactly one of two concurrent downscales of a group through, served by two operator replicas', async (t) => {
    const { namespace, kube } = await setup(t, 2);
    // kubectl patch updates the StatefulSet itself, whose labels the objectSelectors see.
    const [a, b] = await Promise.all(
      ['a', 'b'].map((zone) =>
        kubectl(
          '-n',
          namespace,
          'patch',
          'statefulset',
          `ingester-zone-${zone}`,
          '--type=merge',
          '-p',
          '{"spec":{"replicas":2}}',
        ),
      ),
    );
    assert.equal([a!, b!].filter((r) => r.ok).length, 1, `${a!.out}\n${b!.out}`);
    const loser = a!.ok ? b! : a!;
    assert.match(
      loser.out,
      /is already in process of updating replicas|was downscaled at .* and is configured to wait/,
    );
    // The winner's record is copied onto it once its downscale landed; the loser's never is.
    const recorded = (items: StatefulSet[]) =>
      items.filter((s) => s.metadata?.annotations?.['grafana.com/last-downscale']);
    const sets = await waitFor(
      'the winner recorded',
      async () => {
        const items = (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items;
        return recorded(items).length > 0 ? items : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(recorded(sets).length, 1, 'exactly one downscale recorded');
    assert.deepEqual(sets.map((s) => s.spec?.replicas).sort(), [2, 3]);
  });

  it('records in the zone tracker ConfigMap with -use-zone-tracker', async (t) => {
    const { namespace, kube } = await setup(t, 1, ['-use-zone-tracker']);
    await seedZoneTracker(kube, namespace);
    const scaled = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=2');
    assert.ok(scaled.ok, scaled.out);
    const tracker = await kube.get<ConfigMap>(resources.configMaps, {
      namespace,
      name: 'rollout-operator-zone-tracker',
    });
    const recorded = Date.parse(
      (JSON.parse(tracker.data!['ingester-zone-a']!) as { lastDownscaled: string }).lastDownscaled,
    );
    assert.ok(Date.now() - recorded < 60_000, 'zone a recorded now');
    const a = await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' });
    assert.equal(a.metadata?.annotations?.['grafana.com/last-downscale'], undefined, 'no annotation in tracker mode');
    const denied = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=2');
    assert.equal(denied.ok, false);
    assert.match(
      denied.out,
      /statefulset ingester-zone-a was downscaled at .* and is configured to wait 1h0m0s between zone downscales/,
    );
  });

  // rollout-operator's own scenario (its integration manifests use
  // -use-zone-tracker): the next zone may go once min-time has passed since
  // the previous zone's recorded downscale — counted from that stamp, not from
  // when this replica next read the tracker (which doubled the wait).
  it('with -use-zone-tracker, the next zone is allowed once min-time has passed since the recorded downscale', async (t) => {
    const minTimeS = 8;
    const { namespace, kube } = await setup(t, 1, ['-use-zone-tracker'], `${minTimeS}s`);
    await seedZoneTracker(kube, namespace);
    const scaled = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=2');
    assert.ok(scaled.ok, scaled.out);
    const tracker = await kube.get<ConfigMap>(resources.configMaps, {
      namespace,
      name: 'rollout-operator-zone-tracker',
    });
    // RFC3339 in whole seconds, as rollout-operator writes it.
    const recorded = Date.parse(
      (JSON.parse(tracker.data!['ingester-zone-a']!) as { lastDownscaled: string }).lastDownscaled,
    );
    const early = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=2');
    if (Date.now() < recorded + minTimeS * 1000) {
      assert.equal(early.ok, false, 'inside min-time');
      assert.doesNotMatch(
        early.out,
        /counted from/,
        'no clock evidence with one replica and no step: the stamp is taken at its word',
      );
    }
    // Min-time is a wait on the clock itself: wait for it (plus the second the stamp's rounding can hide) to pass.
    const due = recorded + (minTimeS + 1) * 1000;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
    const allowed = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=2');
    assert.ok(
      allowed.ok,
      `zone b refused ${((Date.now() - recorded) / 1000).toFixed(1)} s after zone a's recorded downscale: ${allowed.out}`,
    );
  });
});
