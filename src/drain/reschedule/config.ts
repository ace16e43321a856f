// Configuration of reschedule-on-eviction (Couchbase's Eviction Reschedule
// Hook semantics, docs/migrating-from-couchbase-reschedule-hook.md), and the
// Kubernetes label-selector grammar it uses to pick operator-managed pods.
//
// Differences from Couchbase's environment-only config, and why:
// - Pods are picked by label selectors, not one key=value pair: `app=couchbase`
//   (Couchbase's POD_LABEL_SELECTOR_KEY/VALUE defaults) is itself a
//   selector, so the old form keeps working. Several selectors are OR-ed.
// - A namespace list limits the blast radius (Couchbase's hook has none).
// - A bad boolean is an error: Couchbase's hook silently turns an unparsable
//   TRACK_RESCHEULED_PODS into false, which quietly disables the same-name
//   tracking.
// - Tracking records live in a ConfigMap in the pod's own namespace with a
//   TTL, so no cluster-wide write permission on Namespaces is needed.
import { parseGoBool } from '../../runtime/flags/gostrconv.ts';
import { parseGoDuration } from '../../runtime/flags/duration.ts';
import { quoteValue as quote } from '../../runtime/log/logger.ts';

// ------------------------------------------------------------ label selectors

export type SelectorOperator = 'Equals' | 'NotEquals' | 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface LabelRequirement {
  key: string;
  operator: SelectorOperator;
  /** One value for Equals/NotEquals, one or more for In/NotIn, none otherwise. */
  values: readonly string[];
}

/** Requirements are AND-ed; no requirement matches every set of labels (as labels.Everything). */
export interface LabelSelector {
  requirements: readonly LabelRequirement[];
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

const NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** A qualified name (label or annotation key): `[prefix/]name`; undefined when valid. */
export function qualifiedNameProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined) {
    if (prefix === '') return `key ${quote(key)}: the prefix before "/" must not be empty`;
    if (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)) {
      return `key ${quote(key)}: prefix ${quote(prefix)} must be a lowercase DNS subdomain of at most 253 characters`;
    }
  }
  if (name === '') return `key ${quote(key)}: the name part must not be empty`;
  if (name.length > 63) return `key ${quote(key)}: the name part must be at most 63 characters`;
  if (!NAME_PART.test(name)) {
    return `key ${quote(key)}: the name part must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  }
  return undefined;
}

function labelValueProblem(value: string): string | undefined {
  if (value.length > 63) return `value ${quote(value)} must be at most 63 characters`;
  if (!LABEL_VALUE.test(value)) {
    return `value ${quote(value)} must be empty or alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  }
  return undefined;
}

type Token =
  | { kind: 'word'; text: string } // an identifier; `in`/`notin` too, the parser decides by position
  | { kind: '(' | ')' | ',' | '!' | '=' | '==' | '!=' | '<' | '>' }
  | { kind: 'end' };

const END: Token = { kind: 'end' };
const isSpace = (code: number) => code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
/** `! = ( ) , < >`: each starts a symbol, and so ends a word. */
const isSymbolStart = (code: number) =>
  code === 0x21 || code === 0x3d || code === 0x28 || code === 0x29 || code === 0x2c || code === 0x3c || code === 0x3e;

/**
 * Splits like apimachinery's lexer: symbols and whitespace end a word.
 * Lazy, one token of lookahead: the parser stops at the first error, so a
 * long bad value (annotations may be 256 KiB) is read only up to it rather
 * than cut into tens of thousands of tokens first.
 */
function lexer(text: string): { peek: () => Token; next: () => Token } {
  let i = 0;
  let ahead: Token | undefined;
  const scan = (): Token => {
    while (i < text.length && isSpace(text.charCodeAt(i))) i++;
    if (i >= text.length) return END;
    const c = text.charCodeAt(i);
    if (isSymbolStart(c)) {
      const doubled = text.charCodeAt(i + 1) === 0x3d && (c === 0x21 || c === 0x3d); // != and ==
      const kind = text.slice(i, doubled ? i + 2 : i + 1) as Exclude<Token['kind'], 'word' | 'end'>;
      i += kind.length;
      return { kind };
    }
    const start = i;
    while (i < text.length && !isSpace(text.charCodeAt(i)) && !isSymbolStart(text.charCodeAt(i))) i++;
    return { kind: 'word', text: text.slice(start, i) };
  };
  return {
    peek: () => (ahead ??= scan()),
    next: () => {
      const token = ahead ?? scan();
      ahead = undefined;
      return token;
    },
  };
}

