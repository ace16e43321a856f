// The ZPDB eviction decision. Ports rollout-operator's
// pkg/zpdb/eviction_controller_test.go (the decision part: request checks and
// the pod GET belong to the webhook), validator_partition_aware_test.go
// (TestIsReady_*) and the ZPDB e2e scenarios, then property tests of the
// budget guarantees.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { invalidZpdb, parseZpdb, type InvalidZpdb, type ZpdbConfig } from '../../../src/drain/zpdb/zpdbresource.ts';
import {
  admitEviction,
  decideEviction,
  decideRolloutDelete,
  EVICTION_CACHE_TTL_MS,
  evictionScope,
  maxUnavailableZeroOverride,
  podAvailable,
  type EvictionDecision,
  type EvictionRecord,
  type PendingEvictions,
} from '../../../src/drain/zpdb/decide.ts';
import { pendingFrom, pruneLedger, type Ledger } from '../../../src/drain/zpdb/ledger.ts';
import type { Pod, StatefulSet } from '../../../src/runtime/kube/types.ts';
import { formatRfc3339 } from '../../../src/vocabulary/rfc3339.ts';
import { READY_TIME_ANNOTATION } from '../../../src/vocabulary/keys.ts';
import { podView } from '../../../src/vocabulary/pods.ts';
import { assertReaching, SKIP } from '../../support/reach.ts';

const NS = 'ns';
const NOW = Date.parse('2026-07-01T12:00:00Z');
const SEC = 1000;
const MIN = 60 * SEC;
const HOUR = 60 * MIN;
const GROUP = { 'rollout-group': 'ingester' };
const PARTITION_REGEX = '[a-z\\-]+-zone-[a-z]-([0-9]+)';

type PodState = 'ready' | 'unready' | 'failed' | 'pending' | 'succeeded' | 'terminating';

interface PodOptions {
  /** Seconds since grafana.com/ready-time; null: no annotation. Default: an hour. */
  readyAgo?: number | null;
  annotation?: string;
  readyConditionAt?: number;
}

function statefulSet(
  name: string,
  replicas = 3,
  statusReplicas = replicas,
  labels: Record<string, string> = GROUP,
): StatefulSet {
  return {
    metadata: { name, namespace: NS, uid: `${name}-uid`, labels },
    spec: {
      replicas,
      selector: { matchLabels: { name } },
      serviceName: name,
      template: { metadata: { labels: { name, ...GROUP } } },
    },
    status: { replicas: statusReplicas },
  };
}

const readyContainer = {
  name: 'c',
  image: 'i',
  imageID: '',
  ready: true,
  restartCount: 0,
  state: { running: { startedAt: '2026-07-01T00:00:00Z' } },
};
const unreadyContainer = { ...readyContainer, ready: false };

function pod(name: string, owner: string, state: PodState = 'ready', options: PodOptions = {}): Pod {
  const readyAgo = options.readyAgo === undefined ? 3600 : options.readyAgo;
  const annotations: Record<string, string> = {};
  if (options.annotation !== undefined) annotations[READY_TIME_ANNOTATION] = options.annotation;
  else if (readyAgo !== null && (state === 'ready' || state === 'terminating'))
    annotations[READY_TIME_ANNOTATION] = formatRfc3339(NOW - readyAgo * SEC);
  const phase = {
    ready: 'Running',
    unready: 'Running',
    failed: 'Failed',
    pending: 'Pending',
    succeeded: 'Succeeded',
    terminating: 'Running',
  }[state];
  return {
    metadata: {
      name,
      namespace: NS,
      uid: `${name}-uid`,
      labels: { name: owner, ...GROUP },
      annotations,
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'StatefulSet', name: owner, uid: `${owner}-uid`, controller: true },
      ],
      ...(state === 'terminating' ? { deletionTimestamp: formatRfc3339(NOW - SEC) } : {}),
    },
    status: {
      phase,
      containerStatuses: [state === 'unready' ? unreadyContainer : readyContainer],
      ...(options.readyConditionAt !== undefined
        ? {
            conditions: [
              { type: 'Ready', status: 'True', lastTransitionTime: formatRfc3339(options.readyConditionAt) },
            ],
          }
        : {}),
    },
  };
}

/** StatefulSets ingester-zone-<z> with `replicas` pods each, all ready. */
class World {
  statefulSets: StatefulSet[];
  pods: Pod[];
  pending: PendingEvictions = new Map();

  constructor(zones: string[] = ['a', 'b', 'c'], replicas = 3) {
    this.statefulSets = zones.map((z) => statefulSet(`ingester-zone-${z}`, replicas));
    this.pods = zones.flatMap((z) =>
      Array.from({ length: replicas }, (_, i) => pod(`ingester-zone-${z}-${i}`, `ingester-zone-${z}`)),
    );
  }

  get(name: string): Pod {
    const found = this.pods.find((p) => p.metadata?.name === name);
    assert.ok(found, name);
    return found;
  }

  set(name: string, state: PodState, options: PodOptions = {}): this {
    const owner = name.replace(/-\d+$/, '');
    this.pods = this.pods.map((p) => (p.metadata?.name === name ? pod(name, owner, state, options) : p));
    return this;
  }

  remove(name: string): this {
    this.pods = this.pods.filter((p) => p.metadata?.name !== name);
    return this;
  }

  sts(name: string): StatefulSet {
    return this.statefulSets.find((s) => s.metadata?.name === name)!;
  }

  evict(
    name: string,
    config: ZpdbConfig,
    options: { now?: number; override?: number; dryRun?: boolean; record?: boolean } = {},
  ): EvictionDecision {
    const now = options.now ?? NOW;
    const decision = decideEviction({
      pod: this.get(name),
      config,
      statefulSets: this.statefulSets,
      pods: this.pods,
      pendingEvictions: this.pending,
      now,
      ...(options.override !== undefined ? { maxUnavailableZeroOverride: options.override } : {}),
      ...(options.dryRun ? { dryRun: true } : {}),
    });
    if (decision.allowed && decision.record && options.record !== false) this.record(decision.record, now);
    return decision;
  }

  /**
   * Records an allowed eviction as the webhook commits one to the budget's
   * ledger (src/drain/zpdb/evictions.ts): the entries that no longer hold
   * anything back are dropped, the allow is added.
   */
  record(record: EvictionRecord, now: number): void {
    const ledger: Ledger = new Map(
      [...this.pending].map(([uid, at]) => [
        uid,
        { pod: this.pods.find((p) => p.metadata?.uid === uid)?.metadata?.name ?? '', at },
      ]),
    );
    const kept = pruneLedger(ledger, now, (name) => this.pods.find((p) => p.metadata?.name === name));
    kept.set(record.uid, { pod: record.name, at: record.allowedAt });
    this.pending = pendingFrom(kept);
  }
}

function zpdb(spec: Record<string, unknown>, name = 'ingester-rollout'): ZpdbConfig {
  const r = parseZpdb({
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'ZoneAwarePodDisruptionBudget',
    metadata: { name, namespace: NS },
    spec: { selector: { matchLabels: GROUP }, ...spec },
  });
  assert.ok('config' in r, JSON.stringify(r));
  return r.config;
}

const maxUnavailable = (n: number) => zpdb({ maxUnavailable: n });
const partitioned = (n: number, extra: Record<string, unknown> = {}) =>
  zpdb({ maxUnavailable: n, podNamePartitionRegex: PARTITION_REGEX, ...extra });

function assertAllowed(d: EvictionDecision, message?: string): void {
  assert.equal(d.allowed, true, JSON.stringify(d));
  if (message !== undefined) assert.equal(d.allowed && d.message, message);
}

