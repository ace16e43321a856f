import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { podOrdinal, podsOf, podView } from '../../src/vocabulary/pods.ts';
import { statefulSetView } from '../../src/rollout/snapshot.ts';
import type { Pod, StatefulSet } from '../../src/runtime/kube/types.ts';

const set: StatefulSet = {
  metadata: {
    name: 'ingester-zone-a',
    namespace: 'ns',
    uid: 'sts-uid',
    annotations: { 'rollout-max-unavailable': '2', 'grafana.com/rollout-paused': 'false' },
  },
  spec: {
    replicas: 3,
    selector: { matchLabels: { app: 'ingester-zone-a' } },
    serviceName: 'x',
    template: {},
    updateStrategy: { type: 'OnDelete' },
  },
  status: { replicas: 3, readyReplicas: 2, currentRevision: 'r1', updateRevision: 'r2' },
};

function pod(name: string, extra: Partial<Pod['metadata']> = {}, status: Pod['status'] = {}): Pod {
  return {
    metadata: {
      name,
      namespace: 'ns',
      uid: `${name}-uid`,
      labels: { app: 'ingester-zone-a', 'controller-revision-hash': 'r1' },
      ...extra,
    },
    status,
  };
}

const owned = {
  ownerReferences: [
    { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'ingester-zone-a', uid: 'sts-uid', controller: true },
  ],
};

describe('rollout snapshot', () => {
  it("finds a StatefulSet's pods by controller ownerReference, plus selector-matching orphans, without a name label", () => {
    const candidates = [
      pod('ingester-zone-a-0', owned),
      pod('ingester-zone-a-1', {}),
      pod('other-0', {
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'other', uid: 'other-uid', controller: true },
        ],
      }),
      pod('stray', { labels: { app: 'something-else' } }),
    ];
    assert.deepEqual(
      podsOf(set, candidates).map((p) => p.metadata?.name),
      ['ingester-zone-a-0', 'ingester-zone-a-1'],
    );
  });

  it('judges readiness as rollout-operator does: Running, every container ready and running, not terminating', () => {
    const running = {
      phase: 'Running',
      containerStatuses: [
        { name: 'c', image: 'i', imageID: '', ready: true, restartCount: 0, state: { running: { startedAt: 'x' } } },
      ],
    };
    assert.equal(podView(pod('p-0', {}, running)).ready, true);
    assert.equal(podView(pod('p-0', { deletionTimestamp: 'x' }, running)).ready, false);
    assert.equal(podView(pod('p-0', {}, { ...running, phase: 'Pending' })).ready, false);
    assert.equal(podView(pod('p-0', {}, { phase: 'Running', containerStatuses: [] })).ready, false);
    const crash = {
      phase: 'Running',
      containerStatuses: [
        {
          name: 'c',
          image: 'i',
          imageID: '',
          ready: false,
          restartCount: 5,
          state: { waiting: { reason: 'CrashLoopBackOff' } },
        },
      ],
    };
    assert.equal(podView(pod('p-0', {}, crash)).stuckReason, 'CrashLoopBackOff');
    const initStuck = {
      phase: 'Pending',
      initContainerStatuses: [
        {
          name: 'init',
          image: 'i',
          imageID: '',
          ready: false,
          restartCount: 0,
          state: { waiting: { reason: 'ImagePullBackOff' } },
        },
      ],
    };
    assert.equal(podView(pod('p-0', {}, initStuck)).stuckReason, 'ImagePullBackOff', 'init containers count too');
  });

  it('counts a pod whose Ready condition is False as not ready though its containers say ready (unreachable node, readiness gates); better than rollout-operator', () => {
    const running = {
      phase: 'Running',
      containerStatuses: [
        { name: 'c', image: 'i', imageID: '', ready: true, restartCount: 0, state: { running: { startedAt: 'x' } } },
      ],
    };
    const withReady = (status: string) => ({
      ...running,
      conditions: [
        { type: 'ContainersReady', status: 'True' },
        { type: 'Ready', status },
      ],
    });
    assert.equal(podView(pod('p-0', {}, withReady('True'))).ready, true);
    assert.equal(
      podView(pod('p-0', {}, withReady('False'))).ready,
      false,
      'the node lifecycle controller marked it NotReady',
    );
    assert.equal(podView(pod('p-0', {}, withReady('Unknown'))).ready, false);
    assert.equal(
      podView(pod('p-0', {}, running)).ready,
      true,
      'no Ready condition: the container statuses decide, as rollout-operator',
    );
  });

  it('reads ordinals, revisions and annotations into the planner view, pods in ordinal order', () => {
    assert.equal(podOrdinal('ingester-zone-a-12'), 12);
    const view = statefulSetView(set, [pod('ingester-zone-a-10', owned), pod('ingester-zone-a-2', owned)]);
    assert.deepEqual(
      view.pods.map((p) => p.ordinal),
      [2, 10],
    );
    assert.equal(view.maxUnavailableAnnotation, '2');
    assert.equal(view.paused, false, 'only "true" pauses');
    assert.equal(view.updateRevision, 'r2');
    assert.equal(view.replicas, 3);
  });

  it("reads the generation and the status's observedGeneration, and leaves them out when absent", () => {
    const view = statefulSetView(
      { ...set, metadata: { ...set.metadata, generation: 4 }, status: { ...set.status!, observedGeneration: 3 } },
      [],
    );
    assert.equal(view.generation, 4);
    assert.equal(view.observedGeneration, 3);
    const fresh = statefulSetView({ ...set, metadata: { ...set.metadata, generation: 1 }, status: undefined }, []);
    assert.equal(fresh.observedGeneration, undefined);
    assert.equal(fresh.currentRevision, '');
    assert.ok(!('generation' in statefulSetView(set, [])));
  });
});
