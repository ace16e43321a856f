// `stateward doctor`, the pure part: the objects a client can list in, a
// list of misconfigurations out, each with what to do about it. One function
// per check, each with stable codes (scripts and alerts may match on them).
// Values are judged by the parsers the operator itself uses (scaling
// validation, rollout-max-unavailable, ZPDB parsing, config references), so
// what the doctor calls wrong is exactly what the operator would ignore,
// refuse or trip over.
//
// Codes (severity: e error, w warning, e/w depending on the case):
//   key-should-be-label e/w, key-should-be-annotation e/w, key-on-pod-template e/w
//   group-not-ondelete e, leader-not-found e, leader-cycle e
//   not-exactly-true e, invalid-min-time e, invalid-last-downscale e,
//   incomplete-mirror e, invalid-mirror-write-back w, force-replicas-ignored w,
//   invalid-delayed-downscale e, invalid-scaling-metadata w,
//   last-downscale-in-future w, invalid-max-unavailable w,
//   prepare-downscale-incomplete e
//   webhook-ca-labels-missing e/w, webhook-ca-bundle-empty e,
//   webhook-namespace-mismatch e, webhook-failure-policy-ignore e/w,
//   no-downscale-selects-operator e
//   zpdb-invalid e, zpdb-no-statefulsets e/w, zpdb-single-statefulset e, zpdb-overlap e
//   config-missing e/w, config-restart-annotation w
//   ondelete-unmanaged w, operator-flag-missing w, checks-skipped w, check-failed w
import type { V1DaemonSet, V1Deployment } from '@kubernetes/client-node';
import type { KubeObject, Pod, StatefulSet, Wire } from '../runtime/kube/types.ts';
import { parseGoDuration } from '../runtime/flags/duration.ts';
import { parseMaxUnavailable } from '../rollout/annotations.ts';
import {
  SCALING_ANNOTATION_KEYS,
  SCALING_LABEL_KEYS,
  chainOrder,
  leaderFor,
  validateScalingMetadata,
} from '../downscale/coordination/plan.ts';
import { parseRfc3339 } from '../vocabulary/rfc3339.ts';
import { ZPDB_KIND, findZpdbForPod, parseZpdb, zpdbSelects, type ZpdbConfig } from '../drain/zpdb/config.ts';
import { matchesLabelSelector, type LabelRequirement } from '../drain/reschedule/config.ts';
import { configKey, mayOptIn, watchedConfigs, type ConfigKind } from '../restarts/references.ts';
import {
  DELAYED_DOWNSCALE_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_URL_ANNOTATION_KEY,
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  EVICT_ONDELETE_ANNOTATION,
  FORCE_REPLICAS_ANNOTATION_KEY,
  INJECT_LABEL,
  LAST_DOWNSCALE_ANNOTATION_KEY,
  MAX_UNAVAILABLE_ANNOTATION,
  MIN_TIME_BETWEEN_ZONES_DOWNSCALE_LABEL_KEY,
  MIRROR_API_VERSION_ANNOTATION_KEY,
  MIRROR_KIND_ANNOTATION_KEY,
  MIRROR_NAME_ANNOTATION_KEY,
  MIRROR_WRITE_BACK_ANNOTATION_KEY,
  NAMESPACE_LABEL,
  NO_DOWNSCALE_LABEL_KEY,
  PAUSED_ANNOTATION,
  PREPARE_DOWNSCALE_LABEL_KEY,
  PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY,
  PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY,
  RELOADER_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_EXCLUDE_ANNOTATION,
  RELOADER_CONFIGMAP_RELOAD_ANNOTATION,
  RELOADER_SEARCH_ANNOTATION,
  RELOADER_SECRET_AUTO_ANNOTATION,
  RELOADER_SECRET_EXCLUDE_ANNOTATION,
  RELOADER_SECRET_RELOAD_ANNOTATION,
  ROLLOUT_GROUP_LABEL,
  UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY,
  XING_ENABLED_ANNOTATION,
} from '../vocabulary/keys.ts';

// ------------------------------------------------------------------ types

export type Severity = 'error' | 'warning';

export interface Finding {
  severity: Severity;
  /** Stable identifier of the check, e.g. "key-should-be-label". */
  code: string;
  /** Kind and name, e.g. "StatefulSet mimir/ingester-zone-a" or "ValidatingWebhookConfiguration no-downscale-mimir". */
  object: string;
  problem: string;
  fix: string;
}

export type Deployment = Wire<V1Deployment>;
export type DaemonSet = Wire<V1DaemonSet>;

/** metav1.LabelSelector as the API serves it. */
export interface SelectorSpec {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

export interface WebhookEntry {
  name?: string;
  failurePolicy?: string;
  clientConfig?: {
    caBundle?: string;
    url?: string;
    service?: { name?: string; namespace?: string; path?: string; port?: number };
  };
  namespaceSelector?: SelectorSpec;
  objectSelector?: SelectorSpec;
  rules?: { apiGroups?: string[]; apiVersions?: string[]; operations?: string[]; resources?: string[] }[];
}

export interface WebhookConfigurationObject extends KubeObject {
  webhooks?: WebhookEntry[];
}

export interface DoctorInput {
  /** Milliseconds since the epoch. */
  now: number;
  /**
   * The namespaces diagnosed; undefined means every namespace. Namespaced
   * objects elsewhere are ignored, and a webhook configuration is checked
   * only when it concerns one of them (its operator namespace, its Service's
   * namespace, or a namespaceSelector that selects one).
   */
  namespaces?: readonly string[];
  /** Labels of the diagnosed namespaces, when readable (for namespaceSelectors); kubernetes.io/metadata.name is assumed. */
  namespaceLabels?: Readonly<Record<string, Record<string, string>>>;
  /** The namespace the operator runs in, when known (else guessed from its Deployment). */
  operatorNamespace?: string;
  statefulSets: StatefulSet[];
  /** Metadata is enough: labels and ownerReferences. */
  pods: Pod[];
  /** ZoneAwarePodDisruptionBudgets (rollout-operator.grafana.com/v1); [] when the CRD is not installed. */
  zpdbs: KubeObject[];
  deployments: Deployment[];
  daemonSets: DaemonSet[];
  /** Metadata only: names and annotations, never data. */
  configMaps: KubeObject[];
  secrets: KubeObject[];
  validatingWebhookConfigurations: WebhookConfigurationObject[];
  mutatingWebhookConfigurations: WebhookConfigurationObject[];
  /** The operator's own Deployment(s), found anywhere in the cluster (they may live outside `namespaces`). */
  operatorDeployments?: Deployment[];
  /**
   * Resources that could not be listed (plural names: "secrets",
   * "validatingwebhookconfigurations", …): the checks that need them are
   * skipped (and say so) rather than guessing.
   */
  unreadable?: string[];
}

// --------------------------------------------------------------- helpers

type Kind = 'StatefulSet' | 'Deployment' | 'DaemonSet';
type Workload = (StatefulSet | Deployment | DaemonSet) & KubeObject;

const nameOf = (o: KubeObject): string => o.metadata?.name ?? '';
const nsOf = (o: KubeObject): string => o.metadata?.namespace ?? '';
const labelsOf = (o: KubeObject): Record<string, string> => o.metadata?.labels ?? {};
const annotationsOf = (o: KubeObject): Record<string, string> => o.metadata?.annotations ?? {};

function objectName(kind: string, o: KubeObject): string {
  const ns = nsOf(o);
  return ns ? `${kind} ${ns}/${nameOf(o)}` : `${kind} ${nameOf(o)}`;
}

/** A word the shell passes through unchanged, or single-quoted. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

function kubectl(o: KubeObject, kind: string, verb: string, ...args: string[]): string {
  const ns = nsOf(o);
  return ['kubectl', ...(ns ? ['-n', shellQuote(ns)] : []), verb, `${kind.toLowerCase()}/${nameOf(o)}`, ...args].join(
    ' ',
  );
}

const has = (record: Record<string, string>, key: string): boolean => Object.hasOwn(record, key);

function pick(record: Record<string, string>, keys: readonly string[]): Record<string, string> {
  return Object.fromEntries(Object.entries(record).filter(([k]) => keys.includes(k)));
}

function omit(record: Record<string, string>, keys: readonly string[]): Record<string, string> {
  return Object.fromEntries(Object.entries(record).filter(([k]) => !keys.includes(k)));
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** metav1.LabelSelector semantics; an absent selector selects everything. */
export function selectorMatches(
  selector: SelectorSpec | undefined,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  if (selector === undefined) return true;
  const requirements: LabelRequirement[] = Object.entries(selector.matchLabels ?? {}).map(([key, value]) => ({
    key,
    operator: 'Equals',
    values: [value],
  }));
  for (const e of selector.matchExpressions ?? []) {
    if (e.operator !== 'In' && e.operator !== 'NotIn' && e.operator !== 'Exists' && e.operator !== 'DoesNotExist')
      return false;
    requirements.push({ key: e.key, operator: e.operator, values: e.values ?? [] });
  }
  return matchesLabelSelector({ requirements }, labels);
}

/** Whether a pod is controlled by this StatefulSet. */
function ownedBy(pod: Pod, sts: StatefulSet): boolean {
  const ref = pod.metadata?.ownerReferences?.find((r) => r.controller);
  if (!ref || ref.kind !== 'StatefulSet' || ref.name !== nameOf(sts) || nsOf(pod) !== nsOf(sts)) return false;
  return !ref.uid || !sts.metadata?.uid || ref.uid === sts.metadata.uid;
}

class Scope {
  readonly input: DoctorInput;
  private readonly unreadable: ReadonlySet<string>;

