// The invariant checker of the chaos monitor: a pure state machine fed with
// the watch events the monitor process receives (monitor.ts), in arrival
// order, and a clock. It shares no code with Stateward's src/: its rules are
// written from Stateward's documented promises (README.md, docs/rollouts.md,
// docs/drain.md, docs/scaling.md, docs/webhooks.md, docs/restarts.md), not
// from its planners, so a bug in a planner cannot hide itself here.
//
// What it checks, and when (docs/reliability.md has the long form):
//
// - Pod deletions. When a pod of a StatefulSet that was Ready (Ready
//   condition True, no deletionTimestamp) starts terminating, the deletion is
//   either an eviction (the Eviction API stamps the condition DisruptionTarget
//   reason EvictionByEvictionAPI before it deletes) or, by elimination in the
//   soak, a rolling delete by the operator (confirmed, when it arrives, by a
//   DeletingPod Event from reportingController stateward.dev/operator). The
//   check runs DEFER_MS later on a snapshot of the namespace's pods taken at
//   the deletion (one watch stream per namespace: exact order) and on each
//   StatefulSet's spec.replicas as of the deletion's resourceVersion (etcd's
//   revision, ordered across resources), so a StatefulSet watch that lags
//   the pod watch changes nothing. A slot (StatefulSet, ordinal <
//   spec.replicas) is unavailable when its pod is missing, not Ready or
//   terminating. Pods at ordinals >= spec.replicas are a downscale's, not
//   counted.
//     rolling delete: every other StatefulSet of the rollout group fully
//       available; the StatefulSet's unavailable slots <= its
//       rollout-max-unavailable; <= the covering ZPDB's maxUnavailable.
//     eviction of a pod a ZPDB covers: every other StatefulSet the ZPDB
//       selects fully available; the pod's StatefulSet's unavailable slots <=
//       maxUnavailable (0: no eviction at all).
// - Downscales. A StatefulSet or Deployment whose previous version carried
//   the label grafana.com/no-downscale=true must not have lower
//   spec.replicas in its next version. A StatefulSet labelled
//   grafana.com/prepare-downscale=true in a rollout group is downscaled only
//   when every other StatefulSet of the group labelled
//   grafana.com/min-time-between-zones-downscale was last seen downscaled at
//   least that long ago (times as observed, with MIN_TIME_SLACK_MS; a
//   downscale seen only through a relist has no reliable time and is not
//   used).
// - Config restarts of opted-in workloads (com.xing.deployment-restart:
//   enabled). A change of the pod-template annotation
//   com.xing.deployment-restart.timestamp is a restart: it must follow a
//   content change (data/binaryData, hashed here) of a referenced ConfigMap
//   or Secret since the previous restart (checked DEFER_MS later, on the
//   configs' content history by resourceVersion). At the end, every
//   referenced config's current content must equal its content when the
//   workload's applied-config-checksums entry for it last changed: a change
//   not applied is reported (pending while running, a violation at the end).
// - Config restarts of opted-in CronJobs (a new manual Job per change) and
//   Jobs (re-created under their name, never lost): jobinvariants.ts.
// - Restarts on Secrets Store CSI rotations (Deployments opted in with
//   secretproviderclass.reloader.stakater.com/auto): one restart per
//   rotation of the versions their pods mount, none lost, none doubled:
//   csiinvariants.ts.
// - Secret values (given by the soak) must not appear in Events or in the
//   operator's log files (as they are or base64-encoded); see monitor.ts.
// - Drains under reschedule profiles (pods of the profiles' namespaces):
//   profileinvariants.ts.
import { createHash } from 'node:crypto';
import type {
  EventsV1Event,
  V1ConfigMap,
  V1CronJob,
  V1Deployment,
  V1Job,
  V1ObjectMeta,
  V1Pod,
  V1PodSpec,
  V1Secret,
  V1StatefulSet,
} from '@kubernetes/client-node';
import { MAX_UNAVAILABLE_ANNOTATION } from '../../src/vocabulary/keys.ts';
import { CsiRotationRules, type ClassPodStatus } from './csiinvariants.ts';
import { JobRestartRules, type RecordedWorkload } from './jobinvariants.ts';
import { ProfileDrainRules, type ProfileRule } from './profileinvariants.ts';
import { iso, rvOf } from './observed.ts';

export const DEFER_MS = 2000;
export const MIN_TIME_SLACK_MS = 2000;

