// The prepare-downscale group lock between two operator replicas whose wall
// clocks disagree, on the real apiserver: one replica runs 45 s ahead
// (libfaketime; its monotonic clock is untouched). Each zone's StatefulSet
// updates go to a different replica, and the first downscale is held
// mid-flight (its pods do not answer the prepare call until released) while
// the other zone's downscale is asked: the two requests provably overlap, and
// exactly one may pass. Judged by the holder's renewTime against its own
// clock, the replica running ahead took a lock renewed a moment earlier and
// allowed both.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { resources, type Pod, type StatefulSet } from '../../../src/runtime/kube/types.ts';
import type { KubeClient } from '../../../src/runtime/kube/client.ts';
import { freePorts } from '../../cluster/ports.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';
import { faketimeEnv, LIBFAKETIME } from '../../support/faketime.ts';
import { kubectl as run } from '../../support/kubectl.ts';
import { OperatorProcess } from '../../support/operator-process.ts';
import { PodEndpoints } from '../../support/pod-endpoints.ts';
import { createGroup, testClient, waitGroupSettled } from '../../support/rollout-group.ts';
import { installLoopbackWebhook, loopbackWebhook } from '../../support/webhooks.ts';

const cluster = testCluster();
const kubectl = (...args: string[]) => run(cluster, ...args);
const REPLICAS = 6;
/** The webhook's refusal while a sibling StatefulSet is still changing (not the lock's). */
const ROLLOUT_IN_PROGRESS = /non-updated replicas and \d+ non-ready replicas/;

