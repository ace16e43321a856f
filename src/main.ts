// Entry point of the stateward executable: flags, logging, the shared
// runtime, the capabilities, and signal handling.
import { readFileSync } from 'node:fs';
import { registerCompatFlags } from './runtime/compat.ts';
import { registerRuntimeFlags, type RuntimeConfig } from './runtime/runtimeflags.ts';
import { FlagSet } from './runtime/flags/flagset.ts';
import { loadOperatorKubeConfig } from './runtime/kube/source.ts';
import { KubeConfigError } from './runtime/kube/kubeconfigfile.ts';
import { validateElectionTimings } from './runtime/leaderelection/elector.ts';
import { type FaultSource, reportFaults } from './runtime/faults.ts';
import { createLogger } from './runtime/log/logger.ts';
import { createRegistry } from './runtime/metrics.ts';
import { Operator, type Capability, type Runtime } from './runtime/operator.ts';
import { startTracing, type Tracing } from './runtime/tracing/tracing.ts';
import { workloadsCapability } from './workloads/cache.ts';
import { registerPodCallFlags } from './workloads/podclient.ts';
import { registerRolloutFlags, rolloutCapability } from './rollout/controller.ts';
import { createReplicaCoordination, replicaCoordinationCapability } from './downscale/capability.ts';
import { PREPARE_DOWNSCALE_PATH, prepareDownscaleWebhook } from './downscale/prepare/handler.ts';
import { registerWebhookFlags } from './webhooks/webhookflags.ts';
import { webhooksCapability, type WebhookHandlers } from './webhooks/capability.ts';
import { createZpdbBudgets, POD_EVICTION_PATH } from './drain/zpdb/evictions.ts';
import { ZPDB_VALIDATION_PATH, zpdbValidationHandler } from './drain/zpdb/zpdbvalidation.ts';
import {
  HEALTH_CHECK_VALIDATION_PATH,
  healthCheckValidationHandler,
} from './rollout/healthcheck/healthcheckvalidation.ts';
import { RolloutGate } from './rollout/healthcheck/rolloutgate.ts';
import { registerRescheduleFlags, rescheduleWebhooks } from './drain/reschedule/webhook.ts';
import { registerRestartFlags, restartsCapability, type RestartOptions } from './restarts/controller.ts';
import { registerAlertFlags } from './restarts/alertflags.ts';
import { registerReloaderFlags, unhonouredRenameErrors, type ReloaderSettings } from './restarts/reloaderflags.ts';
import {
  applyReloaderToRuntime,
  configRestartsEnabled,
  explicitRuntimeFlags,
  reloaderEnvironment,
} from './restarts/reloaderruntime.ts';
import { registerCsiFlags } from './restarts/csiinformers.ts';
import { installNotice, RELOADER_INSTALL_MODE, reloaderInstallCapabilities } from './restarts/reloaderinstall.ts';
import { registerWebFlags, webCapability } from './web/capability.ts';
import { classifyFirstWord, topLevelHelp, unknownCommandMessage } from './cli/commandline.ts';

export const version: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  env: NodeJS.ProcessEnv;
  /** Where the process's signals are delivered (process, or a stand-in in tests). */
  signals?: { on(signal: 'SIGTERM' | 'SIGINT', handler: () => void): void };
  /** Where uncaught exceptions and unhandled rejections are reported (process, or a stand-in in tests). */
  faults?: FaultSource;
}

/** The client commands, loaded only when asked for (the operator never needs them). */
const COMMANDS: Record<string, (argv: readonly string[], io: Io) => Promise<number>> = {
  status: async (argv, io) => (await import('./status/cli.ts')).runStatus(argv, io),
  doctor: async (argv, io) => (await import('./doctor/cli.ts')).runDoctor(argv, io),
};

/**
 * Runs the command line; resolves to the process exit code. A first word
 * naming a command (`status`, `doctor`) runs that client command; anything
 * else is the operator's own command line, as rollout-operator's.
 */
