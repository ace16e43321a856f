// Reschedule-on-eviction: the pure decision core of a validating webhook on
// CREATE pods/eviction, with Couchbase's Eviction Reschedule Hook semantics
// (docs/migrating-from-couchbase-reschedule-hook.md). No I/O: the executor
// reads the pod, its node and the tracking ConfigMap, calls decideReschedule,
// performs the effects in order, and answers.
//
// The drain contract this relies on (kubectl's drain helper): kubectl retries an eviction
// answered 429 every 5 s, and treats 404 as "this pod is done" without
// waiting; anything else (500 included) fails that pod's drain.
//
//   not in a handled namespace, or pod not selected        allow
//   pod GET failed                                         429 (500 if not transient)
//   pod gone                                               404 "Pod no longer exists"
//   deleteOptions.preconditions.uid ≠ pod uid              allow: the API server answers 409
//   pod carries the reschedule annotation                  429 "Pod waiting to be rescheduled"
//   a live record of an older pod of this name, and the
//     current pod is neither on that pod's node nor on a
//     node being drained                                   404 "Pod has been rescheduled with the same name" (record consumed)
//   otherwise                                              record, annotate, 429 "Reschedule annotation added to pod"
//
// Where this departs from Couchbase's hook, and why:
// - Tracking records are keyed by pod UID and carry the node and a time, not a
//   bare "true" keyed by name. A record only releases a pod whose
//   UID differs (a replacement) and that sits neither on the recorded node nor
//   on a cordoned/drain-tainted node, and only within the TTL, so a leftover
//   record cannot make a drain count a pod that is still on a draining node.
// - Records live in a ConfigMap in the pod's namespace, not in annotations on
//   the Namespace (which needs cluster-wide write permission).
// - API errors are 429 when transient: a 500 aborts kubectl drain.
// - Dry runs never mutate, and a pod that a real eviction would ask its
//   operator to move is *allowed* with a warning: a 429 would make
//   `kubectl drain --dry-run=server` loop until its timeout.
//   The API server does not delete anything on a dry run.
import type { AdmissionDecision, AdmissionRequestV1, AdmissionStatus } from '../../runtime/admission/admission.ts';
import type { ConfigMap, Node, Pod } from '../../runtime/kube/types.ts';
import { evictionDryRun } from '../dryrun.ts';
import { namespaceInScope, profileSelects, type RescheduleConfig } from './rescheduleconfig.ts';

/** Couchbase's hook's answer texts (couchbaselabs/eviction-reschedule-hook reschedule.go), kept verbatim. */
export const MESSAGES = {
  podWaiting: 'Pod waiting to be rescheduled',
  podGone: 'Pod no longer exists',
  replacedSameName: 'Pod has been rescheduled with the same name',
  annotationAdded: 'Reschedule annotation added to pod',
  failedAnnotate: 'Failed to add reschedule annotation to pod',
  failedGetRecords: 'Failed to get rescheduled pods tracking resource',
  failedRemoveRecord: 'Failed to remove tracking annotation from rescheduled pods tracking resource',
  failedGetPod: 'Failed to get pod',
  failedAddRecord: 'Failed to add annotation to rescheduled pods tracking resource',
  /** Ours: Couchbase's hook never looks at nodes. */
  failedGetNode: "Failed to get the pod's node",
} as const;

/** Strimzi Drain Cleaner's answer text (strimzi/drain-cleaner ValidatingWebhook), for its profile. */
export const STRIMZI_MESSAGE = 'The pod will be rolled by the Strimzi Cluster Operator';

export const DRY_RUN_SUFFIX = ' (server dry run)';
export const DRY_RUN_WARNING = 'Pods will not be marked for rescheduling on a dry run';

// ------------------------------------------------------------- request facts

export interface EvictionFacts {
  namespace: string;
  /** Pod name. */
  name: string;
  /** AdmissionRequest.dryRun (a `?dryRun=All` query). */
  requestDryRun: boolean;
  /** Eviction.deleteOptions.dryRun: what `kubectl drain --dry-run=server` sets. */
  deleteOptionsDryRun: readonly string[];
  /** Eviction.deleteOptions.preconditions.uid (Karpenter always sends it). */
  preconditionUid?: string;
  /** request.userInfo.username, kept in the tracking record for humans. */
  requestedBy?: string;
}

