// Which kubeconfig to connect with: one policy for the operator and the
// client commands, which differ only in where the in-cluster configuration
// ranks.
//
// 1. the file named by a flag (-kubernetes.config-file, --kubeconfig): that file alone;
// 2. else $KUBECONFIG: its files merged as kubectl merges them (the first to
//    name a cluster, user, context or current-context wins; files that do not
//    exist are skipped, all of them missing is an error);
// 3. the operator (controller-runtime's order): the in-cluster configuration
//    in a pod, else ~/.kube/config;
//    the commands (kubectl's order): ~/.kube/config, else in-cluster.
//
// A context flag picks another context than the current one. Every problem is
// a one-line KubeConfigError. checkProxy checks the proxy the environment
// (HTTPS_PROXY, NO_PROXY) or proxy-url gives (proxy.ts).
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { KubeConfig, KubeConfigError, quote, readKubeConfigFile } from './kubeconfig.ts';
import { proxyFor } from './proxy.ts';

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

/** kubectl's merge of several kubeconfig files: the first file to name a cluster, user, context or current-context wins. */
export function mergeFirstWins(configs: readonly KubeConfig[]): KubeConfig {
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
  let kubeConfig = files.length === 1 ? loadFile(files[0]!) : mergeFirstWins(files.map(loadFile));
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
