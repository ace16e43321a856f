// The API client against the real apiserver: every write style, the error
// type on real failures, client-side rate limiting that refuses rather than
// outwaits a deadline, and request timeouts.
import assert from 'node:assert/strict';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import { describe, it } from 'node:test';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import { closePool, connectionPool, exchange, type TlsOptions } from '../../../src/runtime/kube/transport.ts';
import { isConflict, isNotFound, isAlreadyExists, KubeApiError } from '../../../src/runtime/kube/errors.ts';
import { resources, type ConfigMap, type StatefulSet } from '../../../src/runtime/kube/types.ts';
import { PerKeyTokenBuckets } from '../../../src/runtime/workqueue/tokenbucket.ts';
import { testCluster } from '../../cluster/testing.ts';

const cluster = testCluster();
const client = (options: Partial<ConstructorParameters<typeof KubeClient>[0]> = {}) =>
  new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 10_000, ...options });

function sts(namespace: string, name: string): StatefulSet {
  return {
    metadata: { name, namespace, labels: { app: name } },
    spec: {
      replicas: 0,
      serviceName: name,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'c', image: 'example.invalid/c:1' }] },
      },
    },
  };
}

describe('KubeClient', () => {
  it('creates, reads, lists with selectors, updates with optimistic concurrency and deletes', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client();
    const created = await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'a', namespace, labels: { pick: 'yes' } },
      data: { k: '1' },
    });
    assert.equal(created.kind, 'ConfigMap');
    assert.equal(typeof created.metadata?.creationTimestamp, 'string', 'timestamps stay strings');
    await kube.create(resources.configMaps, { metadata: { name: 'b', namespace } });
    const picked = await kube.list<ConfigMap>(resources.configMaps, { namespace, labelSelector: 'pick=yes' });
    assert.deepEqual(
      picked.items.map((c) => c.metadata?.name),
      ['a'],
    );
    const updated = await kube.update<ConfigMap>(resources.configMaps, { ...created, data: { k: '2' } });
    assert.equal(updated.data?.['k'], '2');
    await assert.rejects(
      kube.update(resources.configMaps, { ...created, data: { k: '3' } }),
      (e) => isConflict(e),
      'a stale resourceVersion is a conflict',
    );
    await assert.rejects(kube.create(resources.configMaps, { metadata: { name: 'a', namespace } }), (e) =>
      isAlreadyExists(e),
    );
    await kube.delete(resources.configMaps, { namespace, name: 'a' }, { uid: created.metadata!.uid! });
    await assert.rejects(
      kube.get(resources.configMaps, { namespace, name: 'a' }),
      (e) => isNotFound(e) && e instanceof KubeApiError && e.reason === 'NotFound',
    );
  });

  it('patches with merge, strategic merge, JSON patch and server-side apply', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client();
    await kube.create(resources.statefulSets, sts(namespace, 'db'));
    const where = { namespace, name: 'db' };
    await kube.patch(resources.statefulSets, where, 'merge', { metadata: { annotations: { a: 'merge' } } });
    // Strategic merge merges the containers list by name instead of replacing it.
    await kube.patch(resources.statefulSets, where, 'strategic', {
      spec: { template: { spec: { containers: [{ name: 'sidecar', image: 'example.invalid/s:1' }] } } },
    });
    await kube.patch(resources.statefulSets, where, 'json', [{ op: 'replace', path: '/spec/replicas', value: 2 }]);
    const applied = await kube.apply<StatefulSet>(
      resources.statefulSets,
      { metadata: { name: 'db', namespace, labels: { owner: 'stateward' } } },
      { fieldManager: 'stateward-test' },
    );
    assert.equal(applied.metadata?.annotations?.['a'], 'merge');
    assert.deepEqual(applied.spec?.template.spec?.containers.map((c) => c.name).sort(), ['c', 'sidecar']);
    assert.equal(applied.spec?.replicas, 2);
    assert.equal(applied.metadata?.labels?.['owner'], 'stateward');
    assert.ok(
      applied.metadata?.managedFields?.some((f) => f.manager === 'stateward-test'),
      'field manager recorded',
    );
    await assert.rejects(
      kube.patch(resources.statefulSets, where, 'json', [{ op: 'test', path: '/spec/replicas', value: 7 }]),
      (e) => e instanceof KubeApiError && e.code === 422,
    );
  });

  it('refuses at once, naming the API group, a request whose rate-limit token would come after its deadline', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client({ timeoutMs: 200, limiter: new PerKeyTokenBuckets(1, 1) });
    await kube.get(resources.serviceAccounts, { namespace, name: 'default' });
    const started = Date.now();
    await assert.rejects(kube.get(resources.serviceAccounts, { namespace, name: 'default' }), (e) => {
      assert.ok(e instanceof KubeApiError);
      assert.equal(e.reason, 'RateLimited');
      assert.match(e.message, /client-side rate limiter for Kubernetes API group "core"/);
      return true;
    });
    assert.ok(Date.now() - started < 150, 'refused without waiting');
    // Another API group has its own bucket.
    await kube.list(resources.statefulSets, { namespace });
  });

  it('reads a list the apiserver gzips (over 128 KiB), and watches on from its resourceVersion', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client();
    t.after(() => kube.close());
    const value = 'v'.repeat(4096);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        kube.create(resources.configMaps, {
          metadata: { name: `c${i}`, namespace, labels: { bulk: 'yes' } },
          data: { value },
        }),
      ),
    );
    // The precondition: asked as the client asks, the apiserver answers this list gzipped.
    const options: HttpsRequestOptions = {};
    await cluster.kubeConfig().applyToHTTPSOptions(options);
    const pool = connectionPool('https:', options as TlsOptions);
    try {
      const raw = await exchange(
        `${kube.serverUrl}/api/v1/namespaces/${namespace}/configmaps?labelSelector=bulk%3Dyes`,
        {
          pool,
          method: 'GET',
          headers: { ...(options.headers as Record<string, string>), 'accept-encoding': 'gzip' },
          signal: AbortSignal.timeout(10_000),
        },
      );
      raw.close();
      assert.equal(raw.header('content-encoding'), 'gzip');
    } finally {
      await closePool(pool);
    }
    const listed = await kube.list<ConfigMap>(resources.configMaps, { namespace, labelSelector: 'bulk=yes' });
    assert.equal(listed.items.length, 40);
    assert.ok(listed.items.every((c) => c.data?.['value'] === value));
    await kube.patch(resources.configMaps, { namespace, name: 'c0' }, 'merge', { data: { value: 'changed' } });
    const watched: string[] = [];
    for await (const event of kube.watch<ConfigMap>(resources.configMaps, {
      namespace,
      labelSelector: 'bulk=yes',
      resourceVersion: listed.metadata?.resourceVersion,
      signal: AbortSignal.timeout(10_000),
    })) {
      watched.push(`${event.type} ${event.object.metadata?.name} ${event.object.data?.['value']}`);
      break;
    }
    assert.deepEqual(watched, ['MODIFIED c0 changed']);
  });

  it('times out a request the apiserver does not answer, with a Timeout error', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = client({ timeoutMs: 1000 });
    await kube.get(resources.serviceAccounts, { namespace, name: 'default' });
    await cluster.pauseComponent('apiserver');
    try {
      await assert.rejects(
        kube.get(resources.serviceAccounts, { namespace, name: 'default' }),
        (e) => e instanceof KubeApiError && e.reason === 'Timeout' && e.code === 0,
      );
    } finally {
      await cluster.resumeComponent('apiserver');
    }
    await kube.get(resources.serviceAccounts, { namespace, name: 'default' });
  });
});
