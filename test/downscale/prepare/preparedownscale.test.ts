import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { AdmissionDecision, AdmissionRequestV1 } from '../../../src/runtime/admission/admission.ts';
import type { Pod, StatefulSet } from '../../../src/runtime/kube/types.ts';
import type { KubeClient } from '../../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../../src/runtime/kube/errors.ts';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { nopLogger } from '../../../src/runtime/log/logger.ts';
import { prepareDownscaleHandler } from '../../../src/downscale/prepare/handler.ts';
import { failingClient } from '../../fuzz/support.ts';
import {
  afterPrepare,
  afterRecord,
  callSucceeded,
  endpoints,
  executorFailed,
  firstChecks,
  groupChecks,
  groupSelector,
  lastDownscaleAnnotationPatch,
  lastDownscalesFromZones,
  lookupFailed,
  podSelector,
  readPrepareInfo,
  stsInfo,
  toAdmissionDecision,
  type CallResult,
  type Downscale,
  type TrackerMode,
} from '../../../src/downscale/prepare/prepareplan.ts';
import { initialZoneTracker, parseZoneTracker, recordDownscale } from '../../../src/downscale/prepare/zonetracker.ts';
import { formatRfc3339, parseRfc3339 } from '../../../src/vocabulary/rfc3339.ts';
import { goTimeString, lastDownscalesFromAnnotations, type LastDownscale } from '../../../src/downscale/mintime.ts';

const NOW = Date.UTC(2024, 0, 2, 3, 4, 5);
const NOW_TEXT = '2024-01-02T03:04:05Z';
const NS = 'test';
const STS = 'my-statefulset';
const MODES: TrackerMode[] = ['annotation', 'zone-tracker'];
const HOUR = 3_600_000;

interface StsOptions {
  name?: string;
  replicas?: number | null;
  prepare?: boolean;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  serviceName?: string;
  group?: string | null;
  status?: { replicas: number; updatedReplicas: number };
  apiVersion?: string;
  kind?: string;
}

function sts(o: StsOptions = {}): StatefulSet {
  const name = o.name ?? STS;
  const labels: Record<string, string> = {
    ...(o.prepare === false ? {} : { 'grafana.com/prepare-downscale': 'true' }),
    ...o.labels,
  };
  if (o.group !== null) labels['rollout-group'] = o.group ?? 'ingester';
  const spec: Record<string, unknown> = {
    serviceName: o.serviceName ?? 'nginx',
    template: { metadata: { labels: { name } } },
  };
  if (o.replicas !== undefined) spec.replicas = o.replicas;
  return {
    apiVersion: o.apiVersion ?? 'apps/v1',
    kind: o.kind ?? 'StatefulSet',
    metadata: {
      name,
      namespace: NS,
      labels,
      annotations: {
        'grafana.com/prepare-downscale-http-path': 'prepare-shutdown',
        'grafana.com/prepare-downscale-http-port': '8080',
        ...o.annotations,
      },
    },
    spec,
    status: o.status ?? { replicas: 3, updatedReplicas: 3 },
  } as unknown as StatefulSet;
}

function pod(name: string, stsName: string, ready = true): Pod {
  return {
    metadata: { name, namespace: NS, labels: { name: stsName } },
    status: {
      phase: ready ? 'Running' : 'Pending',
      containerStatuses: [
        {
          name: 'c',
          image: 'i',
          imageID: '',
          restartCount: 0,
          ready,
          state: ready ? { running: {} } : { waiting: {} },
        },
      ],
    },
  };
}

function podsOf(stsName: string, count: number, ready = true): Pod[] {
  return Array.from({ length: count }, (_, i) => pod(`${stsName}-${i}`, stsName, ready));
}

function request(oldObject: unknown, object: unknown, extra: Partial<AdmissionRequestV1> = {}): AdmissionRequestV1 {
  return {
    uid: 'uid-1',
    resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
    name: STS,
    namespace: NS,
    operation: 'UPDATE',
    oldObject,
    object,
    dryRun: false,
    ...extra,
  };
}

function scale(replicas: number) {
  return { apiVersion: 'autoscaling/v1', kind: 'Scale', metadata: { name: STS, namespace: NS }, spec: { replicas } };
}

const prefix = (from: number, to: number, resource = 'statefulsets') =>
  `downscale of ${resource}/${STS} in ${NS} from ${from} to ${to} replicas`;
const denied = (from: number, to: number, because: string) => `${prefix(from, to)} is not allowed because ${because}`;
const allowedMessage = (from: number, to: number) =>
  `${prefix(from, to)} is allowed -- all pods successfully prepared for shutdown.`;
const url = (i: number, path = 'prepare-shutdown') => `http://${STS}-${i}.nginx.${NS}.svc.cluster.local.:8080/${path}`;
const downscale = (from: number, to: number): Downscale => ({
  resource: 'statefulsets',
  name: STS,
  namespace: NS,
  from,
  to,
});

// ------------------------------------------------------------------ a test shell

interface World {
  mode: TrackerMode;
  /** StatefulSets in the namespace (the one being downscaled included). */
  statefulSets: StatefulSet[];
  pods: Pod[];
  /** Zone ConfigMap data; undefined = no ConfigMap yet. */
  zones?: Record<string, string> | undefined;
  /** HTTP status per URL (default 200); an Error = transport failure. */
  answer?: (url: string, method: string) => number | Error;
  recordFails?: boolean;
}

interface Run {
  decision: AdmissionDecision;
  posts: string[];
  deletes: string[];
  skipped: string[];
  recorded: boolean;
}

const matches = (selector: string, labels: Record<string, string> | undefined) => {
  const [k, v] = selector.split('=') as [string, string];
  return labels?.[k] === v;
};

