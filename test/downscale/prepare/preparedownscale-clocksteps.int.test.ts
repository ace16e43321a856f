// The prepare-downscale webhook's min-time when this replica's wall clock
// steps forward, against the real apiserver: the handler runs in this
// process on a FakeClock (its only clock reading is for timestamps and
// min-time) and reads and writes the group through the apiserver.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { resources, type Lease, type StatefulSet } from '../../../src/runtime/kube/types.ts';
import { lockName } from '../../../src/downscale/prepare/handler.ts';
import { goTimeString } from '../../../src/downscale/mintime.ts';
import { recordingLogger } from '../../support/logger.ts';
import { formatRfc3339 } from '../../../src/vocabulary/rfc3339.ts';
import { testCluster } from '../../cluster/testing.ts';
import { inProcessWebhook, zone } from './requests.ts';
import { testClient } from '../../support/rollout-group.ts';

const cluster = testCluster();
const SEC = 1000;
const MIN = 60 * SEC;

describe('prepare-downscale min-time under wall-clock steps', () => {
  it("a forward step of this replica's clock does not admit the next zone early", async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const clock = new FakeClock(Math.floor(Date.now() / SEC) * SEC);
    await kube.create(
      resources.statefulSets,
      zone(namespace, 'zone-a', {
        labels: { 'grafana.com/min-time-between-zones-downscale': '10m' },
        annotations: { 'grafana.com/last-downscale': formatRfc3339(clock.now()) },
      }),
    );
    const zoneB = await kube.create(resources.statefulSets, zone(namespace, 'zone-b'));
    const webhook = inProcessWebhook(kube, namespace, { clock });
    const ask = () => webhook(zoneB, 3, 2);

    const first = await ask();
    assert.equal(first.allowed, false);
    assert.match(
      first.status?.message ?? '',
      /statefulset zone-a was downscaled at .* and is configured to wait 10m0s between zone downscales/,
    );

    clock.step(11 * MIN);
    const afterStep = await ask();
    assert.equal(afterStep.allowed, false, 'still denied after the wall clock jumped past min-time');
    assert.match(
      afterStep.status?.message ?? '',
      /configured to wait 10m0s between zone downscales \(counted from .*: this replica's clock stepped\)/,
    );

    await clock.advance(10 * MIN);
    const later = await ask();
    assert.equal(later.allowed, true, `allowed once min-time really passed: ${later.status?.message}`);
    // Recorded on the group's Lease before the allow (this request is the test's own and lands nowhere, so
    // nothing is copied onto the StatefulSet).
    const lease = await kube.get<Lease>(resources.leases, { namespace, name: lockName('ingester') });
    const recorded = (
      JSON.parse(lease.metadata?.annotations?.['stateward.dev/last-downscales'] ?? '{}') as Record<
        string,
        { at: string }
      >
    )['zone-b']?.at;
    assert.equal(recorded, formatRfc3339(clock.now()), 'records the (stepped) wall time: timestamps stay wall clock');
  });

  it('a downscale admitted again (its first update did not land) is recorded at its own time: the next zone waits from the retry (chaos soak, seed 23)', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const clock = new FakeClock(Math.floor(Date.now() / SEC) * SEC);
    const minTime = { labels: { 'grafana.com/min-time-between-zones-downscale': '30s' } };
    const zoneA = await kube.create(resources.statefulSets, zone(namespace, 'zone-a', minTime));
    const zoneB = await kube.create(resources.statefulSets, zone(namespace, 'zone-b', minTime));
    const webhook = inProcessWebhook(kube, namespace, { clock });
    const ask = (set: StatefulSet) => webhook(set, 3, 2);

    const first = await ask(zoneA);
    assert.equal(first.allowed, true, first.status?.message);
    // The same change again 6 s later: its first update failed after admission (another webhook, an etcd
    // restart) and the client retried. Before, a repeat within 15 s was allowed on the first record.
    await clock.advance(6 * SEC);
    const retry = await ask(zoneA);
    assert.equal(retry.allowed, true, retry.status?.message);
    const retriedAt = clock.now();

    // 31 s after the first allow, 25 s after the retry: zone b must still wait.
    await clock.advance(25 * SEC);
    const early = await ask(zoneB);
    assert.equal(early.allowed, false, 'min-time counts from the retry');
    assert.match(
      early.status?.message ?? '',
      new RegExp(
        `zone-a was downscaled at ${goTimeString(retriedAt).replace(/[.+]/g, '\\$&')} and is configured to wait 30s`,
      ),
    );
    await clock.advance(6 * SEC);
    const later = await ask(zoneB);
    assert.equal(later.allowed, true, `allowed 31 s after the retry: ${later.status?.message}`);
  });

  it("a record on the Lease that does not parse denies the group's downscales, naming the Lease in the log", async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const zoneA = await kube.create(resources.statefulSets, zone(namespace, 'zone-a'));
    await kube.create(resources.statefulSets, zone(namespace, 'zone-b'));
    const { lines, log } = recordingLogger();
    const webhook = inProcessWebhook(kube, namespace, { clock: new FakeClock(Date.now()), log });
    const ask = (from: number) => webhook(zoneA, from, from - 1);
    assert.equal((await ask(5)).allowed, true);
    const where = { namespace, name: lockName('ingester') };
    const lease = await kube.get<Lease>(resources.leases, where);
    await kube.update<Lease>(resources.leases, {
      ...lease,
      metadata: { ...lease.metadata, annotations: { 'stateward.dev/last-downscales': '{broken' } },
    });
    const denied = await ask(4);
    assert.equal(denied.allowed, false);
    assert.match(denied.status?.message ?? '', /parsing downscale annotations failed/);
    const logged = lines.map((l) => JSON.stringify(l));
    assert.ok(
      logged.some((l) => l.includes(where.name) && l.includes('stateward.dev/last-downscales is not JSON')),
      logged.join('\n'),
    );
  });
});
