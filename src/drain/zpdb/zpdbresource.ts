// The ZoneAwarePodDisruptionBudget (ZPDB) custom resource: its wire shape,
// parsing and validation (shared by the /admission/zpdb-validation webhook
// and the config cache, as in rollout-operator's pkg/zpdb/config.go), and the
// small pure questions the eviction decision asks of a parsed budget:
// how many pods may be unavailable, which budget covers a pod, and which
// partition a pod serves.
//
// Every validation message is rollout-operator's text, because users and alerts
// grep for them. podNamePartitionRegex is a Go regular expression, compiled
// and matched with Go's semantics (src/runtime/go/regexp.ts), so its errors
// are Go's too. Where Go and JavaScript still differ (error texts of the Go
// runtime) the closest faithful text is produced and the difference is noted
// next to the code.
import type { KubeObject, ObjectMeta, Pod, ResourceType, StatefulSet } from '../../runtime/kube/types.ts';
import { parseGoDuration } from '../../runtime/go/duration.ts';
import { compileGoRegexp, type GoRegexp } from '../../runtime/go/regexp.ts';
import { matchLabelsSelect } from '../../vocabulary/selectors.ts';

export const ZPDB_GROUP = 'rollout-operator.grafana.com';
export const ZPDB_VERSION = 'v1';
export const ZPDB_API_VERSION = `${ZPDB_GROUP}/${ZPDB_VERSION}`;
export const ZPDB_KIND = 'ZoneAwarePodDisruptionBudget';
export const ZPDB_PLURAL = 'zoneawarepoddisruptionbudgets';

export const zpdbResource = {
  group: ZPDB_GROUP,
  version: ZPDB_VERSION,
  resource: ZPDB_PLURAL,
  kind: ZPDB_KIND,
  namespaced: true,
} as const satisfies ResourceType;

/** spec field names, as rollout-operator's messages spell them. */
export const FIELD_MAX_UNAVAILABLE = 'maxUnavailable';
export const FIELD_MAX_UNAVAILABLE_PERCENTAGE = 'maxUnavailablePercentage';
export const FIELD_POD_NAME_PARTITION_REGEX = 'podNamePartitionRegex';
export const FIELD_POD_NAME_REGEX_GROUP = 'podNameRegexGroup';
export const FIELD_CROSS_ZONE_EVICTION_DELAY = 'crossZoneEvictionDelay';
/** Stateward's own field (rollout-operator's CRD has none): Kubernetes' PodDisruptionBudget field of that name. */
export const FIELD_UNHEALTHY_POD_EVICTION_POLICY = 'unhealthyPodEvictionPolicy';

/**
 * When a pod that is not Ready may be evicted, as Kubernetes'
 * PodDisruptionBudget spec.unhealthyPodEvictionPolicy:
 * - IfHealthyBudget (the default, and rollout-operator's only behaviour): it
 *   goes through the budget like any pod. The budget never counts the pod
 *   being evicted, so it may go while the rest of the budget is whole.
 * - AlwaysAllow: it may always be evicted, without spending the budget (it
 *   is already counted as unavailable). A Ready pod still goes through the budget.
 */
export const UNHEALTHY_POD_EVICTION_POLICIES = ['IfHealthyBudget', 'AlwaysAllow'] as const;
export type UnhealthyPodEvictionPolicy = (typeof UNHEALTHY_POD_EVICTION_POLICIES)[number];

/** The budget when neither maxUnavailable nor maxUnavailablePercentage is set. */
export const DEFAULT_MAX_UNAVAILABLE = 1;

export const MULTIPLE_ZPDBS_MESSAGE = 'multiple zoned pod disruption budgets found for pod';
export const PARTITION_NOT_FOUND_MESSAGE = 'failed to extract partition from pod Name regular expression';

