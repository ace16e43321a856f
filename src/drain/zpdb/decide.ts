// Whether a pod may go under its ZoneAwarePodDisruptionBudget: the pure core
// of rollout-operator's /admission/pod-eviction handler and of the check its
// rollout controller makes before every pod delete (MarkPodAsDeleted). No
// I/O: the caller hands in a snapshot (informer caches) and `now`, and on an
// allow records the returned eviction in its cache.
//
// rollout-operator's order, which the exported steps keep:
//   (webhook: request checks, GET the pod)
//   evictionScope   terminal/pending/terminating pod → allow "pod is not ready";
//                   an invalid ZPDB that may cover the pod → 403 (Stateward:
//                   rollout-operator ignores invalid budgets);
//                   several ZPDBs → 400; none → allow (native PDBs still apply)
//   decideEviction  owner StatefulSet (500), budget 0 (403), fewer than two
//                   zones (400), partition (400), then the zone or partition
//                   tallies (429), or allow. Stateward: under
//                   unhealthyPodEvictionPolicy AlwaysAllow a pod that is not
//                   Ready is let go where the budget (403 or 429) would refuse.
//
// Zone mode: allow only if every other zone is whole (no pod unavailable or
// missing) and the evicted pod's zone stays within maxUnavailable.
// Partition mode: the pods serving the evicted pod's partition in the other
// zones are tallied together against maxUnavailable.
//
// A pod counts as available when it is Running and Ready (podView), not
// terminating, not already being evicted (the eviction cache), and in
// partition mode with crossZoneEvictionDelay, Ready for longer than the delay.
// Pods a StatefulSet should have but that are not there count as unavailable.
import type { Pod, StatefulSet } from '../../runtime/kube/types.ts';
import { podsOf, podView } from '../../vocabulary/pods.ts';
import { parseRfc3339 } from '../../vocabulary/rfc3339.ts';
import {
  findZpdbForPod,
  invalidZpdbCovers,
  invalidZpdbMessage,
  maxUnavailablePods,
  podPartition,
  zpdbSelects,
  type InvalidZpdb,
  type ZpdbConfig,
} from './zpdbresource.ts';
import { READY_TIME_ANNOTATION } from '../../vocabulary/keys.ts';
import { compareCodeUnits } from '../../runtime/order.ts';

/** How long an allowed eviction keeps its pod counted as unavailable. */
export const EVICTION_CACHE_TTL_MS = 2 * 60_000;
export const POD_NOT_READY_WARNING = 'pod is not ready';
export const MAX_UNAVAILABLE_ZERO_MESSAGE = 'max unavailable = 0';
export const MIN_STATEFULSETS_MESSAGE = 'minimum number of StatefulSets not found';
export const UNHEALTHY_POD_ALWAYS_ALLOW_MESSAGE =
  "pod is not ready and the budget's unhealthyPodEvictionPolicy is AlwaysAllow: evicted without spending the budget";

/**
 * Recently allowed evictions: pod UID → epoch ms it was allowed. Keyed by
 * UID, not by name as rollout-operator: the pod a StatefulSet recreates under the
 * same name is judged on its own state, while the old one, until it is gone,
 * still counts (terminating, then missing).
 */
export type PendingEvictions = ReadonlyMap<string, number>;

export interface EvictionRecord {
  uid: string;
  name: string;
  allowedAt: number;
}

/** What the caller reads from its caches. */
export interface EvictionSnapshot {
  /** The pod to evict (or delete), as it is now. */
  pod: Pod;
  /** StatefulSets of the pod's namespace (those the ZPDB does not select are ignored). */
  statefulSets: readonly StatefulSet[];
  /** Pods of the namespace (assigned to StatefulSets by controller ownerReference or selector). */
  pods: readonly Pod[];
  pendingEvictions: PendingEvictions;
  now: number;
  /** A dry-run eviction is judged but not recorded (rollout-operator records it). */
  dryRun?: boolean;
}

