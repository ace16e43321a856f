// Configuration of reschedule-on-eviction (Couchbase's Eviction Reschedule
// Hook semantics, docs/migrating-from-couchbase-reschedule-hook.md); the
// label selectors that pick operator-managed pods are vocabulary/selectors.ts.
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
import { parseGoBool } from '../../runtime/go/strconv.ts';
import type { Pod } from '../../runtime/kube/types.ts';
import { parseGoDuration } from '../../runtime/go/duration.ts';
import {
  DNS_LABEL,
  DNS_SUBDOMAIN,
  type LabelSelector,
  type Parsed,
  qualifiedNameProblem,
  parseLabelSelector,
  matchesLabelSelector,
} from '../../vocabulary/selectors.ts';

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

/**
 * How a profile answers an eviction of a pod it asks its operator to move:
 * - deny-429: refuse as retryable; kubectl drain, Karpenter and the cluster
 *   autoscaler wait for the operator (Couchbase's hook; the default).
 * - deny-500: refuse as Strimzi Drain Cleaner does; kubectl drain fails and
 *   is re-run later (for users whose tooling expects that).
 * - allow: annotate first, then let the eviction through (Strimzi's
 *   "legacy" mode, for a PodDisruptionBudget to hold the pod instead).
 */
export type RescheduleAnswer = 'deny-429' | 'deny-500' | 'allow';
export const RESCHEDULE_ANSWERS: readonly RescheduleAnswer[] = ['deny-429', 'deny-500', 'allow'];

/** A regex every selected pod's label value must match in full (Java's Matcher.matches, as Strimzi's). */
export interface LabelPattern {
  key: string;
  /** As written, for messages and overlap checks. */
  source: string;
  regex: RegExp;
}

/** One reschedule profile: which pods, what to write on them, how to answer. */
export interface RescheduleConfig {
  /** For logs, metrics and error messages; undefined for the flags' own profile. */
  name?: string;
  /** A pod is handled when any selector matches its labels (and every pattern and the owner kind below). */
  selectors: readonly LabelSelector[];
  /** AND-ed with the selectors; absent = none. */
  labelPatterns?: readonly LabelPattern[];
  /** Kinds of the pod's controller (ownerReferences[controller=true]); absent = any owner or none. */
  ownerKinds?: ReadonlySet<string>;
  /** Absent = deny-429. */
  answer?: RescheduleAnswer;
  /** Replaces the texts of the answers that ask the operator to move the pod or find it waiting; absent = Couchbase's. */
  message?: string;
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
  name?: string;
  /** Label key → regex matched against the whole value. */
  labelPatterns?: Readonly<Record<string, string>>;
  ownerKinds?: string | readonly string[];
  answer?: string;
  message?: string;
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

  const extras = parseProfileExtras(input);
  errors.push(...extras.errors);

  if (errors.length > 0 || !annotation.ok || !ttl.ok) return { ok: false, errors };
  return {
    ok: true,
    config: {
      ...extras.fields,
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

type ProfileExtras = Pick<RescheduleConfig, 'name' | 'labelPatterns' | 'ownerKinds' | 'answer' | 'message'>;

/** Parses a regex matched against a whole label value; invalid ones are errors, not a silent never-match. */
export function parseLabelPattern(key: string, source: string): Parsed<LabelPattern> {
  const problem = qualifiedNameProblem(key);
  if (problem !== undefined) return { ok: false, error: `label pattern key ${problem}` };
  if (source === '') return { ok: false, error: `label pattern for ${key}: the regex must not be empty` };
  try {
    return { ok: true, value: { key, source, regex: new RegExp(`^(?:${source})$`) } };
  } catch (error) {
    return {
      ok: false,
      error: `label pattern for ${key} ${JSON.stringify(source)}: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}

/**
 * The fields only profiles use. Each is set only when given, so the flags'
 * profile is the very config it always was.
 */
function parseProfileExtras(input: RescheduleConfigInput): { fields: ProfileExtras; errors: string[] } {
  const errors: string[] = [];
  const fields: ProfileExtras = {};
  if (input.name !== undefined) {
    if (input.name.length > 63 || !DNS_LABEL.test(input.name))
      errors.push(`profile name ${JSON.stringify(input.name)}: must be a lowercase DNS label of at most 63 characters`);
    else fields.name = input.name;
  }
  if (input.labelPatterns !== undefined) {
    const patterns: LabelPattern[] = [];
    for (const [key, source] of Object.entries(input.labelPatterns)) {
      const parsed = parseLabelPattern(key, source);
      if (parsed.ok) patterns.push(parsed.value);
      else errors.push(parsed.error);
    }
    if (patterns.length > 0) fields.labelPatterns = patterns;
  }
  if (input.ownerKinds !== undefined) {
    const kinds = splitList(input.ownerKinds);
    for (const kind of kinds)
      if (!/^[A-Z][A-Za-z0-9]*$/.test(kind))
        errors.push(`owner kind ${JSON.stringify(kind)}: expected a kind such as StatefulSet`);
    if (kinds.length > 0) fields.ownerKinds = new Set(kinds);
  }
  if (input.answer !== undefined) {
    const answer = RESCHEDULE_ANSWERS.find((a) => a === input.answer);
    if (answer === undefined)
      errors.push(`answer ${JSON.stringify(input.answer)}: expected one of ${RESCHEDULE_ANSWERS.join(', ')}`);
    else fields.answer = answer;
  }
  if (input.message !== undefined) {
    const message = input.message.trim();
    if (message === '' || message.length > 1024)
      errors.push('message: must be between 1 and 1024 characters (it is what kubectl drain shows)');
    else fields.message = message;
  }
  return { fields, errors };
}

/** Whether evictions in this namespace are ours to look at (before any GET). */
export function namespaceInScope(config: RescheduleConfig, namespace: string): boolean {
  return config.namespaces === undefined || config.namespaces.has(namespace);
}

/** Whether a pod is this profile's: a selector, every label pattern and the owner kind match. */
export function profileSelects(config: RescheduleConfig, pod: Pod): boolean {
  const labels = pod.metadata?.labels;
  if (!podSelected(config, labels)) return false;
  for (const pattern of config.labelPatterns ?? []) {
    const value = labels?.[pattern.key];
    if (value === undefined || !pattern.regex.test(value)) return false;
  }
  if (config.ownerKinds === undefined) return true;
  const controller = (pod.metadata?.ownerReferences ?? []).find((o) => o.controller === true);
  return controller !== undefined && config.ownerKinds.has(controller.kind);
}

/** Whether a pod with these labels is operator-managed (any selector matches). */
export function podSelected(config: RescheduleConfig, labels: Readonly<Record<string, string>> | undefined): boolean {
  return config.selectors.some((s) => matchesLabelSelector(s, labels));
}
