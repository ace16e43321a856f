// How each type of flag turns command-line text into a value and back, with
// the exact failure reasons Go's flag package prints for the same type.

import { formatGoDuration, formatPromDuration, parseGoDuration, parsePromDuration } from '../go/duration.ts';
import { formatGoFloat, parseGoBool, parseGoFloat, parseGoInt } from '../go/strconv.ts';

export interface ValueKind<T> {
  /** Parses one occurrence; throws Error carrying the reason Go's flag package would print. */
  parse(text: string, current: T): T;
  format(value: T): string;
  readonly zeroText: string;
  /** '' for booleans, which Go lists without a value name. */
  readonly typeName: string;
  readonly isBool: boolean;
  /** Go quotes the default only for plain string flags. */
  readonly quoteDefault: boolean;
}

/** Go's flag package reports strconv failures by kind, not by strconv's own text. */
function numericReason(error: unknown): Error {
  if (error instanceof RangeError) return new Error('value out of range');
  if (error instanceof SyntaxError) return new Error('parse error');
  return error instanceof Error ? error : new Error(String(error));
}

export const boolKind: ValueKind<boolean> = {
  parse(text) {
    try {
      return parseGoBool(text);
    } catch {
      return failWith('parse error');
    }
  },
  format: (value) => String(value),
  zeroText: 'false',
  typeName: '',
  isBool: true,
  quoteDefault: false,
};

export const intKind: ValueKind<number> = {
  parse(text) {
    let parsed: bigint;
    try {
      parsed = parseGoInt(text);
    } catch (error) {
      throw numericReason(error);
    }
    // Go's int is 64-bit; beyond 2^53 a JavaScript number would silently
    // change the value, so such values are refused rather than rounded.
    if (parsed > BigInt(Number.MAX_SAFE_INTEGER) || parsed < BigInt(Number.MIN_SAFE_INTEGER)) {
      return failWith('value out of range');
    }
    return Number(parsed);
  },
  format: (value) => String(value),
  zeroText: '0',
  typeName: 'int',
  isBool: false,
  quoteDefault: false,
};

export const floatKind: ValueKind<number> = {
  parse(text) {
    try {
      return parseGoFloat(text);
    } catch (error) {
      throw numericReason(error);
    }
  },
  format: formatGoFloat,
  zeroText: '0',
  typeName: 'float',
  isBool: false,
  quoteDefault: false,
};

export const stringKind: ValueKind<string> = {
  parse: (text) => text,
  format: (value) => value,
  zeroText: '',
  typeName: 'string',
  isBool: false,
  quoteDefault: true,
};

export const durationKind: ValueKind<number> = {
  parse(text) {
    try {
      return parseGoDuration(text);
    } catch {
      // Go's flag.Duration hides time's message behind its generic one.
      return failWith('parse error');
    }
  },
  format: formatGoDuration,
  zeroText: '0s',
  typeName: 'duration',
  isBool: false,
  quoteDefault: false,
};

// The Go operator registers this as a flag.Value (model.Duration), so help
// calls its type `value` and errors carry Prometheus' own message.
export const promDurationKind: ValueKind<number> = {
  parse: (text) => parsePromDuration(text),
  format: formatPromDuration,
  zeroText: '0s',
  typeName: 'value',
  isBool: false,
  quoteDefault: false,
};

// dskit's flagext.StringSliceCSV: each occurrence replaces the list, and an
// empty value (or a literal "") leaves it unchanged.
export const stringListKind: ValueKind<readonly string[]> = {
  parse: (text, current) => (text === '' || text === '""' ? current : text.split(',')),
  format: (value) => value.join(','),
  zeroText: '',
  typeName: 'value',
  isBool: false,
  quoteDefault: false,
};

export function enumKind<V extends string>(allowed: readonly V[]): ValueKind<V> {
  return {
    parse(text) {
      if ((allowed as readonly string[]).includes(text)) return text as V;
      return failWith(`must be one of ${allowed.join(', ')}`);
    },
    format: (value) => value,
    zeroText: '',
    typeName: 'string',
    isBool: false,
    quoteDefault: true,
  };
}

function failWith(reason: string): never {
  throw new Error(reason);
}
