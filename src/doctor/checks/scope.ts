// What every doctor check reads: the findings it reports, the objects it is
// given (DoctorInput) in scope, and small helpers for names and commands.
import type { OperatorPermissions } from './operatorpermissions.ts';
import type { OperatorRefusals } from './operatorrefusals.ts';
import type { EndpointProbe } from './healthchecks.ts';
import type { RolloutHealthCheck } from '../../rollout/healthcheck/resource.ts';
import type { V1DaemonSet, V1Deployment } from '@kubernetes/client-node';
import type { KubeObject, Pod, StatefulSet, Wire } from '../../runtime/kube/types.ts';
import type { LabelSelectorSpec } from '../../vocabulary/selectors.ts';
import { ROLLOUT_GROUP_LABEL } from '../../vocabulary/keys.ts';
import { labelsOf, nameOf, namespaceOf } from '../../vocabulary/metadata.ts';
import { compareCodeUnits } from '../../runtime/order.ts';

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
export type SelectorSpec = LabelSelectorSpec;

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

/** What the doctor reads of a leader Lease. */
export interface OperatorLease {
  namespace: string;
  name: string;
  holder: string | undefined;
  /** Epoch ms of spec.renewTime, undefined when never renewed. */
  renewedAt: number | undefined;
  durationSeconds: number | undefined;
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
  /** RolloutHealthChecks (rollout-operator.grafana.com/v1); [] or absent when the CRD is not installed. */
  rolloutHealthChecks?: RolloutHealthCheck[];
  /** What probing each valid check's prometheusURL found (doctor/endpoints.ts); absent when not probed. */
  healthCheckEndpoints?: EndpointProbe[];
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
  /** Whether each Service the operator's webhook configurations call exists ("<namespace>/<name>"); absent when not looked up. */
  webhookServices?: Readonly<Record<string, boolean | undefined>>;
  /** Ready endpoints of each of those Services that exists (its EndpointSlices); undefined when they may not be read. */
  webhookEndpoints?: Readonly<Record<string, number | undefined>>;
  /**
   * The leader Lease of each operator Deployment that runs with
   * -leader-election.enabled ("<namespace>/<deployment>"): null when it does
   * not exist, undefined when it may not be read.
   */
  operatorLeases?: Readonly<Record<string, OperatorLease | null | undefined>>;
  /** What each operator's ServiceAccount may not do of what its features use (doctor/access.ts); absent when not asked. */
  operatorPermissions?: OperatorPermissions[];
  /**
   * The requests each operator's own metrics say were refused
   * (doctor/operatormetrics.ts), by "<namespace>/<deployment>" or the
   * metrics URL given; undefined where its metrics could not be read.
   */
  operatorRefusals?: Readonly<Record<string, OperatorRefusals | undefined>>;
}

// --------------------------------------------------------------- helpers

export type Kind = 'StatefulSet' | 'Deployment' | 'DaemonSet';
type Workload = (StatefulSet | Deployment | DaemonSet) & KubeObject;

export function objectName(kind: string, o: KubeObject): string {
  const ns = namespaceOf(o);
  return ns ? `${kind} ${ns}/${nameOf(o)}` : `${kind} ${nameOf(o)}`;
}

/** A word the shell passes through unchanged, or single-quoted. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

export function kubectl(o: KubeObject, kind: string, verb: string, ...args: string[]): string {
  const ns = namespaceOf(o);
  return ['kubectl', ...(ns ? ['-n', shellQuote(ns)] : []), verb, `${kind.toLowerCase()}/${nameOf(o)}`, ...args].join(
    ' ',
  );
}

export const has = (record: Record<string, string>, key: string): boolean => Object.hasOwn(record, key);

export function pick(record: Record<string, string>, keys: readonly string[]): Record<string, string> {
  return Object.fromEntries(Object.entries(record).filter(([k]) => keys.includes(k)));
}

export function omit(record: Record<string, string>, keys: readonly string[]): Record<string, string> {
  return Object.fromEntries(Object.entries(record).filter(([k]) => !keys.includes(k)));
}

export const compare = compareCodeUnits;

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** Whether a pod is controlled by this StatefulSet. */
export function ownedBy(pod: Pod, sts: StatefulSet): boolean {
  const ref = pod.metadata?.ownerReferences?.find((r) => r.controller);
  if (!ref || ref.kind !== 'StatefulSet' || ref.name !== nameOf(sts) || namespaceOf(pod) !== namespaceOf(sts))
    return false;
  return !ref.uid || !sts.metadata?.uid || ref.uid === sts.metadata.uid;
}

export class Scope {
  readonly input: DoctorInput;
  private readonly unreadable: ReadonlySet<string>;

  constructor(input: DoctorInput) {
    this.input = input;
    this.unreadable = new Set(input.unreadable ?? []);
  }

  inScope = (o: KubeObject): boolean =>
    this.input.namespaces === undefined || this.input.namespaces.includes(namespaceOf(o));

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
      const key = `${namespaceOf(sts)}/${group}`;
      const entry = groups.get(key) ?? { namespace: namespaceOf(sts), group, sets: [] };
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
      const key = `${namespaceOf(d)}/${nameOf(d)}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  operatorNamespace(): string | undefined {
    if (this.input.operatorNamespace) return this.input.operatorNamespace;
    const namespaces = [...new Set(this.operatorDeployments().map(namespaceOf))];
    return namespaces.length === 1 ? namespaces[0] : undefined;
  }

  namespaceLabels(namespace: string): Record<string, string> {
    return { 'kubernetes.io/metadata.name': namespace, ...(this.input.namespaceLabels?.[namespace] ?? {}) };
  }
}

export const OPERATOR_NAMES = ['stateward', 'rollout-operator'];

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
