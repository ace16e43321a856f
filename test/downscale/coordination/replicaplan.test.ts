import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { StatefulSet } from '../../../src/runtime/kube/types.ts';
import {
  chainOrder,
  desiredFollowerReplicas,
  leaderFor,
  minimumTimeHasElapsed,
  planGroupReplicas,
} from '../../../src/downscale/coordination/replicaplan.ts';
import { forceReplicasOverride } from '../../../src/downscale/coordination/scalingfields.ts';
import { mirrorReference, mirrorTarget, writeBack } from '../../../src/downscale/coordination/mirror.ts';
import {
  cancelSucceeded,
  delayedDownscaleCalls,
  delayedDownscaleConfig,
  delayedDownscaleDecision,
  parsePrepareResponse,
  podUrl,
} from '../../../src/downscale/coordination/delay.ts';
import { validateScalingMetadata } from '../../../src/downscale/coordination/validate.ts';
import { formatRfc3339 } from '../../../src/vocabulary/rfc3339.ts';
import {
  DELAYED_DOWNSCALE_ANNOTATION_KEY as DELAY,
  DELAYED_DOWNSCALE_URL_ANNOTATION_KEY as DELAY_URL,
  DOWNSCALE_LEADER_ANNOTATION_KEY as LEADER,
  FORCE_REPLICAS_ANNOTATION_KEY as FORCE,
  LAST_DOWNSCALE_ANNOTATION_KEY as LAST,
  MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY as MIN_TIME,
  MIRROR_API_VERSION_ANNOTATION_KEY as MIRROR_API,
  MIRROR_KIND_ANNOTATION_KEY as MIRROR_KIND,
  MIRROR_NAME_ANNOTATION_KEY as MIRROR_NAME,
  PREPARE_DOWNSCALE_LABEL_KEY as PREPARE,
  UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY as ONLY_WHEN_READY,
} from '../../../src/vocabulary/keys.ts';

const NOW = Date.UTC(2024, 0, 2, 12, 0, 0);
const MIN = 60_000;
const HOUR = 60 * MIN;
const ago = (ms: number) => formatRfc3339(NOW - ms);

function sts(
  name: string,
  opts: {
    replicas?: number;
    ready?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  } = {},
): StatefulSet {
  return {
    metadata: {
      name,
      namespace: 'test',
      labels: { 'rollout-group': 'ingester', ...opts.labels },
      annotations: { ...opts.annotations },
    },
    spec: { replicas: opts.replicas ?? 3, serviceName: name, selector: {}, template: {} },
    status: { replicas: opts.replicas ?? 3, readyReplicas: opts.ready ?? opts.replicas ?? 3 },
  };
}

function desired(d: ReturnType<typeof desiredFollowerReplicas>): number {
  assert.ok('desired' in d, `expected a decision, got ${JSON.stringify(d)}`);
  return d.desired;
}

