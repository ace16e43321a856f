// Regressions (found by the chaos soak, docs/reliability.md): a reconcile
// planned its rolling deletes on the snapshot it took before adjusting
// replicas, which can wait for seconds (here: a slow prepare-downscale
// webhook; in the soak, an etcd pause).
// - A pod replaced meanwhile was then judged by its NAME: the zone-aware
//   budget recorded the replacement in its ledger as a pending eviction, the
//   delete (uid precondition) found nothing to delete, and the Ready
//   replacement counted as unavailable for the ledger's two minutes,
//   refusing every eviction and rolling delete of the other zones meanwhile.
// - Without a budget behind it, a zone disrupted meanwhile went unseen and
//   the next zone was rolled at the same time.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { resources, type Lease, type Pod } from '../../src/runtime/kube/types.ts';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { evict } from '../support/evictions.ts';
import { kubectl } from '../support/kubectl.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { PodEndpoints } from '../support/pod-endpoints.ts';
import { DelayProxy } from '../support/delay-proxy.ts';
import {
  changeTemplate,
  createGroup,
  createGroupBudget,
  InvariantMonitor,
  isReady,
  testClient,
  waitGroupSettled,
  waitRevisionsPending,
  waitRolledOut,
  ZONES,
} from '../support/rollout-group.ts';
import { evictionWebhook, installLoopbackWebhook, loopbackWebhook } from '../support/webhooks.ts';
import { LEDGER_LABEL } from '../../src/vocabulary/keys.ts';

const cluster = testCluster();
const crd = fileURLToPath(new URL('../../deploy/crds/zone-aware-pod-disruption-budgets.yaml', import.meta.url));

/**
 * Zones a (2 pods), b (2, follows a, prepares its downscales through a
 * webhook made slow by a proxy) and c (1 pod), optionally under a ZPDB; the
 * pod leaving zone b refuses to prepare, and zone b is told to shrink: every
 * reconcile tries that first and, once `slow.delayMs` is set, waits for it.
 */
async function setup(t: TestContext, o: { zpdb: boolean; readyDelayA: string }) {
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  const [podPort, webhookPort] = (await freePorts(2)) as [number, number];
  await createGroup(kube, namespace, {
    all: { replicas: 2, readyDelay: '1s' },
    a: { replicas: 2, readyDelay: o.readyDelayA },
    c: { replicas: 1, readyDelay: '1s' },
  });
  await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', {
    metadata: {
      labels: { 'grafana.com/prepare-downscale': 'true' },
      annotations: {
        'grafana.com/prepare-downscale-http-path': 'prepare',
        'grafana.com/prepare-downscale-http-port': String(podPort),
        'grafana.com/rollout-downscale-leader': 'ingester-zone-a',
      },
    },
  });
  if (o.zpdb) {
    assert.ok((await kubectl(cluster, 'apply', '-f', crd)).ok);
    await createGroupBudget(kube, namespace);
  }
  await waitGroupSettled(kube, namespace);
  const endpoints = new PodEndpoints();
  await endpoints.serve(
    (await kube.list<Pod>(resources.pods, { namespace })).items
      .filter((p) => p.metadata?.name?.startsWith('ingester-zone-b-'))
      .map((p) => ({ name: p.metadata!.name!, ip: p.status!.podIP! })),
    podPort,
  );
  t.after(() => endpoints.close());
  endpoints.status.set('ingester-zone-b-1', 500);

  const operator = await OperatorProcess.start(cluster, namespace, [
    '-server-tls.enabled',
    `-server-tls.port=${webhookPort}`,
    '-server-tls.self-signed-cert.dns-name=localhost',
    '-reconcile.interval=1s',
  ]);
  t.after(() => operator.stop());
  await operator.waitReady();
  const slow = new DelayProxy(webhookPort);
  const slowPort = await slow.listen();
  t.after(() => slow.close());
  if (o.zpdb) {
    await installLoopbackWebhook(t, kube, {
      name: `pod-eviction-${namespace}`,
      namespace,
      validating: true,
      webhooks: [evictionWebhook(namespace, webhookPort)],
    });
  }
  await installLoopbackWebhook(t, kube, {
    name: `prepare-downscale-${namespace}`,
    namespace,
    webhooks: [
      loopbackWebhook({
        name: `prepare-downscale-${namespace}.grafana.com`,
        namespace,
        port: slowPort,
        path: '/admission/prepare-downscale',
        sideEffects: 'NoneOnDryRun',
      }),
    ],
  });
  // Each denial as the webhook gives it (the operator reports a repeated ScaleFailed only once).
  const denials = () =>
    operator.logs
      .split('\n')
      .filter(
        (l) =>
          l.includes('admission request handled') &&
          l.includes('name=ingester-zone-b ') &&
          l.includes('decision=denied'),
      ).length;
  await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', {
    metadata: { annotations: { 'grafana.com/rollout-force-replicas': '1' } },
  });
  await waitFor("zone b's downscale denied", () => denials() >= 1, { timeoutMs: 30_000, intervalMs: 20 });
  slow.delayMs = 4000;
  const before = denials();
  await waitFor('a slow try', () => denials() > before, { timeoutMs: 30_000, intervalMs: 20 });
  return { namespace, kube, slow, denials };
}

