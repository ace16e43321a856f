// A Logger that keeps every line, for tests that assert what was logged.
import type { Fields, LogLevel, Logger } from '../../src/runtime/log/logger.ts';

export interface LogLine {
  level: LogLevel;
  msg: string;
  fields: Fields;
}

export function recordingLogger(): { lines: LogLine[]; log: Logger } {
  const lines: LogLine[] = [];
  const make = (base: Fields): Logger => ({
    debug: (msg, fields) => lines.push({ level: 'debug', msg, fields: { ...base, ...fields } }),
    info: (msg, fields) => lines.push({ level: 'info', msg, fields: { ...base, ...fields } }),
    warn: (msg, fields) => lines.push({ level: 'warn', msg, fields: { ...base, ...fields } }),
    error: (msg, fields) => lines.push({ level: 'error', msg, fields: { ...base, ...fields } }),
    child: (fields) => make({ ...base, ...fields }),
    enabled: () => true,
    flush: () => {},
  });
  return { lines, log: make({}) };
}
