// What a request carries for a kubeconfig's cluster and user, as client-go's
// transport builds it: the TLS material of the connection pool (CA, client
// certificate and key, from a file or the kubeconfig's data) and the
// authentication headers (a bearer token, tokenFile, basic auth, an exec
// plugin's credential (execplugin.ts), the oidc auth-provider's id-token
// (oidc.ts), impersonation (impersonation.ts)). A static token, basic auth or
// client certificate takes precedence over an exec plugin, as in client-go.
//
// Files are cached and re-read as client-go re-reads them: tokenFile at most
// every 50 s (its cached file token source: rotated tokens are picked up,
// the last good one kept while the file is unreadable), certificate and CA
// files every minute. TLS material is checked with Node's own parser once
// per change, so that a bad PEM is named rather than failing a connection.
// Secrets (tokens, keys) never appear in an error message.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import { createSecureContext } from 'node:tls';
import { DEFAULT_EXEC_OUTPUT_LIMIT, DEFAULT_EXEC_TIMEOUT_MS, ExecCredentials } from './execplugin.ts';
import { impersonationHeaders } from './impersonation.ts';
import { impersonationOf, KubeConfigError, quote, type Cluster, type User } from './kubeconfigfile.ts';
import { oidcConfigOf, OidcTokenSource } from './oidc.ts';

export interface CredentialOptions {
  /** Wall clock (exec credential expiry) and monotonic clock (file re-reads); default the system's. */
  clock?: { now(): number; monotonic(): number };
  /** How long an exec plugin may run (default 30 s). */
  execTimeoutMs?: number;
  /** How much an exec plugin may print on stdout (default 1 MiB). */
  execOutputLimit?: number;
}

/** client-go's file token source: a token is good for a minute, re-read 10 s before. */
const TOKEN_FILE_REFRESH_MS = 50_000;
/** Certificate files are re-read as often, so rotated ones are picked up too. */
const TLS_FILE_REFRESH_MS = 60_000;

interface FileState {
  content: Buffer;
  readAt: number;
}

interface TlsMaterial {
  ca?: Buffer | undefined;
  cert?: Buffer | string | undefined;
  key?: Buffer | string | undefined;
}

/** The credentials of one kubeconfig's users, with their caches (file contents, decoded data, exec and oidc tokens). */
export class Credentials {
  private readonly clock: { now(): number; monotonic(): number };
  private readonly files = new Map<string, FileState>();
  private readonly exec: ExecCredentials;
  private readonly oidc = new Map<string, OidcTokenSource>();
  private readonly decoded = new Map<string, Buffer>();
  /** The TLS material last checked with createSecureContext (by identity: caches return the same objects while unchanged). */
  private checkedTls: TlsMaterial | undefined;

  constructor(options: CredentialOptions = {}) {
    this.clock = options.clock ?? { now: () => Date.now(), monotonic: () => performance.now() };
    this.exec = new ExecCredentials(() => this.clock.now(), {
      timeoutMs: options.execTimeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS,
      outputLimit: options.execOutputLimit ?? DEFAULT_EXEC_OUTPUT_LIMIT,
    });
  }

  /** Reads every file the cluster and user name (the first read of the caches): unreadable is an error now, not at the first request. */
  readFiles(cluster: Cluster, user: User | null): void {
    this.tlsMaterial(cluster, user);
    if (user?.tokenFile) this.tokenFromFile(user);
  }

  /** Fills in Node https options: ca, cert, key, rejectUnauthorized, servername, and the Authorization and Impersonate-* headers. */
  async apply(cluster: Cluster, user: User | null, options: HttpsRequestOptions): Promise<void> {
    const tls = this.tlsMaterial(cluster, user);
    const headers: Record<string, string | string[]> = {};
    if (user) {
      if (user.token || user.tokenFile)
        headers['Authorization'] = `Bearer ${user.tokenFile ? this.tokenFromFile(user) : user.token}`;
      else if (user.username !== undefined || user.password !== undefined)
        headers['Authorization'] =
          `Basic ${Buffer.from(`${user.username ?? ''}:${user.password ?? ''}`).toString('base64')}`;
      else if (user.exec && !tls.cert && !tls.key) {
        const credential = await this.exec.credential(user, () => this.clusterInfo(cluster));
        if (credential.token) headers['Authorization'] = `Bearer ${credential.token}`;
        if (credential.cert) {
          tls.cert = credential.cert;
          tls.key = credential.key;
        }
      } else if (user.authProvider?.name === 'oidc') headers['Authorization'] = `Bearer ${await this.oidcToken(user)}`;
      Object.assign(headers, impersonationHeaders(impersonationOf(user)));
    }
    this.checkTls(tls, cluster, user);
    if (tls.ca) options.ca = tls.ca;
    if (tls.cert) options.cert = tls.cert;
    if (tls.key) options.key = tls.key;
    if (cluster.skipTLSVerify) options.rejectUnauthorized = false;
    if (cluster.tlsServerName) options.servername = cluster.tlsServerName;
    options.headers = { ...options.headers, ...headers };
  }

  /**
   * The server answered 401 to a request sent with this Authorization header:
   * the credential it carried is fetched again on the next request (the exec
   * plugin re-run, the token file re-read), unless it was replaced meanwhile.
   */
  rejected(user: User, authorization: string | undefined): void {
    if (user.tokenFile) {
      const state = this.files.get(user.tokenFile);
      if (state && authorization === `Bearer ${state.content.toString('utf8').trim()}`) state.readAt = -Infinity;
    }
    if (authorization?.startsWith('Bearer ')) this.oidc.get(user.name)?.rejected(authorization.slice(7));
    this.exec.rejected(user.name, authorization);
  }

