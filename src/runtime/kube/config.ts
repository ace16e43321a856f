// Which cluster to talk to, by rollout-operator's rule: -kubernetes.api-url
// and -kubernetes.config-file together, or neither (in-cluster config).
import { existsSync, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { dirname } from 'node:path';
import { inClusterKubeConfig, KubeConfigError, parseKubeConfig, quote, type KubeConfig } from './kubeconfig.ts';

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeConfigSource {
  configFile: string;
  apiUrl: string;
  /** For tests: where the in-cluster ServiceAccount files live. */
  serviceAccountDir?: string;
  env?: NodeJS.ProcessEnv;
}

export function loadKubeConfig(source: KubeConfigSource): KubeConfig {
  const { configFile, apiUrl } = source;
  if (Boolean(configFile) !== Boolean(apiUrl)) {
    throw new KubeConfigError(
      '-kubernetes.api-url and -kubernetes.config-file must be set together, or neither (then the in-cluster configuration is used)',
    );
  }
  if (!configFile) {
    const env = source.env ?? process.env;
    const dir = source.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
    if (!env['KUBERNETES_SERVICE_HOST'] || !env['KUBERNETES_SERVICE_PORT']) {
      throw new KubeConfigError(
        'not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST/PORT are unset): pass -kubernetes.api-url and -kubernetes.config-file',
      );
    }
    if (!existsSync(`${dir}/token`))
      throw new KubeConfigError(`in-cluster configuration: no ServiceAccount token at ${dir}/token`);
    const host = env['KUBERNETES_SERVICE_HOST'];
    const server = `https://${isIPv6(host) ? `[${host}]` : host}:${env['KUBERNETES_SERVICE_PORT']}`;
    // The token file is re-read as it rotates (bound ServiceAccount tokens expire hourly).
    return inClusterKubeConfig({ server, dir });
  }
  let text: string;
  try {
    text = readFileSync(configFile, 'utf8');
  } catch (error) {
    throw new KubeConfigError(
      `-kubernetes.config-file=${configFile}: cannot read it: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
    );
  }
  let kc: KubeConfig;
  try {
    // Relative paths in it are relative to its directory, as client-go reads them.
    kc = parseKubeConfig(text, { baseDir: dirname(configFile) });
  } catch (error) {
    throw new KubeConfigError(
      `-kubernetes.config-file=${configFile}: not a valid kubeconfig: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const context = kc.getContextObject(kc.getCurrentContext());
  if (!context)
    throw new KubeConfigError(
      `-kubernetes.config-file=${configFile}: current-context ${quote(kc.getCurrentContext())} is not defined`,
    );
  const cluster = kc.getCluster(context.cluster);
  if (!cluster)
    throw new KubeConfigError(
      `-kubernetes.config-file=${configFile}: context ${quote(context.name)} names cluster ${quote(context.cluster)}, which is not defined`,
    );
  let url: URL;
  try {
    url = new URL(apiUrl);
  } catch {
    throw new KubeConfigError(`-kubernetes.api-url=${apiUrl}: not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new KubeConfigError(`-kubernetes.api-url=${apiUrl}: must be http or https`);
  // Like client-go's BuildConfigFromFlags: the URL overrides the kubeconfig's server.
  const configured = kc.withServer(apiUrl);
  try {
    configured.confirmUsable();
  } catch (error) {
    throw new KubeConfigError(
      `-kubernetes.config-file=${configFile}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return configured;
}
