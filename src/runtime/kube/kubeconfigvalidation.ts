// Several kubeconfigs merged into one, and the context in use checked, as
// client-go's clientcmd does: KUBECONFIG's files merged as its loader merges
// them (the first to name a cluster, user, context or current-context wins),
// and only the cluster and user in use checked (validateClusterInfo and
// validateAuthInfo, through ConfirmUsable), so a file whose other entries are
// incomplete still loads. Besides client-go's rules, what Stateward refuses:
// an auth-provider other than oidc (gcp and azure, removed from client-go,
// each with the exec plugin that replaces it), a socks5 proxy-url, an exec
// plugin that needs a terminal. Every problem is a one-line KubeConfigError
// naming the entry.
import { impersonationProblem } from './impersonation.ts';
import {
  impersonationOf,
  KubeConfigError,
  quote,
  type Cluster,
  type KubeConfigData,
  type User,
} from './kubeconfigfile.ts';
import { oidcProblem } from './oidc.ts';
import { parseProxyUrl } from './proxy.ts';

const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'];
const INTERACTIVE_MODES = ['Never', 'IfAvailable', 'Always'];

/** kubectl's merge of several kubeconfig files: the first file to name a cluster, user, context or current-context wins. */
export function mergeFirstWins(configs: readonly KubeConfigData[]): KubeConfigData {
  const pick = <T extends { name: string }>(lists: readonly (readonly T[])[]): T[] => {
    const seen = new Map<string, T>();
    for (const list of lists) for (const item of list) if (!seen.has(item.name)) seen.set(item.name, item);
    return [...seen.values()];
  };
  return {
    clusters: pick(configs.map((c) => c.clusters)),
    users: pick(configs.map((c) => c.users)),
    contexts: pick(configs.map((c) => c.contexts)),
    currentContext: configs.map((c) => c.currentContext).find((c) => c) ?? '',
  };
}

/** client-go's validateClusterInfo for the cluster in use, plus what Stateward refuses. */
export function checkCluster(cluster: Cluster): void {
  const which = `cluster ${quote(cluster.name)}`;
  if (!cluster.server) throw new KubeConfigError(`${which} has no server`);
  let url: URL | undefined;
  try {
    url = new URL(cluster.server);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:'))
    throw new KubeConfigError(`${which}: server ${quote(cluster.server)} is not an http or https URL`);
  const proxy = cluster.proxyUrl === undefined ? undefined : parseProxyUrl(cluster.proxyUrl);
  if (typeof proxy === 'string') throw new KubeConfigError(`${which}: proxy-url ${proxy}`);
  if (cluster.caData && cluster.caFile)
    throw new KubeConfigError(`${which}: certificate-authority and certificate-authority-data are both set`);
  if (cluster.skipTLSVerify && (cluster.caData || cluster.caFile))
    throw new KubeConfigError(`${which}: a certificate authority and insecure-skip-tls-verify cannot both be set`);
}

/** Why an auth-provider is refused, and the exec credential plugin that replaces it. */
const AUTH_PROVIDER_WAY_OUT: Record<string, string> = {
  gcp: '(client-go removed it in 1.26): use the exec credential plugin gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin; gcloud container clusters get-credentials writes the entry)',
  azure:
    '(client-go removed it in 1.26): use the exec credential plugin kubelogin (github.com/Azure/kubelogin; kubelogin convert-kubeconfig rewrites the entry)',
};

/** The oidc auth-provider's config is complete; any other auth-provider is refused with the way out. */
function checkAuthProvider(who: string, user: User): void {
  if (user.authProvider?.name === 'oidc') {
    const problem = oidcProblem(user.authProvider.config);
    if (problem) throw new KubeConfigError(`${who}: ${problem}`);
    if (user.exec) throw new KubeConfigError(`${who}: an auth-provider and exec cannot both be set`);
  } else if (user.authProvider) {
    throw new KubeConfigError(
      `${who} uses auth-provider ${quote(user.authProvider.name)}, which Stateward does not support ${AUTH_PROVIDER_WAY_OUT[user.authProvider.name] ?? '(it runs no auth-provider plugins): use an exec credential plugin instead'}`,
    );
  }
}

/** client-go's validateAuthInfo for the user in use, plus what Stateward refuses. */
export function checkUser(user: User): void {
  const who = `user ${quote(user.name)}`;
  checkAuthProvider(who, user);
  if ((user.token || user.tokenFile) && (user.username !== undefined || user.password !== undefined)) {
    throw new KubeConfigError(
      `${who} has more than one authentication method (a token and a username/password): only one is allowed`,
    );
  }
  if (user.certData && user.certFile)
    throw new KubeConfigError(`${who}: client-certificate and client-certificate-data are both set`);
  if (user.keyData && user.keyFile) throw new KubeConfigError(`${who}: client-key and client-key-data are both set`);
  const hasCert = Boolean(user.certData || user.certFile);
  const hasKey = Boolean(user.keyData || user.keyFile);
  if (hasCert && !hasKey) throw new KubeConfigError(`${who}: a client certificate needs client-key or client-key-data`);
  if (hasKey && !hasCert)
    throw new KubeConfigError(`${who}: a client key needs client-certificate or client-certificate-data`);
  // Sent as a header: HTTP forbids these characters there.
  if (user.token !== undefined && /[\r\n\0]/.test(user.token))
    throw new KubeConfigError(`${who}: token contains a line break or a NUL character`);
  const impersonation = impersonationProblem(impersonationOf(user));
  if (impersonation) throw new KubeConfigError(`${who}: ${impersonation}`);
  const exec = user.exec;
  if (exec) {
    if (!exec.command) throw new KubeConfigError(`${who}: exec needs a command`);
    if (!EXEC_API_VERSIONS.includes(exec.apiVersion)) {
      throw new KubeConfigError(
        `${who}: exec apiVersion ${exec.apiVersion ? quote(exec.apiVersion) : 'is missing'}${exec.apiVersion ? ' is not supported' : ''}: use ${EXEC_API_VERSIONS.join(' or ')}`,
      );
    }
    for (const variable of exec.env)
      if (!variable.name) throw new KubeConfigError(`${who}: exec env has a variable without a name`);
    // client-go defaults v1beta1 to IfAvailable and requires v1 to say.
    const mode = exec.interactiveMode ?? (exec.apiVersion.endsWith('/v1beta1') ? 'IfAvailable' : undefined);
    if (mode === undefined)
      throw new KubeConfigError(
        `${who}: exec interactiveMode must be set for ${exec.apiVersion} (Never, IfAvailable or Always)`,
      );
    if (!INTERACTIVE_MODES.includes(mode))
      throw new KubeConfigError(`${who}: exec interactiveMode ${quote(mode)} is not Never, IfAvailable or Always`);
    if (mode === 'Always')
      throw new KubeConfigError(
        `${who}: exec interactiveMode Always needs a terminal, and Stateward runs credential plugins without one`,
      );
  }
}
