import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildStatus, ZPDB_WAIT_CODE } from '../../src/status/build.ts';
import type { StatusInput, StatusReport } from '../../src/status/model.ts';
import type { KubeObject } from '../../src/runtime/kube/types.ts';
import { ledgerName } from '../../src/drain/zpdb/ledger.ts';
import { fullInput, MIN, NOW, NS, OTHER, pod, statefulSet } from './fixture.ts';
import { CONFIG_RESTART_CONFIGMAP_SELECTOR_ANNOTATION, LEDGER_ANNOTATION } from '../../src/vocabulary/keys.ts';

const group = (report: StatusReport, ns: string, name: string) => {
  const found = report.namespaces.find((n) => n.namespace === ns)?.groups.find((g) => g.name === name);
  assert.ok(found, `group ${ns}/${name} is reported`);
  return found;
};
const row = (report: StatusReport, ns: string, groupName: string, set: string) => {
  const found = group(report, ns, groupName).statefulSets.find((s) => s.name === set);
  assert.ok(found, `StatefulSet ${set} is reported`);
  return found;
};

/** Every key path of a JSON value, array elements merged under `[]`. */
function keyPaths(value: unknown, prefix = '', out = new Set<string>()): Set<string> {
  if (Array.isArray(value)) {
    for (const item of value) keyPaths(item, `${prefix}[]`, out);
  } else if (value !== null && typeof value === 'object') {
    for (const [key, v] of Object.entries(value)) {
      const path = prefix ? `${prefix}.${key}` : key;
      out.add(path);
      keyPaths(v, path, out);
    }
  }
  return out;
}

/** A group of three zones × 3 pods, all Ready on r1, the template changed to r2. */
function freshRollout(extra: Partial<StatusInput> = {}): StatusInput {
  const zones = ['a', 'b', 'c'].map((z) => `ingester-zone-${z}`);
  return {
    now: NOW,
    namespaces: [NS],
    statefulSets: zones.map((name) => statefulSet(NS, name, { group: 'ingester' })),
    pods: zones.flatMap((name) => [0, 1, 2].map((i) => pod(NS, name, i, 'r1'))),
    zpdbs: [],
    leases: [],
    deployments: [],
    daemonSets: [],
    configMaps: [],
    secrets: [],
    ...extra,
  };
}

/** Pods carry the label the budget selects. */
function selectedByBudget(input: StatusInput): StatusInput {
  for (const p of input.pods) p.metadata!.labels!['rollout-group'] = 'ingester';
  return input;
}

