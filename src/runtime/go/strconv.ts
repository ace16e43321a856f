// Go's strconv rules for the values a command line can carry (integers,
// floats, booleans) and for quoting. Command lines written for the Go
// rollout-operator must be accepted and rejected exactly as Go would, so these
// follow Go's grammar rather than JavaScript's Number(): `0x1F`, `0o17`,
// `017` (octal!), `1_000` and `Inf` are Go syntax; `1e3` is not a Go integer.
//
// Parse failures throw SyntaxError (Go's strconv.ErrSyntax) or RangeError
// (strconv.ErrRange) with Go's NumError wording, so callers can map them the
// way Go's flag package does ("parse error" / "value out of range").

const UINT64_MAX = (1n << 64n) - 1n;
const INT64_MIN_MAGNITUDE = 1n << 63n;

/** The longest value an error message quotes whole. */
export const QUOTED_VALUE_MAX = 256;

/**
 * `s` quoted by `quote` for an error message, cut after QUOTED_VALUE_MAX
 * characters and saying how long it was. Go quotes any length; an
 * annotation can hold 256 KiB, and escaping all of it (for every message
 * that wraps another) cost tens of milliseconds and helped no reader.
 */
export function quoteCut(s: string, quote: (s: string) => string = quoteGo): string {
  return s.length <= QUOTED_VALUE_MAX ? quote(s) : `${quote(s.slice(0, QUOTED_VALUE_MAX))}…(${s.length} chars)`;
}

function syntaxError(fn: string, s: string): SyntaxError {
  return new SyntaxError(`strconv.${fn}: parsing ${quoteCut(s)}: invalid syntax`);
}

function rangeError(fn: string, s: string): RangeError {
  return new RangeError(`strconv.${fn}: parsing ${quoteCut(s)}: value out of range`);
}

/** strconv.ParseBool: 1, t, T, true, TRUE, True and their false counterparts. */
export function parseGoBool(s: string): boolean {
  switch (s) {
    case '1':
    case 't':
    case 'T':
    case 'true':
    case 'TRUE':
    case 'True':
      return true;
    case '0':
    case 'f':
    case 'F':
    case 'false':
    case 'FALSE':
    case 'False':
      return false;
  }
  throw syntaxError('ParseBool', s);
}

function isDecimalDigit(c: string): boolean {
  return c.length === 1 && c >= '0' && c <= '9';
}

/**
 * ASCII-only lower-casing, like Go's byte-level lower(): String#toLowerCase
 * would also map letters such as the Kelvin sign to ASCII ones.
 */
function asciiLower(c: string): string {
  return /^[A-Z]$/.test(c) ? c.toLowerCase() : c;
}

/** Value of c as a digit in bases up to 36, or -1. */
function digitValue(c: string): number {
  if (isDecimalDigit(c)) return c.charCodeAt(0) - 48;
  const lower = asciiLower(c);
  if (/^[a-z]$/.test(lower)) return lower.charCodeAt(0) - 87;
  return -1;
}

function isHexLetter(c: string): boolean {
  return /^[a-fA-F]$/.test(c);
}

/**
 * Go's rule for digit separators in base-prefixed literals: every underscore
 * sits between two digits (a base prefix counts as a digit).
 */
function underscoreOK(text: string): boolean {
  let s = text;
  // '^' start, '0' digit or prefix, '_' underscore, '!' anything else.
  let saw = '^';
  let i = 0;
  if (s.startsWith('-') || s.startsWith('+')) s = s.slice(1);
  let hex = false;
  const prefix = s.length >= 2 && s[0] === '0' ? asciiLower(s[1]!) : '';
  if (prefix === 'b' || prefix === 'o' || prefix === 'x') {
    i = 2;
    saw = '0';
    hex = prefix === 'x';
  }
  for (; i < s.length; i++) {
    const c = s[i]!;
    if (isDecimalDigit(c) || (hex && isHexLetter(c))) {
      saw = '0';
      continue;
    }
    if (c === '_') {
      if (saw !== '0') return false;
      saw = '_';
      continue;
    }
    if (saw === '_') return false;
    saw = '!';
  }
  return saw !== '_';
}

