import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  buildEvent,
  eventName,
  eventNamespace,
  isomorphicKey,
  microTime,
  spamKey,
  truncateUtf8,
  validateFacts,
  validateReporter,
} from '../../../src/runtime/events/event.ts';
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

describe('microTime', () => {
  it('formats RFC 3339 with microseconds in UTC', () => {
    assert.equal(microTime(Date.UTC(2026, 10, 22, 1, 2, 3, 123)), '2026-11-22T01:02:03.123000Z');
    assert.equal(microTime(Date.UTC(2026, 10, 22, 1, 2, 3, 123) + 0.456), '2026-11-22T01:02:03.123456Z');
    assert.equal(microTime(0), '1970-01-01T00:00:00.000000Z');
  });
});

describe('event names and namespaces', () => {
  it('names the Event <object>.<16 hex> and keeps valid names as they are', () => {
    assert.equal(eventName('ingester-zone-a', '0123456789abcdef'), 'ingester-zone-a.0123456789abcdef');
  });

  it('folds names that are not DNS subdomains into one', () => {
    assert.equal(eventName('system:controller:Foo', '0123456789abcdef'), 'system-controller-foo.0123456789abcdef');
    assert.equal(eventName(':::', '0123456789abcdef'), 'event.0123456789abcdef');
    const long = eventName('a'.repeat(253), '0123456789abcdef');
    assert.equal(long.length, 253);
  });

  it('always yields a valid Event name (property)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ minLength: 1, maxLength: 300 }),
          fc.string({ unit: 'binary', minLength: 1, maxLength: 300 }),
        ),
        (name) => {
          const out = eventName(name, 'fedcba9876543210');
          assert.ok(out.length <= 253, out);
          assert.match(out, DNS_SUBDOMAIN);
          assert.ok(out.endsWith('.fedcba9876543210'));
        },
      ),
    );
  });

  it('puts Events of cluster-scoped objects in default', () => {
    assert.equal(eventNamespace(sts), 'mimir');
    assert.equal(eventNamespace(node), 'default');
    assert.equal(eventNamespace({ ...node, namespace: '' }), 'default');
  });
});

describe('keys', () => {
  it('makes repeats isomorphic whatever the resourceVersion', () => {
    assert.equal(isomorphicKey(facts()), isomorphicKey(facts({ regarding: { ...sts, resourceVersion: '43' } })));
  });

  it('tells apart every field that distinguishes an event', () => {
    const base = isomorphicKey(facts());
    const variants: Partial<EventFacts>[] = [
      { regarding: { ...sts, name: 'ingester-zone-b' } },
      { regarding: { ...sts, uid: 'u-2' } },
      { related: node },
      { type: 'Normal' },
      { reason: 'RolloutStarted' },
      { action: 'Scale' },
      { note: 'zone c is not ready' },
      { reportingController: 'stateward.dev/other' },
      { reportingInstance: 'stateward-1' },
    ];
    const keys = new Set(variants.map((v) => isomorphicKey(facts(v))));
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

describe('validation', () => {
  it('accepts a well-formed event', () => {
    assert.deepEqual(validateFacts(facts()), []);
  });

  it('refuses what the API server would refuse', () => {
    const cases: [Partial<EventFacts>, RegExp][] = [
      [{ reason: '' }, /reason is required/],
      [{ action: '' }, /action is required/],
      [{ reason: 'r'.repeat(129) }, /reason is longer than 128/],
      [{ action: 'é'.repeat(65) }, /action is longer than 128/],
      [{ type: 'Error' as 'Normal' }, /type must be Normal or Warning/],
      [{ regarding: { ...sts, name: '' } }, /regarding.name is required/],
      [{ related: { ...node, kind: '' } }, /related.kind is required/],
    ];
    for (const [over, expected] of cases) assert.match(validateFacts(facts(over)).join('; '), expected);
  });

  it('checks the reporting controller is a qualified name', () => {
    assert.deepEqual(validateReporter('stateward.dev/rollout', 'pod-0'), []);
    assert.deepEqual(validateReporter('stateward', 'pod-0'), []);
    assert.match(validateReporter('stateward.dev/', 'pod-0').join(), /not a qualified name/);
    assert.match(validateReporter('Not A Name', 'pod-0').join(), /not a qualified name/);
    assert.match(validateReporter('UPPER.dev/x', 'pod-0').join(), /not a qualified name/);
    assert.match(validateReporter('stateward.dev/x', '').join(), /reportingInstance is required/);
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
