// Which cluster a command-line tool (`stateward status`, `stateward doctor`)
// talks to, by kubectl's rule: --kubeconfig, else the files of $KUBECONFIG
// (merged, the first to define a name wins), else ~/.kube/config; with none
// of them, the in-cluster configuration when running in a pod. --context
// picks another context than the current one. Every problem is a CliError
// whose message fits on one line.
import { loadInClusterConfig } from '../runtime/kube/config.ts';
import type { KubeConfig } from '../runtime/kube/kubeconfig.ts';
import { checkProxy, chooseKubeconfig, loadKubeconfigFiles } from '../runtime/kube/source.ts';

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

function inCluster(options: CliKubeConfigOptions): { kubeConfig: KubeConfig; namespace: string } {
  if (options.context)
    throw new CliError(`--context=${options.context}: there is no kubeconfig, only the in-cluster configuration`);
  let kubeConfig: KubeConfig;
  try {
    kubeConfig = loadInClusterConfig(options.env, options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR);
    checkProxy(kubeConfig, options.env);
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
  try {
    const choice = chooseKubeconfig({
      file: options.kubeconfig,
      fileFlag: '--kubeconfig',
      env: options.env,
      order: 'kubectl',
    });
    if (choice.kind === 'in-cluster') return inCluster(options);
    if (choice.kind === 'none')
      throw new CliError('no kubeconfig found: pass --kubeconfig=<file>, set KUBECONFIG, or create ~/.kube/config');
    const kubeConfig = loadKubeconfigFiles(choice.files, { context: options.context, contextFlag: '--context' });
    checkProxy(kubeConfig, options.env);
    return { kubeConfig, namespace: kubeConfig.getCurrentContextObject()?.namespace || 'default' };
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(messageOf(error), { cause: error });
  }
}