export const TRIGGER_ANNOTATION = 'com.xing.deployment-restart.timestamp';
export const APPLIED_ANNOTATION = 'com.xing.deployment-restart.applied-config-checksums';
export const OPT_IN_ANNOTATION = 'com.xing.deployment-restart';
export const NO_DOWNSCALE_LABEL = 'grafana.com/no-downscale';
export const PREPARE_DOWNSCALE_LABEL = 'grafana.com/prepare-downscale';
export const MIN_TIME_LABEL = 'grafana.com/min-time-between-zones-downscale';
export const GROUP_LABEL = 'rollout-group';
export const OPERATOR_REPORTER = 'stateward.dev/operator';

export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

export interface Zpdb {
  metadata?: V1ObjectMeta;
  spec?: {
    maxUnavailable?: number;
    maxUnavailablePercentage?: number;
    podNamePartitionRegex?: string;
    selector?: LabelSelector;
  };
}

export type Watched =
  | { kind: 'Pod'; object: V1Pod }
  | { kind: 'StatefulSet'; object: V1StatefulSet }
  | { kind: 'Deployment'; object: V1Deployment }
  | { kind: 'CronJob'; object: V1CronJob }
  | { kind: 'Job'; object: V1Job }
  | { kind: 'ConfigMap'; object: V1ConfigMap }
  | { kind: 'Secret'; object: V1Secret }
  | { kind: 'ZoneAwarePodDisruptionBudget'; object: Zpdb }
  | { kind: 'SecretProviderClassPodStatus'; object: ClassPodStatus }
  | { kind: 'Event'; object: EventsV1Event };

export interface Violation {
  at: string;
  kind: string;
  message: string;
  details?: Record<string, unknown>;
}

export interface Pending {
  workload: string;
  config: string;
  since: string;
}

interface PodState {
  name: string;
  uid: string;
  owner: string | undefined;
  ordinal: number | undefined;
  ready: boolean;
  terminating: boolean;
  evicted: boolean;
  labels: Record<string, string>;
}