  constructor(input: DoctorInput) {
    this.input = input;
    this.unreadable = new Set(input.unreadable ?? []);
  }

  inScope = (o: KubeObject): boolean => this.input.namespaces === undefined || this.input.namespaces.includes(nsOf(o));

  readable(resource: string): boolean {
    return !this.unreadable.has(resource);
  }

  get statefulSets(): StatefulSet[] {
    return this.input.statefulSets.filter(this.inScope);
  }

  get pods(): Pod[] {
    return this.input.pods.filter(this.inScope);
  }

  get workloads(): { kind: Kind; workload: Workload }[] {
    return [
      ...this.input.deployments.filter(this.inScope).map((workload) => ({ kind: 'Deployment' as const, workload })),
      ...this.statefulSets.map((workload) => ({ kind: 'StatefulSet' as const, workload })),
      ...this.input.daemonSets.filter(this.inScope).map((workload) => ({ kind: 'DaemonSet' as const, workload })),
    ];
  }

  /** Rollout groups: namespace/group → its StatefulSets. */
  groups(): Map<string, { namespace: string; group: string; sets: StatefulSet[] }> {
    const groups = new Map<string, { namespace: string; group: string; sets: StatefulSet[] }>();
    for (const sts of this.statefulSets) {
      const labels = labelsOf(sts);
      if (!has(labels, ROLLOUT_GROUP_LABEL)) continue;
      const group = labels[ROLLOUT_GROUP_LABEL]!;
      const key = `${nsOf(sts)}/${group}`;
      const entry = groups.get(key) ?? { namespace: nsOf(sts), group, sets: [] };
      entry.sets.push(sts);
      groups.set(key, entry);
    }
    return groups;
  }

  /** The operator's Deployments: by their labels or image. */
  operatorDeployments(): Deployment[] {
    const all = [...this.input.deployments, ...(this.input.operatorDeployments ?? [])].filter(isOperatorDeployment);
    const seen = new Set<string>();
    return all.filter((d) => {
      const key = `${nsOf(d)}/${nameOf(d)}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  operatorNamespace(): string | undefined {
    if (this.input.operatorNamespace) return this.input.operatorNamespace;
    const namespaces = [...new Set(this.operatorDeployments().map(nsOf))];
    return namespaces.length === 1 ? namespaces[0] : undefined;
  }

  namespaceLabels(namespace: string): Record<string, string> {
    return { 'kubernetes.io/metadata.name': namespace, ...(this.input.namespaceLabels?.[namespace] ?? {}) };
  }
}

const OPERATOR_NAMES = ['stateward', 'rollout-operator'];

/** The operator's Deployment: labelled app.kubernetes.io/name or name stateward/rollout-operator, or running its image. */
export function isOperatorDeployment(d: Deployment): boolean {
  const labels = labelsOf(d);
  if (OPERATOR_NAMES.includes(labels['app.kubernetes.io/name'] ?? '') || OPERATOR_NAMES.includes(labels['name'] ?? ''))
    return true;
  return (d.spec?.template?.spec?.containers ?? []).some((c) => {
    const image = (c.image ?? '').split('/').pop() ?? '';
    return OPERATOR_NAMES.some((n) => image === n || image.startsWith(`${n}:`) || image.startsWith(`${n}@`));
  });
}

// ---------------------------------------------------- 1. labels vs annotations

const STATEFULSET_LABEL_KEYS: readonly string[] = SCALING_LABEL_KEYS;
const RELOADER_OPT_IN_KEYS: readonly string[] = [
  RELOADER_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_AUTO_ANNOTATION,
  RELOADER_SECRET_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_RELOAD_ANNOTATION,
  RELOADER_SECRET_RELOAD_ANNOTATION,
  RELOADER_SEARCH_ANNOTATION,
  RELOADER_CONFIGMAP_EXCLUDE_ANNOTATION,
  RELOADER_SECRET_EXCLUDE_ANNOTATION,
];
const STATEFULSET_ANNOTATION_KEYS: readonly string[] = [
  ...SCALING_ANNOTATION_KEYS,
  MAX_UNAVAILABLE_ANNOTATION,
  PAUSED_ANNOTATION,
  XING_ENABLED_ANNOTATION,
  EVICT_ONDELETE_ANNOTATION,
  ...RELOADER_OPT_IN_KEYS,
];

const KEYS_BY_KIND: Record<Kind, { labels: readonly string[]; annotations: readonly string[] }> = {
  StatefulSet: { labels: STATEFULSET_LABEL_KEYS, annotations: STATEFULSET_ANNOTATION_KEYS },
  Deployment: { labels: [NO_DOWNSCALE_LABEL_KEY], annotations: [XING_ENABLED_ANNOTATION, ...RELOADER_OPT_IN_KEYS] },
  DaemonSet: { labels: [], annotations: [XING_ENABLED_ANNOTATION, EVICT_ONDELETE_ANNOTATION, ...RELOADER_OPT_IN_KEYS] },
};

/** Keys read only from the workload's own metadata, never from its pod template (Reloader's keys do fall back to the template). */
function metadataOnlyKeys(kind: Kind): string[] {
  const { labels, annotations } = KEYS_BY_KIND[kind];
  return [...labels, ...annotations].filter((k) => !RELOADER_OPT_IN_KEYS.includes(k));
}

/**
 * A key set as an annotation where Stateward (like rollout-operator) reads
 * only labels, or the reverse (rollout-operator #306: prepare-downscale and
 * min-time set as annotations, so prepare-shutdown was never called), or a
 * key on the pod template where only the workload's metadata is read.
 */
function checkKeyPlacement(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const { kind, workload } of scope.workloads) {
    const labels = labelsOf(workload);
    const annotations = annotationsOf(workload);
    const object = objectName(kind, workload);
    const { labels: labelKeys, annotations: annotationKeys } = KEYS_BY_KIND[kind];

    // Each direction: keys read only as `read` (label or annotation) but found as the other.
    const directions = [
      {
        keys: labelKeys,
        read: { noun: 'label', map: labels, verb: 'label', field: 'metadata.labels' },
        found: { noun: 'annotation', map: annotations, verb: 'annotate' },
      },
      {
        keys: annotationKeys,
        read: { noun: 'annotation', map: annotations, verb: 'annotate', field: 'metadata.annotations' },
        found: { noun: 'label', map: labels, verb: 'label' },
      },
    ] as const;
    for (const { keys, read, found } of directions) {
      const article = (noun: string) => (noun === 'annotation' ? 'an annotation' : 'a label');
      for (const key of keys) {
        if (!has(found.map, key)) continue;
        const value = found.map[key]!;
        const both = has(read.map, key);
        const bad =
          key === MIN_TIME_BETWEEN_ZONES_DOWNSCALE_LABEL_KEY && read.noun === 'label'
            ? goDurationProblem(value)
            : undefined;
        findings.push({
          severity: both ? 'warning' : 'error',
          code: `key-should-be-${read.noun}`,
          object,
          problem: both
            ? `${key} is set both as ${article(read.noun)} and as ${article(found.noun)} (${JSON.stringify(value)}); only the ${read.noun} (${JSON.stringify(read.map[key])}) is read`
            : `${key}=${JSON.stringify(value)} is set as ${article(found.noun)}, but it is read only as ${article(read.noun)}, so it has no effect`,
          fix: both
            ? `remove the ${found.noun}: ${kubectl(workload, kind, found.verb, `${key}-`)}`
            : `move it to ${read.field}: ${kubectl(workload, kind, read.verb, `${key}=${shellQuote(value)}`)} && ${kubectl(workload, kind, found.verb, `${key}-`)}` +
              (bad ? ` (and correct the value first: ${bad})` : '') +
              '; change the manifest too, or the next apply brings it back',
        });
      }
    }

    const template = workload.spec?.template?.metadata;
    const templateLabels = template?.labels ?? {};
    const templateAnnotations = template?.annotations ?? {};
    for (const key of metadataOnlyKeys(kind)) {
      const onTemplate = has(templateLabels, key) ? 'label' : has(templateAnnotations, key) ? 'annotation' : undefined;
      if (!onTemplate || has(labels, key) || has(annotations, key)) continue;
      const value = (onTemplate === 'label' ? templateLabels : templateAnnotations)[key]!;
      const asLabel = labelKeys.includes(key);
      const fixVerb = asLabel ? 'label' : 'annotate';
      findings.push({
        // A rollout-group label on pods alone may be meant for a ZPDB selector only.
        severity: key === ROLLOUT_GROUP_LABEL ? 'warning' : 'error',
        code: 'key-on-pod-template',
        object,
        problem: `${key}=${JSON.stringify(value)} is set on the pod template (spec.template.metadata.${onTemplate}s) but not on the ${kind} itself, where it is read; it has no effect there`,
        fix:
          `set it on the ${kind}'s metadata.${asLabel ? 'labels' : 'annotations'}: ${kubectl(workload, kind, fixVerb, `${key}=${shellQuote(value)}`)}` +
          (key === ROLLOUT_GROUP_LABEL
            ? ' (if it is only there for a ZoneAwarePodDisruptionBudget selector, the budget needs it on the StatefulSet too)'
            : ''),
      });
    }
  }
  return findings;
}

