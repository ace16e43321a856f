// The prepare-downscale webhook's min-time when this replica's wall clock
// steps forward, against the real apiserver: the handler runs in this
// process on a FakeClock (its only clock reading is for timestamps and
// min-time) and reads and writes the group through the apiserver.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { resources, type StatefulSet } from '../../../src/runtime/kube/types.ts';
import { nopLogger } from '../../../src/runtime/log/logger.ts';
import type { AdmissionRequestV1 } from '../../../src/webhooks/admission.ts';
import { prepareDownscaleHandler } from '../../../src/downscale/prepare/handler.ts';
import { formatRfc3339 } from '../../../src/downscale/prepare/rfc3339.ts';
import { testCluster } from '../../cluster/testing.ts';
import { testClient } from '../../support/rollout-group.ts';

const cluster = testCluster();
const SEC = 1000;
const MIN = 60 * SEC;

/** A zone of the group, labelled for prepare-downscale; no pods (replicas 0 in the cluster). */
function zone(namespace: string, name: string, extra: { labels?: Record<string, string>; annotations?: Record<string, string> } = {}): StatefulSet {
  return {
    metadata: {
      name,
      namespace,
      labels: { 'rollout-group': 'ingester', 'grafana.com/prepare-downscale': 'true', ...extra.labels },
      annotations: { 'grafana.com/prepare-downscale-http-path': 'prepare-shutdown', 'grafana.com/prepare-downscale-http-port': '8080', ...extra.annotations },
    },
    spec: { replicas: 0, serviceName: name, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'example.invalid/c:1' }] } } },
  };
}

function downscaleRequest(namespace: string, set: StatefulSet, from: number, to: number): AdmissionRequestV1 {
  const at = (replicas: number) => ({ apiVersion: 'apps/v1', kind: 'StatefulSet', ...set, spec: { ...set.spec, replicas } });
  return { uid: `uid-${from}-${to}`, resource: { group: 'apps', version: 'v1', resource: 'statefulsets' }, name: set.metadata!.name!, namespace, operation: 'UPDATE', oldObject: at(from), object: at(to), dryRun: false };
}

describe('prepare-downscale min-time under wall-clock steps', () => {
  it('a forward step of this replica\'s clock does not admit the next zone early', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const clock = new FakeClock(Math.floor(Date.now() / SEC) * SEC);
    await kube.create(resources.statefulSets, zone(namespace, 'zone-a', { labels: { 'grafana.com/min-time-between-zones-downscale': '10m' }, annotations: { 'grafana.com/last-downscale': formatRfc3339(clock.now()) } }));
    const zoneB = await kube.create(resources.statefulSets, zone(namespace, 'zone-b'));
    const handle = prepareDownscaleHandler({ client: kube, clock, log: nopLogger, mode: 'annotation', zoneTrackerConfigMap: 'unused', clusterDomain: 'cluster.local.', podTimeoutMs: 1000, identity: 'test' });
    const ask = () => Promise.resolve(handle(downscaleRequest(namespace, zoneB, 3, 2), AbortSignal.timeout(15_000)));

    const first = await ask();
    assert.equal(first.allowed, false);
    assert.match(first.status?.message ?? '', /statefulset zone-a was downscaled at .* and is labelled to wait 10m0s between zone downscales/);

    clock.step(11 * MIN);
    const afterStep = await ask();
    assert.equal(afterStep.allowed, false, 'still denied after the wall clock jumped past min-time');
    assert.match(afterStep.status?.message ?? '', /labelled to wait 10m0s between zone downscales \(counted from .*: this replica's clock stepped\)/);

    await clock.advance(10 * MIN);
    const later = await ask();
    assert.equal(later.allowed, true, `allowed once min-time really passed: ${later.status?.message}`);
    const recorded = await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'zone-b' });
    assert.equal(recorded.metadata?.annotations?.['grafana.com/last-downscale'], formatRfc3339(clock.now()), 'records the (stepped) wall time: timestamps stay wall clock');
  });
});