/** The object as it travels over the wire (the CRD's openAPIV3Schema). */
export interface ZoneAwarePodDisruptionBudgetSpec {
  maxUnavailable?: number;
  maxUnavailablePercentage?: number;
  selector: { matchLabels: Record<string, string> };
  podNamePartitionRegex?: string;
  podNameRegexGroup?: number;
  /** A Go duration string, e.g. "20m". */
  crossZoneEvictionDelay?: string;
  /** Stateward only; default IfHealthyBudget. */
  unhealthyPodEvictionPolicy?: UnhealthyPodEvictionPolicy;
}

export interface ZoneAwarePodDisruptionBudget extends KubeObject {
  metadata?: ObjectMeta;
  spec?: ZoneAwarePodDisruptionBudgetSpec;
  /** The CRD has a status subresource; nothing writes it. */
  status?: Record<string, unknown>;
}

/** The budget per zone (zone mode) or per partition across zones (partition mode). */
export type MaxUnavailable =
  | { kind: 'count'; value: number }
  /** Of the evicted pod's StatefulSet replicas; never combined with a partition regex. */
  | { kind: 'percentage'; value: number };

export interface PartitionRule {
  /** podNamePartitionRegex as written. */
  source: string;
  /** Compiled with Go's semantics (RE2); matched against the whole pod name. */
  regex: GoRegexp;
  /** 1-based capture group holding the partition name, numbered as Go numbers them. */
  group: number;
}

/** A parsed, valid ZPDB. */
export interface ZpdbConfig {
  name: string;
  namespace: string;
  generation: number;
  maxUnavailable: MaxUnavailable;
  /** spec.selector.matchLabels; selects both pods and StatefulSets. */
  matchLabels: Readonly<Record<string, string>>;
  /** Set: partition mode. Unset: zone mode. */
  partition?: PartitionRule;
  /** 0 when unset. Only ever > 0 in partition mode. */
  crossZoneEvictionDelayMs: number;
  /** Set only when the spec sets it; unset means IfHealthyBudget. */
  unhealthyPodEvictionPolicy?: UnhealthyPodEvictionPolicy;
}

export type ParseResult = { config: ZpdbConfig } | { error: string };

// -------------------------------------------------------------- Go-isms

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What unstructured JSON decodes to in Go: integers are int64 there. */
function isGoInt(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}

// Go's %T and %v of a decoded JSON value, for the accessor errors that
// apimachinery's unstructured helpers produce (and rollout-operator passes on).
function goType(value: unknown): string {
  if (value === null || value === undefined) return '<nil>';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int64' : 'float64';
  if (Array.isArray(value)) return '[]interface {}';
  return 'map[string]interface {}';
}

/** Nesting printed by goValue; deeper values show as `...` (a recursive walk of any depth would overflow the stack). */
const GO_VALUE_MAX_DEPTH = 32;

function goValue(value: unknown, depth = 0): string {
  if (value === null || value === undefined) return '<nil>';
  if ((Array.isArray(value) || isRecord(value)) && depth >= GO_VALUE_MAX_DEPTH) return '...';
  if (Array.isArray(value)) return `[${value.map((v) => goValue(v, depth + 1)).join(' ')}]`;
  if (isRecord(value))
    return `map[${Object.keys(value)
      .sort()
      .map((k) => `${k}:${goValue(value[k], depth + 1)}`)
      .join(' ')}]`;
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : typeof value;
}

function notAMap(path: string, value: unknown): string {
  return `${path} accessor error: ${goValue(value)} is of the type ${goType(value)}, expected map[string]interface{}`;
}

// ----------------------------------------------------------------- regex

/**
 * Longest podNamePartitionRegex accepted. Go has no such limit, but pod
 * names are at most 253 characters, and compiling costs time in the
 * validation webhook and the eviction webhook's cache: a 1,024-character
 * pattern can already expand to ~100,000 instructions (\pL{1000}…).
 */
const MAX_PARTITION_REGEX_LENGTH = 1024;