function goDurationProblem(value: string): string | undefined {
  try {
    parseGoDuration(value);
    return undefined;
  } catch (error) {
    return `${JSON.stringify(value)} is not a Go duration such as 12h or 30m (${error instanceof Error ? error.message : String(error)})`;
  }
}

// --------------------------------------------------- 2. rollout groups: OnDelete

/** A rollout group with a StatefulSet that is not OnDelete is skipped as a whole (src/rollout/planner.ts). */
function checkGroupUpdateStrategy(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const { group, sets } of scope.groups().values()) {
    for (const sts of sets) {
      const strategy = sts.spec?.updateStrategy?.type ?? 'RollingUpdate';
      if (strategy === 'OnDelete') continue;
      const others = sets
        .filter((s) => s !== sts)
        .map(nameOf)
        .sort(compare);
      findings.push({
        severity: 'error',
        code: 'group-not-ondelete',
        object: objectName('StatefulSet', sts),
        problem: `its update strategy is ${strategy}, but every StatefulSet of rollout group ${JSON.stringify(group)} must be OnDelete; the whole group is blocked: Stateward rolls none of its StatefulSets${others.length ? ` (${others.join(', ')} included)` : ''} and Kubernetes rolls this one on its own, without the zone coordination`,
        fix: `${kubectl(sts, 'StatefulSet', 'patch', '--type=merge', '-p', shellQuote('{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null}}}'))}, and set updateStrategy.type: OnDelete in its manifest`,
      });
    }
  }
  return findings;
}

// ------------------------------------------------------------- 3. leaders