describe('force replicas, leader, min time', { timeout: 10000 }, () => {
  it('forceReplicasOverride (TestGetForceReplicasOverride)', () => {
    assert.equal(forceReplicasOverride(sts('a')), undefined);
    assert.deepEqual(forceReplicasOverride(sts('a', { annotations: { [FORCE]: '5' } })), { replicas: 5 });
    assert.deepEqual(forceReplicasOverride(sts('a', { annotations: { [FORCE]: '0' } })), { replicas: 0 });
    assert.deepEqual(forceReplicasOverride(sts('a', { annotations: { [FORCE]: '+7' } })), { replicas: 7 });
    for (const bad of ['-1', 'abc', '', '1.5', '2147483648', ' 3']) {
      const r = forceReplicasOverride(sts('a', { annotations: { [FORCE]: bad } }));
      assert.ok(r !== undefined && 'warning' in r, bad);
    }
    assert.deepEqual(forceReplicasOverride(sts('a', { annotations: { [FORCE]: '2147483647' } })), {
      replicas: 2147483647,
    });
  });

  it('leaderFor (TestGetLeaderForStatefulSet)', () => {
    const a = sts('zone-a');
    const b = sts('zone-b', { annotations: { [LEADER]: 'zone-a' } });
    const c = sts('zone-c', { annotations: { [LEADER]: 'zone-x' } });
    assert.equal(leaderFor(a, [a, b]), undefined);
    assert.equal(leaderFor(b, [a, b]), a);
    assert.deepEqual(leaderFor(c, [a, b, c]), { error: `could not find leader for zone-c using ${LEADER}` });
  });

  it("minimumTimeHasElapsed (TestMinimumTimeHasElapsed), with the other zone's label", () => {
    const other = (last: string | undefined, label: string | undefined) =>
      sts('zone-a', {
        labels: label === undefined ? {} : { [MIN_TIME]: label },
        annotations: last === undefined ? {} : { [LAST]: last },
      });
    const follower = sts('zone-b', { labels: { [MIN_TIME]: '1m' } });
    const check = (o: StatefulSet) => minimumTimeHasElapsed({ zone: 'zone-b', group: [o, follower], now: NOW });
    assert.deepEqual(check(other(undefined, '12h')), { elapsed: true }, 'no annotation → allowed');
    assert.deepEqual(
      check(other(ago(HOUR), undefined)),
      { elapsed: true },
      'no label on the other → allowed (follower label ignored)',
    );
    assert.deepEqual(check(other(ago(13 * HOUR), '12h')), { elapsed: true });
    assert.deepEqual(check(other(ago(12 * HOUR), '12h')), { elapsed: true }, 'exactly min-time → allowed (≥)');
    const blocked = check(other(ago(HOUR), '12h'));
    assert.ok('elapsed' in blocked && !blocked.elapsed);
    assert.equal(blocked.blockedBy, 'zone-a');
    assert.match(
      blocked.reason,
      /statefulset zone-a was downscaled at 2024-01-02 11:00:00 \+0000 UTC and is configured to wait 12h0m0s between zone downscales/,
    );
    // The follower's own last-downscale does not count.
    const self = sts('zone-b', { labels: { [MIN_TIME]: '12h' }, annotations: { [LAST]: ago(MIN) } });
    assert.deepEqual(minimumTimeHasElapsed({ zone: 'zone-b', group: [self], now: NOW }), { elapsed: true });
    const badLabel = check(other(ago(HOUR), '12 hours'));
    assert.ok('error' in badLabel && badLabel.error.includes(MIN_TIME) && badLabel.error.includes('zone-a'));
    const badLast = check(other('2024-01-02', undefined));
    assert.ok('error' in badLast && badLast.error.includes(LAST) && badLast.error.includes('zone-a'));
  });

  it('minimumTimeHasElapsed (#463): the annotation first, the label as the fallback', () => {
    const other = (metadata: { labels?: Record<string, string>; annotations?: Record<string, string> }) =>
      sts('zone-a', { labels: metadata.labels, annotations: { [LAST]: ago(HOUR), ...metadata.annotations } });
    const follower = sts('zone-b');
    const check = (o: StatefulSet) => minimumTimeHasElapsed({ zone: 'zone-b', group: [o, follower], now: NOW });
    const annotationOnly = check(other({ annotations: { [MIN_TIME]: '2h' } }));
    assert.ok('elapsed' in annotationOnly && !annotationOnly.elapsed && annotationOnly.minTime === 2 * HOUR);
    assert.match(annotationOnly.reason, /and is configured to wait 2h0m0s between zone downscales$/);
    // Both: the annotation wins, either way round.
    assert.deepEqual(check(other({ annotations: { [MIN_TIME]: '30m' }, labels: { [MIN_TIME]: '12h' } })), {
      elapsed: true,
    });
    const longer = check(other({ annotations: { [MIN_TIME]: '12h' }, labels: { [MIN_TIME]: '30m' } }));
    assert.ok('elapsed' in longer && !longer.elapsed && longer.minTime === 12 * HOUR);
    // An empty annotation is not set: the label applies.
    const emptyAnnotation = check(other({ annotations: { [MIN_TIME]: '' }, labels: { [MIN_TIME]: '2h' } }));
    assert.ok('elapsed' in emptyAnnotation && !emptyAnnotation.elapsed && emptyAnnotation.minTime === 2 * HOUR);
    const bad = check(other({ annotations: { [MIN_TIME]: '2 hours' } }));
    assert.ok(
      'error' in bad && bad.error.startsWith(`can't parse ${MIN_TIME} annotation of zone-a`),
      JSON.stringify(bad),
    );
  });
});

