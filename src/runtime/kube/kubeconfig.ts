// Stateward's own kubeconfig: the model of a kubeconfig file (clusters,
// users, contexts, current-context), the in-cluster configuration, and what
// a request needs from them: the TLS material of the connection pool and the
// authentication headers. It replaces @kubernetes/client-node's KubeConfig,
// whose module loads the whole generated API client (869 modules; importing
// the operator without it costs ~0.7 s less CPU and ~42 MB less RSS, see
// docs/runtime.md) for the little that Stateward used of it.
//
// The rules are client-go's (kubectl's):
// - parsing: YAML 1.1 booleans (`yes`), unknown fields ignored, a field of
//   the wrong type is an error, base64 fields must be base64, names unique;
//   relative paths (certificate-authority, client-certificate, client-key,
//   tokenFile, an exec command containing a slash) are relative to the file;
// - only the context in use is checked (confirmUsable, as client-go's
//   ConfirmUsable): a file whose other entries are incomplete still loads;
// - authentication: client certificate (file or data), bearer token,
//   tokenFile (re-read at most every 50 s, as client-go's cached file token
//   source: rotated tokens are picked up), basic auth, exec credential
//   plugins (client.authentication.k8s.io/v1 and v1beta1), impersonation
//   (`as`, `as-uid`, `as-groups`, `as-user-extra`: impersonation.ts). A static token, basic auth or client
//   certificate takes precedence over an exec plugin, as in client-go;
// - rejected with a KubeConfigError naming the entry: auth-provider (gcp,
//   azure: removed from client-go, each with the exec plugin that replaces
//   it; `oidc` is run as client-go runs it: oidc.ts), a socks5 proxy-url, two
//   authentication methods.
//
// Secrets (tokens, keys, what an exec plugin prints) never appear in an
// error message.
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import { dirname, isAbsolute, join, sep } from 'node:path';
import { createSecureContext } from 'node:tls';
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';
import { oidcConfigOf, oidcProblem, OidcTokenSource } from './oidc.ts';
import { parseProxyUrl } from './proxy.ts';
import { impersonationHeaders, impersonationProblem, type Impersonation } from './impersonation.ts';

export class KubeConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubeConfigError';
  }
}

export interface Cluster {
  readonly name: string;
  /** Without trailing slashes. */
  readonly server: string;
  /** certificate-authority-data, base64 as in the file. */
  readonly caData?: string | undefined;
  readonly caFile?: string | undefined;
  readonly skipTLSVerify: boolean;
  readonly tlsServerName?: string | undefined;
  /** Every request to the cluster goes through it (proxy.ts). */
  readonly proxyUrl?: string | undefined;
  /** extensions[client.authentication.k8s.io/exec].extension, handed to exec plugins with provideClusterInfo. */
  readonly execExtension?: unknown;
}

export interface ExecConfig {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: readonly { readonly name: string; readonly value: string }[];
  readonly apiVersion: string;
  readonly installHint?: string | undefined;
  readonly provideClusterInfo: boolean;
  readonly interactiveMode?: string | undefined;
}

export interface User {
  readonly name: string;
  readonly certData?: string | undefined;
  readonly certFile?: string | undefined;
  readonly keyData?: string | undefined;
  readonly keyFile?: string | undefined;
  readonly token?: string | undefined;
  readonly tokenFile?: string | undefined;
  readonly username?: string | undefined;
  readonly password?: string | undefined;
  readonly exec?: ExecConfig | undefined;
  /** Its name and config: `oidc` is run (oidc.ts), other providers are refused when used. */
  readonly authProvider?: { readonly name: string; readonly config: Readonly<Record<string, string>> } | undefined;
  /** `as`, `as-uid`, `as-groups`, `as-user-extra` (impersonation.ts). */
  readonly impersonate?: string | undefined;
  readonly impersonateUid?: string | undefined;
  readonly impersonateGroups?: readonly string[] | undefined;
  readonly impersonateExtra?: Readonly<Record<string, readonly string[]>> | undefined;
}

export interface Context {
  readonly name: string;
  readonly cluster: string;
  readonly user?: string | undefined;
  readonly namespace?: string | undefined;
}

export interface KubeConfigData {
  readonly clusters: readonly Cluster[];
  readonly users: readonly User[];
  readonly contexts: readonly Context[];
  readonly currentContext: string;
}

