// Durations in the two textual forms the rollout-operator's command line uses:
// Go's time.ParseDuration / Duration.String (`1h30m`, `1.5s`, `300ms`) and
// Prometheus' model.ParseDuration / Duration.String (`1y`, `2w`, `1d12h`).
//
// Stateward holds durations as milliseconds (a number, fractional below a
// millisecond). Go durations are integer nanoseconds; the *Nanos functions
// work in that exact representation and the millisecond ones convert at the
// edge, so parsing and formatting match Go digit for digit.

import { quoteCut } from './strconv.ts';

const NANOS_PER_MILLI = 1_000_000n;
const INT64_MAX = (1n << 63n) - 1n;
const TWO_POW_63 = 1n << 63n;

/** Exact conversion of integer nanoseconds to (possibly fractional) milliseconds. */
export function nanosToMillis(ns: bigint): number {
  return Number(ns / NANOS_PER_MILLI) + Number(ns % NANOS_PER_MILLI) / 1e6;
}

/** Milliseconds to integer nanoseconds, rounding below a nanosecond. */
export function millisToNanos(ms: number): bigint {
  if (!Number.isFinite(ms)) throw new RangeError(`duration ${ms} ms is not finite`);
  const whole = Math.trunc(ms);
  // Subtracting the integer part is exact in binary floating point, so only
  // the sub-millisecond remainder is rounded.
  return BigInt(whole) * NANOS_PER_MILLI + BigInt(Math.round((ms - whole) * 1e6));
}

// ---------------------------------------------------------------- Go format

const GO_UNIT_NANOS: ReadonlyMap<string, bigint> = new Map([
  ['ns', 1n],
  ['us', 1_000n],
  ['\u00b5s', 1_000n], // micro sign
  ['\u03bcs', 1_000n], // Greek mu
  ['ms', 1_000_000n],
  ['s', 1_000_000_000n],
  ['m', 60_000_000_000n],
  ['h', 3_600_000_000_000n],
]);

const utf8 = new TextEncoder();

/**
 * time's own quoting for error messages: ASCII as is (with " and \ escaped),
 * everything else as \x bytes of its UTF-8 encoding.
 */
function quoteLikeTime(s: string): string {
  // Byte by byte of the UTF-8 encoding: ASCII bytes are the characters
  // themselves, and every other character encodes to bytes >= 0x80.
  let out = '"';
  for (const byte of utf8.encode(s)) {
    if (byte >= 0x80 || byte < 0x20) {
      out += '\\x' + byte.toString(16).padStart(2, '0');
    } else {
      const ch = String.fromCharCode(byte);
      out += ch === '"' || ch === '\\' ? '\\' + ch : ch;
    }
  }
  return out + '"';
}

function goDurationError(message: string, input: string): SyntaxError {
  return new SyntaxError(`time: ${message} ${quoteCut(input, quoteLikeTime)}`);
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9' && c.length === 1;
}

/**
 * time.ParseDuration to integer nanoseconds: a sign, then one or more
 * decimal numbers each with a unit (ns, us, µs, ms, s, m, h). A bare `0` is
 * the only number allowed without a unit. Throws SyntaxError with Go's text.
 */
