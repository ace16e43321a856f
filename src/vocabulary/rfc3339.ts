// Go's time.RFC3339 layout ("2006-01-02T15:04:05Z07:00"), as the
// prepare-downscale webhook writes and reads it: the last-downscale
// annotation and the zone tracker's `lastDownscaled` values.
import { quoteValue } from '../runtime/log/logger.ts';

/** time.Time.UTC().Format(time.RFC3339): whole seconds (truncated), `Z`. */
export function formatRfc3339(ms: number): string {
  const seconds = Math.floor(ms / 1000) * 1000;
  return new Date(seconds).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|([+-])(\d{2}):(\d{2}))$/;

function daysIn(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * time.Parse(time.RFC3339, s) to epoch milliseconds (sub-millisecond digits
 * dropped), or the reason it is not one. As Go: `T` and `Z` upper case only,
 * optional fractional seconds, numeric offsets allowed, seconds 0..59.
 */
export function parseRfc3339(s: string): number | { error: string } {
  const m = RFC3339.exec(s);
  const bad = (why: string) => ({ error: `parsing time ${quoteValue(s)} as "2006-01-02T15:04:05Z07:00": ${why}` });
  if (!m) return bad('not in RFC 3339 format');
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12) return bad('month out of range');
  if (day < 1 || day > daysIn(year, month)) return bad('day out of range');
  if (hour > 23) return bad('hour out of range');
  if (minute > 59) return bad('minute out of range');
  if (second > 59) return bad('second out of range');
  let offsetMinutes = 0;
  if (m[8] !== 'Z') {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return bad('time zone offset out of range');
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, millis);
  // Date.UTC maps years 0..99 to 1900..1999; setUTCFullYear undoes that.
  const date = new Date(utc);
  date.setUTCFullYear(year);
  return date.getTime() - offsetMinutes * 60_000;
}
