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
