// Structured logging for every part of Stateward, as logfmt
// (rollout-operator's default, -log.format=logfmt) or one JSON object per line
// (-log.format=json), both written directly, with a `ts` field like go-kit's.
// Child loggers carry context (controller, key, object).

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFormat = 'logfmt' | 'json';
export type Fields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  child(fields: Fields): Logger;
  /** Whether a level would be written, to skip building costly fields. */
  enabled(level: LogLevel): boolean;
  flush(): void;
}

export interface LoggerOptions {
  format: LogFormat;
  level: LogLevel;
  /** Where lines go; default stderr (as rollout-operator's go-kit logger). */
  write?: (line: string) => void;
}

/** logfmt value: bare when safe, else double-quoted with escapes. */
export function logfmtValue(value: unknown): string {
  let text: string;
  if (value === null || value === undefined) text = '';
  else if (typeof value === 'string') text = value;
  else if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') text = String(value);
  else if (value instanceof Error) text = value.message;
  else text = JSON.stringify(value) ?? '';
  return text === '' || /[\s="\\]/.test(text) || /[^\x20-\x7e]/.test(text) ? JSON.stringify(text) : text;
}

/** ` key=value` for each field, in order; an error object as its message (go-kit's err=). */
export function logfmtFields(fields: Fields): string {
  let out = '';
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    const shown =
      key === 'err' && value !== null && typeof value === 'object' && !Array.isArray(value)
        ? (value as { message?: unknown }).message
        : value;
    out += ` ${key}=${logfmtValue(shown)}`;
  }
  return out;
}

// Log lines are bounded so that no request can make the log cost more than
// the request itself: strings from the outside (an AdmissionReview's uid,
// names, paths, error messages quoting them) are cut to a fixed length with
// the original length kept, and a warn/error message that repeats faster
// than a human can read is rate-limited with the number of lines dropped.
export const MAX_FIELD_CHARS = 256;
export const MAX_MESSAGE_CHARS = 1024;
const MAX_ITEMS = 32;
const MAX_DEPTH = 4;

/** `text` cut to `max` characters, saying how long it was. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…(${text.length} chars)`;
}

/**
 * A user's value JSON-quoted for an error message, cut to MAX_FIELD_CHARS:
 * an annotation may hold 256 KiB, and quoting it whole (twice, when a
 * parser's message wraps its caller's) costs milliseconds and helps no reader.
 */
export function quoteValue(value: string): string {
  return JSON.stringify(truncate(value, MAX_FIELD_CHARS));
}

/** A copy of a field value with every string, array and nesting level bounded. */
export function boundValue(value: unknown, max = MAX_FIELD_CHARS, depth = 0): unknown {
  if (typeof value === 'string') return truncate(value, max);
  // Shaped as pino's err serializer shapes an Error, with its parts bounded.
  if (value instanceof Error)
    return {
      type: value.name,
      message: truncate(value.message, MAX_MESSAGE_CHARS),
      ...(value.stack ? { stack: truncate(value.stack, 4 * MAX_MESSAGE_CHARS) } : {}),
    };
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[nested too deep]';
  if (Array.isArray(value)) {
    const items = value.slice(0, MAX_ITEMS).map((item) => boundValue(item, max, depth + 1));
    if (value.length > MAX_ITEMS) items.push(`…(${value.length} items)`);
    return items;
  }
  const out: Record<string, unknown> = {};
  let count = 0;
  for (const [key, item] of Object.entries(value)) {
    if (count++ >= MAX_ITEMS) {
      out['…'] = `(${Object.keys(value).length} keys)`;
      break;
    }
    out[truncate(key, MAX_FIELD_CHARS)] = boundValue(item, max, depth + 1);
  }
  return out;
}

function boundFields(fields: Fields | undefined): Fields {
  const out: Fields = {};
  if (!fields) return out;
  for (const [key, value] of Object.entries(fields))
    out[key] = boundValue(value, key === 'err' ? MAX_MESSAGE_CHARS : MAX_FIELD_CHARS);
  return out;
}

/**
 * Per message: a burst of 20 lines, then one a second; the next line written
 * says how many were dropped. Shared by a logger and all its children.
 */
export class RepeatLimiter {
  private readonly burst: number;
  private readonly perSecond: number;
  private readonly now: () => number;
  private readonly buckets = new Map<string, { tokens: number; at: number; dropped: number }>();

  constructor(options: { burst?: number; perSecond?: number; now?: () => number } = {}) {
    this.burst = options.burst ?? 20;
    this.perSecond = options.perSecond ?? 1;
    this.now = options.now ?? (() => performance.now());
  }

