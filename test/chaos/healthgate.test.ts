// The monitor's health-gate rule on hand-made timelines and watch events: a
// start well inside a pause is reported, one within the slack or outside
// every pause is not, and only gated starts after another zone count.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import {
  GATE_SLACK_MS,
  GateStartTracker,
  gateViolations,
  pauseIntervals,
  START_DEFER_MS,
  type GateStart,
  type TimelineEntry,
} from './healthgate.ts';

const NS = 'ns';
const start = (earliest: number, latest = earliest + 100): GateStart => ({
  namespace: NS,
  statefulSet: 'ingester-zone-b',
  pod: 'ingester-zone-b-0',
  earliest,
  latest,
  after: ['ingester-zone-a'],
});

describe('pauseIntervals', () => {
  it('an error ratio above the threshold pauses its namespace until every pod is back below', () => {
    const timeline: TimelineEntry[] = [
      { at: 1000, kind: 'ratio', namespace: NS, pod: 'a-0', value: 0.5 },
      { at: 1001, kind: 'ratio', namespace: NS, pod: 'a-1', value: 0.5 },
      { at: 5000, kind: 'ratio', namespace: NS, pod: 'a-0', value: 0 },
      { at: 6000, kind: 'ratio', namespace: NS, pod: 'a-1', value: 0.05 },
      { at: 9000, kind: 'ratio', namespace: NS, pod: 'a-1', value: 0.06 },
    ];
    assert.deepEqual(
      pauseIntervals(timeline, [NS, 'other']),
      new Map([
        [
          NS,
          [
            { from: 1000, to: 6000, why: 'error ratio above 0.05' },
            { from: 9000, to: Infinity, why: 'error ratio above 0.05' },
          ],
        ],
        ['other', []],
      ]),
    );
  });

  it('a Prometheus outage pauses every gated namespace, kept apart from the ratio intervals', () => {
    const timeline: TimelineEntry[] = [
      { at: 3000, kind: 'prometheus', up: true },
      { at: 2000, kind: 'prometheus', up: false },
      { at: 8000, kind: 'prometheus', up: false },
      { at: 2500, kind: 'ratio', namespace: NS, pod: 'a-0', value: 1 },
    ];
    const pauses = pauseIntervals(timeline, [NS, 'other']);
    assert.deepEqual(pauses.get('other'), [
      { from: 2000, to: 3000, why: 'Prometheus down' },
      { from: 8000, to: Infinity, why: 'Prometheus down' },
    ]);
    assert.equal(pauses.get(NS)?.length, 3);
  });
});

describe('gateViolations', () => {
  const pauses = new Map([[NS, [{ from: 10_000, to: 20_000, why: 'Prometheus down' }]]]);

  it('reports a start past the slack and before the end', () => {
    const found = gateViolations(pauses, [start(10_000 + GATE_SLACK_MS)]);
    assert.equal(found.length, 1);
    assert.match(found[0]!.message, /ns\/ingester-zone-b started rolling .* 2500 ms after .*Prometheus down/);
  });

  it('allows the evaluation in flight, a start before the pause, and one whose delete may have been after it ended', () => {
    assert.deepEqual(
      gateViolations(pauses, [start(10_000 + GATE_SLACK_MS - 1), start(9000), start(19_500, 20_000), start(20_000)]),
      [],
    );
  });

  it('judges a start only against its own namespace', () => {
    assert.deepEqual(gateViolations(new Map([['other', pauses.get(NS)!]]), [start(15_000)]), []);
  });
});

// ------------------------------------------------------------ the tracker

const REV = { a: ['a1', 'a2'], b: ['b1', 'b2'] } as const;

function sts(zone: 'a' | 'b', revision: string, o: { gated?: boolean; replicas?: number } = {}): V1StatefulSet {
  return {
    metadata: {
      name: `ingester-zone-${zone}`,
      namespace: NS,
      labels: { 'rollout-group': 'ingester' },
      annotations: o.gated === false ? {} : { 'grafana.com/rollout-health-check': 'errors' },
    },
    spec: { replicas: o.replicas ?? 2, selector: {}, serviceName: '', template: {} },
    status: { replicas: 2, updateRevision: revision },
  };
}