/** strconv.ParseUint(s, 0, 64) without its error wrapping. */
function parseUint64Base0(s: string): bigint | 'syntax' | 'range' {
  if (s === '') return 'syntax';
  let base = 10n;
  let digits = s;
  if (s[0] === '0') {
    const prefix = s.length >= 3 ? asciiLower(s[1]!) : '';
    if (prefix === 'b') base = 2n;
    else if (prefix === 'o') base = 8n;
    else if (prefix === 'x') base = 16n;
    else base = 8n; // a bare leading zero means octal, as in C
    digits = s.slice(base === 8n && prefix !== 'o' ? 1 : 2);
  }
  let n = 0n;
  let underscores = false;
  for (const c of digits) {
    if (c === '_') {
      underscores = true;
      continue;
    }
    const d = digitValue(c);
    if (d < 0 || BigInt(d) >= base) return 'syntax';
    n = n * base + BigInt(d);
    // Go reports overflow as soon as it happens, even if a syntax error follows.
    if (n > UINT64_MAX) return 'range';
  }
  if (underscores && !underscoreOK(s)) return 'syntax';
  return n;
}

/**
 * strconv.ParseInt(s, 0, 64), the parser behind Go's flag.Int on 64-bit
 * platforms. Returns a bigint because int64 exceeds JavaScript's safe range.
 */
export function parseGoInt(s: string): bigint {
  if (s === '') throw syntaxError('ParseInt', s);
  let body = s;
  let negative = false;
  if (body[0] === '+') body = body.slice(1);
  else if (body[0] === '-') {
    negative = true;
    body = body.slice(1);
  }
  const magnitude = parseUint64Base0(body);
  if (magnitude === 'syntax') throw syntaxError('ParseInt', s);
  if (magnitude === 'range') throw rangeError('ParseInt', s);
  if (negative ? magnitude > INT64_MIN_MAGNITUDE : magnitude >= INT64_MIN_MAGNITUDE) throw rangeError('ParseInt', s);
  return negative ? -magnitude : magnitude;
}

interface FloatSyntax {
  negative: boolean;
  hex: boolean;
}

/**
 * Go's readFloat grammar: optional sign, decimal digits with at most one
 * point and an optional e-exponent, or 0x hex digits with a mandatory
 * p-exponent; underscores only as digit separators. Returns undefined when
 * the whole string is not one such literal.
 */
function scanFloat(s: string): FloatSyntax | undefined {
  let i = 0;
  let negative = false;
  let underscores = false;
  if (s[i] === '+') i++;
  else if (s[i] === '-') {
    i++;
    negative = true;
  }
  let hex = false;
  if (i + 2 < s.length && s[i] === '0' && asciiLower(s[i + 1]!) === 'x') {
    hex = true;
    i += 2;
  }
  let sawDot = false;
  let sawDigits = false;
  for (; i < s.length; i++) {
    const c = s[i]!;
    if (c === '_') {
      underscores = true;
    } else if (c === '.') {
      if (sawDot) break;
      sawDot = true;
    } else if (isDecimalDigit(c) || (hex && isHexLetter(c))) {
      sawDigits = true;
    } else {
      break;
    }
  }
  if (!sawDigits) return undefined;
  const expChar = hex ? 'p' : 'e';
  if (i < s.length && asciiLower(s[i]!) === expChar) {
    i++;
    if (s[i] === '+' || s[i] === '-') i++;
    if (i >= s.length || !isDecimalDigit(s[i]!)) return undefined;
    for (; i < s.length && (isDecimalDigit(s[i]!) || s[i] === '_'); i++) {
      if (s[i] === '_') underscores = true;
    }
  } else if (hex) {
    return undefined; // hex floats must carry a binary exponent
  }
  if (i !== s.length) return undefined;
  if (underscores && !underscoreOK(s)) return undefined;
  return { negative, hex };
}

/** x * 2^exp without the intermediate overflow or underflow of Math.pow. */
function scaleByPowerOfTwo(x: number, exp: number): number {
  let result = x;
  let e = exp;
  while (e > 1000) {
    result *= 2 ** 1000;
    e -= 1000;
  }
  while (e < -1000) {
    result *= 2 ** -1000;
    e += 1000;
  }
  return result * 2 ** e;
}