  /** undefined: drop this line; else the number of lines dropped since the last one written. */
  admit(key: string): number | undefined {
    const now = this.now();
    let bucket = this.buckets.get(key);
    if (!bucket) {
      // Messages are code constants; a bound in case one is not.
      if (this.buckets.size >= 1024) this.buckets.clear();
      bucket = { tokens: this.burst, at: now, dropped: 0 };
      this.buckets.set(key, bucket);
    }
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
    bucket.at = now;
    if (bucket.tokens < 1) {
      bucket.dropped++;
      return undefined;
    }
    bucket.tokens -= 1;
    const dropped = bucket.dropped;
    bucket.dropped = 0;
    return dropped;
  }
}

const LEVELS: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/**
 * What both formats share: bounded fields and messages, and the repeat
 * limit on warnings and errors (one limiter for a logger and its children).
 */
abstract class BoundedLogger implements Logger {
  protected readonly limiter: RepeatLimiter;

  constructor(limiter: RepeatLimiter) {
    this.limiter = limiter;
  }

  protected abstract emit(level: LogLevel, message: string, fields: Fields): void;
  abstract enabled(level: LogLevel): boolean;
  abstract child(fields: Fields): Logger;
  abstract flush(): void;

  private write(level: LogLevel, msg: string, fields?: Fields): void {
    if (!this.enabled(level)) return;
    const bounded = boundFields(fields);
    const message = truncate(msg, MAX_MESSAGE_CHARS);
    if (level === 'warn' || level === 'error') {
      const dropped = this.limiter.admit(`${level} ${message}`);
      if (dropped === undefined) return;
      if (dropped > 0) bounded['suppressed'] = dropped;
    }
    this.emit(level, message, bounded);
  }

  debug(msg: string, fields?: Fields): void {
    this.write('debug', msg, fields);
  }
  info(msg: string, fields?: Fields): void {
    this.write('info', msg, fields);
  }
  warn(msg: string, fields?: Fields): void {
    this.write('warn', msg, fields);
  }
  error(msg: string, fields?: Fields): void {
    this.write('error', msg, fields);
  }
}

/** ,"key":value for each field, in order; bigints as strings (JSON has none). */
function jsonFields(fields: Fields): string {
  let out = '';
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    out += `,${JSON.stringify(key)}:${JSON.stringify(value, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`;
  }
  return out;
}

/**
 * -log.format=json: `{"level":…,"ts":…` then the context of child loggers,
 * the call's fields and `"msg"` last, as pino wrote them before (errors are
 * already shaped as pino's err serializer shapes them: type, message, stack).
 */
class JsonLogger extends BoundedLogger {
  private readonly level: number;
  private readonly context: string;
  private readonly out: (line: string) => void;

  constructor(level: number, context: string, limiter: RepeatLimiter, out: (line: string) => void) {
    super(limiter);
    this.level = level;
    this.context = context;
    this.out = out;
  }

  protected emit(level: LogLevel, message: string, fields: Fields): void {
    this.out(
      `{"level":"${level}","ts":"${new Date().toISOString()}"${this.context}${jsonFields(fields)},"msg":${JSON.stringify(message)}}\n`,
    );
  }
  enabled(level: LogLevel): boolean {
    return LEVELS[level] >= this.level;
  }
  child(fields: Fields): Logger {
    return new JsonLogger(this.level, this.context + jsonFields(boundFields(fields)), this.limiter, this.out);
  }
  flush(): void {}
}

/**
 * -log.format=logfmt (rollout-operator's default): lines written directly,
 * `ts level msg`, then the context of child loggers, then the call's fields.
 * A child renders its context once, when it is made.
 */
class LogfmtLogger extends BoundedLogger {
  private readonly level: number;
  private readonly context: string;
  private readonly out: (line: string) => void;

  constructor(level: number, context: string, limiter: RepeatLimiter, out: (line: string) => void) {
    super(limiter);
    this.level = level;
    this.context = context;
    this.out = out;
  }

  protected emit(level: LogLevel, message: string, fields: Fields): void {
    this.out(
      `ts=${new Date().toISOString()} level=${level} msg=${logfmtValue(message)}${this.context}${logfmtFields(fields)}\n`,
    );
  }
  enabled(level: LogLevel): boolean {
    return LEVELS[level] >= this.level;
  }
  child(fields: Fields): Logger {
    return new LogfmtLogger(this.level, this.context + logfmtFields(boundFields(fields)), this.limiter, this.out);
  }
  flush(): void {}
}

export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  if (options.format === 'logfmt') return new LogfmtLogger(LEVELS[options.level], '', new RepeatLimiter(), write);
  return new JsonLogger(LEVELS[options.level], '', new RepeatLimiter(), write);
}

/** Discards everything; for tests and for code that may run without a logger. */
export const nopLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => nopLogger,
  enabled: () => false,
  flush: () => {},
};
