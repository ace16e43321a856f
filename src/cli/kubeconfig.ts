// Which cluster a command-line tool (`stateward status`, `stateward doctor`)
// talks to, by kubectl's rule: --kubeconfig, else the files of $KUBECONFIG
// (merged, the first to define a name wins), else ~/.kube/config; with none
// of them, the in-cluster configuration when running in a pod. --context
// picks another context than the current one. Every problem is a CliError
// whose message fits on one line.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { loadKubeConfig } from '../runtime/kube/config.ts';
import { KubeConfig, quote, readKubeConfigFile } from '../runtime/kube/kubeconfig.ts';

/** A failure to report in one line, without a stack trace, and exit 1 with. */
export class CliError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CliError';
  }
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface CliKubeConfigOptions {
  /** --kubeconfig: the one file to read ('' for the default search). */
  kubeconfig: string;
  /** --context: the context to use ('' for the current one). */
  context: string;
  env: NodeJS.ProcessEnv;
  /** For tests: where the in-cluster ServiceAccount files live. */
  serviceAccountDir?: string;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** kubectl's merge of several kubeconfig files: the first file to name a cluster, user, context or current-context wins. */
function mergeFirstWins(configs: readonly KubeConfig[]): KubeConfig {
  const pick = <T extends { name: string }>(lists: readonly (readonly T[])[]): T[] => {
    const seen = new Map<string, T>();
    for (const list of lists) for (const item of list) if (!seen.has(item.name)) seen.set(item.name, item);
    return [...seen.values()];
  };
  return new KubeConfig({
    clusters: pick(configs.map((c) => c.getClusters())),
    users: pick(configs.map((c) => c.getUsers())),
    contexts: pick(configs.map((c) => c.getContexts())),
    currentContext: configs.map((c) => c.getCurrentContext()).find((c) => c) ?? '',
  });
}

function loadFile(path: string): KubeConfig {
  try {
    return readKubeConfigFile(path);
  } catch (error) {
    // One line: a YAML parser's message can carry a code frame below its first line.
    throw new CliError(messageOf(error).split('\n')[0]!.trim(), { cause: error });
  }
}

/** The kubeconfig files to read, by kubectl's precedence; none when there is no kubeconfig at all. */
function kubeconfigFiles(options: CliKubeConfigOptions): string[] {
  const { env } = options;
  if (options.kubeconfig) return [options.kubeconfig];
  const list = env['KUBECONFIG'];
  if (list) {
    // Files of KUBECONFIG that do not exist are skipped, as kubectl does; all of them missing is a mistake worth naming.
    const files = list.split(delimiter).filter((f) => f !== '' && existsSync(f));
    if (files.length === 0) throw new CliError(`none of the files in KUBECONFIG exists: ${list}`);
    return files;
  }
  const path = join(env['HOME'] || homedir(), '.kube', 'config');
  return existsSync(path) ? [path] : [];
}

function inCluster(options: CliKubeConfigOptions): { kubeConfig: KubeConfig; namespace: string } {
  if (options.context)
    throw new CliError(`--context=${options.context}: there is no kubeconfig, only the in-cluster configuration`);
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  let kubeConfig: KubeConfig;
  try {
    kubeConfig = loadKubeConfig({ configFile: '', apiUrl: '', env: options.env, serviceAccountDir: dir });
  } catch (error) {
    throw new CliError(messageOf(error));
  }
  // The pod's namespace file, read by the loader; outside a pod's usual layout, the default namespace.
  return { kubeConfig, namespace: kubeConfig.getCurrentContextObject()?.namespace || 'default' };
}

/**
 * The configuration to connect with and the namespace its context names
 * ("default" when none; in a pod, the pod's own namespace).
 */
export function loadCliKubeConfig(options: CliKubeConfigOptions): { kubeConfig: KubeConfig; namespace: string } {
  const { env } = options;
  const files = kubeconfigFiles(options);
  if (files.length === 0) {
    if (env['KUBERNETES_SERVICE_HOST'] && env['KUBERNETES_SERVICE_PORT']) return inCluster(options);
    throw new CliError('no kubeconfig found: pass --kubeconfig=<file>, set KUBECONFIG, or create ~/.kube/config');
  }
  const where = `kubeconfig ${files.join(delimiter)}`;
  const kubeConfig = files.length === 1 ? loadFile(files[0]!) : mergeFirstWins(files.map(loadFile));
  if (options.context) {
    if (!kubeConfig.getContextObject(options.context)) {
      throw new CliError(
        `--context=${options.context}: no such context in the kubeconfig (${
          kubeConfig
            .getContexts()
            .map((c) => c.name)
            .join(', ') || 'it has none'
        })`,
      );
    }
    kubeConfig.setCurrentContext(options.context);
  }
  const current = kubeConfig.getCurrentContext();
  if (!current) throw new CliError(`${where} has no current-context: pass --context=<name>`);
  const context = kubeConfig.getContextObject(current);
  if (!context) throw new CliError(`current-context ${quote(current)} is not defined in ${where}`);
  if (!kubeConfig.getCluster(context.cluster))
    throw new CliError(
      `context ${quote(current)} names cluster ${quote(context.cluster)}, which is not defined in ${where}`,
    );
  // What kubectl checks of the context in use: the user, the cluster's server, the files they name, nothing unsupported.
  try {
    kubeConfig.confirmUsable();
  } catch (error) {
    throw new CliError(`${where}: ${messageOf(error)}`);
  }
  return { kubeConfig, namespace: context.namespace || 'default' };
}
