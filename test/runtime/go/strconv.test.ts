import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  QUOTED_VALUE_MAX,
  formatGoFloat,
  parseGoBool,
  parseGoFloat,
  parseGoInt,
  quoteCut,
  quoteGo,
} from '../../../src/runtime/go/strconv.ts';

// Expected values below were checked against Go 1.26's strconv.

describe('parseGoInt (strconv.ParseInt(s, 0, 64))', () => {
  const valid: [string, bigint][] = [
    ['0', 0n],
    ['8001', 8001n],
    ['+5', 5n],
    ['-1', -1n],
    ['0x10', 16n],
    ['0X1f', 31n],
    ['0o17', 15n],
    ['0O7', 7n],
    ['017', 15n],
    ['0b101', 5n],
    ['0B1', 1n],
    ['1_000', 1000n],
    ['0x_1f', 31n],
    ['0_7', 7n],
    ['9223372036854775807', 9223372036854775807n],
    ['-9223372036854775808', -9223372036854775808n],
  ];
  for (const [text, expected] of valid) {
    it(`parses ${text}`, () => assert.equal(parseGoInt(text), expected));
  }

  const syntax = ['', '-', '+', 'abc', '08', '0x', '0b', '0x1g', '1e3', ' 1', '1.0', '_1', '1_', '1__0', '0_x1', '٣'];
  for (const text of syntax) {
    it(`rejects ${JSON.stringify(text)} as a syntax error`, () => {
      assert.throws(() => parseGoInt(text), {
        name: 'SyntaxError',
        message: `strconv.ParseInt: parsing ${quoteGo(text)}: invalid syntax`,
      });
    });
  }

  const range = ['9223372036854775808', '-9223372036854775809', '18446744073709551616', '99999999999999999999x'];
  for (const text of range) {
    it(`rejects ${text} as out of range`, () => {
      assert.throws(() => parseGoInt(text), {
        name: 'RangeError',
        message: `strconv.ParseInt: parsing "${text}": value out of range`,
      });
    });
  }
});

describe('parseGoFloat (strconv.ParseFloat(s, 64))', () => {
  const valid: [string, number][] = [
    ['0', 0],
    ['5', 5],
    ['1.5', 1.5],
    ['-1.5', -1.5],
    ['.5', 0.5],
    ['5.', 5],
    ['1e5', 1e5],
    ['1E-5', 1e-5],
    ['1_000.5', 1000.5],
    ['00.5', 0.5],
    ['0x1p-2', 0.25],
    ['0x1.8p1', 3],
    ['1e-400', 0],
    ['inf', Infinity],
    ['+Inf', Infinity],
    ['-infinity', -Infinity],
  ];
  for (const [text, expected] of valid) {
    it(`parses ${text}`, () => assert.equal(parseGoFloat(text), expected));
  }
  it('parses nan in any case', () => assert.ok(Number.isNaN(parseGoFloat('NaN')) && Number.isNaN(parseGoFloat('nan'))));

  const syntax = ['', '.', '1e', '1e+', 'abc', '1_.5', '1._5', 'infin', '+nan', '0x1', '0xp1', '1.5.5', '1,5', '0x'];
  for (const text of syntax) {
    it(`rejects ${JSON.stringify(text)} as a syntax error`, () => {
      assert.throws(() => parseGoFloat(text), {
        name: 'SyntaxError',
        message: `strconv.ParseFloat: parsing ${quoteGo(text)}: invalid syntax`,
      });
    });
  }
  for (const text of ['1e400', '-1e400', '0x1p1024']) {
    it(`rejects ${text} as out of range`, () => assert.throws(() => parseGoFloat(text), { name: 'RangeError' }));
  }
});

