// Config-change restarts, pure decision core: when a Deployment, StatefulSet
// or DaemonSet must be restarted because a ConfigMap or Secret it uses has
// changed. Drop-in compatible with xing's kubernetes-deployment-restart-
// controller: the same opt-in annotation, the same applied-checksums
// annotation (byte for byte: a JSON object with sorted keys), the same
// template annotation as the restart trigger, and the same decision rules.
// No I/O; time is passed in as epoch milliseconds. Which configs a workload
// references and their checksums come from references.ts and hash.ts; here
// they are plain inputs: config key ("configmap/<ns>/<name>",
// "secret/<ns>/<name>") → checksum, or 'missing' when the object does not
// exist (not created yet, deleted, or an optional reference).
//
// DECISION RULES (xing's, per referenced config; one decision per workload):
//   R1  The applied annotation holds a checksum for the config and the current
//       one differs: RESTART.
//   R2  The annotation has no entry for the config (the workload was just
//       opted in or created, or the reference was just added): record the
//       checksum, NO restart. A template change that adds a reference rolls
//       the pods anyway, and opting in must not restart anything.
//   R3  Exception to R2: the config changed again after the controller first
//       saw it referenced, before its checksum was saved: RESTART (the pods
//       of that rollout may have started with the earlier content). xing
//       detects this with a per-config observation counter (> 1); here the
//       pending burst remembers the first checksum seen for each reference
//       (PendingChange.firstSeen) and R3 fires when the current one differs.
//       That also covers xing's own TODO (an existing config, newly
//       referenced, changed once) and avoids its spurious restart (a config
//       changed twice BEFORE the workload referenced it).
//   R4  A config the workload no longer references is dropped from the
//       annotation, NO restart.
//   R5  A referenced config that is missing never restarts and never fails:
//       if the annotation has a checksum for it, that checksum is KEPT (so a
//       delete-and-recreate with different content is R1, a restart, and one
//       with the same content is nothing); if not, nothing is recorded (when
//       it appears it is a new reference, R2, as in xing: the pods were
//       waiting for it and pick it up when they start).
//   R6  A workload not opted in (`com.xing.deployment-restart` is not exactly
//       `enabled`) is left alone: no restart, no annotation write, and the
//       stale checksum annotation stays (as xing).
//   All changed checksums and the restart go out in ONE merge patch.
//
// DEBOUNCE. xing queues a change for RESTART_GRACE_PERIOD (5 s) from the
// FIRST observation and does not extend it, so a pipeline that updates two
// configs 6 s apart restarts twice (its README's caveat 1). Here a burst is
// due at min(last change + gracePeriodMs, first change + maxWaitMs): each
// change slides the window, but a config that keeps changing still rolls by
// first + maxWaitMs. maxWaitMs = gracePeriodMs gives xing's fixed window.
// The debounce's times (`now`, a burst's firstAt/lastAt, `until`) are on the
// executor's monotonic clock; the restart trigger written, and the times in
// reasons, are wall clock (`wallNow`).
//
// IDEMPOTENCE. The only memory that matters is the annotation on the workload
// (the pending burst is an in-memory refinement for R3 and the debounce):
// after a patch, deciding again from the patched object decides nothing.
// That is what makes a restart of the operator or a leader failover restart
// nothing that was already applied, while a change made while no leader ran
// is still a restart (R1 against the stored checksum).
import type { KubeObject, Pod } from '../runtime/kube/types.ts';
import { podView } from '../vocabulary/pods.ts';
import {
  ROLLOUT_GROUP_LABEL,
  XING_CHECKSUMS_ANNOTATION as APPLIED_CHECKSUMS_ANNOTATION_KEY,
  XING_ENABLED_ANNOTATION as RESTART_ENABLED_ANNOTATION_KEY,
  XING_ENABLED_VALUE as RESTART_ENABLED_VALUE,
  XING_TIMESTAMP_ANNOTATION as RESTART_TIMESTAMP_ANNOTATION_KEY,
} from '../vocabulary/keys.ts';

// ------------------------------------------------------------ annotations

// xing's keys, defined once in references.ts: the opt-in (metadata
// annotation, only the exact value `enabled`), the applied checksums (JSON,
// config key → checksum the running pods started with) and the restart
// trigger in spec.template.metadata.annotations.
/** A current checksum for a referenced config that does not exist. */
export const MISSING = 'missing';

