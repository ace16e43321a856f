// What a restart writes, per kind (workloadkinds.ts RestartWrite), from the
// decision restartplan.ts made: pure, the controller only sends it. Every
// plan carries the applied-checksums record in the same write as the
// restart (or, for a CronJob, after a create that is safe to repeat), so a
// restart is never done without its record nor recorded without being done.
import type { KubeObject } from '../runtime/kube/types.ts';
import {
  cronJobRecordPatch,
  cronJobRestartJobName,
  jobFromCronJob,
  recreateMarkPatch,
  recreateStep,
  type Job,
} from './jobrestarts.ts';
import {
  formatPausedAt,
  PAUSE_PERIOD_ANNOTATION,
  PAUSED_AT_ANNOTATION,
  pauseOnRestart,
  pausePeriodOf,
} from './pauseperiod.ts';
import type { WorkloadPatch } from './patches.ts';
import type { WorkloadKindSpec } from './workloadkinds.ts';

/** Argo Rollouts only: `rollout` (default) changes the template, `restart` sets spec.restartAt. */
export const ROLLOUT_STRATEGY_ANNOTATION = 'reloader.stakater.com/rollout-strategy';

export type RolloutStrategy = 'rollout' | 'restart';

export function rolloutStrategyOf(object: KubeObject): { strategy: RolloutStrategy; warning?: string } {
  const raw = object.metadata?.annotations?.[ROLLOUT_STRATEGY_ANNOTATION];
  if (raw === undefined || raw === '' || raw === 'rollout') return { strategy: 'rollout' };
  if (raw === 'restart') return { strategy: 'restart' };
  return {
    strategy: 'rollout',
    warning: `${ROLLOUT_STRATEGY_ANNOTATION}=${JSON.stringify(raw)} is neither "rollout" nor "restart"; using "rollout"`,
  };
}

/** Bad values of the kind-specific annotations, for the workload's Events (each once while it lasts). */
export function kindWarnings(spec: WorkloadKindSpec, object: KubeObject): string[] {
  const name = object.metadata?.name ?? '<unnamed>';
  const warning =
    spec.kind === 'Deployment'
      ? pausePeriodOf(object).warning
      : spec.kind === 'Rollout'
        ? rolloutStrategyOf(object).warning
        : undefined;
  return warning === undefined ? [] : [`${name}: ${warning}`];
}

export type RestartWritePlan =
  /** One merge patch: the record and the restart (template trigger, restartAt, pause). */
  | { write: 'patch'; patch: object; note: string }
  /** Create `job` (AlreadyExists = done before), then merge-patch `record` onto the CronJob. */
  | { write: 'create-job'; job: Job; record: object; note: string }
  /** Mark the Job for re-creation (jobrestarts.ts step 1); the steps after it follow from the Job. */
  | { write: 'recreate-job'; mark: object; note: string };

/** A Rollout's restartAt: RFC3339 seconds, moved on a second if equal to the current value (Argo acts on a change). */
function nextRestartAt(wallNow: number, previous: unknown): string {
  const value = formatPausedAt(wallNow);
  return value === previous ? formatPausedAt(wallNow + 1000) : value;
}

/**
 * The write of a restart decided with `patch` (restartplan.ts's record and
 * template trigger, resourceVersion precondition included) and `annotation`
 * (the record's value).
 */
export function planRestartWrite(
  spec: WorkloadKindSpec,
  object: KubeObject,
  decision: { patch: WorkloadPatch; annotation: string },
  wallNow: number,
): RestartWritePlan {
  const { patch } = decision;
  switch (spec.restart) {
    case 'job-from-cronjob': {
      const name = cronJobRestartJobName(object, decision.annotation);
      return {
        write: 'create-job',
        job: jobFromCronJob(object, name),
        record: cronJobRecordPatch({ metadata: patch.metadata }, name),
        note: `started Job ${name} from CronJob ${object.metadata?.name ?? ''}`,
      };
    }
    case 'recreate-job':
      return { write: 'recreate-job', mark: recreateMarkPatch(object, decision.annotation), note: 're-created Job' };
    case 'template-patch':
      break;
  }
  if (spec.kind === 'Rollout' && rolloutStrategyOf(object).strategy === 'restart') {
    const previous = (object as KubeObject & { spec?: { restartAt?: unknown } }).spec?.restartAt;
    const restartAt = nextRestartAt(wallNow, previous);
    return {
      write: 'patch',
      patch: { metadata: patch.metadata, spec: { restartAt } },
      note: `spec.restartAt set to ${restartAt}`,
    };
  }
  if (spec.kind === 'Deployment') {
    const pause = pauseOnRestart(object, wallNow);
    if (pause) {
      const period = object.metadata?.annotations?.[PAUSE_PERIOD_ANNOTATION] ?? '';
      return {
        write: 'patch',
        patch: {
          metadata: { ...patch.metadata, annotations: { ...patch.metadata.annotations, ...pause.annotations } },
          spec: { ...patch.spec, paused: true },
        },
        note: `paused for ${period} (pause-period): it rolls once when resumed`,
      };
    }
  }
  return { write: 'patch', patch, note: '' };
}

/**
 * Whether an earlier restart left work on this object that must go on even
 * if it no longer opts in: a pause to end, a Job's re-creation to finish.
 */
export function hasUnfinishedWrite(spec: WorkloadKindSpec, object: KubeObject): boolean {
  if (spec.kind === 'Deployment') return object.metadata?.annotations?.[PAUSED_AT_ANNOTATION] !== undefined;
  if (spec.restart === 'recreate-job') return recreateStep(object).step !== 'none';
  return false;
}