function assertDenied(d: EvictionDecision, code: number, message: string): void {
  assert.deepEqual(d.allowed ? d : { code: d.code, message: d.message }, { code, message });
}

const alwaysAllow = (n: number) => zpdb({ maxUnavailable: n, unhealthyPodEvictionPolicy: 'AlwaysAllow' });

/** Let go under unhealthyPodEvictionPolicy AlwaysAllow where the budget, which said `budgetSays`, would refuse. */
function assertUnhealthyAllowed(d: EvictionDecision, budgetSays: string): void {
  const said = `pod is not ready and the budget's unhealthyPodEvictionPolicy is AlwaysAllow: evicted without spending the budget (the budget alone would refuse: ${budgetSays})`;
  assert.deepEqual(d.allowed && { reason: d.reason, message: d.message, warning: d.warning }, {
    reason: 'unhealthy-pod-always-allow',
    message: said,
    warning: said,
  });
}

describe('before the budget', { timeout: 10000 }, () => {
  it('a pod that is finished, pending or terminating is let go with a warning (TestPodEviction_PodNotReady)', () => {
    for (const state of ['failed', 'pending', 'succeeded', 'terminating'] as const) {
      const w = new World().set('ingester-zone-a-0', state);
      assert.deepEqual(
        w.evict('ingester-zone-a-0', maxUnavailable(0)),
        { allowed: true, reason: 'pod-not-ready', warning: 'pod is not ready' },
        state,
      );
      assert.equal(w.pending.size, 0, 'not recorded');
    }
  });

  it('a pod outside every ZPDB is allowed (TestPodEviction_PodNotInScope); several ZPDBs deny 400', () => {
    const w = new World();
    const snapshot = {
      pod: w.get('ingester-zone-a-0'),
      statefulSets: w.statefulSets,
      pods: w.pods,
      pendingEvictions: w.pending,
      now: NOW,
    };
    assert.deepEqual(
      admitEviction({ ...snapshot, configs: [zpdb({ selector: { matchLabels: { 'rollout-group': 'other' } } })] }),
      { allowed: true, reason: 'pod-not-in-scope' },
    );
    assert.deepEqual(admitEviction({ ...snapshot, configs: [maxUnavailable(1), zpdb({}, 'second')] }), {
      allowed: false,
      code: 400,
      reason: 'cfg-not-found',
      message: 'multiple zoned pod disruption budgets found for pod',
    });
    const scope = evictionScope(w.get('ingester-zone-a-0'), [maxUnavailable(1)]);
    assert.equal(scope.kind, 'in-scope');
  });

  it('an ignorable pod is allowed even under several ZPDBs, as rollout-operator orders its checks', () => {
    const w = new World().set('ingester-zone-a-0', 'failed');
    const d = admitEviction({
      pod: w.get('ingester-zone-a-0'),
      statefulSets: w.statefulSets,
      pods: w.pods,
      pendingEvictions: w.pending,
      now: NOW,
      configs: [maxUnavailable(1), zpdb({}, 'second')],
    });
    assert.equal(d.allowed && d.reason, 'pod-not-ready');
  });

  it('the owner must be a StatefulSet that exists (TestPodEviction_PodWithNoOwner)', () => {
    const w = new World();
    const orphan = {
      ...w.get('ingester-zone-a-0'),
      metadata: { ...w.get('ingester-zone-a-0').metadata, ownerReferences: [] },
    };
    const input = {
      config: maxUnavailable(1),
      statefulSets: w.statefulSets,
      pods: w.pods,
      pendingEvictions: w.pending,
      now: NOW,
    };
    assertDenied(decideEviction({ ...input, pod: orphan }), 500, 'unable to find a StatefulSet pod owner');
    const fromReplicaSet = {
      ...orphan,
      metadata: {
        ...orphan.metadata,
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'rs-uid', controller: true }],
      },
    };
    assertDenied(
      decideEviction({ ...input, pod: fromReplicaSet }),
      500,
      'pod owner is not a StatefulSet - ingester-zone-a-0 has owner rs (ReplicaSet)',
    );
    const w2 = new World();
    w2.statefulSets = w2.statefulSets.filter((s) => s.metadata?.name !== 'ingester-zone-a');
    assertDenied(
      w2.evict('ingester-zone-a-0', maxUnavailable(1)),
      500,
      'unable to find StatefulSet ingester-zone-a by name: statefulsets.apps "ingester-zone-a" not found',
    );
  });

  it('maxUnavailable 0 denies 403 (TestPodEviction_MaxUnavailableEq0, _MaxUnavailablePercentageEq0)', () => {
    const w = new World(['a']);
    assertDenied(w.evict('ingester-zone-a-0', maxUnavailable(0)), 403, 'max unavailable = 0');
    assertDenied(w.evict('ingester-zone-a-0', zpdb({ maxUnavailablePercentage: 0 })), 403, 'max unavailable = 0');
    const d = w.evict('ingester-zone-a-0', maxUnavailable(0));
    assert.equal(!d.allowed && d.reason, 'max-unavailable-0');
  });

  it('a single zone can never evict (TestPodEviction_SingleZoneMultiplePodsUpscale)', () => {
    const w = new World(['a'], 2);
    assertDenied(w.evict('ingester-zone-a-0', maxUnavailable(1)), 400, 'minimum number of StatefulSets not found');
  });

  it('a pod name the partition regex does not match denies 400', () => {
    const w = new World(['a', 'b']);
    assertDenied(
      w.evict('ingester-zone-a-0', zpdb({ podNamePartitionRegex: 'mimir-([0-9]+)' })),
      400,
      'failed to extract partition from pod Name regular expression',
    );
  });
});

