// The Events a restart (or a failed one) writes on the workload. Stateward's
// own reasons say what happened in its terms (ConfigChanged); as Reloader's
// drop-in it writes Reloader's reasons and message texts instead, because
// users' alerts and event exporters match on them: `Reloaded` (Normal), one
// per config that caused the restart as Reloader writes one per config
// event, and `ReloadFail` (Warning) when the write was refused. One set of
// Events per outcome, never both: two Events for one restart would double
// every count built on them.
import type { WorkloadKind } from './checksums.ts';
import type { EventReasons } from './reloaderflags.ts';
import type { ConfigKind } from './references.ts';

export interface RestartEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface RestartOutcomeBase {
  workload: { kind: WorkloadKind; namespace: string; name: string };
  /** The configs whose change caused the restart, in the workload's namespace. */
  configs: readonly { kind: ConfigKind; name: string }[];
  /** Stateward's wording of how the workload rolls (`; its rollout group rolls it zone by zone`), or ''. */
  detail?: string;
}

export type RestartOutcome =
  (RestartOutcomeBase & { result: 'restarted' }) | (RestartOutcomeBase & { result: 'failed'; error: string });

/** Reloader's config "type" in its messages (its env-var postfixes). */
const RELOADER_CONFIG_TYPE: Record<ConfigKind, string> = { configmap: 'CONFIGMAP', secret: 'SECRET' };

const configKeyOf = (kind: ConfigKind, namespace: string, name: string) => `${kind}/${namespace}/${name}`;

export function restartEvents(outcome: RestartOutcome, reasons: EventReasons): RestartEvent[] {
  return reasons === 'reloader' ? reloaderEvents(outcome) : statewardEvents(outcome);
}

function statewardEvents(o: RestartOutcome): RestartEvent[] {
  const { namespace } = o.workload;
  const keys = o.configs.map((c) => configKeyOf(c.kind, namespace, c.name)).join(', ');
  if (o.result === 'restarted') {
    return [{ type: 'Normal', reason: 'ConfigChanged', message: `restarted: ${keys} changed${o.detail ?? ''}` }];
  }
  return [
    {
      type: 'Warning',
      reason: 'ConfigRestartFailed',
      message: `restart for ${keys} failed, retrying: ${o.error}`,
    },
  ];
}

function reloaderEvents(o: RestartOutcome): RestartEvent[] {
  const { kind, namespace, name } = o.workload;
  if (o.result === 'failed') {
    // Reloader's text names the workload only, so one Event says it for every config.
    return [
      {
        type: 'Warning',
        reason: 'ReloadFail',
        message: `Update for '${name}' of type '${kind}' in namespace '${namespace}' failed with error ${o.error}`,
      },
    ];
  }
  const updated = `Updated '${name}' of type '${kind}' in namespace '${namespace}'`;
  // Never silent: a restart whose cause is not named still gets its Event.
  if (o.configs.length === 0) return [{ type: 'Normal', reason: 'Reloaded', message: updated }];
  return o.configs.map((c) => ({
    type: 'Normal',
    reason: 'Reloaded',
    message:
      `Changes detected in '${c.name}' of type '${RELOADER_CONFIG_TYPE[c.kind]}' in namespace '${namespace}', ` +
      updated,
  }));
}