/** The executor's I/O against an in-memory world, calling the pure steps in order. */
function run(world: World, req: AdmissionRequestV1): Run {
  const out: Run = { decision: { allowed: true }, posts: [], deletes: [], skipped: [], recorded: false };
  const finish = (decision: AdmissionDecision) => ({ ...out, decision });
  const first = firstChecks(req);
  if (first.kind === 'allow') return finish(toAdmissionDecision(first));
  const { downscale: d, source } = first;
  let self: StatefulSet;
  if (source.kind === 'old-object') self = source.statefulSet;
  else {
    const found = world.statefulSets.find((s) => s.metadata?.name === source.name);
    if (!found) return finish(toAdmissionDecision(lookupFailed(`statefulsets.apps "${source.name}" not found`)));
    self = found;
  }
  const info = stsInfo(self, d);
  if (info.kind !== 'proceed') return finish(toAdmissionDecision(info));
  if (info.next === 'group-checks') {
    const group = world.statefulSets.filter((s) => matches(groupSelector(info.info.rolloutGroup), s.metadata?.labels));
    let lastDownscales: Map<string, LastDownscale>;
    if (world.mode === 'zone-tracker') {
      world.zones ??= initialZoneTracker(
        group.map((s) => s.metadata?.name ?? ''),
        NOW,
      );
      const zones = parseZoneTracker(world.zones);
      if ('error' in zones) return finish(toAdmissionDecision(executorFailed(d, { kind: 'load-zones' })));
      lastDownscales = lastDownscalesFromZones(zones);
    } else {
      lastDownscales = lastDownscalesFromAnnotations(group);
    }
    const othersPods = new Map(
      group.map((s) => [s.metadata?.name ?? '', world.pods.filter((p) => matches(podSelector(s), p.metadata?.labels))]),
    );
    const checked = groupChecks({
      downscale: d,
      mode: world.mode,
      self: d.name,
      others: group,
      othersPods,
      lastDownscales,
      now: NOW,
    });
    if (checked.kind === 'deny') return finish(toAdmissionDecision(checked));
  }
  const existingPods = new Set(
    world.pods.filter((p) => matches(podSelector(self), p.metadata?.labels)).map((p) => p.metadata?.name ?? ''),
  );
  const eps = endpoints({
    sts: d.name,
    namespace: d.namespace,
    serviceName: info.info.serviceName,
    port: info.info.port,
    path: info.info.path,
    from: d.from,
    to: d.to,
    existingPods,
  });
  out.skipped = eps.skipped;
  const call = (u: string, method: string): CallResult => {
    (method === 'POST' ? out.posts : out.deletes).push(u);
    const a = world.answer?.(u, method) ?? 200;
    return a instanceof Error ? { url: u, error: a.message } : { url: u, status: a };
  };
  const results = eps.call.map((ep) => call(ep.url, 'POST'));
  const prepared = afterPrepare({ downscale: d, call: eps.call, results });
  if (prepared.kind === 'deny') {
    for (const ep of prepared.undo) call(ep.url, 'DELETE');
    return finish(toAdmissionDecision(prepared));
  }
  let recordError: string | undefined;
  if (world.recordFails) recordError = 'boom';
  else if (world.mode === 'annotation') {
    const patch = lastDownscaleAnnotationPatch(NOW);
    const target = world.statefulSets.find((s) => s.metadata?.name === d.name);
    if (target?.metadata)
      target.metadata.annotations = { ...target.metadata.annotations, ...patch.metadata.annotations };
    out.recorded = true;
  } else {
    world.zones = recordDownscale(world.zones, d.name, NOW);
    out.recorded = true;
  }
  const final = afterRecord({
    downscale: d,
    mode: world.mode,
    call: eps.call,
    ...(recordError !== undefined ? { recordError } : {}),
  });
  if (final.kind === 'deny') for (const ep of final.undo) call(ep.url, 'DELETE');
  return finish(toAdmissionDecision(final));
}

/** rollout-operator's world: the StatefulSet under test and a sibling in the same group, all pods ready. */
function rolloutOperatorWorld(
  mode: TrackerMode,
  from: number,
  extra: Partial<World> = {},
  siblings: StatefulSet[] = [],
): World {
  const sibling = sts({ name: `${STS}-1`, status: { replicas: 3, updatedReplicas: 3 } });
  const all = [sts({ replicas: from }), sibling, ...siblings];
  const pods = [
    ...podsOf(STS, from),
    ...all.slice(1).flatMap((s) => podsOf(s.metadata?.name ?? '', s.status?.replicas ?? 0)),
  ];
  return { mode, statefulSets: all, pods, zones: mode === 'zone-tracker' ? {} : undefined, ...extra };
}

function stsRequest(from: number, to: number, extra: Partial<AdmissionRequestV1> = {}) {
  return request(sts({ replicas: from }), sts({ replicas: to }), extra);
}

// ----------------------------------------------------------------- tests