/**
 * Zone c gets a new template. The reconcile in flight when it appeared plans
 * nothing for it; the next one's snapshot has c-0 to roll, and that
 * reconcile waits 4 s on its try before it plans. Resolves once that next
 * reconcile's try reached the webhook, so after it took its snapshot.
 */
async function changeZoneCDuringSlowTries(
  kube: ReturnType<typeof testClient>,
  namespace: string,
  slow: DelayProxy,
  denials: () => number,
): Promise<void> {
  await changeTemplate(kube, namespace, 'c', '2');
  await waitRevisionsPending(kube, namespace, ['c']);
  const visible = denials();
  await waitFor('the try of the reconcile in flight when the revision appeared', () => denials() > visible, {
    timeoutMs: 30_000,
    intervalMs: 5,
  });
  const arrived = slow.arrivals;
  await waitFor("the next reconcile's try at the webhook", () => slow.arrivals > arrived, {
    timeoutMs: 30_000,
    intervalMs: 5,
  });
}

async function release(
  kube: ReturnType<typeof testClient>,
  namespace: string,
  slow: DelayProxy,
  denials: () => number,
): Promise<void> {
  // The reconcile that took its snapshot plans once its try fails; the one after it has started when a further try fails.
  const now = denials();
  await waitFor('that reconcile and the next done', () => denials() >= now + 2, { timeoutMs: 30_000, intervalMs: 20 });
  slow.delayMs = 0;
  await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', {
    metadata: { annotations: { 'grafana.com/rollout-force-replicas': null } },
  });
}

describe('rolling deletes planned before a slow replica change', () => {
  it('a pod replaced while the reconcile waited is neither deleted nor charged to the zone-aware budget', async (t) => {
    const { namespace, kube, slow, denials } = await setup(t, { zpdb: true, readyDelayA: '1s' });
    await changeZoneCDuringSlowTries(kube, namespace, slow, denials);
    // c-0 is replaced under that snapshot (an eviction, a lost node): a new pod, Ready, on the new revision.
    const old = await waitFor(
      'c-0 deleted',
      async () => {
        const pod = await kube
          .get<Pod>(resources.pods, { namespace, name: 'ingester-zone-c-0' })
          .catch(() => undefined);
        if (!pod?.metadata?.uid || pod.metadata.deletionTimestamp) return undefined;
        await kube.delete(resources.pods, { namespace, name: 'ingester-zone-c-0' }, { uid: pod.metadata.uid });
        return pod.metadata.uid;
      },
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    const replacement = await waitFor(
      'c-0 replaced and Ready',
      async () => {
        const pod = await kube
          .get<Pod>(resources.pods, { namespace, name: 'ingester-zone-c-0' })
          .catch(() => undefined);
        return pod && pod.metadata?.uid !== old && isReady(pod) ? pod.metadata!.uid! : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    await release(kube, namespace, slow, denials);
    await waitGroupSettled(kube, namespace);

    const current = await kube.get<Pod>(resources.pods, { namespace, name: 'ingester-zone-c-0' });
    assert.equal(current.metadata?.uid, replacement, 'the replacement was not deleted');
    const ledgers = (await kube.list<Lease>(resources.leases, { namespace, labelSelector: `${LEDGER_LABEL}=true` }))
      .items;
    const pending = ledgers.map((l) => l.metadata?.annotations?.['stateward.dev/pending-evictions'] ?? '').join('');
    assert.ok(
      !pending.includes(replacement),
      `the replacement c-0 is not a pending eviction in the budget's ledger: ${pending}`,
    );
    // Every pod is Ready and nothing rolls: another zone's pod may be evicted.
    const a0 = await waitFor(
      "zone a's pod evicted",
      async () => {
        const result = await evict(kube, namespace, 'ingester-zone-a-0');
        return result.code === 201 ? result : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 500 },
    );
    assert.equal(a0.code, 201);
  });

  it('without a budget, a zone disrupted while the reconcile waited holds the rollout back', async (t) => {
    const { namespace, kube, slow, denials } = await setup(t, { zpdb: false, readyDelayA: '8s' });
    const monitor = new InvariantMonitor(
      kube,
      namespace,
      Object.fromEntries(ZONES.map((z) => [`ingester-zone-${z}`, 1])),
    );
    await monitor.start();
    t.after(() => monitor.stop());
    await changeZoneCDuringSlowTries(kube, namespace, slow, denials);
    // Zone a loses a pod under that snapshot (its replacement takes 8 s to
    // become Ready), once zone c is whole: a reconcile that planned on a fresh
    // view has already rolled c's one pod by now.
    await waitFor(
      'zone c Ready',
      async () => {
        const pods = (await kube.list<Pod>(resources.pods, { namespace })).items.filter((p) =>
          p.metadata?.name?.startsWith('ingester-zone-c-'),
        );
        return pods.length === 1 && pods.every(isReady);
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    await kube.delete(resources.pods, { namespace, name: 'ingester-zone-a-0' });
    await release(kube, namespace, slow, denials);
    await waitRolledOut(kube, namespace);
    assert.deepEqual(monitor.violations, []);
    assert.equal(monitor.maxDisruptedAtOnce, 1);
  });
});