export interface EvictionInput extends EvictionSnapshot {
  /** The ZPDB covering the pod (evictionScope). */
  config: ZpdbConfig;
  /** The budget to use instead when the ZPDB's is 0 (rollout controller path only). */
  maxUnavailableZeroOverride?: number;
}

/** rollout-operator's rollout_operator_zpdb_eviction_requests_total reasons. */
export type AllowReason = 'pod-not-ready' | 'pod-not-in-scope' | 'allowed' | 'unhealthy-pod-always-allow';
export type DenyReason =
  | 'cfg-not-found'
  | 'invalid-zpdb'
  | 'sts-no-found'
  | 'max-unavailable-0'
  | 'min-sts-not-found'
  | 'partition-not-identified'
  | 'denied';
export type DenyCode = 400 | 403 | 429 | 500;

export interface EvictionAllowed {
  allowed: true;
  reason: AllowReason;
  /** AdmissionResponse.warnings. */
  warning?: string;
  /** For the log: "zpdb met across 3 zones". */
  message?: string;
  /**
   * To add to the eviction cache; absent for dry runs and out-of-budget
   * allows. A not-Ready pod let go under AlwaysAllow is recorded too: it is
   * already counted as unavailable, so the entry changes no count, but it
   * keeps the pod counted as going should it turn Ready before it is deleted.
   */
  record?: EvictionRecord;
}

export interface EvictionDenied {
  allowed: false;
  /** AdmissionResponse.result.code. */
  code: DenyCode;
  reason: DenyReason;
  /** AdmissionResponse.result.message. */
  message: string;
}

export type EvictionDecision = EvictionAllowed | EvictionDenied;

function deny(code: DenyCode, reason: DenyReason, message: string): EvictionDenied {
  return { allowed: false, code, reason, message };
}

// -------------------------------------------------------- eviction cache

export function isPendingEviction(pending: PendingEvictions, uid: string | undefined, now: number): boolean {
  if (!uid) return false;
  const allowedAt = pending.get(uid);
  return allowedAt !== undefined && now < allowedAt + EVICTION_CACHE_TTL_MS;
}

// ----------------------------------------------------------------- scope

/**
 * Kubernetes' canIgnorePDB: a pod that is finished, not started or already
 * going can be evicted without looking at any budget. (A Running pod that is
 * not Ready is not in this list and goes through the budget, as in
 * Kubernetes' default IfHealthyBudget policy: it may be about to recover.)
 */
export function podCanIgnoreBudget(pod: Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed' || phase === 'Pending' || Boolean(pod.metadata?.deletionTimestamp);
}

export type EvictionScope = { kind: 'decided'; decision: EvictionDecision } | { kind: 'in-scope'; config: ZpdbConfig };

/**
 * Steps before the budget: ignorable pods, invalid budgets, and which ZPDB
 * (if any) covers the pod.
 *
 * An invalid budget fails closed: a pod it may cover (invalidZpdbCovers) is
 * not evicted until the budget is fixed, whatever valid budget also covers
 * it (a pod under two budgets is denied anyway). 403, as for
 * maxUnavailable 0: waiting does not help, a person must act, and
 * `kubectl drain` shows the message at once instead of retrying.
 */
export function evictionScope(
  pod: Pod,
  configs: Iterable<ZpdbConfig>,
  invalid: Iterable<InvalidZpdb> = [],
): EvictionScope {
  if (podCanIgnoreBudget(pod))
    return { kind: 'decided', decision: { allowed: true, reason: 'pod-not-ready', warning: POD_NOT_READY_WARNING } };
  const broken = [...invalid]
    .filter((b) => invalidZpdbCovers(b, pod))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (broken.length > 0) {
    const more =
      broken.length > 1
        ? ` (and ${broken.length - 1} more invalid ${broken.length > 2 ? 'budgets' : 'budget'}: ${broken
            .slice(1)
            .map((b) => b.name)
            .join(', ')})`
        : '';
    return { kind: 'decided', decision: deny(403, 'invalid-zpdb', invalidZpdbMessage(broken[0]!) + more) };
  }
  const found = findZpdbForPod(configs, pod);
  if (found.kind === 'multiple') return { kind: 'decided', decision: deny(400, 'cfg-not-found', found.error) };
  if (found.kind === 'none') return { kind: 'decided', decision: { allowed: true, reason: 'pod-not-in-scope' } };
  return { kind: 'in-scope', config: found.config };
}