const show = (t: Token) => (t.kind === 'word' ? quote(t.text) : t.kind === 'end' ? 'end of string' : `'${t.kind}'`);

/**
 * Parses a label selector string as `kubectl -l` takes it: requirements
 * separated by commas, each `key`, `!key`, `key=v`, `key==v`, `key!=v`,
 * `key in (a,b)` or `key notin (a,b)`. Set-based `>`/`<` are refused (only
 * node selectors use them). An empty string is the match-everything selector.
 */
export function parseLabelSelector(text: string): Parsed<LabelSelector> {
  const { peek, next } = lexer(text);
  const fail = (error: string): Parsed<LabelSelector> => ({
    ok: false,
    error: `label selector ${quote(text)}: ${error}`,
  });
  const requirements: LabelRequirement[] = [];
  if (peek().kind === 'end') return { ok: true, value: { requirements } };

  for (;;) {
    let token = next();
    const negated = token.kind === '!';
    if (negated) token = next();
    if (token.kind !== 'word') return fail(`found ${show(token)}, expected a label key`);
    const key = token.text;
    const keyProblem = qualifiedNameProblem(key);
    if (keyProblem !== undefined) return fail(keyProblem);

    const op = peek();
    if (negated || op.kind === ',' || op.kind === 'end') {
      requirements.push({ key, operator: negated ? 'DoesNotExist' : 'Exists', values: [] });
    } else {
      next();
      let operator: SelectorOperator;
      let values: string[];
      if (op.kind === '=' || op.kind === '==' || op.kind === '!=') {
        operator = op.kind === '!=' ? 'NotEquals' : 'Equals';
        // `key=` (end or comma follows) is the empty value, as upstream.
        const v = peek();
        if (v.kind === ',' || v.kind === 'end') values = [''];
        else if (v.kind === 'word') {
          next();
          values = [v.text];
        } else return fail(`found ${show(v)} after ${key}${op.kind}, expected a value`);
      } else if (op.kind === 'word' && (op.text === 'in' || op.text === 'notin')) {
        operator = op.text === 'in' ? 'In' : 'NotIn';
        const list = parseValueList();
        if (typeof list === 'string') return fail(list);
        values = list;
      } else if (op.kind === '<' || op.kind === '>') {
        return fail(`operator '${op.kind}' is not supported (use =, ==, !=, in, notin, key or !key)`);
      } else {
        return fail(`found ${show(op)} after key ${quote(key)}, expected =, ==, !=, in, notin, ',' or end of string`);
      }
      for (const value of values) {
        const problem = labelValueProblem(value);
        if (problem !== undefined) return fail(`${key}: ${problem}`);
      }
      requirements.push({ key, operator, values });
    }

    const after = next();
    if (after.kind === 'end') return { ok: true, value: { requirements } };
    if (after.kind !== ',') return fail(`found ${show(after)}, expected ',' or end of string`);
    if (peek().kind === 'end') return fail('trailing comma');
  }

  /** `( v, v, … )`; empty items are empty values, `()` is the one empty value (as upstream). */
  function parseValueList(): string[] | string {
    const open = next();
    if (open.kind !== '(') return `found ${show(open)}, expected '('`;
    const values: string[] = [];
    let current = '';
    for (;;) {
      const t = next();
      if (t.kind === 'word') {
        if (current !== '') return `found ${show(t)} in a value list, expected ',' or ')'`;
        current = t.text;
      } else if (t.kind === ',') {
        values.push(current);
        current = '';
      } else if (t.kind === ')') {
        values.push(current);
        return values;
      } else {
        return `found ${show(t)} in a value list, expected a value, ',' or ')'`;
      }
    }
  }
}

/** Kubernetes semantics: `!=` and `notin` also match pods without the label. */
export function matchesLabelSelector(
  selector: LabelSelector,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  const all = labels ?? {};
  return selector.requirements.every((r) => {
    const has = Object.hasOwn(all, r.key);
    const value = has ? all[r.key] : undefined;
    switch (r.operator) {
      case 'Exists':
        return has;
      case 'DoesNotExist':
        return !has;
      case 'Equals':
      case 'In':
        return value !== undefined && r.values.includes(value);
      case 'NotEquals':
      case 'NotIn':
        return value === undefined || !r.values.includes(value);
    }
  });
}