/** grafana.com/rollout-downscale-leader naming no StatefulSet of the group, and leader cycles. */
function checkLeaders(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const groups = scope.groups();
  const all = scope.statefulSets;
  for (const sts of all) {
    const annotations = annotationsOf(sts);
    if (!has(annotations, DOWNSCALE_LEADER_ANNOTATION_KEY)) continue;
    const leaderName = annotations[DOWNSCALE_LEADER_ANNOTATION_KEY]!;
    const labels = labelsOf(sts);
    const inGroup = has(labels, ROLLOUT_GROUP_LABEL);
    const group = inGroup ? labels[ROLLOUT_GROUP_LABEL]! : undefined;
    const members = group === undefined ? [] : (groups.get(`${nsOf(sts)}/${group}`)?.sets ?? []);
    const leader = leaderFor(sts, members);
    if (leader === undefined || !('error' in leader)) continue;
    const sameNamespace = all.find((s) => nsOf(s) === nsOf(sts) && nameOf(s) === leaderName);
    const object = objectName('StatefulSet', sts);
    let problem: string;
    let fix: string;
    if (!inGroup) {
      problem = `${DOWNSCALE_LEADER_ANNOTATION_KEY}=${JSON.stringify(leaderName)}, but this StatefulSet has no ${ROLLOUT_GROUP_LABEL} label, and a leader is looked up only within the follower's rollout group: its replicas never follow`;
      fix = `label it and its leader with the same group: ${kubectl(sts, 'StatefulSet', 'label', `${ROLLOUT_GROUP_LABEL}=<group>`)}`;
    } else if (sameNamespace) {
      const theirs = labelsOf(sameNamespace)[ROLLOUT_GROUP_LABEL];
      problem = `${DOWNSCALE_LEADER_ANNOTATION_KEY} names ${leaderName}, which exists but is ${theirs === undefined ? 'in no rollout group' : `in rollout group ${JSON.stringify(theirs)}`}, not in ${JSON.stringify(group)}: its replicas never follow (${leader.error})`;
      fix = `put the leader in the follower's group: ${kubectl(sameNamespace, 'StatefulSet', 'label', '--overwrite', `${ROLLOUT_GROUP_LABEL}=${shellQuote(group!)}`)}`;
    } else {
      const candidates = members
        .filter((s) => s !== sts)
        .map(nameOf)
        .sort(compare);
      problem = `${DOWNSCALE_LEADER_ANNOTATION_KEY} names ${JSON.stringify(leaderName)}, but there is no such StatefulSet in namespace ${nsOf(sts)}: its replicas never follow (${leader.error})`;
      fix = `name an existing StatefulSet of group ${JSON.stringify(group)}${candidates.length ? ` (${candidates.join(', ')})` : ''}: ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${DOWNSCALE_LEADER_ANNOTATION_KEY}=<leader>`)}, or remove the annotation`;
    }
    findings.push({ severity: 'error', code: 'leader-not-found', object, problem, fix });
  }
  for (const { namespace, sets } of groups.values()) {
    const order = chainOrder(sets);
    if (Array.isArray(order)) continue;
    const first = order.cycle[0] ?? '';
    const sts = sets.find((s) => nameOf(s) === first) ?? sets[0]!;
    findings.push({
      severity: 'error',
      code: 'leader-cycle',
      object: objectName('StatefulSet', sts),
      problem: `${order.error}; no StatefulSet of the group has its replicas adjusted while the cycle lasts`,
      fix: `pick one leader (usually zone a) and remove the annotation from it: kubectl -n ${shellQuote(namespace)} annotate statefulset/<leader> ${DOWNSCALE_LEADER_ANNOTATION_KEY}-`,
    });
  }
  return findings;
}

// ------------------------------------------------------- 4. values that do not parse

interface Aspect {
  code: string;
  severity: Severity;
  labels: readonly string[];
  annotations: readonly string[];
  fix: (sts: StatefulSet) => string;
}

// validateScalingMetadata judges one StatefulSet as a whole; run on copies
// holding only one aspect's keys, each message lands under its own code. A
// message already reported under an earlier aspect is not repeated.
const ASPECTS: readonly Aspect[] = [
  ...(
    [
      { key: PREPARE_DOWNSCALE_LABEL_KEY, verb: 'label' },
      { key: NO_DOWNSCALE_LABEL_KEY, verb: 'label' },
      { key: UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY, verb: 'annotate' },
    ] as const
  ).map(({ key, verb }): Aspect => ({
    code: 'not-exactly-true',
    severity: 'error',
    labels: verb === 'label' ? [key] : [],
    annotations: verb === 'annotate' ? [key] : [],
    fix: (sts) =>
      `write exactly "true", in lower case: ${kubectl(sts, 'StatefulSet', verb, '--overwrite', `${key}=true`)}`,
  })),
  {
    code: 'invalid-min-time',
    severity: 'error',
    labels: [MIN_TIME_BETWEEN_ZONES_DOWNSCALE_LABEL_KEY],
    annotations: [],
    fix: (sts) =>
      `set a Go duration: ${kubectl(sts, 'StatefulSet', 'label', '--overwrite', `${MIN_TIME_BETWEEN_ZONES_DOWNSCALE_LABEL_KEY}=12h`)} (units ns, us, ms, s, m, h; no d or w)`,
  },
  {
    code: 'invalid-last-downscale',
    severity: 'error',
    labels: [],
    annotations: [LAST_DOWNSCALE_ANNOTATION_KEY],
    fix: (sts) =>
      `Stateward writes it as RFC 3339 (e.g. 2026-01-02T15:04:05Z); remove the broken value and let the next prepared downscale write it: ${kubectl(sts, 'StatefulSet', 'annotate', `${LAST_DOWNSCALE_ANNOTATION_KEY}-`)}`,
  },
  {
    code: 'incomplete-mirror',
    severity: 'error',
    labels: [],
    annotations: [MIRROR_NAME_ANNOTATION_KEY, MIRROR_KIND_ANNOTATION_KEY, MIRROR_API_VERSION_ANNOTATION_KEY],
    fix: (sts) =>
      `set all of ${MIRROR_NAME_ANNOTATION_KEY}, ${MIRROR_KIND_ANNOTATION_KEY} and (for a custom resource) ${MIRROR_API_VERSION_ANNOTATION_KEY}, e.g. ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${MIRROR_NAME_ANNOTATION_KEY}=<name>`, `${MIRROR_KIND_ANNOTATION_KEY}=ReplicaTemplate`, `${MIRROR_API_VERSION_ANNOTATION_KEY}=rollout-operator.grafana.com/v1`)}, or remove them (see docs/scaling.md)`,
  },
  {
    code: 'invalid-mirror-write-back',
    severity: 'warning',
    labels: [],
    annotations: [MIRROR_WRITE_BACK_ANNOTATION_KEY],
    fix: (sts) =>
      `use true or false: ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${MIRROR_WRITE_BACK_ANNOTATION_KEY}=false`)}`,
  },
  {
    code: 'force-replicas-ignored',
    severity: 'warning',
    labels: [],
    annotations: [
      FORCE_REPLICAS_ANNOTATION_KEY,
      DOWNSCALE_LEADER_ANNOTATION_KEY,
      MIRROR_NAME_ANNOTATION_KEY,
      MIRROR_KIND_ANNOTATION_KEY,
      MIRROR_API_VERSION_ANNOTATION_KEY,
    ],
    fix: (sts) =>
      `use an integer ≥ 0 on a follower (${DOWNSCALE_LEADER_ANNOTATION_KEY}) or a mirror, or remove it: ${kubectl(sts, 'StatefulSet', 'annotate', `${FORCE_REPLICAS_ANNOTATION_KEY}-`)}`,
  },
  {
    code: 'invalid-delayed-downscale',
    severity: 'error',
    labels: [],
    annotations: [DELAYED_DOWNSCALE_ANNOTATION_KEY, DELAYED_DOWNSCALE_URL_ANNOTATION_KEY],
    fix: (sts) =>
      `set both, a Prometheus duration (1h, 2d, 1w) and a URL (http://host:port/path; the host is replaced by each pod's): ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${DELAYED_DOWNSCALE_ANNOTATION_KEY}=4h`, `${DELAYED_DOWNSCALE_URL_ANNOTATION_KEY}=http://pod:8080/prepare-delayed-downscale`)}, or remove both`,
  },
];

function stripName(message: string, name: string): string {
  return message.startsWith(`${name}: `) ? message.slice(name.length + 2) : message;
}

/**
 * Values the operator cannot use, judged by validateScalingMetadata on the
 * keys in their right place (misplaced keys are checkKeyPlacement's).
 */
function checkScalingValues(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const sts of scope.statefulSets) {
    const name = nameOf(sts);
    const labels = omit(labelsOf(sts), SCALING_ANNOTATION_KEYS);
    const annotations = omit(annotationsOf(sts), SCALING_LABEL_KEYS);
    const seen = new Set<string>();
    const report = (message: string, aspect: Pick<Aspect, 'code' | 'severity'> & { fix: string }) => {
      if (seen.has(message)) return;
      seen.add(message);
      findings.push({
        severity: aspect.severity,
        code: aspect.code,
        object: objectName('StatefulSet', sts),
        problem: stripName(message, name),
        fix: aspect.fix,
      });
    };
    for (const aspect of ASPECTS) {
      const copy: StatefulSet = {
        ...sts,
        metadata: {
          ...sts.metadata,
          labels: pick(labels, aspect.labels),
          annotations: pick(annotations, aspect.annotations),
        },
      };
      for (const message of validateScalingMetadata(copy)) report(message, { ...aspect, fix: aspect.fix(sts) });
    }
    // Anything validateScalingMetadata learns later still surfaces.
    const whole: StatefulSet = { ...sts, metadata: { ...sts.metadata, labels, annotations } };
    for (const message of validateScalingMetadata(whole)) {
      report(message, {
        code: 'invalid-scaling-metadata',
        severity: 'warning',
        fix: 'correct the value as the problem describes (docs/scaling.md lists every key and its format)',
      });
    }

    const last = annotations[LAST_DOWNSCALE_ANNOTATION_KEY];
    const lastTime = last === undefined ? undefined : parseRfc3339(last);
    if (typeof lastTime === 'number' && lastTime > scope.input.now + 5 * 60_000) {
      findings.push({
        severity: 'warning',
        code: 'last-downscale-in-future',
        object: objectName('StatefulSet', sts),
        problem: `${LAST_DOWNSCALE_ANNOTATION_KEY}=${last} is in the future, so the other zones of its group wait their min-time from then, not from the real downscale`,
        fix: `check the clocks, then remove it: ${kubectl(sts, 'StatefulSet', 'annotate', `${LAST_DOWNSCALE_ANNOTATION_KEY}-`)}`,
      });
    }
  }
  return findings;
}