// ----------------------------------------------------------------- owner

function ownerOf(pod: Pod, statefulSets: readonly StatefulSet[]): StatefulSet | { error: string } {
  const owner = pod.metadata?.ownerReferences?.find((r) => r.controller);
  if (!owner) return { error: 'unable to find a StatefulSet pod owner' };
  if (owner.kind !== 'StatefulSet')
    return {
      error: `pod owner is not a StatefulSet - ${pod.metadata?.name ?? ''} has owner ${owner.name} (${owner.kind})`,
    };
  const found = statefulSets.find((s) => s.metadata?.name === owner.name);
  // rollout-operator GETs it; this is the API's NotFound text it would pass on.
  if (!found)
    return { error: `unable to find StatefulSet ${owner.name} by name: statefulsets.apps "${owner.name}" not found` };
  return found;
}

function sameObject(
  a: { metadata?: { uid?: string; name?: string } },
  b: { metadata?: { uid?: string; name?: string } },
): boolean {
  const ua = a.metadata?.uid;
  const ub = b.metadata?.uid;
  if (ua && ub) return ua === ub;
  return a.metadata?.name === b.metadata?.name;
}

// ---------------------------------------------------------------- tallies

/** The state of the pods of one zone (or of one partition). */
interface Tally {
  /** Pods looked at. */
  tested: number;
  /** Of those, not available (the pod being evicted is never counted). */
  notReady: number;
  /** Pods the StatefulSet should have but that are not there. */
  unknown: number;
}

interface Judge {
  evicted: Pod;
  pending: PendingEvictions;
  now: number;
  /** 0 in zone mode. */
  delayMs: number;
}

function parsedTime(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const t = parseRfc3339(value);
  return typeof t === 'number' ? t : undefined;
}

/**
 * Since when the pod has been Ready, for crossZoneEvictionDelay: the later
 * of the grafana.com/ready-time annotation (rollout-operator's pod observer
 * writes it; honoured when present) and the Ready condition's
 * lastTransitionTime. Stateward does not write the annotation: the
 * condition the kubelet keeps says the same without a patch per pod, and a
 * later transition also catches an annotation gone stale (a restart the
 * observer missed). Neither known → `now` (not yet past any delay), rollout-operator's rule for a missing annotation.
 */
export function readySince(pod: Pod, now: number): number {
  const annotated = parsedTime(pod.metadata?.annotations?.[READY_TIME_ANNOTATION]);
  const condition = pod.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True');
  const transitioned = parsedTime(condition?.lastTransitionTime);
  if (annotated === undefined && transitioned === undefined) return now;
  return Math.max(annotated ?? -Infinity, transitioned ?? -Infinity);
}

/** Whether a pod other than the evicted one counts as available. */
export function podAvailable(pod: Pod, judge: Omit<Judge, 'evicted'>): boolean {
  if (isPendingEviction(judge.pending, pod.metadata?.uid, judge.now)) return false;
  if (!podView(pod).ready) return false;
  if (judge.delayMs <= 0) return true;
  // Strictly after, as rollout-operator (now.After(since + delay)).
  return judge.now > readySince(pod, judge.now) + judge.delayMs;
}

/** Pods the StatefulSet should have: the larger of desired and created. */
function expectedReplicas(statefulSet: StatefulSet): number {
  const status = statefulSet.status?.replicas ?? 0;
  const spec = statefulSet.spec?.replicas;
  return spec === undefined || spec === null ? status : Math.max(status, spec);
}

/**
 * `inPartition` (partition mode): whether a pod NAME belongs to the
 * partition. Zone mode passes undefined: every pod counts.
 */
