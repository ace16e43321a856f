// Running the machine's Go for the tools the tests build (helm, the
// OpenTelemetry Collector): one environment rule, one way to log a build and
// report its failure, one versions.env reader.
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';

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