/** rollout-max-unavailable: "N" or "P%"; anything else falls back to 1 (src/rollout/annotations.ts). */
function checkMaxUnavailable(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const sts of scope.statefulSets) {
    const raw = annotationsOf(sts)[MAX_UNAVAILABLE_ANNOTATION];
    const parsed = parseMaxUnavailable(raw, sts.spec?.replicas ?? 1);
    if (parsed.warning === undefined) continue;
    findings.push({
      severity: 'warning',
      code: 'invalid-max-unavailable',
      object: objectName('StatefulSet', sts),
      problem: `${parsed.warning} (one pod at a time during rollouts)`,
      fix: `use a whole number > 0 or a percentage from 1% to 100%: ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${MAX_UNAVAILABLE_ANNOTATION}=2`)} (or 25%)`,
    });
  }
  return findings;
}

/** grafana.com/prepare-downscale=true without the port, path or serviceName the webhook needs: every downscale is denied. */
function checkPrepareDownscale(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const sts of scope.statefulSets) {
    if (labelsOf(sts)[PREPARE_DOWNSCALE_LABEL_KEY] !== 'true') continue;
    const annotations = annotationsOf(sts);
    const port = annotations[PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY] ? [] : [PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY];
    const path = annotations[PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY] ? [] : [PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY];
    const service = sts.spec?.serviceName ? [] : ['spec.serviceName'];
    const missing = [...port.map((k) => `annotation ${k}`), ...path.map((k) => `annotation ${k}`), ...service];
    if (missing.length === 0) continue;
    const examples: Record<string, string> = {
      [PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY]: '80',
      [PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY]: 'ingester/prepare-shutdown',
    };
    const annotate = [...port, ...path];
    findings.push({
      severity: 'error',
      code: 'prepare-downscale-incomplete',
      object: objectName('StatefulSet', sts),
      problem: `it is labelled ${PREPARE_DOWNSCALE_LABEL_KEY}=true but has no ${missing.join(', ')}: the prepare-downscale webhook denies every downscale of it`,
      fix: [
        ...(annotate.length
          ? [
              `set the pod endpoint to call before a downscale: ${kubectl(sts, 'StatefulSet', 'annotate', ...annotate.map((k) => `${k}=${examples[k]!}`))}`,
            ]
          : []),
        ...(service.length
          ? [
              'set spec.serviceName to its headless Service (the pods are called at <pod>.<serviceName>.<namespace>.svc; the field is immutable, so the StatefulSet must be recreated, e.g. with kubectl delete --cascade=orphan and apply)',
            ]
          : []),
      ].join('; '),
    });
  }
  return findings;
}

// ------------------------------------------------------------ 5. webhooks

type WebhookKind = 'no-downscale' | 'prepare-downscale' | 'pod-eviction' | 'zpdb-validation' | 'reschedule-on-eviction';
const WEBHOOK_KINDS: readonly WebhookKind[] = [
  'no-downscale',
  'prepare-downscale',
  'pod-eviction',
  'zpdb-validation',
  'reschedule-on-eviction',
];

function webhookPath(w: WebhookEntry): string | undefined {
  if (w.clientConfig?.service) return w.clientConfig.service.path;
  const url = w.clientConfig?.url;
  if (!url) return undefined;
  try {
    return new URL(url).pathname;
  } catch {
    return undefined;
  }
}

/** Which of the operator's webhooks an entry is, by its path (or, failing that, its name). */
function webhookKind(w: WebhookEntry): WebhookKind | undefined {
  const path = webhookPath(w);
  const byPath = WEBHOOK_KINDS.find((k) => path === `/admission/${k}`);
  if (byPath) return byPath;
  return WEBHOOK_KINDS.find((k) => (w.name ?? '').startsWith(`${k}.`) || (w.name ?? '').startsWith(`${k}-`));
}

function pointsAtOperator(config: WebhookConfigurationObject): boolean {
  const labels = labelsOf(config);
  if (has(labels, NAMESPACE_LABEL) || has(labels, INJECT_LABEL)) return true;
  return (config.webhooks ?? []).some(
    (w) =>
      OPERATOR_NAMES.includes(w.clientConfig?.service?.name ?? '') ||
      (webhookPath(w) ?? '').match(
        /^\/admission\/(no-downscale|prepare-downscale|pod-eviction|zpdb-validation|reschedule-on-eviction)$/,
      ) !== null,
  );
}

const CERT_MANAGER_INJECT = 'cert-manager.io/inject-ca-from';

const RISK_OF_IGNORE: Partial<Record<WebhookKind, { severity: Severity; why: string }>> = {
  'pod-eviction': {
    severity: 'error',
    why: 'while no operator replica answers, evictions (kubectl drain, the cluster autoscaler, Karpenter) pass unchecked and can take two zones down at once',
  },
  'prepare-downscale': {
    severity: 'error',
    why: 'while no operator replica answers, StatefulSets are downscaled without their leaving pods being prepared and without the min-time between zones',
  },
  'zpdb-validation': {
    severity: 'warning',
    why: 'while no operator replica answers, a ZoneAwarePodDisruptionBudget the eviction webhook cannot use is accepted, and then silently ignored',
  },
  'reschedule-on-eviction': {
    severity: 'error',
    why: 'while no operator replica answers, drains evict the selected pods directly instead of asking their own operator to move them',
  },
};

/**
 * Webhook configurations that point at the operator: the CA-injection
 * labels, the caBundle, the failure policy and, for no-downscale, the
 * objectSelector that keeps the operator's own Deployment out.
 */
function checkWebhooks(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const operatorNamespace = scope.operatorNamespace();
  const operators = scope.operatorDeployments();
  const configs = [
    ...scope.input.validatingWebhookConfigurations.map((config) => ({
      kind: 'ValidatingWebhookConfiguration',
      config,
    })),
    ...scope.input.mutatingWebhookConfigurations.map((config) => ({ kind: 'MutatingWebhookConfiguration', config })),
  ].filter(({ config }) => pointsAtOperator(config) && webhookConcerns(scope, config));

  for (const { kind, config } of configs) {
    const object = objectName(kind, config);
    const labels = labelsOf(config);
    const resource = kind.toLowerCase();
    const name = nameOf(config);
    const webhooks = config.webhooks ?? [];
    const serviceNamespace = webhooks.map((w) => w.clientConfig?.service?.namespace).find((n) => n);
    const ownerNamespace = labels[NAMESPACE_LABEL] ?? serviceNamespace ?? operatorNamespace;
    const certManaged = has(annotationsOf(config), CERT_MANAGER_INJECT);

    const missing = [
      ...(labels[INJECT_LABEL] === 'true' ? [] : [`${INJECT_LABEL}=true`]),
      ...(labels[NAMESPACE_LABEL] ? [] : [`${NAMESPACE_LABEL}=${ownerNamespace ?? '<operator namespace>'}`]),
    ];
    const emptyBundles = webhooks.filter((w) => !w.clientConfig?.caBundle).map((w) => w.name ?? '');
    if (missing.length > 0 && !certManaged) {
      findings.push({
        severity: emptyBundles.length > 0 ? 'error' : 'warning',
        code: 'webhook-ca-labels-missing',
        object,
        problem:
          `it lacks the label${missing.length > 1 ? 's' : ''} ${missing.join(' and ')}, so the operator never injects its CA into it` +
          (emptyBundles.length > 0
            ? ": the API server cannot verify the webhook's certificate and every call fails"
            : ': the caBundle it has goes stale when the operator renews its certificate'),
        fix: `kubectl label ${resource}/${name} ${missing.map(shellQuote).join(' ')} --overwrite`,
      });
    }
    if (emptyBundles.length > 0) {
      const injectable = missing.length === 0;
      findings.push({
        severity: 'error',
        code: 'webhook-ca-bundle-empty',
        object,
        problem: `webhook${emptyBundles.length > 1 ? 's' : ''} ${emptyBundles.join(', ')} ha${emptyBundles.length > 1 ? 've' : 's'} no clientConfig.caBundle: the API server cannot verify the operator's certificate, so every call fails${webhooks.some((w) => w.failurePolicy !== 'Ignore') ? ' and, with failurePolicy Fail, the requests it covers are refused' : ''}`,
        fix: certManaged
          ? `cert-manager's CA injector fills it (annotation ${CERT_MANAGER_INJECT}): check that the named Certificate exists and is Ready`
          : injectable
            ? `the operator in namespace ${labels[NAMESPACE_LABEL]} injects it: check that it runs with -server-tls.enabled, -server-tls.self-signed-cert.enabled=true (the default), -webhooks.update-ca-bundle=true (the default) and -kubernetes.namespace=${labels[NAMESPACE_LABEL]}, that -webhooks.ca-bundle-configurations (if set) names ${name}, and read its log for "CA injection failed"`
            : `label it for CA injection, then the operator injects its CA: kubectl label ${resource}/${name} ${missing.map(shellQuote).join(' ')} --overwrite`,
      });
    }

    const labelled = labels[NAMESPACE_LABEL];
    // Only a namespace the caller named: one guessed from a Deployment seen elsewhere may be another install's.
    const expected = serviceNamespace ?? scope.input.operatorNamespace;
    if (labelled && expected && labelled !== expected) {
      findings.push({
        severity: 'error',
        code: 'webhook-namespace-mismatch',
        object,
        problem: `it is labelled ${NAMESPACE_LABEL}=${labelled}, so the operator in ${labelled} injects its CA, but ${serviceNamespace ? `its webhooks call the Service in namespace ${serviceNamespace}` : `the operator runs in namespace ${expected}`}: the CA does not match the certificate that answers`,
        fix: `kubectl label ${resource}/${name} ${NAMESPACE_LABEL}=${shellQuote(expected)} --overwrite`,
      });
    }

    for (const w of webhooks) {
      const type = webhookKind(w);
      const policy = w.failurePolicy ?? 'Fail';
      const risk = type ? RISK_OF_IGNORE[type] : undefined;
      if (risk && policy === 'Ignore') {
        const index = webhooks.indexOf(w);
        findings.push({
          severity: risk.severity,
          code: 'webhook-failure-policy-ignore',
          object,
          problem: `webhook ${w.name ?? index} (${type}) has failurePolicy Ignore: ${risk.why}`,
          fix: `kubectl patch ${resource}/${name} --type=json -p ${shellQuote(JSON.stringify([{ op: 'replace', path: `/webhooks/${index}/failurePolicy`, value: 'Fail' }]))}, and run two operator replicas (the ha overlay) so one always answers (docs/drain.md, "Failure policy")`,
        });
      }
      if (type === 'no-downscale' && policy !== 'Ignore') {
        const finding = noDownscaleSelectsOperator(scope, w, operators, ownerNamespace);
        if (finding) {
          const index = webhooks.indexOf(w);
          findings.push({
            severity: 'error',
            code: 'no-downscale-selects-operator',
            object,
            problem: `webhook ${w.name ?? index} (no-downscale, failurePolicy Fail) ${finding}: while the operator's only replica is being replaced nothing answers, every update of its Deployment and ReplicaSets is refused, and the new ReplicaSet can never scale up`,
            fix: `exclude the operator's labels as deploy/webhooks/no-downscale.yaml does: kubectl patch ${resource}/${name} --type=json -p ${shellQuote(
              JSON.stringify([
                {
                  op: 'add',
                  path: `/webhooks/${index}/objectSelector`,
                  value: {
                    matchExpressions: [
                      { key: 'app.kubernetes.io/name', operator: 'NotIn', values: ['stateward'] },
                      { key: 'name', operator: 'NotIn', values: ['rollout-operator'] },
                    ],
                  },
                },
              ]),
            )} (a NotIn selector still lets label-less /scale requests through)`,
          });
        }
      }
    }
  }
  return findings;
}

