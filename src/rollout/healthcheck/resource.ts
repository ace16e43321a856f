// The RolloutHealthCheck custom resource (rollout-operator.grafana.com/v1,
// short name rhc): its wire shape, defaults and validation, shared by the
// validating webhook, `stateward doctor` and the rollout gate.
//
// The fields and defaults are those of rollout-operator's design (PR #469,
// issues #505/#507/#508). The PR's description also names the policies
// errorPolicy/failurePolicy/noDataPolicy; both spellings are accepted so a
// manifest written for either version of that design works. Stateward adds,
// each optional and documented in docs/health-gates.md: how to reach a
// Prometheus that needs credentials (headers, bearer token, basic auth, a CA),
// a bake time, an evaluation interval, and consecutive pass/fail thresholds.
import type { KubeObject, ObjectMeta, ResourceType } from '../../runtime/kube/types.ts';
import { formatPromDuration, parsePromDuration } from '../../runtime/go/duration.ts';

export const HEALTH_CHECK_GROUP = 'rollout-operator.grafana.com';
export const HEALTH_CHECK_VERSION = 'v1';
export const HEALTH_CHECK_KIND = 'RolloutHealthCheck';
export const HEALTH_CHECK_PLURAL = 'rollouthealthchecks';

export const healthCheckResource = {
  group: HEALTH_CHECK_GROUP,
  version: HEALTH_CHECK_VERSION,
  resource: HEALTH_CHECK_PLURAL,
  kind: HEALTH_CHECK_KIND,
  namespaced: true,
} as const satisfies ResourceType;

export const POLICIES = ['Pause', 'Warn', 'Disabled'] as const;
export type Policy = (typeof POLICIES)[number];

/** The placeholders, as rollout-operator spells them. */
export const TARGET_MATCHERS = '${targetMatchers}';
export const RANGE = '${range}';
export const CURRENT = '${current}';
export const BASELINE = '${baseline}';

/** A key of a Secret or ConfigMap in the check's namespace. */
export interface KeyRef {
  name: string;
  key: string;
}

/** How to reach the Prometheus HTTP API (Stateward's fields; rollout-operator sends no credentials). */
export interface QueryAccess {
  url: URL;
  /** Sent with every query; a value from a Secret is read at each evaluation and never kept. */
  headers: { name: string; value?: string; secret?: KeyRef }[];
  bearerToken?: KeyRef;
  basicAuth?: { username: KeyRef; password: KeyRef };
  /** PEM CA bundle for an https URL, from a Secret or a ConfigMap. */
  ca?: { secret?: KeyRef; configMap?: KeyRef };
}

export interface CheckSpec {
  name: string;
  query: string;
  successQuery: string;
  currentRangeMs: number;
  baselineRangeMs: number;
  queryTimeoutMs: number;
  /** Retries after the first attempt of one query. */
  queryRetries: number;
  onFailure: Policy;
  onNoData: Policy;
  /** A query that errs (Prometheus down, bad PromQL, several samples). Defaults to onFailure. */
  onError: Policy;
  /** Consecutive passes before the gate opens on this check (Stateward; default 1). */
  successThreshold: number;
  /** Consecutive failures (or no-data evaluations) before the policy applies (Stateward; default 1). */
  failureThreshold: number;
  disabled: boolean;
}

export interface HealthCheckConfig {
  name: string;
  namespace: string;
  generation: number;
  matchLabels: Readonly<Record<string, string>>;
  access: QueryAccess;
  checks: CheckSpec[];
  /** The updated zone must have been Ready this long before a pass counts (Stateward; default 0). */
  bakeTimeMs: number;
  /** How often a waiting gate evaluates again (Stateward; default 30s). */
  evaluationIntervalMs: number;
}