/** Every zone's StatefulSet at its asked replicas, all of them updated and ready, as its status says. */
async function waitStatefulSetsSettled(
  kube: KubeClient,
  namespace: string,
  zones: string[],
  replicas: Record<string, number>,
): Promise<void> {
  await waitFor(
    'the StatefulSets to settle at their replicas',
    async () => {
      const sets = (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items;
      return zones.every((zone) => {
        const set = sets.find((s) => s.metadata?.name === `ingester-zone-${zone}`);
        const want = replicas[zone];
        const status = set?.status;
        return (
          set !== undefined &&
          status !== undefined &&
          set.spec?.replicas === want &&
          status.observedGeneration === set.metadata?.generation &&
          status.replicas === want &&
          status.updatedReplicas === want &&
          status.readyReplicas === want
        );
      });
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
}

describe('prepare-downscale group lock under clock skew', () => {
  it('two replicas, one 45 s ahead: of two overlapping downscales of a group exactly one is allowed, every round', async (t) => {
    assert.ok(existsSync(LIBFAKETIME), `${LIBFAKETIME} is installed (.ci/run installs Debian's faketime)`);
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const zones = ['a', 'b'];
    const [podPort, ...webhookPorts] = await freePorts(3);
    // No min-time label: only the lock keeps the two downscales apart.
    await createGroup(kube, namespace, { all: { replicas: REPLICAS } }, zones);
    for (const zone of zones) {
      await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
        metadata: {
          labels: { 'grafana.com/prepare-downscale': 'true', zone },
          annotations: {
            'grafana.com/prepare-downscale-http-path': 'prepare-shutdown',
            'grafana.com/prepare-downscale-http-port': String(podPort),
          },
        },
      });
    }
    await waitGroupSettled(kube, namespace, 90_000, zones);
    const pods = (await kube.list<Pod>(resources.pods, { namespace })).items.map((p) => ({
      name: p.metadata!.name!,
      ip: p.status!.podIP!,
    }));
    const endpoints = new PodEndpoints();
    await endpoints.serve(pods, podPort!);
    t.after(() => endpoints.close());
    // Replica for zone b runs 45 s ahead: more than the lock's 30 s lease.
    const operators = await Promise.all(
      webhookPorts.map((port, i) =>
        OperatorProcess.start(
          cluster,
          namespace,
          ['-server-tls.enabled', `-server-tls.port=${port}`, '-server-tls.self-signed-cert.dns-name=localhost'],
          { env: i === 1 ? faketimeEnv({ fixed: '+45s' }) : {} },
        ),
      ),
    );
    for (const o of operators) t.after(() => o.stop());
    await Promise.all(operators.map((o) => o.waitReady()));
    await installLoopbackWebhook(t, kube, {
      name: `prepare-downscale-${namespace}`,
      namespace,
      webhooks: webhookPorts.map((port, i) =>
        loopbackWebhook({
          name: `prepare-downscale-${i}-${namespace}.grafana.com`,
          namespace,
          port: port,
          path: '/admission/prepare-downscale',
          sideEffects: 'NoneOnDryRun',
          objectSelector: { matchLabels: { zone: zones[i]! } },
        }),
      ),
    });

    const replicas = { a: REPLICAS, b: REPLICAS } as Record<string, number>;
    const rounds = 2 * (REPLICAS - 1);
    for (let round = 0; round < rounds; round++) {
      // Alternate which replica holds the lock first: each judges the other's lock.
      const [first, second] = round % 2 === 0 ? ['a', 'b'] : ['b', 'a'];
      let open!: () => void;
      endpoints.gate = {
        holds: (pod) => pod.startsWith(`ingester-zone-${first}-`),
        open: new Promise<void>((resolve) => (open = resolve)),
      };
      const callsBefore = endpoints.calls.length;
      const to = replicas[first]! - 1;
      // The previous round's zone must have finished shrinking: until then the
      // webhook refuses any sibling's downscale as a rollout in progress,
      // which is not what this test is about.
      await waitStatefulSetsSettled(kube, namespace, zones, replicas);
      // The first downscale holds the lock and is preparing its pods: mid-flight.
      // The operator's caches may still be a moment behind the settled status:
      // a refusal for a rollout in progress is asked again; any other answer
      // before the pods were prepared fails the test.
      const preparing = () =>
        endpoints.calls
          .slice(callsBefore)
          .some((c) => c.method === 'POST' && c.pod.startsWith(`ingester-zone-${first}-`));
      const deadline = Date.now() + 30_000;
      let held: ReturnType<typeof kubectl>;
      for (;;) {
        let outcome: { ok: boolean; out: string } | undefined;
        held = kubectl(
          '-n',
          namespace,
          'patch',
          'statefulset',
          `ingester-zone-${first}`,
          '--type=merge',
          '-p',
          JSON.stringify({ spec: { replicas: to } }),
        );
        void held.then((o) => (outcome = o));
        const state = await waitFor(
          `round ${round}: zone ${first}'s pods being prepared`,
          () => (preparing() ? 'preparing' : outcome !== undefined ? 'ended' : undefined),
          { timeoutMs: 30_000, intervalMs: 20 },
        );
        if (state === 'preparing') break;
        if (!ROLLOUT_IN_PROGRESS.test(outcome!.out) || Date.now() > deadline)
          assert.fail(`round ${round}: zone ${first}'s downscale ended before its pods were prepared: ${outcome!.out}`);
      }
      const overlapping = await kubectl(
        '-n',
        namespace,
        'patch',
        'statefulset',
        `ingester-zone-${second}`,
        '--type=merge',
        '-p',
        JSON.stringify({ spec: { replicas: replicas[second]! - 1 } }),
      );
      open();
      endpoints.gate = undefined;
      const winner = await held;
      assert.ok(winner.ok, `round ${round}: zone ${first} (held first) allowed: ${winner.out}`);
      assert.equal(
        overlapping.ok,
        false,
        `round ${round}: zone ${second} must be refused while zone ${first}'s downscale holds the group (replica ${second === 'b' ? 'ahead' : 'behind'} by 45 s asking)`,
      );
      assert.match(
        overlapping.out,
        /statefulset ingester-zone-\w is already in process of updating replicas/,
        `round ${round}: refused by the lock, not by anything else`,
      );
      assert.equal(
        endpoints.calls.slice(callsBefore).filter((c) => c.pod.startsWith(`ingester-zone-${second}-`)).length,
        0,
        `round ${round}: no pod of zone ${second} was prepared`,
      );
      replicas[first] = to;
    }
    const sets = (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items;
    assert.deepEqual(
      sets.map((s) => s.spec?.replicas).sort(),
      [1, 1],
      'every round downscaled exactly the zone that held the lock',
    );
  });
});
