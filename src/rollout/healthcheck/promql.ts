// The PromQL side of a health check, pure: the placeholders substituted as
// rollout-operator substitutes them, and a Prometheus /api/v1/query answer
// read as one number, no data, or an error.
import { formatPromDuration } from '../../runtime/go/duration.ts';
import { BASELINE, CURRENT, RANGE, TARGET_MATCHERS } from './resource.ts';

/** Go's regexp.QuoteMeta: every RE2 metacharacter escaped. */
export function quoteMeta(s: string): string {
  return s.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&');
}

/** A PromQL double-quoted string literal holding `s` (PromQL unescapes Go-style). */
export function promString(s: string): string {
  return `"${s.replace(/[\\"]/g, '\\$&').replace(/\n/g, '\\n')}"`;
}

/**
 * `namespace="<ns>",pod=~"<p1>|<p2>…"`: the pods as one anchored alternation
 * (Prometheus anchors regex matchers), each name regex-quoted; `pod=~"^$"`
 * when there are none, which matches no pod.
 */
export function targetMatchers(namespace: string, pods: readonly string[]): string {
  const regex = pods.length === 0 ? '^$' : [...pods].sort().map(quoteMeta).join('|');
  return `namespace=${promString(namespace)},pod=~${promString(regex)}`;
}

/** `query` with ${targetMatchers} and ${range} replaced (every occurrence). */
export function renderQuery(query: string, namespace: string, pods: readonly string[], rangeMs: number): string {
  return query
    .replaceAll(TARGET_MATCHERS, targetMatchers(namespace, pods))
    .replaceAll(RANGE, formatPromDuration(rangeMs));
}

/** A number as a PromQL literal, parenthesised so a negative value or an infinity composes with any operator. */
export function promNumber(value: number): string {
  if (Number.isNaN(value)) return '(NaN)';
  if (!Number.isFinite(value)) return value > 0 ? '(+Inf)' : '(-Inf)';
  return `(${String(value)})`;
}

/** `successQuery` with ${current} and ${baseline} replaced by the two numbers. */
export function renderSuccessQuery(successQuery: string, current: number, baseline: number): string {
  return successQuery.replaceAll(CURRENT, promNumber(current)).replaceAll(BASELINE, promNumber(baseline));
}

export type QueryValue = { kind: 'value'; value: number } | { kind: 'no_data' } | { kind: 'error'; message: string };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A sample's [timestamp, "value"] pair as Prometheus encodes it (values are strings: "NaN", "+Inf" included). */
function sampleValue(pair: unknown): number | undefined {
  if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[1] !== 'string') return undefined;
  const text = pair[1];
  if (text === '+Inf' || text === 'Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  const value = Number(text);
  return text.trim() === '' || Number.isNaN(value) ? undefined : value;
}

/**
 * Reads a parsed /api/v1/query body: a scalar or a vector of one sample is
 * the value; an empty vector, or a NaN (0/0 of a rate with no traffic), is
 * no data; several samples, a matrix or a string is an error saying what
 * came back, because a check over three pods that answers three numbers has
 * not said whether the zone is healthy.
 */
export function readQueryResult(body: unknown): QueryValue {
  if (!isRecord(body)) return { kind: 'error', message: 'the answer is not a JSON object' };
  if (body['status'] !== 'success') {
    const detail = typeof body['error'] === 'string' ? body['error'] : 'no error text';
    const type = typeof body['errorType'] === 'string' ? `${body['errorType']}: ` : '';
    return { kind: 'error', message: `Prometheus answered ${type}${detail}` };
  }
  const data = body['data'];
  if (!isRecord(data)) return { kind: 'error', message: 'the answer has no data' };
  const rawType = data['resultType'];
  // Only a string is printed: anything else (an object with its own toString) must not throw here.
  const type = typeof rawType === 'string' ? rawType : (JSON.stringify(rawType) ?? 'nothing');
  const result = data['result'];
  let value: number | undefined;
  if (type === 'scalar') {
    value = sampleValue(result);
  } else if (type === 'vector' && Array.isArray(result)) {
    if (result.length === 0) return { kind: 'no_data' };
    if (result.length > 1)
      return {
        kind: 'error',
        message: `the query returned ${result.length} samples; it must return one (aggregate with sum, max, …)`,
      };
    value = isRecord(result[0]) ? sampleValue(result[0]['value']) : undefined;
  } else {
    return { kind: 'error', message: `the query returned a ${type}; it must return a scalar or one sample` };
  }
  if (value === undefined) return { kind: 'error', message: `the answer's ${type} has no readable value` };
  return Number.isNaN(value) ? { kind: 'no_data' } : { kind: 'value', value };
}
