// The informer's polling mode (options.poll) against the real control plane:
// for an install whose RBAC grants list but not watch (Reloader's chart on
// workloads). It never watches; each poll is one LIST whose differences
// arrive as adds, updates and deletes, on the interval and not before.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import { resources, type ConfigMap, type ResourceType } from '../../../src/runtime/kube/types.ts';
import { Informer } from '../../../src/runtime/informer/informer.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';

const cluster = testCluster();

/** The client, with each LIST and watch it sends counted (each still goes to the real API server). */
function counting(kube: KubeClient): { kube: KubeClient; calls: { list: number; watch: number } } {
  const calls = { list: 0, watch: 0 };
  const realList = kube.list.bind(kube);
  const realWatch = kube.watch.bind(kube);
  kube.list = (...args: Parameters<KubeClient['list']>) => {
    calls.list++;
    return realList(...args);
  };
  kube.watch = ((type: ResourceType, options: Parameters<KubeClient['watch']>[1]) => {
    calls.watch++;
    return realWatch(type, options);
  }) as KubeClient['watch'];
  return { kube, calls };
}

function configMap(namespace: string, name: string, value: string): ConfigMap {
  return { metadata: { name, namespace, labels: { suite: 'polling' } }, data: { v: value } };
}

describe('informer, polling (list only, no watch)', () => {
  it('delivers adds, updates and deletes found by each poll, one LIST per interval and never a watch', async (t) => {
    const namespace = await cluster.namespace(t);
    const admin = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 10_000 });
    await admin.create(resources.configMaps, configMap(namespace, 'a', '1'));
    await admin.create(resources.configMaps, configMap(namespace, 'b', '1'));
    const { kube, calls } = counting(new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 10_000 }));
    const clock = new FakeClock();
    const informer = new Informer<ConfigMap>({
      client: kube,
      type: resources.configMaps,
      namespace,
      labelSelector: 'suite=polling',
      poll: { intervalMs: 10_000 },
      clock,
    });
    const seen: string[] = [];
    informer.addHandlers({
      onAdd: (o, initial) => seen.push(`add ${o.metadata?.name} ${initial}`),
      onUpdate: (old, cur) => seen.push(`update ${cur.metadata?.name} ${old.data?.['v']}->${cur.data?.['v']}`),
      onDelete: (o) => seen.push(`delete ${o.metadata?.name}`),
    });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync(AbortSignal.timeout(10_000));
    assert.deepEqual(seen.sort(), ['add a true', 'add b true']);
    assert.deepEqual(calls, { list: 1, watch: 0 });

    await admin.patch(resources.configMaps, { namespace, name: 'a' }, 'merge', { data: { v: '2' } });
    await admin.create(resources.configMaps, configMap(namespace, 'c', '1'));
    await admin.delete(resources.configMaps, { namespace, name: 'b' });
    // Not before the interval: the sleep is on the fake clock, so nothing is listed until it moves.
    await waitFor('the poller waiting', () => clock.pending > 0, { timeoutMs: 10_000 });
    assert.equal(calls.list, 1);
    assert.equal(seen.length, 2, 'nothing delivered between polls');
    // ±10 %: 11 s is past any spread of a 10 s interval.
    await clock.advance(11_000);
    await waitFor('the second poll delivered', () => seen.length === 5, { timeoutMs: 10_000 });
    assert.deepEqual(seen.slice(2).sort(), ['add c false', 'delete b', 'update a 1->2']);
    assert.deepEqual(
      informer
        .list()
        .map((c) => c.metadata?.name)
        .sort(),
      ['a', 'c'],
    );

    // A poll that finds nothing changed delivers nothing.
    await waitFor('the poller waiting again', () => clock.pending > 0 && calls.list === 2, { timeoutMs: 10_000 });
    await clock.advance(11_000);
    await waitFor('the third poll', () => calls.list === 3, { timeoutMs: 10_000 });
    await waitFor('the poller waiting after it', () => clock.pending > 0, { timeoutMs: 10_000 });
    assert.equal(seen.length, 5);
    assert.equal(calls.watch, 0, 'never a watch');
  });

  it('treats a resource not served (optional) as empty and synced, without ever watching', async (t) => {
    const namespace = await cluster.namespace(t);
    // A resource no one serves in this group: 404 on list, as a CRD not installed.
    const type = {
      group: `${namespace}.stateward.test`,
      version: 'v1',
      resource: 'gadgets',
      kind: 'Gadget',
      namespaced: true,
    };
    const { kube, calls } = counting(new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 10_000 }));
    const informer = new Informer<ConfigMap>({
      client: kube,
      type,
      namespace,
      optional: true,
      poll: { intervalMs: 10_000 },
      clock: new FakeClock(),
    });
    informer.start();
    t.after(() => informer.stop());
    await informer.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(informer.unavailable, 'not-served');
    assert.deepEqual(informer.list(), []);
    assert.equal(calls.watch, 0);
  });
});
