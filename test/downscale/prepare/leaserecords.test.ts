import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  LEASE_LAST_DOWNSCALES_ANNOTATION,
  lastDownscaleOf,
  parseLeaseRecords,
  recordInLease,
  type LeaseRecord,
} from '../../../src/downscale/prepare/leaserecords.ts';
import { formatRfc3339 } from '../../../src/vocabulary/rfc3339.ts';
import { assertReaching, SKIP } from '../../support/reach.ts';

const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/);
// Whole seconds between 2000 and 2100: what the record keeps, as grafana.com/last-downscale does.
const time = fc.integer({ min: Date.UTC(2000, 0, 1) / 1000, max: Date.UTC(2100, 0, 1) / 1000 }).map((s) => s * 1000);
const stamp = time.map(formatRfc3339);
// Plain objects, as parsing gives them (fast-check's records compare unequal by prototype otherwise).
const record = fc.record({ at: time, over: fc.oneof(fc.constant(''), stamp) }).map((r) => ({ ...r }));
const records = fc.dictionary(name, record).map((d) => new Map<string, LeaseRecord>(Object.entries(d)));

describe('downscale records on the group Lease', () => {
  it('reads back what it wrote, with the new record and only the group', () => {
    fc.assert(
      fc.property(records, name, record, fc.array(name), (before, self, mine, others) => {
        const group = [...others, self];
        const after = parseLeaseRecords(recordInLease(before, self, mine, group));
        assert.ok(!('error' in after));
        assert.deepEqual(after.get(self), mine);
        for (const [n, r] of after) {
          assert.ok(group.includes(n), `${n} is in the group`);
          if (n !== self) assert.deepEqual(r, before.get(n));
        }
        for (const n of group) if (n !== self && before.has(n)) assert.deepEqual(after.get(n), before.get(n));
      }),
    );
  });

  it("counts the Lease's record while the annotation is what it was over, or its copy — even when that is earlier (a replica whose clock runs behind)", () => {
    fc.assert(
      fc.property(record, fc.boolean(), (mine, copied) => {
        const annotation = copied ? formatRfc3339(mine.at) : mine.over;
        const parsed = annotation === '' ? undefined : Date.parse(annotation);
        assert.equal(lastDownscaleOf(annotation === '' ? undefined : annotation, parsed, mine), mine.at);
      }),
    );
    // The seed-7 clock-step soak: the previous downscale at 12:00:00 by a replica with a good clock, this one
    // recorded at 11:50:30 by a replica 10 minutes behind. Counted from 12:00:00, the next zone went seconds later.
    const previous = '2026-11-29T12:00:00Z';
    const behind = { at: Date.parse('2026-11-29T11:50:30Z'), over: previous };
    assert.equal(lastDownscaleOf(previous, Date.parse(previous), behind), behind.at);
  });

  it('takes the later of the two when the annotation changed otherwise since (rollout-operator in between), and an unreadable annotation then wins', () => {
    assertReaching(
      fc.tuple(record, time),
      ([mine, other]) => {
        const annotation = formatRfc3339(other);
        if (annotation === mine.over || other === mine.at) return SKIP;
        assert.equal(lastDownscaleOf(annotation, other, mine), Math.max(other, mine.at));
      },
      { floor: 0.9 }, // about 99%: a record over exactly that stamp, or at exactly that time, is rare
    );
    const broken = { error: 'broken' };
    assert.deepEqual(lastDownscaleOf('yesterday', broken, { at: 0, over: '' }), broken);
    assert.equal(lastDownscaleOf(undefined, undefined, undefined), undefined);
    assert.equal(lastDownscaleOf('x', 5, undefined), 5);
  });

  it('says what is wrong with an annotation it cannot read', () => {
    assert.deepEqual(parseLeaseRecords(undefined), new Map());
    assert.deepEqual(parseLeaseRecords(''), new Map());
    for (const [value, why] of [
      ['{broken', /is not JSON/],
      ['[]', /is not a JSON object of StatefulSet names to records/],
      ['null', /is not a JSON object/],
      ['{"zone-a": 5}', /the record of zone-a is not \{"at"/],
      ['{"zone-a": {"at": 5}}', /the record of zone-a is not \{"at"/],
      ['{"zone-a": {"at": "yesterday", "over": ""}}', /the record of zone-a does not parse: parsing time "yesterday"/],
    ] as const) {
      const parsed = parseLeaseRecords(value);
      assert.ok('error' in parsed, value);
      assert.match(parsed.error, why);
      assert.ok(parsed.error.startsWith(LEASE_LAST_DOWNSCALES_ANNOTATION));
    }
  });
});
