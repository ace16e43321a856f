// Builds the helm CLI from Helm's Go module into the per-user cache outside
// the repository, the way test/cluster/build.ts builds the control plane:
// keyed by the pinned versions and the Go version, so every clone on a machine
// shares one build, a version bump rebuilds, and no prebuilt binary is fetched.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cacheRoot, isFile } from '../cluster/build.ts';
import { acquireLock } from '../cluster/lock.ts';

const versionsFile = join(import.meta.dirname, 'versions.env');

export interface HelmPin {
  /** A release tag of the module, e.g. v4.3.1. */
  version: string;
  /** The main package to install, e.g. helm.sh/helm/v4/cmd/helm. */
  module: string;
}

type Log = (line: string) => void;

const stderrLog: Log = (line) => process.stderr.write(`${line}\n`);

export async function readHelmPin(): Promise<HelmPin> {
  const values = parseEnv(await readFile(versionsFile, 'utf8'));
  const version = values['HELM_VERSION'];
  const module = values['HELM_MODULE'];
  if (!version) throw new Error('test/tools/versions.env: HELM_VERSION is missing');
  if (!module) throw new Error('test/tools/versions.env: HELM_MODULE is missing');
  return { version, module };
}

function parseEnv(text: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const match = /^([A-Z_]+)=(\S+)\s*$/.exec(line);
    if (match) values[match[1]!] = match[2]!;
  }
  return values;
}

/**
 * The environment every go command here runs with. An explicit GOTOOLCHAIN
 * (CI sets one when the machine's Go is too old) is honoured; otherwise Go
 * must not download a toolchain behind our back.
 */
function goEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, GOTOOLCHAIN: process.env['GOTOOLCHAIN'] || 'local', ...extra };
}

/** The cache directory: pinned version plus a hash of versions.env and the Go version. */
export async function helmDir(pin: HelmPin): Promise<string> {
  const hash = createHash('sha256')
    .update(await readFile(versionsFile))
    // A Go upgrade changes the binary (and what `helm version` reports).
    .update((await goOutput(['env', 'GOVERSION'])).trim())
    .digest('hex')
    .slice(0, 12);
  return join(cacheRoot(), 'tools', `helm-${pin.version}-${hash}`);
}

/** The path of the cached helm binary, built on first use. */
export async function helmBinary(options: { log?: Log } = {}): Promise<string> {
  const log = options.log ?? stderrLog;
  const pin = await readHelmPin();
  const dir = await helmDir(pin);
  const binary = join(dir, 'helm');
  if (await isFile(binary)) return binary;

  await mkdir(dir, { recursive: true });
  // Parallel test files (or clones) must not all build the same binary.
  const release = await acquireLock(join(dir, '.build.lock'), { waitingMessage: () => log(`waiting for another helm build in ${dir}`) });
  try {
    // Whoever held the lock before us may have finished the build.
    if (!(await isFile(binary))) await build(pin, dir, binary, log);
  } finally {
    await release();
  }
  return binary;
}

async function build(pin: HelmPin, dir: string, binary: string, log: Log): Promise<void> {
  const logPath = join(dir, 'build-helm.log');
  log(`building helm ${pin.version} from its Go module (first run only; log: ${logPath})…`);
  const started = Date.now();
  // go install writes into GOBIN; a private one keeps a half-written file away
  // from `binary`, and the rename below publishes it atomically.
  const gobin = join(dir, '.gobin');
  await rm(gobin, { recursive: true, force: true });
  try {
    // `go install pkg@version` builds with Helm's own go.mod and go.sum, so
    // the dependency set is exactly the release's. GOFLAGS is cleared because
    // flags meant for this repository's modules (e.g. -mod) break it.
    await goToLog(['install', '-trimpath', '-ldflags', helmLdflags(pin), `${pin.module}@${pin.version}`], logPath, {
      GOBIN: gobin,
      GOFLAGS: '',
      CGO_ENABLED: '0',
    });
    await rename(join(gobin, 'helm'), binary);
  } finally {
    await rm(gobin, { recursive: true, force: true });
  }
  const elapsedMs = Date.now() - started;
  await writeFile(join(dir, 'build-info.json'), JSON.stringify({ ...pin, elapsedMs, builtAt: new Date().toISOString() }, null, 2));
  log(`helm ${pin.version} ready in ${binary} (${(elapsedMs / 1000).toFixed(0)}s)`);
}

/**
 * Helm's Makefile stamps the version with -X; without it a module build
 * reports only the major.minor compiled into the source (e.g. "v4.3").
 */
function helmLdflags(pin: HelmPin): string {
  const moduleRoot = /^(.*)\/cmd\/helm$/.exec(pin.module)?.[1];
  if (!moduleRoot) throw new Error(`test/tools/versions.env: HELM_MODULE must end in /cmd/helm, got ${pin.module}`);
  return `-s -w -X ${moduleRoot}/internal/version.version=${pin.version}`;
}

/** Runs go with its output in `logPath`; on failure throws with the output's tail. */
async function goToLog(args: string[], logPath: string, env: Record<string, string>): Promise<void> {
  const logStream = createWriteStream(logPath);
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn('go', args, { env: goEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(logStream, { end: false });
    child.stderr.pipe(logStream, { end: false });
    child.on('error', (error) => reject(new Error(`building helm failed: cannot run go: ${error.message} (is Go installed?)`)));
    child.on('close', (exitCode) => resolve(exitCode ?? 1));
  }).finally(() => new Promise<void>((resolve) => logStream.end(resolve)));
  if (code !== 0) {
    const tail = (await readFile(logPath, 'utf8')).trimEnd().split('\n').slice(-15).join('\n');
    const command = args.map((arg) => (arg.includes(' ') ? `'${arg}'` : arg)).join(' ');
    throw new Error(`building helm failed: go ${command} exited ${code}; full log: ${logPath}\n${tail}`);
  }
}

async function goOutput(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('go', args, { env: goEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', (error) => reject(new Error(`cannot run go: ${error.message} (is Go installed?)`)));
    child.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`go ${args.join(' ')} exited ${code}: ${stderr.trim()}`))));
  });
}
