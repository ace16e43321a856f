import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  LEASE_LAST_DOWNSCALES_ANNOTATION,
  latestLastDownscales,
  parseLeaseRecords,
  recordInLease,
} from '../../../src/downscale/prepare/leaserecords.ts';
import type { LastDownscale } from '../../../src/downscale/mintime.ts';

const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/);
// Whole seconds between 2000 and 2100: what the record keeps, as grafana.com/last-downscale does.
const time = fc.integer({ min: Date.UTC(2000, 0, 1) / 1000, max: Date.UTC(2100, 0, 1) / 1000 }).map((s) => s * 1000);
const records = fc.dictionary(name, time).map((d) => new Map(Object.entries(d)));

describe('downscale records on the group Lease', () => {
  it('reads back what it wrote, to the second, with the new record and only the group', () => {
    fc.assert(
      fc.property(records, name, time, fc.array(name), (before, self, at, others) => {
        const group = [...others, self];
        const after = parseLeaseRecords(recordInLease(before, self, at, group));
        assert.ok(!('error' in after));
        assert.equal(after.get(self), at);
        for (const [n, t] of after) {
          assert.ok(group.includes(n), `${n} is in the group`);
          if (n !== self) assert.equal(t, before.get(n));
        }
        for (const n of group) if (n !== self && before.has(n)) assert.equal(after.get(n), before.get(n));
      }),
    );
  });

  it('min-time counts the later of the two records, and an unreadable annotation wins over a time', () => {
    const lastDownscale = fc.oneof(time, fc.constant({ error: 'broken' }));
    fc.assert(
      fc.property(fc.dictionary(name, lastDownscale), records, (annotations, lease) => {
        const fromAnnotations = new Map<string, LastDownscale>(Object.entries(annotations));
        const merged = latestLastDownscales(fromAnnotations, lease);
        for (const n of new Set([...fromAnnotations.keys(), ...lease.keys()])) {
          const a = fromAnnotations.get(n);
          const l = lease.get(n);
          if (a !== undefined && typeof a !== 'number') assert.deepEqual(merged.get(n), a);
          else assert.equal(merged.get(n), Math.max(a ?? -Infinity, l ?? -Infinity));
        }
      }),
    );
  });

  it('says what is wrong with an annotation it cannot read', () => {
    assert.deepEqual(parseLeaseRecords(undefined), new Map());
    assert.deepEqual(parseLeaseRecords(''), new Map());
    for (const [value, why] of [
      ['{broken', /is not JSON/],
      ['[]', /is not a JSON object of StatefulSet names to times/],
      ['null', /is not a JSON object/],
      ['{"zone-a": 5}', /the time of zone-a does not parse: not a string/],
      ['{"zone-a": "yesterday"}', /the time of zone-a does not parse: parsing time "yesterday"/],
    ] as const) {
      const parsed = parseLeaseRecords(value);
      assert.ok('error' in parsed, value);
      assert.match(parsed.error, why);
      assert.ok(parsed.error.startsWith(LEASE_LAST_DOWNSCALES_ANNOTATION));
    }
  });
});
