// Structured logging for every part of Stateward: pino underneath, written as
// logfmt (rollout-operator's default, -log.format=logfmt) or JSON, with a `ts`
// field like go-kit's. Child loggers carry context (controller, key, object).
import { pino, type Logger as PinoLogger, type DestinationStream } from 'pino';

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

/** One JSON log record from pino → one logfmt line, keys in record order (ts, level, msg first). */
export function jsonToLogfmt(json: string): string {
  const record = JSON.parse(json) as Record<string, unknown>;
  const parts: string[] = [];
  const { ts, level, msg, ...rest } = record;
  const ordered: [string, unknown][] = [['ts', ts], ['level', level], ['msg', msg], ...Object.entries(rest)];
  for (const [key, value] of ordered) {
    if (value === undefined) continue;
    if (value !== null && typeof value === 'object' && !Array.isArray(value) && key === 'err') {
      parts.push(`err=${logfmtValue((value as { message?: unknown }).message)}`);
      continue;
    }
    parts.push(`${key}=${logfmtValue(value)}`);
  }
  return `${parts.join(' ')}\n`;
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
  if (value instanceof Error) return { type: value.name, message: truncate(value.message, MAX_MESSAGE_CHARS), ...(value.stack ? { stack: truncate(value.stack, 4 * MAX_MESSAGE_CHARS) } : {}) };
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
  for (const [key, value] of Object.entries(fields)) out[key] = boundValue(value, key === 'err' ? MAX_MESSAGE_CHARS : MAX_FIELD_CHARS);
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

class PinoAdapter implements Logger {
  private readonly pino: PinoLogger;
  private readonly limiter: RepeatLimiter;

  constructor(logger: PinoLogger, limiter: RepeatLimiter) {
    this.pino = logger;
    this.limiter = limiter;
  }

  private write(level: LogLevel, msg: string, fields?: Fields): void {
    if (!this.pino.isLevelEnabled(level)) return;
    const bounded = boundFields(fields);
    const message = truncate(msg, MAX_MESSAGE_CHARS);
    if (level === 'warn' || level === 'error') {
      const dropped = this.limiter.admit(`${level} ${message}`);
      if (dropped === undefined) return;
      if (dropped > 0) bounded['suppressed'] = dropped;
    }
    this.pino[level](bounded, message);
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
  child(fields: Fields): Logger {
    return new PinoAdapter(this.pino.child(boundFields(fields)), this.limiter);
  }
  enabled(level: LogLevel): boolean {
    return this.pino.isLevelEnabled(level);
  }
  flush(): void {
    this.pino.flush();
  }
}

export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  const destination: DestinationStream = {
    write: options.format === 'logfmt' ? (line: string) => write(jsonToLogfmt(line)) : (line: string) => write(line),
  };
  const logger = pino(
    {
      level: options.level,
      base: null,
      messageKey: 'msg',
      timestamp: () => `,"ts":"${new Date().toISOString()}"`,
      formatters: { level: (label) => ({ level: label }) },
      errorKey: 'err',
      serializers: { err: pino.stdSerializers.err },
    },
    destination,
  );
  return new PinoAdapter(logger, new RepeatLimiter());
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
