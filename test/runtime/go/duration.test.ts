import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  formatGoDuration,
  formatGoDurationNanos,
  formatPromDuration,
  parseGoDuration,
  parseGoDurationNanos,
  parsePromDuration,
} from '../../../src/runtime/go/duration.ts';

// Expected values below were checked against Go 1.26's time package and
// github.com/prometheus/common v0.67.5's model package.

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

describe('parseGoDuration (time.ParseDuration)', () => {
  const valid: [string, bigint][] = [
    ['0', 0n],
    ['-0', 0n],
    ['+0', 0n],
    ['300ms', 300_000_000n],
    ['-1.5h', -5_400_000_000_000n],
    ['2h45m', 9_900_000_000_000n],
    ['1us', 1_000n],
    ['1\u00b5s', 1_000n],
    ['1\u03bcs', 1_000n],
    ['1ns', 1n],
    ['.5s', 500_000_000n],
    ['5.s', 5_000_000_000n],
    ['1h1h', 7_200_000_000_000n],
    ['1m1h', 3_660_000_000_000n],
    ['1.123456789123s', 1_123_456_789n],
    ['0.3333333333333333333h', 1_200_000_000_000n],
    ['9223372036854775807ns', INT64_MAX],
    ['-9223372036854775808ns', INT64_MIN],
    ['2562047h47m16.854775807s', INT64_MAX],
    ['-2562047h47m16.854775808s', INT64_MIN],
  ];
  for (const [text, nanos] of valid) {
    it(`parses ${text}`, () => assert.equal(parseGoDurationNanos(text), nanos));
  }

  it('returns milliseconds, fractional below one', () => {
    assert.equal(parseGoDuration('5m'), 300_000);
    assert.equal(parseGoDuration('1.5s'), 1500);
    assert.equal(parseGoDuration('1500ns'), 0.0015);
    assert.equal(parseGoDuration('-2ms'), -2);
  });

  const invalid: [string, string][] = [
    ['', 'time: invalid duration ""'],
    ['-', 'time: invalid duration "-"'],
    ['1', 'time: missing unit in duration "1"'],
    ['10', 'time: missing unit in duration "10"'],
    ['.s', 'time: invalid duration ".s"'],
    ['1x', 'time: unknown unit "x" in duration "1x"'],
    ['1e3s', 'time: unknown unit "e" in duration "1e3s"'],
    ['1h 1m', 'time: unknown unit "h " in duration "1h 1m"'],
    ['1d', 'time: unknown unit "d" in duration "1d"'],
    ['1\u00e9', 'time: unknown unit "\\xc3\\xa9" in duration "1\\xc3\\xa9"'],
    ['9223372036854775808ns', 'time: invalid duration "9223372036854775808ns"'],
    ['2562047h47m16.854775808s', 'time: invalid duration "2562047h47m16.854775808s"'],
    ['100000000000000000000s', 'time: invalid duration "100000000000000000000s"'],
  ];
  for (const [text, message] of invalid) {
    it(`rejects ${JSON.stringify(text)}`, () =>
      assert.throws(() => parseGoDurationNanos(text), { name: 'SyntaxError', message }));
  }
});

