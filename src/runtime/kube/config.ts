// Which cluster the operator talks to (source.ts's policy, the operator's
// order): -kubernetes.config-file alone, else the files of KUBECONFIG merged,
// else the in-cluster configuration in a pod, else ~/.kube/config.
// -kubernetes.context picks another context, -kubernetes.api-url replaces the
// server of the kubeconfig's cluster (as client-go's BuildConfigFromFlags).
// rollout-operator's pair (-kubernetes.api-url with -kubernetes.config-file)
// means what it meant there.
import { existsSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { inClusterKubeConfig, KubeConfigError, type KubeConfig } from './kubeconfig.ts';
import { checkProxy, chooseKubeconfig, loadKubeconfigFiles } from './source.ts';

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeConfigSource {
  configFile: string;
  apiUrl: string;
  /** -kubernetes.context: '' for the kubeconfig's current context. */
  context?: string;
  /** For tests: where the in-cluster ServiceAccount files live. */
  serviceAccountDir?: string;
  env?: NodeJS.ProcessEnv;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The pod's ServiceAccount: its token (re-read as it rotates), CA and namespace. */
export function loadInClusterConfig(env: NodeJS.ProcessEnv, dir = SERVICE_ACCOUNT_DIR): KubeConfig {
  const host = env['KUBERNETES_SERVICE_HOST'];
  if (!host || !env['KUBERNETES_SERVICE_PORT']) {
    throw new KubeConfigError(
      'not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST/PORT are unset), and no kubeconfig: pass -kubernetes.config-file, set KUBECONFIG, or create ~/.kube/config',
    );
  }
  if (!existsSync(`${dir}/token`))
    throw new KubeConfigError(`in-cluster configuration: no ServiceAccount token at ${dir}/token`);
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${env['KUBERNETES_SERVICE_PORT']}`;
  return inClusterKubeConfig({ server, dir });
}

function checkApiUrl(apiUrl: string): void {
  let url: URL;
  try {
    url = new URL(apiUrl);
  } catch {
    throw new KubeConfigError(`-kubernetes.api-url=${apiUrl}: not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new KubeConfigError(`-kubernetes.api-url=${apiUrl}: must be http or https`);
}

export function loadKubeConfig(source: KubeConfigSource): KubeConfig {
  const { configFile, apiUrl, context = '' } = source;
  const env = source.env ?? process.env;
  if (apiUrl) checkApiUrl(apiUrl);
  let choice;
  try {
    choice = chooseKubeconfig({ file: configFile, fileFlag: '-kubernetes.config-file', env, order: 'operator' });
  } catch (error) {
    throw new KubeConfigError(messageOf(error));
  }
  if (choice.kind !== 'files') {
    if (apiUrl)
      throw new KubeConfigError(
        `-kubernetes.api-url=${apiUrl} needs a kubeconfig for its credentials: pass -kubernetes.config-file or set KUBECONFIG`,
      );
    if (context)
      throw new KubeConfigError(
        `-kubernetes.context=${context}: there is no kubeconfig, only the in-cluster configuration`,
      );
    const inCluster = loadInClusterConfig(env, source.serviceAccountDir);
    checkProxy(inCluster, env);
    return inCluster;
  }
  const from = choice.from === '-kubernetes.config-file' ? `-kubernetes.config-file=${configFile}` : choice.from;
  try {
    const kubeConfig = loadKubeconfigFiles(choice.files, {
      context,
      contextFlag: '-kubernetes.context',
      ...(apiUrl ? { server: apiUrl } : {}),
    });
    checkProxy(kubeConfig, env);
    return kubeConfig;
  } catch (error) {
    throw new KubeConfigError(`${from}: ${messageOf(error)}`);
  }
}
