// What a kubeconfig file says, and reading it: the model (clusters, users,
// contexts, current-context: client-go's clientcmd/api) and the parser from
// YAML or JSON to it (clientcmd's loader). Nothing here reads another file or
// checks that an entry is complete: kubeconfigvalidation.ts checks the
// context in use and merges KUBECONFIG's files, credentials.ts turns a
// cluster and user into TLS options and headers, and kubeconfig.ts (the
// KubeConfig a client is given) ties them together.
//
// The parsing rules are client-go's (kubectl's): YAML 1.1 booleans (`yes`),
// unknown fields ignored, a field of the wrong type is an error, base64
// fields must be base64, names unique; relative paths
// (certificate-authority, client-certificate, client-key, tokenFile, an exec
// command containing a slash, an oidc idp-certificate-authority) are
// relative to the file.
import { isAbsolute, join, sep } from 'node:path';
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';
import type { Impersonation } from './impersonation.ts';

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

/** A name or value quoted for a one-line message (JSON escapes newlines and quotes). */
export function quote(value: string): string {
  return JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}…` : value);
}

type Obj = Record<string, unknown>;

/** A map as YAML or JSON parsing makes it (not a list, a Date or any other object). */
export function isObj(value: unknown): value is Obj {
  if (typeof value !== 'object' || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** What a value is, for a message that must not quote it. */
export function describeValue(value: unknown): string {
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
    throw new KubeConfigError(`${this.where}: ${key} must be ${expected}, not ${describeValue(value)}`);
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
        throw new KubeConfigError(`${this.where}: ${key}[${i}] must be a string, not ${describeValue(item)}`);
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
    if (!isObj(item)) throw new KubeConfigError(`${list}[${i}] must be a map, not ${describeValue(item)}`);
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
    if (!isObj(item))
      throw new KubeConfigError(`${f.where}: extensions[${i}] must be a map, not ${describeValue(item)}`);
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
      if (!isObj(item)) throw new KubeConfigError(`${e.where}: env[${i}] must be a map, not ${describeValue(item)}`);
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
 * Parses a kubeconfig's text into its model. Relative paths are resolved
 * against baseDir (the file's directory), as kubectl does. Every problem is a
 * KubeConfigError whose message is one line.
 */
export function parseKubeConfigData(text: string, baseDir?: string): KubeConfigData {
  try {
    let top: unknown = yamlDocument(text);
    if (top === null || top === undefined) top = {};
    if (!isObj(top)) throw new KubeConfigError(`the file must hold a map, not ${describeValue(top)}`);
    const f = new Fields(top, 'the file');
    const kind = f.string('kind');
    if (kind !== undefined && kind !== 'Config') throw new KubeConfigError(`kind is ${quote(kind)}, not Config`);
    const apiVersion = f.string('apiVersion');
    if (apiVersion !== undefined && apiVersion !== 'v1')
      throw new KubeConfigError(`apiVersion is ${quote(apiVersion)}, not v1`);
    return {
      clusters: namedEntries(f, 'clusters', 'cluster', 'cluster').map((e) => parseCluster(e.name, e.fields, baseDir)),
      users: namedEntries(f, 'users', 'user', 'user').map((e) => parseUser(e.name, e.fields, baseDir)),
      contexts: namedEntries(f, 'contexts', 'context', 'context').map((e) => parseContext(e.name, e.fields, e.hasBody)),
      currentContext: f.string('current-context') ?? '',
    };
  } catch (error) {
    if (error instanceof KubeConfigError) throw error;
    // The YAML library's own limits (alias expansion, nesting too deep for the stack).
    throw new KubeConfigError(error instanceof Error ? error.message.split('\n')[0]! : String(error));
  }
}

/** A user's `as`, `as-uid`, `as-groups` and `as-user-extra`, as impersonation.ts takes them. */
export function impersonationOf(user: User): Impersonation {
  return {
    user: user.impersonate,
    uid: user.impersonateUid,
    groups: user.impersonateGroups,
    extra: user.impersonateExtra,
  };
}
