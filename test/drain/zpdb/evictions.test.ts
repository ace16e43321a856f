// Which pod the eviction webhook judges. The caches answer almost every
// eviction; a pod they show going, not started or finished would be let go
// without a budget, so for those the webhook reads the pod the API server
// will actually evict. The client here stands in for one answer of that
// read (the pod's current incarnation), not for the API server's behaviour.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { nopLogger } from '../../../src/runtime/log/logger.ts';
import type { KubeClient } from '../../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../../src/runtime/kube/errors.ts';
import type { Lease, Pod, StatefulSet } from '../../../src/runtime/kube/types.ts';
import { indexByOwnerUid } from '../../../src/runtime/informer/store.ts';
import { INDEX } from '../../../src/workloads/cache.ts';
import type { AdmissionRequestV1 } from '../../../src/runtime/admission/admission.ts';
import type { ZoneAwarePodDisruptionBudget } from '../../../src/drain/zpdb/zpdbresource.ts';
import { ZpdbBudgets } from '../../../src/drain/zpdb/evictions.ts';
import { fakeInformer } from '../../fuzz/support.ts';
import type { Informer } from '../../../src/runtime/informer/informer.ts';

const NS = 'ns';
const labels = { app: 'ingester' };

function pod(name: string, owner: string, o: { uid?: string; ready?: boolean; terminating?: boolean } = {}): Pod {
  const ready = o.ready ?? true;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: NS,
      uid: o.uid ?? `uid-${name}`,
      labels: { ...labels, zone: owner },
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'StatefulSet', name: owner, uid: `uid-${owner}`, controller: true },
      ],
      ...(o.terminating ? { deletionTimestamp: '2026-11-25T00:00:00Z' } : {}),
    },
    spec: { nodeName: 'node-1', containers: [{ name: 'c', image: 'i' }] },
    status: {
      phase: 'Running',
      containerStatuses: [{ name: 'c', image: 'i', imageID: '', restartCount: 0, ready, state: { running: {} } }],
    },
  };
}

/**
 * A ZPDB cache whose resource was not served (its CRD installed after the
 * operator started) until a look finds `found`: as the informer's
 * lookAgain fills the cache before it resolves (informer.int.test.ts
 * proves that against the API server).
 */
function missingUntilLooked(found: ZoneAwarePodDisruptionBudget[], { lookHangs = false } = {}) {
  let cached: ZoneAwarePodDisruptionBudget[] = [];
  const looks: number[] = [];
  const fake = {
    namespace: undefined,
    name: 'missing',
    unavailable: 'not-served' as 'not-served' | undefined,
    hasSynced: () => true,
    list: () => cached,
    addHandlers: () => () => undefined,
    lookUnfinished: () => lookHangs,
    lookAgain: (freshMs: number, signal?: AbortSignal) => {
      looks.push(freshMs);
      // A look that does not end before the caller's deadline (a slow LIST on a loaded server).
      if (lookHangs)
        return new Promise<void>((resolve) => signal?.addEventListener('abort', () => resolve(), { once: true }));
      cached = found;
      fake.unavailable = undefined;
      return Promise.resolve();
    },
  };
  return { informer: fake as unknown as Informer<ZoneAwarePodDisruptionBudget>, looks };
}