export type WorkloadKind = 'Deployment' | 'StatefulSet' | 'DaemonSet';

export interface WorkloadRef {
  kind: WorkloadKind;
  namespace: string;
  name: string;
}

/** xing's full name of a workload: `deployment/<ns>/<name>` (lower-case kind). */
export function workloadKey(ref: WorkloadRef): string {
  return `${ref.kind.toLowerCase()}/${ref.namespace}/${ref.name}`;
}

/** Whether the workload's annotations opt it in (exactly `enabled`). */
export function isOptedIn(annotations: Readonly<Record<string, string>> | undefined): boolean {
  return annotations?.[RESTART_ENABLED_ANNOTATION_KEY] === RESTART_ENABLED_VALUE;
}

// ------------------------------------------------------------ checksum maps

/** Config key → checksum. A plain object or a Map. */
export type ChecksumsInput = ReadonlyMap<string, string> | Readonly<Record<string, string>>;
/** Config key → current checksum, or 'missing'. A plain object or a Map. */
export type CurrentChecksumsInput = ChecksumsInput;

function toMap(input: ChecksumsInput | undefined): Map<string, string> {
  if (input === undefined) return new Map();
  if (input instanceof Map) return new Map(input as ReadonlyMap<string, string>);
  return new Map(Object.entries(input as Readonly<Record<string, string>>));
}

const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export interface ParsedChecksums {
  checksums: Map<string, string>;
  /** Set when the annotation was not a JSON object of strings; what was usable is in `checksums`. */
  warning?: string;
}

/**
 * The applied-checksums annotation as a map. Never throws. An absent or empty
 * annotation is an empty map. Malformed JSON, or JSON that is not an object,
 * is an empty map plus a warning (as xing, which logs and assumes an empty
 * map); entries whose value is not a string are dropped with a warning and
 * the rest kept.
 *
 * Why an empty map is the SAFE reading: every reference then looks newly
 * added (R2), so the next decision rewrites a well-formed annotation and
 * restarts nothing. The cost is at most one missed restart for a change made
 * while the annotation was unreadable; the alternative, treating every config
 * as changed, would restart every workload with a hand-edited annotation.
 */
export function parseAppliedChecksums(annotation?: string): ParsedChecksums {
  const checksums = new Map<string, string>();
  if (annotation === undefined || annotation.trim() === '') return { checksums };
  let parsed: unknown;
  try {
    parsed = JSON.parse(annotation);
  } catch (e) {
    return {
      checksums,
      warning: `${APPLIED_CHECKSUMS_ANNOTATION_KEY} is not valid JSON (${(e as Error).message}); treating it as empty`,
    };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { checksums, warning: `${APPLIED_CHECKSUMS_ANNOTATION_KEY} is not a JSON object; treating it as empty` };
  }
  const dropped: string[] = [];
  for (const [key, value] of Object.entries(parsed)) {
    if (typeof value === 'string') checksums.set(key, value);
    else dropped.push(key);
  }
  if (dropped.length > 0) {
    return {
      checksums,
      warning: `${APPLIED_CHECKSUMS_ANNOTATION_KEY} has non-string checksums for ${dropped.sort(byKey).join(', ')}; ignoring them`,
    };
  }
  return { checksums };
}

/** The annotation value: compact JSON with keys sorted (what Go's json.Marshal of xing's map writes). */
export function formatAppliedChecksums(checksums: ChecksumsInput): string {
  const entries = [...toMap(checksums)].sort(([a], [b]) => byKey(a, b));
  return JSON.stringify(Object.fromEntries(entries));
}

function sameChecksums(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}

/** The applied checksums of a workload object (see parseAppliedChecksums). */
export function appliedChecksumsOf(workload: KubeObject): ParsedChecksums {
  return parseAppliedChecksums(workload.metadata?.annotations?.[APPLIED_CHECKSUMS_ANNOTATION_KEY]);
}

/** The current restart trigger value in the workload's pod template, if any. */
export function restartTimestampOf(workload: {
  spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
}): string | undefined {
  return workload.spec?.template?.metadata?.annotations?.[RESTART_TIMESTAMP_ANNOTATION_KEY];
}

