// Where Reloader's command line lands on Stateward's own settings: logging,
// leader election, profiling, the HTTP port its chart probes, the operator
// namespace and what is watched, and the config-restarts switch. Pure: main
// passes the parsed runtime config, which Stateward flags were given
// explicitly (they win over Reloader's), and the resolved Reloader settings.
import type { Environment, FlagSet } from '../runtime/flags/flagset.ts';
import type { RuntimeConfig } from '../runtime/runtimeflags.ts';
import { RELOADER_HTTP_PORT, type ReloaderSettings } from './reloaderflags.ts';

/** Stateward runtime flags given on the command line (or their environment): Reloader's must not override them. */
export interface ExplicitRuntimeFlags {
  logFormat: boolean;
  logLevel: boolean;
  leaderElection: boolean;
  pprof: boolean;
  serverPort: boolean;
  /** -kubernetes.watch-namespaces, or Reloader's --namespaces (registered by the namespaces module). */
  watchNamespaces: boolean;
}

const EXPLICIT_NAMES: Record<keyof ExplicitRuntimeFlags, readonly string[]> = {
  logFormat: ['log.format'],
  logLevel: ['log.level'],
  leaderElection: ['leader-election.enabled'],
  pprof: ['server.pprof.enabled'],
  serverPort: ['server.port'],
  watchNamespaces: ['kubernetes.watch-namespaces', 'namespaces'],
};

/** Reads ExplicitRuntimeFlags off a parsed flag set; a flag the set does not define counts as not given. */
export function explicitRuntimeFlags(fs: FlagSet): ExplicitRuntimeFlags {
  const isSet = (name: string) => {
    try {
      return fs.isSet(name);
    } catch {
      return false;
    }
  };
  const out = {} as ExplicitRuntimeFlags;
  for (const [field, names] of Object.entries(EXPLICIT_NAMES) as [keyof ExplicitRuntimeFlags, readonly string[]][]) {
    out[field] = names.some(isSet);
  }
  return out;
}

/**
 * The environment to parse the command line with: Reloader's chart sets
 * RELOADER_NAMESPACE (the pod's namespace) but POD_NAMESPACE only with HA,
 * and -kubernetes.namespace falls back on POD_NAMESPACE. Nothing else changes.
 */
export function reloaderEnvironment(env: Environment): Environment {
  const reloaderNamespace = env['RELOADER_NAMESPACE'] ?? '';
  if (reloaderNamespace === '' || (env['POD_NAMESPACE'] ?? '') !== '') return env;
  return { ...env, POD_NAMESPACE: reloaderNamespace };
}

/**
 * The runtime config with Reloader's settings applied where no Stateward
 * flag says otherwise. In Reloader's install (its environment present),
 * Stateward listens on Reloader's port (9090), where the chart's probes and
 * PodMonitor look, and, as Reloader, watches the whole cluster unless
 * KUBERNETES_NAMESPACE names one namespace. Reloader flags added to
 * Stateward's own install change neither: its probes and RBAC expect
 * Stateward's.
 */
export function applyReloaderToRuntime(
  config: RuntimeConfig,
  settings: ReloaderSettings,
  explicit: ExplicitRuntimeFlags,
): RuntimeConfig {
  if (!settings.active) return config;
  const out: RuntimeConfig = { ...config, leaderElection: { ...config.leaderElection } };
  if (settings.logFormat !== undefined && !explicit.logFormat) out.logFormat = settings.logFormat;
  if (settings.logLevel !== undefined && !explicit.logLevel) out.logLevel = settings.logLevel;
  if (settings.leaderElection && !explicit.leaderElection) out.leaderElection.enabled = true;
  if (settings.pprof && !explicit.pprof) out.pprofEnabled = true;
  if (!settings.install) return out;
  if (!explicit.serverPort) out.serverPort = RELOADER_HTTP_PORT;
  if (!explicit.watchNamespaces) {
    out.watchNamespaces = settings.singleNamespace !== undefined ? [settings.singleNamespace] : ['*'];
  }
  return out;
}

/**
 * Whether config restarts run: -config-restarts.enabled, or Reloader's
 * command line or install. An explicit -config-restarts.enabled=false wins,
 * with a notice, so a Reloader install can be kept idle on purpose.
 */
export function configRestartsEnabled(
  flag: { value: boolean; explicit: boolean },
  settings: Pick<ReloaderSettings, 'active' | 'activatedBy'>,
): { enabled: boolean; notice: string | undefined } {
  if (flag.explicit || !settings.active) return { enabled: flag.value, notice: offNotice(flag, settings) };
  return { enabled: true, notice: undefined };
}

function offNotice(
  flag: { value: boolean; explicit: boolean },
  settings: Pick<ReloaderSettings, 'active' | 'activatedBy'>,
): string | undefined {
  if (!settings.active || flag.value) return undefined;
  return `-config-restarts.enabled=false: config restarts stay off although Reloader's ${settings.activatedBy.join(', ')} ${settings.activatedBy.length === 1 ? 'was' : 'were'} given`;
}
