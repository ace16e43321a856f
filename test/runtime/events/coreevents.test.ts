// The events.k8s.io/v1 → core/v1 translation of the recorder's writes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { toCoreEvent, toCorePatch } from '../../../src/runtime/events/coreevents.ts';
import type { EventsV1EventJson } from '../../../src/runtime/events/event.ts';

const base: EventsV1EventJson = {
  apiVersion: 'events.k8s.io/v1',
  kind: 'Event',
  metadata: { name: 'web.1', namespace: 'team' },
  eventTime: '2026-11-29T10:00:00.123456Z',
  type: 'Normal',
  reason: 'Reloaded',
  action: 'Restart',
  note: 'config changed',
  regarding: { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'team', name: 'web', uid: 'u1' },
  reportingController: 'stateward.dev/operator',
  reportingInstance: 'pod-1',
};

describe('core/v1 Events', () => {
  it('carry every field of the Event in its legacy place, timestamps in whole seconds, no eventTime', () => {
    const core = toCoreEvent(base);
    assert.deepEqual(core, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: 'web.1', namespace: 'team' },
      involvedObject: base.regarding,
      type: 'Normal',
      reason: 'Reloaded',
      message: 'config changed',
      action: 'Restart',
      source: { component: 'stateward.dev/operator' },
      reportingComponent: 'stateward.dev/operator',
      reportingInstance: 'pod-1',
      firstTimestamp: '2026-11-29T10:00:00Z',
      lastTimestamp: '2026-11-29T10:00:00Z',
      count: 1,
    });
    assert.equal('eventTime' in core, false);
  });

  it('a series becomes count and lastTimestamp, in a create and in a patch', () => {
    const series = { count: 7, lastObservedTime: '2026-11-29T10:05:00.000001Z' };
    const core = toCoreEvent({ ...base, related: { apiVersion: 'v1', kind: 'Pod', name: 'p' }, series });
    assert.equal(core.count, 7);
    assert.equal(core.lastTimestamp, '2026-11-29T10:05:00Z');
    assert.deepEqual(core.related, { apiVersion: 'v1', kind: 'Pod', name: 'p' });
    assert.deepEqual(toCorePatch({ series }), { count: 7, lastTimestamp: '2026-11-29T10:05:00Z' });
    assert.deepEqual(toCorePatch({ other: 1 }), { other: 1 }, 'anything else as it is');
  });

  it('any count and time: the patch says what the series says', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 1e6 }),
        fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }),
        (count, when) => {
          const lastObservedTime = when.toISOString().replace('Z', '123Z');
          const patch = toCorePatch({ series: { count, lastObservedTime } }) as {
            count: number;
            lastTimestamp: string;
          };
          assert.equal(patch.count, count);
          assert.equal(Date.parse(patch.lastTimestamp), Math.floor(when.getTime() / 1000) * 1000);
        },
      ),
    );
  });
});