describe('desiredFollowerReplicas (TestReconcileStsReplicas)', { timeout: 10000 }, () => {
  const leader = (replicas: number, extra: Parameters<typeof sts>[1] = {}) => sts('zone-a', { replicas, ...extra });
  const follower = (replicas: number, annotations: Record<string, string> = {}, labels: Record<string, string> = {}) =>
    sts('zone-b', { replicas, annotations: { [LEADER]: 'zone-a', ...annotations }, labels });

  it('no leader annotation keeps current replicas, force-replicas or not (validateScalingMetadata warns)', () => {
    const plain = sts('zone-a', { replicas: 3, annotations: { [FORCE]: '1' } });
    const d = desiredFollowerReplicas({ follower: plain, group: [plain], now: NOW });
    assert.equal(desired(d), 3);
    assert.ok(validateScalingMetadata(plain).some((w) => w.includes('has no effect: it applies only to followers')));
    const mirror = sts('zone-a', {
      replicas: 3,
      annotations: {
        [FORCE]: '1',
        [MIRROR_NAME]: 'ingester',
        [MIRROR_KIND]: 'ReplicaTemplate',
        [MIRROR_API]: 'rollout-operator.grafana.com/v1',
      },
    });
    assert.ok(
      !validateScalingMetadata(mirror).some((w) => w.includes('has no effect')),
      'a mirror uses force-replicas',
    );
    const noForce = desiredFollowerReplicas({ follower: sts('x'), group: [sts('x')], now: NOW });
    assert.ok('desired' in noForce && noForce.warning === undefined);
  });

  it('leader not in the group is an error', () => {
    const f = follower(3);
    assert.deepEqual(desiredFollowerReplicas({ follower: f, group: [f], now: NOW }), {
      error: `could not find leader for zone-b using ${LEADER}`,
    });
  });

  it('scales up to the leader immediately', () => {
    const f = follower(2);
    assert.equal(desired(desiredFollowerReplicas({ follower: f, group: [leader(5), f], now: NOW })), 5);
  });

  it('upscale-only-when-leader-ready waits for the leader', () => {
    const f = follower(2, { [ONLY_WHEN_READY]: 'true' });
    assert.equal(desired(desiredFollowerReplicas({ follower: f, group: [leader(5, { ready: 3 }), f], now: NOW })), 2);
    assert.equal(desired(desiredFollowerReplicas({ follower: f, group: [leader(5, { ready: 5 }), f], now: NOW })), 5);
    const notExactlyTrue = follower(2, { [ONLY_WHEN_READY]: 'True' });
    assert.equal(
      desired(
        desiredFollowerReplicas({
          follower: notExactlyTrue,
          group: [leader(5, { ready: 3 }), notExactlyTrue],
          now: NOW,
        }),
      ),
      5,
    );
  });

  it('scales down to the leader when no other zone is inside its min-time', () => {
    const f = follower(5);
    assert.equal(desired(desiredFollowerReplicas({ follower: f, group: [leader(3), f], now: NOW })), 3);
    const l = leader(3, { labels: { [MIN_TIME]: '1h' }, annotations: { [LAST]: ago(2 * HOUR) } });
    assert.equal(desired(desiredFollowerReplicas({ follower: f, group: [l, f], now: NOW })), 3);
  });

  it('should not update replicas within minimum time between downscales', () => {
    const l = leader(3, { labels: { [MIN_TIME]: '12h' }, annotations: { [LAST]: ago(HOUR) } });
    const f = follower(5, {}, { [MIN_TIME]: '12h' });
    const d = desiredFollowerReplicas({ follower: f, group: [l, f], now: NOW });
    assert.equal(desired(d), 5);
    assert.ok('reason' in d && d.reason.includes('configured to wait 12h0m0s'));
    // A third zone inside ITS min-time blocks too.
    const c = sts('zone-c', { labels: { [MIN_TIME]: '30m' }, annotations: { [LAST]: ago(10 * MIN) } });
    assert.equal(desired(desiredFollowerReplicas({ follower: f, group: [leader(3), f, c], now: NOW })), 5);
  });

  it('unparsable last-downscale or min-time is an error during a downscale', () => {
    const f = follower(5);
    const l = leader(3, { annotations: { [LAST]: 'not-a-time' } });
    assert.ok('error' in desiredFollowerReplicas({ follower: f, group: [l, f], now: NOW }));
    const l2 = leader(3, { labels: { [MIN_TIME]: 'soon' }, annotations: { [LAST]: ago(MIN) } });
    const e = desiredFollowerReplicas({ follower: f, group: [l2, f], now: NOW });
    assert.ok('error' in e && e.error.includes(MIN_TIME));
  });

  it('force-replicas on follower scales immediately via leader path, ignoring min-time', () => {
    const l = leader(3, { labels: { [MIN_TIME]: '12h' }, annotations: { [LAST]: ago(MIN) } });
    const f = follower(5, { [FORCE]: '0' });
    const d = desiredFollowerReplicas({ follower: f, group: [l, f], now: NOW });
    assert.ok('cause' in d && d.cause === 'force' && d.desired === 0);
  });

  it('invalid force-replicas on a follower is ignored with a warning', () => {
    const f = follower(2, { [FORCE]: '-3' });
    const d = desiredFollowerReplicas({ follower: f, group: [leader(4), f], now: NOW });
    assert.ok('desired' in d && d.desired === 4 && d.warning?.includes('negative'));
  });
});

