import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { microTime } from '../../../src/runtime/kube/time.ts';

describe('microTime', () => {
  it('formats RFC 3339 with microseconds in UTC', () => {
    assert.equal(microTime(Date.UTC(2026, 10, 22, 1, 2, 3, 123)), '2026-11-22T01:02:03.123000Z');
    assert.equal(microTime(Date.UTC(2026, 10, 22, 1, 2, 3, 123) + 0.456), '2026-11-22T01:02:03.123456Z');
    assert.equal(microTime(0), '1970-01-01T00:00:00.000000Z');
  });
});