function parsePartitionRule(spec: Record<string, unknown>): PartitionRule | undefined | { error: string } {
  if (!Object.hasOwn(spec, FIELD_POD_NAME_PARTITION_REGEX)) return undefined;
  const source = spec[FIELD_POD_NAME_PARTITION_REGEX];
  if (typeof source !== 'string')
    return { error: `failed to extract regex value from config field ${FIELD_POD_NAME_PARTITION_REGEX}` };
  // An empty regex is "no regex" (and podNameRegexGroup is then not looked at).
  if (source === '') return undefined;

  const groupSet = Object.hasOwn(spec, FIELD_POD_NAME_REGEX_GROUP);
  const rawGroup = spec[FIELD_POD_NAME_REGEX_GROUP];
  if (groupSet && !isGoInt(rawGroup))
    return { error: `failed to extract group value from config field ${FIELD_POD_NAME_REGEX_GROUP}` };
  const group = groupSet ? (rawGroup as number) : 1;

  if (source.length > MAX_PARTITION_REGEX_LENGTH)
    return {
      error: `error parsing regexp: expression too large (longer than ${MAX_PARTITION_REGEX_LENGTH} characters)`,
    };
  // Go's regexp (RE2): the syntax rollout-operator accepts, its leftmost-first
  // submatches, and matching in time linear in the pod name whatever the pattern.
  const compiled = compileGoRegexp(source);
  if ('error' in compiled) return { error: compiled.error };
  const groups = compiled.regexp.numSubexp;

  if (groups === 0) return { error: 'regular expression requires at least one subexpression' };
  if (groups > 1 && !groupSet)
    return {
      error: `regular expression has multiple subexpressions and requires ${FIELD_POD_NAME_REGEX_GROUP} to be set`,
    };
  // rollout-operator accepts a group < 1: 0 makes every pod name its own partition
  // and a negative group panics on the first eviction. The CRD schema says
  // minimum 1; refuse it here too (same message as a group past the end).
  if (group < 1 || group > groups) return { error: 'regular expression subexpression index out of range' };
  return { source, regex: compiled.regexp, group };
}

// ----------------------------------------------------------------- parse

function parseSpecInteger(spec: Record<string, unknown>, field: string): number | { error: string } {
  const value = spec[field];
  if (!isGoInt(value)) return { error: `failed to extract value from config field ${field}` };
  return value;
}

/**
 * rollout-operator's ParseAndValidate: the decoded object (any JSON value)
 * to a config, or the first problem found, checked in rollout-operator's order.
 */