export function parseGoDurationNanos(input: string): bigint {
  let s = input;
  let negative = false;
  if (s[0] === '-' || s[0] === '+') {
    negative = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') throw goDurationError('invalid duration', input);
  let total = 0n;
  while (s !== '') {
    if (!(s[0] === '.' || isDigit(s[0]))) throw goDurationError('invalid duration', input);

    // Integer part; Go rejects it once it passes 2^63.
    // Plain numbers while they are exact (below 2^53): BigInt steps per digit
    // made a 100 KB annotation of short components take ~40 ms to refuse.
    let i = 0;
    let small = 0;
    for (; small < 1e14 && isDigit(s[i]); i++) small = small * 10 + (s.charCodeAt(i) - 48);
    let whole = BigInt(small);
    for (; isDigit(s[i]); i++) {
      if (whole > TWO_POW_63 / 10n) throw goDurationError('invalid duration', input);
      whole = whole * 10n + BigInt(s[i]!);
      if (whole > TWO_POW_63) throw goDurationError('invalid duration', input);
    }
    const sawWhole = i > 0;
    s = s.slice(i);

    // Fraction; digits past int64 precision are dropped, as Go does.
    let fraction = 0n;
    let scale = 1; // a float64 in Go, multiplied up digit by digit
    let sawFraction = false;
    if (s[0] === '.') {
      s = s.slice(1);
      let overflow = false;
      let j = 0;
      for (; isDigit(s[j]); j++) {
        if (overflow) continue;
        if (fraction > INT64_MAX / 10n) {
          overflow = true;
          continue;
        }
        const next = fraction * 10n + BigInt(s[j]!);
        if (next > TWO_POW_63) {
          overflow = true;
          continue;
        }
        fraction = next;
        scale *= 10;
      }
      sawFraction = j > 0;
      s = s.slice(j);
    }
    if (!sawWhole && !sawFraction) throw goDurationError('invalid duration', input);

    let u = 0;
    while (u < s.length && !(s[u] === '.' || isDigit(s[u]))) u++;
    if (u === 0) throw goDurationError('missing unit in duration', input);
    const unitName = s.slice(0, u);
    s = s.slice(u);
    const unit = GO_UNIT_NANOS.get(unitName);
    if (unit === undefined)
      throw goDurationError(`unknown unit ${quoteCut(unitName, quoteLikeTime)} in duration`, input);
    if (whole > TWO_POW_63 / unit) throw goDurationError('invalid duration', input);
    let value = whole * unit;
    if (fraction > 0n) {
      // Go computes the fractional nanoseconds in float64 and truncates;
      // doing the same keeps results identical to the last nanosecond.
      value += BigInt(Math.trunc(Number(fraction) * (Number(unit) / scale)));
      if (value > TWO_POW_63) throw goDurationError('invalid duration', input);
    }
    total += value;
    if (total > TWO_POW_63) throw goDurationError('invalid duration', input);
  }
  if (negative) return -total;
  if (total > INT64_MAX) throw goDurationError('invalid duration', input);
  return total;
}

/** time.ParseDuration, in milliseconds. */
export function parseGoDuration(input: string): number {
  return nanosToMillis(parseGoDurationNanos(input));
}

/** Digits of v after dropping `precision` decimals, and those decimals without trailing zeros. */
function splitFraction(v: bigint, precision: number): { whole: bigint; fraction: string } {
  const divisor = 10n ** BigInt(precision);
  const decimals = (v % divisor).toString().padStart(precision, '0').replace(/0+$/, '');
  return { whole: v / divisor, fraction: decimals === '' ? '' : '.' + decimals };
}

/**
 * time.Duration.String: `1h2m3.5s`, `5m0s`, `1.5ms`, `300µs`, `0s`. Under a
 * second the largest fitting unit is used; from a second on, h/m/s with
 * leading units omitted when zero but inner ones kept (`1h0m0s`).
 */
export function formatGoDurationNanos(ns: bigint): string {
  const sign = ns < 0n ? '-' : '';
  const u = ns < 0n ? -ns : ns;
  if (u === 0n) return '0s';
  if (u < 1_000_000_000n) {
    const [precision, unit] = u < 1_000n ? [0, 'ns'] : u < 1_000_000n ? [3, '\u00b5s'] : [6, 'ms'];
    const { whole, fraction } = splitFraction(u, precision);
    return `${sign}${whole}${fraction}${unit}`;
  }
  const { whole: seconds, fraction } = splitFraction(u, 9);
  let out = `${seconds % 60n}${fraction}s`;
  const minutes = seconds / 60n;
  if (minutes > 0n) {
    out = `${minutes % 60n}m${out}`;
    // Go stops at hours because days vary in length.
    const hours = minutes / 60n;
    if (hours > 0n) out = `${hours}h${out}`;
  }
  return sign + out;
}

/** time.Duration.String for a duration in milliseconds. */
export function formatGoDuration(ms: number): string {
  return formatGoDurationNanos(millisToNanos(ms));
}

// -------------------------------------------------------- Prometheus format

// Units in the only order Prometheus accepts them, largest first, so that
// `1m1d` cannot be misread as one month and a day.
const PROM_UNITS: readonly { name: string; millis: bigint }[] = [
  { name: 'y', millis: 365n * 86_400_000n },
  { name: 'w', millis: 7n * 86_400_000n },
  { name: 'd', millis: 86_400_000n },
  { name: 'h', millis: 3_600_000n },
  { name: 'm', millis: 60_000n },
  { name: 's', millis: 1_000n },
  { name: 'ms', millis: 1n },
];

/**
 * Prometheus model.ParseDuration, in milliseconds: integers with units
 * y, w, d, h, m, s, ms, each at most once and largest first (`1y`, `1d12h`,
 * `90s`); `0` alone is allowed. No fractions, no sign. Throws with
 * Prometheus' error text (RangeError for overflow, SyntaxError otherwise).
 */
export function parsePromDuration(input: string): number {
  if (input === '0') return 0;
  if (input === '') throw new SyntaxError('empty duration string');
  const invalid = () => new SyntaxError(`not a valid duration string: ${quoteCut(input)}`);
  let s = input;
  let totalNanos = 0n;
  let lastUnit = -1;
  while (s !== '') {
    if (!isDigit(s[0])) throw invalid();
    let i = 0;
    while (isDigit(s[i])) i++;
    const value = BigInt(s.slice(0, i));
    if (value >= 1n << 64n) throw invalid(); // strconv.ParseUint overflow
    s = s.slice(i);
    let u = 0;
    while (u < s.length && !isDigit(s[u])) u++;
    if (u === 0) throw invalid();
    const unitName = s.slice(0, u);
    s = s.slice(u);
    const position = PROM_UNITS.findIndex((unit) => unit.name === unitName);
    if (position < 0) throw new SyntaxError(`unknown unit ${quoteCut(unitName)} in duration ${quoteCut(input)}`);
    if (position <= lastUnit) throw invalid();
    lastUnit = position;
    const unitNanos = PROM_UNITS[position]!.millis * NANOS_PER_MILLI;
    // Prometheus durations are time.Durations underneath: at most ~292 years.
    if (value > TWO_POW_63 / unitNanos) throw new RangeError('duration out of range');
    totalNanos += value * unitNanos;
    if (totalNanos > INT64_MAX) throw new RangeError('duration out of range');
  }
  return Number(totalNanos / NANOS_PER_MILLI);
}

/**
 * Prometheus model.Duration.String: `0s`, `1y`, `90d`, `1d12h`, `1m30s500ms`.
 * Years and weeks appear only when they divide the duration exactly (90d,
 * not 12w6d); sub-millisecond parts are dropped.
 */
export function formatPromDuration(ms: number): string {
  let rest = BigInt(Math.trunc(ms));
  if (rest === 0n) return '0s';
  const sign = rest < 0n ? '-' : '';
  if (rest < 0n) rest = -rest;
  let out = '';
  for (const unit of PROM_UNITS) {
    const exactOnly = unit.name === 'y' || unit.name === 'w';
    if (exactOnly && rest % unit.millis !== 0n) continue;
    const count = rest / unit.millis;
    if (count > 0n) {
      out += `${count}${unit.name}`;
      rest -= count * unit.millis;
    }
  }
  return sign + out;
}
