// Running the machine's Go for the tools the tests build (helm, the
// OpenTelemetry Collector): one environment rule, one way to log a build and
// report its failure, one versions.env reader.
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isFile } from '../cluster/build.ts';
import { acquireLock } from '../cluster/lock.ts';

export type Log = (line: string) => void;

export const stderrLog: Log = (line) => process.stderr.write(`${line}\n`);

/** KEY=value lines (comments and blanks ignored), as versions.env files hold them. */
export function parseEnv(text: string): Record<string, string> {
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
export function goEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, GOTOOLCHAIN: process.env['GOTOOLCHAIN'] || 'local', ...extra };
}

/**
 * Runs go with its output in `logPath`; on failure throws with the output's
 * tail, naming `what` was being built.
 */
export async function goToLog(
  what: string,
  args: string[],
  logPath: string,
  options: { env?: Record<string, string>; cwd?: string } = {},
): Promise<void> {
  const logStream = createWriteStream(logPath);
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn('go', args, { env: goEnv(options.env), cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(logStream, { end: false });
    child.stderr.pipe(logStream, { end: false });
    child.on('error', (error) =>
      reject(new Error(`building ${what} failed: cannot run go: ${error.message} (is Go installed?)`)),
    );
    child.on('close', (exitCode) => resolve(exitCode ?? 1));
  }).finally(() => new Promise<void>((resolve) => logStream.end(resolve)));
  if (code !== 0) {
    const tail = (await readFile(logPath, 'utf8')).trimEnd().split('\n').slice(-15).join('\n');
    const command = args.map((arg) => (arg.includes(' ') ? `'${arg}'` : arg)).join(' ');
    throw new Error(`building ${what} failed: go ${command} exited ${code}; full log: ${logPath}\n${tail}`);
  }
}

/** A go command's standard output (e.g. `go env GOVERSION`). */
export async function goOutput(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('go', args, { env: goEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', (error) => reject(new Error(`cannot run go: ${error.message} (is Go installed?)`)));
    child.on('close', (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`go ${args.join(' ')} exited ${code}: ${stderr.trim()}`)),
    );
  });
}

/**
 * `dir/name`, built by `build` on first use: under a lock, so parallel test
 * files (or clones) build it once, with the build's time and `info` written to
 * build-info.json beside it. `build` writes the binary to the path it is given.
 */
export async function cachedBinary(o: {
  dir: string;
  name: string;
  /** For the log lines, e.g. "helm v4.3.1". */
  what: string;
  info: Record<string, unknown>;
  log: Log;
  build: (binary: string, logPath: string) => Promise<void>;
}): Promise<string> {
  const binary = join(o.dir, o.name);
  if (await isFile(binary)) return binary;
  await mkdir(o.dir, { recursive: true });
  const release = await acquireLock(join(o.dir, '.build.lock'), {
    waitingMessage: () => o.log(`waiting for another build of ${o.what} in ${o.dir}`),
  });
  try {
    // Whoever held the lock before us may have finished the build.
    if (await isFile(binary)) return binary;
    const logPath = join(o.dir, `build-${o.name}.log`);
    o.log(`building ${o.what} from its Go modules (first run only; log: ${logPath})…`);
    const started = Date.now();
    await o.build(binary, logPath);
    const elapsedMs = Date.now() - started;
    await writeFile(
      join(o.dir, 'build-info.json'),
      JSON.stringify({ ...o.info, elapsedMs, builtAt: new Date().toISOString() }, null, 2),
    );
    o.log(`${o.what} ready in ${binary} (${(elapsedMs / 1000).toFixed(0)}s)`);
  } finally {
    await release();
  }
  return binary;
}