/** Whether a configuration concerns the diagnosed namespaces. */
function webhookConcerns(scope: Scope, config: WebhookConfigurationObject): boolean {
  const namespaces = scope.input.namespaces;
  if (namespaces === undefined) return true;
  const owner = labelsOf(config)[NAMESPACE_LABEL];
  if (owner !== undefined && namespaces.includes(owner)) return true;
  return (config.webhooks ?? []).some((w) => {
    const serviceNamespace = w.clientConfig?.service?.namespace;
    if (serviceNamespace !== undefined && namespaces.includes(serviceNamespace)) return true;
    return namespaces.some((ns) => selectorMatches(w.namespaceSelector, scope.namespaceLabels(ns)));
  });
}

function coversDeployments(w: WebhookEntry): boolean {
  return (w.rules ?? []).some(
    (r) =>
      (r.apiGroups ?? []).some((g) => g === 'apps' || g === '*') &&
      (r.resources ?? []).some((res) => res === '*' || res === 'deployments' || res === 'replicasets'),
  );
}

/**
 * Why the no-downscale webhook would hold the operator's own Deployment, or
 * undefined when it does not. The operator is the one in the configuration's
 * namespace (its grafana.com/namespace label or Service); when its Deployment
 * is not in view, it is judged by the labels the operator ships with.
 */
function noDownscaleSelectsOperator(
  scope: Scope,
  w: WebhookEntry,
  operators: Deployment[],
  ownerNamespace: string | undefined,
): string | undefined {
  if (!coversDeployments(w)) return undefined;
  // The API server defaults an absent objectSelector to {}.
  const hasSelector =
    Object.keys(w.objectSelector?.matchLabels ?? {}).length > 0 ||
    (w.objectSelector?.matchExpressions ?? []).length > 0;
  const own = operators.filter((d) => ownerNamespace === undefined || nsOf(d) === ownerNamespace);
  const selected = own.filter((d) => selectorMatches(w.namespaceSelector, scope.namespaceLabels(nsOf(d))));
  if (own.length > 0) {
    const caught = selected.filter(
      (d) =>
        selectorMatches(w.objectSelector, labelsOf(d)) ||
        selectorMatches(w.objectSelector, d.spec?.template?.metadata?.labels),
    );
    if (caught.length === 0) return undefined;
    return `${hasSelector ? 'has an objectSelector that selects' : 'has no objectSelector, so it covers'} the operator's own Deployment ${caught.map((d) => `${nsOf(d)}/${nameOf(d)}`).join(', ')}`;
  }
  if (ownerNamespace !== undefined && !selectorMatches(w.namespaceSelector, scope.namespaceLabels(ownerNamespace)))
    return undefined;
  const defaults: Record<string, string>[] = [{ 'app.kubernetes.io/name': 'stateward' }, { name: 'rollout-operator' }];
  if (!defaults.every((labels) => selectorMatches(w.objectSelector, labels))) return undefined;
  return hasSelector
    ? "has an objectSelector that excludes neither app.kubernetes.io/name=stateward nor name=rollout-operator, so it covers the operator's own Deployment"
    : "has no objectSelector, so it covers the operator's own Deployment";
}

// ----------------------------------------------------------------- 6. ZPDBs

