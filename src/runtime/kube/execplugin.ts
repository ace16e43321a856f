// Exec credential plugins (client.authentication.k8s.io/v1 and v1beta1), as
// client-go's exec authenticator runs them: the process's environment plus
// the plugin's env and KUBERNETES_EXEC_INFO (with spec.cluster when
// provideClusterInfo), never interactive; the output checked as client-go
// checks it; the credential cached until its expirationTimestamp, fetched by
// one run for concurrent requests, and fetched again after a 401. Which exec
// configurations are accepted is kubeconfigvalidation.ts's; what the
// credential becomes in a request is credentials.ts's.
//
// What a plugin prints on stdout is a secret: it never reaches a message
// (the last line of its stderr does).
import { spawn } from 'node:child_process';
import { createSecureContext } from 'node:tls';
import { describeValue, isObj, KubeConfigError, quote, type ExecConfig, type User } from './kubeconfigfile.ts';

export interface ExecCredential {
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

export const DEFAULT_EXEC_TIMEOUT_MS = 30_000;
export const DEFAULT_EXEC_OUTPUT_LIMIT = 1024 * 1024;

/** Each user's exec plugin credential, by user name. */
export class ExecCredentials {
  private readonly states = new Map<string, ExecState>();
  private readonly now: () => number;
  private readonly limits: { timeoutMs: number; outputLimit: number };

  /** now: the wall clock (expirationTimestamp); limits: how long a plugin may run and how much it may print. */
  constructor(now: () => number, limits: { timeoutMs: number; outputLimit: number }) {
    this.now = now;
    this.limits = limits;
  }

  /**
   * The exec plugin's credential: cached until its expirationTimestamp, one
   * run at a time. clusterInfo (spec.cluster for provideClusterInfo) is asked
   * for only when the plugin runs.
   */
  async credential(user: User, clusterInfo: () => Record<string, unknown>): Promise<ExecCredential> {
    let state = this.states.get(user.name);
    if (!state) {
      state = {};
      this.states.set(user.name, state);
    }
    const cached = state.credential;
    if (cached && (cached.expiresAt === undefined || this.now() < cached.expiresAt)) return cached;
    if (!state.pending) {
      const owner = state;
      owner.credential = undefined;
      const pending = runExecPlugin(user, clusterInfo(), this.limits)
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

  /** The server answered 401 to this Authorization header: the plugin runs again, unless its credential was replaced meanwhile. */
  rejected(userName: string, authorization: string | undefined): void {
    const state = this.states.get(userName);
    const credential = state?.credential;
    if (credential && (credential.token ? authorization === `Bearer ${credential.token}` : true))
      state.credential = undefined;
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
  const env = pluginEnvironment(exec, clusterInfo);
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
    running.on('error', (error: NodeJS.ErrnoException) => finish(startFailure(exec, who, error)));
    running.on('close', (code, signal) => {
      if (settled) return;
      try {
        finish(undefined, credentialAtExit(code, signal, stdout, stderr, exec.apiVersion, who));
      } catch (error) {
        finish(error instanceof KubeConfigError ? error : new KubeConfigError(`${who}: ${String(error)}`));
      }
    });
  });
}

/**
 * The process's environment, the kubeconfig's env entries over it, then
 * KUBERNETES_EXEC_INFO: the ExecCredential request, with spec.cluster only
 * when provideClusterInfo (and only if it can be written as JSON).
 */
function pluginEnvironment(exec: ExecConfig, clusterInfo: Record<string, unknown>): NodeJS.ProcessEnv {
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
  return env;
}

/** Why the plugin could not start: a missing executable says how to install it (the kubeconfig's installHint). */
function startFailure(exec: ExecConfig, who: string, error: NodeJS.ErrnoException): KubeConfigError {
  if (error.code === 'ENOENT') {
    const hint = exec.installHint ? `: ${exec.installHint.replace(/\s+/g, ' ').trim()}` : '';
    return new KubeConfigError(`${who}: executable not found${hint}`);
  }
  return new KubeConfigError(`${who}: cannot run it: ${error.code ?? error.message}`);
}

/**
 * What the plugin's exit means: the credential it printed, or (thrown) why
 * there is none: killed, failed (with the last line of its stderr, never
 * its stdout) or printed something that is not a credential.
 */
function credentialAtExit(
  code: number | null,
  signal: NodeJS.Signals | null,
  stdout: Buffer[],
  stderr: string,
  apiVersion: string,
  who: string,
): ExecCredential {
  if (signal) throw new KubeConfigError(`${who} was killed by ${signal}${stderrExcerpt(stderr)}`);
  if (code !== 0) throw new KubeConfigError(`${who} failed with exit code ${code}${stderrExcerpt(stderr)}`);
  const output = Buffer.concat(stdout);
  try {
    return execCredentialOf(output, apiVersion, who);
  } finally {
    output.fill(0);
  }
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
    throw new KubeConfigError(
      `${who} printed no ExecCredential: its output is ${describeValue(parsed)}, not an object`,
    );
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
