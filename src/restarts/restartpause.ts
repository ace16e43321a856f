// Pausing config restarts (Reloader #274): `stateward.dev/config-restart-paused:
// "true"` on a workload, on its Namespace, or on a ConfigMap/Secret it
// watches holds that workload's restarts. Unlike an "ignore", nothing is
// lost: the applied record is not advanced past a held change
// (restartplan.ts holdForPause), so lifting the pause restarts once if
// anything changed meanwhile, and not at all if nothing did. Pure: the
// caller passes the annotations it has.
import { CONFIG_RESTART_PAUSED_ANNOTATION } from '../vocabulary/keys.ts';
import { parseReloaderBool } from './references.ts';

/** What a workload's pause is read from. */
export interface PauseSources {
  /** The workload's own metadata annotations. */
  workload: Readonly<Record<string, string>> | undefined;
  /** Its Namespace's annotations; undefined when Namespaces are not read (listed-namespaces and Reloader installs). */
  namespace?: { name: string; annotations: Readonly<Record<string, string>> | undefined } | undefined;
  /** The ConfigMaps and Secrets it watches, by config key, with their annotations. */
  configs?: readonly { key: string; annotations: Readonly<Record<string, string>> | undefined }[];
}

export interface RestartPause {
  /** What pauses it (`workload`, `namespace <name>`, a config key), in that order; empty: not paused. */
  by: string[];
  /** Values that are not booleans: read as "not paused", said once each. */
  warnings: string[];
}

/** The annotation's value, as Go's strconv.ParseBool reads it (Reloader's booleans); "" is false. */
function pausedBy(
  annotations: Readonly<Record<string, string>> | undefined,
  where: string,
  warnings: string[],
): boolean {
  const raw = annotations?.[CONFIG_RESTART_PAUSED_ANNOTATION];
  if (typeof raw !== 'string') return false;
  const value = parseReloaderBool(raw.trim());
  if (value === undefined) {
    warnings.push(
      `${where}: ${CONFIG_RESTART_PAUSED_ANNOTATION}=${JSON.stringify(raw.slice(0, 64))} is not a boolean; not paused`,
    );
    return false;
  }
  return value;
}

/** Whether, and by what, a workload's config restarts are paused. Never throws. */
export function restartPause(sources: PauseSources): RestartPause {
  const by: string[] = [];
  const warnings: string[] = [];
  if (pausedBy(sources.workload, 'the workload', warnings)) by.push('workload');
  const ns = sources.namespace;
  if (ns && pausedBy(ns.annotations, `namespace ${ns.name}`, warnings)) by.push(`namespace ${ns.name}`);
  const configs = [...(sources.configs ?? [])].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const c of configs) if (pausedBy(c.annotations, c.key, warnings)) by.push(c.key);
  return { by, warnings };
}

/** A notice for the workload (an Event and a log line, each once while it lasts). */
export interface PauseNotice {
  type: 'Normal' | 'Warning';
  reason: 'ConfigRestartPaused' | 'InvalidAnnotation';
  message: string;
}

/**
 * What a paused workload says: that it is paused and by what, and, apart,
 * which changes wait for the pause to be lifted (a separate notice, so the
 * first stays given once while only the held set grows).
 */
export function pauseNotices(pause: RestartPause, held: readonly string[], optedIn: boolean): PauseNotice[] {
  const notices: PauseNotice[] = pause.warnings.map((message) => ({
    type: 'Warning',
    reason: 'InvalidAnnotation',
    message,
  }));
  if (!optedIn || pause.by.length === 0) return notices;
  notices.push({
    type: 'Normal',
    reason: 'ConfigRestartPaused',
    message: `config restarts paused by ${pause.by.join(', ')} (${CONFIG_RESTART_PAUSED_ANNOTATION}); changes are kept and restart once when the pause is lifted`,
  });
  if (held.length > 0)
    notices.push({
      type: 'Normal',
      reason: 'ConfigRestartPaused',
      message: `held until the pause is lifted: ${[...held].join(', ')} changed`,
    });
  return notices;
}