for (const mode of MODES) {
  describe(`prepare-downscale pipeline (${mode} mode)`, { timeout: 10000 }, () => {
    it('TestUpscale: allowed, nothing called', () => {
      const r = run(rolloutOperatorWorld(mode, 2), stsRequest(2, 5));
      assert.deepEqual(r.decision, { allowed: true });
      assert.deepEqual([r.posts, r.deletes, r.recorded], [[], [], false]);
    });

    it('TestNoReplicasChange: allowed, nothing called', () => {
      const r = run(rolloutOperatorWorld(mode, 5), stsRequest(5, 5));
      assert.deepEqual(r.decision, { allowed: true });
      assert.deepEqual([r.posts, r.deletes, r.recorded], [[], [], false]);
    });

    for (const [name, status] of [
      ['TestValidDownscale', 200],
      ['TestValidDownscaleWith204', 204],
    ] as const) {
      it(`${name}: pods prepared from the highest ordinal, downscale recorded, allowed`, () => {
        const world = rolloutOperatorWorld(mode, 3, { answer: () => status });
        const r = run(world, stsRequest(3, 1));
        assert.deepEqual(r.decision, { allowed: true, status: { message: allowedMessage(3, 1) } });
        assert.deepEqual(r.posts, [url(2), url(1)]);
        assert.deepEqual(r.deletes, []);
        assert.equal(r.recorded, true);
        if (mode === 'annotation') {
          assert.equal(world.statefulSets[0]?.metadata?.annotations?.['grafana.com/last-downscale'], NOW_TEXT);
        } else {
          assert.deepEqual(world.zones, { [STS]: `{"lastDownscaled":"${NOW_TEXT}"}` });
        }
      });
    }

    it('TestValidDownscaleWithAnotherInProgress: a sibling downscaled within its min time denies, nothing called', () => {
      const busy = sts({
        name: `${STS}-2`,
        labels: { 'grafana.com/min-time-between-zones-downscale': '12h' },
        annotations: mode === 'annotation' ? { 'grafana.com/last-downscale': NOW_TEXT } : {},
      });
      const world = rolloutOperatorWorld(
        mode,
        3,
        mode === 'zone-tracker' ? { zones: { [`${STS}-2`]: `{"lastDownscaled":"${NOW_TEXT}"}` } } : {},
        [busy],
      );
      const r = run(world, stsRequest(3, 1));
      assert.deepEqual(r.decision, {
        allowed: false,
        status: {
          message: denied(
            3,
            1,
            `statefulset ${STS}-2 was downscaled at ${goTimeString(NOW)} and is configured to wait 12h0m0s between zone downscales`,
          ),
        },
      });
      assert.deepEqual([r.posts, r.deletes, r.recorded], [[], [], false]);
    });

    it('TestInvalidDownscale: a pod failing to prepare → DELETE to every endpoint, deny, nothing recorded', () => {
      const world = rolloutOperatorWorld(mode, 5, {
        answer: (u, method) => (method === 'POST' && u === url(3) ? 500 : 200),
      });
      const r = run(world, stsRequest(5, 3));
      assert.deepEqual(r.decision, {
        allowed: false,
        status: { message: denied(5, 3, 'one or more pods failed to prepare for shutdown.') },
      });
      assert.deepEqual(r.posts, [url(4), url(3)]);
      assert.deepEqual(r.deletes, [url(4), url(3)]);
      assert.equal(r.recorded, false);
    });

    it('a transport error counts as a failure too', () => {
      const r = run(
        rolloutOperatorWorld(mode, 5, {
          answer: (u, m) => (m === 'POST' && u === url(4) ? new Error('dial tcp: no such host') : 200),
        }),
        stsRequest(5, 3),
      );
      assert.equal(r.decision.allowed, false);
      assert.deepEqual(r.deletes, [url(4), url(3)]);
    });

    it('TestFailLastDownscaleAttr: recording fails → DELETE to every endpoint, deny', () => {
      const r = run(rolloutOperatorWorld(mode, 5, { recordFails: true }), stsRequest(5, 3));
      const because =
        mode === 'annotation'
          ? 'adding an annotation to the statefulset failed.'
          : 'setting downscale timestamp in the zone ConfigMap failed.';
      assert.deepEqual(r.decision, { allowed: false, status: { message: denied(5, 3, because) } });
      assert.deepEqual(r.posts, [url(4), url(3)]);
      assert.deepEqual(r.deletes, [url(4), url(3)]);
    });

    it('TestDownscaleDryRun: allowed at once, no side effects', () => {
      const world = rolloutOperatorWorld(mode, 5, { answer: () => 500 });
      const r = run(world, stsRequest(5, 3, { dryRun: true }));
      assert.deepEqual(r.decision, { allowed: true });
      assert.deepEqual([r.posts, r.deletes, r.recorded], [[], [], false]);
    });

    it('dryRun absent is not a dry run (rollout-operator would crash on it)', () => {
      const req = stsRequest(5, 3);
      delete req.dryRun;
      const r = run(rolloutOperatorWorld(mode, 5), req);
      assert.deepEqual(r.decision, { allowed: true, status: { message: allowedMessage(5, 3) } });
      assert.deepEqual(r.posts, [url(4), url(3)]);
    });

    it('TestDownscaleAnotherStsHasNonUpdatedReplicas: deny with the counts', () => {
      const rolling = sts({ name: `${STS}-2`, status: { replicas: 3, updatedReplicas: 2 } });
      const r = run(rolloutOperatorWorld(mode, 3, {}, [rolling]), stsRequest(3, 1));
      assert.deepEqual(r.decision, {
        allowed: false,
        status: { message: denied(3, 1, `statefulset ${STS}-2 has 1 non-updated replicas and 0 non-ready replicas`) },
      });
      assert.deepEqual(r.posts, []);
    });

    it('a sibling with a non-ready pod denies', () => {
      const world = rolloutOperatorWorld(mode, 3);
      world.pods = world.pods.map((p) =>
        p.metadata?.name === `${STS}-1-2` ? pod(`${STS}-1-2`, `${STS}-1`, false) : p,
      );
      const r = run(world, stsRequest(3, 1));
      assert.deepEqual(r.decision, {
        allowed: false,
        status: { message: denied(3, 1, `statefulset ${STS}-1 has 0 non-updated replicas and 1 non-ready replicas`) },
      });
    });

    it('#72: pods that do not exist yet are skipped, the rest prepared', () => {
      const world = rolloutOperatorWorld(mode, 2); // only pods 0 and 1 exist
      const r = run(world, stsRequest(5, 1));
      assert.deepEqual(r.decision, { allowed: true, status: { message: allowedMessage(5, 1) } });
      assert.deepEqual(r.posts, [url(1)]);
      assert.deepEqual(r.skipped, [`${STS}-4`, `${STS}-3`, `${STS}-2`]);
    });

    it('a /scale request reads the live StatefulSet', () => {
      const r = run(rolloutOperatorWorld(mode, 3), request(scale(3), scale(2)));
      assert.deepEqual(r.decision, { allowed: true, status: { message: allowedMessage(3, 2) } });
      assert.deepEqual(r.posts, [url(2)]);
    });

    it('a /scale request whose GET fails is allowed with a warning', () => {
      const world = rolloutOperatorWorld(mode, 3);
      world.statefulSets = [];
      const r = run(world, request(scale(3), scale(2)));
      assert.deepEqual(r.decision, {
        allowed: true,
        warnings: [`statefulsets.apps "${STS}" not found, allowing the change`],
      });
    });

    it('a parse error of a last downscale denies with the mode message', () => {
      const bad = sts({
        name: `${STS}-2`,
        annotations: mode === 'annotation' ? { 'grafana.com/last-downscale': 'yesterday' } : {},
      });
      const world = rolloutOperatorWorld(
        mode,
        3,
        mode === 'zone-tracker' ? { zones: { [`${STS}-2`]: '{"lastDownscaled":"yesterday"}' } } : {},
        [bad],
      );
      const because =
        mode === 'annotation'
          ? 'parsing downscale annotations failed.'
          : 'parsing parsing downscale timestamps from the zone ConfigMap failed.';
      assert.deepEqual(run(world, stsRequest(3, 1)).decision, {
        allowed: false,
        status: { message: denied(3, 1, because) },
      });
    });

    it('without a rollout group no group check runs', () => {
      const rolling = sts({ name: `${STS}-2`, group: null, status: { replicas: 3, updatedReplicas: 0 } });
      const world = rolloutOperatorWorld(mode, 3, {}, [rolling]);
      world.statefulSets[0] = sts({ replicas: 3, group: null });
      world.statefulSets[1] = sts({ name: `${STS}-1`, group: null, status: { replicas: 3, updatedReplicas: 0 } });
      const r = run(world, request(sts({ replicas: 3, group: null }), sts({ replicas: 1, group: null })));
      assert.deepEqual(r.decision, { allowed: true, status: { message: allowedMessage(3, 1) } });
    });
  });
}

