// Reschedule-on-eviction end to end: the real `kubectl drain` against the
// webhook, and a small stand-in for the pods' operator (Couchbase's) that
// moves each annotated pod to another node — once under a new name, once
// under the same name. The drain must finish without the eviction ever
// deleting a selected pod itself.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { isNotFound } from '../../src/runtime/kube/errors.ts';
import { resources, type ConfigMap, type Pod } from '../../src/runtime/kube/types.ts';
import { encodeRecord } from '../../src/drain/reschedule/decide.ts';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { evict } from '../support/evictions.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { testClient } from '../support/rollout-group.ts';
import { installLoopbackWebhook, loopbackWebhook } from '../support/webhooks.ts';

const cluster = testCluster();
const ANNOTATION = 'cao.couchbase.com/reschedule';

async function setup(t: TestContext) {
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  const tag = randomBytes(4).toString('hex');
  const selector = `app=couchbase,stateward.dev/drain-test=${tag}`;
  const [port] = (await freePorts(1)) as [number];
  const op = await OperatorProcess.start(cluster, namespace, [
    '-server-tls.enabled',
    `-server-tls.port=${port}`,
    '-server-tls.self-signed-cert.dns-name=localhost',
    '-reschedule.enabled',
    `-reschedule.pod-selector=${selector}`,
  ]);
  t.after(() => op.stop());
  await op.waitReady();
  await installLoopbackWebhook(t, kube, {
    name: `reschedule-${namespace}`,
    namespace,
    validating: true,
    webhooks: [
      loopbackWebhook({
        name: `reschedule-${namespace}.stateward.dev`,
        namespace,
        port,
        path: '/admission/reschedule-on-eviction',
        sideEffects: 'NoneOnDryRun',
        rules: [
          {
            apiGroups: [''],
            apiVersions: ['v1'],
            operations: ['CREATE'],
            resources: ['pods/eviction'],
            scope: 'Namespaced',
          },
        ],
      }),
    ],
  });
  // Both on one node of zone a; replacements go to the other.
  const [drained, other] = cluster.nodes.filter((n) => n.zone === 'zone-a').map((n) => n.name) as [string, string];
  t.after(() => cluster.uncordon(drained));
  const podOn = (name: string, node: string): Pod => ({
    metadata: { name, namespace, labels: { app: 'couchbase', 'stateward.dev/drain-test': tag } },
    spec: { nodeName: node, containers: [{ name: 'couchbase', image: 'example.invalid/couchbase:7' }] },
  });
  return { namespace, kube, tag, selector, op, drained, other, podOn };
}

async function readyPod(kube: KubeClient, namespace: string, name: string): Promise<Pod> {
  return waitFor(
    `pod ${name} Ready`,
    async () => {
      const pod = await kube.get<Pod>(resources.pods, { namespace, name }).catch(() => undefined);
      return pod &&
        !pod.metadata?.deletionTimestamp &&
        pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
        ? pod
        : undefined;
    },
    { timeoutMs: 30_000 },
  );
}

