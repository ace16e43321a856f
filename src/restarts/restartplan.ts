// Config-change restarts, pure decision core: when a workload (any kind in
// workloadkinds.ts) must be restarted because a ConfigMap or Secret it uses
// has changed; how the restart is then written per kind is restartwrites.ts.
// Drop-in compatible with xing's kubernetes-deployment-restart-controller:
// the same opt-in annotation, the same applied-checksums annotation (byte
// for byte: a JSON object with sorted keys), the same
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
//       waiting for it and pick it up when they start). Reloader's
//       --reload-on-create and --reload-on-delete change this rule
//       (reloaderscope.ts decideMissingConfig): on create, the absence is
//       recorded as 'missing', so the config's appearance differs from the
//       record (R1, a restart); on delete, a recorded checksum's config going
//       away restarts once and records 'missing'.
//   R6  A workload not opted in (`com.xing.deployment-restart` is not exactly
//       `enabled`) is left alone: no restart, no annotation write, and the
//       stale checksum annotation stays (as xing).
//   All changed checksums and the restart go out in ONE merge patch.
//   R7  PAUSED (restartpause.ts: the workload, its Namespace or a config it
//       watches carries stateward.dev/config-restart-paused: "true"): no
//       restart. A change that would restart (R1, R3, R5's deletion) is HELD:
//       its applied entry stays what the pods run (R1 and a deletion keep the
//       recorded checksum, R3 records the first-seen one), so once the pause
//       is lifted the same rules restart exactly once if anything differs,
//       and not at all if the config went back meanwhile. What restarts
//       nothing (R2, R4, the migration, a recorded absence) is still written:
//       it only says what the pods already run.
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
import {
  XING_ENABLED_ANNOTATION as RESTART_ENABLED_ANNOTATION_KEY,
  XING_ENABLED_VALUE as RESTART_ENABLED_VALUE,
} from '../vocabulary/keys.ts';
import {
  type ChecksumsInput,
  type CurrentChecksumsInput,
  MISSING,
  type WorkloadRef,
  byKey,
  formatAppliedChecksums,
  sameChecksums,
  toMap,
  workloadKey,
} from './checksums.ts';
import {
  type PendingChange,
  type RestartSettings,
  due,
  dueAt,
  observeChange,
  resolveRestartSettings,
  withFirstSeen,
} from './debounce.ts';
import { type TimestampFormat, type WorkloadPatch, annotationPatch, restartPatch } from './patches.ts';
import { decideMissingConfig, type RestartScopeOptions } from './reloaderscope.ts';

const NO_RELOAD_ON_MISSING = { reloadOnCreate: false, reloadOnDelete: false };
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
  /** R5 with --reload-on-delete: the config the pods started with is gone; restarts, 'missing' recorded. */
  | 'deleted'
  /** R5 with --reload-on-create: not there yet; 'missing' recorded, so its appearance restarts. */
  | 'awaited'
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
  /** Reloader's --reload-on-create / --reload-on-delete (rule R5); both off without them. */
  onMissing?: Pick<RestartScopeOptions, 'reloadOnCreate' | 'reloadOnDelete'>;
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
  /** R7: what pauses the workload's restarts (restartpause.ts `by`); empty or absent: not paused. */
  paused?: readonly string[];
}