export function parseZpdb(obj: unknown): ParseResult {
  const fail = (error: string): ParseResult => ({ error });
  if (!isRecord(obj) || !Object.hasOwn(obj, 'spec')) return fail('no spec found in unstructured object');
  const spec = obj.spec;
  if (!isRecord(spec)) return fail(notAMap('.spec', spec));
  // apiVersion is not checked (rollout-operator does not; the webhook registration
  // and the informer only ever deliver rollout-operator.grafana.com/v1).
  if (obj.kind !== ZPDB_KIND) return fail(`unexpected object kind - expecting ${ZPDB_KIND}`);

  const hasCount = Object.hasOwn(spec, FIELD_MAX_UNAVAILABLE);
  const hasPercentage = Object.hasOwn(spec, FIELD_MAX_UNAVAILABLE_PERCENTAGE);
  if (hasCount && hasPercentage)
    return fail('invalid value: only one of maxUnavailable or maxUnavailablePercentage may be set');

  let maxUnavailable: MaxUnavailable = { kind: 'count', value: DEFAULT_MAX_UNAVAILABLE };
  if (hasCount) {
    const value = parseSpecInteger(spec, FIELD_MAX_UNAVAILABLE);
    if (typeof value !== 'number') return value;
    if (value < 0) return fail(`invalid value: max unavailable must be 0 <= val, got ${value}`);
    maxUnavailable = { kind: 'count', value };
  } else if (hasPercentage) {
    const value = parseSpecInteger(spec, FIELD_MAX_UNAVAILABLE_PERCENTAGE);
    if (typeof value !== 'number') return value;
    if (value < 0 || value > 100)
      return fail(`invalid value: max unavailable percentage must be 0 <= val <= 100, got ${value}`);
    maxUnavailable = { kind: 'percentage', value };
  }

  const partition = parsePartitionRule(spec);
  if (partition !== undefined && 'error' in partition)
    return fail(`invalid value: regex is not valid, got ${partition.error}`);

  const matchLabels = parseMatchLabels(spec);
  if ('error' in matchLabels) return matchLabels;

  let crossZoneEvictionDelayMs = 0;
  if (Object.hasOwn(spec, FIELD_CROSS_ZONE_EVICTION_DELAY)) {
    const raw = spec[FIELD_CROSS_ZONE_EVICTION_DELAY];
    if (typeof raw !== 'string')
      return fail(`failed to extract value from config field ${FIELD_CROSS_ZONE_EVICTION_DELAY}`);
    if (raw !== '') {
      try {
        crossZoneEvictionDelayMs = parseGoDuration(raw);
      } catch (e) {
        return fail(
          `invalid value: ${FIELD_CROSS_ZONE_EVICTION_DELAY} is not a valid duration, got ${(e as Error).message}`,
        );
      }
      if (crossZoneEvictionDelayMs < 0)
        return fail(`invalid value: ${FIELD_CROSS_ZONE_EVICTION_DELAY} must be >= 0, got ${raw}`);
    }
  }
  // The delay guards a partition's other replicas; zone mode has no peers to wait for.
  if (crossZoneEvictionDelayMs > 0 && partition === undefined) {
    return fail('invalid value: crossZoneEvictionDelay requires podNamePartitionRegex to be set');
  }
  // A percentage is of a zone's replicas, while a partition budget spans zones.
  if (maxUnavailable.kind === 'percentage' && maxUnavailable.value > 0 && partition !== undefined) {
    return fail('invalid value: max unavailable percentage can not be used with partition awareness');
  }

  // Stateward's own field, checked after every rollout-operator check, so a
  // budget rollout-operator refuses is refused with rollout-operator's message.
  const policy = parseUnhealthyPodEvictionPolicy(spec);
  if (typeof policy === 'object') return policy;

  const metadata = isRecord(obj.metadata) ? obj.metadata : {};
  return {
    config: {
      name: typeof metadata.name === 'string' ? metadata.name : '',
      namespace: typeof metadata.namespace === 'string' ? metadata.namespace : '',
      generation: isGoInt(metadata.generation) ? metadata.generation : 0,
      maxUnavailable,
      matchLabels: matchLabels.matchLabels,
      ...(partition !== undefined ? { partition } : {}),
      crossZoneEvictionDelayMs,
      ...(policy !== undefined ? { unhealthyPodEvictionPolicy: policy } : {}),
    },
  };
}

/**
 * spec.unhealthyPodEvictionPolicy: unset, or exactly one of the policies
 * (case-sensitive, as Kubernetes). An unknown policy is an invalid budget,
 * which denies evictions: Kubernetes asks clients that meet a policy they
 * do not know to disallow evicting unhealthy pods.
 */
function parseUnhealthyPodEvictionPolicy(
  spec: Record<string, unknown>,
): UnhealthyPodEvictionPolicy | undefined | { error: string } {
  if (!Object.hasOwn(spec, FIELD_UNHEALTHY_POD_EVICTION_POLICY)) return undefined;
  const raw = spec[FIELD_UNHEALTHY_POD_EVICTION_POLICY];
  if (typeof raw !== 'string')
    return { error: `failed to extract value from config field ${FIELD_UNHEALTHY_POD_EVICTION_POLICY}` };
  const policy = UNHEALTHY_POD_EVICTION_POLICIES.find((p) => p === raw);
  if (policy === undefined)
    return {
      error: `invalid value: ${FIELD_UNHEALTHY_POD_EVICTION_POLICY} must be ${UNHEALTHY_POD_EVICTION_POLICIES.join(' or ')}, got ${JSON.stringify(raw)}`,
    };
  return policy;
}

