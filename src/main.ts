// Entry point of the stateward executable: flags, logging, the shared
// runtime, the capabilities, and signal handling.
import { readFileSync } from 'node:fs';
import { registerCompatFlags } from './runtime/compat.ts';
import { registerRuntimeFlags } from './runtime/config.ts';
import { FlagSet } from './runtime/flags/flagset.ts';
import { loadKubeConfig, KubeConfigError } from './runtime/kube/config.ts';
import { validateElectionTimings } from './runtime/leaderelection/elector.ts';
import { type FaultSource, reportFaults } from './runtime/faults.ts';
import { createLogger } from './runtime/log/logger.ts';
import { createRegistry } from './runtime/metrics.ts';
import { Operator, type Capability } from './runtime/operator.ts';
import { startTracing, type Tracing } from './runtime/tracing/tracing.ts';
import { workloadsCapability } from './workloads/cache.ts';
import { registerPodCallFlags } from './workloads/podclient.ts';
import { registerRolloutFlags, rolloutCapability } from './rollout/controller.ts';
import { replicaCoordinationCapability } from './downscale/capability.ts';
import { registerWebhookFlags } from './webhooks/config.ts';
import { webhooksCapability } from './webhooks/capability.ts';
import { registerRescheduleFlags } from './drain/reschedule/webhook.ts';
import { registerRestartFlags, restartsCapability } from './restarts/controller.ts';
import { registerWebFlags, webCapability } from './web/capability.ts';

export const version: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

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
  const command = argv[0] !== undefined ? COMMANDS[argv[0]] : undefined;
  if (command) return command(argv.slice(1), io);
  const fs = new FlagSet('stateward');
  const showVersion = fs.bool('version', false, 'Print the version and exit.');
  const runtimeFlags = registerRuntimeFlags(fs);
  const podCallFlags = registerPodCallFlags(fs);
  const rolloutOptions = registerRolloutFlags(fs);
  const webhookFlags = registerWebhookFlags(fs, podCallFlags.read);
  const rescheduleFlags = registerRescheduleFlags(fs);
  const restartOptions = registerRestartFlags(fs);
  const webFlags = registerWebFlags(fs);
  const compatFlags = registerCompatFlags(fs);
  const reschedule = () => {
    if (!rescheduleFlags.enabled()) return undefined;
    const read = rescheduleFlags.read();
    return 'config' in read ? read.config : undefined;
  };
  // Replica coordination before the rollout controller, which uses it.
  const capabilities: Capability[] = [workloadsCapability, replicaCoordinationCapability(() => ({ podCalls: podCallFlags.read() })), rolloutCapability(rolloutOptions), webhooksCapability(() => ({ ...webhookFlags.read(), reschedule: reschedule() })), restartsCapability(restartOptions), webCapability(webFlags)];
  const parsed = fs.parse(argv, io.env);
  if (parsed.kind === 'help') {
    io.err(parsed.usage);
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
  const rescheduleRead = rescheduleFlags.enabled() ? rescheduleFlags.read() : undefined;
  const invalid = runtimeFlags.validate() ?? podCallFlags.validate() ?? webhookFlags.validate() ?? (rescheduleRead && 'errors' in rescheduleRead ? rescheduleRead.errors.join('\n') : undefined);
  const config = runtimeFlags.read();
  const invalidElection = config.leaderElection.enabled ? validateElectionTimings(config.leaderElection) : undefined;
  if (invalid || invalidElection) {
    io.err(`${invalid ?? invalidElection}\n`);
    return 2;
  }
  const logger = createLogger({ format: config.logFormat, level: config.logLevel, write: (line) => io.err(line) });
  for (const warning of compatFlags.warnings()) logger.warn(warning);
  let kubeConfig;
  try {
    kubeConfig = loadKubeConfig({ configFile: config.kubeConfigFile, apiUrl: config.kubeApiUrl, env: io.env });
  } catch (error) {
    logger.error(error instanceof KubeConfigError ? error.message : `cannot load the Kubernetes configuration: ${String(error)}`);
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
  logger.info('starting stateward', { version, namespace: config.namespace, watchNamespaces: config.watchNamespaces.join(','), leaderElection: config.leaderElection.enabled });
  const registry = createRegistry();
  const operator = new Operator({ config, kubeConfig, logger, registry, capabilities, version });
  const signals = io.signals ?? process;
  signals.on('SIGTERM', () => operator.requestStop('SIGTERM'));
  signals.on('SIGINT', () => operator.requestStop('SIGINT'));
  const fatal = reportFaults(io.faults ?? process, { logger, registry, stop: (reason) => operator.requestStop(reason), graceMs: config.shutdownGraceMs });
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
