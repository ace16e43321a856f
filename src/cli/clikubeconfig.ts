// Which cluster a command-line tool (`stateward status`, `stateward doctor`)
// talks to: the commands' policy in runtime/kube/source.ts (kubectl's rule:
// --kubeconfig, else the files of $KUBECONFIG merged, else ~/.kube/config,
// else the in-cluster configuration in a pod; --context picks another
// context), its problems reported as CliErrors whose message fits on one
// line.
import type { KubeConfig } from '../runtime/kube/kubeconfig.ts';
import { loadCommandKubeConfig, type CommandKubeConfigSource } from '../runtime/kube/source.ts';

/** A failure to report in one line, without a stack trace, and exit 1 with. */
export class CliError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CliError';
  }
}

/**
 * The configuration to connect with and the namespace its context names
 * ("default" when none; in a pod, the pod's own namespace).
 */
export function loadCliKubeConfig(options: CommandKubeConfigSource): { kubeConfig: KubeConfig; namespace: string } {
  try {
    return loadCommandKubeConfig(options);
  } catch (error) {
    throw new CliError(error instanceof Error ? error.message : String(error), { cause: error });
  }
}
