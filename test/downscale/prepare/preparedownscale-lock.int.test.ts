// The prepare-downscale group lock against the real apiserver: released by
// clearing the Lease's holder (the shipped RBAC grants no Lease delete),
// and a Lease with an empty holder is free to take, however fresh its times.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, systemClock } from '../../../src/runtime/clock.ts';
import { microTime } from '../../../src/runtime/kube/time.ts';
import { resources, type Lease } from '../../../src/runtime/kube/types.ts';
import { lockName } from '../../../src/downscale/prepare/handler.ts';
import { testCluster } from '../../cluster/testing.ts';
import { inProcessWebhook, zone } from './requests.ts';
import { testClient } from '../../support/rollout-group.ts';

const cluster = testCluster();

describe('prepare-downscale group lock', () => {
  it('is released by clearing the holder, is taken when its holder is empty, and denies while another holds it', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const set = await kube.create(resources.statefulSets, zone(namespace, 'zone-a'));
    const webhook = inProcessWebhook(kube, namespace, { clock: systemClock, identity: 'replica-1' });
    // Each request its own from/to: a repeat of an allowed one runs every step again.
    const ask = (from: number) => webhook(set, from, from - 1);
    const where = { namespace, name: lockName('ingester') };
    const lease = () => kube.get<Lease>(resources.leases, where);

    const first = await ask(5);
    assert.equal(first.allowed, true, first.status?.message);
    const released = await lease();
    assert.equal(released.spec?.holderIdentity ?? '', '', 'released by clearing the holder; the Lease stays');

    // Held by another replica, fresh: denied, and left as it was.
    const now = microTime(Date.now());
    const held = await kube.update<Lease>(resources.leases, {
      metadata: released.metadata,
      spec: {
        ...released.spec,
        holderIdentity: 'replica-2',
        acquireTime: now,
        renewTime: now,
        leaseDurationSeconds: 30,
      },
    });
    const denied = await ask(4);
    assert.equal(denied.allowed, false);
    assert.match(denied.status?.message ?? '', /statefulset zone-a is already in process of updating replicas/);
    assert.equal(
      (await lease()).metadata?.resourceVersion,
      held.metadata?.resourceVersion,
      'the other holder keeps it',
    );

    // Released by the other replica (empty holder, times still fresh): free.
    await kube.update<Lease>(resources.leases, { metadata: held.metadata, spec: { ...held.spec, holderIdentity: '' } });
    const taken = await ask(3);
    assert.equal(taken.allowed, true, taken.status?.message);
    assert.equal((await lease()).spec?.holderIdentity ?? '', '', 'released again');
  });

  it("judges another holder's lock expired only after seeing it unchanged for the lease duration on its own monotonic clock, whatever renewTime says", async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const set = await kube.create(resources.statefulSets, zone(namespace, 'zone-a'));
    // This replica's wall clock is an hour ahead of the holder's: by renewTime the lock looks long dead.
    const clock = new FakeClock(Date.now() + 3600_000);
    const webhook = inProcessWebhook(kube, namespace, { clock, identity: 'replica-1' });
    const ask = (from: number) => webhook(set, from, from - 1);
    const now = microTime(Date.now());
    const created = await kube.create<Lease>(resources.leases, {
      metadata: { name: lockName('ingester'), namespace },
      spec: { holderIdentity: 'replica-2', acquireTime: now, renewTime: now, leaseDurationSeconds: 30 },
    });

    assert.equal((await ask(5)).allowed, false, 'first sight of a held lock: held');
    await clock.advance(29_000);
    assert.equal((await ask(5)).allowed, false, 'unchanged for 29 s: still held');
    // The holder renews: the lease changed, so the wait starts again.
    const renewed = await kube.update<Lease>(resources.leases, {
      metadata: created.metadata,
      spec: { ...created.spec, renewTime: microTime(Date.now()) },
    });
    await clock.advance(2_000);
    assert.equal((await ask(5)).allowed, false, 'renewed 2 s ago (as this replica saw it): held');
    assert.equal(
      (await kube.get<Lease>(resources.leases, { namespace, name: lockName('ingester') })).metadata?.resourceVersion,
      renewed.metadata?.resourceVersion,
      'left to its holder',
    );
    await clock.advance(30_000);
    const taken = await ask(5);
    assert.equal(
      taken.allowed,
      true,
      `unchanged for 30 s: the holder stopped renewing, the lock is taken: ${taken.status?.message}`,
    );
    const after = await kube.get<Lease>(resources.leases, { namespace, name: lockName('ingester') });
    assert.equal(after.spec?.holderIdentity ?? '', '', 'and released after the request');
    assert.equal(after.spec?.leaseTransitions, 1);
  });
});