/** Zones a and b, two pods each, under one budget of 1; `cached` is what this replica's pod cache holds. */
function budgets(
  cached: Pod[],
  live: (name: string) => Pod | undefined,
  zpdbCache?: (zpdb: ZoneAwarePodDisruptionBudget) => Informer<ZoneAwarePodDisruptionBudget>,
): { budgets: ZpdbBudgets; reads: string[] } {
  const sets: StatefulSet[] = ['ingester-zone-a', 'ingester-zone-b'].map((name) => ({
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name, namespace: NS, uid: `uid-${name}`, labels },
    spec: { replicas: 2, selector: { matchLabels: { ...labels, zone: name } }, serviceName: 'x', template: {} },
    status: { replicas: 2 },
  }));
  const zpdb: ZoneAwarePodDisruptionBudget = {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'ZoneAwarePodDisruptionBudget',
    metadata: { name: 'ingester', namespace: NS, uid: 'uid-zpdb', generation: 1 },
    spec: { maxUnavailable: 1, selector: { matchLabels: labels } },
  };
  const reads: string[] = [];
  const client = {
    get: (_type: unknown, { name }: { name: string }) => {
      reads.push(name);
      const found = live(name);
      if (!found)
        return Promise.reject(
          new KubeApiError({
            code: 404,
            reason: 'NotFound',
            message: `pods "${name}" not found`,
            method: 'GET',
            path: `/api/v1/namespaces/${NS}/pods/${name}`,
          }),
        );
      return Promise.resolve(found);
    },
  } as unknown as KubeClient;
  const indexers = {
    [INDEX.podsByOwner]: indexByOwnerUid,
    [INDEX.orphanPods]: (p: Pod) => (p.metadata?.ownerReferences?.some((r) => r.controller) ? [] : ['']),
  };
  const caches = {
    pods: [fakeInformer<Pod>(cached, { indexers })],
    statefulSets: [fakeInformer<StatefulSet>(sets)],
    zpdbs: [zpdbCache ? zpdbCache(zpdb) : fakeInformer<ZoneAwarePodDisruptionBudget>([zpdb])],
    ledgers: [fakeInformer<Lease>([])],
  };
  return {
    budgets: new ZpdbBudgets({ client, clock: new FakeClock(), log: nopLogger, registry: new Registry(), caches }),
    reads,
  };
}

const eviction = (name: string): AdmissionRequestV1 => ({
  uid: 'u',
  kind: { group: 'policy', version: 'v1', kind: 'Eviction' },
  resource: { group: '', version: 'v1', resource: 'pods' },
  subResource: 'eviction',
  name,
  namespace: NS,
  operation: 'CREATE',
  userInfo: { username: 'test' },
  object: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace: NS } },
});

describe('pod-eviction webhook: which pod is judged', () => {
  it('a pod the cache shows terminating is read again: a Running replacement is judged under the budget (denied while zone b is down)', async () => {
    // The cache is behind: it still shows the evicted a-0 going, while the
    // API server already has its replacement Running and Ready. Zone b has a
    // pod down, so evicting the replacement would take a second zone down.
    const cached = [
      pod('ingester-zone-a-0', 'ingester-zone-a', { terminating: true }),
      pod('ingester-zone-a-1', 'ingester-zone-a'),
      pod('ingester-zone-b-0', 'ingester-zone-b', { ready: false }),
      pod('ingester-zone-b-1', 'ingester-zone-b'),
    ];
    const replacement = pod('ingester-zone-a-0', 'ingester-zone-a', { uid: 'uid-replacement' });
    const { budgets: b, reads } = budgets(cached, () => replacement);
    const decision = await b.handler(eviction('ingester-zone-a-0'), AbortSignal.timeout(5_000));
    assert.deepEqual(reads, ['ingester-zone-a-0']);
    assert.equal(decision.allowed, false);
    assert.equal(decision.status?.code, 429);
    assert.match(decision.status?.message ?? '', /ingester-zone-b/);
  });

  it('a pod still terminating when read again goes without a budget, as Kubernetes lets it', async () => {
    const going = pod('ingester-zone-a-0', 'ingester-zone-a', { terminating: true });
    const cached = [
      going,
      pod('ingester-zone-a-1', 'ingester-zone-a'),
      pod('ingester-zone-b-0', 'ingester-zone-b', { ready: false }),
      pod('ingester-zone-b-1', 'ingester-zone-b'),
    ];
    const { budgets: b } = budgets(cached, () => going);
    const decision = await b.handler(eviction('ingester-zone-a-0'), AbortSignal.timeout(5_000));
    assert.equal(decision.allowed, true);
  });

  it('a pod gone by the time it is read again is 404 (kubectl drain counts it evicted)', async () => {
    const cached = [
      pod('ingester-zone-a-0', 'ingester-zone-a', { terminating: true }),
      pod('ingester-zone-a-1', 'ingester-zone-a'),
      pod('ingester-zone-b-0', 'ingester-zone-b'),
      pod('ingester-zone-b-1', 'ingester-zone-b'),
    ];
    const { budgets: b } = budgets(cached, () => undefined);
    const decision = await b.handler(eviction('ingester-zone-a-0'), AbortSignal.timeout(5_000));
    assert.equal(decision.allowed, false);
    assert.equal(decision.status?.code, 404);
  });

  it('a Running pod is judged from the cache alone: no read', async () => {
    const cached = [
      pod('ingester-zone-a-0', 'ingester-zone-a'),
      pod('ingester-zone-a-1', 'ingester-zone-a'),
      pod('ingester-zone-b-0', 'ingester-zone-b', { ready: false }),
      pod('ingester-zone-b-1', 'ingester-zone-b'),
    ];
    const { budgets: b, reads } = budgets(cached, () => assert.fail('no read expected'));
    const decision = await b.handler(eviction('ingester-zone-a-0'), AbortSignal.timeout(5_000));
    assert.deepEqual(reads, []);
    assert.equal(decision.allowed, false);
  });
});

