import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isPaused, parseMaxUnavailable } from '../../src/rollout/annotations.ts';

describe('rollout-max-unavailable', () => {
  it('parses counts and percentages as rollout-operator does', () => {
    const cases: [string | undefined, number, number][] = [
      [undefined, 10, 1],
      ['3', 10, 3],
      [' 2 ', 10, 2],
      ['50%', 10, 5],
      ['50%', 3, 1],
      ['10%', 3, 1],
      ['100%', 7, 7],
      ['1%', 0, 1],
    ];
    for (const [raw, replicas, want] of cases) {
      const got = parseMaxUnavailable(raw, replicas);
      assert.equal(got.value, want, `${raw} of ${replicas}`);
      assert.equal(got.warning, undefined);
    }
  });

  it('falls back to 1 with a warning for invalid, zero, negative and over-100% values', () => {
    for (const raw of ['0', '-1', 'abc', '', '150%', '0%', '1.5', '2x', '%']) {
      const got = parseMaxUnavailable(raw, 10);
      assert.equal(got.value, 1, raw);
      assert.match(got.warning ?? '', /^annotation rollout-max-unavailable=".*" .*; using 1$/, raw);
    }
  });

  it('pauses only on exactly "true"', () => {
    assert.ok(isPaused({ 'grafana.com/rollout-paused': 'true' }));
    for (const v of ['True', 'yes', '1', '']) assert.ok(!isPaused({ 'grafana.com/rollout-paused': v }));
    assert.ok(!isPaused(undefined));
  });
});