describe('an invalid budget fails closed', { timeout: 10000 }, () => {
  /** What the eviction webhook keeps of a budget parseZpdb refuses. */
  function broken(
    spec: Record<string, unknown>,
    name = 'broken',
    selector: unknown = { matchLabels: GROUP },
  ): InvalidZpdb {
    const obj = {
      apiVersion: 'rollout-operator.grafana.com/v1',
      kind: 'ZoneAwarePodDisruptionBudget',
      metadata: { name, namespace: NS },
      spec: { selector, ...spec },
    };
    const r = parseZpdb(obj);
    assert.ok('error' in r, JSON.stringify(r));
    return invalidZpdb(obj, r.error);
  }
  const admit = (
    w: World,
    name: string,
    configs: ZpdbConfig[],
    invalid: InvalidZpdb[],
    extra: { dryRun?: boolean } = {},
  ) => {
    const d = admitEviction({
      pod: w.get(name),
      statefulSets: w.statefulSets,
      pods: w.pods,
      pendingEvictions: w.pending,
      now: NOW,
      configs,
      invalid,
      ...extra,
    });
    if (d.allowed && d.record) w.record(d.record, NOW);
    return d;
  };
  const SELECTED =
    'ZoneAwarePodDisruptionBudget ns/broken is invalid, evictions of the pods it selects are denied until it is fixed: ';

  it('denies 403 every eviction of the pods it selects, naming the budget and the problem (was: ignored, three evictions across two zones allowed)', () => {
    const w = new World(['a', 'b']);
    const invalid = [broken({ maxUnavailable: -1 })];
    for (const name of ['ingester-zone-a-0', 'ingester-zone-a-1', 'ingester-zone-b-0']) {
      const d = admit(w, name, [], invalid);
      assert.deepEqual(
        d,
        {
          allowed: false,
          code: 403,
          reason: 'invalid-zpdb',
          message: `${SELECTED}invalid value: max unavailable must be 0 <= val, got -1`,
        },
        name,
      );
    }
    assert.equal(w.pending.size, 0, 'nothing recorded');
    assert.deepEqual(
      admit(w, 'ingester-zone-a-0', [], invalid, { dryRun: true }),
      admit(w, 'ingester-zone-a-0', [], invalid),
      'a dry run answers as the eviction would',
    );
    // Fixed: the budget applies again.
    assertAllowed(admit(w, 'ingester-zone-a-0', [maxUnavailable(1)], []));
    assertDenied(admit(w, 'ingester-zone-b-0', [maxUnavailable(1)], []), 429, '1 pod not ready in ingester-zone-a');
  });

  it('wins over a valid budget that also selects the pod, and leaves pods it does not select alone', () => {
    const w = new World(['a', 'b']);
    const invalid = [broken({ podNamePartitionRegex: 'ingester-zone-[a-z]-[0-9]+' })];
    const d = admit(w, 'ingester-zone-a-0', [maxUnavailable(1)], invalid);
    assertDenied(
      d,
      403,
      `${SELECTED}invalid value: regex is not valid, got regular expression requires at least one subexpression`,
    );
    const elsewhere = [broken({ maxUnavailable: -1 }, 'broken', { matchLabels: { 'rollout-group': 'store-gateway' } })];
    assertAllowed(admit(w, 'ingester-zone-a-0', [maxUnavailable(1)], elsewhere), 'zpdb met across 2 zones');
    assert.deepEqual(admit(w, 'ingester-zone-b-0', [], elsewhere), { allowed: true, reason: 'pod-not-in-scope' });
  });

  it('still lets finished, pending and terminating pods go (evicting them takes nothing down)', () => {
    for (const state of ['failed', 'pending', 'succeeded', 'terminating'] as const) {
      const w = new World().set('ingester-zone-a-0', state);
      assert.deepEqual(
        admit(w, 'ingester-zone-a-0', [], [broken({ maxUnavailable: -1 })]),
        { allowed: true, reason: 'pod-not-ready', warning: 'pod is not ready' },
        state,
      );
    }
  });

  it('with a selector that cannot be read: denies evictions of every StatefulSet pod of its namespace, and only those', () => {
    const w = new World(['a', 'b']);
    const unreadable = broken({}, 'broken', { matchLabels: { 'rollout-group': 7 } });
    assert.equal(unreadable.matchLabels, undefined);
    const d = admit(w, 'ingester-zone-a-0', [], [unreadable]);
    assertDenied(
      d,
      403,
      'ZoneAwarePodDisruptionBudget ns/broken is invalid, its selector cannot be read, so evictions of StatefulSet pods in namespace ns are denied until it is fixed: ' +
        'invalid value: selector is not valid, got .spec.selector.matchLabels accessor error: contains non-string value in the map under key "rollout-group": 7 is of the type int64, expected string',
    );
    const other = {
      ...w.get('ingester-zone-a-0'),
      metadata: { ...w.get('ingester-zone-a-0').metadata, labels: { app: 'other' } },
    };
    assert.equal(evictionScope(other, [], [unreadable]).kind, 'decided', 'any label');
    const fromReplicaSet: Pod = {
      ...other,
      metadata: {
        ...other.metadata,
        name: 'web-1',
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web', uid: 'web-uid', controller: true }],
      },
    };
    assert.deepEqual(
      evictionScope(fromReplicaSet, [], [unreadable]),
      { kind: 'decided', decision: { allowed: true, reason: 'pod-not-in-scope' } },
      'not a StatefulSet pod',
    );
    const inOtherNamespace: Pod = { ...other, metadata: { ...other.metadata, namespace: 'elsewhere' } };
    assert.deepEqual(
      evictionScope(inOtherNamespace, [], [unreadable]),
      { kind: 'decided', decision: { allowed: true, reason: 'pod-not-in-scope' } },
      'another namespace',
    );
    // No spec at all: nothing to read a selector from either.
    const noSpec = invalidZpdb(
      { kind: 'ZoneAwarePodDisruptionBudget', metadata: { name: 'empty', namespace: NS } },
      'no spec found in unstructured object',
    );
    assertDenied(
      admit(w, 'ingester-zone-b-0', [], [noSpec]),
      403,
      'ZoneAwarePodDisruptionBudget ns/empty is invalid, its selector cannot be read, so evictions of StatefulSet pods in namespace ns are denied until it is fixed: no spec found in unstructured object',
    );
  });

  it('names the first of several invalid budgets and counts the others', () => {
    const w = new World(['a', 'b']);
    const d = admit(
      w,
      'ingester-zone-a-0',
      [],
      [
        broken({ maxUnavailable: -1 }, 'zz'),
        broken({ maxUnavailable: -2 }, 'aa'),
        broken({ maxUnavailablePercentage: 200 }, 'mm'),
      ],
    );
    assertDenied(
      d,
      403,
      'ZoneAwarePodDisruptionBudget ns/aa is invalid, evictions of the pods it selects are denied until it is fixed: invalid value: max unavailable must be 0 <= val, got -2 (and 2 more invalid budgets: mm, zz)',
    );
  });
});

