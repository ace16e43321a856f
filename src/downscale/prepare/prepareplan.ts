// /admission/prepare-downscale (mutating, never patches): the pure decision
// core. Behaviour of rollout-operator's pkg/admission/prep_downscale.go and
// zone_tracker.go, as a pipeline of pure steps the executor calls between
// its I/O:
//
//   firstChecks(request)            allow, or resolve the StatefulSet
//     (executor: GET the StatefulSet for a /scale request)
//   stsInfo(statefulSet, downscale) allow / deny, or proceed
//     (executor: if next = 'group-checks': list the group's StatefulSets,
//      in tracker mode get-or-create the zone ConfigMap, list each other
//      StatefulSet's pods)
//   groupChecks(...)                deny, or go on
//     (executor: list this StatefulSet's pods)
//   endpoints(...)                  the pods to prepare, and those skipped
//     (executor: POST each endpoint)
//   afterPrepare(...)               undo (DELETE) + deny, or record
//     (executor: patch the annotation / update the ConfigMap)
//   afterRecord(...)                undo + deny, or allow
//
// Fail-open on decode and lookup errors, fail-closed on group-check and
// prepare errors, as rollout-operator. Every deny message is rollout-operator's text.
import type { AdmissionDecision, AdmissionRequestV1 } from '../../runtime/admission/admission.ts';
import type { Pod, StatefulSet } from '../../runtime/kube/types.ts';
import { podView } from '../../vocabulary/pods.ts';
import { replicasOf } from '../../vocabulary/replicas.ts';
import { cleanPath } from '../../runtime/go/path.ts';
import { formatRfc3339, parseRfc3339 } from '../../vocabulary/rfc3339.ts';
import { checkMinTimeBetweenZoneDownscales, type CountedFromByName, type LastDownscale } from '../mintime.ts';
import type { ZoneInfo } from './zonetracker.ts';
import {
  LAST_DOWNSCALE_ANNOTATION_KEY,
  POD_NAME_LABEL_KEY,
  PREPARE_DOWNSCALE_LABEL_KEY,
  PREPARE_DOWNSCALE_LABEL_VALUE,
  PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY,
  PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY,
  ROLLOUT_GROUP_LABEL,
} from '../../vocabulary/keys.ts';

/** rollout-operator's `-cluster-domain` default, trailing dot included (an absolute FQDN). */
export const DEFAULT_CLUSTER_DOMAIN = 'cluster.local.';

/** Where the last downscale of each StatefulSet is recorded. */
export type TrackerMode = 'annotation' | 'zone-tracker';

/** The replica change under review; every message names it. */
export interface Downscale {
  /** request.resource.resource, e.g. "statefulsets" (also for /scale). */
  resource: string;
  name: string;
  namespace: string;
  from: number;
  to: number;
}

export interface Allow {
  kind: 'allow';
  /** Shown to the client (AdmissionResponse.warnings). */
  warning?: string;
  /** AdmissionResponse.result.message. */
  message?: string;
}

export interface Deny {
  kind: 'deny';
  message: string;
}

/** An AdmissionDecision for a final outcome. */
export function toAdmissionDecision(outcome: Allow | Deny): AdmissionDecision {
  if (outcome.kind === 'deny') return { allowed: false, status: { message: outcome.message } };
  return {
    allowed: true,
    ...(outcome.warning !== undefined ? { warnings: [outcome.warning] } : {}),
    ...(outcome.message !== undefined ? { status: { message: outcome.message } } : {}),
  };
}

function prefix(d: Downscale): string {
  return `downscale of ${d.resource}/${d.name} in ${d.namespace} from ${d.from} to ${d.to} replicas`;
}

