// The informer against the real control plane: the faults it exists to
// survive (apiserver restart, 410 Gone after compaction, a connection that
// silently dies) end with a cache equal to a fresh list and no update lost.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import type { KubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { resources, type ConfigMap, type KubeObject, type ResourceType } from '../../../src/runtime/kube/types.ts';
import { KubeApiError } from '../../../src/runtime/kube/errors.ts';
import { Informer } from '../../../src/runtime/informer/informer.ts';
import { indexByLabel } from '../../../src/runtime/informer/store.ts';
import { informerMetrics } from '../../../src/runtime/informer/informermetrics.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';
import { BlackholeProxy } from '../../support/blackhole-proxy.ts';
import { kubectl } from '../../support/kubectl.ts';

const cluster = testCluster();

/** A namespaced custom resource of a group only this test's namespace uses (its CRD is not installed yet). */
function widgets(namespace: string, resource = 'widgets') {
  const kind = resource[0]!.toUpperCase() + resource.slice(1, -1);
  return { group: `${namespace}.stateward.test`, version: 'v1', resource, kind, namespaced: true };
}

/** Installs the CRD of `type` with kubectl (removed after the test). */
async function installCrd(t: TestContext, type: ReturnType<typeof widgets>): Promise<void> {
  const file = join(cluster.state.stateDir, `crd-${type.resource}.${type.group}.json`);
  await writeFile(
    file,
    JSON.stringify({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `${type.resource}.${type.group}` },
      spec: {
        group: type.group,
        scope: 'Namespaced',
        names: { plural: type.resource, singular: type.kind.toLowerCase(), kind: type.kind },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
          },
        ],
      },
    }),
  );
  const applied = await kubectl(cluster, 'apply', '-f', file);
  assert.ok(applied.ok, applied.out);
  t.after(() => kubectl(cluster, 'delete', '-f', file, '--wait=false'));
}

/** Creates an object as soon as the API server serves its (just installed) resource. */
async function createWhenServed(kube: KubeClient, type: ReturnType<typeof widgets>, namespace: string, name: string) {
  await waitFor(
    `${type.kind} ${name} created`,
    () =>
      kube
        .create(type, { apiVersion: `${type.group}/v1`, kind: type.kind, metadata: { name, namespace } })
        .catch(() => undefined),
    { timeoutMs: 30_000 },
  );
}

type WatchOptions = Parameters<KubeClient['watch']>[1];

/**
 * The client, with every LIST, watch-list (a watch that streams the list
 * first) and watch it sends recorded; each still goes to the real API
 * server, unless `refuseWatchList` answers a watch-list as a server without
 * the WatchList feature would. What `record` returns is called when the
 * call has ended (its answer, or its stream, is over).
 */
function recordingCalls(
  kube: KubeClient,
  record: (call: 'list' | 'watch-list' | 'watch') => unknown,
  refuseWatchList?: () => Error,
): KubeClient {
  const realList = kube.list.bind(kube);
  const realWatch = kube.watch.bind(kube);
  const ended = (done: unknown) => () => {
    if (typeof done === 'function') (done as () => void)();
  };
  kube.list = ((...args: Parameters<KubeClient['list']>) => {
    const done = ended(record('list'));
    return realList(...args).finally(done);
  }) as KubeClient['list'];
  kube.watch = ((type: ResourceType, options: WatchOptions) => {
    const done = ended(record(options.sendInitialEvents ? 'watch-list' : 'watch'));
    if (options.sendInitialEvents && refuseWatchList) {
      done();
      throw refuseWatchList();
    }
    const stream = realWatch(type, options);
    return (async function* () {
      try {
        yield* stream;
      } finally {
        done();
      }
    })();
  }) as KubeClient['watch'];
  return kube;
}

/** The client, with every look at the whole collection (a LIST or a watch-list) recorded: when it began, and whether it has ended. */
function countingLists(
  kube: KubeClient,
  clock: FakeClock,
): { kube: KubeClient; lists: { at: number; ended: boolean }[] } {
  const lists: { at: number; ended: boolean }[] = [];
  recordingCalls(kube, (call) => {
    if (call === 'watch') return undefined;
    const look = { at: clock.monotonic(), ended: false };
    lists.push(look);
    return () => (look.ended = true);
  });
  return { kube, lists };
}