describe('TestCheckReplicasChange (firstChecks)', { timeout: 10000 }, () => {
  const cases: [
    string,
    number | null | undefined,
    number | null | undefined,
    ReturnType<typeof firstChecks>['kind'],
    string | undefined,
  ][] = [
    ['both nil', undefined, null, 'allow', undefined],
    ['old nil', undefined, 3, 'allow', 'old/new replicas is nil, allowing the change'],
    ['new nil', 3, null, 'allow', 'old/new replicas is nil, allowing the change'],
    ['upscale', 1, 3, 'allow', undefined],
    ['same', 3, 3, 'allow', undefined],
    ['downscale', 3, 1, 'resolve-statefulset', undefined],
    ['downscale to zero', 3, 0, 'resolve-statefulset', undefined],
  ];
  for (const [name, from, to, kind, warning] of cases) {
    it(name, () => {
      const outcome = firstChecks(request(sts({ replicas: from }), sts({ replicas: to })));
      assert.equal(outcome.kind, kind);
      if (outcome.kind === 'allow')
        assert.deepEqual(outcome, warning === undefined ? { kind: 'allow' } : { kind: 'allow', warning });
    });
  }

  it('undecodable old or new object: allowed with a warning', () => {
    assert.deepEqual(firstChecks(request({ kind: 'StatefulSet' }, sts())), {
      kind: 'allow',
      warning: "can't decode old object, allowing the change, err: Object 'apiVersion' is missing",
    });
    assert.deepEqual(firstChecks(request(sts({ replicas: 3 }), { apiVersion: 'v1', kind: 'Pod' })), {
      kind: 'allow',
      warning: "can't decode new object, allowing the change, err: unsupported type /v1, Kind=Pod",
    });
  });

  it('a StatefulSet downscale resolves from the old object', () => {
    const old = sts({ replicas: 3 });
    assert.deepEqual(firstChecks(request(old, sts({ replicas: 1 }))), {
      kind: 'resolve-statefulset',
      downscale: downscale(3, 1),
      source: { kind: 'old-object', statefulSet: old },
    });
  });

  it('a /scale downscale needs a live GET; other resources and kinds fail open', () => {
    assert.deepEqual(firstChecks(request(scale(3), scale(1))), {
      kind: 'resolve-statefulset',
      downscale: downscale(3, 1),
      source: { kind: 'live-get', namespace: NS, name: STS },
    });
    const deployments = { group: 'apps', version: 'v1', resource: 'deployments' };
    assert.deepEqual(firstChecks(request(scale(3), scale(1), { resource: deployments })), {
      kind: 'allow',
      warning: 'unsupported resource deployments, allowing the change',
    });
    const dep = (r: number) => ({ apiVersion: 'apps/v1', kind: 'Deployment', spec: { replicas: r } });
    assert.deepEqual(firstChecks(request(dep(3), dep(1), { resource: deployments })), {
      kind: 'allow',
      warning: 'unsupported type apps/v1, Kind=Deployment (go type *v1.Deployment), allowing the change',
    });
  });

  it('dry run wins over everything, even undecodable objects', () => {
    assert.deepEqual(firstChecks(request('garbage', null, { dryRun: true })), { kind: 'allow' });
  });
});