describe('formatGoDuration (time.Duration.String)', () => {
  const cases: [bigint, string][] = [
    [0n, '0s'],
    [1n, '1ns'],
    [999n, '999ns'],
    [1_000n, '1\u00b5s'],
    [1_500n, '1.5\u00b5s'],
    [1_000_000n, '1ms'],
    [1_500_000n, '1.5ms'],
    [5_000_000n, '5ms'],
    [999_999_999n, '999.999999ms'],
    [1_000_000_000n, '1s'],
    [1_500_000_000n, '1.5s'],
    [10_000_000_000n, '10s'],
    [300_000_000_000n, '5m0s'],
    [3_600_000_000_000n, '1h0m0s'],
    [3_600_000_000_001n, '1h0m0.000000001s'],
    [9_900_000_000_000n, '2h45m0s'],
    [-1_500n, '-1.5\u00b5s'],
    [INT64_MAX, '2562047h47m16.854775807s'],
    [INT64_MIN, '-2562047h47m16.854775808s'],
  ];
  for (const [nanos, expected] of cases) {
    it(`formats ${nanos}ns as ${expected}`, () => assert.equal(formatGoDurationNanos(nanos), expected));
  }

  it('formats milliseconds, including sub-millisecond fractions', () => {
    assert.equal(formatGoDuration(300_000), '5m0s');
    assert.equal(formatGoDuration(5), '5ms');
    assert.equal(formatGoDuration(0.0015), '1.5\u00b5s');
    assert.equal(formatGoDuration(365 * 86_400_000), '8760h0m0s');
  });

  it('round-trips every int64 nanosecond count through parse', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: INT64_MIN, max: INT64_MAX }), (nanos) => {
        assert.equal(parseGoDurationNanos(formatGoDurationNanos(nanos)), nanos);
      }),
    );
  });

  it('round-trips whole milliseconds through parse', () => {
    fc.assert(
      fc.property(fc.integer({ min: -9_000_000_000_000, max: 9_000_000_000_000 }), (ms) => {
        assert.equal(parseGoDuration(formatGoDuration(ms)), ms);
      }),
    );
  });

  it('round-trips nanosecond-precise milliseconds within a day', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -86_400_000_000_000n, max: 86_400_000_000_000n }), (nanos) => {
        const ms = parseGoDuration(formatGoDurationNanos(nanos));
        assert.equal(formatGoDuration(ms), formatGoDurationNanos(nanos));
      }),
    );
  });
});

describe('parsePromDuration (model.ParseDuration)', () => {
  const valid: [string, number][] = [
    ['0', 0],
    ['0s', 0],
    ['1y', 31_536_000_000],
    ['365d', 31_536_000_000],
    ['1w', 604_800_000],
    ['1d12h', 129_600_000],
    ['90s', 90_000],
    ['1ms', 1],
    ['1s500ms', 1500],
    ['1y1w1d1h1m1s1ms', 32_230_861_001],
    ['106751d23h47m16s854ms', 9_223_372_036_854],
  ];
  for (const [text, ms] of valid) {
    it(`parses ${text}`, () => assert.equal(parsePromDuration(text), ms));
  }

  const invalid: [string, string, string][] = [
    ['', 'SyntaxError', 'empty duration string'],
    ['1.5h', 'SyntaxError', 'unknown unit "." in duration "1.5h"'],
    ['1h1d', 'SyntaxError', 'not a valid duration string: "1h1d"'],
    ['1h1h', 'SyntaxError', 'not a valid duration string: "1h1h"'],
    ['-1h', 'SyntaxError', 'not a valid duration string: "-1h"'],
    ['00', 'SyntaxError', 'not a valid duration string: "00"'],
    ['1', 'SyntaxError', 'not a valid duration string: "1"'],
    ['1x', 'SyntaxError', 'unknown unit "x" in duration "1x"'],
    ['1 h', 'SyntaxError', 'unknown unit " h" in duration "1 h"'],
    ['18446744073709551616s', 'SyntaxError', 'not a valid duration string: "18446744073709551616s"'],
    ['293y', 'RangeError', 'duration out of range'],
    ['106751d23h47m16s855ms', 'RangeError', 'duration out of range'],
  ];
  for (const [text, name, message] of invalid) {
    it(`rejects ${JSON.stringify(text)}`, () => assert.throws(() => parsePromDuration(text), { name, message }));
  }
});

describe('formatPromDuration (model.Duration.String)', () => {
  const cases: [number, string][] = [
    [0, '0s'],
    [1, '1ms'],
    [1000, '1s'],
    [60_000, '1m'],
    [90_000, '1m30s'],
    [31_536_000_000, '1y'],
    [604_800_000, '1w'],
    [7_776_000_000, '90d'],
    [90_061_001, '1d1h1m1s1ms'],
    [-5000, '-5s'],
    [0.9, '0s'],
  ];
  for (const [ms, expected] of cases) {
    it(`formats ${ms}ms as ${expected}`, () => assert.equal(formatPromDuration(ms), expected));
  }

  it('round-trips every representable millisecond count through parse', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 9_223_372_036_854 }), (ms) => {
        assert.equal(parsePromDuration(formatPromDuration(ms)), ms);
      }),
    );
  });
});