interface SetVersion {
  rv: bigint;
  replicas: number;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

interface DeferredDelete {
  kind: 'delete';
  due: number;
  at: number;
  namespace: string;
  pod: PodState;
  rv: bigint;
  snapshot: PodState[];
}

interface DeferredRestart {
  kind: 'restart';
  due: number;
  at: number;
  workload: string;
  refs: string[];
  from: bigint;
  rv: bigint;
}

interface WorkloadState {
  key: string;
  firstSeenRv: bigint;
  lastRestartRv: bigint | undefined;
  trigger: string | undefined;
  refs: string[];
  applied: Map<string, { value: string; rv: bigint }>;
}

const isReady = (pod: V1Pod): boolean =>
  !pod.metadata?.deletionTimestamp &&
  (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');

function podState(pod: V1Pod): PodState {
  const owner = pod.metadata?.ownerReferences?.find((o) => o.kind === 'StatefulSet' && o.controller)?.name;
  const name = pod.metadata?.name ?? '';
  const match = owner && name.startsWith(`${owner}-`) ? /^(\d+)$/.exec(name.slice(owner.length + 1)) : null;
  return {
    name,
    uid: pod.metadata?.uid ?? '',
    owner,
    ordinal: match ? Number(match[1]) : undefined,
    ready: isReady(pod),
    terminating: Boolean(pod.metadata?.deletionTimestamp),
    evicted: (pod.status?.conditions ?? []).some(
      (c) => c.type === 'DisruptionTarget' && c.status === 'True' && c.reason === 'EvictionByEvictionAPI',
    ),
    labels: { ...pod.metadata?.labels },
  };
}

/** rollout-max-unavailable as documented: N (> 0) or P% (1–100, floored, at least 1) of spec.replicas; anything else 1. */
export function maxUnavailableOf(raw: string | undefined, replicas: number): number {
  if (raw === undefined) return 1;
  const count = /^\s*(\d+)\s*$/.exec(raw);
  if (count) {
    const n = Number(count[1]);
    return n > 0 ? n : 1;
  }
  const percent = /^\s*(\d+)%\s*$/.exec(raw);
  if (percent) {
    const p = Number(percent[1]);
    if (p < 1 || p > 100) return 1;
    return Math.max(1, Math.floor((p * replicas) / 100));
  }
  return 1;
}

/** A Go duration (e.g. 12h, 1m30s, 500ms) in milliseconds; undefined when unparsable. */
export function parseGoDuration(raw: string): number | undefined {
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  if (raw === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let consumed = 0;
  for (let m = re.exec(raw); m; m = re.exec(raw)) {
    total += Number(m[1]) * units[m[2]!]!;
    consumed = re.lastIndex;
  }
  return consumed === raw.length && consumed > 0 ? total : undefined;
}

export function selectorMatches(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    if (e.operator === 'In' && !(has && (e.values ?? []).includes(value!))) return false;
    if (e.operator === 'NotIn' && has && (e.values ?? []).includes(value!)) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

/** Content hash of a ConfigMap or Secret: data and binaryData, keys sorted; metadata ignored. */
export function contentHash(object: { data?: Record<string, string>; binaryData?: Record<string, string> }): string {
  const sorted = (r: Record<string, string> | undefined) =>
    Object.keys(r ?? {})
      .sort()
      .map((k) => [k, r![k]]);
  return createHash('sha256')
    .update(JSON.stringify([sorted(object.data), sorted(object.binaryData)]))
    .digest('hex')
    .slice(0, 16);
}

/** Every ConfigMap and Secret a pod spec uses, as `configmap/<ns>/<name>` or `secret/<ns>/<name>`. */
export function configReferences(namespace: string, spec: V1PodSpec | undefined): string[] {
  const refs = new Set<string>();
  const cm = (name: string | undefined) => name && refs.add(`configmap/${namespace}/${name}`);
  const secret = (name: string | undefined) => name && refs.add(`secret/${namespace}/${name}`);
  for (const c of [
    ...(spec?.containers ?? []),
    ...(spec?.initContainers ?? []),
    ...(spec?.ephemeralContainers ?? []),
  ]) {
    for (const e of c.env ?? []) {
      cm(e.valueFrom?.configMapKeyRef?.name);
      secret(e.valueFrom?.secretKeyRef?.name);
    }
    for (const e of c.envFrom ?? []) {
      cm(e.configMapRef?.name);
      secret(e.secretRef?.name);
    }
  }
  for (const v of spec?.volumes ?? []) {
    cm(v.configMap?.name);
    secret(v.secret?.secretName);
    for (const s of v.projected?.sources ?? []) {
      cm(s.configMap?.name);
      secret(s.secret?.name);
    }
  }
  return [...refs].sort();
}

/** The pods a DeletingPod note names (docs/rollouts.md: "deleting pod X for revision R", "deleting pods X, Y (already unavailable), Z for revision R"). */
export function podsNamed(note: string): string[] {
  const list = /^deleting pods? (.+) for revision /.exec(note)?.[1];
  return list ? list.split(', ').map((name) => name.replace(/ \(.*\)$/, '')) : [];
}
/** How long after a delete a DeletingPod Event listing the pod by name still confirms it. */
const NAMED_CONFIRM_MS = 60_000;
/** The monitor's and the operator's clocks are one machine's, read a moment apart. */
const CLOCK_SLACK_MS = 2_000;

export class InvariantChecker {
  readonly violations: Violation[] = [];
  readonly counters: Record<string, number> = {};
  private readonly pods = new Map<string, Map<string, PodState>>();
  private readonly sets = new Map<string, SetVersion[]>();
  private readonly setObjects = new Map<string, V1StatefulSet>();
  private readonly deployments = new Map<string, V1Deployment>();
  private readonly zpdbs = new Map<string, Zpdb>();
  private readonly configs = new Map<string, { rv: bigint; hash: string; at: number }[]>();
  private readonly workloads = new Map<string, WorkloadState>();
  private readonly lastDownscale = new Map<string, { at: number; reliable: boolean }>();
  private readonly seenEvents = new Set<string>();
  /** Pod UIDs named by the operator's DeletingPod Events (the related object of one naming a single pod). */
  private readonly confirmedDeletes = new Set<string>();
  /** namespace/pod → eventTimes (ms) of DeletingPod Events listing it by name (a report of several pods names no uid). */
  private readonly namedDeletes = new Map<string, number[]>();
  private readonly operatorDeletes = new Map<string, { pod: string; at: string }>();
  private readonly deferred: (DeferredDelete | DeferredRestart)[] = [];
  private readonly jobRules = new JobRestartRules({
    hashAt: (config, rv) => this.hashAt(config, rv),
    changedWithin: (config, from, to) => this.changedWithin(config, from, to),
    pendingOf: (w) => this.pendingOf(w),
    violate: (now, kind, message, details) => this.violate(now, kind, message, details),
    count: (name, by) => this.count(name, by),
  });
  private readonly profileRules: ProfileDrainRules | undefined;
  private readonly csiRules = new CsiRotationRules({
    violate: (now, kind, message, details) => this.violate(now, kind, message, details),
    count: (name, by) => this.count(name, by),
  });

  /** `profiles`: the reschedule profiles whose namespaces' pods the monitor watches too. */
  constructor(o: { profiles?: ProfileRule[] } = {}) {
    this.profileRules =
      o.profiles && o.profiles.length > 0
        ? new ProfileDrainRules(o.profiles, {
            violate: (now, kind, message, details) => this.violate(now, kind, message, details),
            count: (name, by) => this.count(name, by),
          })
        : undefined;
  }

  count(name: string, by = 1): void {
    this.counters[name] = (this.counters[name] ?? 0) + by;
  }

  private violate(now: number, kind: string, message: string, details?: Record<string, unknown>): void {
    this.violations.push({ at: iso(now), kind, message, ...(details ? { details } : {}) });
  }

  /** One watch event. `relist` marks what a (re)list produced rather than a live watch event. */
  apply(event: Watched, type: WatchType, now: number, relist: boolean): void {
    switch (event.kind) {
      case 'Pod':
        return this.onPod(event.object, type, now, relist);
      case 'StatefulSet':
        return this.onStatefulSet(event.object, type, now, relist);
      case 'Deployment':
        return this.onDeployment(event.object, type, now, relist);
      case 'CronJob':
        return this.jobRules.onCronJob(event.object, type, now);
      case 'Job':
        return this.jobRules.onJob(event.object, type, now, relist);
      case 'ConfigMap':
      case 'Secret':
        return this.onConfig(event.kind === 'ConfigMap' ? 'configmap' : 'secret', event.object, type, now);
      case 'ZoneAwarePodDisruptionBudget': {
        const key = `${event.object.metadata?.namespace}/${event.object.metadata?.name}`;
        if (type === 'DELETED') this.zpdbs.delete(key);
        else this.zpdbs.set(key, event.object);
        return;
      }
      case 'Event':
        return this.onEvent(event.object);
      case 'SecretProviderClassPodStatus':
        return this.csiRules.onStatus(event.object, type, now, relist);
    }
  }

  // ------------------------------------------------------------------ pods

  private onPod(pod: V1Pod, type: WatchType, now: number, relist: boolean): void {
    this.profileRules?.onPod(pod, type, now, relist);
    this.csiRules.onPod(pod);
    const namespace = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    let byName = this.pods.get(namespace);
    if (!byName) this.pods.set(namespace, (byName = new Map<string, PodState>()));
    const previous = byName.get(name);
    const state = podState(pod);
    if (type === 'DELETED') byName.delete(name);
    else byName.set(name, state);
    // A deletion starts: the pod was Ready and is now terminating or gone.
    const samePod = previous && previous.uid === state.uid;
    const started = samePod && previous.ready && !previous.terminating && (state.terminating || type === 'DELETED');
    if (!started || !state.owner || state.ordinal === undefined) return;
    if (relist) {
      this.count('deletionsSeenOnlyOnRelist');
      return;
    }
    const deleted = { ...state, terminating: true, ready: false };
    const snapshot = [...byName.values()].filter((p) => p.name !== name);
    snapshot.push(deleted);
    this.deferred.push({
      kind: 'delete',
      due: now + DEFER_MS,
      at: now,
      namespace,
      pod: deleted,
      rv: rvOf(pod.metadata),
      snapshot,
    });
  }

  private setAt(namespace: string, name: string, rv: bigint): SetVersion | undefined {
    const history = this.sets.get(`${namespace}/${name}`);
    if (!history || history.length === 0) return undefined;
    let found: SetVersion | undefined;
    for (const v of history) {
      if (v.rv < rv) found = v;
      else break;
    }
    return found ?? history[0];
  }

  private setsOfNamespaceAt(namespace: string, rv: bigint): { name: string; version: SetVersion }[] {
    const out: { name: string; version: SetVersion }[] = [];
    for (const key of this.sets.keys()) {
      const [ns, name] = key.split('/') as [string, string];
      if (ns !== namespace) continue;
      const version = this.setAt(ns, name, rv);
      if (version) out.push({ name, version });
    }
    return out;
  }

  private unavailable(snapshot: PodState[], set: string, replicas: number): string[] {
    const out: string[] = [];
    for (let ordinal = 0; ordinal < replicas; ordinal++) {
      const pod = snapshot.find((p) => p.owner === set && p.ordinal === ordinal);
      if (!pod) out.push(`${set}-${ordinal} missing`);
      else if (pod.terminating) out.push(`${pod.name} terminating`);
      else if (!pod.ready) out.push(`${pod.name} not Ready`);
    }
    return out;
  }

  private budgetFor(namespace: string, labels: Record<string, string>): { name: string; zpdb: Zpdb }[] {
    const out: { name: string; zpdb: Zpdb }[] = [];
    for (const [key, zpdb] of this.zpdbs) {
      if (!key.startsWith(`${namespace}/`)) continue;
      if (selectorMatches(zpdb.spec?.selector, labels)) out.push({ name: zpdb.metadata?.name ?? key, zpdb });
    }
    return out;
  }

  private zpdbMax(zpdb: Zpdb, replicas: number): number {
    if (zpdb.spec?.maxUnavailable !== undefined) return zpdb.spec.maxUnavailable;
    if (zpdb.spec?.maxUnavailablePercentage !== undefined) {
      const p = zpdb.spec.maxUnavailablePercentage;
      return p === 0 ? 0 : Math.max(1, Math.floor((p * replicas) / 100));
    }
    return 1;
  }

  private checkDelete(d: DeferredDelete, now: number): void {
    const { namespace, pod, rv, snapshot } = d;
    const owner = pod.owner!;
    const set = this.setAt(namespace, owner, rv);
    if (!set) {
      this.count('deletionsOfUnknownStatefulSet');
      return;
    }
    if (pod.ordinal! >= set.replicas) {
      this.count('deletionsBeyondReplicas');
      return;
    }
    const own = this.unavailable(snapshot, owner, set.replicas);
    const where = `${namespace}/${pod.name}`;
    const details = { pod: where, uid: pod.uid, resourceVersion: rv.toString(), observedAt: iso(d.at), [owner]: own };
    const budgets = this.budgetFor(namespace, pod.labels);
    if (pod.evicted) {
      this.count('evictionsOfReadyPods');
      if (budgets.length === 0) {
        this.count('evictionsWithoutBudget');
        return;
      }
      for (const { name, zpdb } of budgets) {
        if (zpdb.spec?.podNamePartitionRegex) {
          this.count('evictionsUnderPartitionBudgetNotChecked');
          continue;
        }
        const max = this.zpdbMax(zpdb, set.replicas);
        if (max === 0)
          this.violate(
            now,
            'zpdb-eviction',
            `eviction of ${where} allowed although ZoneAwarePodDisruptionBudget ${name} has maxUnavailable 0`,
            details,
          );
        else if (own.length > max)
          this.violate(
            now,
            'zpdb-eviction',
            `eviction of ${where} left ${own.length} pods of ${owner} unavailable, ZoneAwarePodDisruptionBudget ${name} allows ${max}`,
            details,
          );
        for (const other of this.setsOfNamespaceAt(namespace, rv)) {
          if (other.name === owner || !selectorMatches(zpdb.spec?.selector, other.version.labels)) continue;
          const down = this.unavailable(snapshot, other.name, other.version.replicas);
          if (down.length > 0)
            this.violate(
              now,
              'zpdb-eviction',
              `eviction of ${where} allowed while ${other.name}, another zone of ZoneAwarePodDisruptionBudget ${name}, was disrupted`,
              { ...details, [other.name]: down },
            );
        }
      }
      return;
    }
    // Not an eviction: the operator's rolling delete (the only other deleter of Ready pods in the soak).
    this.count('operatorDeletesOfReadyPods');
    this.operatorDeletes.set(pod.uid, { pod: where, at: iso(d.at) });
    const group = set.labels[GROUP_LABEL];
    const budget = maxUnavailableOf(set.annotations[MAX_UNAVAILABLE_ANNOTATION], set.replicas);
    if (own.length > budget)
      this.violate(
        now,
        'rollout-max-unavailable',
        `deleting ${where} left ${own.length} pods of ${owner} unavailable, rollout-max-unavailable allows ${budget}`,
        details,
      );
    if (group !== undefined) {
      for (const other of this.setsOfNamespaceAt(namespace, rv)) {
        if (other.name === owner || other.version.labels[GROUP_LABEL] !== group) continue;
        const down = this.unavailable(snapshot, other.name, other.version.replicas);
        if (down.length > 0)
          this.violate(
            now,
            'rollout-two-statefulsets-disrupted',
            `deleting ${where} (rollout group ${group}) while ${other.name} of the same group was disrupted`,
            { ...details, [other.name]: down },
          );
      }
    }
    for (const { name, zpdb } of budgets) {
      if (zpdb.spec?.podNamePartitionRegex) continue;
      const max = this.zpdbMax(zpdb, set.replicas);
      // maxUnavailable 0 refuses evictions only; rolling deletes then use rollout-max-unavailable.
      if (max > 0 && own.length > max)
        this.violate(
          now,
          'zpdb-rolling-delete',
          `deleting ${where} left ${own.length} pods of ${owner} unavailable, ZoneAwarePodDisruptionBudget ${name} allows ${max}`,
          details,
        );
    }
  }

  // ------------------------------------------------------- StatefulSets etc.

  private onStatefulSet(set: V1StatefulSet, type: WatchType, now: number, relist: boolean): void {
    const namespace = set.metadata?.namespace ?? '';
    const name = set.metadata?.name ?? '';
    const key = `${namespace}/${name}`;
    const previous = this.setObjects.get(key);
    if (type === 'DELETED') {
      this.setObjects.delete(key);
      return;
    }
    if (previous && previous.metadata?.resourceVersion === set.metadata?.resourceVersion) return;
    this.setObjects.set(key, set);
    const rv = rvOf(set.metadata);
    const history = this.sets.get(key) ?? [];
    const version: SetVersion = {
      rv,
      replicas: set.spec?.replicas ?? 1,
      labels: { ...set.metadata?.labels },
      annotations: { ...set.metadata?.annotations },
    };
    // Keep the history sorted by resourceVersion; a relist may deliver an older view than a live event already did.
    const at = history.findIndex((v) => v.rv >= rv);
    if (at === -1) history.push(version);
    else if (history[at]!.rv !== rv) history.splice(at, 0, version);
    if (history.length > 200) history.splice(0, history.length - 200);
    this.sets.set(key, history);

    if (previous) {
      const before = previous.spec?.replicas ?? 1;
      const after = set.spec?.replicas ?? 1;
      if (after < before)
        this.onDownscale('StatefulSet', namespace, name, previous.metadata?.labels ?? {}, before, after, now, relist);
      else if (after > before) this.count('upscales');
      const cur = previous.status?.currentRevision;
      if (cur && set.status?.currentRevision !== cur && set.status?.currentRevision === set.status?.updateRevision)
        this.count('rolloutsCompleted');
    }
    this.onWorkload('statefulset', set, previous === undefined, now);
  }

  private onDeployment(deployment: V1Deployment, type: WatchType, now: number, relist: boolean): void {
    this.csiRules.onDeployment(deployment, type, now, relist);
    const key = `${deployment.metadata?.namespace}/${deployment.metadata?.name}`;
    const previous = this.deployments.get(key);
    if (type === 'DELETED') {
      this.deployments.delete(key);
      return;
    }
    if (previous && previous.metadata?.resourceVersion === deployment.metadata?.resourceVersion) return;
    this.deployments.set(key, deployment);
    if (previous) {
      const before = previous.spec?.replicas ?? 1;
      const after = deployment.spec?.replicas ?? 1;
      if (after < before)
        this.onDownscale(
          'Deployment',
          deployment.metadata?.namespace ?? '',
          deployment.metadata?.name ?? '',
          previous.metadata?.labels ?? {},
          before,
          after,
          now,
          relist,
        );
    }
    this.onWorkload('deployment', deployment, previous === undefined, now);
  }

  private onDownscale(
    kind: string,
    namespace: string,
    name: string,
    oldLabels: Record<string, string>,
    before: number,
    after: number,
    now: number,
    relist: boolean,
  ): void {
    this.count('downscales');
    if (oldLabels[NO_DOWNSCALE_LABEL] === 'true') {
      this.violate(
        now,
        'no-downscale',
        `${kind} ${namespace}/${name} labelled ${NO_DOWNSCALE_LABEL}=true went from ${before} to ${after} replicas${relist ? ' (seen on a relist)' : ''}`,
      );
    }
    if (kind !== 'StatefulSet' || oldLabels[PREPARE_DOWNSCALE_LABEL] !== 'true') return;
    const group = oldLabels[GROUP_LABEL];
    this.lastDownscale.set(`${namespace}/${name}`, { at: now, reliable: !relist });
    if (group === undefined) return;
    this.count('preparedDownscales');
    if (relist) {
      this.count('preparedDownscalesSeenOnlyOnRelist');
      return;
    }
    for (const [key, other] of this.setObjects) {
      const [ns, otherName] = key.split('/') as [string, string];
      if (ns !== namespace || otherName === name || other.metadata?.labels?.[GROUP_LABEL] !== group) continue;
      // Read as rollout-operator v0.39 reads it (#463): a non-empty annotation, else a non-empty label.
      const raw = [other.metadata?.annotations?.[MIN_TIME_LABEL], other.metadata?.labels?.[MIN_TIME_LABEL]].find(
        (v) => v !== undefined && v !== '',
      );
      const minTime = raw === undefined ? undefined : parseGoDuration(raw);
      const last = this.lastDownscale.get(key);
      if (minTime === undefined || !last?.reliable) continue;
      const elapsed = now - last.at;
      if (elapsed < minTime - MIN_TIME_SLACK_MS) {
        this.violate(
          now,
          'min-time-between-zones-downscale',
          `${namespace}/${name} downscaled ${before}→${after} ${(elapsed / 1000).toFixed(1)} s after ${otherName}, whose ${MIN_TIME_LABEL} is ${raw}`,
        );
      }
    }
  }

  // -------------------------------------------------------- config restarts

  private onConfig(kind: 'configmap' | 'secret', object: V1ConfigMap | V1Secret, type: WatchType, now: number): void {
    const key = `${kind}/${object.metadata?.namespace}/${object.metadata?.name}`;
    const rv = rvOf(object.metadata);
    const hash = type === 'DELETED' ? 'absent' : contentHash(object);
    const history = this.configs.get(key) ?? [];
    const latest = history.at(-1);
    if (latest && latest.rv >= rv) return;
    if (latest?.hash === hash) return;
    history.push({ rv, hash, at: now });
    if (history.length > 500) history.splice(0, history.length - 500);
    this.configs.set(key, history);
  }

  private hashAt(config: string, rv: bigint): string | undefined {
    let found: string | undefined;
    for (const v of this.configs.get(config) ?? []) {
      if (v.rv <= rv) found = v.hash;
      else break;
    }
    return found;
  }

  private onWorkload(
    kind: 'deployment' | 'statefulset',
    object: V1Deployment | V1StatefulSet,
    first: boolean,
    now: number,
  ): void {
    const namespace = object.metadata?.namespace ?? '';
    const key = `${kind}/${namespace}/${object.metadata?.name}`;
    if (object.metadata?.annotations?.[OPT_IN_ANNOTATION] !== 'enabled') {
      this.workloads.delete(key);
      return;
    }
    const rv = rvOf(object.metadata);
    const trigger = object.spec?.template?.metadata?.annotations?.[TRIGGER_ANNOTATION];
    const refs = configReferences(namespace, object.spec?.template?.spec);
    let applied: Record<string, string> = {};
    try {
      const raw = object.metadata?.annotations?.[APPLIED_ANNOTATION];
      if (raw) applied = JSON.parse(raw) as Record<string, string>;
    } catch {
      this.count('unparsableAppliedAnnotations');
    }
    let state = this.workloads.get(key);
    if (!state || first) {
      state = { key, firstSeenRv: rv, lastRestartRv: undefined, trigger, refs, applied: new Map() };
      for (const [config, value] of Object.entries(applied)) state.applied.set(config, { value, rv });
      this.workloads.set(key, state);
      return;
    }
    if (trigger !== state.trigger) {
      this.count('restarts');
      this.deferred.push({
        kind: 'restart',
        due: now + DEFER_MS,
        at: now,
        workload: key,
        refs,
        from: state.lastRestartRv ?? state.firstSeenRv,
        rv,
      });
      state.lastRestartRv = rv;
      state.trigger = trigger;
    }
    for (const [config, value] of Object.entries(applied)) {
      if (state.applied.get(config)?.value !== value) {
        this.count('appliedChecksumUpdates');
        state.applied.set(config, { value, rv });
      }
    }
    state.refs = refs;
  }

  private checkRestart(d: DeferredRestart, now: number): void {
    for (const config of d.refs) {
      if (this.hashAt(config, d.from) !== undefined && this.changedWithin(config, d.from, d.rv)) return;
    }
    this.violate(
      now,
      'restart-without-content-change',
      `${d.workload} restarted (resourceVersion ${d.rv}) although no config it references changed content since resourceVersion ${d.from}`,
      { refs: d.refs, observedAt: iso(d.at) },
    );
  }

  /** Whether a config's content differs, somewhere in (from, to], from its content at `from`. */
  private changedWithin(config: string, from: bigint, to: bigint): boolean {
    const before = this.hashAt(config, from);
    return (this.configs.get(config) ?? []).some((v) => v.rv > from && v.rv <= to && v.hash !== before);
  }

  /** Referenced configs whose current content differs from the content when the workload last recorded it. */
  private pendingOf(w: RecordedWorkload): Pending[] {
    const out: Pending[] = [];
    for (const config of w.refs) {
      const history = this.configs.get(config);
      if (!history || history.length === 0) continue;
      const base = w.applied.get(config)?.rv ?? w.firstSeenRv;
      const then = this.hashAt(config, base);
      const current = history.at(-1)!;
      if (then === undefined || then === current.hash || current.hash === 'absent') continue;
      const firstChange = history.find((v) => v.rv > base && v.hash !== then) ?? current;
      out.push({ workload: w.key, config, since: iso(firstChange.at) });
    }
    return out;
  }

  /** Referenced configs (and Jobs being re-created) not applied yet: the run is not settled while there are any. */
  pending(): Pending[] {
    return [
      ...[...this.workloads.values()].flatMap((w) => this.pendingOf(w)),
      ...this.jobRules.pending(),
      ...(this.profileRules?.pending() ?? []),
      ...this.csiRules.pending(),
    ];
  }

  // ------------------------------------------------------------------ events

  private onEvent(event: EventsV1Event): void {
    if (event.reportingController !== OPERATOR_REPORTER) return;
    const uid = event.metadata?.uid ?? '';
    if (this.seenEvents.has(uid)) return;
    this.seenEvents.add(uid);
    this.count(`operatorEvents.${event.reason}`);
    if (event.reason !== 'DeletingPod') return;
    if (event.related?.uid) this.confirmedDeletes.add(event.related.uid);
    // JSON from the watch: a string, whatever the client's type says.
    const at = new Date(event.eventTime ?? NaN).getTime();
    if (!Number.isFinite(at)) return;
    for (const name of podsNamed(event.note ?? '')) {
      const key = `${event.regarding?.namespace ?? ''}/${name}`;
      this.namedDeletes.set(key, [...(this.namedDeletes.get(key) ?? []), at]);
    }
  }

  /**
   * A pod is reused under its name by its StatefulSet: a listing confirms
   * the delete it follows within NAMED_CONFIRM_MS (a gathered report comes
   * up to 30 s and a resync after the delete).
   */
  private confirmedByName(d: { pod: string; at: string }): boolean {
    const at = Date.parse(d.at);
    return (this.namedDeletes.get(d.pod) ?? []).some((t) => t >= at - CLOCK_SLACK_MS && t <= at + NAMED_CONFIRM_MS);
  }

  // -------------------------------------------------------------------- time

  /** Runs the checks that are due. */
  tick(now: number): void {
    for (let i = 0; i < this.deferred.length;) {
      const d = this.deferred[i]!;
      if (d.due > now) {
        i++;
        continue;
      }
      this.deferred.splice(i, 1);
      this.count('checksRun');
      if (d.kind === 'delete') this.checkDelete(d, now);
      else this.checkRestart(d, now);
    }
    this.count('checksRun', this.jobRules.tick(now));
    this.csiRules.tick();
  }

  /** The end of the run: every deferred check runs, and what is still pending is a violation. */
  finish(now: number): void {
    this.tick(Number.POSITIVE_INFINITY);
    this.jobRules.finish(now);
    this.profileRules?.finish(now);
    this.csiRules.finish(now);
    // A Job missing or held at the end is judged by jobRules.finish (job-lost, job-recreate-finalizer-left).
    for (const p of this.pending().filter((p) => !p.config.startsWith('('))) {
      this.violate(
        now,
        'content-change-not-applied',
        `${p.workload}: the content of ${p.config} changed (first at ${p.since}) and was never applied`,
      );
    }
    // Content changes of the configs opted-in workloads use (not of every ConfigMap, e.g. the operator's status).
    const used = new Set([...[...this.workloads.values()].flatMap((w) => w.refs), ...this.jobRules.refs()]);
    this.counters['configContentChanges'] = [...used].reduce(
      (n, c) => n + Math.max(0, (this.configs.get(c)?.length ?? 1) - 1),
      0,
    );
    this.counters['operatorDeletesConfirmedByEvent'] = this.operatorDeletes.size - this.unconfirmedDeletes().length;
  }

  /**
   * Deletions of Ready pods judged as the operator's (not evictions) with no
   * DeletingPod Event naming the pod: Events are best effort (a replica
   * killed right after its delete never sends one), so these are listed in
   * the report, not violations; they are the first place to look when a
   * rolling-delete violation seems to have another author.
   */
  unconfirmedDeletes(): { pod: string; uid: string; at: string }[] {
    return [...this.operatorDeletes]
      .filter(([uid, d]) => !this.confirmedDeletes.has(uid) && !this.confirmedByName(d))
      .map(([uid, d]) => ({ uid, ...d }));
  }
}