describe('TestGetStatefulSetPrepareInfo (stsInfo)', { timeout: 10000 }, () => {
  it('reads label, annotations, group and serviceName', () => {
    assert.deepEqual(readPrepareInfo(sts()), {
      prepareDownscale: true,
      port: '8080',
      path: 'prepare-shutdown',
      rolloutGroup: 'ingester',
      serviceName: 'nginx',
    });
    assert.deepEqual(readPrepareInfo({}), {
      prepareDownscale: false,
      port: '',
      path: '',
      rolloutGroup: '',
      serviceName: '',
    });
    assert.equal(readPrepareInfo(sts({ labels: { 'grafana.com/prepare-downscale': 'True' } })).prepareDownscale, false);
  });

  it('proceeds to group checks, or straight to the pods without a group', () => {
    const d = downscale(3, 1);
    const info = { port: '8080', path: 'prepare-shutdown', rolloutGroup: 'ingester', serviceName: 'nginx' };
    assert.deepEqual(stsInfo(sts(), d), { kind: 'proceed', downscale: d, info, next: 'group-checks' });
    assert.deepEqual(stsInfo(sts({ group: null }), d), {
      kind: 'proceed',
      downscale: d,
      info: { ...info, rolloutGroup: '' },
      next: 'prepare-pods',
    });
  });

  it('not labelled: allowed; #306 annotation instead of label: allowed with a warning', () => {
    assert.deepEqual(stsInfo(sts({ prepare: false }), downscale(3, 1)), { kind: 'allow' });
    assert.deepEqual(
      stsInfo(sts({ prepare: false, annotations: { 'grafana.com/prepare-downscale': 'true' } }), downscale(3, 1)),
      {
        kind: 'allow',
        warning:
          'grafana.com/prepare-downscale is set as an annotation, but it must be a label: pods were not prepared for shutdown',
      },
    );
  });

  it('a negative replica count is denied before any pod is prepared (was: every pod prepared for shutdown, then allowed; the apiserver rejects the object anyway)', () => {
    assert.deepEqual(stsInfo(sts(), downscale(3, -1)), {
      kind: 'deny',
      message: denied(3, -1, 'the new replica count -1 is negative: no pod was prepared for shutdown.'),
    });
    assert.deepEqual(
      stsInfo(sts({ prepare: false }), downscale(3, -1)),
      { kind: 'allow' },
      'not ours to judge without the opt-in: the apiserver refuses it',
    );
  });

  it('missing configuration denies with the exact messages', () => {
    const d = downscale(3, 1);
    const noPort = sts({ annotations: { 'grafana.com/prepare-downscale-http-port': '' } });
    assert.deepEqual(stsInfo(noPort, d), {
      kind: 'deny',
      message: denied(3, 1, 'the grafana.com/prepare-downscale-http-port annotation is not set or empty.'),
    });
    const noPath = sts();
    delete noPath.metadata?.annotations?.['grafana.com/prepare-downscale-http-path'];
    assert.deepEqual(stsInfo(noPath, d), {
      kind: 'deny',
      message: denied(3, 1, 'the grafana.com/prepare-downscale-http-path annotation is not set or empty.'),
    });
    assert.deepEqual(stsInfo(sts({ serviceName: '' }), d), {
      kind: 'deny',
      message: denied(3, 1, 'the serviceName is not set or empty.'),
    });
  });
});

describe('executor failures (fail closed)', { timeout: 10000 }, () => {
  it('each has rollout-operator message', () => {
    const d = downscale(5, 3);
    assert.equal(
      executorFailed(d, { kind: 'list-statefulsets' }).message,
      denied(5, 3, 'finding other statefulsets failed.'),
    );
    assert.equal(executorFailed(d, { kind: 'load-zones' }).message, denied(5, 3, 'loading zones failed.'));
    assert.equal(
      executorFailed(d, { kind: 'list-pods' }).message,
      denied(5, 3, 'an error occurred while checking whether StatefulSets have non-updated replicas'),
    );
    assert.equal(
      executorFailed(d, { kind: 'group-locked', statefulSet: 'zone-b' }).message,
      denied(5, 3, 'statefulset zone-b is already in process of updating replicas'),
    );
  });

  it('selectors', () => {
    assert.equal(groupSelector('ingester'), 'rollout-group=ingester');
    assert.equal(podSelector(sts({ name: 'zone-a' })), 'name=zone-a');
  });

  it('an undecodable zone ConfigMap is a load failure', () => {
    const r = run(
      { mode: 'zone-tracker', statefulSets: [sts({ replicas: 3 })], pods: [], zones: { x: 'not json' } },
      stsRequest(3, 1),
    );
    assert.deepEqual(r.decision, { allowed: false, status: { message: denied(3, 1, 'loading zones failed.') } });
  });
});