describe('zone mode', { timeout: 10000 }, () => {
  it('classic 3 zones × 3 pods (TestPodEviction_MultiZoneClassic)', () => {
    const w = new World();
    const d = w.evict('ingester-zone-a-0', maxUnavailable(1));
    assertAllowed(d, 'zpdb met across 3 zones');
    assert.deepEqual(d.allowed && d.record, {
      uid: 'ingester-zone-a-0-uid',
      name: 'ingester-zone-a-0',
      allowedAt: NOW,
    });
    assert.ok(w.pending.has('ingester-zone-a-0-uid'), 'recorded in the eviction cache');

    const failedInZone = () => new World().set('ingester-zone-a-2', 'failed');
    assertDenied(
      failedInZone().evict('ingester-zone-a-0', maxUnavailable(1)),
      429,
      '1 pod not ready in ingester-zone-a',
    );
    assertAllowed(failedInZone().evict('ingester-zone-a-0', maxUnavailable(2)));

    const failedElsewhere = () => failedInZone().set('ingester-zone-c-2', 'failed');
    assertDenied(
      failedElsewhere().evict('ingester-zone-a-0', maxUnavailable(1)),
      429,
      '1 pod not ready in ingester-zone-c',
    );
    assertDenied(
      failedElsewhere().evict('ingester-zone-a-0', maxUnavailable(2)),
      429,
      '1 pod not ready in ingester-zone-c',
    );

    const missing = new World();
    missing.sts('ingester-zone-b').status!.replicas = 4;
    assertDenied(missing.evict('ingester-zone-a-0', maxUnavailable(1)), 429, '1 pod unknown in ingester-zone-b');
  });

  it('the rollout controller path records, then the next delete in the zone is denied (TestPodEviction_Allowed_ViaMarkPodAsDeleted)', () => {
    const w = new World();
    const ask = (name: string) => {
      const d = decideRolloutDelete({
        pod: w.get(name),
        configs: [maxUnavailable(1)],
        statefulSets: w.statefulSets,
        pods: w.pods,
        pendingEvictions: w.pending,
        now: NOW,
        rolloutMaxUnavailable: 1,
      });
      if (d.allowed && d.record) w.record(d.record, NOW);
      return d;
    };
    assertAllowed(ask('ingester-zone-a-0'));
    assert.ok(w.pending.has('ingester-zone-a-0-uid'));
    assertDenied(ask('ingester-zone-a-2'), 429, '1 pod not ready in ingester-zone-a');
  });

  it('the override applies only when maxUnavailable is 0 (TestPodEviction_MultiZoneClassicOverrideHasNoEffectWhenNotZero, _MaxUnavailableEq0_Override)', () => {
    const w = new World();
    assertAllowed(w.evict('ingester-zone-a-0', maxUnavailable(1), { override: 0 }));
    assertDenied(
      w.evict('ingester-zone-b-0', maxUnavailable(1), { override: 2 }),
      429,
      '1 pod not ready in ingester-zone-a',
    );

    const zero = new World();
    const d = zero.evict('ingester-zone-a-0', maxUnavailable(0), { override: 1 });
    assertAllowed(d);
    assert.ok(zero.pending.has('ingester-zone-a-0-uid'));
    assertDenied(
      new World().evict('ingester-zone-a-0', maxUnavailable(0), { override: 0 }),
      403,
      'max unavailable = 0',
    );
    assertDenied(
      new World().evict('ingester-zone-a-0', maxUnavailable(0), { override: -3 }),
      403,
      'max unavailable = 0',
    );
  });

  it('e2e MaxUnavailableEq1: a-0 goes, then a-1 and b-0 wait, until a-0 is back', () => {
    const w = new World(['a', 'b'], 2);
    assertAllowed(w.evict('ingester-zone-a-0', maxUnavailable(1)));
    w.set('ingester-zone-a-0', 'pending');
    assertDenied(w.evict('ingester-zone-a-1', maxUnavailable(1)), 429, '1 pod not ready in ingester-zone-a');
    assertDenied(w.evict('ingester-zone-b-0', maxUnavailable(1)), 429, '1 pod not ready in ingester-zone-a');
    w.set('ingester-zone-a-0', 'ready');
    w.pending = new Map();
    assertAllowed(w.evict('ingester-zone-b-0', maxUnavailable(1)));
  });

  it('e2e MaxUnavailableEq2: a-0 goes, b-0 waits (other zone), a-1 goes (same zone, within budget)', () => {
    const w = new World(['a', 'b'], 2);
    assertAllowed(w.evict('ingester-zone-a-0', maxUnavailable(2)));
    assertDenied(w.evict('ingester-zone-b-0', maxUnavailable(2)), 429, '1 pod not ready in ingester-zone-a');
    assertAllowed(w.evict('ingester-zone-a-1', maxUnavailable(2)));
    assertDenied(w.evict('ingester-zone-b-1', maxUnavailable(2)), 429, '2 pods not ready in ingester-zone-a');
  });

  it("a percentage budget uses the evicted pod's StatefulSet", () => {
    const w = new World(['a', 'b'], 4);
    const half = zpdb({ maxUnavailablePercentage: 50 });
    assertAllowed(w.evict('ingester-zone-a-0', half));
    assertAllowed(w.evict('ingester-zone-a-1', half));
    assertDenied(w.evict('ingester-zone-a-2', half), 429, '2 pods not ready in ingester-zone-a');
  });

  it('messages name both not-ready and unknown pods', () => {
    const w = new World().set('ingester-zone-a-1', 'unready');
    w.sts('ingester-zone-a').spec!.replicas = 5;
    assertDenied(
      w.evict('ingester-zone-a-0', maxUnavailable(3)),
      429,
      '1 pod not ready, 2 pods unknown in ingester-zone-a',
    );
  });

  it('an eviction cache entry expires after two minutes', () => {
    const w = new World();
    assertAllowed(w.evict('ingester-zone-a-0', maxUnavailable(1)));
    assertDenied(
      w.evict('ingester-zone-b-0', maxUnavailable(1), { now: NOW + EVICTION_CACHE_TTL_MS - 1, record: false }),
      429,
      '1 pod not ready in ingester-zone-a',
    );
    assertAllowed(w.evict('ingester-zone-b-0', maxUnavailable(1), { now: NOW + EVICTION_CACHE_TTL_MS }));
    assert.deepEqual([...w.pending.keys()], ['ingester-zone-b-0-uid'], 'expired entries are dropped when recording');
  });

  it('a dry run is judged but not recorded (rollout-operator records it)', () => {
    const w = new World();
    const d = w.evict('ingester-zone-a-0', maxUnavailable(1), { dryRun: true });
    assertAllowed(d);
    assert.equal(d.allowed && d.record, undefined);
    assert.equal(w.pending.size, 0);
    assertAllowed(w.evict('ingester-zone-b-0', maxUnavailable(1)));
  });

  it('a recreated pod (new UID, same name) is judged on its own state', () => {
    const w = new World();
    assertAllowed(w.evict('ingester-zone-a-0', maxUnavailable(1)));
    w.pods = w.pods.map((p) =>
      p.metadata?.name === 'ingester-zone-a-0' ? { ...p, metadata: { ...p.metadata, uid: 'new-uid' } } : p,
    );
    assertAllowed(w.evict('ingester-zone-b-0', maxUnavailable(1)));
  });

  it('the owner counts as a zone even when the selector misses it (rollout-operator crashes)', () => {
    const w = new World();
    w.statefulSets = w.statefulSets.map((s) =>
      s.metadata?.name === 'ingester-zone-a' ? { ...s, metadata: { ...s.metadata, labels: {} } } : s,
    );
    assertAllowed(w.evict('ingester-zone-a-0', maxUnavailable(1)), 'zpdb met across 3 zones');
    w.set('ingester-zone-a-1', 'unready');
    assertDenied(w.evict('ingester-zone-a-0', maxUnavailable(1)), 429, '1 pod not ready in ingester-zone-a');
  });

  it('StatefulSets and pods of other namespaces are ignored', () => {
    const w = new World();
    const elsewhere = {
      ...statefulSet('ingester-zone-z'),
      metadata: { ...statefulSet('ingester-zone-z').metadata, namespace: 'other' },
    };
    w.statefulSets.push(elsewhere);
    assertAllowed(w.evict('ingester-zone-a-0', maxUnavailable(1)), 'zpdb met across 3 zones');
  });
});