describe('a ZPDB CRD installed after the operator started', () => {
  // Zone b has a pod down: under the budget of 1, taking a zone-a pod is denied.
  const cached = () => [
    pod('ingester-zone-a-0', 'ingester-zone-a'),
    pod('ingester-zone-a-1', 'ingester-zone-a'),
    pod('ingester-zone-b-0', 'ingester-zone-b', { ready: false }),
    pod('ingester-zone-b-1', 'ingester-zone-b'),
  ];

  it('an eviction looks for budgets first and is judged by the one created right after the CRD', async () => {
    let missing: ReturnType<typeof missingUntilLooked> | undefined;
    const { budgets: b } = budgets(
      cached(),
      () => undefined,
      (zpdb) => (missing = missingUntilLooked([zpdb])).informer,
    );
    const decision = await b.handler(eviction('ingester-zone-a-0'), AbortSignal.timeout(5_000));
    assert.deepEqual(missing?.looks, [1_000], 'one look, fresh for 1 s (the evictions of a drain share it)');
    assert.equal(decision.allowed, false);
    assert.equal(decision.status?.code, 429);
  });

  it('an eviction whose look for budgets does not end in time is answered "retry", not judged without them', async () => {
    let missing: ReturnType<typeof missingUntilLooked> | undefined;
    const { budgets: b } = budgets(
      cached(),
      () => undefined,
      (zpdb) => (missing = missingUntilLooked([zpdb], { lookHangs: true })).informer,
    );
    // Zone b's own not-Ready pod: without a budget it would be let go at once.
    const decision = await b.handler(eviction('ingester-zone-b-0'), AbortSignal.timeout(10_000));
    assert.deepEqual(missing?.looks, [1_000]);
    assert.equal(decision.allowed, false);
    assert.equal(decision.status?.code, 429);
    assert.match(decision.status?.message ?? '', /still looking for ZoneAwarePodDisruptionBudgets.*retry/);
  });

  it('a rolling delete looks for budgets first too, when the last look is 30 s old', async () => {
    let missing: ReturnType<typeof missingUntilLooked> | undefined;
    const { budgets: b } = budgets(
      cached(),
      () => undefined,
      (zpdb) => (missing = missingUntilLooked([zpdb])).informer,
    );
    const answer = await b.allowRolloutDelete(cached()[0]!, 1, AbortSignal.timeout(5_000));
    assert.deepEqual(missing?.looks, [30_000], 'one look, fresh for 30 s (not one per delete of a rollout)');
    assert.equal(answer.allowed, false);
  });

  it('a budget cache that is served is not looked at again', async () => {
    let missing: ReturnType<typeof missingUntilLooked> | undefined;
    const { budgets: b } = budgets(
      cached(),
      () => undefined,
      (zpdb) => {
        missing = missingUntilLooked([zpdb]);
        void missing.informer.lookAgain(0);
        missing.looks.length = 0;
        return missing.informer;
      },
    );
    const decision = await b.handler(eviction('ingester-zone-a-0'), AbortSignal.timeout(5_000));
    assert.deepEqual(missing?.looks, []);
    assert.equal(decision.allowed, false);
  });
});