export interface CredentialOptions {
  /** Wall clock (exec credential expiry) and monotonic clock (file re-reads); default the system's. */
  clock?: { now(): number; monotonic(): number };
  /** How long an exec plugin may run (default 30 s). */
  execTimeoutMs?: number;
  /** How much an exec plugin may print on stdout (default 1 MiB). */
  execOutputLimit?: number;
}

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

const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'];
const INTERACTIVE_MODES = ['Never', 'IfAvailable', 'Always'];
/** client-go's file token source: a token is good for a minute, re-read 10 s before. */
const TOKEN_FILE_REFRESH_MS = 50_000;
/** Certificate files are re-read as often, so rotated ones are picked up too. */
const TLS_FILE_REFRESH_MS = 60_000;
const DEFAULT_EXEC_TIMEOUT_MS = 30_000;
const DEFAULT_EXEC_OUTPUT_LIMIT = 1024 * 1024;

/** A name or value quoted for a one-line message (JSON escapes newlines and quotes). */
export function quote(value: string): string {
  return JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}…` : value);
}

// ---------------------------------------------------------------- parsing

type Obj = Record<string, unknown>;

function isObj(value: unknown): value is Obj {
  if (typeof value !== 'object' || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (isObj(value)) return 'a map';
  if (value instanceof Uint8Array) return 'binary data';
  if (typeof value === 'string') return 'a string';
  if (typeof value === 'number' || typeof value === 'bigint') return 'a number';
  if (typeof value === 'boolean') return 'a boolean';
  return `a ${typeof value === 'object' ? ((value as { constructor?: { name?: string } }).constructor?.name ?? 'value') : typeof value}`;
}

/** Typed access to one map of the file, errors naming where it is. */
class Fields {
  readonly where: string;
  private readonly obj: Obj;

  constructor(obj: Obj, where: string) {
    this.obj = obj;
    this.where = where;
  }

  private fail(key: string, expected: string, value: unknown): never {
    throw new KubeConfigError(`${this.where}: ${key} must be ${expected}, not ${describe(value)}`);
  }

  /** A string field; '' and null are unset, as in client-go. */
  string(key: string): string | undefined {
    const value = this.obj[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string') this.fail(key, 'a string', value);
    return value === '' ? undefined : value;
  }

  boolean(key: string): boolean {
    const value = this.obj[key];
    if (value === undefined || value === null) return false;
    if (typeof value !== 'boolean') this.fail(key, 'true or false', value);
    return value;
  }

  base64(key: string): string | undefined {
    const value = this.string(key);
    if (value === undefined) return undefined;
    const compact = value.replace(/[\r\n]/g, '');
    if (compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact))
      throw new KubeConfigError(`${this.where}: ${key} is not base64`);
    return compact;
  }

  map(key: string): Obj | undefined {
    const value = this.obj[key];
    if (value === undefined || value === null) return undefined;
    if (!isObj(value)) this.fail(key, 'a map', value);
    return value;
  }

  list(key: string): unknown[] {
    const value = this.obj[key];
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) this.fail(key, 'a list', value);
    return value;
  }

  strings(key: string): string[] {
    return this.list(key).map((item, i) => {
      if (typeof item !== 'string')
        throw new KubeConfigError(`${this.where}: ${key}[${i}] must be a string, not ${describe(item)}`);
      return item;
    });
  }

  has(key: string): boolean {
    const value = this.obj[key];
    return value !== undefined && value !== null;
  }
}

/** The entries of a named list (clusters, users, contexts): each a map with a unique name and its body. */
function namedEntries(
  top: Fields,
  list: string,
  kind: string,
  body: string,
): { name: string; fields: Fields; hasBody: boolean }[] {
  const seen = new Set<string>();
  return top.list(list).map((item, i) => {
    if (!isObj(item)) throw new KubeConfigError(`${list}[${i}] must be a map, not ${describe(item)}`);
    const entry = new Fields(item, `${list}[${i}]`);
    const name = entry.string('name');
    if (name === undefined) throw new KubeConfigError(`${list}[${i}]: name is missing`);
    if (seen.has(name)) throw new KubeConfigError(`${list}: the name ${quote(name)} is used twice`);
    seen.add(name);
    const where = `${kind} ${quote(name)}`;
    const inner = new Fields(item, where).map(body);
    return { name, fields: new Fields(inner ?? {}, where), hasBody: inner !== undefined };
  });
}

function absolute(baseDir: string | undefined, path: string | undefined): string | undefined {
  return path === undefined || baseDir === undefined || isAbsolute(path) ? path : join(baseDir, path);
}

function parseCluster(name: string, f: Fields, baseDir: string | undefined): Cluster {
  let execExtension: unknown;
  f.list('extensions').forEach((item, i) => {
    if (!isObj(item)) throw new KubeConfigError(`${f.where}: extensions[${i}] must be a map, not ${describe(item)}`);
    if (item['name'] === 'client.authentication.k8s.io/exec') execExtension = item['extension'];
  });
  return {
    name,
    server: (f.string('server') ?? '').replace(/\/+$/, ''),
    caData: f.base64('certificate-authority-data'),
    caFile: absolute(baseDir, f.string('certificate-authority')),
    skipTLSVerify: f.boolean('insecure-skip-tls-verify'),
    tlsServerName: f.string('tls-server-name'),
    proxyUrl: f.string('proxy-url'),
    execExtension,
  };
}

function parseExec(f: Fields, baseDir: string | undefined): ExecConfig | undefined {
  const exec = f.map('exec');
  if (!exec) return undefined;
  const e = new Fields(exec, `${f.where}: exec`);
  const command = e.string('command') ?? '';
  return {
    // client-go resolves a command against the file's directory only when it is a path, not a name looked up in PATH.
    command: command.includes(sep) ? (absolute(baseDir, command) ?? command) : command,
    args: e.strings('args'),
    env: e.list('env').map((item, i) => {
      if (!isObj(item)) throw new KubeConfigError(`${e.where}: env[${i}] must be a map, not ${describe(item)}`);
      const v = new Fields(item, `${e.where}: env[${i}]`);
      return { name: v.string('name') ?? '', value: v.string('value') ?? '' };
    }),
    apiVersion: e.string('apiVersion') ?? '',
    installHint: e.string('installHint'),
    provideClusterInfo: e.boolean('provideClusterInfo'),
    interactiveMode: e.string('interactiveMode'),
  };
}

function parseUser(name: string, f: Fields, baseDir: string | undefined): User {
  const provider = f.map('auth-provider');
  return {
    name,
    certData: f.base64('client-certificate-data'),
    certFile: absolute(baseDir, f.string('client-certificate')),
    keyData: f.base64('client-key-data'),
    keyFile: absolute(baseDir, f.string('client-key')),
    token: f.string('token'),
    tokenFile: absolute(baseDir, f.string('tokenFile')),
    username: f.string('username'),
    password: f.string('password'),
    exec: parseExec(f, baseDir),
    authProvider: provider ? parseAuthProvider(new Fields(provider, `${f.where}: auth-provider`), baseDir) : undefined,
    impersonate: f.string('as'),
    impersonateUid: f.string('as-uid'),
    impersonateGroups: f.strings('as-groups'),
    impersonateExtra: userExtra(f),
  };
}

function parseAuthProvider(f: Fields, baseDir: string | undefined): NonNullable<User['authProvider']> {
  const raw = f.map('config') ?? {};
  const fields = new Fields(raw, `${f.where}: config`);
  const config: Record<string, string> = {};
  for (const key of Object.keys(raw)) {
    const value = fields.string(key);
    if (value !== undefined) config[key] = value;
  }
  const caFile = absolute(baseDir, config['idp-certificate-authority']);
  if (caFile) config['idp-certificate-authority'] = caFile;
  return { name: f.string('name') ?? '', config };
}

function userExtra(f: Fields): Record<string, string[]> {
  const extra = f.map('as-user-extra') ?? {};
  const fields = new Fields(extra, `${f.where}: as-user-extra`);
  return Object.fromEntries(Object.keys(extra).map((key) => [key, fields.strings(key)]));
}

function parseContext(name: string, f: Fields, hasBody: boolean): Context {
  if (!hasBody) throw new KubeConfigError(`${f.where}: context is missing`);
  return { name, cluster: f.string('cluster') ?? '', user: f.string('user'), namespace: f.string('namespace') };
}

// The yaml package costs ~14 MiB of RSS to load; an operator in its pod reads
// its service account instead of a kubeconfig and never needs it.
const requireLazily = createRequire(import.meta.url);

function yamlDocument(text: string): unknown {
  const { parseDocument } = requireLazily('yaml') as typeof Yaml;
  const doc = parseDocument(text, {
    // kubectl reads kubeconfigs with go-yaml v2: YAML 1.1 booleans (yes/no/on/off), merge keys.
    version: '1.1',
    // …but no timestamps or sexagesimal numbers: those stay strings, as kubectl reads them into string fields.
    customTags: (tags) =>
      tags.filter((tag) => {
        const t = tag as { tag?: string; format?: string };
        return t.tag !== 'tag:yaml.org,2002:timestamp' && t.format !== 'TIME';
      }),
    uniqueKeys: false,
    prettyErrors: false,
    // 'error', not 'silent': silent drops errors such as a second document.
    logLevel: 'error',
  });
  const error = doc.errors[0];
  if (error) {
    const offset = error.pos[0];
    const before = text.slice(0, offset).split('\n');
    throw new KubeConfigError(
      `${error.message.split('\n')[0]} at line ${before.length}, column ${before.at(-1)!.length + 1}`,
    );
  }
  return doc.toJS({ maxAliasCount: 100 });
}

/**
 * Parses a kubeconfig's text. Relative paths are resolved against baseDir
 * (the file's directory), as kubectl does. Every problem is a KubeConfigError
 * whose message is one line.
 */
export function parseKubeConfig(text: string, options: CredentialOptions & { baseDir?: string } = {}): KubeConfig {
  try {
    let top: unknown = yamlDocument(text);
    if (top === null || top === undefined) top = {};
    if (!isObj(top)) throw new KubeConfigError(`the file must hold a map, not ${describe(top)}`);
    const f = new Fields(top, 'the file');
    const kind = f.string('kind');
    if (kind !== undefined && kind !== 'Config') throw new KubeConfigError(`kind is ${quote(kind)}, not Config`);
    const apiVersion = f.string('apiVersion');
    if (apiVersion !== undefined && apiVersion !== 'v1')
      throw new KubeConfigError(`apiVersion is ${quote(apiVersion)}, not v1`);
    const { baseDir } = options;
    return new KubeConfig(
      {
        clusters: namedEntries(f, 'clusters', 'cluster', 'cluster').map((e) => parseCluster(e.name, e.fields, baseDir)),
        users: namedEntries(f, 'users', 'user', 'user').map((e) => parseUser(e.name, e.fields, baseDir)),
        contexts: namedEntries(f, 'contexts', 'context', 'context').map((e) =>
          parseContext(e.name, e.fields, e.hasBody),
        ),
        currentContext: f.string('current-context') ?? '',
      },
      options,
    );
  } catch (error) {
    if (error instanceof KubeConfigError) throw error;
    // The YAML library's own limits (alias expansion, nesting too deep for the stack).
    throw new KubeConfigError(error instanceof Error ? error.message.split('\n')[0]! : String(error));
  }
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

// ---------------------------------------------------------------- credentials

interface ExecCredential {
  token?: string;
  cert?: string;
  key?: string;
  /** Wall clock ms; undefined: good until the server rejects it. */
  expiresAt?: number;
}

interface ExecState {
  credential?: ExecCredential;
  pending?: Promise<ExecCredential>;
}

interface FileState {
  content: Buffer;
  readAt: number;
}

interface TlsMaterial {
  ca?: Buffer | undefined;
  cert?: Buffer | string | undefined;
  key?: Buffer | string | undefined;
}

export class KubeConfig implements KubeClientConfig {
  readonly clusters: readonly Cluster[];
  readonly users: readonly User[];
  readonly contexts: readonly Context[];
  currentContext: string;
  private readonly options: CredentialOptions;
  private readonly clock: { now(): number; monotonic(): number };
  private readonly files = new Map<string, FileState>();
  private readonly exec = new Map<string, ExecState>();
  private readonly oidc = new Map<string, OidcTokenSource>();
  private readonly decoded = new Map<string, Buffer>();
  /** The TLS material last checked with createSecureContext (by identity: caches return the same objects while unchanged). */
  private checkedTls: TlsMaterial | undefined;
  /** The cluster and user last checked by checkCluster and checkUser. */
  private checked: string | undefined;

  constructor(data: KubeConfigData, options: CredentialOptions = {}) {
    this.clusters = data.clusters;
    this.users = data.users;
    this.contexts = data.contexts;
    this.currentContext = data.currentContext;
    this.options = options;
    this.clock = options.clock ?? { now: () => Date.now(), monotonic: () => performance.now() };
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
    // Reads every file the context names (the first read of the caches): unreadable is an error now, not at the first request.
    this.tlsMaterial(cluster, user);
    if (user?.tokenFile) this.tokenFromFile(user);
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
    const tls = this.tlsMaterial(cluster, user);
    const headers: Record<string, string | string[]> = {};
    if (user) {
      if (user.token || user.tokenFile)
        headers['Authorization'] = `Bearer ${user.tokenFile ? this.tokenFromFile(user) : user.token}`;
      else if (user.username !== undefined || user.password !== undefined)
        headers['Authorization'] =
          `Basic ${Buffer.from(`${user.username ?? ''}:${user.password ?? ''}`).toString('base64')}`;
      else if (user.exec && !tls.cert && !tls.key) {
        const credential = await this.execCredential(user, cluster);
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
  credentialsRejected(authorization: string | undefined): void {
    const user = this.getCurrentUser();
    if (!user) return;
    if (user.tokenFile) {
      const state = this.files.get(user.tokenFile);
      if (state && authorization === `Bearer ${state.content.toString('utf8').trim()}`) state.readAt = -Infinity;
    }
    if (authorization?.startsWith('Bearer ')) this.oidc.get(user.name)?.rejected(authorization.slice(7));
    const exec = this.exec.get(user.name);
    const credential = exec?.credential;
    if (credential && (credential.token ? authorization === `Bearer ${credential.token}` : true))
      exec.credential = undefined;
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

  /** The exec plugin's credential: cached until its expirationTimestamp, one run at a time. */
  private async execCredential(user: User, cluster: Cluster): Promise<ExecCredential> {
    let state = this.exec.get(user.name);
    if (!state) {
      state = {};
      this.exec.set(user.name, state);
    }
    const cached = state.credential;
    if (cached && (cached.expiresAt === undefined || this.clock.now() < cached.expiresAt)) return cached;
    if (!state.pending) {
      const owner = state;
      owner.credential = undefined;
      const pending = runExecPlugin(user, this.clusterInfo(cluster), {
        timeoutMs: this.options.execTimeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS,
        outputLimit: this.options.execOutputLimit ?? DEFAULT_EXEC_OUTPUT_LIMIT,
      })
        .then((credential) => {
          owner.credential = credential;
          return credential;
        })
        .finally(() => {
          if (owner.pending === pending) owner.pending = undefined;
        });
      owner.pending = pending;
    }
    return state.pending!;
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

/** client-go's validateClusterInfo for the cluster in use, plus what Stateward refuses. */
function checkCluster(cluster: Cluster): void {
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

function impersonationOf(user: User): Impersonation {
  return {
    user: user.impersonate,
    uid: user.impersonateUid,
    groups: user.impersonateGroups,
    extra: user.impersonateExtra,
  };
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
function checkUser(user: User): void {
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

/** One line of a plugin's stderr for an error message: its last non-empty line, cut short. */
function stderrExcerpt(stderr: string): string {
  const line = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .at(-1);
  if (!line) return '';
  return `: ${line.length > 300 ? `${line.slice(0, 300)}…` : line}`;
}

/**
 * Runs an exec credential plugin as client-go does: the process's
 * environment plus the plugin's env and KUBERNETES_EXEC_INFO, no stdin (never
 * interactive). What it prints on stdout is a secret: it never reaches a
 * message. Bounded: killed (with its process group) after timeoutMs, or once
 * it prints more than outputLimit bytes.
 */
function runExecPlugin(
  user: User,
  clusterInfo: Record<string, unknown>,
  limits: { timeoutMs: number; outputLimit: number },
): Promise<ExecCredential> {
  const exec = user.exec!;
  const who = `exec plugin ${quote(exec.command)} of user ${quote(user.name)}`;
  let info: string;
  try {
    info = JSON.stringify({
      apiVersion: exec.apiVersion,
      kind: 'ExecCredential',
      spec: { interactive: false, ...(exec.provideClusterInfo ? { cluster: clusterInfo } : {}) },
    });
  } catch {
    info = JSON.stringify({ apiVersion: exec.apiVersion, kind: 'ExecCredential', spec: { interactive: false } });
  }
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const variable of exec.env) env[variable.name] = variable.value;
  env['KUBERNETES_EXEC_INFO'] = info;
  return new Promise<ExecCredential>((resolve, reject) => {
    let child: ReturnType<typeof spawnPlugin>;
    try {
      child = spawnPlugin(exec, env);
    } catch (error) {
      // Arguments Node refuses (a NUL byte in the command, an argument or the environment).
      reject(new KubeConfigError(`${who}: cannot run it: ${(error as NodeJS.ErrnoException).code ?? String(error)}`));
      return;
    }
    const running = child;
    let settled = false;
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderr = '';
    const kill = () => {
      try {
        // The whole process group: a plugin that is a script leaves no child holding the pipes open.
        if (running.pid !== undefined) process.kill(-running.pid, 'SIGKILL');
      } catch {
        running.kill('SIGKILL');
      }
    };
    const finish = (error: KubeConfigError | undefined, credential?: ExecCredential) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      for (const chunk of stdout) chunk.fill(0);
      if (error) {
        kill();
        running.stdout.destroy();
        running.stderr.destroy();
        reject(error);
      } else {
        resolve(credential!);
      }
    };
    const timer = setTimeout(
      () => finish(new KubeConfigError(`${who} did not finish within ${limits.timeoutMs / 1000} s`)),
      limits.timeoutMs,
    );
    running.stdout.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > limits.outputLimit) {
        chunk.fill(0);
        finish(new KubeConfigError(`${who} printed more than ${limits.outputLimit} bytes`));
        return;
      }
      stdout.push(chunk);
    });
    running.stderr.setEncoding('utf8');
    running.stderr.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-4096);
    });
    running.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') {
        const hint = exec.installHint ? `: ${exec.installHint.replace(/\s+/g, ' ').trim()}` : '';
        finish(new KubeConfigError(`${who}: executable not found${hint}`));
      } else {
        finish(new KubeConfigError(`${who}: cannot run it: ${error.code ?? error.message}`));
      }
    });
    running.on('close', (code, signal) => {
      if (settled) return;
      if (signal) return finish(new KubeConfigError(`${who} was killed by ${signal}${stderrExcerpt(stderr)}`));
      if (code !== 0)
        return finish(new KubeConfigError(`${who} failed with exit code ${code}${stderrExcerpt(stderr)}`));
      const output = Buffer.concat(stdout);
      try {
        finish(undefined, execCredentialOf(output, exec.apiVersion, who));
      } catch (error) {
        finish(error instanceof KubeConfigError ? error : new KubeConfigError(`${who}: ${String(error)}`));
      } finally {
        output.fill(0);
      }
    });
  });
}

function spawnPlugin(exec: ExecConfig, env: NodeJS.ProcessEnv) {
  return spawn(exec.command, [...exec.args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    windowsHide: true,
  });
}

/** The credential in a plugin's output, checked as client-go checks it; messages never quote the output. */
function execCredentialOf(output: Buffer, apiVersion: string, who: string): ExecCredential {
  let parsed: unknown;
  try {
    parsed = JSON.parse(output.toString('utf8'));
  } catch {
    throw new KubeConfigError(`${who} printed no ExecCredential: its output (${output.length} bytes) is not JSON`);
  }
  if (!isObj(parsed))
    throw new KubeConfigError(`${who} printed no ExecCredential: its output is ${describe(parsed)}, not an object`);
  if (parsed['kind'] !== 'ExecCredential')
    throw new KubeConfigError(`${who} printed no ExecCredential: its kind is not ExecCredential`);
  const version = parsed['apiVersion'];
  if (version !== apiVersion) {
    const shown = typeof version === 'string' && /^[\w./-]{1,100}$/.test(version) ? version : 'something else';
    throw new KubeConfigError(
      `${who} is configured to use API version ${apiVersion}, and the plugin returned ${shown}`,
    );
  }
  const status = parsed['status'];
  if (!isObj(status)) throw new KubeConfigError(`${who} returned no status`);
  const field = (name: string): string | undefined => {
    const value = status[name];
    if (value === undefined || value === null || value === '') return undefined;
    if (typeof value !== 'string') throw new KubeConfigError(`${who}: status.${name} is not a string`);
    return value;
  };
  const token = field('token');
  const cert = field('clientCertificateData');
  const key = field('clientKeyData');
  const expiration = field('expirationTimestamp');
  if (token !== undefined && /[\r\n\0]/.test(token))
    throw new KubeConfigError(`${who}: status.token contains a line break or a NUL character`);
  if (!token && !cert && !key)
    throw new KubeConfigError(`${who} returned neither a token nor a client certificate and key`);
  if (Boolean(cert) !== Boolean(key))
    throw new KubeConfigError(`${who} returned a client certificate or key, not both`);
  let expiresAt: number | undefined;
  if (expiration !== undefined) {
    expiresAt = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i.test(expiration)
      ? Date.parse(expiration)
      : NaN;
    if (Number.isNaN(expiresAt))
      throw new KubeConfigError(`${who}: status.expirationTimestamp is not an RFC 3339 time`);
  }
  if (cert) {
    try {
      createSecureContext({ cert, key });
    } catch (error) {
      throw new KubeConfigError(
        `${who} returned a client certificate and key that are not usable: ${(error as Error).message}`,
      );
    }
  }
  return { token, cert, key, expiresAt };
}
