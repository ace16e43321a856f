// Stateward's own kubeconfig: the KubeConfig a KubeClient is given, which
// ties together what client-go spreads over clientcmd and its transport:
//
// - kubeconfigfile.ts: the model (clusters, users, contexts,
//   current-context) and the parser from YAML or JSON to it;
// - kubeconfigvalidation.ts: KUBECONFIG's files merged, and the context in
//   use checked (confirmUsable, as client-go's ConfirmUsable);
// - credentials.ts: per request, the TLS material and the authentication
//   headers, with their caches (token and certificate files re-read as they
//   rotate); execplugin.ts runs exec credential plugins, oidc.ts the oidc
//   auth-provider, impersonation.ts writes the Impersonate-* headers;
// - source.ts: which kubeconfig the operator and the commands connect with.
//
// It replaces @kubernetes/client-node's KubeConfig, whose module loads the
// whole generated API client (869 modules; importing the operator without it
// costs ~0.7 s less CPU and ~42 MB less RSS, see docs/runtime.md) for the
// little that Stateward used of it, and which follows client-go less closely
// (docs/runtime.md lists where).
import { readFileSync } from 'node:fs';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import { dirname, join } from 'node:path';
import { Credentials, type CredentialOptions } from './credentials.ts';
import {
  KubeConfigError,
  parseKubeConfigData,
  quote,
  type Cluster,
  type Context,
  type KubeConfigData,
  type User,
} from './kubeconfigfile.ts';
import { checkCluster, checkUser } from './kubeconfigvalidation.ts';

/**
 * What KubeClient needs of a configuration: the current cluster, and per
 * request the TLS options and headers (filled into `options` as Node's https
 * options: ca, cert, key, rejectUnauthorized, servername, headers). Optional
 * credentialsRejected is told of a 401 with the Authorization header sent, so
 * that a cached credential the server no longer accepts is fetched again.
 */
export interface KubeClientConfig {
  getCurrentCluster(): {
    readonly name: string;
    readonly server: string;
    readonly proxyUrl?: string | undefined;
  } | null;
  applyToHTTPSOptions(options: HttpsRequestOptions): Promise<void>;
  credentialsRejected?(authorization: string | undefined): void;
}

export class KubeConfig implements KubeClientConfig {
  readonly clusters: readonly Cluster[];
  readonly users: readonly User[];
  readonly contexts: readonly Context[];
  currentContext: string;
  private readonly options: CredentialOptions;
  private readonly credentials: Credentials;
  /** The cluster and user last checked by checkCluster and checkUser. */
  private checked: string | undefined;

  constructor(data: KubeConfigData, options: CredentialOptions = {}) {
    this.clusters = data.clusters;
    this.users = data.users;
    this.contexts = data.contexts;
    this.currentContext = data.currentContext;
    this.options = options;
    this.credentials = new Credentials(options);
  }

  getClusters(): readonly Cluster[] {
    return this.clusters;
  }

  getUsers(): readonly User[] {
    return this.users;
  }

  getContexts(): readonly Context[] {
    return this.contexts;
  }

  getCurrentContext(): string {
    return this.currentContext;
  }

  setCurrentContext(name: string): void {
    this.currentContext = name;
  }

  getContextObject(name: string): Context | null {
    return this.contexts.find((c) => c.name === name) ?? null;
  }

  getCluster(name: string): Cluster | null {
    return this.clusters.find((c) => c.name === name) ?? null;
  }

  getUser(name: string): User | null {
    return this.users.find((u) => u.name === name) ?? null;
  }

  getCurrentContextObject(): Context | null {
    return this.getContextObject(this.currentContext);
  }

  getCurrentCluster(): Cluster | null {
    const context = this.getCurrentContextObject();
    return context ? this.getCluster(context.cluster) : null;
  }

  getCurrentUser(): User | null {
    const context = this.getCurrentContextObject();
    return context?.user ? this.getUser(context.user) : null;
  }

  /** A copy whose current cluster has another server (-kubernetes.api-url, a test's proxy), with fresh credential caches. */
  withServer(server: string): KubeConfig {
    const current = this.getCurrentCluster();
    const clusters = this.clusters.map((c) => (c === current ? { ...c, server: server.replace(/\/+$/, '') } : c));
    return new KubeConfig(
      { clusters, users: this.users, contexts: this.contexts, currentContext: this.currentContext },
      this.options,
    );
  }