/** spec.selector.matchLabels as apimachinery's NestedStringMap reads it. */
function parseMatchLabels(spec: Record<string, unknown>): { matchLabels: Record<string, string> } | { error: string } {
  const invalid = (why: string) => ({ error: `invalid value: selector is not valid, got ${why}` });
  const notFound = { error: 'invalid value: selector is not found' };
  if (!Object.hasOwn(spec, 'selector')) return notFound;
  const selector = spec.selector;
  if (!isRecord(selector)) return invalid(notAMap('.spec.selector.matchLabels', selector));
  if (!Object.hasOwn(selector, 'matchLabels')) return notFound;
  const labels = selector.matchLabels;
  if (!isRecord(labels)) return invalid(notAMap('.spec.selector.matchLabels', labels));
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) {
    if (typeof value !== 'string') {
      return invalid(
        `.spec.selector.matchLabels accessor error: contains non-string value in the map under key ${JSON.stringify(key)}: ${goValue(value)} is of the type ${goType(value)}, expected string`,
      );
    }
    out[key] = value;
  }
  return { matchLabels: out };
}

// ----------------------------------------------------------- the budget

/**
 * The replica count a percentage applies to: min(spec.replicas,
 * status.replicas), the more conservative of desired and created. As rollout-operator, an unset spec.replicas gives 0 (the API server always sets it).
 */
export function budgetReplicas(statefulSet: StatefulSet): number {
  const spec = statefulSet.spec?.replicas;
  if (spec === undefined || spec === null) return 0;
  return Math.max(0, Math.min(spec, statefulSet.status?.replicas ?? 0));
}

/**
 * Pods that may be unavailable for a zone (or partition) of `replicas`: the
 * count as set, or floor(percentage × replicas / 100) but at least 1, and 0
 * for no replicas or a 0% budget. 0 means no voluntary evictions.
 */
export function maxUnavailableForReplicas(config: Pick<ZpdbConfig, 'maxUnavailable'>, replicas: number): number {
  const budget = config.maxUnavailable;
  if (budget.kind === 'count') return budget.value;
  if (budget.value <= 0 || replicas <= 0) return 0;
  return Math.max(1, Math.floor((budget.value * replicas) / 100));
}

/** The budget for an eviction from this StatefulSet (the evicted pod's owner). */
export function maxUnavailablePods(config: Pick<ZpdbConfig, 'maxUnavailable'>, statefulSet: StatefulSet): number {
  return maxUnavailableForReplicas(config, budgetReplicas(statefulSet));
}

// ------------------------------------------------------ invalid budgets

/**
 * A ZPDB that does not validate (it got past the validation webhook, e.g.
 * while that was down or set to Ignore, or was valid for an older version):
 * what can still be read of it. It fails closed: evictions of the pods it
 * may cover are denied until it is fixed. rollout-operator ignores such a
 * budget, which leaves the evictions it was meant to limit unlimited.
 */
export interface InvalidZpdb {
  name: string;
  namespace: string;
  /** parseZpdb's error. */
  error: string;
  /** spec.selector.matchLabels when they can be read; undefined when the selector itself is what is wrong. */
  matchLabels?: Readonly<Record<string, string>>;
}

/** What can be read of a budget parseZpdb refused with `error`. */
export function invalidZpdb(obj: unknown, error: string): InvalidZpdb {
  const metadata = isRecord(obj) && isRecord(obj.metadata) ? obj.metadata : {};
  const spec = isRecord(obj) && isRecord(obj.spec) ? obj.spec : undefined;
  const selector = spec ? parseMatchLabels(spec) : undefined;
  return {
    name: typeof metadata.name === 'string' ? metadata.name : '',
    namespace: typeof metadata.namespace === 'string' ? metadata.namespace : '',
    error,
    ...(selector && 'matchLabels' in selector ? { matchLabels: selector.matchLabels } : {}),
  };
}

/**
 * Whether an invalid budget may cover the pod: its selector selects it, or,
 * when the selector cannot be read, the pod belongs to a StatefulSet of the
 * budget's namespace (the only pods a ZPDB is for: which of them it meant is
 * unknown, so none is evicted on a guess; other pods are not held back by a
 * budget that could not have protected them).
 */
