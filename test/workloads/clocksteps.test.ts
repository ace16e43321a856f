import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/runtime/clock.ts';
import type { StatefulSet } from '../../src/runtime/kube/types.ts';
import { observeLastDownscales } from '../../src/workloads/clocksteps.ts';
import { checkMinTimeBetweenZoneDownscales, lastDownscalesFromAnnotations } from '../../src/workloads/downscale.ts';

const MIN = 60_000;
const T0 = Date.UTC(2024, 0, 2, 12, 0, 0);

describe('min-time counted from when this replica saw the last downscale', () => {
  const group: StatefulSet[] = [
    { metadata: { name: 'a', namespace: 'ns' } },
    { metadata: { name: 'b', namespace: 'ns', labels: { 'grafana.com/min-time-between-zones-downscale': '10m' }, annotations: { 'grafana.com/last-downscale': '2024-01-02T12:00:00Z' } } },
  ];
  const lastDownscales = lastDownscalesFromAnnotations(group);

  it('holds after a forward step, and the denial says from when it counts', () => {
    const clock = new FakeClock(T0);
    observeLastDownscales(clock, 'ns', lastDownscales);
    clock.step(11 * MIN);
    const now = clock.now();
    assert.deepEqual(checkMinTimeBetweenZoneDownscales({ self: 'a', group, lastDownscales, now }), { elapsed: true }, 'by the wall clock alone, 11 minutes passed');
    const countedFrom = observeLastDownscales(clock, 'ns', lastDownscales);
    assert.deepEqual(countedFrom, new Map([['b', { at: T0, from: T0 + 11 * MIN }]]));
    const held = checkMinTimeBetweenZoneDownscales({ self: 'a', group, lastDownscales, now, countedFrom });
    assert.ok('elapsed' in held && !held.elapsed);
    assert.equal(held.lastDownscale, T0);
    assert.equal(held.reason, 'statefulset b was downscaled at 2024-01-02 12:00:00 +0000 UTC and is labelled to wait 10m0s between zone downscales (counted from 2024-01-02 12:11:00 +0000 UTC, when this replica saw it: clocks stepped or disagree)');
  });

  it('ignores what was counted for another value of the annotation, and keeps sources and namespaces apart', () => {
    const clock = new FakeClock(T0 + 11 * MIN);
    const now = clock.now();
    assert.deepEqual(checkMinTimeBetweenZoneDownscales({ self: 'a', group, lastDownscales, now, countedFrom: new Map([['b', { at: T0 - 60 * MIN, from: now }]]) }), { elapsed: true });
    observeLastDownscales(clock, 'ns', new Map([['b', T0]]), 'zone-tracker');
    assert.deepEqual(observeLastDownscales(clock, 'other', new Map([['b', T0 + MIN]]), 'annotation', 'live'), new Map([['b', { at: T0 + MIN, from: now }]]), 'a StatefulSet first seen live counts from now');
    assert.deepEqual(observeLastDownscales(clock, 'ns', lastDownscales), new Map([['b', { at: T0, from: T0 }]]), 'first seen in an initial read: its stamp');
  });
});