/** Either flag, like the API server's dryrun.IsDryRun: any non-empty dryRun list is a dry run. */
export function isDryRun(facts: EvictionFacts): boolean {
  return facts.requestDryRun || facts.deleteOptionsDryRun.length > 0;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const nonEmpty = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined;

/**
 * The facts of a CREATE pods/eviction review. Name and namespace come from
 * the request (the URL, authoritative), the Eviction body only filling gaps.
 * Anything else is not ours to judge: allowed with a warning (fail open, as
 * the webhook's rules should never send it).
 */
export function readEviction(
  request: AdmissionRequestV1,
): { ok: true; facts: EvictionFacts } | { ok: false; answer: AdmissionDecision } {
  const eviction = isRecord(request.object) ? request.object : {};
  const meta = isRecord(eviction.metadata) ? eviction.metadata : {};
  const options = isRecord(eviction.deleteOptions) ? eviction.deleteOptions : {};
  const preconditions = isRecord(options.preconditions) ? options.preconditions : {};
  const name = nonEmpty(request.name) ?? nonEmpty(meta.name);
  const namespace = nonEmpty(request.namespace) ?? nonEmpty(meta.namespace);
  const isEviction =
    request.operation === 'CREATE' && request.resource.resource === 'pods' && request.subResource === 'eviction';
  if (!isEviction || name === undefined || namespace === undefined) {
    const what = `${request.operation} ${request.resource.resource}${request.subResource ? `/${request.subResource}` : ''}`;
    return {
      ok: false,
      answer: { allowed: true, warnings: [`reschedule webhook: ${what} is not a pod eviction it can judge; allowed`] },
    };
  }
  const facts: EvictionFacts = { namespace, name, ...evictionDryRun(request) };
  const uid = nonEmpty(preconditions.uid);
  if (uid !== undefined) facts.preconditionUid = uid;
  const user = nonEmpty(request.userInfo?.username);
  if (user !== undefined) facts.requestedBy = user;
  return { ok: true, facts };
}

// ----------------------------------------------------------- tracking records

/**
 * One reschedule request, stored in the tracking ConfigMap of the pod's
 * namespace under data key = pod UID, value = JSON:
 *   {"v":1,"pod":"cb-0001","uid":"…","node":"node-a",
 *    "requestedAt":"2025-01-02T03:04:05.000Z","refreshedAt":"…","requestedBy":"…"}
 * Keying by UID lets concurrent writers merge-patch without conflicts.
 */
export interface TrackingRecord {
  uid: string;
  /** Pod name (the namespace is the ConfigMap's). */
  pod: string;
  /** spec.nodeName of that pod when it was asked to move; '' if unscheduled. */
  node: string;
  /** Epoch ms of the first request. */
  requestedAt: number;
  /** Epoch ms of the last confirmation that the pod still waits; the TTL runs from here. */
  refreshedAt: number;
  requestedBy?: string;
  /**
   * Set when an eviction of the pod's replacement was answered 404 (released):
   * that replacement's UID and when. The record then answers only that
   * replacement, and only for RELEASE_AGREEMENT_MS, so every webhook
   * configuration judging the same eviction (Couchbase's path and Strimzi's
   * /drainer both calling Stateward) agrees: one that read the records after
   * another released them would otherwise ask the replacement to move again.
   */
  releasedTo?: string;
  releasedAt?: number;
}

/**
 * How long a released record keeps answering its replacement 404. The
 * webhooks of one eviction are called together and time out within 30 s; a
 * later eviction of the replacement is judged afresh ("404 once").
 */
export const RELEASE_AGREEMENT_MS = 60_000;

export const RECORD_FORMAT_VERSION = 1;
const CONFIGMAP_KEY = /^[-._a-zA-Z0-9]{1,253}$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;

export function encodeRecord(record: TrackingRecord): { key: string; value: string } {
  const value: Record<string, unknown> = {
    v: RECORD_FORMAT_VERSION,
    pod: record.pod,
    uid: record.uid,
    node: record.node,
    requestedAt: new Date(record.requestedAt).toISOString(),
    refreshedAt: new Date(record.refreshedAt).toISOString(),
  };
  if (record.requestedBy !== undefined) value.requestedBy = record.requestedBy;
  if (record.releasedTo !== undefined && record.releasedAt !== undefined) {
    value.releasedTo = record.releasedTo;
    value.releasedAt = new Date(record.releasedAt).toISOString();
  }
  return { key: record.uid, value: JSON.stringify(value) };
}

export type DecodedRecord = { ok: true; record: TrackingRecord } | { ok: false; problem: string; newerFormat: boolean };

function parseTime(value: unknown): number | undefined {
  if (typeof value !== 'string' || !ISO_UTC.test(value)) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

export function decodeRecord(key: string, value: string): DecodedRecord {
  const bad = (problem: string): DecodedRecord => ({ ok: false, problem, newerFormat: false });
  if (!CONFIGMAP_KEY.test(key)) return bad('the key is not a pod UID');
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return bad('not JSON');
  }
  if (!isRecord(parsed)) return bad('not a JSON object');
  if (typeof parsed.v === 'number' && Number.isInteger(parsed.v) && parsed.v > RECORD_FORMAT_VERSION) {
    return {
      ok: false,
      problem: `format version ${parsed.v} is newer than ${RECORD_FORMAT_VERSION}`,
      newerFormat: true,
    };
  }
  if (parsed.v !== RECORD_FORMAT_VERSION)
    return bad(`format version ${JSON.stringify(parsed.v)} is not ${RECORD_FORMAT_VERSION}`);
  if (parsed.uid !== key) return bad('uid does not match the key');
  if (typeof parsed.pod !== 'string' || parsed.pod.length > 253 || !DNS_SUBDOMAIN.test(parsed.pod))
    return bad('pod is not a pod name');
  if (typeof parsed.node !== 'string' || parsed.node.length > 253) return bad('node is not a string');
  const requestedAt = parseTime(parsed.requestedAt);
  const refreshedAt = parseTime(parsed.refreshedAt);
  if (requestedAt === undefined) return bad('requestedAt is not an RFC 3339 UTC time');
  if (refreshedAt === undefined) return bad('refreshedAt is not an RFC 3339 UTC time');
  if (refreshedAt < requestedAt) return bad('refreshedAt is before requestedAt');
  if (parsed.requestedBy !== undefined && typeof parsed.requestedBy !== 'string')
    return bad('requestedBy is not a string');
  const record: TrackingRecord = { uid: key, pod: parsed.pod, node: parsed.node, requestedAt, refreshedAt };
  if (typeof parsed.requestedBy === 'string') record.requestedBy = parsed.requestedBy;
  if (parsed.releasedTo !== undefined || parsed.releasedAt !== undefined) {
    const releasedAt = parseTime(parsed.releasedAt);
    if (typeof parsed.releasedTo !== 'string' || !CONFIGMAP_KEY.test(parsed.releasedTo))
      return bad('releasedTo is not a pod UID');
    if (releasedAt === undefined) return bad('releasedAt is not an RFC 3339 UTC time');
    record.releasedTo = parsed.releasedTo;
    record.releasedAt = releasedAt;
  }
  return { ok: true, record };
}

export interface DecodedRecords {
  records: TrackingRecord[];
  /** Keys of unreadable records: they release nothing, and are removed on the next write. */
  malformed: string[];
  /** One line per unreadable record, for the operator's log. */
  warnings: string[];
}

/**
 * Reads the tracking ConfigMap's data. A malformed record is ignored, which
 * is the safe direction: it can no longer release a pod (404), at worst the
 * pod is asked to move once more. Records of a newer format are ignored but
 * left in place, so a rollback during an upgrade does not erase them.
 */
export function decodeRecords(data: Readonly<Record<string, string>> | undefined): DecodedRecords {
  const out: DecodedRecords = { records: [], malformed: [], warnings: [] };
  for (const [key, value] of Object.entries(data ?? {})) {
    const decoded = decodeRecord(key, value);
    if (decoded.ok) {
      out.records.push(decoded.record);
    } else if (decoded.newerFormat) {
      out.warnings.push(`tracking record ${JSON.stringify(key)}: ${decoded.problem}; ignored`);
    } else {
      out.malformed.push(key);
      out.warnings.push(
        `tracking record ${JSON.stringify(key)} is malformed (${decoded.problem}); ignored, removed on the next write`,
      );
    }
  }
  return out;
}

/**
 * Past its TTL, or stamped further in the future than a TTL (a clock far
 * off, or a corrupt time): either way it must not release anything.
 */
export function recordExpired(record: TrackingRecord, now: number, ttlMs: number): boolean {
  return now - record.refreshedAt >= ttlMs || record.refreshedAt - now > ttlMs;
}

// ----------------------------------------------------------------- nodes

/** Cordoned, or carrying one of the drain taints (any effect). */
export function nodeIsDraining(node: Node, drainTaints: readonly string[]): boolean {
  if (node.spec?.unschedulable === true) return true;
  return (node.spec?.taints ?? []).some((t) => drainTaints.includes(t.key));
}

// --------------------------------------------------------- inputs & outputs

export interface LookupFailure {
  kind: 'failed';
  error: string;
  /** See apiErrorIsTransient. */
  transient: boolean;
}

export type PodLookup = { kind: 'found'; pod: Pod } | { kind: 'not-found' } | LookupFailure;
/** The tracking ConfigMap's data; undefined data = the ConfigMap does not exist yet. */
export type RecordsLookup = { kind: 'found'; data: Readonly<Record<string, string>> | undefined } | LookupFailure;
export type NodeLookup = { kind: 'found'; node: Node } | { kind: 'not-found' } | LookupFailure;

export interface RescheduleInput {
  eviction: EvictionFacts;
  /** The pod named by the eviction, as the executor found it. */
  pod: PodLookup;
  /**
   * The node named by the found pod's spec.nodeName. Only consulted before
   * releasing a replacement; missing there counts as a transient failure, as
   * a pod must never be released without knowing its node is not draining.
   */
  podNode?: NodeLookup;
  /** Unused when config.track is off. */
  records: RecordsLookup;
  config: RescheduleConfig;
  /** Epoch ms. */
  now: number;
}

export interface UpdateRecordsEffect {
  kind: 'update-records';
  namespace: string;
  configMap: string;
  /**
   * JSON merge patch for the ConfigMap: a string sets a record, null removes
   * one. If the ConfigMap does not exist, create newTrackingConfigMap(effect)
   * instead (and patch if that races with another writer).
   */
  patch: { data: Record<string, string | null> };
  /** The answer's message if this write fails. */
  failureMessage: string;
}

export interface AnnotatePodEffect {
  kind: 'annotate-pod';
  namespace: string;
  name: string;
  uid: string;
  /**
   * JSON merge patch. metadata.uid makes it a precondition: if the pod was
   * replaced since it was read, the API server answers 409 and nothing is
   * annotated (the replacement must be judged afresh).
   */
  patch: { metadata: { uid: string; annotations: Record<string, string> } };
  failureMessage: string;
}

export type RescheduleEffect = UpdateRecordsEffect | AnnotatePodEffect;

export type RescheduleOutcome =
  | 'not-in-scope'
  | 'pod-lookup-failed'
  | 'pod-gone'
  | 'not-selected'
  | 'uid-mismatch'
  | 'waiting'
  | 'records-lookup-failed'
  | 'node-lookup-failed'
  | 'replaced'
  | 'reschedule-requested';

export interface RescheduleDecision {
  /** Why, for logs and metrics. */
  outcome: RescheduleOutcome;
  dryRun: boolean;
  /** The answer once every effect has succeeded (or when there are none). */
  answer: AdmissionDecision;
  /**
   * To perform in order; on the first failure stop and answer
   * effectFailed(effect, failure). Always empty on a dry run.
   */
  effects: RescheduleEffect[];
  /** For the operator's log (malformed records…), not shown to the client. */
  logWarnings: string[];
}

// ------------------------------------------------------------------ answers

/** metav1.Status as Couchbase's hook sends it; the API server keeps code and reason. */
interface FailureStatus extends AdmissionStatus {
  status: 'Failure';
  code: 404 | 429 | 500;
  reason: 'NotFound' | 'TooManyRequests' | 'InternalError';
  message: string;
}

const ALLOW: AdmissionDecision = { allowed: true };

function deny(code: FailureStatus['code'], message: string, warnings: string[] = []): AdmissionDecision {
  const reason = code === 404 ? 'NotFound' : code === 429 ? 'TooManyRequests' : 'InternalError';
  // No details.retryAfterSeconds: it would make client-go retry inside one
  // Evict() call before kubectl's own loop sees the answer.
  const status: FailureStatus = { status: 'Failure', code, reason, message };
  return warnings.length > 0 ? { allowed: false, status, warnings } : { allowed: false, status };
}

/**
 * Whether an API error is worth retrying. Only errors retrying cannot fix
 * (a malformed request, missing RBAC) are not: those are misconfiguration
 * and get Couchbase's hook's 500, which stops a drain loudly instead of
 * looping on it. No code (timeouts, resets), races (404/409), throttling and
 * server errors are transient.
 */
export function apiErrorIsTransient(code: number | undefined): boolean {
  return !(code === 400 || code === 403 || code === 405 || code === 415 || code === 422);
}

function failed(message: string, failure: { error: string; transient: boolean }): AdmissionDecision {
  return failure.transient
    ? deny(429, message, [`${message}: ${failure.error}; the eviction can be retried`])
    : deny(500, message, [`${message}: ${failure.error}`]);
}

/** The answer when an effect fails: nothing further is done, the evictor retries (or stops on a 500). */
export function effectFailed(
  effect: RescheduleEffect,
  failure: { error: string; transient: boolean },
): AdmissionDecision {
  return failed(effect.failureMessage, failure);
}

// ------------------------------------------------------------------ decision

export function decideReschedule(input: RescheduleInput): RescheduleDecision {
  const real = decideForReal(input);
  return isDryRun(input.eviction) ? asDryRun(real, input.eviction, input.config) : real;
}

/** An answer, and the effects that must succeed before it is given. */
interface Verdict {
  outcome: RescheduleOutcome;
  answer: AdmissionDecision;
  effects?: RescheduleEffect[];
}

function decideForReal(input: RescheduleInput): RescheduleDecision {
  const { eviction: ev, config, now } = input;
  const logWarnings: string[] = [];
  const done = (
    outcome: RescheduleOutcome,
    answer: AdmissionDecision,
    effects: RescheduleEffect[] = [],
  ): RescheduleDecision => ({
    outcome,
    dryRun: false,
    answer,
    effects,
    logWarnings,
  });

  const target = podToJudge(input);
  if (!('pod' in target)) return done(target.outcome, target.answer);
  const { pod, uid } = target;

  const { key: annotationKey, value: annotationValue } = config.annotation;
  const annotated = pod.metadata?.annotations?.[annotationKey] === annotationValue;
  const nodeName = pod.spec?.nodeName ?? '';
  const annotate = annotatePodEffect(ev, uid, config.annotation);
  const askedNow = moveAnswer(config, MESSAGES.annotationAdded, [
    `pod ${ev.namespace}/${ev.name} was annotated ${annotationKey}=${annotationValue} for its operator to move it; ${THEN[config.answer ?? 'deny-429']}`,
  ]);
  const waiting = moveAnswer(config, MESSAGES.podWaiting);

  if (!config.track) {
    if (annotated) return done('waiting', waiting);
    return done('reschedule-requested', askedNow, [annotate]);
  }

  if (input.records.kind === 'failed') {
    if (annotated) {
      // The answer does not depend on the records; only their refresh is skipped.
      logWarnings.push(
        `tracking records of ${ev.namespace} unreadable (${input.records.error}); record of ${ev.name} not refreshed`,
      );
      return done('waiting', waiting);
    }
    return done('records-lookup-failed', failed(MESSAGES.failedGetRecords, input.records));
  }

  const records = podRecords(input, input.records.data, uid, nodeName);
  logWarnings.push(...records.warnings);
  const { own, superseded, ownRecord, updateRecords } = records;

  if (annotated) {
    // Refresh at half-life rather than on every 5 s retry: the record must
    // outlive the wait, without a write per retry. A missing record (someone
    // else annotated the pod) is written so its same-name replacement is known.
    if (own !== undefined && now - own.refreshedAt < config.recordTtlMs / 2) return done('waiting', waiting);
    return done('waiting', waiting, [updateRecords(ownRecord(), superseded, MESSAGES.failedAddRecord)]);
  }

  const replaced = replacementVerdict(input, records, uid, nodeName);
  if (replaced !== undefined) return done(replaced.outcome, replaced.answer, replaced.effects);

  // Record first, then annotate: a record without an annotation is harmless
  // (the next retry annotates again), an annotation without a record would
  // make the replacement look like a new pod to move.
  return done('reschedule-requested', askedNow, [
    updateRecords(ownRecord(), superseded, MESSAGES.failedAddRecord),
    annotate,
  ]);
}

/**
 * The pod the eviction is about, once it is one this webhook judges: in a
 * handled namespace, found, selected by the profile, with a usable uid, and
 * the one the eviction's precondition names. Otherwise the verdict already.
 */
function podToJudge(input: RescheduleInput): { pod: Pod; uid: string } | Verdict {
  const { eviction: ev, config } = input;
  if (!namespaceInScope(config, ev.namespace)) return { outcome: 'not-in-scope', answer: ALLOW };
  const lookup = input.pod;
  if (lookup.kind === 'failed') return { outcome: 'pod-lookup-failed', answer: failed(MESSAGES.failedGetPod, lookup) };
  if (lookup.kind === 'not-found') return { outcome: 'pod-gone', answer: deny(404, MESSAGES.podGone) };
  const pod = lookup.pod;
  if (!profileSelects(config, pod)) return { outcome: 'not-selected', answer: ALLOW };

  const uid = pod.metadata?.uid ?? '';
  if (!CONFIGMAP_KEY.test(uid)) {
    return {
      outcome: 'pod-lookup-failed',
      answer: failed(MESSAGES.failedGetPod, {
        error: `pod has no usable metadata.uid (${JSON.stringify(uid)})`,
        transient: true,
      }),
    };
  }
  if (ev.preconditionUid !== undefined && ev.preconditionUid !== uid) {
    // The evictor targets an earlier pod of this name: the API server fails
    // the eviction on its own precondition (409), which Karpenter counts as done.
    return {
      outcome: 'uid-mismatch',
      answer: {
        allowed: true,
        warnings: [
          `eviction precondition uid ${ev.preconditionUid} is not pod ${ev.namespace}/${ev.name}'s uid ${uid}; left to the API server`,
        ],
      },
    };
  }
  return { pod, uid };
}

/**
 * A live record of an earlier pod of this name, which lived on another node
 * than the current pod: the evictor is following a pod we already asked to
 * move (kubectl's retry loop re-reads pods by name). The old pod counts as
 * evicted (404) unless the current one sits on a draining node; undefined
 * when there is no such record, or the current pod must be moved too.
 */
function replacementVerdict(
  input: RescheduleInput,
  { superseded, isLive, updateRecords }: PodRecords,
  uid: string,
  nodeName: string,
): Verdict | undefined {
  const { eviction: ev, config, now } = input;
  const candidates = superseded.filter(
    (r) => isLive(r) && answers(r, uid, now) && r.node !== '' && r.node !== nodeName,
  );
  if (candidates.length === 0) return undefined;
  const draining = nodeState(nodeName, input.podNode, config.drainTaints);
  if (typeof draining === 'object')
    return { outcome: 'node-lookup-failed', answer: failed(MESSAGES.failedGetNode, draining) };
  if (draining) return undefined;
  const old = candidates[0];
  const from = old !== undefined ? ` (uid ${old.uid} on node ${old.node})` : '';
  const released = candidates
    .filter((r) => r.releasedTo === undefined)
    .map((r) => ({ ...r, releasedTo: uid, releasedAt: now }));
  const stale = superseded.filter((r) => !candidates.includes(r));
  return {
    outcome: 'replaced',
    answer: deny(404, MESSAGES.replacedSameName, [
      `pod ${ev.namespace}/${ev.name}${from} was replaced by uid ${uid} on ${nodeName === '' ? 'no node yet' : `node ${nodeName}`}; the old pod counts as evicted`,
    ]),
    // Consumed: marked released to this pod, so a concurrent judge of the same
    // eviction agrees, and removed once RELEASE_AGREEMENT_MS has passed: the
    // next eviction of this pod is judged afresh ("404 once").
    effects: released.length > 0 ? [updateRecords(released, stale, MESSAGES.failedRemoveRecord)] : [],
  };
}

/** Whether a record may release the pod `uid`: never released, or released to that very pod moments ago. */
function answers(record: TrackingRecord, uid: string, now: number): boolean {
  if (record.releasedTo === undefined || record.releasedAt === undefined) return true;
  return record.releasedTo === uid && !releaseOver(record, now);
}

function releaseOver(record: TrackingRecord, now: number): boolean {
  return record.releasedAt !== undefined && Math.abs(now - record.releasedAt) >= RELEASE_AGREEMENT_MS;
}

/** What the asked-to-move warning says happens next, per answer. */
const THEN: Record<NonNullable<RescheduleConfig['answer']>, string> = {
  'deny-429': 'the eviction is refused until then',
  'deny-500': 'the eviction is refused (500: the drain stops, to be run again once the pod has moved)',
  allow: 'the eviction is allowed, the annotation written first',
};

/**
 * The answer to an eviction of a pod its operator is asked to move (or is
 * moving): the profile's code, and its message in place of Couchbase's.
 */
function moveAnswer(config: RescheduleConfig, couchbaseMessage: string, warnings: string[] = []): AdmissionDecision {
  const answer = config.answer ?? 'deny-429';
  if (answer === 'allow') return warnings.length > 0 ? { allowed: true, warnings } : ALLOW;
  return deny(answer === 'deny-500' ? 500 : 429, config.message ?? couchbaseMessage, warnings);
}

function annotatePodEffect(
  ev: EvictionFacts,
  uid: string,
  annotation: RescheduleConfig['annotation'],
): AnnotatePodEffect {
  return {
    kind: 'annotate-pod',
    namespace: ev.namespace,
    name: ev.name,
    uid,
    patch: { metadata: { uid, annotations: { [annotation.key]: annotation.value } } },
    failureMessage: MESSAGES.failedAnnotate,
  };
}

/** The tracking records as they bear on one pod, and the writes that keep them. */
interface PodRecords {
  /** The pod's own live record, if any. */
  own: TrackingRecord | undefined;
  /** Records of this pod name with another UID, live or not. */
  superseded: TrackingRecord[];
  isLive: (r: TrackingRecord) => boolean;
  /** The pod's record as of now, keeping the first request's time and requester. */
  ownRecord: () => TrackingRecord;
  /** A write setting `set` and removing `remove`, and with them every expired or malformed record. */
  updateRecords: (
    set: TrackingRecord | readonly TrackingRecord[],
    remove: readonly TrackingRecord[],
    failureMessage: string,
  ) => UpdateRecordsEffect;
  /** From decoding, for the operator's log. */
  warnings: string[];
}

function podRecords(
  input: RescheduleInput,
  trackingData: Readonly<Record<string, string>> | undefined,
  uid: string,
  nodeName: string,
): PodRecords {
  const { eviction: ev, config, now } = input;
  const decoded = decodeRecords(trackingData);
  const ttl = config.recordTtlMs;
  const isLive = (r: TrackingRecord) => !recordExpired(r, now, ttl);
  const own = decoded.records.find((r) => r.uid === uid && r.pod === ev.name && isLive(r));
  // Pod names are unique at any moment, so a record of this name with another
  // UID is about a pod that no longer exists: superseded either way.
  const superseded = decoded.records.filter((r) => r.pod === ev.name && r.uid !== uid);
  const garbage = [
    ...decoded.malformed,
    ...decoded.records
      .filter((r) => !isLive(r) || releaseOver(r, now) || (r.uid === uid && r.pod !== ev.name))
      .map((r) => r.uid),
  ];
  const updateRecords = (
    set: TrackingRecord | readonly TrackingRecord[],
    remove: readonly TrackingRecord[],
    failureMessage: string,
  ): UpdateRecordsEffect => {
    const data: Record<string, string | null> = {};
    for (const key of [...garbage, ...remove.map((r) => r.uid)]) data[key] = null;
    for (const record of 'uid' in set ? [set] : set) {
      const { key, value } = encodeRecord(record);
      data[key] = value;
    }
    return {
      kind: 'update-records',
      namespace: ev.namespace,
      configMap: config.trackingConfigMap,
      patch: { data },
      failureMessage,
    };
  };
  const ownRecord = (): TrackingRecord => {
    const record: TrackingRecord = {
      uid,
      pod: ev.name,
      node: nodeName,
      requestedAt: own?.requestedAt ?? now,
      refreshedAt: now,
    };
    const by = own !== undefined ? own.requestedBy : ev.requestedBy;
    if (by !== undefined) record.requestedBy = by;
    return record;
  };
  return { own, superseded, isLive, ownRecord, updateRecords, warnings: decoded.warnings };
}

/** true/false when known; the failure when the node could not be read. */
function nodeState(
  nodeName: string,
  lookup: NodeLookup | undefined,
  drainTaints: readonly string[],
): boolean | { error: string; transient: boolean } {
  if (nodeName === '') return false; // unscheduled: on no node at all
  if (lookup === undefined) return { error: `node ${nodeName} was not looked up`, transient: true };
  if (lookup.kind === 'failed') return lookup;
  if (lookup.kind === 'not-found') return false; // the node is gone already
  if (lookup.node.metadata?.name !== nodeName)
    return {
      error: `node lookup returned ${lookup.node.metadata?.name ?? 'a nameless node'}, not ${nodeName}`,
      transient: true,
    };
  return nodeIsDraining(lookup.node, drainTaints);
}

/**
 * A dry run: no effects. Where the real answer would ask the operator to move
 * the pod (or find it waiting), allow with warnings; the API server then runs
 * its own dry-run eviction. Every other denial keeps its code, with the
 * suffix and warning Couchbase's hook gives.
 */
function asDryRun(real: RescheduleDecision, ev: EvictionFacts, config: RescheduleConfig): RescheduleDecision {
  const base = { ...real, dryRun: true, effects: [] };
  if (real.outcome === 'reschedule-requested' || real.outcome === 'waiting') {
    const { key, value } = config.annotation;
    const answer = config.answer ?? 'deny-429';
    const refused = answer === 'allow' ? 'allowed' : `refused (${answer === 'deny-500' ? 500 : 429})`;
    const would =
      real.outcome === 'waiting'
        ? `pod ${ev.namespace}/${ev.name} is waiting for its operator to move it; a real eviction would be ${refused}${answer === 'allow' ? '' : ' until it is gone'}`
        : `a real eviction of pod ${ev.namespace}/${ev.name} would be ${refused} and the pod annotated ${key}=${value} for its operator to move it`;
    return { ...base, answer: { allowed: true, warnings: [DRY_RUN_WARNING, would] } };
  }
  const status = real.answer.status;
  if (real.answer.allowed || status === undefined) return base;
  return {
    ...base,
    answer: {
      ...real.answer,
      status: { ...status, message: `${status.message ?? ''}${DRY_RUN_SUFFIX}` },
      warnings: [...(real.answer.warnings ?? []), DRY_RUN_WARNING],
    },
  };
}

/** The tracking ConfigMap to create when an update-records effect finds none. */
export function newTrackingConfigMap(effect: UpdateRecordsEffect): ConfigMap {
  const data: Record<string, string> = {};
  for (const [key, value] of Object.entries(effect.patch.data)) if (value !== null) data[key] = value;
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: effect.configMap,
      namespace: effect.namespace,
      labels: { 'app.kubernetes.io/managed-by': 'stateward' },
    },
    data,
  };
}