  /**
   * Checks the context in use, as client-go's ConfirmUsable: its cluster and
   * user are defined and complete, nothing unsupported is asked for, and the
   * files it names can be read. Throws a one-line KubeConfigError.
   */
  confirmUsable(): void {
    const { cluster, user } = this.current();
    checkCluster(cluster);
    if (user) checkUser(user);
    this.credentials.readFiles(cluster, user);
  }

  /** Fills in Node https options: ca, cert, key, rejectUnauthorized, servername, and the Authorization and Impersonate-* headers. */
  async applyToHTTPSOptions(options: HttpsRequestOptions): Promise<void> {
    const { cluster, user } = this.current();
    if (this.checked !== `${cluster.name}\n${user?.name}`) {
      // Whoever skipped confirmUsable still gets its refusals (an auth-provider is never silently ignored).
      checkCluster(cluster);
      if (user) checkUser(user);
      this.checked = `${cluster.name}\n${user?.name}`;
    }
    await this.credentials.apply(cluster, user, options);
  }

  /**
   * The server answered 401 to a request sent with this Authorization header:
   * the credential it carried is fetched again on the next request (the exec
   * plugin re-run, the token file re-read), unless it was replaced meanwhile.
   */
  credentialsRejected(authorization: string | undefined): void {
    const user = this.getCurrentUser();
    if (user) this.credentials.rejected(user, authorization);
  }

  private current(): { cluster: Cluster; user: User | null } {
    const context = this.getCurrentContextObject();
    if (!context) throw new KubeConfigError(`current-context ${quote(this.currentContext)} is not defined`);
    const cluster = context.cluster ? this.getCluster(context.cluster) : null;
    if (!context.cluster) throw new KubeConfigError(`context ${quote(context.name)} names no cluster`);
    if (!cluster)
      throw new KubeConfigError(
        `context ${quote(context.name)} names cluster ${quote(context.cluster)}, which is not defined`,
      );
    const user = context.user ? this.getUser(context.user) : null;
    if (context.user && !user)
      throw new KubeConfigError(
        `context ${quote(context.name)} names user ${quote(context.user)}, which is not defined`,
      );
    return { cluster, user };
  }
}

/**
 * Parses a kubeconfig's text. Relative paths are resolved against baseDir
 * (the file's directory), as kubectl does. Every problem is a KubeConfigError
 * whose message is one line.
 */
export function parseKubeConfig(text: string, options: CredentialOptions & { baseDir?: string } = {}): KubeConfig {
  return new KubeConfig(parseKubeConfigData(text, options.baseDir), options);
}

/** A kubeconfig file (for tools and tests; the operator and the commands word their own errors). */
export function readKubeConfigFile(path: string, options: CredentialOptions = {}): KubeConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new KubeConfigError(
      `cannot read kubeconfig ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
    );
  }
  try {
    return parseKubeConfig(text, { ...options, baseDir: dirname(path) });
  } catch (error) {
    throw new KubeConfigError(`${path} is not a valid kubeconfig: ${(error as Error).message}`);
  }
}

/** The in-cluster configuration: the ServiceAccount's token (re-read as it rotates), CA and namespace. */
export function inClusterKubeConfig(
  source: { server: string; dir: string },
  options: CredentialOptions = {},
): KubeConfig {
  const { server, dir } = source;
  const read = (file: string) => {
    try {
      return readFileSync(join(dir, file), 'utf8');
    } catch {
      return undefined;
    }
  };
  // As client-go: a ca.crt that is missing or holds no certificate leaves the system's roots.
  const ca = read('ca.crt');
  const namespace = read('namespace')?.trim() || undefined;
  return new KubeConfig(
    {
      clusters: [
        {
          name: 'in-cluster',
          server,
          caFile: ca?.includes('-----BEGIN') ? join(dir, 'ca.crt') : undefined,
          skipTLSVerify: false,
        },
      ],
      users: [{ name: 'in-cluster', tokenFile: join(dir, 'token') }],
      contexts: [{ name: 'in-cluster', cluster: 'in-cluster', user: 'in-cluster', namespace }],
      currentContext: 'in-cluster',
    },
    options,
  );
}
