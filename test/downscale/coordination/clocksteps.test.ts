// Min-time between zone downscales when the operator's wall clock steps,
// through the replica coordinator (planner and executor) on a FakeClock: the
// coordinator is given a group as the cache would show it and reports the
// replica patches it makes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { FakeClock } from '../../../src/runtime/clock.ts';
import type { StatefulSet } from '../../../src/runtime/kube/types.ts';
import { nopLogger } from '../../../src/runtime/log/logger.ts';
import { TimestampSightings } from '../../../src/runtime/sightings.ts';
import type { Runtime } from '../../../src/runtime/operator.ts';
import { ReplicaCoordinator } from '../../../src/downscale/coordination/coordinator.ts';
import { formatRfc3339 } from '../../../src/vocabulary/rfc3339.ts';
import {
  DOWNSCALE_LEADER_ANNOTATION_KEY as LEADER,
  LAST_DOWNSCALE_ANNOTATION_KEY as LAST,
  MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY as MIN_TIME,
} from '../../../src/vocabulary/keys.ts';

const SEC = 1000;
const MIN = 60 * SEC;
const NOW = Date.UTC(2024, 0, 2, 12, 0, 0);

function sts(
  name: string,
  replicas: number,
  o: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
): StatefulSet {
  return {
    metadata: {
      name,
      namespace: 'test',
      uid: `uid-${name}`,
      labels: { 'rollout-group': 'ingester', ...o.labels },
      annotations: { ...o.annotations },
    },
    spec: { replicas, serviceName: name, selector: {}, template: {} },
    status: { replicas, readyReplicas: replicas },
  };
}

/** A coordinator on `clock` whose replica patches land in `patches`; nothing else reaches an API. */
function coordinator(clock: FakeClock) {
  const patches: { name: string; replicas: number }[] = [];
  const client = {
    patch: (_type: unknown, where: { name: string }, _how: string, body: { spec: { replicas: number } }) => {
      patches.push({ name: where.name, replicas: body.spec.replicas });
      return Promise.resolve({});
    },
  };
  const runtime = {
    client,
    clock,
    sightings: new TimestampSightings(clock),
    logger: nopLogger,
    registry: new Registry(),
    events: { event: () => undefined },
    informers: () => [],
    isLeader: () => true,
  } as unknown as Runtime;
  return {
    coordinator: new ReplicaCoordinator(runtime, {
      podCalls: { clusterDomain: 'cluster.local.', podTimeoutMs: 1000 },
      requeue: () => undefined,
    }),
    patches,
  };
}

/**
 * zone-c leads at 2 replicas; zone-b follows and was downscaled to 2 at the
 * wall time `downscaledAt`, labelled to hold other zones for 10 minutes;
 * zone-a follows and still has 3.
 */
function group(downscaledAt: number, zoneA = 3): StatefulSet[] {
  return [
    sts('zone-a', zoneA, { annotations: { [LEADER]: 'zone-c' } }),
    sts('zone-b', 2, {
      labels: { [MIN_TIME]: '10m' },
      annotations: { [LEADER]: 'zone-c', [LAST]: formatRfc3339(downscaledAt) },
    }),
    sts('zone-c', 2),
  ];
}

describe('min-time between zone downscales under wall-clock steps (replica coordinator)', () => {
  it('a forward step does not shorten min-time for a last downscale seen before the step', async () => {
    const clock = new FakeClock(NOW);
    const { coordinator: c, patches } = coordinator(clock);
    const sets = group(clock.now());
    assert.equal(await c.adjust(sets), false);
    assert.deepEqual(patches, [], 'held: zone-b was downscaled just now');

    clock.step(11 * MIN); // the wall clock jumps past min-time; no time passed
    assert.equal(await c.adjust(sets), false);
    assert.deepEqual(patches, [], 'still held after the forward step');

    await clock.advance(10 * MIN - SEC);
    assert.equal(await c.adjust(sets), false);
    assert.deepEqual(patches, [], 'held until 10 minutes have really passed');

    await clock.advance(SEC);
    assert.equal(await c.adjust(sets), true);
    assert.deepEqual(patches, [{ name: 'zone-a', replicas: 2 }], 'follows once min-time really passed');
  });

  it('a backward step does not lengthen min-time', async () => {
    const clock = new FakeClock(NOW);
    const { coordinator: c, patches } = coordinator(clock);
    const sets = group(clock.now());
    assert.equal(await c.adjust(sets), false);
    clock.step(-5 * MIN);
    await clock.advance(10 * MIN - SEC);
    assert.equal(await c.adjust(sets), false, 'held until 10 minutes have really passed');
    await clock.advance(SEC);
    assert.equal(await c.adjust(sets), true, 'though the wall clock says 5 minutes');
    assert.deepEqual(patches, [{ name: 'zone-a', replicas: 2 }]);
  });

  it('a last downscale first seen after a step counts from its timestamp', async () => {
    const clock = new FakeClock(NOW);
    const { coordinator: c, patches } = coordinator(clock);
    clock.step(30 * MIN);
    // Recorded by another replica 11 minutes ago by the (now stepped) wall clock: nothing to correct.
    assert.equal(await c.adjust(group(clock.now() - 11 * MIN)), true);
    assert.deepEqual(patches, [{ name: 'zone-a', replicas: 2 }]);
  });

  it('a downscale recorded by a replica whose clock is behind counts from when this replica saw it change', async () => {
    const clock = new FakeClock(NOW);
    const { coordinator: c, patches } = coordinator(clock);
    // This replica watches the group: zone-b was last downscaled an hour ago, zone-a already matches.
    assert.equal(await c.adjust(group(clock.now() - 60 * MIN, 2)), false);
    await clock.advance(2 * SEC);
    // Meanwhile another replica, its clock 11 minutes behind, downscaled zone-b and stamped it;
    // zone-a now has 3 replicas to shed. Truly, zone-b went down at most 2 s ago.
    const stamped = clock.now() - 11 * MIN;
    assert.equal(await c.adjust(group(stamped)), false);
    assert.deepEqual(patches, [], 'held: the stamp says 11 minutes, but the change is at most 2 s old');
    await clock.advance(10 * MIN - 3 * SEC);
    assert.equal(await c.adjust(group(stamped)), false);
    assert.deepEqual(patches, [], 'held until min-time since the change was seen');
    await clock.advance(3 * SEC);
    assert.equal(await c.adjust(group(stamped)), true);
    assert.deepEqual(patches, [{ name: 'zone-a', replicas: 2 }]);
  });

  it('a downscale stamped in the future by a replica whose clock is ahead holds for min-time, not until that future', async () => {
    const clock = new FakeClock(NOW);
    const { coordinator: c, patches } = coordinator(clock);
    const stamped = clock.now() + 60 * MIN;
    assert.equal(await c.adjust(group(stamped)), false);
    await clock.advance(10 * MIN);
    assert.equal(
      await c.adjust(group(stamped)),
      true,
      'min-time after it was first seen, though the stamp is still 50 minutes ahead',
    );
    assert.deepEqual(patches, [{ name: 'zone-a', replicas: 2 }]);
  });
});