describe('groupChecks (min-time, rollout in progress)', { timeout: 10000 }, () => {
  const base = (mode: TrackerMode, others: StatefulSet[], lastDownscales: Map<string, LastDownscale>, now = NOW) => ({
    downscale: downscale(3, 1),
    mode,
    self: STS,
    others,
    othersPods: new Map(others.map((s) => [s.metadata?.name ?? '', podsOf(s.metadata?.name ?? '', 3)])),
    lastDownscales,
    now,
  });
  const labelled = (name: string, minTime: string) =>
    sts({ name, labels: { 'grafana.com/min-time-between-zones-downscale': minTime } });

  it("uses the OTHER StatefulSet's label; self is never checked", () => {
    const others = [sts({ labels: { 'grafana.com/min-time-between-zones-downscale': '12h' } }), sts({ name: 'b' })];
    const last = new Map<string, LastDownscale>([
      [STS, NOW],
      ['b', NOW],
    ]);
    assert.deepEqual(groupChecks(base('annotation', others, last)), { kind: 'ok' });
  });

  it('a malformed min-time label on a recently downscaled sibling is a parse error', () => {
    const out = groupChecks(base('annotation', [labelled('b', '12 hours')], new Map([['b', NOW]])));
    assert.equal(out.kind, 'deny');
    if (out.kind === 'deny') {
      assert.equal(out.message, denied(3, 1, 'parsing downscale annotations failed.'));
      assert.equal(out.block.reason, 'parse-error');
    }
  });

  it('a malformed label without a last downscale is ignored (as rollout-operator)', () => {
    assert.deepEqual(groupChecks(base('annotation', [labelled('b', 'bogus')], new Map())), { kind: 'ok' });
  });

  it('lastDownscalesFromAnnotations parses only the annotated', () => {
    const m = lastDownscalesFromAnnotations([
      sts({ name: 'a', annotations: { 'grafana.com/last-downscale': NOW_TEXT } }),
      sts({ name: 'b' }),
      sts({ name: 'c', annotations: { 'grafana.com/last-downscale': 'x' } }),
    ]);
    assert.deepEqual([...m.keys()], ['a', 'c']);
    assert.equal(m.get('a'), NOW);
    assert.equal(typeof m.get('c'), 'object');
  });
});

describe('TestCreateEndpoints', { timeout: 10000 }, () => {
  const all = new Set(Array.from({ length: 10 }, (_, i) => `${STS}-${i}`));
  const input = {
    sts: STS,
    namespace: NS,
    serviceName: 'nginx',
    port: '8080',
    path: 'prepare-shutdown',
    from: 5,
    to: 2,
    existingPods: all,
  };

  it('ordinals from-1 down to to, with the default cluster domain and its trailing dot', () => {
    assert.deepEqual(endpoints(input), {
      call: [4, 3, 2].map((i) => ({ url: url(i), index: i, pod: `${STS}-${i}` })),
      skipped: [],
    });
  });

  it('a custom cluster domain', () => {
    assert.equal(
      endpoints({ ...input, clusterDomain: 'example.org', from: 1, to: 0 }).call[0]?.url,
      `http://${STS}-0.nginx.${NS}.svc.example.org:8080/prepare-shutdown`,
    );
  });

  it('a leading slash in the path does not produce // (fix over rollout-operator)', () => {
    assert.deepEqual(
      endpoints({ ...input, path: '/ingester/prepare-shutdown', from: 1, to: 0 }).call.map((e) => e.url),
      [url(0, 'ingester/prepare-shutdown')],
    );
  });

  it("#468: the path cleaned as rollout-operator v0.39 cleans it (Go's path.Clean)", () => {
    for (const [path, cleaned] of [
      ['a//b/../c', 'a/c'],
      ['//ingester/./prepare-shutdown/', 'ingester/prepare-shutdown'],
      ['../prepare', 'prepare'],
    ] as const) {
      assert.deepEqual(
        endpoints({ ...input, path, from: 1, to: 0 }).call.map((e) => e.url),
        [url(0, cleaned)],
      );
    }
  });

  it('#72: missing pods skipped', () => {
    const out = endpoints({ ...input, existingPods: new Set([`${STS}-3`]) });
    assert.deepEqual(
      out.call.map((e) => e.pod),
      [`${STS}-3`],
    );
    assert.deepEqual(out.skipped, [`${STS}-4`, `${STS}-2`]);
  });

  it('property: call and skipped partition the removed ordinals, descending, never //', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 40 }),
        fc.array(fc.nat(45)),
        fc.stringMatching(/^\/{0,3}[a-z/]{0,10}$/),
        (a, b, present, path) => {
          const [from, to] = a >= b ? [a, b] : [b, a];
          const existingPods = new Set(present.map((i) => `${STS}-${i}`));
          const out = endpoints({ ...input, from, to, path, existingPods });
          const ordinals = [
            ...out.call.map((e) => e.index),
            ...out.skipped.map((p) => Number(p.slice(STS.length + 1))),
          ].sort((x, y) => y - x);
          assert.deepEqual(
            ordinals,
            Array.from({ length: from - to }, (_, i) => from - 1 - i),
          );
          assert.deepEqual(
            out.call.map((e) => e.index),
            [...out.call.map((e) => e.index)].sort((x, y) => y - x),
          );
          for (const e of out.call) {
            assert.ok(existingPods.has(e.pod));
            assert.ok(!e.url.includes(':8080//'));
          }
          for (const p of out.skipped) assert.ok(!existingPods.has(p));
        },
      ),
    );
  });
});

