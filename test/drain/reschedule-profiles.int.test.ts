// Reschedule profiles end to end (issue 38): one operator with three
// profiles — the -reschedule.* flags' Couchbase one, the Strimzi one from
// Drain Cleaner's STRIMZI_* variables, and an annotate-and-allow one from a
// profiles file — against the real `kubectl drain`. The test plays the
// Couchbase and Strimzi operators: it replaces each pod that carries its
// operator's annotation on another node, under the same name.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { isNotFound } from '../../src/runtime/kube/errors.ts';
import { resources, type Pod } from '../../src/runtime/kube/types.ts';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { evict } from '../support/evictions.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { testClient } from '../support/rollout-group.ts';
import { installLoopbackWebhook, loopbackWebhook } from '../support/webhooks.ts';

const cluster = testCluster();
const COUCHBASE = 'cao.couchbase.com/reschedule';
const STRIMZI = 'strimzi.io/manual-rolling-update';
const ALLOWING = 'example.com/please-move';
const EVICTION_RULES = [
  { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods/eviction'], scope: 'Namespaced' },
];

async function setup(t: TestContext) {
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  const tag = randomBytes(4).toString('hex');
  const dir = mkdtempSync(join(tmpdir(), 'stateward-profiles-'));
  const profilesFile = join(dir, 'profiles.yaml');
  writeFileSync(
    profilesFile,
    [
      'profiles:',
      '- name: allowing',
      `  podSelector: app=allowing,stateward.dev/drain-test=${tag}`,
      `  annotation: ${ALLOWING}=true`,
      '  answer: allow',
      '',
    ].join('\n'),
  );
  const [port] = (await freePorts(1)) as [number];
  const op = await OperatorProcess.start(
    cluster,
    namespace,
    [
      '-server-tls.enabled',
      `-server-tls.port=${port}`,
      '-server-tls.self-signed-cert.dns-name=localhost',
      '-reschedule.enabled',
      `-reschedule.pod-selector=app=couchbase,stateward.dev/drain-test=${tag}`,
      `-reschedule.profiles-file=${profilesFile}`,
    ],
    // Drain Cleaner's own variable turns the Strimzi profile on.
    { env: { STRIMZI_DRAIN_NAMESPACES: namespace } },
  );
  t.after(() => op.stop());
  await op.waitReady();
  const [drained, other] = cluster.nodes.filter((n) => n.zone === 'zone-a').map((n) => n.name) as [string, string];
  t.after(() => cluster.uncordon(drained));
  const podOn = (name: string, node: string, labels: Record<string, string>): Pod => ({
    metadata: { name, namespace, labels: { ...labels, 'stateward.dev/drain-test': tag } },
    spec: { nodeName: node, containers: [{ name: 'c', image: 'example.invalid/app:1' }] },
  });
  const webhook = (path: string) =>
    installLoopbackWebhook(t, kube, {
      name: `profiles-${path.replaceAll('/', '-').slice(1)}-${namespace}`,
      namespace,
      validating: true,
      webhooks: [
        loopbackWebhook({
          name: `profiles-${namespace}.stateward.dev`,
          namespace,
          port,
          path,
          sideEffects: 'NoneOnDryRun',
          rules: EVICTION_RULES,
        }),
      ],
    });
  return { namespace, kube, tag, op, drained, other, podOn, webhook };
}

const KAFKA = { 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-cluster-kafka' };
const EXPORTER = { 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-kafka-exporter' };

async function readyPods(kube: KubeClient, namespace: string, names: string[]): Promise<Pod[]> {
  return Promise.all(
    names.map((name) =>
      waitFor(
        `pod ${name} Ready`,
        async () => {
          const pod = await kube.get<Pod>(resources.pods, { namespace, name }).catch(() => undefined);
          return pod && pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
            ? pod
            : undefined;
        },
        { timeoutMs: 30_000 },
      ),
    ),
  );
}

/** The Couchbase and Strimzi operators' stand-in: each pod carrying its operator's annotation comes back on `target` under its name. */
function operators(
  kube: KubeClient,
  namespace: string,
  target: string,
  podOn: (n: string, node: string, l: Record<string, string>) => Pod,
) {
  const moved: string[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      for (const pod of (await kube.list<Pod>(resources.pods, { namespace })).items) {
        const { name, uid, annotations, labels, deletionTimestamp } = pod.metadata!;
        const ours = annotations?.[COUCHBASE] === 'true' || annotations?.[STRIMZI] === 'true';
        if (!ours || deletionTimestamp || moved.includes(uid!)) continue;
        moved.push(uid!);
        await kube.delete(resources.pods, { namespace, name: name! }, { uid });
        await waitFor(
          `${name} gone`,
          () =>
            kube.get(resources.pods, { namespace, name: name! }).then(
              () => false,
              (e: unknown) => isNotFound(e),
            ),
          { timeoutMs: 30_000, intervalMs: 100 },
        );
        const { 'stateward.dev/drain-test': _tag, ...own } = labels ?? {};
        await kube.create(resources.pods, podOn(name!, target, own));
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

/** The annotations each pod had when it was deleted, from a watch started before. */
function deletions(kube: KubeClient, namespace: string) {
  const seen = new Map<string, Record<string, string>>();
  const added = new Set<string>();
  const abort = new AbortController();
  const done = (async () => {
    try {
      for await (const event of kube.watch<Pod>(resources.pods, { namespace, signal: abort.signal })) {
        const name = event.object.metadata?.name ?? '';
        if (event.type === 'ADDED') added.add(name);
        if (event.type === 'DELETED') seen.set(name, event.object.metadata?.annotations ?? {});
      }
    } catch (error) {
      if (!abort.signal.aborted) throw error;
    }
  })();
  return {
    seen,
    live: (name: string) => waitFor(`the watch shows ${name}`, () => added.has(name), { timeoutMs: 10_000 }),
    stop: async () => {
      abort.abort();
      await done;
    },
  };
}

async function profileOutcomes(op: OperatorProcess): Promise<Map<string, number>> {
  const body = (await op.get('/metrics'))?.body ?? '';
  const outcomes = new Map<string, number>();
  for (const line of body.split('\n')) {
    const m =
      /^stateward_reschedule_profile_evictions_total\{profile="([^"]+)",outcome="([^"]+)",code="(\d+)"\} (\d+)/.exec(
        line,
      );
    if (m) outcomes.set(`${m[1]} ${m[2]} ${m[3]}`, Number(m[4]));
  }
  return outcomes;
}

describe('reschedule profiles', () => {
  it('/drainer judges Strimzi pods only; one kubectl drain waits for both operators, lets the exporter and the allowing profile through', async (t) => {
    const { namespace, kube, tag, op, drained, other, podOn, webhook } = await setup(t);

    // Drain Cleaner's path: the Strimzi profile alone.
    await webhook('/drainer');
    await kube.create(resources.pods, podOn('solo-kafka-0', other, KAFKA));
    await kube.create(resources.pods, podOn('solo-cb-0', other, { app: 'couchbase' }));
    await readyPods(kube, namespace, ['solo-kafka-0', 'solo-cb-0']);
    const kafkaAnswer = await evict(kube, namespace, 'solo-kafka-0');
    assert.equal(kafkaAnswer.code, 429, kafkaAnswer.message);
    assert.match(kafkaAnswer.message, /The pod will be rolled by the Strimzi Cluster Operator/);
    const solo = await kube.get<Pod>(resources.pods, { namespace, name: 'solo-kafka-0' });
    assert.equal(solo.metadata?.annotations?.[STRIMZI], 'true');
    assert.equal((await evict(kube, namespace, 'solo-cb-0')).code, 201, '/drainer leaves the Couchbase profile out');
    await kube.delete(resources.pods, { namespace, name: 'solo-kafka-0' });

    // Every profile, at the reschedule path, under one drain.
    await webhook('/admission/reschedule-on-eviction');
    const pods: [string, Record<string, string>][] = [
      ['cb-0000', { app: 'couchbase' }],
      ['my-cluster-kafka-0', KAFKA],
      ['my-kafka-exporter-7d9f', EXPORTER],
      ['allowing-0', { app: 'allowing' }],
    ];
    for (const [name, labels] of pods) await kube.create(resources.pods, podOn(name, drained, labels));
    const originals = await readyPods(kube, namespace, ['cb-0000', 'my-cluster-kafka-0']);
    await readyPods(kube, namespace, ['my-kafka-exporter-7d9f', 'allowing-0']);
    const watch = deletions(kube, namespace);
    t.after(() => watch.stop());
    await watch.live('allowing-0');
    const operatorsStandIn = operators(kube, namespace, other, podOn);
    t.after(() => operatorsStandIn.stop());
    const drain = await kubectl(
      cluster,
      'drain',
      drained,
      `--pod-selector=stateward.dev/drain-test=${tag}`,
      '--force',
      '--ignore-daemonsets',
      '--timeout=90s',
    );
    assert.ok(drain.ok, drain.out);
    await operatorsStandIn.stop();
    await waitFor(
      'the allowed pods deleted',
      () => watch.seen.has('allowing-0') && watch.seen.has('my-kafka-exporter-7d9f'),
      {
        timeoutMs: 15_000,
      },
    );
    await watch.stop();

    // Each operator moved its own pod, asked through its own annotation; the evictions deleted neither.
    assert.deepEqual([...operatorsStandIn.moved].sort(), originals.map((p) => p.metadata!.uid!).sort());
    const after = (await kube.list<Pod>(resources.pods, { namespace })).items.filter(
      (p) => p.metadata?.labels?.['stateward.dev/drain-test'] === tag && !p.metadata.deletionTimestamp,
    );
    assert.deepEqual(after.map((p) => `${p.metadata!.name} ${p.spec!.nodeName}`).sort(), [
      `cb-0000 ${other}`,
      `my-cluster-kafka-0 ${other}`,
    ]);
    // The exporter's name does not match .+-kafka: evicted as any pod, never annotated.
    assert.deepEqual(watch.seen.get('my-kafka-exporter-7d9f')?.[STRIMZI], undefined);
    // The allowing profile's pod went through the eviction, its annotation written first.
    assert.equal(watch.seen.get('allowing-0')?.[ALLOWING], 'true');
    assert.equal(watch.seen.get('allowing-0')?.[COUCHBASE], undefined);

    const outcomes = await profileOutcomes(op);
    const seen = [...outcomes].join(', ');
    assert.ok((outcomes.get('flags reschedule-requested 429') ?? 0) >= 1, `Couchbase asked with 429: ${seen}`);
    assert.ok(
      (outcomes.get('strimzi reschedule-requested 429') ?? 0) >= 2,
      `Strimzi asked with 429 (solo and drain): ${seen}`,
    );
    assert.ok(
      (outcomes.get('allowing reschedule-requested 200') ?? 0) >= 1,
      `the allowing profile let it through: ${seen}`,
    );
    assert.ok(
      [...outcomes.keys()].every((k) => k.startsWith('allowing ') || !k.endsWith(' 200')),
      `no Couchbase or Strimzi pod was let through: ${seen}`,
    );
  });
});