describe('partition mode', { timeout: 10000 }, () => {
  it('3 zones × 3 partitions (TestPodEviction_PartitionZones)', () => {
    const w = () => new World();
    assertAllowed(w().evict('ingester-zone-a-0', partitioned(1)), 'zpdb met for partition 0 across 3 zones');
    // Another partition unavailable, in the same zone, then in another zone too.
    assertAllowed(w().set('ingester-zone-a-1', 'failed').evict('ingester-zone-a-0', partitioned(1)));
    assertAllowed(
      w()
        .set('ingester-zone-a-1', 'failed')
        .set('ingester-zone-c-2', 'failed')
        .evict('ingester-zone-a-0', partitioned(1)),
    );
    assertDenied(
      w().set('ingester-zone-b-0', 'failed').evict('ingester-zone-a-0', partitioned(1)),
      429,
      '1 pod not ready in partition 0',
    );

    // A missing pod is charged to its own partition, known from its name
    // (<sts>-<ordinal>); rollout-operator charges it to every partition.
    const missing = w();
    missing.sts('ingester-zone-b').status!.replicas = 4;
    assertAllowed(missing.evict('ingester-zone-a-0', partitioned(1)), 'zpdb met for partition 0 across 3 zones');
    const gone = w().remove('ingester-zone-b-0');
    assertDenied(gone.evict('ingester-zone-a-0', partitioned(1)), 429, '1 pod unknown in partition 0');
    assertDenied(
      gone.evict(
        'ingester-zone-a-0',
        zpdb({ maxUnavailable: 1, podNamePartitionRegex: 'ingester(-foo)?-zone-[a-z]-([0-9]+)', podNameRegexGroup: 2 }),
      ),
      429,
      '1 pod unknown in partition 0',
    );
    assertAllowed(gone.evict('ingester-zone-a-1', partitioned(1)), 'zpdb met for partition 1 across 3 zones');
  });

  it('maxUnavailable 2 tolerates one unavailable peer (TestPodEviction_PartitionZonesMaxUnavailable2)', () => {
    const w = new World().set('ingester-zone-b-0', 'failed');
    assertDenied(w.evict('ingester-zone-a-0', partitioned(1)), 429, '1 pod not ready in partition 0');
    assertAllowed(w.evict('ingester-zone-a-0', partitioned(2), { record: false }));
    w.set('ingester-zone-c-0', 'failed');
    assertDenied(w.evict('ingester-zone-a-0', partitioned(2)), 429, '2 pods not ready in partition 0');
  });

  it('a partition already gone from another zone denies (TestPodEviction_PartitionAwareDownscale)', () => {
    // 3 → 2 replicas: zone a is done, zone b still runs its pod 2.
    const w = new World(['a', 'b']).remove('ingester-zone-a-2');
    w.sts('ingester-zone-a').spec!.replicas = 2;
    w.sts('ingester-zone-a').status!.replicas = 2;
    w.sts('ingester-zone-b').spec!.replicas = 2;
    assertDenied(w.evict('ingester-zone-b-2', partitioned(1)), 429, '1 pod unknown in partition 2');
  });

  it('downscaled zone plus an unready peer (TestPodEviction_PartitionAwareDownscaleMaxUnavailable2)', () => {
    const w = new World().remove('ingester-zone-a-1').remove('ingester-zone-a-2').set('ingester-zone-b-2', 'failed');
    w.sts('ingester-zone-a').spec!.replicas = 1;
    w.sts('ingester-zone-a').status!.replicas = 1;
    assertDenied(w.evict('ingester-zone-c-2', partitioned(2)), 429, '1 pod not ready, 1 pod unknown in partition 2');
  });

  it('e2e partition mode: a-0 goes; b-0 waits; b-1 goes; a-1 waits; b-0 goes once a-0 is back', () => {
    const w = new World(['a', 'b'], 2);
    assertAllowed(w.evict('ingester-zone-a-0', partitioned(1)));
    assertDenied(w.evict('ingester-zone-b-0', partitioned(1)), 429, '1 pod not ready in partition 0');
    assertAllowed(w.evict('ingester-zone-b-1', partitioned(1)));
    assertDenied(w.evict('ingester-zone-a-1', partitioned(1)), 429, '1 pod not ready in partition 1');
    w.pending = new Map([...w.pending].filter(([uid]) => uid !== 'ingester-zone-a-0-uid'));
    assertAllowed(w.evict('ingester-zone-b-0', partitioned(1)));
  });

  it("other pods of the partition in the evicted pod's own zone count too (rollout-operator skips that zone)", () => {
    const onePartition = zpdb({ maxUnavailable: 1, podNamePartitionRegex: '(ingester)-zone-[a-z]-[0-9]+' });
    assertAllowed(new World().evict('ingester-zone-a-0', onePartition));
    assertDenied(
      new World().set('ingester-zone-a-1', 'unready').evict('ingester-zone-a-0', onePartition),
      429,
      '1 pod not ready in partition ingester',
    );
  });
});

describe('crossZoneEvictionDelay (TestIsReady_*)', { timeout: 10000 }, () => {
  // Evict a-0; its partition peer is b-0.
  const two = () => new World(['a', 'b'], 1);
  const delayed = (delay: string) => partitioned(1, { crossZoneEvictionDelay: delay });
  const peerNotReady = '1 pod not ready in partition 0';

  it('a peer with a pending eviction is not ready', () => {
    const w = two();
    w.pending = new Map([['ingester-zone-b-0-uid', NOW]]);
    assertDenied(w.evict('ingester-zone-a-0', partitioned(1)), 429, peerNotReady);
  });

  it('a peer that is not running and ready is not ready', () => {
    assertDenied(
      two().set('ingester-zone-b-0', 'unready').evict('ingester-zone-a-0', delayed('0s')),
      429,
      peerNotReady,
    );
  });

  it('without a delay a ready peer is ready, annotation or not', () => {
    assertAllowed(
      two().set('ingester-zone-b-0', 'ready', { readyAgo: null }).evict('ingester-zone-a-0', partitioned(1)),
    );
  });

  it('a pending eviction beats an old annotation', () => {
    const w = two();
    w.pending = new Map([['ingester-zone-b-0-uid', NOW]]);
    assertDenied(w.evict('ingester-zone-a-0', delayed('1m')), 429, peerNotReady);
  });

  it('no annotation: not ready while a delay is configured', () => {
    assertDenied(
      two().set('ingester-zone-b-0', 'ready', { readyAgo: null }).evict('ingester-zone-a-0', delayed('1m')),
      429,
      peerNotReady,
    );
  });

  it('no annotation but a Ready condition: ready since its transition (Stateward writes no annotation)', () => {
    assertAllowed(
      two()
        .set('ingester-zone-b-0', 'ready', { readyAgo: null, readyConditionAt: NOW - 2 * 60 * SEC })
        .evict('ingester-zone-a-0', delayed('1m')),
    );
    assertDenied(
      two()
        .set('ingester-zone-b-0', 'ready', { readyAgo: null, readyConditionAt: NOW - 30 * SEC })
        .evict('ingester-zone-a-0', delayed('1m')),
      429,
      peerNotReady,
    );
  });

  it('an annotation older than the delay: ready', () => {
    assertAllowed(
      two().set('ingester-zone-b-0', 'ready', { readyAgo: 3600 }).evict('ingester-zone-a-0', delayed('1m')),
    );
  });

  it('an annotation inside the delay window: not ready', () => {
    assertDenied(
      two().set('ingester-zone-b-0', 'ready', { readyAgo: 0 }).evict('ingester-zone-a-0', delayed('1m')),
      429,
      peerNotReady,
    );
  });

  it('a malformed annotation counts as now: not ready', () => {
    assertDenied(
      two()
        .set('ingester-zone-b-0', 'ready', { annotation: 'not-a-timestamp' })
        .evict('ingester-zone-a-0', delayed('1m')),
      429,
      peerNotReady,
    );
  });

  it('becomes ready once the clock is strictly past annotation + delay', () => {
    const w = two().set('ingester-zone-b-0', 'ready', { readyAgo: 0 });
    assertDenied(w.evict('ingester-zone-a-0', delayed('1s'), { record: false }), 429, peerNotReady);
    assertDenied(w.evict('ingester-zone-a-0', delayed('1s'), { now: NOW + SEC, record: false }), 429, peerNotReady);
    assertAllowed(w.evict('ingester-zone-a-0', delayed('1s'), { now: NOW + SEC + 1 }));
  });

  it('a later Ready transition than the annotation restarts the wait (stale annotation)', () => {
    const w = two().set('ingester-zone-b-0', 'ready', { readyAgo: 3600, readyConditionAt: NOW - 10 * SEC });
    assertDenied(w.evict('ingester-zone-a-0', delayed('1m')), 429, peerNotReady);
    assertAllowed(w.evict('ingester-zone-a-0', delayed('1m'), { now: NOW + MIN }));
    // A transition older than the annotation changes nothing.
    assertAllowed(
      two()
        .set('ingester-zone-b-0', 'ready', { readyAgo: 3600, readyConditionAt: NOW - HOUR * 2 })
        .evict('ingester-zone-a-0', delayed('1m')),
    );
  });

  it('another partition is unaffected by a recovering peer', () => {
    const w = new World(['a', 'b'], 2).set('ingester-zone-b-0', 'ready', { readyAgo: 0 });
    assertAllowed(w.evict('ingester-zone-a-1', delayed('15s')));
  });
});

