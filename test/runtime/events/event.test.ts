import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { buildEvent, eventName, seriesKey, spamKey, truncateUtf8 } from '../../../src/runtime/events/event.ts';
import type { EventFacts, ObjectRef } from '../../../src/runtime/events/event.ts';

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const sts: ObjectRef = {
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  namespace: 'mimir',
  name: 'ingester-zone-a',
  uid: 'u-1',
  resourceVersion: '42',
};
const node: ObjectRef = { apiVersion: 'v1', kind: 'Node', name: 'node-1' };

function facts(over: Partial<EventFacts> = {}): EventFacts {
  return {
    regarding: sts,
    type: 'Warning',
    reason: 'RolloutBlocked',
    action: 'Rollout',
    note: 'zone b is not ready',
    reportingController: 'stateward.dev/rollout',
    reportingInstance: 'stateward-0',
    ...over,
  };
}

describe('truncateUtf8', () => {
  it('leaves a note within the limit alone and marks a cut one', () => {
    assert.equal(truncateUtf8('short', 1024), 'short');
    const cut = truncateUtf8('x'.repeat(2000), 1024);
    assert.equal(bytes(cut), 1024);
    assert.ok(cut.endsWith('...'));
  });

  it('never splits a multi-byte character', () => {
    // '€' is 3 bytes, '😀' is 4: 1021 bytes of room fall inside one of them.
    for (const ch of ['€', '😀', 'é']) {
      const cut = truncateUtf8(ch.repeat(1000), 1024);
      assert.ok(bytes(cut) <= 1024);
      assert.ok(!cut.includes('\uFFFD'), `no replacement character for ${ch}`);
      assert.equal(cut.slice(0, -3), ch.repeat((cut.length - 3) / ch.length));
    }
  });

  it('always fits the limit and keeps a prefix of the input (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 600 }), fc.integer({ min: 3, max: 300 }), (s, limit) => {
        const out = truncateUtf8(s, limit);
        assert.ok(bytes(out) <= limit);
        if (bytes(s) <= limit) assert.equal(out, s);
        else {
          assert.ok(out.endsWith('...'));
          assert.ok(s.startsWith(out.slice(0, -3)));
        }
      }),
    );
  });
});

describe('event names and namespaces', () => {
  it('names the Event <object>.<16 hex> and keeps valid names as they are', () => {
    assert.equal(eventName('ingester-zone-a', '0123456789abcdef'), 'ingester-zone-a.0123456789abcdef');
  });

  it('cuts a long object name so the Event name stays within 253 characters', () => {
    const long = eventName(`${'a'.repeat(235)}-b.c`, '0123456789abcdef');
    assert.equal(long, `${'a'.repeat(235)}.0123456789abcdef`);
  });

  it('yields a valid Event name for every object name Kubernetes accepts (property)', () => {
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
    const subdomain = fc
      .array(label, { minLength: 1, maxLength: 8 })
      .map((labels) => labels.join('.'))
      .filter((name) => name.length <= 253);
    fc.assert(
      fc.property(subdomain, (name) => {
        const out = eventName(name, 'fedcba9876543210');
        assert.ok(out.length <= 253, out);
        assert.match(out, DNS_SUBDOMAIN);
        assert.ok(out.endsWith('.fedcba9876543210'));
        if (name.length <= 236) assert.equal(out, `${name}.fedcba9876543210`);
      }),
    );
  });
});

describe('keys', () => {
  it('makes repeats isomorphic whatever the resourceVersion', () => {
    assert.equal(seriesKey(facts()), seriesKey(facts({ regarding: { ...sts, resourceVersion: '43' } })));
  });

  it('tells apart every field that distinguishes an event', () => {
    const base = seriesKey(facts());
    const variants: Partial<EventFacts>[] = [
      { regarding: { ...sts, name: 'ingester-zone-b' } },
      { regarding: { ...sts, uid: 'u-2' } },
      { related: node },
      { type: 'Normal' },
      { reason: 'RolloutStarted' },
      { action: 'Scale' },
      { note: 'zone c is not ready' },
    ];
    const keys = new Set(variants.map((v) => seriesKey(facts(v))));
    assert.equal(keys.size, variants.length);
    assert.ok(!keys.has(base));
  });

  it('budgets spam per object: by uid, else by namespace/kind/name', () => {
    assert.equal(spamKey(sts), spamKey({ ...sts, resourceVersion: '7', name: 'renamed?' }));
    assert.notEqual(spamKey(sts), spamKey({ ...sts, uid: 'u-2' }));
    assert.equal(spamKey(node), spamKey({ ...node, apiVersion: 'v2' }));
    assert.notEqual(spamKey(node), spamKey({ ...node, name: 'node-2' }));
  });
});

describe('buildEvent', () => {
  it('builds an events.k8s.io/v1 Event', () => {
    const at = Date.UTC(2026, 10, 22, 1, 2, 3, 123);
    const event = buildEvent(facts({ related: node }), 'ingester-zone-a.0123456789abcdef', at);
    assert.deepEqual(event, {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: 'ingester-zone-a.0123456789abcdef', namespace: 'mimir' },
      eventTime: '2026-11-22T01:02:03.123000Z',
      type: 'Warning',
      reason: 'RolloutBlocked',
      action: 'Rollout',
      note: 'zone b is not ready',
      regarding: sts,
      related: node,
      reportingController: 'stateward.dev/rollout',
      reportingInstance: 'stateward-0',
    });
  });

  it('omits an absent related object and files cluster-scoped objects in default', () => {
    const event = buildEvent(facts({ regarding: node }), 'node-1.0123456789abcdef', 0);
    assert.equal(event.metadata.namespace, 'default');
    assert.ok(!('related' in event));
    assert.deepEqual(event.regarding, node);
  });
});