  /** The oidc auth-provider's id-token, refreshed at the issuer when it expired (oidc.ts). */
  private async oidcToken(user: User): Promise<string> {
    let source = this.oidc.get(user.name);
    if (!source) {
      const what = `user ${quote(user.name)}: idp-certificate-authority`;
      const config = oidcConfigOf(user.authProvider!.config, (path) => this.file(path, TLS_FILE_REFRESH_MS, what));
      source = new OidcTokenSource(config, () => this.clock.now());
      this.oidc.set(user.name, source);
    }
    try {
      return await source.token();
    } catch (error) {
      throw new KubeConfigError(`user ${quote(user.name)}: oidc: ${(error as Error).message}`);
    }
  }

  private data(base64: string): Buffer {
    let buffer = this.decoded.get(base64);
    if (!buffer) {
      buffer = Buffer.from(base64, 'base64');
      this.decoded.set(base64, buffer);
    }
    return buffer;
  }

  /**
   * A file's content, read again once `refreshMs` have passed; while a re-read
   * fails the last content is kept (client-go keeps the last token). The same
   * Buffer is returned while the content is unchanged.
   */
  private file(path: string, refreshMs: number, what: string): Buffer {
    const now = this.clock.monotonic();
    const state = this.files.get(path);
    if (state && now - state.readAt < refreshMs) return state.content;
    let content: Buffer;
    try {
      content = readFileSync(path);
    } catch (error) {
      if (state) return state.content;
      throw new KubeConfigError(
        `${what}: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      );
    }
    if (state && state.content.equals(content)) {
      state.readAt = now;
      return state.content;
    }
    this.files.set(path, { content, readAt: now });
    return content;
  }

  private tokenFromFile(user: User): string {
    const what = `user ${quote(user.name)}: tokenFile`;
    let token: string;
    try {
      token = this.file(user.tokenFile!, TOKEN_FILE_REFRESH_MS, what).toString('utf8').trim();
    } catch (error) {
      // client-go starts from the token when both are set, and reads the file from then on.
      if (user.token) return user.token;
      throw error;
    }
    if (!token) {
      // An empty read replaces nothing: the next request reads again.
      this.files.delete(user.tokenFile!);
      if (user.token) return user.token;
      throw new KubeConfigError(`${what} ${user.tokenFile} is empty`);
    }
    if (/[\r\n\0]/.test(token))
      throw new KubeConfigError(`${what} ${user.tokenFile} holds more than one line (or a NUL character)`);
    return token;
  }

  private tlsMaterial(cluster: Cluster, user: User | null): TlsMaterial {
    const clusterWhat = `cluster ${quote(cluster.name)}: certificate-authority`;
    const ca = cluster.caData
      ? this.data(cluster.caData)
      : cluster.caFile
        ? this.file(cluster.caFile, TLS_FILE_REFRESH_MS, clusterWhat)
        : undefined;
    if (!user) return { ca };
    const userWhat = `user ${quote(user.name)}`;
    const cert = user.certData
      ? this.data(user.certData)
      : user.certFile
        ? this.file(user.certFile, TLS_FILE_REFRESH_MS, `${userWhat}: client-certificate`)
        : undefined;
    const key = user.keyData
      ? this.data(user.keyData)
      : user.keyFile
        ? this.file(user.keyFile, TLS_FILE_REFRESH_MS, `${userWhat}: client-key`)
        : undefined;
    return { ca, cert, key };
  }

  /** Node's own check of the TLS material, once per change, so that a bad PEM is named here rather than as a failed connection. */
  private checkTls(tls: TlsMaterial, cluster: Cluster, user: User | null): void {
    const last = this.checkedTls;
    if (last && last.ca === tls.ca && last.cert === tls.cert && last.key === tls.key) return;
    try {
      this.checkTlsOnce(tls, cluster, user);
    } catch (error) {
      // Caught mid-rotation (a new certificate, the old key)? The next request reads the files again.
      for (const path of [cluster.caFile, user?.certFile, user?.keyFile]) {
        const state = path === undefined ? undefined : this.files.get(path);
        if (state) state.readAt = -Infinity;
      }
      throw error;
    }
    this.checkedTls = tls;
  }

  private checkTlsOnce(tls: TlsMaterial, cluster: Cluster, user: User | null): void {
    if (tls.ca) {
      try {
        // createSecureContext ignores a CA that is no PEM at all: parse the (first) certificate.
        new X509Certificate(tls.ca);
        createSecureContext({ ca: tls.ca });
      } catch (error) {
        throw new KubeConfigError(
          `cluster ${quote(cluster.name)}: the certificate authority is not usable: ${(error as Error).message}`,
        );
      }
    }
    if (tls.cert || tls.key) {
      try {
        createSecureContext({ cert: tls.cert, key: tls.key });
      } catch (error) {
        throw new KubeConfigError(
          `user ${quote(user?.name ?? '')}: the client certificate and key are not usable: ${(error as Error).message}`,
        );
      }
    }
  }

  /** spec.cluster of the ExecCredential handed to a plugin with provideClusterInfo. */
  private clusterInfo(cluster: Cluster): Record<string, unknown> {
    const ca = cluster.caData
      ? this.data(cluster.caData)
      : cluster.caFile
        ? this.file(cluster.caFile, TLS_FILE_REFRESH_MS, `cluster ${quote(cluster.name)}: certificate-authority`)
        : undefined;
    return {
      server: cluster.server,
      ...(cluster.tlsServerName ? { 'tls-server-name': cluster.tlsServerName } : {}),
      ...(cluster.skipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
      ...(ca ? { 'certificate-authority-data': ca.toString('base64') } : {}),
      ...(cluster.execExtension !== undefined ? { config: cluster.execExtension } : {}),
    };
  }
}