function tallyZone(
  statefulSet: StatefulSet,
  pods: readonly Pod[],
  judge: Judge,
  inPartition?: (name: string) => boolean,
): Tally {
  const own = podsOf(statefulSet, [...pods]);
  const tally: Tally = { tested: 0, notReady: 0, unknown: 0 };
  for (const pod of own) {
    if (inPartition && !inPartition(pod.metadata?.name ?? '')) continue;
    if (!sameObject(pod, judge.evicted) && !podAvailable(pod, judge)) tally.notReady++;
    tally.tested++;
  }
  const shortfall = Math.max(0, expectedReplicas(statefulSet) - own.length);
  if (!inPartition) {
    tally.unknown = shortfall;
    return tally;
  }
  // A StatefulSet's pods are named <name>-<ordinal>, so a missing pod's
  // partition is known from its name: charge it to that partition only. rollout-operator charges every missing pod to every partition, so one pod being
  // recreated in zone a blocks all partitions of zone b. A shortfall the
  // names do not explain is still charged here (safe side).
  const name = statefulSet.metadata?.name ?? '';
  const start = statefulSet.spec?.ordinals?.start ?? 0;
  const present = new Set(own.map((p) => p.metadata?.name));
  let missing = 0;
  let missingHere = 0;
  for (let ordinal = start; ordinal < start + expectedReplicas(statefulSet); ordinal++) {
    const podName = `${name}-${ordinal}`;
    if (present.has(podName)) continue;
    missing++;
    if (inPartition(podName)) missingHere++;
  }
  tally.unknown = missingHere + Math.max(0, shortfall - missing);
  return tally;
}

function plural(word: string, n: number): string {
  return n > 1 ? `${word}s` : word;
}

/** "1 pod not ready in ingester-zone-a", "2 pods not ready, 1 pod unknown in partition 0". */
export function budgetMessage(tally: Pick<Tally, 'notReady' | 'unknown'>, span: string): string {
  const parts: string[] = [];
  if (tally.notReady > 0) parts.push(`${tally.notReady} ${plural('pod', tally.notReady)} not ready`);
  if (tally.unknown > 0) parts.push(`${tally.unknown} ${plural('pod', tally.unknown)} unknown`);
  return parts.join(', ') + (span ? ` in ${span}` : '');
}

// ----------------------------------------------------------------- decide

function byName(a: StatefulSet, b: StatefulSet): number {
  return (
    compareCodeUnits(a.metadata?.name ?? '', b.metadata?.name ?? '') ||
    compareCodeUnits(a.metadata?.uid ?? '', b.metadata?.uid ?? '')
  );
}

/**
 * Whether the budget is waived for this pod (it is still judged, to say
 * what it would have answered): unhealthyPodEvictionPolicy AlwaysAllow and
 * the pod not Ready. Such a pod
 * is already counted as unavailable by every other decision (podAvailable),
 * so evicting it cannot lower availability. Ready means what the budget
 * counts as available (podView): a pod that is starting and a pod that
 * crash-loops are both not Ready, as in Kubernetes, which does not tell
 * them apart either. A Ready pod always goes through the budget.
 */
export function unhealthyPodExempt(config: Pick<ZpdbConfig, 'unhealthyPodEvictionPolicy'>, pod: Pod): boolean {
  return config.unhealthyPodEvictionPolicy === 'AlwaysAllow' && !podView(pod).ready;
}

/** What the budget is judged on, once the owner, the zones and the partition are known. */
interface Frame {
  config: ZpdbConfig;
  owner: StatefulSet;
  /** The other zones' StatefulSets, by name. */
  others: StatefulSet[];
  zones: number;
  /** undefined in zone mode. */
  partition: string | undefined;
  pods: readonly Pod[];
  judge: Judge;
  maxUnavailable: number;
  allow: (reason: AllowReason, message: string, warning?: string) => EvictionAllowed;
}

/**
 * The steps before the tallies, in rollout-operator's order: owner
 * StatefulSet (500), budget 0 (403), fewer than two zones (400), partition
 * (400). `exempt` (unhealthyPodExempt) passes a budget of 0 on to the
 * caller, which lets the pod go: only the budget, not a broken setup, is
 * waived.
 */