function hexFloatValue(s: string, negative: boolean): number {
  const body = s.replace(/^[+-]/, '').slice(2).replaceAll('_', '');
  const [mantissaText, expText] = body.toLowerCase().split('p') as [string, string];
  const point = mantissaText.indexOf('.');
  const fractionDigits = point < 0 ? 0 : mantissaText.length - point - 1;
  const mantissa = BigInt('0x' + (mantissaText.replace('.', '') || '0'));
  // Clamped like Go's reader: beyond this every result is 0 or infinite anyway.
  const exponent = Math.max(-100_000, Math.min(100_000, Number(expText))) - 4 * fractionDigits;
  const magnitude = mantissa === 0n ? 0 : scaleByPowerOfTwo(Number(mantissa), exponent);
  return negative ? -magnitude : magnitude;
}

/**
 * strconv.ParseFloat(s, 64): decimal and hex literals, underscores between
 * digits, and the words inf, infinity and nan in any case. Overflow is a
 * RangeError (Go returns ±Inf with ErrRange); underflow rounds to zero.
 */
export function parseGoFloat(s: string): number {
  if (/^[+-]?(inf|infinity)$/i.test(s)) return s.startsWith('-') ? -Infinity : Infinity;
  if (/^nan$/i.test(s)) return NaN;
  const syntax = scanFloat(s);
  if (!syntax) throw syntaxError('ParseFloat', s);
  const value = syntax.hex ? hexFloatValue(s, syntax.negative) : Number(s.replaceAll('_', ''));
  if (!Number.isFinite(value)) throw rangeError('ParseFloat', s);
  return value;
}

/**
 * strconv.FormatFloat(x, 'g', -1, 64): the shortest digits that round-trip,
 * in exponent form when the exponent is below -4 or at least 6. This is how
 * Go's flag package prints float defaults.
 */
export function formatGoFloat(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return '+Inf';
  if (x === -Infinity) return '-Inf';
  const sign = x < 0 || Object.is(x, -0) ? '-' : '';
  // toExponential() without an argument yields the shortest round-trip digits.
  const [mantissa, expText] = Math.abs(x).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  const exp = Number(expText);
  if (exp < -4 || exp >= 6) {
    const fraction = digits.length > 1 ? '.' + digits.slice(1) : '';
    const expSign = exp < 0 ? '-' : '+';
    return `${sign}${digits[0]}${fraction}e${expSign}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  const pointAt = exp + 1; // digits before the decimal point
  if (pointAt <= 0) return `${sign}0.${'0'.repeat(-pointAt)}${digits}`;
  if (pointAt >= digits.length) return sign + digits + '0'.repeat(pointAt - digits.length);
  return `${sign}${digits.slice(0, pointAt)}.${digits.slice(pointAt)}`;
}

/**
 * What strconv.Quote escapes: anything Go's unicode.IsPrint refuses (it
 * keeps letters, marks, numbers, punctuation, symbols and the ASCII space),
 * and the quote and backslash. One regex pass over the value: a test per
 * character made quoting a 100 KB value cost tens of milliseconds.
 */
const GO_ESCAPED = /[^\p{L}\p{M}\p{N}\p{P}\p{S} ]|["\\]/gu;

const SHORT_ESCAPES: Readonly<Record<string, string>> = {
  '\x07': '\\a',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\v': '\\v',
  '"': '\\"',
  '\\': '\\\\',
};

function goEscape(ch: string): string {
  const short = SHORT_ESCAPES[ch];
  if (short !== undefined) return short;
  const cp = ch.codePointAt(0)!;
  if (cp < 0x20 || cp === 0x7f) return '\\x' + cp.toString(16).padStart(2, '0');
  if (cp < 0x10000) return '\\u' + cp.toString(16).padStart(4, '0');
  return '\\U' + cp.toString(16).padStart(8, '0');
}

/** strconv.Quote, i.e. fmt's %q for strings: how Go shows values in flag errors and help. */
export function quoteGo(s: string): string {
  return '"' + s.replace(GO_ESCAPED, goEscape) + '"';
}