describe('formatGoFloat (strconv.FormatFloat(x, g, -1, 64))', () => {
  const cases: [number, string][] = [
    [0, '0'],
    [-0, '-0'],
    [5, '5'],
    [0.5, '0.5'],
    [123456, '123456'],
    [1e6, '1e+06'],
    [1234567, '1.234567e+06'],
    [1e21, '1e+21'],
    [1e-4, '0.0001'],
    [1e-5, '1e-05'],
    [1.5e-7, '1.5e-07'],
    [1e100, '1e+100'],
    [0.1, '0.1'],
    [1 / 3, '0.3333333333333333'],
    [5e-324, '5e-324'],
    [Infinity, '+Inf'],
    [-Infinity, '-Inf'],
    [NaN, 'NaN'],
  ];
  for (const [value, expected] of cases) {
    it(`formats ${value} as ${expected}`, () => assert.equal(formatGoFloat(value), expected));
  }

  it('round-trips every finite double through parseGoFloat', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => {
        assert.ok(Object.is(parseGoFloat(formatGoFloat(x)), x));
      }),
    );
  });
});

describe('parseGoBool (strconv.ParseBool)', () => {
  for (const text of ['1', 't', 'T', 'true', 'TRUE', 'True'])
    it(`${text} is true`, () => assert.equal(parseGoBool(text), true));
  for (const text of ['0', 'f', 'F', 'false', 'FALSE', 'False'])
    it(`${text} is false`, () => assert.equal(parseGoBool(text), false));
  for (const text of ['', 'yes', 'tRUE', 'on', '2']) {
    it(`rejects ${JSON.stringify(text)}`, () => assert.throws(() => parseGoBool(text), { name: 'SyntaxError' }));
  }
});

describe('quoteGo (strconv.Quote)', () => {
  const cases: [string, string][] = [
    ['', '""'],
    ['abc', '"abc"'],
    ['a"b', '"a\\"b"'],
    ['a\\b', '"a\\\\b"'],
    ['\n\t\x07\x00\x7f', '"\\n\\t\\a\\x00\\x7f"'],
    ['é', '"é"'],
    ['\u00a0', '"\\u00a0"'],
    ['\u200b', '"\\u200b"'],
    ['😀', '"😀"'],
    ['x y', '"x y"'],
  ];
  for (const [input, expected] of cases) {
    it(`quotes ${JSON.stringify(input)} as ${expected}`, () => assert.equal(quoteGo(input), expected));
  }

  // The rule character by character, as Go's strconv.Quote states it: an
  // independent model of the one-regex-pass implementation.
  const model = (s: string): string => {
    let out = '"';
    for (const ch of s) {
      const cp = ch.codePointAt(0)!;
      const short: Record<string, string> = {
        '\x07': '\\a',
        '\b': '\\b',
        '\f': '\\f',
        '\n': '\\n',
        '\r': '\\r',
        '\t': '\\t',
        '\v': '\\v',
      };
      if (ch === '"' || ch === '\\') out += '\\' + ch;
      else if (ch === ' ' || /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u.test(ch)) out += ch;
      else if (short[ch]) out += short[ch];
      else if (cp < 0x20 || cp === 0x7f) out += '\\x' + cp.toString(16).padStart(2, '0');
      else if (cp < 0x10000) out += '\\u' + cp.toString(16).padStart(4, '0');
      else out += '\\U' + cp.toString(16).padStart(8, '0');
    }
    return out + '"';
  };
  it('escapes exactly what the character-by-character rule escapes, lone surrogates included', () => {
    const unit = fc.constantFrom(
      '"',
      '\\',
      '\ud800',
      '\udfff',
      'a',
      ' ',
      '\u200b',
      '\u00a0',
      '😀',
      '\n',
      '\x07',
      '\x7f',
      'é',
      '\u0301',
    );
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }), fc.string({ unit })), (s) =>
        assert.equal(quoteGo(s), model(s)),
      ),
      { numRuns: 2000 },
    );
  });

  it('quoteCut quotes a value whole up to QUOTED_VALUE_MAX characters and cuts a longer one, saying how long it was', () => {
    const limit = 'a'.repeat(QUOTED_VALUE_MAX);
    assert.equal(quoteCut(limit), quoteGo(limit));
    assert.equal(quoteCut(limit + '\n'), `${quoteGo(limit)}…(${QUOTED_VALUE_MAX + 1} chars)`);
    assert.equal(
      quoteCut('x'.repeat(100_000), JSON.stringify),
      `${JSON.stringify('x'.repeat(QUOTED_VALUE_MAX))}…(100000 chars)`,
    );
  });
});