function budgetFrame(input: EvictionInput, exempt: boolean): Frame | { decision: EvictionDecision } {
  const { pod, config, now } = input;
  const namespace = pod.metadata?.namespace ?? '';
  const inNamespace = (o: Pod | StatefulSet) => namespace === '' || (o.metadata?.namespace ?? namespace) === namespace;
  const statefulSets = input.statefulSets.filter(inNamespace);
  const pods = input.pods.filter(inNamespace);

  const owner = ownerOf(pod, statefulSets);
  if ('error' in owner) return { decision: deny(500, 'sts-no-found', owner.error) };

  let maxUnavailable = maxUnavailablePods(config, owner);
  // The rollout controller must be able to roll pods even when voluntary
  // evictions are switched off (maxUnavailable 0).
  if (maxUnavailable === 0 && input.maxUnavailableZeroOverride !== undefined)
    maxUnavailable = Math.max(0, input.maxUnavailableZeroOverride);
  if (maxUnavailable === 0 && !exempt)
    return { decision: deny(403, 'max-unavailable-0', MAX_UNAVAILABLE_ZERO_MESSAGE) };

  // One StatefulSet per zone; the selector finds them all. The owner is a
  // zone even if the selector misses it (rollout-operator then crashes in zone mode).
  const related = statefulSets.filter((s) => zpdbSelects(config, s.metadata?.labels));
  const others = related.filter((s) => !sameObject(s, owner)).sort(byName);
  const zones = others.length + 1;
  if (zones < 2) return { decision: deny(400, 'min-sts-not-found', MIN_STATEFULSETS_MESSAGE) };

  const partition = podPartition(config, pod.metadata?.name ?? '');
  if (typeof partition === 'object') return { decision: deny(400, 'partition-not-identified', partition.error) };

  const judge: Judge = {
    evicted: pod,
    pending: input.pendingEvictions,
    now,
    delayMs: partition === undefined ? 0 : config.crossZoneEvictionDelayMs,
  };
  const record: EvictionRecord | undefined = input.dryRun
    ? undefined
    : { uid: pod.metadata?.uid ?? '', name: pod.metadata?.name ?? '', allowedAt: now };
  const allow = (reason: AllowReason, message: string, warning?: string): EvictionAllowed => ({
    allowed: true,
    reason,
    ...(warning !== undefined ? { warning } : {}),
    message,
    ...(record ? { record } : {}),
  });
  return { config, owner, others, zones, partition, pods, judge, maxUnavailable, allow };
}

/** The zone or partition tallies against the budget: 429 or allow. */
function judgeBudget(frame: Frame): EvictionDecision {
  const { config, owner, others, zones, partition, pods, judge, maxUnavailable } = frame;
  if (maxUnavailable === 0) return deny(403, 'max-unavailable-0', MAX_UNAVAILABLE_ZERO_MESSAGE);
  if (partition === undefined) {
    for (const other of others) {
      const tally = tallyZone(other, pods, judge);
      // Another zone is disrupted: evicting here would take a second zone down.
      if (tally.notReady + tally.unknown > 0)
        return deny(429, 'denied', budgetMessage(tally, other.metadata?.name ?? ''));
    }
    const own = tallyZone(owner, pods, judge);
    if (own.notReady + own.unknown >= maxUnavailable)
      return deny(429, 'denied', budgetMessage(own, owner.metadata?.name ?? ''));
    return frame.allow('allowed', `zpdb met across ${zones} zones`);
  }

  const samePartition = (name: string) => podPartition(config, name) === partition;
  const total: Tally = { tested: 0, notReady: 0, unknown: 0 };
  for (const other of others) {
    const tally = tallyZone(other, pods, judge, samePartition);
    total.tested += tally.tested;
    total.notReady += tally.notReady;
    total.unknown += tally.unknown;
    // No trace of the partition's pod in that zone (e.g. already scaled
    // down there): assume it is unavailable (rollout-operator #370). The model is one
    // pod per partition per zone.
    if (tally.tested === 0 && tally.notReady === 0 && tally.unknown === 0) total.unknown++;
  }
  // Beyond rollout-operator, which skips the evicted pod's zone entirely: other
  // pods of the same partition in that zone count too. With one pod per
  // partition per zone there are none, so rollout-operator's answers are unchanged.
  total.notReady += tallyZone(owner, pods, judge, samePartition).notReady;
  if (total.notReady + total.unknown >= maxUnavailable)
    return deny(429, 'denied', budgetMessage(total, `partition ${partition}`));
  return frame.allow('allowed', `zpdb met for partition ${partition} across ${zones} zones`);
}