/** The operator stand-in: moves every annotated pod to `target`, renaming cb-0000 to cb-0002 and keeping cb-0001's name. */
function operatorSimulator(
  kube: KubeClient,
  namespace: string,
  target: string,
  podOn: (name: string, node: string) => Pod,
) {
  const moved: string[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const pods = (await kube.list<Pod>(resources.pods, { namespace })).items;
      for (const pod of pods) {
        const name = pod.metadata!.name!;
        if (
          pod.metadata?.annotations?.[ANNOTATION] !== 'true' ||
          pod.metadata.deletionTimestamp ||
          moved.includes(pod.metadata.uid!)
        )
          continue;
        moved.push(pod.metadata.uid!);
        await kube.delete(resources.pods, { namespace, name }, { uid: pod.metadata.uid });
        if (name === 'cb-0000') {
          await kube.create(resources.pods, podOn('cb-0002', target));
        } else {
          await waitFor(
            `${name} gone`,
            () =>
              kube.get(resources.pods, { namespace, name }).then(
                () => false,
                (e: unknown) => isNotFound(e),
              ),
            { timeoutMs: 30_000, intervalMs: 100 },
          );
          await kube.create(resources.pods, podOn(name, target));
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return {
    moved,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

async function rescheduleOutcomes(op: OperatorProcess): Promise<Map<string, number>> {
  const body = (await op.get('/metrics'))?.body ?? '';
  const outcomes = new Map<string, number>();
  for (const line of body.split('\n')) {
    const m =
      /^stateward_reschedule_evictions_total\{outcome="([^"]+)",code="(\d+)",dry_run="(true|false)"\} (\d+)/.exec(line);
    if (m) outcomes.set(`${m[1]} ${m[2]}${m[3] === 'true' ? ' dry-run' : ''}`, Number(m[4]));
  }
  return outcomes;
}

describe('reschedule on eviction', () => {
  it('kubectl drain finishes once the operator moved each pod, renamed or under the same name; the eviction itself deletes none', async (t) => {
    const { namespace, kube, selector, op, drained, other, podOn } = await setup(t);
    for (const name of ['cb-0000', 'cb-0001']) await kube.create(resources.pods, podOn(name, drained));
    const originals = await Promise.all(['cb-0000', 'cb-0001'].map((n) => readyPod(kube, namespace, n)));

    // A server-side dry run changes nothing.
    const dry = await kubectl(
      cluster,
      'drain',
      drained,
      `--pod-selector=${selector}`,
      '--force',
      '--ignore-daemonsets',
      '--dry-run=server',
    );
    assert.ok(dry.ok, dry.out);
    for (const name of ['cb-0000', 'cb-0001']) {
      const pod = await kube.get<Pod>(resources.pods, { namespace, name });
      assert.equal(pod.metadata?.annotations?.[ANNOTATION], undefined, `${name} not annotated by a dry run`);
      assert.equal(pod.metadata?.deletionTimestamp, undefined);
    }
    await assert.rejects(
      kube.get(resources.configMaps, { namespace, name: 'stateward-reschedule-tracking' }),
      (e: unknown) => isNotFound(e),
    );

    const simulator = operatorSimulator(kube, namespace, other, podOn);
    t.after(() => simulator.stop());
    const drain = await kubectl(
      cluster,
      'drain',
      drained,
      `--pod-selector=${selector}`,
      '--force',
      '--ignore-daemonsets',
      '--timeout=90s',
    );
    assert.ok(drain.ok, drain.out);
    await simulator.stop();
    // Every original pod was removed by the operator stand-in, none by an eviction.
    assert.deepEqual([...simulator.moved].sort(), originals.map((p) => p.metadata!.uid!).sort());
    const outcomes = await rescheduleOutcomes(op);
    assert.ok(
      [...outcomes.keys()].every((k) => !k.endsWith(' 200')),
      `no real eviction of a selected pod was allowed: ${[...outcomes].join(', ')}`,
    );
    assert.equal(
      outcomes.get('reschedule-requested 200 dry-run'),
      2,
      'the dry run was answered as allowed, with a warning, changing nothing',
    );
    assert.ok((outcomes.get('reschedule-requested 429') ?? 0) >= 2, 'both pods were asked to move');
    assert.ok((outcomes.get('replaced 404') ?? 0) >= 1, 'the same-name replacement released the drain');
    const after = (await kube.list<Pod>(resources.pods, { namespace })).items;
    assert.deepEqual(after.map((p) => `${p.metadata!.name} ${p.spec!.nodeName}`).sort(), [
      `cb-0001 ${other}`,
      `cb-0002 ${other}`,
    ]);
  });

  it('a leftover record of an old pod never releases a pod that sits on a draining node', async (t) => {
    const { namespace, kube, drained, other, podOn } = await setup(t);
    await kube.create(resources.pods, podOn('cb-0000', drained));
    const pod = await readyPod(kube, namespace, 'cb-0000');
    const now = Date.now();
    // An old pod of that name, recorded on another node: were the new one elsewhere, this would release it.
    const stale = encodeRecord({
      uid: '00000000-0000-4000-8000-000000000001',
      pod: 'cb-0000',
      node: other,
      requestedAt: now - 60_000,
      refreshedAt: now - 60_000,
    });
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'stateward-reschedule-tracking', namespace },
      data: { [stale.key]: stale.value },
    });
    await cluster.cordon(drained);
    const answer = await evict(kube, namespace, 'cb-0000');
    assert.equal(answer.code, 429, answer.message);
    assert.match(answer.message, /Reschedule annotation added to pod/);
    const annotated = await kube.get<Pod>(resources.pods, { namespace, name: 'cb-0000' });
    assert.equal(annotated.metadata?.uid, pod.metadata?.uid);
    assert.equal(annotated.metadata?.annotations?.[ANNOTATION], 'true', 'asked to move instead of released');
    // While it waits, every retry is refused.
    const again = await evict(kube, namespace, 'cb-0000');
    assert.equal(again.code, 429);
    assert.match(again.message, /Pod waiting to be rescheduled/);
  });
});