export interface RolloutHealthCheck extends KubeObject {
  metadata?: ObjectMeta;
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export const DEFAULTS = {
  currentRangeMs: 5 * 60_000,
  baselineRangeMs: 10 * 60_000,
  queryTimeoutMs: 10_000,
  queryRetries: 3,
  bakeTimeMs: 0,
  evaluationIntervalMs: 30_000,
} as const;

/** Bounds that keep one evaluation finite whatever the spec says. */
const MAX_QUERY_RETRIES = 10;
/** Every duration of a check: a week covers any range worth querying, and stays well under Node's 2^31 ms timer limit. */
const MAX_DURATION_MS = 7 * 86_400_000;
const MAX_THRESHOLD = 100;
const MIN_EVALUATION_INTERVAL_MS = 1_000;
const MAX_QUERY_LENGTH = 16_384;
const CHECK_NAME = /^[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?$/;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Headers the client sets itself, or that would change what the request is. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'content-type', 'transfer-encoding', 'connection']);

export type ParseResult = { config: HealthCheckConfig } | { errors: string[] };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads fields of one object, collecting every problem under its path instead of stopping at the first. */
class FieldReader {
  readonly errors: string[];
  readonly path: string;
  readonly value: Record<string, unknown>;
  constructor(path: string, value: Record<string, unknown>, errors: string[]) {
    this.path = path;
    this.value = value;
    this.errors = errors;
  }

  fail(field: string, message: string): undefined {
    this.errors.push(`${this.path}.${field}: ${message}`);
    return undefined;
  }

  string(field: string, required: boolean): string | undefined {
    const v = this.value[field];
    if (v === undefined || v === null) return required ? this.fail(field, 'Required value') : undefined;
    if (typeof v !== 'string') return this.fail(field, 'must be a string');
    if (required && v.trim() === '') return this.fail(field, 'must not be empty');
    return v;
  }

  duration(field: string, fallback: number, min = 1): number {
    const v = this.string(field, false);
    if (v === undefined) return fallback;
    try {
      const ms = parsePromDuration(v);
      if (ms < min) return this.fail(field, `must be at least ${formatPromDuration(min)}`) ?? fallback;
      if (ms > MAX_DURATION_MS)
        return this.fail(field, `must be at most ${formatPromDuration(MAX_DURATION_MS)}`) ?? fallback;
      return ms;
    } catch (error) {
      return this.fail(field, `invalid duration ${JSON.stringify(v)}: ${(error as Error).message}`) ?? fallback;
    }
  }

  integer(field: string, fallback: number, min: number, max: number): number {
    const v = this.value[field];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max)
      return this.fail(field, `must be an integer from ${min} to ${max}`) ?? fallback;
    return v;
  }

  /** One setting spelled `fields` (aliases, at most one set), as a policy. */
  policy(fields: readonly string[], fallback: Policy): Policy {
    const set = fields.filter((f) => this.value[f] !== undefined && this.value[f] !== null);
    if (set.length > 1) return this.fail(set[1]!, `set only one of ${set.join(' and ')}`) ?? fallback;
    for (const field of fields) {
      const v = this.value[field];
      if (v === undefined || v === null) continue;
      if (typeof v === 'string' && (POLICIES as readonly string[]).includes(v)) return v as Policy;
      return this.fail(field, `must be one of ${POLICIES.join(', ')}`) ?? fallback;
    }
    return fallback;
  }

  keyRef(field: string, from: Record<string, unknown> = this.value): KeyRef | undefined {
    const v = from[field];
    if (v === undefined || v === null) return undefined;
    const name = isRecord(v) ? v['name'] : undefined;
    const key = isRecord(v) ? v['key'] : undefined;
    if (typeof name !== 'string' || name === '' || typeof key !== 'string' || key === '')
      return this.fail(field, 'must be {name, key} naming a key of an object in the same namespace');
    return { name, key };
  }

  child(field: string): FieldReader | undefined {
    const v = this.value[field];
    if (v === undefined || v === null) return undefined;
    if (!isRecord(v)) return this.fail(field, 'must be an object');
    return new FieldReader(`${this.path}.${field}`, v, this.errors);
  }
}