export async function main(argv: readonly string[], io: Io): Promise<number> {
  const first = classifyFirstWord(argv, Object.keys(COMMANDS));
  if (first.kind === 'command') return COMMANDS[first.name]!(argv.slice(1), io);
  if (first.kind === 'help') {
    io.out(topLevelHelp());
    return 0;
  }
  if (first.kind === 'unknown') {
    io.err(unknownCommandMessage(first));
    return 2;
  }
  const fs = new FlagSet('stateward');
  const showVersion = fs.bool('version', false, 'Print the version and exit.');
  const flags = registerOperatorFlags(fs);
  const parsed = fs.parse(argv, reloaderEnvironment(io.env));
  if (parsed.kind === 'help') {
    // Go's flag usage first, as rollout-operator prints it; the commands after it.
    io.err(`${parsed.usage}\n${topLevelHelp()}`);
    return 0;
  }
  if (parsed.kind === 'error') {
    io.err(`${parsed.message}\n${parsed.usage}`);
    return 2;
  }
  if (showVersion.value) {
    io.out(`stateward ${version}\n`);
    return 0;
  }
  // Reloader's command line and environment (its chart, image swapped): mapped onto Stateward's settings.
  const reloader = flags.reloader.read(io.env);
  const invalid =
    invalidFlags(flags) ??
    // Renamed annotation keys are refused: optins.ts reads Reloader's keys only.
    ([...reloader.errors, ...unhonouredRenameErrors(reloader, [])].join('\n') || undefined);
  const config = applyReloaderToRuntime(flags.runtimeFlags.read(), reloader, explicitRuntimeFlags(fs));
  const invalidElection = config.leaderElection.enabled ? validateElectionTimings(config.leaderElection) : undefined;
  if (invalid || invalidElection) {
    // A bare `stateward` is most often a person trying the command: show what it can do.
    io.err(`${invalid ?? invalidElection}\n${argv.length === 0 ? `\n${topLevelHelp()}` : ''}`);
    return 2;
  }
  const switched = restartOptions(fs, flags, reloader);
  // Reloader's install (its chart, image swapped): only what its RBAC allows (reloaderinstall.ts).
  const capabilities = reloader.install
    ? reloaderInstallCapabilities(() => switched.options)
    : operatorCapabilities(flags, () => switched.options);
  const warnings = [
    ...flags.compatFlags.warnings(),
    ...reloader.notices,
    ...(reloader.install ? [installNotice(reloader.activatedBy)] : []),
    ...(switched.notice ? [switched.notice] : []),
  ];
  return runOperator(config, warnings, capabilities, io);
}

/**
 * The config restarts' settings: their own flags, Reloader's (which turn them
 * on, unless -config-restarts.enabled=false is given: `notice` says so), and
 * the alerts.
 */
function restartOptions(
  fs: FlagSet,
  flags: OperatorFlags,
  reloader: ReloaderSettings,
): { options: RestartOptions; notice: string | undefined } {
  const own = flags.restartOptions();
  const switched = configRestartsEnabled(
    { value: own.enabled, explicit: fs.isSet('config-restarts.enabled') },
    reloader,
  );
  return {
    options: {
      ...own,
      enabled: switched.enabled,
      scope: reloader.scope,
      eventReasons: reloader.eventReasons,
      countByNamespace: reloader.countByNamespace,
      alerts: flags.alertFlags.read(),
      ...(reloader.install ? { reloaderInstall: RELOADER_INSTALL_MODE } : {}),
    },
    notice: switched.notice,
  };
}

type OperatorFlags = ReturnType<typeof registerOperatorFlags>;

/** Every flag of the operator's command line, registered in the order `-help` lists them. */
function registerOperatorFlags(fs: FlagSet) {
  const runtimeFlags = registerRuntimeFlags(fs);
  const podCallFlags = registerPodCallFlags(fs);
  const rolloutOptions = registerRolloutFlags(fs);
  const webhookFlags = registerWebhookFlags(fs, podCallFlags.read);
  const rescheduleFlags = registerRescheduleFlags(fs);
  const restartOptions = registerRestartFlags(fs);
  const alertFlags = registerAlertFlags(fs);
  const reloader = registerReloaderFlags(fs);
  const csiOptions = registerCsiFlags(fs);
  const webFlags = registerWebFlags(fs);
  const compatFlags = registerCompatFlags(fs);
  return {
    runtimeFlags,
    podCallFlags,
    rolloutOptions,
    webhookFlags,
    rescheduleFlags,
    restartOptions,
    alertFlags,
    reloader,
    csiOptions,
    webFlags,
    compatFlags,
  };
}

