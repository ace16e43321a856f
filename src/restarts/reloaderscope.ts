// What Reloader's filter flags leave in scope for config restarts, as pure
// predicates the controller asks: which configs count (resources-to-ignore,
// resource-label-selector), which workload kinds are restarted
// (ignored-workload-types, is-Argo-Rollouts), whether every workload is opted
// in (auto-reload-all), and what a config that appears or disappears does
// (reload-on-create, reload-on-delete) in Stateward's applied-record model.
//
// The flags themselves are read in reloaderflags.ts; this module only knows
// the resulting scope, so the controller and its tests need no flag set.
import { type LabelSelector, matchesLabelSelector } from '../vocabulary/selectors.ts';
import { MISSING, type WorkloadKind } from './checksums.ts';
import type { ConfigKind } from './references.ts';

export interface RestartScopeOptions {
  /** --auto-reload-all: a workload with no auto key is treated as `reloader.stakater.com/auto: "true"`. */
  autoReloadAll: boolean;
  /** --reload-on-create: a watched config that appears after the workload was recorded without it restarts it. */
  reloadOnCreate: boolean;
  /** --reload-on-delete: a watched config that disappears restarts the workloads that had it applied. */
  reloadOnDelete: boolean;
  /** --resources-to-ignore: the one config kind never watched (Reloader refuses both). */
  ignoredConfigKind: ConfigKind | undefined;
  /** --resource-label-selector, parsed; undefined selects every config. */
  configSelector: LabelSelector | undefined;
  /** The same selector as text, for server-side LIST/WATCH ('' when none). */
  configSelectorText: string;
  /** --ignored-workload-types. */
  ignoreJobs: boolean;
  ignoreCronJobs: boolean;
  /**
   * Whether Argo Rollouts are restarted. Stateward's own default is yes (when
   * their CRD is installed); as Reloader's drop-in only with
   * --is-Argo-Rollouts=true, as Reloader, whose chart grants no access to
   * them otherwise.
   */
  argoRollouts: boolean;
}

export interface RestartScope extends Readonly<RestartScopeOptions> {
  /** Whether a ConfigMap or Secret with these labels can restart anything at all. */
  configIncluded(kind: ConfigKind, labels: Readonly<Record<string, string>> | undefined): boolean;
  /** Whether configs of this kind need watching at all (false: start no informer for them). */
  configKindWatched(kind: ConfigKind): boolean;
  /** Whether workloads of this kind are restarted. */
  workloadKindIncluded(kind: WorkloadKind): boolean;
}

/** Stateward without any Reloader flag: every config and kind, nothing on create or delete. */
export const DEFAULT_SCOPE_OPTIONS: RestartScopeOptions = {
  autoReloadAll: false,
  reloadOnCreate: false,
  reloadOnDelete: false,
  ignoredConfigKind: undefined,
  configSelector: undefined,
  configSelectorText: '',
  ignoreJobs: false,
  ignoreCronJobs: false,
  argoRollouts: true,
};

export function restartScope(options: Partial<RestartScopeOptions> = {}): RestartScope {
  const o: RestartScopeOptions = { ...DEFAULT_SCOPE_OPTIONS, ...options };
  const configKindWatched = (kind: ConfigKind) => kind !== o.ignoredConfigKind;
  return {
    ...o,
    configKindWatched,
    configIncluded: (kind, labels) =>
      configKindWatched(kind) && (o.configSelector === undefined || matchesLabelSelector(o.configSelector, labels)),
    workloadKindIncluded: (kind) => {
      switch (kind) {
        case 'Job':
          return !o.ignoreJobs;
        case 'CronJob':
          return !o.ignoreCronJobs;
        case 'Rollout':
          return o.argoRollouts;
        default:
          return true;
      }
    },
  };
}

export const DEFAULT_SCOPE: RestartScope = restartScope();

/** What to record, and whether to restart, for one watched config that does not exist now. */
export interface MissingConfigDecision {
  /** The applied-record value to write for the config; undefined writes no entry. */
  record: string | undefined;
  restart: boolean;
}

/**
 * A watched config is missing (never created, deleted, or filtered out).
 * `recorded` is the applied record's entry for it: undefined (none), MISSING,
 * or the checksum the pods started with.
 *
 * Without the flags this is restartplan.ts's R5: nothing restarts, a recorded
 * checksum is kept (a re-creation with other content is then a change), and
 * nothing new is recorded (its later appearance is a new reference, R2).
 *
 * --reload-on-create records the absence as MISSING, so the config's later
 * appearance differs from the record: R1, a restart. Durable: the record is
 * on the workload, so an appearance while no leader ran restarts too, and the
 * initial LIST needs no special case (Reloader's --sync-after-restart).
 *
 * --reload-on-delete restarts a workload whose record holds a checksum, and
 * records MISSING so the deletion restarts once; a re-creation then differs
 * from MISSING and restarts again, so pods restarted without the config get
 * it back.
 */
export function decideMissingConfig(
  scope: Pick<RestartScopeOptions, 'reloadOnCreate' | 'reloadOnDelete'>,
  recorded: string | undefined,
): MissingConfigDecision {
  if (recorded === undefined) {
    return { record: scope.reloadOnCreate ? MISSING : undefined, restart: false };
  }
  if (recorded === MISSING) return { record: MISSING, restart: false };
  if (scope.reloadOnDelete) return { record: MISSING, restart: true };
  return { record: recorded, restart: false };
}