describe('afterPrepare / afterRecord', { timeout: 10000 }, () => {
  const d = downscale(3, 1);
  const eps = endpoints({
    sts: STS,
    namespace: NS,
    serviceName: 'nginx',
    port: '8080',
    path: 'p',
    from: 3,
    to: 1,
    existingPods: new Set([`${STS}-1`, `${STS}-2`]),
  }).call;

  it('2xx is success, anything else or a transport error is not', () => {
    assert.deepEqual(
      [200, 204, 299, 199, 300, 404, 500].map((status) => callSucceeded({ url: 'u', status })),
      [true, true, true, false, false, false, false],
    );
    assert.equal(callSucceeded({ url: 'u', error: 'timeout' }), false);
  });

  it('all 2xx → record; nothing to call → record', () => {
    assert.deepEqual(
      afterPrepare({ downscale: d, call: eps, results: eps.map((e) => ({ url: e.url, status: 204 })) }),
      { kind: 'record' },
    );
    assert.deepEqual(afterPrepare({ downscale: d, call: [], results: [] }), { kind: 'record' });
  });

  it('a result missing (fail fast) → undo all, deny', () => {
    assert.deepEqual(afterPrepare({ downscale: d, call: eps, results: [{ url: eps[0]!.url, status: 200 }] }), {
      kind: 'deny',
      message: denied(3, 1, 'one or more pods failed to prepare for shutdown.'),
      undo: eps,
    });
  });

  it('final allow message, and the record failure messages', () => {
    assert.deepEqual(afterRecord({ downscale: d, mode: 'annotation', call: eps }), {
      kind: 'allow',
      message: allowedMessage(3, 1),
    });
    assert.deepEqual(afterRecord({ downscale: d, mode: 'zone-tracker', call: eps, recordError: 'x' }), {
      kind: 'deny',
      message: denied(3, 1, 'setting downscale timestamp in the zone ConfigMap failed.'),
      undo: eps,
    });
  });

  it('annotation patch', () => {
    assert.deepEqual(lastDownscaleAnnotationPatch(NOW + 999), {
      metadata: { annotations: { 'grafana.com/last-downscale': NOW_TEXT } },
    });
  });

  it('toAdmissionDecision', () => {
    assert.deepEqual(toAdmissionDecision({ kind: 'allow', warning: 'w', message: 'm' }), {
      allowed: true,
      warnings: ['w'],
      status: { message: 'm' },
    });
    assert.deepEqual(toAdmissionDecision({ kind: 'deny', message: 'no' }), {
      allowed: false,
      status: { message: 'no' },
    });
  });
});

describe('zone tracker', { timeout: 10000 }, () => {
  const groupOf = (minTime: string) =>
    [STS, 'zone-b', 'zone-c'].map((name) =>
      sts({ name, labels: { 'grafana.com/min-time-between-zones-downscale': minTime } }),
    );
  const check = (data: Record<string, string> | undefined, now: number, minTime = '12h') => {
    const zones = parseZoneTracker(data);
    assert.ok(!('error' in zones));
    const others = groupOf(minTime);
    return groupChecks({
      downscale: downscale(3, 1),
      mode: 'zone-tracker',
      self: STS,
      others,
      othersPods: new Map(others.map((s) => [s.metadata?.name ?? '', podsOf(s.metadata?.name ?? '', 3)])),
      lastDownscales: lastDownscalesFromZones(zones),
      now,
    });
  };
  const entry = (ms: number) => `{"lastDownscaled":"${formatRfc3339(ms)}"}`;

  it('TestZoneTrackerFindDownscalesDoneMinTimeAgo', () => {
    const data = { 'zone-b': entry(NOW - 2 * HOUR), 'zone-c': entry(NOW - 13 * HOUR) };
    const out = check(data, NOW);
    assert.equal(out.kind, 'deny');
    if (out.kind === 'deny') {
      assert.equal(
        out.message,
        denied(
          3,
          1,
          `statefulset zone-b was downscaled at ${goTimeString(NOW - 2 * HOUR)} and is configured to wait 12h0m0s between zone downscales`,
        ),
      );
      assert.deepEqual(out.block, {
        reason: 'min-time',
        statefulSet: 'zone-b',
        lastDownscale: NOW - 2 * HOUR,
        minTime: 12 * HOUR,
      });
    }
    assert.deepEqual(check(data, NOW + 10 * HOUR + 1000), { kind: 'ok' });
    // Exactly min time after: no longer blocked (now - last < min is the rule).
    assert.deepEqual(check(data, NOW + 10 * HOUR), { kind: 'ok' });
    assert.equal(check(data, NOW + 10 * HOUR - 1000).kind, 'deny');
    assert.deepEqual(check(data, NOW, '1h30m'), { kind: 'ok' });
  });

  it('TestLoadZonesCreatesInitialZones: every StatefulSet set to now, so the first downscale waits', () => {
    const data = initialZoneTracker([STS, 'zone-b', 'zone-c'], NOW + 123);
    assert.deepEqual(data, { [STS]: entry(NOW), 'zone-b': entry(NOW), 'zone-c': entry(NOW) });
    const out = check(data, NOW + HOUR);
    assert.equal(out.kind, 'deny');
    if (out.kind === 'deny')
      assert.equal(
        out.message,
        denied(
          3,
          1,
          `statefulset zone-b was downscaled at ${goTimeString(NOW)} and is configured to wait 12h0m0s between zone downscales`,
        ),
      );
  });

  it('TestLoadZonesEmptyConfigMap: no data, no zones, nothing blocks', () => {
    for (const data of [undefined, {}]) {
      const zones = parseZoneTracker(data);
      assert.ok(zones instanceof Map);
      assert.equal(zones.size, 0);
      assert.deepEqual(check(data, NOW), { kind: 'ok' });
    }
  });

  it('parseZoneTracker decodes as encoding/json does', () => {
    const zones = parseZoneTracker({
      a: `{"lastDownscaled":"${NOW_TEXT}","extra":1}`,
      b: 'null',
      c: '{"LastDownscaled":"x"}',
      d: '{}',
    });
    assert.ok(zones instanceof Map);
    assert.deepEqual(Object.fromEntries(zones), {
      a: { lastDownscaled: NOW_TEXT },
      b: { lastDownscaled: '' },
      c: { lastDownscaled: 'x' },
      d: { lastDownscaled: '' },
    });
    for (const raw of ['[]', '"s"', '{"lastDownscaled":5}', '{'])
      assert.ok('error' in parseZoneTracker({ z: raw }), raw);
  });

  it('an entry without a parseable time blocks with the tracker parse message', () => {
    const out = check({ 'zone-b': '{}' }, NOW);
    assert.equal(
      out.kind === 'deny' && out.message,
      denied(3, 1, 'parsing parsing downscale timestamps from the zone ConfigMap failed.'),
    );
  });

  it('TestSetDownscaled: sets or adds the entry, input untouched', () => {
    const before = { 'zone-b': entry(NOW - HOUR) };
    const after = recordDownscale(before, STS, NOW);
    assert.deepEqual(after, { 'zone-b': entry(NOW - HOUR), [STS]: entry(NOW) });
    assert.deepEqual(before, { 'zone-b': entry(NOW - HOUR) });
    assert.deepEqual(recordDownscale(after, 'zone-b', NOW + HOUR)['zone-b'], entry(NOW + HOUR));
    assert.deepEqual(recordDownscale(undefined, STS, NOW), { [STS]: entry(NOW) });
  });

  it('TestLastDownscaledNonExistentZone', () => {
    const zones = parseZoneTracker({ 'zone-b': entry(NOW) });
    assert.ok(zones instanceof Map);
    const lastDownscales = lastDownscalesFromZones(zones);
    assert.equal(lastDownscales.get('zone-x'), undefined);
    assert.equal(lastDownscales.get('zone-b'), NOW);
  });
});