/** ZoneAwarePodDisruptionBudgets that do not parse, select no or one StatefulSet, or overlap. */
function checkZpdbs(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const valid: { object: KubeObject; config: ZpdbConfig }[] = [];
  const budgets = scope.input.zpdbs.filter(scope.inScope);
  for (const zpdb of budgets) {
    const object = objectName(ZPDB_KIND, zpdb);
    const parsed = parseZpdb({ ...zpdb, kind: zpdb.kind ?? ZPDB_KIND });
    if ('error' in parsed) {
      findings.push({
        severity: 'error',
        code: 'zpdb-invalid',
        object,
        problem: `${parsed.error}; the operator denies every eviction of the pods it may cover until it is fixed (docs/drain.md#an-invalid-budget-fails-closed)`,
        fix: `correct its spec (one of maxUnavailable or maxUnavailablePercentage, selector.matchLabels, a podNamePartitionRegex with a capture group before crossZoneEvictionDelay; see docs/drain.md): ${kubectl(zpdb, 'zpdb', 'edit')}`,
      });
      continue;
    }
    valid.push({ object: zpdb, config: parsed.config });
    const namespace = nsOf(zpdb);
    const sets = scope.statefulSets.filter((s) => nsOf(s) === namespace && zpdbSelects(parsed.config, labelsOf(s)));
    const pods = scope.readable('pods')
      ? scope.pods.filter((p) => nsOf(p) === namespace && zpdbSelects(parsed.config, labelsOf(p)))
      : [];
    const selector =
      Object.entries(parsed.config.matchLabels)
        .map(([k, v]) => `${k}=${v}`)
        .join(',') || '(everything)';
    if (sets.length === 0) {
      findings.push({
        severity: pods.length > 0 ? 'error' : 'warning',
        code: 'zpdb-no-statefulsets',
        object,
        problem:
          `its selector ${selector} matches no StatefulSet in ${namespace}` +
          (pods.length > 0
            ? `, only ${plural(pods.length, 'pod')}: the selector must match the StatefulSets (one per zone) as well as their pods, so every eviction of those pods is denied ("minimum number of StatefulSets not found")`
            : ' and no pod: it protects nothing'),
        fix:
          pods.length > 0
            ? `label each zone's StatefulSet itself (metadata.labels, not only the pod template) with ${selector}, e.g. kubectl -n ${shellQuote(namespace)} label statefulset/<zone> ${shellQuote(selector.split(',')[0] ?? '')}`
            : `point spec.selector.matchLabels at the labels the StatefulSets and their pods carry (usually rollout-group: <group>), or delete it: ${kubectl(zpdb, 'zpdb', 'edit')}`,
      });
    } else if (sets.length === 1) {
      findings.push({
        severity: 'error',
        code: 'zpdb-single-statefulset',
        object,
        problem: `its selector ${selector} matches only StatefulSet ${nameOf(sets[0]!)}: a zone-aware budget needs at least two zones, so every eviction of its pods is denied ("minimum number of StatefulSets not found") and drains hang`,
        fix: `label the other zones' StatefulSets with ${selector} too, or use a plain PodDisruptionBudget for a single StatefulSet and delete this one: ${kubectl(zpdb, 'zpdb', 'delete')}`,
      });
    }
  }

  // Two budgets over one pod: every eviction of it is denied.
  const overlaps = new Map<string, { names: string[]; namespace: string; pods: number; sets: number }>();
  const configs = valid.map((v) => v.config);
  const note = (namespace: string, names: string[], what: 'pods' | 'sets') => {
    const key = `${namespace}/${names.join(',')}`;
    const entry = overlaps.get(key) ?? { names, namespace, pods: 0, sets: 0 };
    entry[what]++;
    overlaps.set(key, entry);
  };
  for (const pod of scope.readable('pods') ? scope.pods : []) {
    const lookup = findZpdbForPod(configs, pod);
    if (lookup.kind === 'multiple') note(nsOf(pod), lookup.names, 'pods');
  }
  for (const sts of scope.statefulSets) {
    const matching = configs
      .filter((c) => c.namespace === nsOf(sts) && zpdbSelects(c, labelsOf(sts)))
      .map((c) => c.name)
      .sort(compare);
    if (matching.length > 1) note(nsOf(sts), matching, 'sets');
  }
  for (const { names, namespace, pods, sets } of overlaps.values()) {
    const first = valid.find((v) => nsOf(v.object) === namespace && nameOf(v.object) === names[0]);
    findings.push({
      severity: 'error',
      code: 'zpdb-overlap',
      object: first ? objectName(ZPDB_KIND, first.object) : `${ZPDB_KIND} ${namespace}/${names[0]}`,
      problem: `budgets ${names.join(', ')} select the same ${[pods ? plural(pods, 'pod') : '', sets ? plural(sets, 'StatefulSet') : ''].filter(Boolean).join(' and ')}: every eviction of a pod under two budgets is denied ("multiple zoned pod disruption budgets found for pod")`,
      fix: 'make the selectors disjoint (one budget per rollout group) or delete all but one',
    });
  }
  return findings;
}

// ------------------------------------------------------- 7. config restarts

/** Workloads opted in to config-change restarts whose ConfigMaps or Secrets do not exist, and opt-in annotations that do not parse. */
function checkConfigRestarts(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const configs: Record<ConfigKind, { list: KubeObject[]; readable: boolean; noun: string }> = {
    configmap: { list: scope.input.configMaps, readable: scope.readable('configmaps'), noun: 'ConfigMap' },
    secret: { list: scope.input.secrets, readable: scope.readable('secrets'), noun: 'Secret' },
  };
  const byKey = new Map<string, KubeObject>();
  for (const kind of ['configmap', 'secret'] as const) {
    for (const c of configs[kind].list) byKey.set(configKey(kind, nsOf(c), nameOf(c)), c);
  }
  const options = {
    configMeta: (kind: ConfigKind, namespace: string, name: string) =>
      byKey.get(configKey(kind, namespace, name))?.metadata,
    configNames: (kind: ConfigKind, namespace: string) =>
      configs[kind].list.filter((c) => nsOf(c) === namespace).map(nameOf),
  };
  for (const { kind, workload } of scope.workloads) {
    if (!mayOptIn(workload)) continue;
    const watched = watchedConfigs(workload, options);
    const object = objectName(kind, workload);
    for (const warning of watched.warnings) {
      findings.push({
        severity: 'warning',
        code: 'config-restart-annotation',
        object,
        problem: stripName(warning, nameOf(workload)),
        fix: `correct or remove the annotation named above (docs/restarts.md lists the opt-ins and their values; xing's is ${XING_ENABLED_ANNOTATION}: enabled)`,
      });
    }
    for (const config of watched.configs) {
      const { readable, noun } = configs[config.kind];
      if (!readable || byKey.has(config.key)) continue;
      const reference = config.reference;
      if (reference?.optional) continue;
      findings.push({
        severity: reference ? 'error' : 'warning',
        code: 'config-missing',
        object,
        problem: reference
          ? `it is opted in to config restarts (${watched.optIns.join(', ')}) and its pods need ${noun} ${config.name}, which does not exist: new pods cannot start, and there is nothing to restart for`
          : `its reload list names ${noun} ${config.name}, which does not exist (nor is it referenced by the pod template): nothing restarts until it is created`,
        fix: reference
          ? `create ${noun} ${config.namespace}/${config.name}, or mark the reference optional: true, or fix the name in the pod template`
          : `create ${noun} ${config.namespace}/${config.name}, or fix the name in the reload annotation`,
      });
    }
  }
  return findings;
}

// ------------------------------------------------------ 8. OnDelete, unmanaged

