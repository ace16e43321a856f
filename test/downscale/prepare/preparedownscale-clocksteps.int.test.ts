// The prepare-downscale webhook's min-time when this replica's wall clock
// steps forward, against the real apiserver: the handler runs in this
// process on a FakeClock (its only clock reading is for timestamps and
// min-time) and reads and writes the group through the apiserver.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { resources, type StatefulSet } from '../../../src/runtime/kube/types.ts';
import { nopLogger } from '../../../src/runtime/log/logger.ts';
import { prepareDownscaleHandler } from '../../../src/downscale/prepare/handler.ts';
import { formatRfc3339 } from '../../../src/vocabulary/rfc3339.ts';
import { testCluster } from '../../cluster/testing.ts';
import { downscaleRequest, zone } from './requests.ts';
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
    const handle = prepareDownscaleHandler({
      client: kube,
      clock,
      log: nopLogger,
      mode: 'annotation',
      zoneTrackerConfigMap: 'unused',
      clusterDomain: 'cluster.local.',
      podTimeoutMs: 1000,
      identity: 'test',
    });
    const ask = () => Promise.resolve(handle(downscaleRequest(namespace, zoneB, 3, 2), AbortSignal.timeout(15_000)));

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
    const recorded = await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'zone-b' });
    assert.equal(
      recorded.metadata?.annotations?.['grafana.com/last-downscale'],
      formatRfc3339(clock.now()),
      'records the (stepped) wall time: timestamps stay wall clock',
    );
  });
});