function deny(d: Downscale, because: string): Deny {
  return { kind: 'deny', message: `${prefix(d)} is not allowed because ${because}` };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function stringMap(value: unknown): Record<string, string> {
  if (!isRecord(value)) return {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
}

function labelsOf(obj: unknown): Record<string, string> {
  return isRecord(obj) && isRecord(obj.metadata) ? stringMap(obj.metadata.labels) : {};
}

function annotationsOf(obj: unknown): Record<string, string> {
  return isRecord(obj) && isRecord(obj.metadata) ? stringMap(obj.metadata.annotations) : {};
}

// ------------------------------------------------------------ a. firstChecks

/** Where the StatefulSet whose labels decide comes from. */
export type StatefulSetSource =
  /** A StatefulSet UPDATE: the old object, as it was before this change. */
  | { kind: 'old-object'; statefulSet: StatefulSet }
  /** A /scale UPDATE: the executor GETs the parent StatefulSet (a failure → lookupFailed). */
  | { kind: 'live-get'; namespace: string; name: string };

export type FirstChecksOutcome =
  Allow | { kind: 'resolve-statefulset'; downscale: Downscale; source: StatefulSetSource };

const GO_TYPE: Record<string, string> = { Deployment: '*v1.Deployment', ReplicaSet: '*v1.ReplicaSet' };

/**
 * Dry run, decoding and the replica change. Only a real downscale of a
 * StatefulSet (or of its /scale) goes on.
 */
export function firstChecks(request: AdmissionRequestV1): FirstChecksOutcome {
  // rollout-operator dereferences request.dryRun without a nil check (a panic when
  // the field is absent); absent means false here. A dry run has no side
  // effects: allowed before any check.
  if (request.dryRun === true) return { kind: 'allow' };

  const allowErr = (msg: string, err: string): Allow => ({ kind: 'allow', warning: `${msg}, err: ${err}` });
  const oldReplicas = replicasOf(request.oldObject);
  if ('error' in oldReplicas) return allowErr("can't decode old object, allowing the change", oldReplicas.error);
  const newReplicas = replicasOf(request.object);
  if ('error' in newReplicas) return allowErr("can't decode new object, allowing the change", newReplicas.error);

  const from = oldReplicas.replicas ?? undefined;
  const to = newReplicas.replicas ?? undefined;
  if (from === undefined && to === undefined) return { kind: 'allow' };
  // From or to an unset replicas count is not a downscale strictly speaking.
  if (from === undefined || to === undefined)
    return { kind: 'allow', warning: 'old/new replicas is nil, allowing the change' };
  if (from <= to) return { kind: 'allow' };

  const resource = request.resource.resource;
  const name = request.name ?? '';
  const namespace = request.namespace ?? '';
  const downscale: Downscale = { resource, name, namespace, from, to };
  if (oldReplicas.kind === 'StatefulSet') {
    return {
      kind: 'resolve-statefulset',
      downscale,
      source: { kind: 'old-object', statefulSet: request.oldObject as StatefulSet },
    };
  }
  if (oldReplicas.kind === 'Scale') {
    if (resource !== 'statefulsets') return lookupFailed(`unsupported resource ${resource}`);
    return { kind: 'resolve-statefulset', downscale, source: { kind: 'live-get', namespace, name } };
  }
  // A Deployment or ReplicaSet routed here by a wider webhook configuration.
  return lookupFailed(
    `unsupported type apps/v1, Kind=${oldReplicas.kind} (go type ${GO_TYPE[oldReplicas.kind] ?? oldReplicas.kind})`,
  );
}

/** The /scale parent is not a StatefulSet this webhook handles, or no longer exists: fail open. */
export function lookupFailed(err: string): Allow {
  return { kind: 'allow', warning: `${err}, allowing the change` };
}

/**
 * The /scale parent exists but could not be read (throttled, timed out, an
 * API error): fail closed. rollout-operator allows here, which downscales
 * without preparing the leaving pods whenever its client is saturated.
 */
export function parentUnreadable(downscale: Downscale, err: string): Deny {
  return deny(downscale, `the StatefulSet could not be read to check ${PREPARE_DOWNSCALE_LABEL_KEY} (${err}); retry`);
}

// ---------------------------------------------------------------- b. stsInfo

export interface PrepareInfo {
  port: string;
  path: string;
  /** '' when the StatefulSet has no rollout-group label: no group checks. */
  rolloutGroup: string;
  serviceName: string;
}

export type StsInfoOutcome =
  Allow | Deny | { kind: 'proceed'; downscale: Downscale; info: PrepareInfo; next: 'group-checks' | 'prepare-pods' };

/** What rollout-operator reads from the StatefulSet (getStatefulSetPrepareInfo). */
export function readPrepareInfo(statefulSet: StatefulSet): PrepareInfo & { prepareDownscale: boolean } {
  const labels = labelsOf(statefulSet);
  const annotations = annotationsOf(statefulSet);
  const spec: unknown = (statefulSet as { spec?: unknown }).spec;
  const serviceName = isRecord(spec) && typeof spec.serviceName === 'string' ? spec.serviceName : '';
  return {
    prepareDownscale: labels[PREPARE_DOWNSCALE_LABEL_KEY] === PREPARE_DOWNSCALE_LABEL_VALUE,
    port: annotations[PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY] ?? '',
    path: annotations[PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY] ?? '',
    rolloutGroup: labels[ROLLOUT_GROUP_LABEL] ?? '',
    serviceName,
  };
}

/**
 * The StatefulSet's opt-in and configuration: not labelled → allow; a
 * missing port, path or serviceName → deny.
 */
export function stsInfo(statefulSet: StatefulSet, downscale: Downscale): StsInfoOutcome {
  const { prepareDownscale, ...info } = readPrepareInfo(statefulSet);
  if (!prepareDownscale) {
    // Issue #306: the opt-in set as an annotation is silently ignored by rollout-operator. Still allowed (rollout-operator's decision), but say why.
    if (annotationsOf(statefulSet)[PREPARE_DOWNSCALE_LABEL_KEY] === PREPARE_DOWNSCALE_LABEL_VALUE) {
      return {
        kind: 'allow',
        warning: `${PREPARE_DOWNSCALE_LABEL_KEY} is set as an annotation, but it must be a label: pods were not prepared for shutdown`,
      };
    }
    return { kind: 'allow' };
  }
  // A mutating webhook sees the count before validation: a negative one would have every pod prepared for nothing.
  if (downscale.to < 0)
    return deny(downscale, `the new replica count ${downscale.to} is negative: no pod was prepared for shutdown.`);
  if (info.port === '')
    return deny(downscale, `the ${PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY} annotation is not set or empty.`);
  if (info.path === '')
    return deny(downscale, `the ${PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY} annotation is not set or empty.`);
  if (info.serviceName === '') return deny(downscale, 'the serviceName is not set or empty.');
  return { kind: 'proceed', downscale, info, next: info.rolloutGroup !== '' ? 'group-checks' : 'prepare-pods' };
}

// ----------------------------------------------------- executor failures

/** Why the executor could not complete a group step; each fails closed. */
export type ExecutorFailure =
  | { kind: 'list-statefulsets' }
  | { kind: 'load-zones' }
  | { kind: 'list-pods' }
  /** Another downscale of this rollout group holds its lock, in this replica or another. */
  | { kind: 'group-locked'; statefulSet: string }
  /** The group's lock (a Lease) could not be read or written. */
  | { kind: 'lock-failed'; error: string }
  /** This replica could not renew the group's lock in time: another may take it, so it does not act. */
  | { kind: 'lock-lost' };

export function executorFailed(downscale: Downscale, failure: ExecutorFailure): Deny {
  switch (failure.kind) {
    case 'list-statefulsets':
      return deny(downscale, 'finding other statefulsets failed.');
    case 'load-zones':
      return deny(downscale, 'loading zones failed.');
    case 'list-pods':
      return deny(downscale, 'an error occurred while checking whether StatefulSets have non-updated replicas');
    case 'group-locked':
      return deny(downscale, `statefulset ${failure.statefulSet} is already in process of updating replicas`);
    case 'lock-failed':
      return deny(downscale, `taking the rollout group's lock failed: ${failure.error}`);
    case 'lock-lost':
      return deny(
        downscale,
        "the rollout group's lock could not be renewed in time, so another replica may hold it now; retry",
      );
  }
}

/** The label selector (`rollout-group=<g>`) listing the group's StatefulSets. */
export function groupSelector(rolloutGroup: string): string {
  return `${ROLLOUT_GROUP_LABEL}=${rolloutGroup}`;
}

/** The label selector listing a StatefulSet's pods: `name=<spec.template.metadata.labels.name>`. */
export function podSelector(statefulSet: StatefulSet): string {
  return `${POD_NAME_LABEL_KEY}=${statefulSet.spec?.template?.metadata?.labels?.[POD_NAME_LABEL_KEY] ?? ''}`;
}

// ------------------------------------------------------------ c. groupChecks

/** Tracker mode: each zone's `lastDownscaled` (an empty value is a parse error, as in Go). */
export function lastDownscalesFromZones(zones: ReadonlyMap<string, ZoneInfo>): Map<string, LastDownscale> {
  const out = new Map<string, LastDownscale>();
  for (const [name, info] of zones) {
    const parsed = parseRfc3339(info.lastDownscaled);
    out.set(
      name,
      typeof parsed === 'number' ? parsed : { error: `can't parse last downscale time of ${name}: ${parsed.error}` },
    );
  }
  return out;
}

export interface GroupChecksInput {
  downscale: Downscale;
  mode: TrackerMode;
  /** The StatefulSet being downscaled (excluded from the checks). */
  self: string;
  /** The rollout group's StatefulSets, in list order; `self` may be among them. */
  others: readonly StatefulSet[];
  /** Pods of each other StatefulSet (listed by podSelector); missing = none. */
  othersPods: ReadonlyMap<string, readonly Pod[]>;
  /** From lastDownscalesFromAnnotations or lastDownscalesFromZones. */
  lastDownscales: ReadonlyMap<string, LastDownscale>;
  /** Wall clock. */
  now: number;
  /** Steps of that clock since this process first saw a last downscale (src/downscale/clocksteps.ts). */
  countedFrom?: CountedFromByName;
}

/** Why a group check denied, for logs and tests; `deny.message` is what the client sees. */
export type GroupBlock =
  | { reason: 'parse-error'; statefulSet: string; error: string }
  | { reason: 'min-time'; statefulSet: string; lastDownscale: number; minTime: number }
  | { reason: 'rollout-in-progress'; statefulSet: string; nonUpdated: number; nonReady: number };

export type GroupChecksOutcome = { kind: 'ok' } | (Deny & { block: GroupBlock });

/**
 * The min-time check, then the rollout-in-progress check, over the other
 * StatefulSets of the group in list order; the first hit denies.
 */
export function groupChecks(input: GroupChecksInput): GroupChecksOutcome {
  const { downscale, mode, self, others, othersPods, lastDownscales, now, countedFrom } = input;
  const parseFailed = (statefulSet: string, error: string): GroupChecksOutcome => ({
    ...deny(
      downscale,
      mode === 'annotation'
        ? 'parsing downscale annotations failed.'
        : // The doubled word is rollout-operator's.
          'parsing parsing downscale timestamps from the zone ConfigMap failed.',
    ),
    block: { reason: 'parse-error', statefulSet, error },
  });

  // Min-time: the one rule shared with the replica coordinator (src/downscale/mintime.ts).
  const minTime = checkMinTimeBetweenZoneDownscales({ self, group: others, lastDownscales, now, countedFrom });
  if ('error' in minTime) return parseFailed(minTime.statefulSet, minTime.error);
  if (!minTime.elapsed) {
    return {
      ...deny(downscale, minTime.reason),
      block: {
        reason: 'min-time',
        statefulSet: minTime.blockedBy,
        lastDownscale: minTime.lastDownscale,
        minTime: minTime.minTime,
      },
    };
  }

  // Rollout in progress: ready = the other StatefulSet's pods that are
  // running and ready (podView's test: phase Running, every container ready
  // and running, not terminating). It blocks unless status.replicas and
  // status.updatedReplicas both equal ready. As rollout-operator reports it:
  // N non-updated = status.replicas - status.updatedReplicas (from the
  // status alone) and M non-ready = status.replicas - ready (from the pods),
  // so a block can read "0 non-updated and 0 non-ready" when more pods are
  // ready than status.replicas counts (e.g. a stale status).
  for (const sts of others) {
    const name = sts.metadata?.name ?? '';
    if (name === self) continue;
    const ready = (othersPods.get(name) ?? []).filter((pod) => podView(pod).ready).length;
    const replicas = sts.status?.replicas ?? 0;
    const updated = sts.status?.updatedReplicas ?? 0;
    if (replicas !== ready || updated !== ready) {
      const nonUpdated = replicas - updated;
      const nonReady = replicas - ready;
      return {
        ...deny(
          downscale,
          `statefulset ${name} has ${nonUpdated} non-updated replicas and ${nonReady} non-ready replicas`,
        ),
        block: { reason: 'rollout-in-progress', statefulSet: name, nonUpdated, nonReady },
      };
    }
  }
  return { kind: 'ok' };
}

// -------------------------------------------------------------- d. endpoints

export interface Endpoint {
  url: string;
  /** Pod ordinal. */
  index: number;
  pod: string;
}

export interface EndpointsInput {
  /** StatefulSet name. */
  sts: string;
  namespace: string;
  serviceName: string;
  port: string;
  path: string;
  /** Defaults to DEFAULT_CLUSTER_DOMAIN. */
  clusterDomain?: string;
  from: number;
  to: number;
  /** Names of the StatefulSet's pods that exist. */
  existingPods: ReadonlySet<string>;
}

/**
 * The URL path of grafana.com/prepare-downscale-http-path, as
 * rollout-operator v0.39 builds it (#468): a leading "/" added only when
 * missing, then Go's path.Clean. Before, v0.38 joined with "/" (so
 * "/prepare" became "//prepare", which servers answer 301 and Go's client
 * replays as a GET), and Stateward only dropped leading slashes.
 */
export function prepareDownscalePath(annotation: string): string {
  return cleanPath(annotation.startsWith('/') ? annotation : `/${annotation}`);
}

/** Missing pods endpoints() names (for a log line); a range may span 2^31 ordinals. */
const MAX_SKIPPED_LISTED = 100;

/**
 * The prepare-shutdown URL of each pod going away, ordinals from-1 down to
 * to: `http://<sts>-<i>.<serviceName>.<ns>.svc.<clusterDomain>:<port>/<path>`.
 *
 * Two fixes over rollout-operator:
 * - Pods that do not exist are skipped (issue #72: downscaling while pods
 *   were still being created failed on DNS for pods that never existed).
 *   A pod that does not exist has nothing to prepare. `skipped` names the
 *   first 100 of them (highest ordinals first).
 * - The path is joined as rollout-operator v0.39 joins it (#468):
 *   prepareDownscalePath.
 */
export function endpoints(input: EndpointsInput): { call: Endpoint[]; skipped: string[] } {
  const domain = input.clusterDomain ?? DEFAULT_CLUSTER_DOMAIN;
  const path = prepareDownscalePath(input.path);
  // The replica counts may be anything in int32 (the new one is not validated
  // yet when a mutating webhook sees it, so it may be negative): the work
  // follows the pods that exist, never the length of the range.
  const low = Math.max(input.to, 0);
  const prefix = `${input.sts}-`;
  const call: Endpoint[] = [];
  for (const pod of input.existingPods) {
    const ordinal = pod.slice(prefix.length);
    if (!pod.startsWith(prefix) || !/^(0|[1-9][0-9]*)$/.test(ordinal)) continue;
    const index = Number(ordinal);
    if (index >= low && index < input.from)
      call.push({
        url: `http://${pod}.${input.serviceName}.${input.namespace}.svc.${domain}:${input.port}${path}`,
        index,
        pod,
      });
  }
  call.sort((a, b) => b.index - a.index);
  // For the log: the missing pods, highest first, at most MAX_SKIPPED_LISTED of them.
  const skipped: string[] = [];
  for (let index = input.from - 1; index >= low && skipped.length < MAX_SKIPPED_LISTED; index--) {
    if (!input.existingPods.has(`${prefix}${index}`)) skipped.push(`${prefix}${index}`);
  }
  return { call, skipped };
}

// ----------------------------------------------------- e. afterPrepare / afterRecord

/** The outcome of one POST (or DELETE): an HTTP status, or a transport error. */
export type CallResult = { url: string; status: number } | { url: string; error: string };

/** Any 2xx is a success (204 included). */
export function callSucceeded(result: CallResult): boolean {
  return 'status' in result && result.status >= 200 && result.status < 300;
}

export interface UndoAndDeny extends Deny {
  /** Send DELETE to every one of these (errors ignored), then deny. */
  undo: Endpoint[];
}

/**
 * After the POSTs: every endpoint answered 2xx → record the downscale;
 * otherwise (a failure, or an endpoint the executor gave up on after
 * failing fast) → DELETE all endpoints and deny.
 */
export function afterPrepare(input: {
  downscale: Downscale;
  call: readonly Endpoint[];
  results: readonly CallResult[];
}): UndoAndDeny | { kind: 'record' } {
  const succeeded = new Set(input.results.filter(callSucceeded).map((r) => r.url));
  if (input.call.every((ep) => succeeded.has(ep.url))) return { kind: 'record' };
  return { ...deny(input.downscale, 'one or more pods failed to prepare for shutdown.'), undo: [...input.call] };
}

/**
 * After recording the downscale (annotation patch or ConfigMap update):
 * a failure → DELETE all endpoints and deny; success → allow.
 */
export function afterRecord(input: {
  downscale: Downscale;
  mode: TrackerMode;
  call: readonly Endpoint[];
  recordError?: string;
}): UndoAndDeny | Allow {
  if (input.recordError !== undefined) {
    const because =
      input.mode === 'annotation'
        ? 'adding an annotation to the statefulset failed.'
        : 'setting downscale timestamp in the zone ConfigMap failed.';
    return { ...deny(input.downscale, because), undo: [...input.call] };
  }
  return {
    kind: 'allow',
    message: `${prefix(input.downscale)} is allowed -- all pods successfully prepared for shutdown.`,
  };
}

/** Annotation mode: the strategic-merge patch recording the downscale on the StatefulSet. */
export function lastDownscaleAnnotationPatch(now: number): { metadata: { annotations: Record<string, string> } } {
  return { metadata: { annotations: { [LAST_DOWNSCALE_ANNOTATION_KEY]: formatRfc3339(now) } } };
}