describe('RFC3339', { timeout: 10000 }, () => {
  it('parses as Go does', () => {
    assert.equal(parseRfc3339(NOW_TEXT), NOW);
    assert.equal(parseRfc3339('2024-01-02T05:04:05+02:00'), NOW);
    assert.equal(parseRfc3339('2024-01-02T03:04:05.5Z'), NOW + 500);
    assert.equal(parseRfc3339('2024-02-29T00:00:00Z'), Date.UTC(2024, 1, 29));
    for (const bad of [
      '',
      '2024-01-02 03:04:05Z',
      '2024-01-02t03:04:05z',
      '2023-02-29T00:00:00Z',
      '2024-01-02T24:00:00Z',
      '2024-01-02T03:04:60Z',
      '2024-01-02T03:04:05',
      '2024-13-01T00:00:00Z',
    ]) {
      assert.equal(typeof parseRfc3339(bad), 'object', bad);
    }
  });

  it('property: format then parse is the time truncated to the second', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253402300799999 }), (ms) => {
        const text = formatRfc3339(ms);
        assert.match(text, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
        assert.equal(parseRfc3339(text), Math.floor(ms / 1000) * 1000);
      }),
    );
  });
});

describe('goTimeString', () => {
  it("prints a UTC instant as Go's time.Time String does", () => {
    assert.equal(goTimeString(Date.parse('2024-01-02T03:04:05Z')), '2024-01-02 03:04:05 +0000 UTC');
    assert.equal(goTimeString(Date.parse('2024-01-02T03:04:05.120Z')), '2024-01-02 03:04:05.12 +0000 UTC');
  });
});

describe('prepare-downscale: the parent of a /scale request', () => {
  const scaleRequest = (): AdmissionRequestV1 => ({
    uid: 'u',
    operation: 'UPDATE',
    name: 'ingester-zone-a',
    namespace: 'ns',
    resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
    subResource: 'scale',
    oldObject: {
      apiVersion: 'autoscaling/v1',
      kind: 'Scale',
      metadata: { name: 'ingester-zone-a', namespace: 'ns' },
      spec: { replicas: 3 },
    },
    object: {
      apiVersion: 'autoscaling/v1',
      kind: 'Scale',
      metadata: { name: 'ingester-zone-a', namespace: 'ns' },
      spec: { replicas: 2 },
    },
  });
  const handler = (
    client: KubeClient,
    cachedStatefulSet?: (namespace: string, name: string) => StatefulSet | undefined,
  ) =>
    prepareDownscaleHandler({
      client,
      clock: new FakeClock(),
      log: nopLogger,
      mode: 'annotation',
      zoneTrackerConfigMap: 'zones',
      clusterDomain: 'cluster.local.',
      podTimeoutMs: 200,
      identity: 'test',
      ...(cachedStatefulSet ? { cachedStatefulSet } : {}),
    });
  const never = new AbortController().signal;

  it('denies, saying to retry, when the parent cannot be read (rollout-operator allows and downscales unprepared)', async () => {
    for (const failure of ['transport', 'server-error'] as const) {
      const decision = await handler(failingClient(failure).client)(scaleRequest(), never);
      assert.equal(decision.allowed, false, failure);
      assert.match(
        decision.status?.message ?? '',
        /^downscale of statefulsets\/ingester-zone-a in ns from 3 to 2 replicas is not allowed because the StatefulSet could not be read to check grafana\.com\/prepare-downscale \(.+\); retry$/,
      );
    }
  });

  it('allows, with a warning, when the parent does not exist', async () => {
    const notFound = new Proxy(
      {},
      {
        get: (_t, p) =>
          p === 'then'
            ? undefined
            : () =>
                Promise.reject(
                  new KubeApiError({
                    code: 404,
                    reason: 'NotFound',
                    message: 'statefulsets.apps "ingester-zone-a" not found',
                    method: 'GET',
                    path: '/x',
                  }),
                ),
      },
    ) as unknown as KubeClient;
    const decision = await handler(notFound)(scaleRequest(), never);
    assert.equal(decision.allowed, true);
    assert.match(decision.warnings?.[0] ?? '', /not found, allowing the change$/);
  });

  it('reads a cached parent without calling the API', async () => {
    const { client, calls } = failingClient('transport');
    const unlabelled: StatefulSet = {
      metadata: { name: 'ingester-zone-a', namespace: 'ns', labels: {} },
      spec: { replicas: 3 },
    } as StatefulSet;
    const decision = await handler(client, (namespace, name) =>
      namespace === 'ns' && name === 'ingester-zone-a' ? unlabelled : undefined,
    )(scaleRequest(), never);
    assert.equal(decision.allowed, true, JSON.stringify(decision));
    assert.deepEqual(calls, []);
  });
});