describe('status report', () => {
  const report = buildStatus(fullInput());

  it("reports a three-zone group mid-rollout with the planner's decision: roll order, the set rolling, why it waits", () => {
    const g = group(report, NS, 'ingester');
    // The one disrupted zone goes first, then by name.
    assert.deepEqual(
      g.statefulSets.map((s) => s.name),
      ['ingester-zone-b', 'ingester-zone-a', 'ingester-zone-c'],
    );
    assert.equal(g.rolling, 'ingester-zone-b');
    assert.equal(g.phase, 'waiting');
    assert.deepEqual(g.waitReason, {
      code: 'max-unavailable-reached',
      statefulSet: 'ingester-zone-b',
      message: 'waiting: 1 pod not Ready in ingester-zone-b (max unavailable 1)',
    });
    assert.match(g.action, /^rolling ingester-zone-b: waiting for pods to become Ready$/);
    assert.deepEqual(
      g.statefulSets.map((s) => s.state),
      ['waiting', 'up-to-date', 'pending'],
    );
    assert.deepEqual(g.warnings, []);
  });

  it('gives each StatefulSet its counts, zone and pod grid (updated = on status.updateRevision)', () => {
    const b = row(report, NS, 'ingester', 'ingester-zone-b');
    assert.deepEqual([b.replicas, b.pods, b.updated, b.ready, b.maxUnavailable, b.zone], [3, 3, 1, 2, 1, 'zone-b']);
    assert.deepEqual(
      b.podGrid.map((p) => [p.ordinal, p.updated, p.ready, p.terminating]),
      [
        [0, false, true, false],
        [1, false, true, false],
        [2, true, false, false],
      ],
    );
    assert.equal(b.podGrid.filter((p) => p.updated).length, b.updated);
    assert.equal(b.podGrid.filter((p) => p.ready).length, b.ready);
    const c = row(report, NS, 'ingester', 'ingester-zone-c');
    assert.deepEqual(
      [c.replicas, c.updated, c.ready, c.zone, c.currentRevision, c.updateRevision],
      [4, 0, 4, 'zone-c', 'r1', 'r2'],
    );
    assert.equal(row(report, NS, 'ingester', 'ingester-zone-a').zone, 'zone-a');
  });

  it('shows the leader, the replicas a follower is held from and for how long the min-time rule holds', () => {
    const c = row(report, NS, 'ingester', 'ingester-zone-c').scaling;
    assert.ok(c);
    assert.equal(c.leader, 'ingester-zone-a');
    assert.equal(c.desiredReplicas, 3);
    assert.match(
      c.holdReason ?? '',
      /not following leader ingester-zone-a down to 3 yet: statefulset ingester-zone-a was downscaled at 2026-01-10 11:50:00/,
    );
    // Downscaled 10 minutes ago, labelled 30m.
    assert.equal(c.minTimeRemainingMs, 20 * MIN);
    assert.deepEqual(c.errors, []);
    const a = row(report, NS, 'ingester', 'ingester-zone-a').scaling;
    assert.deepEqual(
      [a?.lastDownscale, a?.minTimeBetweenZonesDownscale, a?.minTimeRemainingMs],
      ['2026-01-10T11:50:00Z', '30m', undefined],
    );
    const b = row(report, NS, 'ingester', 'ingester-zone-b').scaling;
    assert.equal(b?.desiredReplicas, undefined, 'same replicas as its leader: nothing to hold');
  });

  it('shows mirrors, delayed downscale and scaling problems', () => {
    const s = row(report, OTHER, 'store', 'store-zone-a').scaling;
    assert.equal(s?.mirrorOf, 'ReplicaTemplate/store');
    assert.deepEqual(s?.delayedDownscale, { delay: '2h', prepareUrl: 'http://pod/prepare' });
    assert.equal(s?.errors.length, 1);
    assert.match(s?.errors[0] ?? '', /rollout-force-replicas="lots"/);
    assert.equal(row(report, OTHER, 'store', 'store-zone-b').scaling, undefined, 'nothing to say: no scaling view');
  });

  it('reports a blocked group and a stuck pod', () => {
    const g = group(report, OTHER, 'store');
    assert.equal(g.phase, 'blocked');
    assert.match(g.blocked ?? '', /store-zone-b has RollingUpdate update strategy/);
    assert.ok(g.statefulSets.every((s) => s.state === 'blocked'));
    assert.equal(
      row(report, OTHER, 'store', 'store-zone-b').podGrid.find((p) => p.ordinal === 2)?.stuckReason,
      'CrashLoopBackOff',
    );
    // The doctor's fix for it, as `stateward doctor` prints it, for the page and the CLI to show.
    assert.deepEqual(
      g.fixes?.map((f) => [f.code, f.object]),
      [['group-not-ondelete', `StatefulSet ${OTHER}/store-zone-b`]],
    );
    assert.match(g.fixes?.[0]?.fix ?? '', /kubectl -n \S+ patch statefulset\/store-zone-b --type=merge/);
    assert.equal(group(report, NS, 'ingester').fixes, undefined, 'a group that is not blocked has none');
  });

  it("reads the operator's published rollout timeline, field by field", () => {
    const timeline = group(report, NS, 'ingester').timeline;
    assert.equal(timeline?.startedAt, '2026-01-10T11:50:00.000Z');
    assert.deepEqual(
      timeline?.zones.map((z) => [z.statefulSet, z.finishedAt, z.waits.map((w) => [w.code, w.times, w.waitedMs])]),
      [
        ['ingester-zone-a', '2026-01-10T11:55:00.000Z', [['updated-pods-not-ready', 3, 90_000]]],
        ['ingester-zone-b', undefined, []],
      ],
    );
    const published = (timeline: unknown) =>
      freshRollout({
        operatorStatus: [
          {
            metadata: { name: 'stateward-rollout-status', namespace: NS },
            data: { ingester: JSON.stringify({ phase: 'rolling', since: '2026-01-10T11:58:00.000Z', timeline }) },
          } as KubeObject,
        ],
      });
    const at = '2026-01-10T11:50:00.000Z';
    const wait = { code: 'pods-terminating', message: 'm', since: at, from: at, times: 1, waitedMs: 0 };
    const zone = { statefulSet: 'ingester-zone-a', startedAt: at, waits: [wait] };
    const read = (timeline: unknown) => group(buildStatus(published(timeline)), NS, 'ingester').timeline;
    assert.deepEqual(read({ startedAt: at, zones: [zone] }), { startedAt: at, zones: [zone] });
    // Whatever does not have the recorder's shape is dropped, not shown.
    for (const bad of [
      'not an object',
      { startedAt: 'yesterday', zones: [zone] },
      { startedAt: at, zones: 'all' },
      { startedAt: at, finishedAt: 3, zones: [zone] },
      { startedAt: at, zones: [{ ...zone, statefulSet: 7 }] },
      { startedAt: at, zones: [{ ...zone, startedAt: '<script>' }] },
      { startedAt: at, zones: [{ ...zone, statefulSet: 'x'.repeat(254) }] },
    ])
      assert.equal(read(bad), undefined, JSON.stringify(bad));
    for (const badWait of [
      { ...wait, times: -1 },
      { ...wait, waitedMs: 1.5 },
      { ...wait, until: 'later' },
      { ...wait, message: 'x'.repeat(513) },
      { ...wait, code: { evil: true } },
    ])
      assert.deepEqual(read({ startedAt: at, zones: [{ ...zone, waits: [badWait, wait] }] })?.zones[0]?.waits, [wait]);
    const many = Array.from({ length: 40 }, (_, i) => ({ ...zone, statefulSet: `sts-${i}` }));
    assert.equal(read({ startedAt: at, zones: many })?.zones.length, 32, 'no more zones than the recorder keeps');
    // The operator's own timelines (the web view) come before the published ones.
    const own = { startedAt: at, zones: [{ ...zone, statefulSet: 'ingester-zone-c' }] };
    const input = { ...published({ startedAt: at, zones: [zone] }), timelines: new Map([[`${NS}/ingester`, own]]) };
    assert.equal(group(buildStatus(input), NS, 'ingester').timeline, own);
  });

  it('reports budgets with the StatefulSets they select and the pending evictions of their ledger', () => {
    const [budget] = report.namespaces[0]!.budgets;
    assert.deepEqual(budget, {
      name: 'ingester',
      maxUnavailable: '1',
      mode: 'zone',
      matchedStatefulSets: ['ingester-zone-a', 'ingester-zone-b', 'ingester-zone-c'],
      // The entry of a pod that is gone holds nothing back any more.
      pendingEvictions: [{ pod: 'ingester-zone-c-3', allowedAt: new Date(NOW - 30_000).toISOString() }],
    });
    const other = report.namespaces[1]!.budgets;
    assert.deepEqual(
      other.map((b) => b.name),
      ['broken', 'store'],
      'sorted by name',
    );
    assert.match(other[0]!.error ?? '', /only one of maxUnavailable or maxUnavailablePercentage/);
    assert.equal(other[1]!.maxUnavailable, '50%');
    assert.match(other[1]!.warnings?.[0] ?? '', /not JSON/);
  });

  it('reports opted-in workloads with their configs, the missing ones, the last restart and outdated pods', () => {
    const restarts = report.namespaces[0]!.restarts;
    assert.deepEqual(
      restarts.map((r) => `${r.kind}/${r.name}`),
      ['Deployment/querier', 'StatefulSet/store-gateway'],
      'opted-in only, sorted by name',
    );
    const [querier, gateway] = restarts;
    assert.deepEqual(querier, {
      kind: 'Deployment',
      name: 'querier',
      optIns: ['xing'],
      configs: ['ConfigMap/querier-config', 'Secret/querier-secret'],
      missingConfigs: ['Secret/querier-secret'],
      lastRestart: '2026-01-09T08:00:00.000Z',
      mode: 'rolling',
    });
    assert.equal(gateway?.mode, 'standalone-ondelete');
    assert.equal(gateway?.outdatedPods, 1);
    assert.deepEqual(gateway?.optIns, ['reloader-auto']);
    assert.equal(gateway?.warnings?.length, 1);
  });

  it('reports a workload opted in by a config selector alone, with the configs its selector matches', () => {
    const input = fullInput();
    const labelled = (name: string, labels: Record<string, string>): KubeObject => ({
      metadata: { name, namespace: NS, labels },
    });
    input.configMaps = [
      ...input.configMaps,
      labelled('rules-a', { 'app.kubernetes.io/part-of': 'ruler' }),
      labelled('rules-b', { 'app.kubernetes.io/part-of': 'ruler' }),
      labelled('unrelated', { 'app.kubernetes.io/part-of': 'other' }),
    ];
    input.deployments = [
      ...input.deployments,
      {
        metadata: {
          name: 'ruler',
          namespace: NS,
          annotations: { [CONFIG_RESTART_CONFIGMAP_SELECTOR_ANNOTATION]: 'app.kubernetes.io/part-of=ruler' },
        },
        spec: { template: { spec: { containers: [{ name: 'ruler', image: 'ruler:1' }] } } },
      } as KubeObject,
    ];
    const ruler = buildStatus(input).namespaces[0]!.restarts.find((r) => r.name === 'ruler');
    assert.deepEqual(ruler?.optIns, ['stateward-selector']);
    assert.deepEqual(ruler?.configs, ['ConfigMap/rules-a', 'ConfigMap/rules-b']);
    assert.deepEqual(ruler?.missingConfigs, []);
  });

  it('does not call a config missing when its kind could not be listed', () => {
    const partial = buildStatus({ ...fullInput(), unreadable: ['secrets'] });
    const querier = partial.namespaces[0]!.restarts.find((r) => r.name === 'querier');
    assert.deepEqual(querier?.missingConfigs, []);
    assert.deepEqual(partial.unreadable, ['secrets']);
  });

  it('keeps namespaces in input order and ignores objects of other namespaces', () => {
    assert.deepEqual(
      report.namespaces.map((n) => n.namespace),
      [NS, OTHER],
    );
    const reversed = buildStatus({ ...fullInput(), namespaces: [OTHER, 'empty'] });
    assert.deepEqual(
      reversed.namespaces.map((n) => n.namespace),
      [OTHER, 'empty'],
    );
    assert.deepEqual(reversed.namespaces[1], { namespace: 'empty', groups: [], budgets: [], restarts: [] });
    assert.deepEqual(
      reversed.namespaces[0]!.groups.map((g) => g.name),
      ['store'],
    );
  });

  it('shows what the operator last published beside the computed phase', () => {
    assert.deepEqual(group(report, NS, 'ingester').operator, {
      phase: 'waiting',
      since: '2026-01-10T11:58:00.000Z',
      waitCode: 'pods-terminating',
    });
    assert.equal(group(report, OTHER, 'store').operator, undefined);
  });

  it('says which pod the rollout deletes next, and that a budget with a pending eviction elsewhere holds it', () => {
    const rolling = buildStatus(freshRollout());
    const g = rolling.namespaces[0]!.groups[0]!;
    assert.equal(g.phase, 'rolling');
    assert.equal(g.action, 'rolling ingester-zone-a: deleting ingester-zone-a-0');
    assert.equal(g.waitReason, undefined);

    const budget = {
      apiVersion: 'rollout-operator.grafana.com/v1',
      kind: 'ZoneAwarePodDisruptionBudget',
      metadata: { name: 'ingester', namespace: NS, uid: 'z' },
      spec: { maxUnavailable: 1, selector: { matchLabels: { 'rollout-group': 'ingester' } } },
    };
    const ledger = {
      metadata: {
        name: ledgerName('ingester'),
        namespace: NS,
        annotations: {
          [LEDGER_ANNOTATION]: JSON.stringify({
            'ingester-zone-b-1-uid': { pod: 'ingester-zone-b-1', at: NOW - 5_000 },
          }),
        },
      },
    };
    const held = buildStatus(selectedByBudget(freshRollout({ zpdbs: [budget], leases: [ledger] }))).namespaces[0]!
      .groups[0]!;
    assert.equal(held.phase, 'waiting');
    assert.equal(held.waitReason?.code, ZPDB_WAIT_CODE);
    assert.equal(held.waitReason?.statefulSet, 'ingester-zone-a');
    assert.equal(
      held.waitReason?.message,
      'waiting: deleting pod ingester-zone-a-0 would break its ZoneAwarePodDisruptionBudget: 1 pod not ready in ingester-zone-b',
    );
    assert.equal(held.statefulSets.find((s) => s.name === 'ingester-zone-a')?.state, 'waiting');

    // Without the pending eviction the budget allows it.
    const allowed = buildStatus(selectedByBudget(freshRollout({ zpdbs: [budget], leases: [] })));
    assert.equal(allowed.namespaces[0]!.groups[0]!.phase, 'rolling');
    assert.equal(allowed.namespaces[0]!.groups[0]!.action, 'rolling ingester-zone-a: deleting ingester-zone-a-0');
  });

  it('says when the replicas are adjusted before the group rolls, as the controller does', () => {
    const input = freshRollout();
    const [a, , c] = input.statefulSets;
    a!.spec!.replicas = 4;
    a!.status!.replicas = 4;
    a!.status!.readyReplicas = 4;
    input.pods.push(pod(NS, 'ingester-zone-a', 3, 'r1'));
    c!.metadata!.annotations!['grafana.com/rollout-downscale-leader'] = 'ingester-zone-a';
    const g = buildStatus(input).namespaces[0]!.groups[0]!;
    assert.equal(
      g.action,
      'resizing first (ingester-zone-c 3 → 4), then rolling ingester-zone-a: deleting ingester-zone-a-0',
    );
    assert.deepEqual(g.statefulSets.find((s) => s.name === 'ingester-zone-c')?.scaling, {
      leader: 'ingester-zone-a',
      desiredReplicas: 4,
      errors: [],
    });
  });

  it('calls a fully rolled-out group complete and idle', () => {
    const input = freshRollout();
    for (const p of input.pods) p.metadata!.labels!['controller-revision-hash'] = 'r2';
    for (const s of input.statefulSets) s.status!.currentRevision = 'r2';
    const g = buildStatus(input).namespaces[0]!.groups[0]!;
    assert.equal(g.phase, 'complete');
    assert.equal(g.action, 'idle');
    assert.deepEqual(
      g.statefulSets.map((s) => s.state),
      ['up-to-date', 'up-to-date', 'up-to-date'],
    );
  });

  it('warns that nothing is known about pods when they could not be listed', () => {
    const g = buildStatus(freshRollout({ pods: [], unreadable: ['pods'] })).namespaces[0]!.groups[0]!;
    assert.ok(g.warnings.some((w) => /pods could not be read/.test(w)));
  });

  it('keeps its JSON shape: every key path of a full report is pinned (a rename fails here)', () => {
    const paths = [...keyPaths(JSON.parse(JSON.stringify(report)))].sort();
    assert.deepEqual(paths, PINNED_PATHS);
  });
});