/** The selector as a string parseLabelSelector reads back to the same requirements. */
export function formatLabelSelector(selector: LabelSelector): string {
  return selector.requirements
    .map((r) => {
      switch (r.operator) {
        case 'Exists':
          return r.key;
        case 'DoesNotExist':
          return `!${r.key}`;
        case 'Equals':
          return `${r.key}=${r.values[0] ?? ''}`;
        case 'NotEquals':
          return `${r.key}!=${r.values[0] ?? ''}`;
        case 'In':
          return `${r.key} in (${r.values.join(',')})`;
        case 'NotIn':
          return `${r.key} notin (${r.values.join(',')})`;
      }
    })
    .join(',');
}

// ------------------------------------------------------------- configuration

/** Couchbase's POD_LABEL_SELECTOR_KEY=app / POD_LABEL_SELECTOR_VALUE=couchbase. */
export const DEFAULT_POD_SELECTOR = 'app=couchbase';
/** RESCHEDULE_ANNOTATION_KEY / _VALUE: what Couchbase Autonomous Operator ≥ 2.7 watches. */
export const DEFAULT_RESCHEDULE_ANNOTATION = 'cao.couchbase.com/reschedule=true';
export const DEFAULT_TRACKING_CONFIG_MAP = 'stateward-reschedule-tracking';
/**
 * How long a tracking record may release a same-name replacement. Records of
 * pods still waiting are refreshed at half-life, so this only has to cover
 * the gap from the last refresh to the evictor's retry after the recreation
 * (kubectl retries every 5 s); short limits how long a leftover record lingers.
 */
export const DEFAULT_RECORD_TTL_MS = 60 * 60_000;
export const MIN_RECORD_TTL_MS = 60_000;
export const MAX_RECORD_TTL_MS = 24 * 60 * 60_000;
/**
 * Node taints meaning "being drained", besides spec.unschedulable (cordon):
 * the list CloudNativePG checks (kubectl cordon, Cluster Autoscaler, Karpenter).
 */
export const DEFAULT_DRAIN_TAINTS: readonly string[] = [
  'node.kubernetes.io/unschedulable',
  'ToBeDeletedByClusterAutoscaler',
  'karpenter.sh/disrupted',
  'karpenter.sh/disruption',
];

export interface RescheduleConfig {
  /** A pod is handled when any selector matches its labels. */
  selectors: readonly LabelSelector[];
  annotation: { key: string; value: string };
  /** Namespaces handled; undefined = every namespace. */
  namespaces: ReadonlySet<string> | undefined;
  /** Keep tracking records (Couchbase's TRACK_RESCHEULED_PODS); off = no same-name 404. */
  track: boolean;
  /** The ConfigMap, in each pod's namespace, holding the tracking records. */
  trackingConfigMap: string;
  recordTtlMs: number;
  /** Taint keys marking a node as being drained. */
  drainTaints: readonly string[];
}

/** Raw values, as flags or a file give them; every field is optional. */
export interface RescheduleConfigInput {
  /** Each entry is one selector (it may itself contain commas); default [DEFAULT_POD_SELECTOR]. */
  selectors?: readonly string[];
  /** `key=value`; default DEFAULT_RESCHEDULE_ANNOTATION. */
  annotation?: string;
  /** Comma-separated or a list; empty or `*` = all namespaces (Strimzi's convention). */
  namespaces?: string | readonly string[];
  track?: boolean | string;
  trackingConfigMap?: string;
  /** Milliseconds, or a Go duration such as `30m`. */
  recordTtl?: number | string;
  /** Comma-separated or a list of taint keys; default DEFAULT_DRAIN_TAINTS. */
  drainTaints?: string | readonly string[];
}

const splitList = (value: string | readonly string[]): string[] =>
  (typeof value === 'string' ? value.split(',') : [...value]).map((s) => s.trim()).filter((s) => s !== '');

function parseAnnotation(text: string): Parsed<{ key: string; value: string }> {
  const eq = text.indexOf('=');
  if (eq < 0) return { ok: false, error: `annotation ${JSON.stringify(text)}: expected key=value` };
  const key = text.slice(0, eq).trim();
  const value = text.slice(eq + 1).trim();
  const problem = qualifiedNameProblem(key);
  if (problem !== undefined) return { ok: false, error: `annotation ${problem}` };
  // An empty value reads as "not asked" to operators watching the annotation.
  if (value === '') return { ok: false, error: `annotation ${JSON.stringify(text)}: the value must not be empty` };
  return { ok: true, value: { key, value } };
}