describe('chainOrder and planGroupReplicas', { timeout: 10000 }, () => {
  it('orders leaders before followers, otherwise by name', () => {
    const c = sts('zone-a', { annotations: { [LEADER]: 'zone-b' } });
    const b = sts('zone-b', { annotations: { [LEADER]: 'zone-c' } });
    const a = sts('zone-c');
    const d = sts('zone-d');
    const order = chainOrder([d, c, b, a]);
    assert.ok(Array.isArray(order));
    assert.deepEqual(
      order.map((s) => s.metadata?.name),
      ['zone-c', 'zone-b', 'zone-a', 'zone-d'],
    );
  });

  it('detects cycles, including self-leadership', () => {
    const a = sts('zone-a', { annotations: { [LEADER]: 'zone-c' } });
    const b = sts('zone-b', { annotations: { [LEADER]: 'zone-a' } });
    const c = sts('zone-c', { annotations: { [LEADER]: 'zone-b' } });
    const r = chainOrder([a, b, c]);
    assert.ok(!Array.isArray(r));
    assert.deepEqual(r.cycle, ['zone-a', 'zone-c', 'zone-b', 'zone-a']);
    const self = sts('zone-a', { annotations: { [LEADER]: 'zone-a' } });
    const s = chainOrder([self]);
    assert.ok(!Array.isArray(s) && s.error.includes('cycle'));
    const plan = planGroupReplicas({ group: [a, b, c], now: NOW });
    assert.deepEqual(plan.changes, []);
    assert.equal(plan.errors.length, 1);
  });

  it('a chained scale-up a→b→c converges in one pass', () => {
    const a = sts('zone-a', { replicas: 6 });
    const b = sts('zone-b', { replicas: 3, annotations: { [LEADER]: 'zone-a' } });
    const c = sts('zone-c', { replicas: 3, annotations: { [LEADER]: 'zone-b' } });
    const plan = planGroupReplicas({ group: [c, b, a], now: NOW });
    assert.deepEqual(
      plan.changes.map(({ statefulSet, from, to }) => ({ statefulSet, from, to })),
      [
        { statefulSet: 'zone-b', from: 3, to: 6 },
        { statefulSet: 'zone-c', from: 3, to: 6 },
      ],
    );
    assert.deepEqual(plan.errors, []);
    assert.equal(b.spec?.replicas, 3, 'the input is not mutated');
  });

  it('a chained scale-down converges in one pass without prepare-downscale, one zone at a time with it', () => {
    const group = (prepare: boolean) => {
      const labels = { [MIN_TIME]: '1h', ...(prepare ? { [PREPARE]: 'true' } : {}) };
      return [
        sts('zone-a', { replicas: 2, labels, annotations: { [LAST]: ago(2 * HOUR) } }),
        sts('zone-b', { replicas: 4, labels, annotations: { [LEADER]: 'zone-a' } }),
        sts('zone-c', { replicas: 4, labels, annotations: { [LEADER]: 'zone-b' } }),
      ];
    };
    assert.deepEqual(
      planGroupReplicas({ group: group(false), now: NOW }).changes.map((c) => c.to),
      [2, 2],
    );
    const plan = planGroupReplicas({ group: group(true), now: NOW });
    assert.deepEqual(
      plan.changes.map((c) => [c.statefulSet, c.to]),
      [['zone-b', 2]],
    );
  });

  it('reports a missing leader per StatefulSet and still plans the rest', () => {
    const a = sts('zone-a', { replicas: 4 });
    const b = sts('zone-b', { replicas: 2, annotations: { [LEADER]: 'zone-a' } });
    const c = sts('zone-c', { replicas: 2, annotations: { [LEADER]: 'gone' } });
    const plan = planGroupReplicas({ group: [a, b, c], now: NOW });
    assert.deepEqual(
      plan.changes.map((x) => x.statefulSet),
      ['zone-b'],
    );
    assert.deepEqual(
      plan.errors.map((x) => x.statefulSet),
      ['zone-c'],
    );
  });

  it('property: no downscale while another zone is inside its min-time; no change without leader or force', () => {
    const names = ['zone-a', 'zone-b', 'zone-c', 'zone-d'];
    const member = fc.record({
      replicas: fc.integer({ min: 0, max: 6 }),
      ready: fc.integer({ min: 0, max: 6 }),
      leader: fc.option(fc.constantFrom(...names, 'missing'), { nil: undefined }),
      force: fc.option(fc.constantFrom('0', '2', '5', '-1', 'x'), { nil: undefined }),
      lastAgoMin: fc.option(fc.integer({ min: 0, max: 180 }), { nil: undefined }),
      minTimeMin: fc.option(fc.integer({ min: 0, max: 120 }), { nil: undefined }),
      prepare: fc.boolean(),
      onlyWhenReady: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(member, { minLength: 1, maxLength: 4 }), (members) => {
        const group = members.map((m, i) =>
          sts(names[i]!, {
            replicas: m.replicas,
            ready: m.ready,
            labels: {
              ...(m.minTimeMin !== undefined ? { [MIN_TIME]: `${m.minTimeMin}m` } : {}),
              ...(m.prepare ? { [PREPARE]: 'true' } : {}),
            },
            annotations: {
              ...(m.leader !== undefined ? { [LEADER]: m.leader } : {}),
              ...(m.force !== undefined ? { [FORCE]: m.force } : {}),
              ...(m.lastAgoMin !== undefined ? { [LAST]: ago(m.lastAgoMin * MIN) } : {}),
              ...(m.onlyWhenReady ? { [ONLY_WHEN_READY]: 'true' } : {}),
            },
          }),
        );
        const plan = planGroupReplicas({ group, now: NOW });
        const index = new Map(group.map((s, i) => [s.metadata!.name!, i]));
        const replicas = new Map(group.map((s) => [s.metadata!.name!, s.spec!.replicas!]));
        // last-downscale per zone as the pass goes: initial, then stamped by earlier prepare-labelled downscales.
        const lastAgo = new Map(
          members.map((m, i) => [names[i]!, m.lastAgoMin === undefined ? undefined : m.lastAgoMin * MIN]),
        );
        for (const change of plan.changes) {
          const m = members[index.get(change.statefulSet)!]!;
          assert.ok(m.leader !== undefined && index.has(m.leader), 'changed only with a leader in the group');
          if (change.cause === 'force') {
            assert.equal(change.to, Number(m.force));
          } else {
            assert.equal(change.cause, 'leader');
            assert.equal(change.to, replicas.get(m.leader), 'follows the leader as simulated so far');
          }
          if (change.to < change.from && change.cause === 'leader') {
            for (const [other, i] of index) {
              if (other === change.statefulSet) continue;
              const minTime = members[i]!.minTimeMin;
              const last = lastAgo.get(other);
              if (minTime === undefined || last === undefined) continue;
              assert.ok(last >= minTime * MIN, `${change.statefulSet} downscaled while ${other} inside its min-time`);
            }
            if (m.prepare) lastAgo.set(change.statefulSet, 0);
          } else if (change.to < change.from && m.prepare) {
            lastAgo.set(change.statefulSet, 0);
          }
          replicas.set(change.statefulSet, change.to);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('mirror', { timeout: 10000 }, () => {
  it('mirrorReference needs name and kind; api-version gives the group', () => {
    assert.equal(mirrorReference(sts('a')), undefined);
    assert.deepEqual(
      mirrorReference(
        sts('a', {
          annotations: {
            [MIRROR_NAME]: 'r',
            [MIRROR_KIND]: 'ReplicaTemplate',
            [MIRROR_API]: 'rollout-operator.grafana.com/v1',
          },
        }),
      ),
      {
        name: 'r',
        kind: 'ReplicaTemplate',
        apiVersion: 'rollout-operator.grafana.com/v1',
        group: 'rollout-operator.grafana.com',
        version: 'v1',
      },
    );
    assert.deepEqual(mirrorReference(sts('a', { annotations: { [MIRROR_NAME]: 'r', [MIRROR_KIND]: 'Thing' } })), {
      name: 'r',
      kind: 'Thing',
      apiVersion: '',
      group: '',
      version: '',
    });
    assert.ok('error' in (mirrorReference(sts('a', { annotations: { [MIRROR_NAME]: 'r' } })) ?? {}));
    assert.ok('error' in (mirrorReference(sts('a', { annotations: { [MIRROR_KIND]: 'K' } })) ?? {}));
    assert.ok(
      'error' in
        (mirrorReference(
          sts('a', { annotations: { [MIRROR_NAME]: 'r', [MIRROR_KIND]: 'K', [MIRROR_API]: 'a/b/c' } }),
        ) ?? {}),
    );
  });

  it('writeBack follows strconv.ParseBool, unparsable = false', () => {
    assert.equal(writeBack(undefined), true);
    for (const t of ['true', 'True', 'TRUE', 't', '1']) assert.equal(writeBack(t), true, t);
    for (const f of ['false', '0', 'F', 'no', 'yes', '']) assert.equal(writeBack(f), false, f);
  });

  it('mirrorTarget: reference replicas, overridden by force-replicas', () => {
    assert.deepEqual(mirrorTarget({ sts: sts('a', { replicas: 3 }), referenceReplicas: 5 }).target, 5);
    assert.equal(mirrorTarget({ sts: sts('a', { replicas: 3 }), referenceReplicas: 5 }).action, 'scale-up');
    const forced = mirrorTarget({
      sts: sts('a', { replicas: 3, annotations: { [FORCE]: '1' } }),
      referenceReplicas: 5,
    });
    assert.equal(forced.target, 1);
    assert.equal(forced.action, 'scale-down');
    assert.equal(
      mirrorTarget({ sts: sts('a', { replicas: 3 }), referenceReplicas: 5, forceReplicas: 3 }).action,
      'in-sync',
    );
    const bad = mirrorTarget({ sts: sts('a', { replicas: 3, annotations: { [FORCE]: 'x' } }), referenceReplicas: 3 });
    assert.equal(bad.action, 'in-sync');
    assert.ok(bad.warning !== undefined);
  });
});

describe('delayed downscale', { timeout: 10000 }, () => {
  const URL_TEMPLATE = 'http://pod:8080/prepare-delayed-downscale?x=1';
  const secondsAgo = (ms: number) => Math.floor((NOW - ms) / 1000);

  it('delayedDownscaleConfig', () => {
    assert.equal(delayedDownscaleConfig(sts('a')), undefined);
    assert.equal(delayedDownscaleConfig(sts('a', { annotations: { [DELAY]: '1h' } })), undefined);
    assert.equal(
      delayedDownscaleConfig(sts('a', { annotations: { [DELAY]: '0', [DELAY_URL]: URL_TEMPLATE } })),
      undefined,
    );
    assert.deepEqual(
      delayedDownscaleConfig(sts('a', { annotations: { [DELAY]: '1d12h', [DELAY_URL]: URL_TEMPLATE } })),
      { delayMs: 36 * HOUR, url: URL_TEMPLATE },
    );
    const neg = delayedDownscaleConfig(sts('a', { annotations: { [DELAY]: '-1h', [DELAY_URL]: URL_TEMPLATE } }));
    assert.ok(neg !== undefined && 'error' in neg && neg.error.includes('negative'));
    assert.ok(
      'error' in
        (delayedDownscaleConfig(sts('a', { annotations: { [DELAY]: '1.5h', [DELAY_URL]: URL_TEMPLATE } })) ?? {}),
    );
    assert.ok(
      'error' in (delayedDownscaleConfig(sts('a', { annotations: { [DELAY]: '1h', [DELAY_URL]: 'not a url' } })) ?? {}),
    );
  });

  it('podUrl replaces only the host', () => {
    const addr = { pod: 'ingester-zone-b-4', serviceName: 'ingester-zone-b', namespace: 'test' };
    assert.equal(
      podUrl('http://localhost/prepare-delayed-downscale', addr),
      'http://ingester-zone-b-4.ingester-zone-b.test.svc.cluster.local./prepare-delayed-downscale',
    );
    assert.equal(
      podUrl(URL_TEMPLATE, { ...addr, clusterDomain: 'example.org' }),
      'http://ingester-zone-b-4.ingester-zone-b.test.svc.example.org:8080/prepare-delayed-downscale?x=1',
    );
    assert.equal(
      podUrl('https://u:p@h:80/a#f', addr),
      'https://u:p@ingester-zone-b-4.ingester-zone-b.test.svc.cluster.local.:80/a#f',
    );
    assert.equal(
      podUrl('http://[::1]:9000/x', addr),
      'http://ingester-zone-b-4.ingester-zone-b.test.svc.cluster.local.:9000/x',
    );
    assert.ok(typeof podUrl('/relative', addr) !== 'string');
  });

  it('calls: cancel the pods that stay, prepare the pods that go', () => {
    assert.deepEqual(delayedDownscaleCalls({ current: 5, desired: 3 }), { cancel: [0, 1, 2], prepare: [3, 4] });
    assert.deepEqual(delayedDownscaleCalls({ current: 3, desired: 5 }), { cancel: [0, 1, 2], prepare: [] });
    assert.deepEqual(delayedDownscaleCalls({ current: 3, desired: 3 }), { cancel: [0, 1, 2], prepare: [] });
    assert.equal(cancelSucceeded(200), true);
    assert.equal(cancelSucceeded(409), true, 'scale up succeeds even if DELETE returns 409 Conflict');
    assert.equal(cancelSucceeded(500), false);
  });

  it('POST responses', () => {
    assert.equal(parsePrepareResponse({ status: 200, body: '{"timestamp": 1700000000}' }), 1700000000);
    assert.ok(typeof parsePrepareResponse({ status: 500, body: '{"timestamp": 1700000000}' }) !== 'number');
    assert.ok(typeof parsePrepareResponse({ status: 200, body: 'not json' }) !== 'number');
    assert.ok(typeof parsePrepareResponse({ status: 200, body: '{"timestamp": 0}' }) !== 'number');
    assert.ok(typeof parsePrepareResponse({ status: 200, body: '{}' }) !== 'number');
    assert.ok(typeof parsePrepareResponse({ status: 200, body: '{"timestamp": "1"}' }) !== 'number');
  });

  const decide = (current: number, want: number, ts: [number, number | { error: string }][]) =>
    delayedDownscaleDecision({ current, desired: want, timestamps: new Map(ts), delayMs: HOUR, now: NOW });

  it('scale down is allowed, if all pods were prepared outside of delay', () => {
    assert.deepEqual(
      decide(5, 3, [
        [3, secondsAgo(2 * HOUR)],
        [4, secondsAgo(70 * MIN)],
      ]),
      { allowed: 3 },
    );
    assert.deepEqual(
      decide(5, 3, [
        [3, secondsAgo(HOUR)],
        [4, secondsAgo(HOUR)],
      ]),
      { allowed: 3 },
      'exactly the delay',
    );
  });

  it('scale down is not allowed if delay time was not reached yet on all pods', () => {
    assert.deepEqual(
      decide(5, 3, [
        [3, secondsAgo(30 * MIN)],
        [4, secondsAgo(30 * MIN)],
      ]),
      {
        error:
          'configured downscale delay 1h0m0s has not been reached for any pods at the end of statefulset replicas range',
      },
    );
  });

  it('scale down is not allowed if delay time was not reached on one pod at the end', () => {
    const r = decide(5, 3, [
      [3, secondsAgo(2 * HOUR)],
      [4, secondsAgo(30 * MIN)],
    ]);
    assert.ok('error' in r && r.error.startsWith('configured downscale delay'));
  });

  it('limited scale down by 2 replicas is allowed if delay time was reached on some pods at the end', () => {
    assert.deepEqual(
      decide(5, 1, [
        [1, secondsAgo(30 * MIN)],
        [2, secondsAgo(30 * MIN)],
        [3, secondsAgo(2 * HOUR)],
        [4, secondsAgo(2 * HOUR)],
      ]),
      { allowed: 3 },
    );
  });

  it('scale down is not allowed if a POST fails (non-2xx, error, unparsable)', () => {
    for (const failure of [
      parsePrepareResponse({ status: 500, body: '' }),
      { error: 'connection refused' },
      parsePrepareResponse({ status: 200, body: 'garbage' }),
    ]) {
      const r = decide(5, 3, [
        [3, secondsAgo(2 * HOUR)],
        [4, failure],
      ]);
      assert.ok('error' in r && r.error.startsWith('failed prepare pods for delayed downscale'), JSON.stringify(r));
    }
    const missing = decide(5, 3, [[4, secondsAgo(2 * HOUR)]]);
    assert.ok('error' in missing);
    const zero = decide(5, 3, [
      [3, 0],
      [4, secondsAgo(2 * HOUR)],
    ]);
    assert.ok('error' in zero);
  });

  it('scale up is allowed immediately; no delay configured → desired', () => {
    assert.deepEqual(decide(3, 5, []), { allowed: 5 });
    assert.deepEqual(
      delayedDownscaleDecision({ current: 5, desired: 3, timestamps: new Map(), delayMs: 0, now: NOW }),
      { allowed: 3 },
    );
  });

  it('force-replicas overrides mirror-replicas and respects delayed downscale', () => {
    const s = sts('a', { replicas: 3, annotations: { [FORCE]: '1', [DELAY]: '1h', [DELAY_URL]: URL_TEMPLATE } });
    const t = mirrorTarget({ sts: s, referenceReplicas: 3 });
    assert.equal(t.target, 1);
    const config = delayedDownscaleConfig(s);
    assert.ok(config !== undefined && !('error' in config));
    const waiting = delayedDownscaleDecision({
      current: t.current,
      desired: t.target,
      timestamps: new Map([
        [1, secondsAgo(MIN)],
        [2, secondsAgo(MIN)],
      ]),
      delayMs: config.delayMs,
      now: NOW,
    });
    assert.ok('error' in waiting, 'force-replicas waits for delayed downscale when delay not elapsed');
    const done = delayedDownscaleDecision({
      current: t.current,
      desired: t.target,
      timestamps: new Map([
        [1, secondsAgo(2 * HOUR)],
        [2, secondsAgo(2 * HOUR)],
      ]),
      delayMs: config.delayMs,
      now: NOW,
    });
    assert.deepEqual(done, { allowed: 1 });
  });

  it('property: only a tail of pods past the delay goes, and the pod above it stays for a reason', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 0, max: 11 }),
        fc.array(fc.integer({ min: 1, max: 4 * 3600 }), { minLength: 12, maxLength: 12 }),
        fc.integer({ min: 1, max: 3 * 3600 }),
        (current, desiredRaw, agesSeconds, delaySeconds) => {
          const desired = desiredRaw % current;
          const timestamps = new Map(
            agesSeconds
              .slice(desired, current)
              .map((age, i) => [desired + i, Math.floor(NOW / 1000) - age] as [number, number]),
          );
          const r = delayedDownscaleDecision({ current, desired, timestamps, delayMs: delaySeconds * 1000, now: NOW });
          const past = (ordinal: number) => NOW - timestamps.get(ordinal)! * 1000 >= delaySeconds * 1000;
          if ('error' in r) {
            // Nothing may go exactly when the last pod is not past the delay.
            assert.equal(past(current - 1), false);
            return;
          }
          assert.ok(r.allowed >= desired && r.allowed < current, `allowed ${r.allowed}`);
          for (let o = r.allowed; o < current; o++) assert.ok(past(o), `pod ${o} removed before its delay`);
          if (r.allowed > desired)
            assert.equal(past(r.allowed - 1), false, 'stopped short of a pod that was past the delay');
        },
      ),
    );
  });
});

describe('validateScalingMetadata (#306)', { timeout: 10000 }, () => {
  it('flags labels set as annotations and the reverse', () => {
    const w = validateScalingMetadata(
      sts('zone-a', { annotations: { [PREPARE]: 'true', [MIN_TIME]: '12h' }, labels: { [LEADER]: 'zone-b' } }),
    );
    assert.ok(
      w.some((x) => x.includes(PREPARE) && x.includes('set as an annotation')),
      w.join('\n'),
    );
    // rollout-operator v0.39 (#463) reads min-time from the annotation first: no longer misplaced.
    assert.ok(!w.some((x) => x.includes(MIN_TIME)), w.join('\n'));
    assert.ok(w.some((x) => x.includes(LEADER) && x.includes('set as a label')));
  });

  it('min-time (#463): the annotation wins over the label, and says so; the label alone is no warning', () => {
    const both = validateScalingMetadata(
      sts('zone-a', { annotations: { [MIN_TIME]: '1h' }, labels: { [MIN_TIME]: '12h' } }),
    );
    assert.deepEqual(both, [
      `zone-a: ${MIN_TIME} is set both as an annotation ("1h") and as a label ("12h"); the annotation is read and the label is ignored`,
    ]);
    // The ignored label's value is not judged; the annotation's is.
    const badAnnotation = validateScalingMetadata(
      sts('zone-a', { annotations: { [MIN_TIME]: '1d' }, labels: { [MIN_TIME]: 'x' } }),
    );
    assert.equal(badAnnotation.length, 2, badAnnotation.join('\n'));
    assert.match(
      badAnnotation[0]!,
      /^zone-a: annotation grafana\.com\/min-time-between-zones-downscale="1d" is not a Go duration/,
    );
    assert.match(badAnnotation[1]!, /set both as an annotation \("1d"\) and as a label \("x"\)/);
    assert.deepEqual(validateScalingMetadata(sts('zone-a', { labels: { [MIN_TIME]: '12h' } })), []);
    assert.deepEqual(validateScalingMetadata(sts('zone-a', { annotations: { [MIN_TIME]: '12h' } })), []);
    assert.deepEqual(
      validateScalingMetadata(sts('zone-a', { annotations: { [MIN_TIME]: '' }, labels: { [MIN_TIME]: '2h' } })),
      [`zone-a: annotation ${MIN_TIME} is empty, so it is not read; the label ("2h") is read instead`],
    );
  });

  it('flags unparsable values', () => {
    const w = validateScalingMetadata(
      sts('zone-a', {
        labels: { [MIN_TIME]: '12 hours', [PREPARE]: 'True' },
        annotations: {
          [LAST]: 'yesterday',
          [FORCE]: '-2',
          [DELAY]: '1.5h',
          [DELAY_URL]: 'http://x/y',
          [MIRROR_NAME]: 'r',
        },
      }),
    );
    for (const needle of [MIN_TIME, PREPARE, LAST, FORCE, DELAY, MIRROR_KIND])
      assert.ok(
        w.some((x) => x.includes(needle)),
        `${needle}: ${w.join('\n')}`,
      );
  });

  it('is quiet for a well-formed StatefulSet', () => {
    assert.deepEqual(
      validateScalingMetadata(
        sts('zone-b', {
          labels: { [MIN_TIME]: '12h', [PREPARE]: 'true' },
          annotations: {
            [LEADER]: 'zone-a',
            [LAST]: ago(HOUR),
            [FORCE]: '2',
            [DELAY]: '1h',
            [DELAY_URL]: 'http://x:80/y',
          },
        }),
      ),
      [],
    );
  });
});