/** An OnDelete StatefulSet outside any rollout group, not opted in to evictions: template changes never reach its pods. */
function checkOnDeleteUnmanaged(scope: Scope): Finding[] {
  if (!scope.readable('pods')) return [];
  const findings: Finding[] = [];
  const pods = scope.pods;
  for (const sts of scope.statefulSets) {
    if ((sts.spec?.updateStrategy?.type ?? 'RollingUpdate') !== 'OnDelete') continue;
    if (has(labelsOf(sts), ROLLOUT_GROUP_LABEL) || annotationsOf(sts)[EVICT_ONDELETE_ANNOTATION] === 'evict') continue;
    const own = pods.filter((p) => ownedBy(p, sts));
    if (own.length === 0) continue;
    const revision = sts.status?.updateRevision;
    const outdated = revision ? own.filter((p) => labelsOf(p)['controller-revision-hash'] !== revision).length : 0;
    findings.push({
      severity: 'warning',
      code: 'ondelete-unmanaged',
      object: objectName('StatefulSet', sts),
      problem:
        `it is OnDelete with ${plural(own.length, 'pod')} but in no rollout group and not opted in to evictions: template (and config) changes reach its pods only when someone deletes them` +
        (outdated > 0 ? `; ${plural(outdated, 'pod')} already ${outdated === 1 ? 'runs' : 'run'} an old revision` : ''),
      fix: `let Stateward roll it: ${kubectl(sts, 'StatefulSet', 'label', `${ROLLOUT_GROUP_LABEL}=${shellQuote(nameOf(sts))}`)} (a group of one), or, for config restarts only, ${kubectl(sts, 'StatefulSet', 'annotate', `${EVICT_ONDELETE_ANNOTATION}=evict`)}, or switch it to RollingUpdate; ignore this if pods are replaced by hand on purpose`,
    });
  }
  return findings;
}

// ----------------------------------------------------- 9. the operator's flags

/** The value of a Go boolean flag in an argument list (last one wins), or undefined when absent. */
function boolFlag(args: readonly string[], name: string): boolean | undefined {
  let value: boolean | undefined;
  for (const arg of args) {
    const m = /^--?([^=]+)(?:=(.*))?$/s.exec(arg);
    if (!m || m[1] !== name) continue;
    value = m[2] === undefined || ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(m[2]);
  }
  return value;
}

/** The operator's Deployment (when in view) lacks the flag a configured feature needs. */
function checkOperatorFlags(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const operators = scope.operatorDeployments();
  if (operators.length === 0) return findings;
  const argsOf = (d: Deployment) =>
    (d.spec?.template?.spec?.containers ?? []).flatMap((c) => [...(c.command ?? []), ...(c.args ?? [])]);

  const webhookNamespaces = new Set(
    [...scope.input.validatingWebhookConfigurations, ...scope.input.mutatingWebhookConfigurations]
      .filter(pointsAtOperator)
      .map(
        (c) =>
          labelsOf(c)[NAMESPACE_LABEL] ??
          (c.webhooks ?? []).map((w) => w.clientConfig?.service?.namespace).find((n) => n),
      )
      .filter((n): n is string => Boolean(n)),
  );
  for (const d of operators) {
    if (webhookNamespaces.has(nsOf(d)) && boolFlag(argsOf(d), 'server-tls.enabled') !== true) {
      findings.push({
        severity: 'warning',
        code: 'operator-flag-missing',
        object: objectName('Deployment', d),
        problem:
          'webhook configurations point at this operator, but it runs without -server-tls.enabled: nothing serves the admission webhooks, and no CA is injected',
        fix: `add -server-tls.enabled to its container args (the webhooks overlay or --set webhooks.enabled=true in the chart do)`,
      });
    }
  }
  const optedIn = scope.workloads.filter(
    ({ workload }) => mayOptIn(workload) && watchedConfigs(workload).optIns.length > 0,
  );
  if (optedIn.length > 0 && !operators.some((d) => boolFlag(argsOf(d), 'config-restarts.enabled') === true)) {
    const d = operators[0]!;
    findings.push({
      severity: 'warning',
      code: 'operator-flag-missing',
      object: objectName('Deployment', d),
      problem: `${plural(optedIn.length, 'workload')} (${optedIn
        .slice(0, 3)
        .map(({ kind, workload }) => objectName(kind, workload))
        .join(
          ', ',
        )}${optedIn.length > 3 ? ', …' : ''}) opted in to config-change restarts, but the operator runs without -config-restarts.enabled: nothing restarts them`,
      fix: 'add -config-restarts.enabled to its container args (the config-restarts kustomize component or --set configRestarts.enabled=true in the chart)',
    });
  }
  return findings;
}

// ------------------------------------------------------- 10. what was skipped

const SKIPPED: Record<string, string> = {
  validatingwebhookconfigurations:
    'webhook checks (CA labels, caBundle, failure policy, no-downscale objectSelector) for validating webhooks were skipped',
  mutatingwebhookconfigurations:
    'webhook checks (CA labels, caBundle, failure policy) for the prepare-downscale webhook were skipped',
  statefulsets: 'StatefulSet checks (labels, rollout groups, leaders, values, budgets) were skipped',
  zoneawarepoddisruptionbudgets: 'ZoneAwarePodDisruptionBudget checks were skipped',
  pods: 'checks that count pods (unmanaged OnDelete StatefulSets, budgets selecting pods only, overlapping budgets) were skipped',
  configmaps: 'missing-ConfigMap checks of config restarts were skipped',
  secrets: 'missing-Secret checks of config restarts were skipped',
  deployments: 'Deployments were not checked',
  daemonsets: 'DaemonSets were not checked',
};

function checkUnreadable(scope: Scope): Finding[] {
  return (scope.input.unreadable ?? []).map((resource) => ({
    severity: 'warning' as const,
    code: 'checks-skipped',
    object: `resource ${resource}`,
    problem: `cannot list ${resource} (forbidden): ${SKIPPED[resource] ?? 'the checks that need them were skipped'}`,
    fix: `run the doctor with credentials that may list ${resource}${resource.endsWith('webhookconfigurations') ? ' (cluster-scoped: a ClusterRole)' : ''}, e.g. check with kubectl auth can-i list ${resource}`,
  }));
}

// ------------------------------------------------------------------ diagnose

const CHECKS: readonly ((scope: Scope) => Finding[])[] = [
  checkKeyPlacement,
  checkGroupUpdateStrategy,
  checkLeaders,
  checkScalingValues,
  checkMaxUnavailable,
  checkPrepareDownscale,
  checkWebhooks,
  checkZpdbs,
  checkConfigRestarts,
  checkOnDeleteUnmanaged,
  checkOperatorFlags,
  checkUnreadable,
];

/** Every finding, errors first, then by object and code. */
export function diagnose(input: DoctorInput): Finding[] {
  const scope = new Scope(input);
  const seen = new Set<string>();
  const findings: Finding[] = [];
  for (const check of CHECKS) {
    let found: Finding[];
    try {
      found = check(scope);
    } catch (error) {
      // One check tripping over an odd object must not hide the others' findings.
      found = [
        {
          severity: 'warning',
          code: 'check-failed',
          object: check.name,
          problem: `the check failed: ${error instanceof Error ? error.message : String(error)}`,
          fix: 'report this as a bug in stateward doctor, with the objects it ran on',
        },
      ];
    }
    for (const f of found) {
      const key = `${f.code}\0${f.object}\0${f.problem}`;
      if (seen.has(key)) continue;
      seen.add(key);
      findings.push(f);
    }
  }
  const rank = (s: Severity) => (s === 'error' ? 0 : 1);
  return findings.sort(
    (a, b) =>
      rank(a.severity) - rank(b.severity) ||
      compare(a.object, b.object) ||
      compare(a.code, b.code) ||
      compare(a.problem, b.problem),
  );
}