describe('rollout controller check', { timeout: 10000 }, () => {
  const ask = (w: World, name: string, configs: ZpdbConfig[], rolloutMaxUnavailable: number) => {
    const d = decideRolloutDelete({
      pod: w.get(name),
      configs,
      statefulSets: w.statefulSets,
      pods: w.pods,
      pendingEvictions: w.pending,
      now: NOW,
      rolloutMaxUnavailable,
    });
    if (d.allowed && d.record) w.record(d.record, NOW);
    return d;
  };

  it('the override is the rollout max unavailable, or 1 under a partition-aware ZPDB', () => {
    assert.equal(maxUnavailableZeroOverride(maxUnavailable(0), 3), 3);
    assert.equal(maxUnavailableZeroOverride(partitioned(0), 3), 1);
  });

  it('zone mode with maxUnavailable 0: rolls within rollout-max-unavailable, one zone at a time', () => {
    const w = new World();
    assertAllowed(ask(w, 'ingester-zone-a-0', [maxUnavailable(0)], 2));
    assertAllowed(ask(w, 'ingester-zone-a-1', [maxUnavailable(0)], 2));
    assertDenied(ask(w, 'ingester-zone-a-2', [maxUnavailable(0)], 2), 429, '2 pods not ready in ingester-zone-a');
    assertDenied(ask(w, 'ingester-zone-b-0', [maxUnavailable(0)], 2), 429, '2 pods not ready in ingester-zone-a');
  });

  it('partition mode with maxUnavailable 0: one pod per partition', () => {
    const w = new World();
    assertAllowed(ask(w, 'ingester-zone-a-0', [partitioned(0)], 5));
    assertDenied(ask(w, 'ingester-zone-b-0', [partitioned(0)], 5), 429, '1 pod not ready in partition 0');
    assertAllowed(ask(w, 'ingester-zone-b-1', [partitioned(0)], 5));
  });

  it('unhealthyPodEvictionPolicy applies to rolling deletes too', () => {
    const w = new World().set('ingester-zone-a-0', 'unready').set('ingester-zone-b-0', 'unready');
    assertDenied(ask(w, 'ingester-zone-a-1', [alwaysAllow(1)], 1), 429, '1 pod not ready in ingester-zone-b');
    assertDenied(ask(w, 'ingester-zone-a-0', [maxUnavailable(1)], 1), 429, '1 pod not ready in ingester-zone-b');
    assertUnhealthyAllowed(ask(w, 'ingester-zone-a-0', [alwaysAllow(1)], 1), '1 pod not ready in ingester-zone-b');
  });

  it('a pod out of scope may be deleted; a non-zero ZPDB budget is not overridden', () => {
    const w = new World();
    assert.deepEqual(ask(w, 'ingester-zone-a-0', [], 1), { allowed: true, reason: 'pod-not-in-scope' });
    assertAllowed(ask(w, 'ingester-zone-a-0', [maxUnavailable(1)], 3));
    assertDenied(ask(w, 'ingester-zone-a-1', [maxUnavailable(1)], 3), 429, '1 pod not ready in ingester-zone-a');
  });
});

describe('unhealthyPodEvictionPolicy (Stateward only)', { timeout: 10000 }, () => {
  it('a crash-looping pod goes while another zone is also down; the default refuses it; a Ready pod is refused either way', () => {
    const w = new World().set('ingester-zone-a-0', 'unready').set('ingester-zone-b-0', 'unready');
    assertDenied(w.evict('ingester-zone-a-0', maxUnavailable(1)), 429, '1 pod not ready in ingester-zone-b');
    assertDenied(
      w.evict('ingester-zone-a-0', zpdb({ maxUnavailable: 1, unhealthyPodEvictionPolicy: 'IfHealthyBudget' })),
      429,
      '1 pod not ready in ingester-zone-b',
    );
    const d = w.evict('ingester-zone-a-0', alwaysAllow(1));
    assertUnhealthyAllowed(d, '1 pod not ready in ingester-zone-b');
    assert.ok(w.pending.has('ingester-zone-a-0-uid'), 'recorded in the ledger like any allow');
    // Its record changes no count: the Ready pods are judged as before.
    assertDenied(w.evict('ingester-zone-a-1', alwaysAllow(1)), 429, '1 pod not ready in ingester-zone-b');
    assertDenied(w.evict('ingester-zone-c-0', alwaysAllow(1)), 429, '1 pod not ready in ingester-zone-a');
    assertUnhealthyAllowed(w.evict('ingester-zone-b-0', alwaysAllow(1)), '1 pod not ready in ingester-zone-a');
  });

  it("the pod's own zone already at its budget: the second not-Ready pod goes too", () => {
    const w = new World().set('ingester-zone-a-0', 'unready').set('ingester-zone-a-1', 'unready');
    assertDenied(w.evict('ingester-zone-a-0', maxUnavailable(1)), 429, '1 pod not ready in ingester-zone-a');
    assertUnhealthyAllowed(w.evict('ingester-zone-a-0', alwaysAllow(1)), '1 pod not ready in ingester-zone-a');
  });

  it('when the budget allows anyway, its own answer stands (reason "allowed")', () => {
    const w = new World().set('ingester-zone-a-0', 'unready');
    assert.deepEqual(
      w.evict('ingester-zone-a-0', alwaysAllow(1), { record: false }),
      w.evict('ingester-zone-a-0', maxUnavailable(1), { record: false }),
    );
    assertAllowed(w.evict('ingester-zone-a-0', alwaysAllow(1)), 'zpdb met across 3 zones');
  });

  it('every way of not being Ready counts: starting, crash-looping, Ready=False with ready containers', () => {
    const w = new World().set('ingester-zone-b-0', 'unready');
    const starting = w.get('ingester-zone-a-0');
    const variants: Pod[] = [
      { ...starting, status: { ...starting.status, containerStatuses: [unreadyContainer] } },
      {
        ...starting,
        status: {
          ...starting.status,
          containerStatuses: [
            { ...unreadyContainer, state: { waiting: { reason: 'CrashLoopBackOff' } }, restartCount: 5 },
          ],
        },
      },
      { ...starting, status: { ...starting.status, conditions: [{ type: 'Ready', status: 'False' }] } },
    ];
    for (const variant of variants) {
      w.pods = w.pods.map((p) => (p.metadata?.name === 'ingester-zone-a-0' ? variant : p));
      assertUnhealthyAllowed(
        w.evict('ingester-zone-a-0', alwaysAllow(1), { record: false }),
        '1 pod not ready in ingester-zone-b',
      );
    }
  });

  it('maxUnavailable 0: a not-Ready pod may go (as Kubernetes with AlwaysAllow), a Ready one is refused (403)', () => {
    const w = new World().set('ingester-zone-a-0', 'unready');
    assertDenied(w.evict('ingester-zone-a-0', maxUnavailable(0)), 403, 'max unavailable = 0');
    assertUnhealthyAllowed(w.evict('ingester-zone-a-0', alwaysAllow(0)), 'max unavailable = 0');
    assertDenied(w.evict('ingester-zone-a-1', alwaysAllow(0)), 403, 'max unavailable = 0');
  });

  it('partition mode: a not-Ready pod goes while its partition is down in another zone', () => {
    const w = new World().set('ingester-zone-a-0', 'unready').set('ingester-zone-b-0', 'unready');
    assertDenied(w.evict('ingester-zone-a-0', partitioned(1)), 429, '1 pod not ready in partition 0');
    assertUnhealthyAllowed(
      w.evict('ingester-zone-a-0', partitioned(1, { unhealthyPodEvictionPolicy: 'AlwaysAllow' })),
      '1 pod not ready in partition 0',
    );
  });

  it('a broken setup is not waived: one zone (400), an unknown partition (400), a missing owner (500)', () => {
    const one = new World(['a']).set('ingester-zone-a-0', 'unready');
    assertDenied(one.evict('ingester-zone-a-0', alwaysAllow(0)), 400, 'minimum number of StatefulSets not found');
    const w = new World().set('ingester-zone-a-0', 'unready');
    const d = w.evict(
      'ingester-zone-a-0',
      zpdb({ podNamePartitionRegex: 'nomatch-([0-9]+)', unhealthyPodEvictionPolicy: 'AlwaysAllow' }),
    );
    assert.equal(!d.allowed && d.reason, 'partition-not-identified');
    w.statefulSets = w.statefulSets.filter((s) => s.metadata?.name !== 'ingester-zone-a');
    assert.equal(!w.evict('ingester-zone-a-0', alwaysAllow(1)).allowed, true);
  });

  it('a dry run is allowed the same way and records nothing', () => {
    const w = new World().set('ingester-zone-a-0', 'unready').set('ingester-zone-b-0', 'unready');
    const d = w.evict('ingester-zone-a-0', alwaysAllow(1), { dryRun: true });
    assert.equal(d.allowed && d.reason, 'unhealthy-pod-always-allow');
    assert.equal(d.allowed && d.record, undefined);
  });
});