function parseTtl(raw: number | string): Parsed<number> {
  let ms: number;
  if (typeof raw === 'number') {
    ms = raw;
  } else {
    try {
      ms = parseGoDuration(raw.trim());
    } catch (error) {
      return {
        ok: false,
        error: `record TTL ${JSON.stringify(raw)}: ${error instanceof Error ? error.message : String(error)}`,
      };
    }
  }
  if (!Number.isInteger(ms) || ms < MIN_RECORD_TTL_MS || ms > MAX_RECORD_TTL_MS) {
    return {
      ok: false,
      error: `record TTL ${JSON.stringify(raw)}: must be between 1m and 24h (an evictor must be able to retry within it)`,
    };
  }
  return { ok: true, value: ms };
}

/** Validates every field and reports every problem at once. */
export function parseRescheduleConfig(
  input: RescheduleConfigInput = {},
): { ok: true; config: RescheduleConfig } | { ok: false; errors: string[] } {
  const errors: string[] = [];

  const selectorTexts = input.selectors ?? [DEFAULT_POD_SELECTOR];
  if (selectorTexts.length === 0) errors.push('at least one pod selector is required');
  const selectors: LabelSelector[] = [];
  for (const text of selectorTexts) {
    const parsed = parseLabelSelector(text);
    if (!parsed.ok) errors.push(parsed.error);
    // An empty selector would take over every pod's eviction in scope.
    else if (parsed.value.requirements.length === 0)
      errors.push('a pod selector must not be empty (it would select every pod)');
    else selectors.push(parsed.value);
  }

  const annotation = parseAnnotation(input.annotation ?? DEFAULT_RESCHEDULE_ANNOTATION);
  if (!annotation.ok) errors.push(annotation.error);

  let namespaces: Set<string> | undefined;
  const nsList = splitList(input.namespaces ?? []);
  if (nsList.length > 0 && !nsList.includes('*')) {
    namespaces = new Set();
    for (const ns of nsList) {
      if (ns.length > 63 || !DNS_LABEL.test(ns))
        errors.push(`namespace ${JSON.stringify(ns)}: must be a lowercase DNS label of at most 63 characters`);
      else namespaces.add(ns);
    }
  }

  let track = true;
  if (typeof input.track === 'boolean') track = input.track;
  else if (input.track !== undefined) {
    try {
      track = parseGoBool(input.track.trim());
    } catch {
      errors.push(`track ${JSON.stringify(input.track)}: expected true or false`);
    }
  }

  const trackingConfigMap = (input.trackingConfigMap ?? DEFAULT_TRACKING_CONFIG_MAP).trim();
  if (trackingConfigMap.length > 253 || !DNS_SUBDOMAIN.test(trackingConfigMap)) {
    errors.push(
      `tracking ConfigMap ${JSON.stringify(trackingConfigMap)}: must be a lowercase DNS subdomain of at most 253 characters`,
    );
  }

  const ttl = parseTtl(input.recordTtl ?? DEFAULT_RECORD_TTL_MS);
  if (!ttl.ok) errors.push(ttl.error);

  const drainTaints = input.drainTaints === undefined ? [...DEFAULT_DRAIN_TAINTS] : splitList(input.drainTaints);
  for (const key of drainTaints) {
    const problem = qualifiedNameProblem(key);
    if (problem !== undefined) errors.push(`drain taint ${problem}`);
  }

  if (errors.length > 0 || !annotation.ok || !ttl.ok) return { ok: false, errors };
  return {
    ok: true,
    config: {
      selectors,
      annotation: annotation.value,
      namespaces,
      track,
      trackingConfigMap,
      recordTtlMs: ttl.value,
      drainTaints,
    },
  };
}

/** Whether evictions in this namespace are ours to look at (before any GET). */
export function namespaceInScope(config: RescheduleConfig, namespace: string): boolean {
  return config.namespaces === undefined || config.namespaces.has(namespace);
}

/** Whether a pod with these labels is operator-managed (any selector matches). */
export function podSelected(config: RescheduleConfig, labels: Readonly<Record<string, string>> | undefined): boolean {
  return config.selectors.some((s) => matchesLabelSelector(s, labels));
}