/** "pod is not ready and unhealthyPodEvictionPolicy is AlwaysAllow: …", what the budget alone would have said appended. */
export function unhealthyPodAllowedMessage(budgetSays: string): string {
  return `${UNHEALTHY_POD_ALWAYS_ALLOW_MESSAGE} (the budget alone would refuse: ${budgetSays})`;
}

/**
 * The budget decision for a pod covered by `input.config`. Under
 * unhealthyPodEvictionPolicy AlwaysAllow a pod that is not Ready gets the
 * budget's own answer when that is an allow (it spends what any allow
 * spends), and otherwise is let go anyway, with reason
 * `unhealthy-pod-always-allow` and a warning naming what the budget said.
 */
export function decideEviction(input: EvictionInput): EvictionDecision {
  const { pod, config } = input;
  if (podCanIgnoreBudget(pod)) return { allowed: true, reason: 'pod-not-ready', warning: POD_NOT_READY_WARNING };
  const exempt = unhealthyPodExempt(config, pod);
  const frame = budgetFrame(input, exempt);
  if ('decision' in frame) return frame.decision;
  const verdict = judgeBudget(frame);
  if (verdict.allowed || !exempt) return verdict;
  const message = unhealthyPodAllowedMessage(verdict.message);
  return frame.allow('unhealthy-pod-always-allow', message, message);
}

/** The whole pod-eviction decision from the scope step on, given every known ZPDB, valid and invalid. */
export function admitEviction(
  input: EvictionSnapshot & {
    configs: Iterable<ZpdbConfig>;
    invalid?: Iterable<InvalidZpdb>;
    maxUnavailableZeroOverride?: number;
  },
): EvictionDecision {
  const scope = evictionScope(input.pod, input.configs, input.invalid);
  if (scope.kind === 'decided') return scope.decision;
  return decideEviction({ ...input, config: scope.config });
}

// ------------------------------------------------------ rollout controller

/**
 * The budget the rollout controller uses when the ZPDB's is 0: its own
 * rollout-max-unavailable, or 1 under a partition-aware ZPDB (more than one
 * pod of a partition at once would take the partition down).
 */
export function maxUnavailableZeroOverride(
  config: Pick<ZpdbConfig, 'partition'>,
  rolloutMaxUnavailable: number,
): number {
  return config.partition !== undefined ? 1 : rolloutMaxUnavailable;
}

/**
 * Would deleting this pod for a rolling update break its ZPDB? The rollout
 * controller asks before each delete (rollout-operator's MarkPodAsDeleted): the
 * same decision as an eviction, so voluntary evictions and rolling deletes
 * share one budget, with the maxUnavailable-0 override above. On an allow
 * the caller records `decision.record` before deleting.
 *
 * Invalid budgets do not hold rolling deletes back (only evictions): the
 * rollout controller's own rules (one zone at a time, only while every other
 * zone is Ready, rollout-max-unavailable) still apply, as for pods without a
 * budget, and evictions under an invalid budget are all denied, so there are
 * none for a rolling delete to race.
 */
export function decideRolloutDelete(
  input: EvictionSnapshot & { configs: Iterable<ZpdbConfig>; rolloutMaxUnavailable: number },
): EvictionDecision {
  const scope = evictionScope(input.pod, input.configs);
  if (scope.kind === 'decided') return scope.decision;
  return decideEviction({
    ...input,
    config: scope.config,
    maxUnavailableZeroOverride: maxUnavailableZeroOverride(scope.config, input.rolloutMaxUnavailable),
  });
}