function parseMatchLabels(spec: FieldReader): Record<string, string> | undefined {
  const selector = spec.value['selector'];
  const labels = isRecord(selector) ? selector['matchLabels'] : undefined;
  if (!isRecord(labels) || Object.keys(labels).length === 0)
    return spec.fail('selector.matchLabels', 'Required value: the StatefulSets this check may gate');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels)) {
    if (typeof v !== 'string') return spec.fail(`selector.matchLabels.${k}`, 'must be a string');
    out[k] = v;
  }
  return out;
}

function parseUrl(spec: FieldReader): URL | undefined {
  const raw = spec.string('prometheusURL', true);
  if (raw === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return spec.fail('prometheusURL', `not a URL: ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return spec.fail('prometheusURL', `scheme must be http or https, not ${url.protocol.slice(0, -1)}`);
  if (url.username !== '' || url.password !== '')
    return spec.fail('prometheusURL', 'must not hold credentials: use basicAuth with a Secret');
  if (url.search !== '' || url.hash !== '') return spec.fail('prometheusURL', 'must not have a query or fragment');
  return url;
}

function parseHeaders(spec: FieldReader): QueryAccess['headers'] {
  const raw = spec.value['headers'];
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) return spec.fail('headers', 'must be a list') ?? [];
  const headers: QueryAccess['headers'] = [];
  raw.forEach((entry, i) => {
    if (!isRecord(entry)) return spec.fail(`headers[${i}]`, 'must be an object');
    const h = new FieldReader(`${spec.path}.headers[${i}]`, entry, spec.errors);
    const name = h.string('name', true);
    if (name === undefined) return undefined;
    if (!HEADER_NAME.test(name) || RESERVED_HEADERS.has(name.toLowerCase()))
      return h.fail('name', `${JSON.stringify(name)} cannot be set`);
    const value = h.string('value', false);
    const from = h.child('valueFrom');
    const secret = from?.keyRef('secretKeyRef');
    if ((value === undefined) === (secret === undefined))
      return h.fail('value', 'set exactly one of value and valueFrom.secretKeyRef');
    // What Node's http client can send in a header value: tab, visible ASCII and Latin-1.
    if (value !== undefined && /[^\t\x20-\x7e\x80-\xff]/.test(value))
      return h.fail('value', 'must not contain control characters (but tab) or characters above U+00FF');
    headers.push({ name, ...(value !== undefined ? { value } : {}), ...(secret ? { secret } : {}) });
    return undefined;
  });
  return headers;
}

function parseAccess(spec: FieldReader): QueryAccess | undefined {
  const url = parseUrl(spec);
  const headers = parseHeaders(spec);
  const bearerToken = spec.keyRef('bearerTokenSecret');
  const basic = spec.child('basicAuth');
  const username = basic?.keyRef('username');
  const password = basic?.keyRef('password');
  if (basic && (!username || !password)) basic.fail('username', 'basicAuth needs username and password Secret keys');
  if (bearerToken && basic) spec.fail('bearerTokenSecret', 'set at most one of bearerTokenSecret and basicAuth');
  const tls = spec.child('tlsConfig');
  const caReader = tls?.child('ca');
  const caSecret = caReader?.keyRef('secret');
  const caConfigMap = caReader?.keyRef('configMap');
  if (caReader && (caSecret === undefined) === (caConfigMap === undefined))
    caReader.fail('secret', 'set exactly one of secret and configMap');
  if (!url) return undefined;
  return {
    url,
    headers,
    ...(bearerToken ? { bearerToken } : {}),
    ...(username && password ? { basicAuth: { username, password } } : {}),
    ...(caSecret || caConfigMap
      ? { ca: { ...(caSecret ? { secret: caSecret } : {}), ...(caConfigMap ? { configMap: caConfigMap } : {}) } }
      : {}),
  };
}

function parseQuery(c: FieldReader, field: string, placeholders: readonly string[]): string | undefined {
  const query = c.string(field, true);
  if (query === undefined) return undefined;
  if (query.length > MAX_QUERY_LENGTH) return c.fail(field, `longer than ${MAX_QUERY_LENGTH} characters`);
  const missing = placeholders.filter((p) => !query.includes(p));
  if (missing.length > 0) return c.fail(field, `must contain ${missing.join(' and ')}`);
  return query;
}

function parseCheck(raw: unknown, i: number, path: string, errors: string[]): CheckSpec | undefined {
  if (!isRecord(raw)) {
    errors.push(`${path}.checks[${i}]: must be an object`);
    return undefined;
  }
  const c = new FieldReader(`${path}.checks[${i}]`, raw, errors);
  const before = errors.length;
  const name = c.string('name', true);
  if (name !== undefined && !CHECK_NAME.test(name))
    c.fail('name', 'lower-case letters, digits, "-", "_" and ".", at most 63 characters');
  const query = parseQuery(c, 'query', [TARGET_MATCHERS, RANGE]);
  const successQuery = parseQuery(c, 'successQuery', [CURRENT]);
  const onFailure = c.policy(['onFailure', 'failurePolicy'], 'Pause');
  const check: CheckSpec = {
    name: name ?? '',
    query: query ?? '',
    successQuery: successQuery ?? '',
    currentRangeMs: c.duration('currentRange', DEFAULTS.currentRangeMs),
    baselineRangeMs: c.duration('baselineRange', DEFAULTS.baselineRangeMs),
    queryTimeoutMs: c.duration('queryTimeout', DEFAULTS.queryTimeoutMs),
    queryRetries: c.integer('queryRetries', DEFAULTS.queryRetries, 0, MAX_QUERY_RETRIES),
    onFailure,
    onNoData: c.policy(['onNoData', 'noDataPolicy'], 'Pause'),
    onError: c.policy(['onError', 'errorPolicy'], onFailure),
    successThreshold: c.integer('successThreshold', 1, 1, MAX_THRESHOLD),
    failureThreshold: c.integer('failureThreshold', 1, 1, MAX_THRESHOLD),
    disabled: false,
  };
  const disabled = raw['disabled'];
  if (disabled !== undefined && disabled !== null && typeof disabled !== 'boolean')
    c.fail('disabled', 'must be a boolean');
  check.disabled = disabled === true;
  return errors.length === before ? check : undefined;
}

function parseChecks(spec: FieldReader): CheckSpec[] {
  const raw = spec.value['checks'];
  if (!Array.isArray(raw) || raw.length === 0) return spec.fail('checks', 'Required value: at least one check') ?? [];
  const checks = raw.flatMap((c, i) => parseCheck(c, i, spec.path, spec.errors) ?? []);
  const seen = new Set<string>();
  for (const check of checks) {
    if (seen.has(check.name)) spec.fail('checks', `duplicate check name ${JSON.stringify(check.name)}`);
    seen.add(check.name);
  }
  return checks;
}

/** Parses and validates one RolloutHealthCheck; every problem is reported, each with its field path. */
export function parseHealthCheck(object: RolloutHealthCheck): ParseResult {
  const errors: string[] = [];
  if (!isRecord(object.spec)) return { errors: ['spec: Required value'] };
  const spec = new FieldReader('spec', object.spec, errors);
  const matchLabels = parseMatchLabels(spec);
  const access = parseAccess(spec);
  const checks = parseChecks(spec);
  const bakeTimeMs = spec.duration('bakeTime', DEFAULTS.bakeTimeMs, 0);
  const evaluationIntervalMs = spec.duration(
    'evaluationInterval',
    DEFAULTS.evaluationIntervalMs,
    MIN_EVALUATION_INTERVAL_MS,
  );
  if (errors.length > 0 || !matchLabels || !access) return { errors };
  return {
    config: {
      name: object.metadata?.name ?? '',
      namespace: object.metadata?.namespace ?? '',
      generation: object.metadata?.generation ?? 0,
      matchLabels,
      access,
      checks,
      bakeTimeMs,
      evaluationIntervalMs,
    },
  };
}