const PINNED_PATHS = [
  'apiVersion',
  'generatedAt',
  'kind',
  'namespaces',
  'namespaces[].budgets',
  'namespaces[].budgets[].error',
  'namespaces[].budgets[].matchedStatefulSets',
  'namespaces[].budgets[].maxUnavailable',
  'namespaces[].budgets[].mode',
  'namespaces[].budgets[].name',
  'namespaces[].budgets[].pendingEvictions',
  'namespaces[].budgets[].pendingEvictions[].allowedAt',
  'namespaces[].budgets[].pendingEvictions[].pod',
  'namespaces[].budgets[].warnings',
  'namespaces[].groups',
  'namespaces[].groups[].action',
  'namespaces[].groups[].blocked',
  'namespaces[].groups[].fixes',
  'namespaces[].groups[].fixes[].code',
  'namespaces[].groups[].fixes[].fix',
  'namespaces[].groups[].fixes[].object',
  'namespaces[].groups[].name',
  'namespaces[].groups[].operator',
  'namespaces[].groups[].operator.phase',
  'namespaces[].groups[].operator.since',
  'namespaces[].groups[].operator.waitCode',
  'namespaces[].groups[].phase',
  'namespaces[].groups[].rolling',
  'namespaces[].groups[].statefulSets',
  'namespaces[].groups[].statefulSets[].currentRevision',
  'namespaces[].groups[].statefulSets[].maxUnavailable',
  'namespaces[].groups[].statefulSets[].name',
  'namespaces[].groups[].statefulSets[].paused',
  'namespaces[].groups[].statefulSets[].podGrid',
  'namespaces[].groups[].statefulSets[].podGrid[].name',
  'namespaces[].groups[].statefulSets[].podGrid[].ordinal',
  'namespaces[].groups[].statefulSets[].podGrid[].ready',
  'namespaces[].groups[].statefulSets[].podGrid[].stuckReason',
  'namespaces[].groups[].statefulSets[].podGrid[].terminating',
  'namespaces[].groups[].statefulSets[].podGrid[].updated',
  'namespaces[].groups[].statefulSets[].pods',
  'namespaces[].groups[].statefulSets[].ready',
  'namespaces[].groups[].statefulSets[].replicas',
  'namespaces[].groups[].statefulSets[].scaling',
  'namespaces[].groups[].statefulSets[].scaling.delayedDownscale',
  'namespaces[].groups[].statefulSets[].scaling.delayedDownscale.delay',
  'namespaces[].groups[].statefulSets[].scaling.delayedDownscale.prepareUrl',
  'namespaces[].groups[].statefulSets[].scaling.desiredReplicas',
  'namespaces[].groups[].statefulSets[].scaling.errors',
  'namespaces[].groups[].statefulSets[].scaling.holdReason',
  'namespaces[].groups[].statefulSets[].scaling.lastDownscale',
  'namespaces[].groups[].statefulSets[].scaling.leader',
  'namespaces[].groups[].statefulSets[].scaling.minTimeBetweenZonesDownscale',
  'namespaces[].groups[].statefulSets[].scaling.minTimeRemainingMs',
  'namespaces[].groups[].statefulSets[].scaling.mirrorOf',
  'namespaces[].groups[].statefulSets[].state',
  'namespaces[].groups[].statefulSets[].updateRevision',
  'namespaces[].groups[].statefulSets[].updated',
  'namespaces[].groups[].statefulSets[].zone',
  'namespaces[].groups[].timeline',
  'namespaces[].groups[].timeline.startedAt',
  'namespaces[].groups[].timeline.zones',
  'namespaces[].groups[].timeline.zones[].finishedAt',
  'namespaces[].groups[].timeline.zones[].startedAt',
  'namespaces[].groups[].timeline.zones[].statefulSet',
  'namespaces[].groups[].timeline.zones[].waits',
  'namespaces[].groups[].timeline.zones[].waits[].code',
  'namespaces[].groups[].timeline.zones[].waits[].from',
  'namespaces[].groups[].timeline.zones[].waits[].message',
  'namespaces[].groups[].timeline.zones[].waits[].since',
  'namespaces[].groups[].timeline.zones[].waits[].times',
  'namespaces[].groups[].timeline.zones[].waits[].until',
  'namespaces[].groups[].timeline.zones[].waits[].waitedMs',
  'namespaces[].groups[].waitReason',
  'namespaces[].groups[].waitReason.code',
  'namespaces[].groups[].waitReason.message',
  'namespaces[].groups[].waitReason.statefulSet',
  'namespaces[].groups[].warnings',
  'namespaces[].namespace',
  'namespaces[].restarts',
  'namespaces[].restarts[].configs',
  'namespaces[].restarts[].kind',
  'namespaces[].restarts[].lastRestart',
  'namespaces[].restarts[].missingConfigs',
  'namespaces[].restarts[].mode',
  'namespaces[].restarts[].name',
  'namespaces[].restarts[].optIns',
  'namespaces[].restarts[].outdatedPods',
  'namespaces[].restarts[].warnings',
  'unreadable',
];
