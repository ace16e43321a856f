// Which kubeconfig to connect with: the operator's policy and the client
// commands' (`stateward status`, `stateward doctor`), side by side. They
// differ only in where the in-cluster configuration ranks:
//
// 1. the file named by a flag (-kubernetes.config-file, --kubeconfig): that file alone;
// 2. else $KUBECONFIG: its files merged as kubectl merges them (the first to
//    name a cluster, user, context or current-context wins; files that do not
//    exist are skipped, all of them missing is an error);
// 3. the operator (controller-runtime's order): the in-cluster configuration
//    in a pod, else ~/.kube/config;
//    the commands (kubectl's order): ~/.kube/config, else in-cluster.
//
// A context flag (-kubernetes.context, --context) picks another context than
// the current one. The operator's -kubernetes.api-url replaces the server of
// the kubeconfig's cluster (as client-go's BuildConfigFromFlags), so
// rollout-operator's pair (-kubernetes.api-url with -kubernetes.config-file)
// means what it meant there. The proxy the environment (HTTPS_PROXY,
// NO_PROXY) or proxy-url gives is checked too (proxy.ts). Every problem is a
// one-line KubeConfigError.
import { existsSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { inClusterKubeConfig, KubeConfig, readKubeConfigFile } from './kubeconfig.ts';
import { KubeConfigError, quote } from './kubeconfigfile.ts';
import { mergeFirstWins } from './kubeconfigvalidation.ts';
import { proxyFor } from './proxy.ts';

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

// ---------------------------------------------------------------- the operator's policy

export interface OperatorKubeConfigSource {
  configFile: string;
  apiUrl: string;
  /** -kubernetes.context: '' for the kubeconfig's current context. */
  context?: string;
  /** For tests: where the in-cluster ServiceAccount files live. */
  serviceAccountDir?: string;
  env?: NodeJS.ProcessEnv;
}

/** The configuration the operator connects with, from its flags and environment (controller-runtime's order). */
export function loadOperatorKubeConfig(source: OperatorKubeConfigSource): KubeConfig {
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

// ---------------------------------------------------------------- the commands' policy

export interface CommandKubeConfigSource {
  /** --kubeconfig: the one file to read ('' for the default search). */
  kubeconfig: string;
  /** --context: the context to use ('' for the current one). */
  context: string;
  env: NodeJS.ProcessEnv;
  /** For tests: where the in-cluster ServiceAccount files live. */
  serviceAccountDir?: string;
}

/**
 * The configuration a client command connects with (kubectl's order), and the
 * namespace its context names ("default" when none; in a pod, the pod's own
 * namespace).
 */
export function loadCommandKubeConfig(source: CommandKubeConfigSource): { kubeConfig: KubeConfig; namespace: string } {
  const choice = chooseKubeconfig({
    file: source.kubeconfig,
    fileFlag: '--kubeconfig',
    env: source.env,
    order: 'kubectl',
  });
  if (choice.kind === 'none')
    throw new KubeConfigError(
      'no kubeconfig found: pass --kubeconfig=<file>, set KUBECONFIG, or create ~/.kube/config',
    );
  let kubeConfig: KubeConfig;
  if (choice.kind === 'in-cluster') {
    if (source.context)
      throw new KubeConfigError(
        `--context=${source.context}: there is no kubeconfig, only the in-cluster configuration`,
      );
    kubeConfig = loadInClusterConfig(source.env, source.serviceAccountDir);
  } else {
    kubeConfig = loadKubeconfigFiles(choice.files, { context: source.context, contextFlag: '--context' });
  }
  checkProxy(kubeConfig, source.env);
  // In a pod, the namespace file the in-cluster loader read; outside a pod's usual layout, the default namespace.
  return { kubeConfig, namespace: kubeConfig.getCurrentContextObject()?.namespace || 'default' };
}

// ---------------------------------------------------------------- what both policies share

export type KubeconfigChoice =
  { kind: 'files'; files: string[]; from: string } | { kind: 'in-cluster' } | { kind: 'none' };

export interface ChoiceOptions {
  /** The file a flag names ('' for none), and the flag's name for messages. */
  file: string;
  fileFlag: string;
  env: NodeJS.ProcessEnv;
  /** 'operator': in-cluster before ~/.kube/config; 'kubectl': after it. */
  order: 'operator' | 'kubectl';
}

function inPod(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env['KUBERNETES_SERVICE_HOST'] && env['KUBERNETES_SERVICE_PORT']);
}

/** Where the configuration comes from, by the policy above. */
export function chooseKubeconfig(options: ChoiceOptions): KubeconfigChoice {
  const { env } = options;
  if (options.file) return { kind: 'files', files: [options.file], from: options.fileFlag };
  const list = env['KUBECONFIG'];
  if (list) {
    const files = list.split(delimiter).filter((f) => f !== '' && existsSync(f));
    if (files.length === 0) throw new KubeConfigError(`none of the files in KUBECONFIG exists: ${list}`);
    return { kind: 'files', files, from: 'KUBECONFIG' };
  }
  if (options.order === 'operator' && inPod(env)) return { kind: 'in-cluster' };
  const home = join(env['HOME'] || homedir(), '.kube', 'config');
  if (existsSync(home)) return { kind: 'files', files: [home], from: '~/.kube/config' };
  return inPod(env) ? { kind: 'in-cluster' } : { kind: 'none' };
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

function loadFile(path: string): KubeConfig {
  try {
    return readKubeConfigFile(path);
  } catch (error) {
    // One line: a YAML parser's message can carry a code frame below its first line.
    throw new KubeConfigError((error instanceof Error ? error.message : String(error)).split('\n')[0]!.trim());
  }
}

export interface FilesOptions {
  /** The context to use ('' for the current one), and the flag that names it. */
  context: string;
  contextFlag: string;
  /** A server that replaces the current cluster's (-kubernetes.api-url). */
  server?: string;
}

/**
 * The kubeconfig files read and merged, the context picked, and the context in
 * use checked as kubectl checks it (its cluster and user defined and complete,
 * the files they name readable, nothing unsupported).
 */
export function loadKubeconfigFiles(files: readonly string[], options: FilesOptions): KubeConfig {
  const { context, contextFlag } = options;
  const where = `kubeconfig ${files.join(delimiter)}`;
  let kubeConfig = files.length === 1 ? loadFile(files[0]!) : new KubeConfig(mergeFirstWins(files.map(loadFile)));
  if (context) {
    if (!kubeConfig.getContextObject(context)) {
      const names = kubeConfig.getContexts().map((c) => c.name);
      throw new KubeConfigError(
        `${contextFlag}=${context}: no such context in the kubeconfig (${names.join(', ') || 'it has none'})`,
      );
    }
    kubeConfig.setCurrentContext(context);
  }
  const current = kubeConfig.getCurrentContext();
  if (!current) throw new KubeConfigError(`${where} has no current-context: pass ${contextFlag}=<name>`);
  const contextObject = kubeConfig.getContextObject(current);
  if (!contextObject) throw new KubeConfigError(`current-context ${quote(current)} is not defined in ${where}`);
  if (!kubeConfig.getCluster(contextObject.cluster))
    throw new KubeConfigError(
      `context ${quote(current)} names cluster ${quote(contextObject.cluster)}, which is not defined in ${where}`,
    );
  if (options.server) kubeConfig = kubeConfig.withServer(options.server);
  try {
    kubeConfig.confirmUsable();
  } catch (error) {
    throw new KubeConfigError(`${where}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return kubeConfig;
}

/** The proxy the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) or proxy-url gives for the current cluster is usable. */
export function checkProxy(kubeConfig: KubeConfig, env: NodeJS.ProcessEnv): void {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) return;
  try {
    proxyFor(cluster.server, cluster.proxyUrl, env);
  } catch (error) {
    throw new KubeConfigError(error instanceof Error ? error.message : String(error));
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