/** The operator's capabilities, wired to the services they share; flags are read only once the operator starts. */
function operatorCapabilities(flags: OperatorFlags, restartOptions: () => RestartOptions): Capability[] {
  const { podCallFlags, rolloutOptions, webhookFlags, rescheduleFlags, csiOptions, webFlags } = flags;
  const reschedule = () => {
    if (!rescheduleFlags.enabled()) return undefined;
    const read = rescheduleFlags.read();
    return 'profiles' in read ? read : undefined;
  };
  // Services several capabilities share, built once, on first use, from the
  // operator's runtime, and handed to each capability that needs them: the
  // ZPDB budgets (eviction webhook, rolling deletes, status page) and replica
  // coordination (its own capability, and the rollout controller).
  const budgets = once(createZpdbBudgets);
  const coordination = once((runtime: Runtime) => createReplicaCoordination(runtime, podCallFlags.read()));
  // The health gates: evaluated by the rollout controller, shown by the status page.
  const gates = once((runtime: Runtime) => new RolloutGate(runtime));
  // The webhooks other capabilities define, served by the webhooks capability.
  const webhooks: WebhookHandlers = (runtime, config) => {
    const rescheduleConfig = reschedule();
    return [
      ...(rescheduleConfig ? rescheduleWebhooks(runtime, rescheduleConfig) : []),
      [POD_EVICTION_PATH, budgets(runtime).handler],
      [ZPDB_VALIDATION_PATH, zpdbValidationHandler],
      [HEALTH_CHECK_VALIDATION_PATH, healthCheckValidationHandler],
      [PREPARE_DOWNSCALE_PATH, prepareDownscaleWebhook(runtime, config)],
    ];
  };
  return [
    workloadsCapability,
    replicaCoordinationCapability(coordination),
    rolloutCapability(rolloutOptions, { budget: budgets, scaling: coordination, gate: gates }),
    webhooksCapability(() => webhookFlags.read(), webhooks),
    restartsCapability(restartOptions, csiOptions),
    webCapability(webFlags, budgets, gates),
  ];
}

/** The first problem with the parsed flags (a usage error, exit code 2), or undefined when they hold together. */
function invalidFlags(flags: OperatorFlags): string | undefined {
  const { runtimeFlags, podCallFlags, webhookFlags, rescheduleFlags, alertFlags } = flags;
  const rescheduleRead = rescheduleFlags.enabled() ? rescheduleFlags.read() : undefined;
  return (
    runtimeFlags.validate() ??
    podCallFlags.validate() ??
    webhookFlags.validate() ??
    alertFlags.validate() ??
    (rescheduleRead && 'errors' in rescheduleRead ? rescheduleRead.errors.join('\n') : undefined)
  );
}

/** Logging, the Kubernetes connection and tracing, then the operator until it stops; resolves to the exit code. */
async function runOperator(
  config: RuntimeConfig,
  compatWarnings: readonly string[],
  capabilities: Capability[],
  io: Io,
): Promise<number> {
  const logger = createLogger({ format: config.logFormat, level: config.logLevel, write: (line) => io.err(line) });
  for (const warning of compatWarnings) logger.warn(warning);
  let kubeConfig;
  try {
    kubeConfig = loadOperatorKubeConfig({
      configFile: config.kubeConfigFile,
      apiUrl: config.kubeApiUrl,
      context: config.kubeContext,
      env: io.env,
    });
  } catch (error) {
    logger.error(
      error instanceof KubeConfigError ? error.message : `cannot load the Kubernetes configuration: ${String(error)}`,
    );
    return 1;
  }
  // OpenTelemetry tracing from the OTEL_* environment, as rollout-operator;
  // nothing is loaded when none is set. An exporter or protocol
  // rollout-operator would refuse stops the start the same way.
  let tracing: Tracing | undefined;
  try {
    tracing = await startTracing(io.env, { logger, version });
  } catch (error) {
    logger.error(error instanceof Error ? error.message : String(error));
    logger.flush();
    return 1;
  }
  logger.info('starting stateward', {
    version,
    namespace: config.namespace,
    watchNamespaces: config.watchNamespaces.join(','),
    leaderElection: config.leaderElection.enabled,
  });
  const registry = createRegistry();
  const operator = new Operator({ config, kubeConfig, logger, registry, capabilities, version });
  const signals = io.signals ?? process;
  signals.on('SIGTERM', () => operator.requestStop('SIGTERM'));
  signals.on('SIGINT', () => operator.requestStop('SIGINT'));
  const fatal = reportFaults(io.faults ?? process, {
    logger,
    registry,
    stop: (reason) => operator.requestStop(reason),
    graceMs: config.shutdownGraceMs,
  });
  try {
    await operator.run();
  } catch (error) {
    logger.error('operator failed', { err: error instanceof Error ? error.message : String(error) });
    await tracing?.shutdown();
    logger.flush();
    return 1;
  }
  await tracing?.shutdown();
  logger.flush();
  return fatal.happened ? 1 : 0;
}

/** `make`'s value for the first runtime asked for, kept: one operator, one runtime. */
function once<T>(make: (runtime: Runtime) => T): (runtime: Runtime) => T {
  let made: { runtime: Runtime; value: T } | undefined;
  return (runtime) => {
    if (made === undefined) made = { runtime, value: make(runtime) };
    else if (made.runtime !== runtime) throw new Error('a shared service was asked for by a second runtime');
    return made.value;
  };
}
