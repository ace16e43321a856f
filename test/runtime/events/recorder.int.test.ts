// Events reach the real API as events.k8s.io/v1 objects, and a repeating
// event becomes one Event with a growing series instead of a flood.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import { resources, type ConfigMap, type Event } from '../../../src/runtime/kube/types.ts';
import { kubeEventSink } from '../../../src/runtime/events/event.ts';
import { EventRecorder } from '../../../src/runtime/events/recorder.ts';
import { systemClock } from '../../../src/runtime/clock.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';

const cluster = testCluster();

describe('event recorder against the API server', () => {
  it('creates an Event on the object, then aggregates repeats into its series', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 5000 });
    const cm = await kube.create<ConfigMap>(resources.configMaps, { metadata: { name: 'subject', namespace } });
    const recorder = new EventRecorder({
      sink: kubeEventSink(kube),
      clock: systemClock,
      reportingController: 'stateward.dev/test',
      reportingInstance: 'test-runner',
    });
    const regarding = { apiVersion: 'v1', kind: 'ConfigMap', namespace, name: 'subject', uid: cm.metadata!.uid! };
    for (let i = 0; i < 20; i++)
      recorder.event(
        regarding,
        'Warning',
        'InvalidAnnotation',
        'Validate',
        'annotation rollout-max-unavailable="abc" is not a number; using 1',
      );
    // Twenty at once: one create, the other nineteen counted; stop() writes the count.
    await recorder.stop();
    const events = await waitFor(
      'one Event with a series of 20',
      async () => {
        const list = await kube.list<Event>(resources.events, { namespace });
        return list.items.length === 1 && list.items[0]!.series?.count === 20 ? list.items : undefined;
      },
      { timeoutMs: 10_000 },
    );
    const event = events[0]!;
    assert.equal(event.regarding?.uid, cm.metadata!.uid);
    assert.equal(event.reason, 'InvalidAnnotation');
    assert.equal(event.type, 'Warning');
    assert.equal(event.reportingController, 'stateward.dev/test');
  });
});
