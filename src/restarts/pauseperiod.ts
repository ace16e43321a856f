// Reloader's pause-period for Deployments, as pure decisions: a restart of a
// Deployment annotated with `deployment.reloader.stakater.com/pause-period`
// also pauses it (spec.paused and `paused-at`, in the restart's one patch),
// so further config changes land in the template without a rollout each;
// once the period has passed since `paused-at`, the Deployment is resumed
// and rolls once. The resume time is computed from the annotations every
// time the Deployment is looked at, not kept in a timer: an operator restart
// or a new leader resumes on time (Reloader's in-memory timer is lost with
// its process, its issue #1016). Only pauses marked with `paused-at` — ours
// or Reloader's — are resumed; a Deployment paused by hand is left alone.
import { parseGoDuration } from '../runtime/go/duration.ts';
import type { KubeObject } from '../runtime/kube/types.ts';

export const PAUSE_PERIOD_ANNOTATION = 'deployment.reloader.stakater.com/pause-period';
export const PAUSED_AT_ANNOTATION = 'deployment.reloader.stakater.com/paused-at';

export type PausableDeployment = KubeObject & { spec?: { paused?: boolean } };

/** The pause-period in milliseconds; undefined without the annotation or with a bad value (then `warning`). */
export function pausePeriodOf(deployment: KubeObject): { periodMs?: number; warning?: string } {
  const raw = deployment.metadata?.annotations?.[PAUSE_PERIOD_ANNOTATION];
  if (raw === undefined) return {};
  try {
    const periodMs = parseGoDuration(raw.trim());
    if (periodMs > 0) return { periodMs };
    return {
      warning: `${PAUSE_PERIOD_ANNOTATION}=${JSON.stringify(raw)} is not a positive duration; restarts do not pause`,
    };
  } catch (error) {
    return {
      warning: `${PAUSE_PERIOD_ANNOTATION}=${JSON.stringify(raw)} is not a Go duration (${(error as Error).message}); restarts do not pause`,
    };
  }
}

/** RFC3339 in whole seconds, UTC: the format Reloader writes (Go's time.RFC3339). */
export function formatPausedAt(wallNow: number): string {
  return new Date(Math.floor(wallNow / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/**
 * What a restart adds to its patch for the pause: spec.paused and paused-at
 * when the Deployment has a valid pause-period and is not paused already
 * (a restart during our pause only changes the template: one rollout at
 * resume; a Deployment paused by hand stays the user's).
 */
export function pauseOnRestart(
  deployment: PausableDeployment,
  wallNow: number,
): { paused: true; annotations: Record<string, string> } | undefined {
  if (pausePeriodOf(deployment).periodMs === undefined) return undefined;
  if (deployment.spec?.paused === true) return undefined;
  return { paused: true, annotations: { [PAUSED_AT_ANNOTATION]: formatPausedAt(wallNow) } };
}

export type PauseDecision =
  | { action: 'none' }
  /** Resume now with `patch` (one merge patch: unpause, drop paused-at). */
  | { action: 'resume'; patch: object; reason: string }
  /** Paused by a restart; look again at `untilWall` (epoch ms). */
  | { action: 'wait'; untilWall: number };

/**
 * For a Deployment carrying `paused-at`: resume once its pause-period has
 * passed since then. Also resumes at once when the period annotation was
 * removed or made invalid (nothing says how long to wait any more) or
 * `paused-at` cannot be read; and drops a stale `paused-at` from a
 * Deployment someone already resumed.
 */
export function pauseDecision(deployment: PausableDeployment, wallNow: number): PauseDecision {
  const pausedAt = deployment.metadata?.annotations?.[PAUSED_AT_ANNOTATION];
  if (pausedAt === undefined) return { action: 'none' };
  const since = Date.parse(pausedAt);
  const { periodMs } = pausePeriodOf(deployment);
  const resume = (reason: string): PauseDecision => ({
    action: 'resume',
    reason,
    patch: {
      metadata: {
        ...(deployment.metadata?.resourceVersion ? { resourceVersion: deployment.metadata.resourceVersion } : {}),
        annotations: { [PAUSED_AT_ANNOTATION]: null },
      },
      ...(deployment.spec?.paused === true ? { spec: { paused: false } } : {}),
    },
  });
  if (deployment.spec?.paused !== true) return resume(`no longer paused; ${PAUSED_AT_ANNOTATION} removed`);
  if (Number.isNaN(since)) return resume(`${PAUSED_AT_ANNOTATION}=${JSON.stringify(pausedAt)} is not a time; resumed`);
  if (periodMs === undefined) return resume(`no valid ${PAUSE_PERIOD_ANNOTATION} any more; resumed`);
  const until = since + periodMs;
  if (wallNow >= until)
    return resume(
      `pause of ${deployment.metadata?.annotations?.[PAUSE_PERIOD_ANNOTATION]} since ${pausedAt} ended; resumed`,
    );
  return { action: 'wait', untilWall: until };
}