interface Common {
  workload: WorkloadRef;
  reason: string;
  /** Referenced configs that do not exist now (R5); their checksums, if any, are kept. */
  missing: string[];
  /** R7: keys whose change would restart but waits for the pause to be lifted; empty when not paused. */
  held: string[];
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
  onMissing: Pick<RestartScopeOptions, 'reloadOnCreate' | 'reloadOnDelete'>,
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
      const d = decideMissingConfig(onMissing, before); // R5
      if (d.record !== undefined) target.set(key, d.record);
      if (d.restart) {
        changes.push({ key, change: 'deleted', from: before! });
        restartedBy.push(key);
      } else if (before === undefined && d.record !== undefined) {
        changes.push({ key, change: 'awaited', to: d.record });
      }
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

/** R1–R5's evaluation, with R7's holds when paused (`held` is empty when not). */
type HeldEvaluation = Evaluation & { held: string[] };

/** Changes that restart (R1, R3, R5's deletion): held while paused. */
const RESTARTING: ReadonlySet<ConfigChangeKind> = new Set(['changed', 'changed-again', 'deleted']);

/**
 * R7: the evaluation with every restarting change held. The record keeps
 * what the pods run: the applied checksum (R1, a deletion) or, for R3, the
 * first-seen one the pods may have started with; so the change is still
 * there to restart for once the pause is lifted.
 */
function holdForPause(evaluation: Evaluation): HeldEvaluation {
  const target = new Map(evaluation.target);
  const held: string[] = [];
  const changes: ConfigChange[] = [];
  for (const c of evaluation.changes) {
    if (!RESTARTING.has(c.change)) {
      changes.push(c);
      continue;
    }
    held.push(c.key);
    if (c.from !== undefined) target.set(c.key, c.from);
  }
  return { target, changes, restartedBy: [], missing: evaluation.missing, held };
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
    ...part('deleted', 'deleted:'),
    ...part('awaited', 'not created yet, its creation will restart:'),
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
  const name = workloadKey(workload);
  const current = toMap(input.current);
  if (!input.optedIn) return notOptedIn(workload, name);
  const applied = toMap(input.applied);
  const evaluation = evaluateHeld(input, applied, current);
  const { target, restartedBy, missing, held } = evaluation;
  const note = missingAndPausedNote(missing, input.paused ?? [], held);

  if (restartedBy.length === 0 && sameChecksums(target, applied)) {
    return {
      action: 'nothing',
      workload,
      pending: undefined,
      missing,
      held,
      reason:
        held.length > 0
          ? `${name}: ${held.join(', ')} changed, held${note}`
          : `${name} has every referenced config applied${note}`,
    };
  }

  const settings = resolveRestartSettings(input.settings);
  const burst = burstOf(input.pending, now, current);
  if (!due(burst, now, settings)) return waitForMoreChanges(input, name, evaluation, note, burst, settings);
  return writeNow(input, name, evaluation, note);
}

/** R6: a workload not opted in is left alone, its stale checksum annotation included. */
function notOptedIn(workload: WorkloadRef, name: string): RestartDecision {
  return {
    action: 'nothing',
    workload,
    pending: undefined,
    missing: [],
    held: [],
    reason: `${name} is not opted in (${RESTART_ENABLED_ANNOTATION_KEY}: ${RESTART_ENABLED_VALUE})`,
  };
}

/** R1–R5 for the input; when it is paused, R7 then holds every change that would restart. */
function evaluateHeld(
  input: RestartInput,
  applied: ReadonlyMap<string, string>,
  current: ReadonlyMap<string, string>,
): HeldEvaluation {
  const evaluation = evaluate(
    applied,
    current,
    input.pending?.firstSeen,
    toMap(input.legacyCurrent),
    input.onMissing ?? NO_RELOAD_ON_MISSING,
  );
  const paused = input.paused ?? [];
  return paused.length > 0 ? holdForPause(evaluation) : { ...evaluation, held: [] as string[] };
}

/**
 * The tail of every reason past R6: which configs were not found (R5) and
 * what pauses the workload (R7), so a user reading why nothing restarted
 * sees it in the same line.
 */
function missingAndPausedNote(missing: readonly string[], paused: readonly string[], held: readonly string[]): string {
  return (
    (missing.length > 0 ? ` (not found, left as recorded: ${missing.join(', ')})` : '') +
    (paused.length > 0
      ? `; restarts paused by ${paused.join(', ')}${held.length > 0 ? `, held: ${held.join(', ')}` : ''}`
      : '')
  );
}

/**
 * The burst this write waits in: the pending one, with the first-seen
 * checksums of references it had not seen yet (R3), or, with none pending (a
 * resync, a new leader), one starting now.
 */
function burstOf(pending: PendingChange | undefined, now: number, current: ReadonlyMap<string, string>): PendingChange {
  return pending === undefined
    ? observeChange(undefined, now, current)
    : { ...pending, firstSeen: withFirstSeen(pending.firstSeen, current) };
}

/** The debounce: a write is needed but not due yet; more changes may come before `until`. */
function waitForMoreChanges(
  input: RestartInput,
  name: string,
  { changes, missing, held }: HeldEvaluation,
  note: string,
  burst: PendingChange,
  settings: RestartSettings,
): RestartDecision {
  const { workload, now } = input;
  const wallNow = input.wallNow ?? now;
  const until = dueAt(burst, settings);
  return {
    action: 'wait-until',
    workload,
    until,
    pending: burst,
    changes,
    missing,
    held,
    reason: `${name}: ${summarize(changes)}; waiting until ${new Date(wallNow + (until - now)).toISOString()} for more changes${note}`,
  };
}

/** The burst is due: one merge patch, with the restart trigger when a change restarts (R1, R3, R5's deletion). */
function writeNow(
  input: RestartInput,
  name: string,
  { target, changes, restartedBy, missing, held }: HeldEvaluation,
  note: string,
): RestartDecision {
  const { workload } = input;
  const wallNow = input.wallNow ?? input.now;
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
      held,
      pending: undefined,
      patch: restartPatch({
        applied: target,
        now: wallNow,
        previousTimestamp: input.previousTimestamp,
        format: input.timestampFormat,
        ...patchOptions,
      }),
      reason: `restarting ${name}: ${summarize(changes)}${note}`,
    };
  }
  return {
    action: 'update-annotation-only',
    workload,
    applied: target,
    annotation,
    changes,
    missing,
    held,
    pending: undefined,
    patch: annotationPatch({ applied: target, ...patchOptions }),
    reason: `recording checksums of ${name} without a restart: ${summarize(changes)}${note}`,
  };
}