export function invalidZpdbCovers(budget: InvalidZpdb, pod: Pod): boolean {
  const namespace = pod.metadata?.namespace ?? '';
  if (budget.namespace !== '' && namespace !== '' && budget.namespace !== namespace) return false;
  if (budget.matchLabels) return zpdbSelects({ matchLabels: budget.matchLabels }, pod.metadata?.labels);
  return pod.metadata?.ownerReferences?.some((r) => r.controller === true && r.kind === 'StatefulSet') ?? false;
}

/** What an invalid budget does: "evictions of the pods it selects are denied until it is fixed". */
export function invalidZpdbEffect(budget: InvalidZpdb): string {
  return budget.matchLabels
    ? 'evictions of the pods it selects are denied until it is fixed'
    : `its selector cannot be read, so evictions of StatefulSet pods in namespace ${budget.namespace} are denied until it is fixed`;
}

/** The denial of an eviction under an invalid budget, naming it and its problem. */
export function invalidZpdbMessage(budget: InvalidZpdb): string {
  return `${ZPDB_KIND} ${budget.namespace}/${budget.name} is invalid, ${invalidZpdbEffect(budget)}: ${budget.error}`;
}

// ------------------------------------------------------------- matching

/**
 * Whether the budget's matchLabels select these labels. As a Kubernetes
 * PodDisruptionBudget (and rollout-operator), empty matchLabels select everything.
 */
export function zpdbSelects(
  config: Pick<ZpdbConfig, 'matchLabels'>,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  return matchLabelsSelect(config.matchLabels, labels);
}

export type ZpdbLookup =
  | { kind: 'none' }
  | { kind: 'match'; config: ZpdbConfig }
  /** rollout-operator, like Kubernetes' own eviction, refuses to pick one. */
  | { kind: 'multiple'; error: string; names: string[] };

/**
 * The ZPDB covering a pod: the one whose selector matches the pod's labels.
 * Several → an error (the pod's eviction is then denied), none → the pod is
 * not in any ZPDB's scope. A budget only covers pods of its own namespace
 * (rollout-operator watches a single namespace, so it never needed the check).
 */
export function findZpdbForPod(configs: Iterable<ZpdbConfig>, pod: Pod): ZpdbLookup {
  const namespace = pod.metadata?.namespace ?? '';
  const matches = [...configs].filter(
    (c) =>
      (c.namespace === '' || namespace === '' || c.namespace === namespace) && zpdbSelects(c, pod.metadata?.labels),
  );
  if (matches.length === 0) return { kind: 'none' };
  if (matches.length === 1) return { kind: 'match', config: matches[0]! };
  return { kind: 'multiple', error: MULTIPLE_ZPDBS_MESSAGE, names: matches.map((c) => c.name).sort() };
}

/**
 * The partition a pod serves: the configured capture group of the regex on
 * its name. undefined in zone mode (no regex); an error when the name does
 * not match or the group is empty.
 */
export function podPartition(
  config: Pick<ZpdbConfig, 'partition'>,
  podName: string,
): string | undefined | { error: string } {
  const rule = config.partition;
  if (rule === undefined) return undefined;
  let known = partitionsSeen.get(rule);
  if (!known) partitionsSeen.set(rule, (known = new Map<string, string>()));
  const seen = known.get(podName);
  if (seen !== undefined) return seen === '' ? { error: PARTITION_NOT_FOUND_MESSAGE } : seen;
  // The whole name, every branch of an alternation included: rollout-operator
  // compiles "^" + regex + "$", which anchors only the outer branches (`a|b`
  // → `^a|b$`); the CRD documents a match of the whole name.
  const value = rule.regex.submatchWhole(podName)?.[rule.group] ?? '';
  if (known.size >= MAX_PARTITIONS_SEEN) known.clear();
  known.set(podName, value);
  return value === '' ? { error: PARTITION_NOT_FOUND_MESSAGE } : value;
}

/**
 * Partitions already found per rule ('' for none): each eviction asks for
 * the partition of every pod of the group, and the answer for a name never
 * changes. A new generation of the budget is a new rule.
 */
const partitionsSeen = new WeakMap<PartitionRule, Map<string, string>>();
const MAX_PARTITIONS_SEEN = 4096;