// ------------------------------------------------------------- properties

const DISRUPTED = ['unready', 'failed', 'pending', 'terminating', 'missing'] as const;
type Slot = 'ready' | (typeof DISRUPTED)[number];
const ZONES = ['a', 'b', 'c', 'd'];
const SLOTS = 5;

// Mostly healthy pods, so that allowed evictions are common enough to check.
const rarely = <T>(usual: T, unusual: fc.Arbitrary<T>) =>
  fc.oneof({ arbitrary: fc.constant(usual), weight: 12 }, { arbitrary: unusual, weight: 1 });
const perSlot = <T>(arb: fc.Arbitrary<T>) => fc.array(arb, { minLength: 4 * SLOTS, maxLength: 4 * SLOTS });

const scenario = fc
  .record({
    partitionMode: fc.boolean(),
    zones: fc.integer({ min: 2, max: 4 }),
    specReplicas: fc.array(fc.integer({ min: 1, max: SLOTS }), { minLength: 4, maxLength: 4 }),
    statusDelta: fc.array(rarely(0, fc.constantFrom(-1, 1)), { minLength: 4, maxLength: 4 }),
    slots: perSlot(rarely<Slot>('ready', fc.constantFrom(...DISRUPTED))),
    pending: perSlot(rarely(false, fc.constant(true))),
    readyAgo: perSlot(fc.oneof(fc.constant(3600), fc.integer({ min: 0, max: 600 }), fc.constant(null))),
    budget: fc.oneof(
      fc.record({ count: fc.integer({ min: 0, max: 3 }) }),
      fc.record({ percentage: fc.integer({ min: 0, max: 100 }) }),
    ),
    delaySeconds: fc.constantFrom(0, 0, 30, 120),
    target: fc.record({ zone: fc.integer({ min: 0, max: 3 }), ordinal: fc.integer({ min: 0, max: SLOTS - 1 }) }),
    shuffleKeys: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), {
      minLength: 4 * SLOTS + 4,
      maxLength: 4 * SLOTS + 4,
    }),
  })
  // The target in one of the zones there are, within its StatefulSet's replicas.
  .map((s) => {
    const zone = s.target.zone % s.zones;
    return { ...s, target: { zone, ordinal: s.target.ordinal % s.specReplicas[zone]! } };
  });
type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

interface Built {
  statefulSets: StatefulSet[];
  pods: Pod[];
  pending: Map<string, number>;
  config: ZpdbConfig;
  target: Pod;
  /** Our own reading of each pod slot, to check the decision against. */
  slot: (zone: number, ordinal: number) => { state: Slot; available: boolean };
  expected: (zone: number) => number;
}

function build(s: Scenario, extra: Record<string, unknown> = {}): Built | undefined {
  const budget =
    'count' in s.budget ? { maxUnavailable: s.budget.count } : { maxUnavailablePercentage: s.budget.percentage };
  const spec = s.partitionMode
    ? {
        maxUnavailable: 'count' in s.budget ? s.budget.count : 1,
        podNamePartitionRegex: PARTITION_REGEX,
        ...(s.delaySeconds ? { crossZoneEvictionDelay: `${s.delaySeconds}s` } : {}),
      }
    : budget;
  const config = zpdb({ ...spec, ...extra });
  const statefulSets: StatefulSet[] = [];
  const pods: Pod[] = [];
  const pending = new Map<string, number>();
  const delayMs = s.partitionMode ? s.delaySeconds * SEC : 0;
  const index = (z: number, i: number) => z * SLOTS + i;
  const slot = (z: number, i: number) => {
    const state: Slot = i < SLOTS ? s.slots[index(z, i)]! : 'missing';
    const ago = s.readyAgo[index(z, i)];
    const isPending = s.pending[index(z, i)]!;
    const available =
      state === 'ready' && !isPending && (delayMs === 0 || (ago !== null && ago !== undefined && ago * SEC > delayMs));
    return { state, available };
  };
  for (let z = 0; z < s.zones; z++) {
    const name = `ingester-zone-${ZONES[z]!}`;
    const replicas = s.specReplicas[z]!;
    statefulSets.push(statefulSet(name, replicas, Math.max(0, replicas + s.statusDelta[z]!)));
    for (let i = 0; i < replicas; i++) {
      const { state } = slot(z, i);
      if (state === 'missing') continue;
      const p = pod(`${name}-${i}`, name, state, { readyAgo: s.readyAgo[index(z, i)] ?? null });
      pods.push(p);
      if (s.pending[index(z, i)]) pending.set(p.metadata!.uid!, NOW - SEC);
    }
  }
  const target = pods.find((p) => p.metadata?.name === `ingester-zone-${ZONES[s.target.zone]!}-${s.target.ordinal}`);
  if (!target) return undefined;
  const expected = (z: number) => Math.max(s.specReplicas[z]!, Math.max(0, s.specReplicas[z]! + s.statusDelta[z]!));
  const present = (z: number, i: number) => i < s.specReplicas[z]! && slot(z, i).state !== 'missing';
  return {
    statefulSets,
    pods,
    pending,
    config,
    target,
    expected,
    slot: (z, i) => (present(z, i) ? slot(z, i) : { state: 'missing', available: false }),
  };
}

function effectiveMax(s: Scenario, b: Built): number {
  if ('count' in s.budget || s.partitionMode) return 'count' in s.budget ? s.budget.count : 1;
  const own = b.statefulSets[s.target.zone]!;
  const replicas = Math.min(own.spec!.replicas!, own.status!.replicas);
  if (s.budget.percentage === 0 || replicas === 0) return 0;
  return Math.max(1, Math.floor((s.budget.percentage * replicas) / 100));
}

function shuffled<T>(items: readonly T[], keys: readonly number[]): T[] {
  return items
    .map((item, i) => ({ item, key: keys[i % keys.length]! + i * 1e-9 }))
    .sort((a, b) => a.key - b.key)
    .map((x) => x.item);
}