// ------------------------------------------------------------ settings

export interface RestartSettings {
  /** Quiet time after the latest change of a burst before acting (xing's RESTART_GRACE_PERIOD, 5 s). */
  gracePeriodMs: number;
  /** Longest a burst waits from its first change; values below gracePeriodMs count as gracePeriodMs. */
  maxWaitMs: number;
}

export const DEFAULT_GRACE_PERIOD_MS = 5_000;
export const DEFAULT_MAX_WAIT_MS = 60_000;
/**
 * Complete settings: a missing, negative or non-finite value takes its
 * default (validating flags is the flag layer's job; this never throws), and
 * maxWaitMs is raised to gracePeriodMs when below it.
 */
export function resolveRestartSettings(settings?: Partial<RestartSettings>): RestartSettings {
  const pick = (v: number | undefined, d: number) => (v !== undefined && Number.isFinite(v) && v >= 0 ? v : d);
  const gracePeriodMs = pick(settings?.gracePeriodMs, DEFAULT_GRACE_PERIOD_MS);
  const maxWaitMs = Math.max(gracePeriodMs, pick(settings?.maxWaitMs, DEFAULT_MAX_WAIT_MS));
  return { gracePeriodMs, maxWaitMs };
}

// ------------------------------------------------------------ debounce

/** One workload's burst of changes not acted on yet. Immutable. */
export interface PendingChange {
  /** When the burst's first change was observed. */
  readonly firstAt: number;
  /** When its latest change was observed. */
  readonly lastAt: number;
  /** How many changes it holds (for logs and the changes-waiting metric). */
  readonly observations: number;
  /**
   * For each referenced config, the first checksum seen during the burst
   * ('missing' is never recorded: a config's first sighting is when it
   * exists). R3 compares a reference not yet in the annotation against it.
   */
  readonly firstSeen: ReadonlyMap<string, string>;
}

function withFirstSeen(
  firstSeen: ReadonlyMap<string, string>,
  current: CurrentChecksumsInput | undefined,
): ReadonlyMap<string, string> {
  if (current === undefined) return firstSeen;
  let out: Map<string, string> | undefined;
  for (const [key, value] of toMap(current)) {
    if (value === MISSING || firstSeen.has(key)) continue;
    out ??= new Map(firstSeen);
    out.set(key, value);
  }
  return out ?? firstSeen;
}

/**
 * A change relevant to the workload was observed at `now`: a referenced
 * config's checksum changed or it appeared, or the workload's references or
 * checksum annotation changed. Starts a burst or extends it. Pass the
 * workload's current checksums (after the change) so R3 can tell a config
 * that changed again from one merely added; without them R3 cannot fire for
 * that observation.
 */
export function observeChange(
  state: PendingChange | undefined,
  now: number,
  current?: CurrentChecksumsInput,
): PendingChange {
  if (state === undefined)
    return { firstAt: now, lastAt: now, observations: 1, firstSeen: withFirstSeen(new Map(), current) };
  return {
    firstAt: state.firstAt,
    // A clock that steps back never shortens the window.
    lastAt: Math.max(state.lastAt, now),
    observations: state.observations + 1,
    firstSeen: withFirstSeen(state.firstSeen, current),
  };
}

/** When the burst is acted on: min(last + grace, first + maxWait). */
export function dueAt(state: PendingChange, settings?: Partial<RestartSettings>): number {
  const s = resolveRestartSettings(settings);
  return Math.min(state.lastAt + s.gracePeriodMs, state.firstAt + s.maxWaitMs);
}

/** Whether the burst is due at `now` (≥, as xing's "age ≥ grace period"). */
export function due(state: PendingChange, now: number, settings?: Partial<RestartSettings>): boolean {
  return now >= dueAt(state, settings);
}

// ------------------------------------------------------------ restart timestamp

/**
 * 'rfc3339': UTC with milliseconds (2024-01-02T12:00:00.000Z), the default.
 * 'go-stamp': xing's exact format, Go's time.Stamp ("Jan _2 15:04:05"), here
 * in UTC; it has whole seconds and no year.
 * Nothing reads the value (any change to the template rolls the pods), so the
 * format does not affect compatibility; it is for people and for tooling that
 * parses it.
 */