function pod(
  zone: 'a' | 'b',
  ordinal: number,
  revision: string,
  o: { deleting?: number; evicted?: boolean } = {},
): V1Pod {
  return {
    metadata: {
      name: `ingester-zone-${zone}-${ordinal}`,
      namespace: NS,
      labels: { 'controller-revision-hash': revision },
      ownerReferences: [
        { kind: 'StatefulSet', name: `ingester-zone-${zone}`, controller: true, apiVersion: 'apps/v1', uid: zone },
      ],
      ...(o.deleting !== undefined
        ? {
            deletionTimestamp: new Date(o.deleting + 30_000).toISOString().replace(/\.\d+Z$/, 'Z') as unknown as Date,
            deletionGracePeriodSeconds: 30,
          }
        : {}),
    },
    status: {
      conditions: [
        { type: 'Ready', status: 'True' },
        ...(o.evicted ? [{ type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI' }] : []),
      ],
    },
  };
}

/** Two zones on their first revision, then a new one for both at t=1000; zone a starts rolling at 2000. */
function rolloutUnderWay(o: { gatedB?: boolean } = {}): GateStartTracker {
  const tracker = new GateStartTracker();
  tracker.applyStatefulSet(sts('a', REV.a[0]), 'ADDED', 0);
  tracker.applyStatefulSet(sts('b', REV.b[0], { gated: o.gatedB ?? true }), 'ADDED', 0);
  for (const zone of ['a', 'b'] as const)
    for (const i of [0, 1]) tracker.applyPod(pod(zone, i, REV[zone][0]), 'ADDED', 0, false);
  tracker.applyStatefulSet(sts('a', REV.a[1]), 'MODIFIED', 1000);
  tracker.applyStatefulSet(sts('b', REV.b[1], { gated: o.gatedB ?? true }), 'MODIFIED', 1000);
  tracker.applyPod(pod('a', 0, REV.a[0], { deleting: 2000 }), 'MODIFIED', 2010, false);
  return tracker;
}

describe('GateStartTracker', () => {
  it('the first zone is never a gated start; the next zone is, once, with its delete time bounded', () => {
    const tracker = rolloutUnderWay();
    tracker.applyPod(pod('b', 1, REV.b[0], { deleting: 7300 }), 'MODIFIED', 7400, false);
    tracker.applyPod(pod('b', 0, REV.b[0], { deleting: 7300 }), 'MODIFIED', 7410, false);
    assert.deepEqual(tracker.tick(7400 + START_DEFER_MS - 1), []);
    assert.deepEqual(tracker.tick(7400 + START_DEFER_MS), [
      {
        namespace: NS,
        statefulSet: 'ingester-zone-b',
        pod: 'ingester-zone-b-1',
        earliest: 7000,
        latest: 7400,
        after: ['ingester-zone-a'],
      },
    ]);
    assert.equal(tracker.startsSeen, 2);
  });

  it('evictions, unbound StatefulSets, downscales and zones already on their revision are not gated starts', () => {
    const evicted = rolloutUnderWay();
    evicted.applyPod(pod('b', 1, REV.b[0], { deleting: 7000, evicted: true }), 'MODIFIED', 7100, false);
    const unbound = rolloutUnderWay({ gatedB: false });
    unbound.applyPod(pod('b', 1, REV.b[0], { deleting: 7000 }), 'MODIFIED', 7100, false);
    const downscaled = rolloutUnderWay();
    downscaled.applyPod(pod('b', 1, REV.b[0], { deleting: 7000 }), 'MODIFIED', 7100, false);
    downscaled.applyStatefulSet(sts('b', REV.b[1], { replicas: 1 }), 'MODIFIED', 7200);
    const upscaled = rolloutUnderWay();
    upscaled.applyPod(pod('b', 2, REV.b[1]), 'ADDED', 6000, false);
    upscaled.applyPod(pod('b', 1, REV.b[0], { deleting: 7000 }), 'MODIFIED', 7100, false);
    for (const t of [evicted, unbound, downscaled, upscaled]) assert.deepEqual(t.tick(20_000), []);
  });

  it('a zone whose roll began before this one’s revision changed is not this rollout’s', () => {
    const tracker = rolloutUnderWay();
    tracker.applyStatefulSet(sts('b', 'b3'), 'MODIFIED', 5000);
    tracker.applyPod(pod('b', 1, REV.b[0], { deleting: 7000 }), 'MODIFIED', 7100, false);
    assert.deepEqual(tracker.tick(20_000), []);
  });

  it('a relisted deletion has no time to judge by', () => {
    const tracker = rolloutUnderWay();
    tracker.applyPod(pod('b', 1, REV.b[0], { deleting: 7000 }), 'MODIFIED', 7100, true);
    assert.deepEqual(tracker.tick(20_000), []);
  });
});