describe('properties', { timeout: 10000 }, () => {
  it('an allowed eviction never leaves more than maxUnavailable unavailable pods in the zone (partition), and never while another zone is disrupted', () => {
    assertReaching(
      scenario,
      (s) => {
        const b = build(s);
        fc.pre(b !== undefined);
        const d = decideEviction({
          pod: b.target,
          config: b.config,
          statefulSets: b.statefulSets,
          pods: b.pods,
          pendingEvictions: b.pending,
          now: NOW,
        });
        const targetState = b.slot(s.target.zone, s.target.ordinal).state;
        if (targetState === 'failed' || targetState === 'pending' || targetState === 'terminating') {
          assert.equal(d.allowed && d.reason, 'pod-not-ready');
          return SKIP;
        }
        const max = effectiveMax(s, b);
        if (max === 0) {
          assert.equal(!d.allowed && d.code, 403);
          return SKIP;
        }
        if (!d.allowed) {
          assert.ok(d.code === 429, JSON.stringify(d));
          return SKIP; // counted as reaching only when the eviction is allowed, the claim's own case
        }
        const others = Array.from({ length: s.zones }, (_, z) => z).filter((z) => z !== s.target.zone);
        if (!s.partitionMode) {
          for (const z of others) {
            for (let i = 0; i < b.expected(z); i++)
              assert.ok(b.slot(z, i).available, `zone ${z} pod ${i} unavailable, yet ${JSON.stringify(d)}`);
          }
          let unavailable = 1; // the evicted pod
          for (let i = 0; i < b.expected(s.target.zone); i++)
            if (i !== s.target.ordinal && !b.slot(s.target.zone, i).available) unavailable++;
          assert.ok(unavailable <= max, `${unavailable} unavailable in own zone with budget ${max}`);
        } else {
          // One pod per partition per zone: the peer is the pod with the same ordinal.
          let unavailable = 1;
          for (const z of others) if (!b.slot(z, s.target.ordinal).available) unavailable++;
          assert.ok(
            unavailable <= max,
            `${unavailable} unavailable in partition ${s.target.ordinal} with budget ${max}`,
          );
          if (max === 1) for (const z of others) assert.ok(b.slot(z, s.target.ordinal).available);
        }
      },
      { numRuns: 2000, floor: 0.2 },
    );
  });

  it('the decision is deterministic: the order of StatefulSets, pods and cache entries does not matter', () => {
    assertReaching(
      scenario,
      (s) => {
        const b = build(s);
        fc.pre(b !== undefined);
        const input = {
          pod: b.target,
          config: b.config,
          statefulSets: b.statefulSets,
          pods: b.pods,
          pendingEvictions: b.pending,
          now: NOW,
        };
        const first = decideEviction(input);
        assert.deepEqual(decideEviction(input), first);
        const reordered = {
          ...input,
          statefulSets: shuffled(b.statefulSets, s.shuffleKeys),
          pods: shuffled(b.pods, s.shuffleKeys.slice(4)),
          pendingEvictions: new Map(shuffled([...b.pending], s.shuffleKeys)),
        };
        assert.deepEqual(decideEviction(reordered), first);
      },
      { numRuns: 500, floor: 0.8 },
    );
  });

  it('evictions racing ahead of pod state changes never exceed the budget (only the eviction cache moves)', () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 3 }),
        fc.array(fc.record({ zone: fc.integer({ min: 0, max: 3 }), ordinal: fc.integer({ min: 0, max: 3 }) }), {
          minLength: 1,
          maxLength: 30,
        }),
        (partitionMode, zones, replicas, max, requests) => {
          const w = new World(ZONES.slice(0, zones), replicas);
          const config = partitionMode ? partitioned(max) : maxUnavailable(max);
          for (const r of requests) {
            if (r.zone >= zones || r.ordinal >= replicas) continue;
            w.evict(`ingester-zone-${ZONES[r.zone]!}-${r.ordinal}`, config);
            const evicted = [...w.pending.keys()].map((uid) => uid.replace(/-uid$/, ''));
            if (partitionMode) {
              const perPartition = Map.groupBy(evicted, (name) => name.replace(/^.*-/, ''));
              for (const [p, names] of perPartition)
                assert.ok(names.length <= max, `partition ${p}: ${names.join(', ')}`);
            } else {
              const perZone = Map.groupBy(evicted, (name) => name.replace(/-\d+$/, ''));
              assert.ok(perZone.size <= 1, `zones disrupted at once: ${[...perZone.keys()].join(', ')}`);
              for (const [zone, names] of perZone) assert.ok(names.length <= max, `${zone}: ${names.join(', ')}`);
            }
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('unhealthyPodEvictionPolicy properties', { timeout: 20000 }, () => {
  const decide = (b: Built, pod: Pod, config: ZpdbConfig, pending: PendingEvictions = b.pending) =>
    decideEviction({ pod, config, statefulSets: b.statefulSets, pods: b.pods, pendingEvictions: pending, now: NOW });
  /** The scenario with the target pod forced into `state`. */
  const withTarget = (s: Scenario, state: Slot): Scenario => ({
    ...s,
    slots: s.slots.map((x, i) => (i === s.target.zone * SLOTS + s.target.ordinal ? state : x)),
  });

  it('AlwaysAllow: evicting a not-Ready pod is always allowed, and recording it changes no other decision (no availability spent)', () => {
    assertReaching(
      scenario,
      (raw) => {
        const s = withTarget(raw, 'unready');
        const b = build(s, { unhealthyPodEvictionPolicy: 'AlwaysAllow' });
        fc.pre(b !== undefined);
        const d = decide(b, b.target, b.config);
        assert.ok(d.allowed, JSON.stringify(d));
        assert.ok(d.reason === 'allowed' || d.reason === 'unhealthy-pod-always-allow', d.reason);
        const judge = { pending: b.pending, now: NOW, delayMs: s.partitionMode ? s.delaySeconds * SEC : 0 };
        assert.equal(podAvailable(b.target, judge), false, 'unavailable before');
        const after = new Map(b.pending).set(d.record!.uid, d.record!.allowedAt);
        assert.equal(podAvailable(b.target, { ...judge, pending: after }), false, 'and after');
        if (d.reason !== 'unhealthy-pod-always-allow') return;
        // The budget did not allow it: it is let go without spending the budget,
        // so every other pod is judged exactly as before, under either policy.
        const plain = build(s)!.config;
        for (const other of b.pods) {
          if (other === b.target) continue;
          assert.deepEqual(decide(b, other, b.config, after), decide(b, other, b.config), other.metadata?.name);
          assert.deepEqual(decide(b, other, plain, after), decide(b, other, plain), other.metadata?.name);
        }
      },
      { numRuns: 1000, floor: 0.8 },
    );
  });

  it("AlwaysAllow changes no answer but a not-Ready pod's denial by the budget (403 or 429): a Ready pod gets the default decision", () => {
    assertReaching(
      scenario,
      (s) => {
        const b = build(s, { unhealthyPodEvictionPolicy: 'AlwaysAllow' });
        fc.pre(b !== undefined);
        const d = decide(b, b.target, b.config);
        const before = decide(b, b.target, build(s)!.config);
        if (podView(b.target).ready || before.allowed) assert.deepEqual(d, before);
        else {
          assert.ok(before.code === 403 || before.code === 429, JSON.stringify(before));
          assert.equal(d.allowed && d.reason, 'unhealthy-pod-always-allow');
        }
      },
      { numRuns: 1000, floor: 0.8 },
    );
  });

  it('IfHealthyBudget, written out, decides exactly as a budget without the field (evictions and rolling deletes)', () => {
    assertReaching(
      fc.tuple(scenario, fc.integer({ min: 0, max: 3 }), fc.boolean()),
      ([s, rolloutMaxUnavailable, dryRun]) => {
        const b = build(s, { unhealthyPodEvictionPolicy: 'IfHealthyBudget' });
        fc.pre(b !== undefined);
        const plain = build(s)!.config;
        const input = {
          pod: b.target,
          statefulSets: b.statefulSets,
          pods: b.pods,
          pendingEvictions: b.pending,
          now: NOW,
          dryRun,
        };
        assert.deepEqual(decideEviction({ ...input, config: b.config }), decideEviction({ ...input, config: plain }));
        assert.deepEqual(
          decideRolloutDelete({ ...input, configs: [b.config], rolloutMaxUnavailable }),
          decideRolloutDelete({ ...input, configs: [plain], rolloutMaxUnavailable }),
        );
      },
      { numRuns: 1000, floor: 0.8 },
    );
  });
});