export type TimestampFormat = 'rfc3339' | 'go-stamp';

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'] as const;
const two = (n: number) => String(n).padStart(2, '0');

export function formatRestartTimestamp(now: number, format: TimestampFormat = 'rfc3339'): string {
  const d = new Date(now);
  if (format === 'rfc3339') return d.toISOString();
  return `${MONTHS[d.getUTCMonth()]} ${String(d.getUTCDate()).padStart(2, ' ')} ${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
}

/**
 * The trigger value for a restart at `now`, guaranteed to differ from the
 * template's current one: an unchanged value would change nothing and roll
 * nothing (xing's seconds-resolution stamp does exactly that for two restarts
 * within a second). It moves forward by the format's resolution until it
 * differs.
 */
export function nextRestartTimestamp(now: number, previous?: string, format: TimestampFormat = 'rfc3339'): string {
  const step = format === 'rfc3339' ? 1 : 1000;
  let t = now;
  let value = formatRestartTimestamp(t, format);
  while (value === previous) {
    t += step;
    value = formatRestartTimestamp(t, format);
  }
  return value;
}

// ------------------------------------------------------------ patches

/** A JSON merge patch (application/merge-patch+json) for a Deployment, StatefulSet or DaemonSet. */
export interface WorkloadPatch {
  metadata: { annotations: Record<string, string>; resourceVersion?: string };
  spec?: { template: { metadata: { annotations: Record<string, string> } } };
}

export interface PatchOptions {
  /**
   * The resourceVersion the decision was made from. In a merge patch it is a
   * precondition: the API server answers 409 if the workload changed since,
   * and the caller decides again instead of acting on a stale view (two
   * replicas briefly both leading cannot both restart).
   */
  resourceVersion?: string;
}

/** Records the applied checksums, no restart. */
export function annotationPatch(input: { applied: ChecksumsInput } & PatchOptions): WorkloadPatch {
  const metadata: WorkloadPatch['metadata'] = {
    annotations: { [APPLIED_CHECKSUMS_ANNOTATION_KEY]: formatAppliedChecksums(input.applied) },
  };
  if (input.resourceVersion !== undefined) metadata.resourceVersion = input.resourceVersion;
  return { metadata };
}

/**
 * Records the applied checksums AND restarts, in one patch: the template
 * trigger annotation gets a new value (nextRestartTimestamp). One patch means
 * a restart is never done without its checksums being recorded (which would
 * restart again after a failover) nor recorded without being done.
 */
export function restartPatch(
  input: { applied: ChecksumsInput; now: number; previousTimestamp?: string; format?: TimestampFormat } & PatchOptions,
): WorkloadPatch {
  return {
    ...annotationPatch(input),
    spec: {
      template: {
        metadata: {
          annotations: {
            [RESTART_TIMESTAMP_ANNOTATION_KEY]: nextRestartTimestamp(input.now, input.previousTimestamp, input.format),
          },
        },
      },
    },
  };
}

// ------------------------------------------------------------ the decision

export type ConfigChangeKind =
  /** R1: applied checksum differs. */
  | 'changed'
  /** R3: not in the annotation yet, and changed since first seen in this burst. */
  | 'changed-again'
  /** R2: not in the annotation yet; recorded. */
  | 'added'
  /** R4: no longer referenced; dropped from the annotation. */
  | 'removed'
  /** The applied checksum is xing's for the same content (legacyCurrent): rewritten in our scheme, no restart. */
  | 'migrated';

export interface ConfigChange {
  key: string;
  change: ConfigChangeKind;
  /** The applied (R1, R4) or first-seen (R3) checksum. */
  from?: string;
  /** The checksum recorded now (R1, R2, R3). */
  to?: string;
}

export interface RestartInput {
  workload: WorkloadRef;
  /** isOptedIn(metadata.annotations). */
  optedIn: boolean;
  /** parseAppliedChecksums(annotation).checksums. */
  applied: ChecksumsInput;
  /** Every config the workload references now: key → checksum, or 'missing'. */
  current: CurrentChecksumsInput;
  /** The workload's burst, if changes were observed since its last decision that acted. */
  pending?: PendingChange;
  /** For the debounce, on the clock `pending`'s times are on (the executor's monotonic clock). */
  now: number;
  /** The wall clock at `now` (epoch ms): the restart trigger written, and times in reasons. Default: `now`. */
  wallNow?: number;
  settings?: Partial<RestartSettings>;
  /**
   * Migration from xing: key → xing's checksum of the config's CURRENT
   * content (hash.ts xingLegacyChecksum), for the keys whose applied checksum
   * is in xing's format (hash.ts checksumScheme). An applied checksum equal to
   * it is the same content: the annotation is rewritten in our scheme without
   * a restart. Without it, taking over from xing would restart every workload
   * once (every stored checksum would differ from ours).
   */
  legacyCurrent?: ChecksumsInput;
  /** For the patch: the template's current trigger value (restartTimestampOf). */
  previousTimestamp?: string;
  timestampFormat?: TimestampFormat;
  /** For the patch: see PatchOptions. */
  resourceVersion?: string;
}

interface Common {
  workload: WorkloadRef;
  reason: string;
  /** Referenced configs that do not exist now (R5); their checksums, if any, are kept. */
  missing: string[];
}

export type RestartDecision =
  /** Nothing to write; drop any pending burst. */
  | (Common & { action: 'nothing'; pending: undefined })
  /** Something is to be written, but the burst is not due: keep `pending` and decide again at `until`. */
  | (Common & { action: 'wait-until'; until: number; pending: PendingChange; changes: ConfigChange[] })
  /** R2/R4/migration only: patch the annotation (`patch`), no restart; then drop the burst. */
  | (Common & {
      action: 'update-annotation-only';
      applied: Map<string, string>;
      annotation: string;
      changes: ConfigChange[];
      patch: WorkloadPatch;
      pending: undefined;
    })
  /** R1/R3: patch the annotation and the trigger together (`patch`); then drop the burst. */
  | (Common & {
      action: 'restart';
      applied: Map<string, string>;
      annotation: string;
      changes: ConfigChange[];
      restartedBy: string[];
      patch: WorkloadPatch;
      pending: undefined;
    });

interface Evaluation {
  target: Map<string, string>;
  changes: ConfigChange[];
  restartedBy: string[];
  missing: string[];
}

/** The rules R1–R5 for one workload (R6 is decideRestart's first check). */
function evaluate(
  applied: ReadonlyMap<string, string>,
  current: ReadonlyMap<string, string>,
  firstSeen: ReadonlyMap<string, string> | undefined,
  legacy: ReadonlyMap<string, string>,
): Evaluation {
  const target = new Map<string, string>();
  const changes: ConfigChange[] = [];
  const restartedBy: string[] = [];
  const missing: string[] = [];
  for (const key of [...current.keys()].sort(byKey)) {
    const now = current.get(key)!;
    const before = applied.get(key);
    if (now === MISSING) {
      missing.push(key);
      if (before !== undefined) target.set(key, before); // R5: keep
      continue;
    }
    target.set(key, now);
    if (before !== undefined) {
      if (before !== now && before === legacy.get(key)) {
        changes.push({ key, change: 'migrated', from: before, to: now });
      } else if (before !== now) {
        changes.push({ key, change: 'changed', from: before, to: now }); // R1
        restartedBy.push(key);
      }
      continue;
    }
    const seen = firstSeen?.get(key);
    if (seen !== undefined && seen !== now) {
      changes.push({ key, change: 'changed-again', from: seen, to: now }); // R3
      restartedBy.push(key);
    } else {
      changes.push({ key, change: 'added', to: now }); // R2
    }
  }
  for (const key of [...applied.keys()].sort(byKey)) {
    if (!current.has(key)) changes.push({ key, change: 'removed', from: applied.get(key)! }); // R4
  }
  return { target, changes, restartedBy, missing };
}

function summarize(changes: readonly ConfigChange[]): string {
  const part = (kind: ConfigChangeKind, text: string) => {
    const keys = changes.filter((c) => c.change === kind).map((c) => c.key);
    return keys.length > 0 ? [`${text} ${keys.join(', ')}`] : [];
  };
  return [
    ...part('changed', 'changed:'),
    ...part('changed-again', 'changed again before its checksum was recorded:'),
    ...part('added', 'newly referenced:'),
    ...part('removed', 'no longer referenced:'),
    ...part('migrated', 'xing checksum rewritten:'),
  ].join('; ');
}

/**
 * What to do for one workload now (R1–R6 and the debounce; see the top of
 * this file). Never throws.
 *
 * A workload that needs a write but has no pending burst (a resync, the first
 * sight after an operator restart or failover) starts one at `now`: every
 * write waits out the grace period, as every xing change does. With
 * gracePeriodMs 0 it acts at once.
 *
 * After acting, the caller drops the burst (`pending` is undefined); deciding
 * again from the patched workload then returns 'nothing'.
 */
export function decideRestart(input: RestartInput): RestartDecision {
  const { workload, now } = input;
  const wallNow = input.wallNow ?? now;
  const name = workloadKey(workload);
  const current = toMap(input.current);
  if (!input.optedIn) {
    return {
      action: 'nothing',
      workload,
      pending: undefined,
      missing: [],
      reason: `${name} is not opted in (${RESTART_ENABLED_ANNOTATION_KEY}: ${RESTART_ENABLED_VALUE})`,
    };
  }
  const applied = toMap(input.applied);
  const { target, changes, restartedBy, missing } = evaluate(
    applied,
    current,
    input.pending?.firstSeen,
    toMap(input.legacyCurrent),
  );
  const missingNote = missing.length > 0 ? ` (not found, left as recorded: ${missing.join(', ')})` : '';

  if (restartedBy.length === 0 && sameChecksums(target, applied)) {
    return {
      action: 'nothing',
      workload,
      pending: undefined,
      missing,
      reason: `${name} has every referenced config applied${missingNote}`,
    };
  }

  const settings = resolveRestartSettings(input.settings);
  const burst =
    input.pending === undefined
      ? observeChange(undefined, now, current)
      : { ...input.pending, firstSeen: withFirstSeen(input.pending.firstSeen, current) };
  if (!due(burst, now, settings)) {
    const until = dueAt(burst, settings);
    return {
      action: 'wait-until',
      workload,
      until,
      pending: burst,
      changes,
      missing,
      reason: `${name}: ${summarize(changes)}; waiting until ${new Date(wallNow + (until - now)).toISOString()} for more changes${missingNote}`,
    };
  }

  const annotation = formatAppliedChecksums(target);
  const patchOptions = input.resourceVersion === undefined ? {} : { resourceVersion: input.resourceVersion };
  if (restartedBy.length > 0) {
    return {
      action: 'restart',
      workload,
      applied: target,
      annotation,
      changes,
      restartedBy,
      missing,
      pending: undefined,
      patch: restartPatch({
        applied: target,
        now: wallNow,
        previousTimestamp: input.previousTimestamp,
        format: input.timestampFormat,
        ...patchOptions,
      }),
      reason: `restarting ${name}: ${summarize(changes)}${missingNote}`,
    };
  }
  return {
    action: 'update-annotation-only',
    workload,
    applied: target,
    annotation,
    changes,
    missing,
    pending: undefined,
    patch: annotationPatch({ applied: target, ...patchOptions }),
    reason: `recording checksums of ${name} without a restart: ${summarize(changes)}${missingNote}`,
  };
}

// ------------------------------------------------------------ non-rolling workloads

/**
 * How a template change reaches the pods:
 * - 'rolling': Kubernetes rolls them (a Deployment, or a StatefulSet or
 *   DaemonSet with RollingUpdate, the default).
 * - 'rollout-group': an OnDelete StatefulSet labelled `rollout-group`: the
 *   rollout capability replaces its pods zone by zone, so the restart flows
 *   into the coordinated rollout.
 * - 'standalone-ondelete': OnDelete with nobody replacing pods (a StatefulSet
 *   outside a rollout group, or any OnDelete DaemonSet; rollout groups are
 *   StatefulSets only). Nothing restarts until pods are deleted: report it
 *   (onDeleteEvent) and, if enabled, evict outdated pods one at a time
 *   (nextOutdatedPod).
 */
export type RestartMode = 'rolling' | 'rollout-group' | 'standalone-ondelete';

/** The parts of a Deployment, StatefulSet or DaemonSet that restartMode reads. */
export type RestartTarget = KubeObject & { spec?: { updateStrategy?: { type?: string } } };

export function restartMode(kind: WorkloadKind, workload: RestartTarget): { mode: RestartMode; reason: string } {
  const name = workload.metadata?.name ?? '';
  if (kind === 'Deployment')
    return { mode: 'rolling', reason: `Deployment ${name} rolls its pods on a template change` };
  const strategy = workload.spec?.updateStrategy?.type ?? 'RollingUpdate';
  if (strategy !== 'OnDelete') return { mode: 'rolling', reason: `${kind} ${name} has update strategy ${strategy}` };
  const group = workload.metadata?.labels?.[ROLLOUT_GROUP_LABEL];
  if (kind === 'StatefulSet' && group !== undefined) {
    return {
      mode: 'rollout-group',
      reason: `StatefulSet ${name} is OnDelete in rollout group ${group}: the rollout replaces its pods`,
    };
  }
  return {
    mode: 'standalone-ondelete',
    reason: `${kind} ${name} is OnDelete and in no rollout group: its pods keep the old configuration until deleted`,
  };
}

const STATEFULSET_REVISION_LABEL = 'controller-revision-hash';
// The apiserver counts a DaemonSet's template changes in this annotation and
// the DaemonSet controller stamps the count on each pod it creates; a
// DaemonSet's status names no revision, so this is how to tell outdated pods.
const DAEMONSET_GENERATION_ANNOTATION = 'deprecated.daemonset.template.generation';
const DAEMONSET_GENERATION_LABEL = 'pod-template-generation';

/** What an OnDelete workload's pods should be at: the revision, the pod label that carries it, how many pods there should be. */
export interface UpdateTarget {
  /** '' while the workload's controller has not caught up with its latest spec. */
  revision: string;
  revisionLabel: string;
  replicas: number;
}

export type OnDeleteWorkload = KubeObject & {
  spec?: { replicas?: number };
  status?: { observedGeneration?: number; updateRevision?: string; desiredNumberScheduled?: number };
};

export function updateTarget(kind: 'StatefulSet' | 'DaemonSet', workload: OnDeleteWorkload): UpdateTarget {
  const observed =
    workload.status?.observedGeneration !== undefined &&
    workload.status.observedGeneration === workload.metadata?.generation;
  if (kind === 'StatefulSet') {
    return {
      revision: observed ? (workload.status?.updateRevision ?? '') : '',
      revisionLabel: STATEFULSET_REVISION_LABEL,
      replicas: workload.spec?.replicas ?? 1,
    };
  }
  return {
    revision: observed ? (workload.metadata?.annotations?.[DAEMONSET_GENERATION_ANNOTATION] ?? '') : '',
    revisionLabel: DAEMONSET_GENERATION_LABEL,
    replicas: workload.status?.desiredNumberScheduled ?? 0,
  };
}

/** Pods not at `updateRevision` (their revision label — see updateTarget — differs or is absent), by name. */
export function outdatedPods(
  pods: readonly Pod[],
  updateRevision: string,
  revisionLabel = STATEFULSET_REVISION_LABEL,
): string[] {
  return pods
    .filter((p) => p.metadata?.labels?.[revisionLabel] !== updateRevision)
    .map((p) => p.metadata?.name ?? '')
    .sort(byKey);
}

/** The Event for a standalone OnDelete workload whose template was just restarted. */
export function onDeleteEvent(
  workload: WorkloadRef,
  outdated: number,
  evicting: boolean,
): { type: 'Normal'; reason: string; message: string } {
  const pods = outdated === 1 ? '1 pod' : `${outdated} pods`;
  const then = evicting ? 'evicting them one at a time' : 'delete them to apply the new configuration';
  return {
    type: 'Normal',
    reason: 'ConfigRestartPending',
    message: `template updated, ${pods} outdated (${workload.kind} ${workload.name} uses OnDelete); ${then}`,
  };
}

export type EvictionStep =
  | { action: 'evict'; pod: string; outdated: number; reason: string }
  | { action: 'wait'; outdated: number; reason: string }
  | { action: 'done'; reason: string };

/**
 * The optional one-at-a-time eviction of a standalone OnDelete workload's
 * outdated pods (the caller evicts through the Eviction API, so PDBs hold).
 * Nothing while a pod is terminating or an updated pod is not ready (the new
 * revision may be broken). An outdated pod that is not ready goes first (its
 * eviction costs no availability), otherwise the highest ordinal (the order
 * a StatefulSet rolls in; DaemonSet pod names have no ordinal and go by name).
 */
export function nextOutdatedPod(
  pods: readonly Pod[],
  updateRevision: string,
  replicas?: number,
  revisionLabel = STATEFULSET_REVISION_LABEL,
): EvictionStep {
  if (updateRevision === '') return { action: 'wait', outdated: 0, reason: 'the update revision is not known yet' };
  const views = pods.map((pod) => ({ ...podView(pod), revision: pod.metadata?.labels?.[revisionLabel] ?? '' }));
  const outdated = views.filter((p) => p.revision !== updateRevision);
  if (outdated.length === 0) return { action: 'done', reason: `every pod is at revision ${updateRevision}` };
  // A pod already gone (evicted, its replacement not created yet) is unavailable too.
  if (replicas !== undefined && views.length < replicas)
    return { action: 'wait', outdated: outdated.length, reason: `${replicas - views.length} pod(s) missing` };
  const terminating = views.find((p) => p.terminating);
  if (terminating)
    return { action: 'wait', outdated: outdated.length, reason: `pod ${terminating.name} is terminating` };
  const updatedNotReady = views.find((p) => p.revision === updateRevision && !p.ready);
  if (updatedNotReady)
    return { action: 'wait', outdated: outdated.length, reason: `updated pod ${updatedNotReady.name} is not ready` };
  const order = (a: (typeof views)[number], b: (typeof views)[number]) =>
    Number(a.ready) - Number(b.ready) || b.ordinal - a.ordinal || byKey(a.name, b.name);
  const next = [...outdated].sort(order)[0]!;
  return {
    action: 'evict',
    pod: next.name,
    outdated: outdated.length,
    reason: `pod ${next.name} is at revision ${next.revision || '(none)'}, not ${updateRevision}`,
  };
}

/** A reason the engine will not act on part of a workload's configuration, for an Event on the workload. */
export interface SkipNotice {
  type: 'Normal' | 'Warning';
  reason: 'InvalidAnnotation' | 'ConfigMissing' | 'ConfigIgnored';
  message: string;
}

const EXCLUSION_REASONS: Record<'ignore-annotation' | 'exclude-list', string> = {
  'ignore-annotation': 'it is annotated reloader.stakater.com/ignore: "true"',
  'exclude-list': "it is in the workload's exclude list",
};

/**
 * Every skip with its reason, in a fixed order: malformed opt-in or checksum
 * annotations, watched configs that do not exist (nothing restarts for them
 * until they appear), and configs an exclusion keeps out. Nothing for a
 * workload that has not opted in: most workloads have not, and say nothing.
 */
export function skipNotices(input: {
  optedIn: boolean;
  warnings: readonly string[];
  annotationWarning?: string | undefined;
  excluded: readonly { key: string; reason: 'ignore-annotation' | 'exclude-list' }[];
  missing: readonly string[];
  /** Keys whose every use is `optional: true`: their absence is expected, not a fault. */
  optional?: readonly string[];
}): SkipNotice[] {
  const notices: SkipNotice[] = input.warnings.map((message) => ({
    type: 'Warning',
    reason: 'InvalidAnnotation',
    message,
  }));
  if (input.annotationWarning)
    notices.push({ type: 'Warning', reason: 'InvalidAnnotation', message: input.annotationWarning });
  if (!input.optedIn) return notices;
  for (const key of [...input.missing].sort(byKey)) {
    const optional = input.optional?.includes(key) ?? false;
    notices.push({
      type: optional ? 'Normal' : 'Warning',
      reason: 'ConfigMissing',
      message: `${optional ? 'optional ' : ''}${key} is referenced but not found: no restart for it until it exists (its last recorded checksum is kept)`,
    });
  }
  for (const { key, reason } of [...input.excluded].sort((a, b) => byKey(a.key, b.key))) {
    notices.push({
      type: 'Normal',
      reason: 'ConfigIgnored',
      message: `changes to ${key} restart nothing: ${EXCLUSION_REASONS[reason]}`,
    });
  }
  return notices;
}
