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

const LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

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

class PinoAdapter implements Logger {
  private readonly pino: PinoLogger;

  constructor(logger: PinoLogger) {
    this.pino = logger;
  }

  debug(msg: string, fields?: Fields): void {
    this.pino.debug(fields ?? {}, msg);
  }
  info(msg: string, fields?: Fields): void {
    this.pino.info(fields ?? {}, msg);
  }
  warn(msg: string, fields?: Fields): void {
    this.pino.warn(fields ?? {}, msg);
  }
  error(msg: string, fields?: Fields): void {
    this.pino.error(fields ?? {}, msg);
  }
  child(fields: Fields): Logger {
    return new PinoAdapter(this.pino.child(fields));
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
  return new PinoAdapter(logger);
}

export function isLogLevel(value: string): value is LogLevel {
  return (LEVELS as readonly string[]).includes(value);
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