/** An optional informer of a resource not served yet, on a fake clock, synced, with its LISTs recorded. */
async function startMissing(t: TestContext, resource: string) {
  const namespace = await cluster.namespace(t);
  const type = widgets(namespace, resource);
  const clock = new FakeClock();
  const { kube, lists } = countingLists(client(), clock);
  const informer = new Informer<KubeObject>({ client: kube, type, namespace, optional: true, clock });
  informer.start();
  t.after(() => informer.stop());
  await informer.waitForSync(AbortSignal.timeout(10_000));
  return { informer, clock, lists, kube, type, namespace };
}

function client(kc: KubeConfig = cluster.kubeConfig(), timeoutMs = 10_000): KubeClient {
  return new KubeClient({ kubeConfig: kc, timeoutMs });
}

async function metricValue(registry: Registry, name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return Number(value?.value ?? 0);
}

/** The cache must equal a fresh list: same keys at the same resourceVersions. */
async function assertCacheMatchesList(
  informer: Informer<ConfigMap>,
  kube: KubeClient,
  namespace: string,
): Promise<void> {
  await waitFor(
    'informer cache to equal a fresh list',
    async () => {
      const fresh = await kube.list<ConfigMap>(resources.configMaps, { namespace });
      const want = new Map(fresh.items.map((c) => [c.metadata!.name!, c.metadata!.resourceVersion]));
      const got = new Map(informer.list().map((c) => [c.metadata!.name!, c.metadata!.resourceVersion]));
      return want.size === got.size && [...want].every(([k, v]) => got.get(k) === v);
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

function configMap(namespace: string, name: string, value: string, labels: Record<string, string> = {}): ConfigMap {
  return { metadata: { name, namespace, labels }, data: { v: value } };
}

describe('informer', () => {
  it('lists, then follows adds, updates (old and new) and deletes, keeping indexes and dropping managedFields', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client();
    await kube.create(resources.configMaps, configMap(namespace, 'a', '1', { tier: 'x', suite: 'informer' }));
    await kube.create(resources.configMaps, configMap(namespace, 'b', '1', { tier: 'y', suite: 'informer' }));
    const informer = new Informer<ConfigMap>({
      client: kube,
      type: resources.configMaps,
      namespace,
      labelSelector: 'suite=informer',
      indexers: { tier: indexByLabel('tier') },
    });
    const seen: string[] = [];
    informer.addHandlers({
      onAdd: (o, initial) => seen.push(`add ${o.metadata?.name} ${initial}`),
      onUpdate: (old, cur) => seen.push(`update ${cur.metadata?.name} ${old.data?.['v']}->${cur.data?.['v']}`),
      onDelete: (o) => seen.push(`delete ${o.metadata?.name}`),
    });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync();
    assert.deepEqual(seen.sort(), ['add a true', 'add b true']);
    assert.equal(
      informer.get(namespace, 'a')?.metadata?.managedFields,
      undefined,
      'managedFields dropped by the default transform',
    );
    await kube.patch(resources.configMaps, { namespace, name: 'a' }, 'merge', {
      data: { v: '2' },
      metadata: { labels: { tier: 'y' } },
    });
    await waitFor('the update', () => seen.length === 3, { timeoutMs: 10_000 });
    await kube.create(resources.configMaps, configMap(namespace, 'c', '1', { suite: 'informer' }));
    await kube.delete(resources.configMaps, { namespace, name: 'b' });
    await waitFor('update, add and delete events', () => seen.length === 5, { timeoutMs: 10_000 });
    assert.deepEqual(seen.slice(2), ['update a 1->2', 'add c false', 'delete b']);
    assert.deepEqual(
      informer.byIndex('tier', 'y').map((o) => o.metadata?.name),
      ['a'],
    );
    assert.deepEqual(informer.byIndex('tier', 'x'), []);
  });

  it('fills its cache from one watch-list where the server streams lists: no LIST, then follows changes on the same watch', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client();
    for (let i = 0; i < 7; i++) await kube.create(resources.configMaps, configMap(namespace, `cm-${i}`, '1'));
    const calls: string[] = [];
    recordingCalls(kube, (call) => calls.push(call));
    // Pages of 3: a LIST would have taken three requests.
    const informer = new Informer<ConfigMap>({ client: kube, type: resources.configMaps, namespace, pageSize: 3 });
    const adds: string[] = [];
    informer.addHandlers({ onAdd: (o, initial) => adds.push(`${o.metadata?.name} ${initial}`) });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync(AbortSignal.timeout(10_000));
    // Every ConfigMap of the namespace (kube-root-ca.crt too), delivered as the initial list.
    const listed = (await client().list<ConfigMap>(resources.configMaps, { namespace })).items.map(
      (c) => `${c.metadata!.name!} true`,
    );
    assert.deepEqual(adds.sort(), listed.sort());
    assert.ok(informer.lastResourceVersion, 'the bookmark that ended the list gave the resourceVersion');
    await kube.create(resources.configMaps, configMap(namespace, 'later', '1'));
    await waitFor('the later add', () => adds.includes('later false'), { timeoutMs: 10_000 });
    assert.deepEqual(calls, ['watch-list']);
  });

  it('lists instead, from then on, when the server refuses watch-lists (422: the WatchList feature off)', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client();
    await kube.create(resources.configMaps, configMap(namespace, 'a', '1'));
    const calls: string[] = [];
    // An apiserver with the WatchList feature gate off answers a watch-list so.
    recordingCalls(
      kube,
      (call) => calls.push(call),
      () =>
        new KubeApiError({
          code: 422,
          reason: 'Invalid',
          message:
            'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
          method: 'WATCH',
          path: '/api/v1/configmaps',
        }),
    );
    const informer = new Informer<ConfigMap>({
      client: kube,
      type: resources.configMaps,
      namespace,
      backoff: { initialMs: 100, maxMs: 1000 },
    });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(informer.get(namespace, 'a')?.data?.['v'], '1');
    await kube.create(resources.configMaps, configMap(namespace, 'b', '1'));
    await waitFor('the later add', () => informer.get(namespace, 'b') !== undefined, { timeoutMs: 10_000 });
    assert.deepEqual(calls, ['watch-list', 'list', 'watch']);
  });

  it('delivers every update of a busy object, in order', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client();
    await kube.create(resources.configMaps, configMap(namespace, 'busy', '0'));
    const informer = new Informer<ConfigMap>({ client: kube, type: resources.configMaps, namespace });
    const values: string[] = [];
    informer.addHandlers({ onUpdate: (_old, cur) => values.push(cur.data?.['v'] ?? '') });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync();
    const n = 50;
    for (let i = 1; i <= n; i++)
      await kube.patch(resources.configMaps, { namespace, name: 'busy' }, 'merge', { data: { v: String(i) } });
    await waitFor(`${n} updates`, () => values.length >= n, { timeoutMs: 20_000 });
    assert.deepEqual(
      values,
      Array.from({ length: n }, (_, i) => String(i + 1)),
    );
  });

  it('survives an apiserver restart with etcd compacted meanwhile: relists on 410 and loses no update', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client();
    for (let i = 0; i < 10; i++) await kube.create(resources.configMaps, configMap(namespace, `cm-${i}`, '0'));
    const registry = new Registry();
    const informer = new Informer<ConfigMap>({
      client: kube,
      type: resources.configMaps,
      namespace,
      metrics: informerMetrics(registry),
      backoff: { initialMs: 200, maxMs: 2000 },
    });
    const latest = new Map<string, string>();
    const deleted = new Set<string>();
    informer.addHandlers({
      onAdd: (o) => latest.set(o.metadata!.name!, o.data?.['v'] ?? ''),
      onUpdate: (_old, o) => latest.set(o.metadata!.name!, o.data?.['v'] ?? ''),
      onDelete: (o) => deleted.add(o.metadata!.name!),
    });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync();

    await cluster.stopComponent('apiserver');
    await cluster.compactEtcd();
    await cluster.startComponent('apiserver');
    // Write while the informer is still reconnecting.
    const writer = client(cluster.kubeConfig());
    for (let i = 0; i < 10; i++)
      await writer.patch(resources.configMaps, { namespace, name: `cm-${i}` }, 'merge', { data: { v: `final-${i}` } });
    await writer.delete(resources.configMaps, { namespace, name: 'cm-0' });
    await writer.create(resources.configMaps, configMap(namespace, 'cm-new', 'new'));

    await assertCacheMatchesList(informer, kube, namespace);
    for (let i = 1; i < 10; i++) assert.equal(latest.get(`cm-${i}`), `final-${i}`, `cm-${i} final value observed`);
    assert.equal(latest.get('cm-new'), 'new');
    assert.ok(deleted.has('cm-0'), 'deletion observed');
    assert.ok(
      (await metricValue(registry, 'stateward_informer_watch_restarts_total', { reason: 'gone' })) >= 1,
      'a 410 Gone was met and answered with a relist',
    );
    assert.ok((await metricValue(registry, 'stateward_informer_relists_total', {})) >= 2);
  });

  it('reconnects when its watch connection silently dies (half-open), within the idle timeout', async (t) => {
    const namespace = await cluster.namespace(t);
    const apiPort = Number(new URL(cluster.state.server).port);
    const proxy = new BlackholeProxy(apiPort);
    const port = await proxy.listen();
    t.after(() => proxy.close());
    const viaProxy = cluster.kubeConfig().withServer(`https://127.0.0.1:${port}`);
    const registry = new Registry();
    const informer = new Informer<ConfigMap>({
      client: client(viaProxy, 3000),
      type: resources.configMaps,
      namespace,
      idleTimeoutMs: 3000,
      metrics: informerMetrics(registry),
      backoff: { initialMs: 100, maxMs: 500 },
    });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync();
    // Seeing a change proves the watch stream is established through the proxy.
    await client().create(resources.configMaps, configMap(namespace, 'before-blackhole', 'x'));
    await waitFor('the watch to deliver an event', () => informer.get(namespace, 'before-blackhole'), {
      timeoutMs: 10_000,
    });
    assert.ok(proxy.blackholeExisting() >= 1, 'the watch connection went through the proxy');
    await client().create(resources.configMaps, configMap(namespace, 'after-blackhole', 'x'));
    await waitFor(
      'the informer to see an object created after its connection died',
      () => informer.get(namespace, 'after-blackhole'),
      { timeoutMs: 20_000 },
    );
    assert.ok((await metricValue(registry, 'stateward_informer_watch_restarts_total', { reason: 'idle' })) >= 1);
  });

  it('caches metadata only when asked, server-side filtered by label', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client();
    await kube.create(resources.configMaps, configMap(namespace, 'wanted', 'big-data', { pick: 'yes' }));
    await kube.create(resources.configMaps, configMap(namespace, 'other', 'x', { pick: 'no' }));
    const informer = new Informer<KubeObject>({
      client: kube,
      type: resources.configMaps,
      namespace,
      labelSelector: 'pick=yes',
      metadataOnly: true,
    });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync();
    assert.deepEqual(
      informer.list().map((o) => o.metadata?.name),
      ['wanted'],
    );
    const cached = informer.get(namespace, 'wanted') as KubeObject & { data?: unknown };
    assert.equal(cached.data, undefined, 'no data in a metadata-only cache');
    assert.equal(cached.metadata?.labels?.['pick'], 'yes');
    await kube.create(resources.configMaps, configMap(namespace, 'late', 'y', { pick: 'yes' }));
    await waitFor('the later object', () => informer.get(namespace, 'late'), { timeoutMs: 10_000 });
    assert.equal((informer.get(namespace, 'late') as { data?: unknown }).data, undefined);
  });

  it('treats a resource that is not served yet as empty and synced, and picks it up once its CRD appears', async (t) => {
    const namespace = await cluster.namespace(t);
    const type = widgets(namespace);
    const kube = client();
    const informer = new Informer<KubeObject>({
      client: kube,
      type,
      namespace,
      optional: true,
      backoff: { initialMs: 100, maxMs: 500 },
    });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(informer.size, 0);
    await installCrd(t, type);
    await createWhenServed(kube, type, namespace, 'w1');
    await waitFor('the informer to see it', () => informer.get(namespace, 'w1'), { timeoutMs: 15_000 });
  });

  it('looks for a resource that is not served every 5 minutes (no idle relists every 30 s, no fast polling after start)', async (t) => {
    const { informer, clock, lists } = await startMissing(t, 'gadgets');
    assert.equal(informer.unavailable, 'not-served');
    const start = clock.monotonic();
    // Twenty simulated minutes, a second at a time, each step waiting for the informer's next sleep.
    for (let s = 0; s < 1200; s++) {
      const before = lists.length;
      await clock.advance(1000);
      // The look is a request to the real server, in real time: the fake clock waits for it to end.
      if (lists.length > before)
        await waitFor('the informer to sleep again', () => lists.at(-1)!.ended && clock.pending > 0, {
          timeoutMs: 10_000,
          intervalMs: 10,
        });
    }
    const at = lists.map((list) => list.at - start);
    const gaps = at.slice(1).map((t1, i) => t1 - at[i]!);
    // 5 min spread ±20 % (the informer's backoff), a 1 s step of slack.
    for (const gap of gaps) assert.ok(gap >= 240_000 && gap <= 361_000, `looks at ${at.join(', ')} ms`);
    assert.ok(gaps.length >= 3 && gaps.length <= 5, `looks at ${at.join(', ')} ms`);
  });

  it('lookAgain: looks for a missing resource at once, one look for concurrent callers, none while the last is fresh, and the cache holds what it found', async (t) => {
    // Each call gives up after 10 s, so a look that never comes fails the count rather than hanging.
    // No simulated time passes but what the test advances: every look after the first is one lookAgain asked for.
    const { informer, clock, lists, kube, type, namespace } = await startMissing(t, 'sprockets');
    assert.equal(lists.length, 1);
    await waitFor('the informer to wait for its next look', () => clock.pending > 0, { timeoutMs: 10_000 });
    await informer.lookAgain(1_000, AbortSignal.timeout(10_000));
    assert.equal(lists.length, 1, 'the first look, just over, is fresh');
    assert.equal(informer.lookUnfinished(1_000), false, 'a look ended within the second');

    await clock.advance(1_000);
    assert.equal(informer.lookUnfinished(1_000), true, 'no look ended in the last second');
    await Promise.all([
      informer.lookAgain(1_000, AbortSignal.timeout(10_000)),
      informer.lookAgain(1_000, AbortSignal.timeout(10_000)),
      informer.lookAgain(1_000, AbortSignal.timeout(10_000)),
    ]);
    assert.equal(lists.length, 2, 'three concurrent callers share one look');
    assert.equal(informer.unavailable, 'not-served');
    await informer.lookAgain(1_000, AbortSignal.timeout(10_000));
    assert.equal(lists.length, 2, 'a look that just ended is fresh: no other');
    await clock.advance(1_000);
    await informer.lookAgain(1_000, AbortSignal.timeout(10_000));
    assert.equal(lists.length, 3, 'once it is 1 s old, the next caller looks again');

    await installCrd(t, type);
    await createWhenServed(kube, type, namespace, 's1');
    await clock.advance(1_000);
    await informer.lookAgain(1_000, AbortSignal.timeout(10_000));
    assert.equal(informer.unavailable, undefined, 'served now');
    assert.ok(
      informer.get(namespace, 's1'),
      'the object created right after its CRD is in the cache when lookAgain resolves',
    );
    const looks = lists.length;
    await informer.lookAgain(0, AbortSignal.timeout(10_000));
    assert.equal(lists.length, looks, 'a served resource is watched, not looked for');
    // The watch that follows keeps the cache current.
    await kube.create(type, { apiVersion: `${type.group}/v1`, kind: type.kind, metadata: { name: 's2', namespace } });
    await waitFor('the watch to bring s2', () => informer.get(namespace, 's2'), { timeoutMs: 15_000 });
  });

  it('lookAgain gives up when its signal aborts, and when the informer stops, without rejecting', async (t) => {
    const namespace = await cluster.namespace(t);
    const type = widgets(namespace, 'cogs');
    const clock = new FakeClock();
    const informer = new Informer<KubeObject>({ client: client(), type, namespace, optional: true, clock });
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(10_000));
    const aborted = new AbortController();
    aborted.abort();
    await informer.lookAgain(0, aborted.signal);
    assert.equal(informer.lookUnfinished(0), true, 'a caller that gave up: no look ended since');
    await informer.stop();
    await informer.lookAgain(0);
    assert.equal(informer.lookUnfinished(0), false, 'a stopped informer looks no more');
  });

  it('syncs a metadata-only cache of an empty collection (the server sends "items": null)', async (t) => {
    const namespace = await cluster.namespace(t);
    const informer = new Informer<KubeObject>({
      client: client(),
      type: resources.secrets,
      namespace,
      metadataOnly: true,
    });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(informer.size, 0);
  });
});
