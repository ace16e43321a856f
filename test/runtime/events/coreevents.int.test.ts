// Events written as core/v1 Events (Reloader's chart grants only those):
// accepted by the real API server, and repeats aggregated into count and
// lastTimestamp on the one Event.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import { resources, type ConfigMap } from '../../../src/runtime/kube/types.ts';
import { kubeEventSink } from '../../../src/runtime/events/event.ts';
import { CORE_EVENTS, coreEventSink, type CoreEventJson } from '../../../src/runtime/events/coreevents.ts';
import { EventRecorder } from '../../../src/runtime/events/recorder.ts';
import { systemClock } from '../../../src/runtime/clock.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';

const cluster = testCluster();

describe('event recorder writing core/v1 Events', () => {
  it('creates one core Event on the object and counts repeats on it', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 5000 });
    const cm = await kube.create<ConfigMap>(resources.configMaps, { metadata: { name: 'subject', namespace } });
    const recorder = new EventRecorder({
      sink: kubeEventSink(kube),
      clock: systemClock,
      reportingController: 'stateward.dev/test',
      reportingInstance: 'test-runner',
    });
    recorder.useSink(coreEventSink(kube));
    const regarding = { apiVersion: 'v1', kind: 'ConfigMap', namespace, name: 'subject', uid: cm.metadata!.uid! };
    for (let i = 0; i < 5; i++) recorder.event(regarding, 'Normal', 'Reloaded', 'Restart', 'changed');
    await recorder.stop();
    const events = await waitFor(
      'one core Event counted 5 times',
      async () => {
        const list = await kube.list<CoreEventJson & { metadata: { uid?: string } }>(CORE_EVENTS, { namespace });
        return list.items.length === 1 && list.items[0]!.count === 5 ? list.items : undefined;
      },
      { timeoutMs: 10_000 },
    );
    const event = events[0]!;
    assert.equal(event.involvedObject.uid, cm.metadata!.uid);
    assert.equal(event.involvedObject.kind, 'ConfigMap');
    assert.equal(event.reason, 'Reloaded');
    assert.equal(event.message, 'changed');
    assert.equal(event.type, 'Normal');
    assert.equal(event.source.component, 'stateward.dev/test');
    assert.ok(event.firstTimestamp <= event.lastTimestamp);
  });
});
