// A system under test as a child process, for the side-by-side benches: its
// output read throughout (the tail kept for errors, BENCH_CHILD_LOG_DIR for a
// diagnosis), lines waited for, the live-memory answer of bench/gc-on-signal.ts,
// and a stop that ends it.
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { waitFor } from '../test/cluster/probe.ts';

/** BENCH_CHILD_LOG_DIR: each system's output, line by line with the bench's performance.now(), for a diagnosis. */
const CHILD_LOG_DIR = process.env['BENCH_CHILD_LOG_DIR'];

/** The environment of a system run outside any cluster: no in-cluster configuration, whatever the bench runs in. */
export function outOfClusterEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env['KUBERNETES_SERVICE_HOST'];
  delete env['KUBERNETES_SERVICE_PORT'];
  return env;
}

/** What bench/gc-on-signal.ts prints after a forced GC. */
export type LiveMemory = {
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  rss: number;
  spaces: Record<string, number>;
};

/** A system under test as a child process: its output read throughout (the tail kept for errors), and how it ended. */
export class Child {
  readonly name: string;
  readonly startedAt = performance.now();
  readonly startedWall = Date.now();
  private readonly proc: ChildProcessByStdio<null, Readable, Readable>;
  private readonly tail: string[] = [];
  private readonly lineWaiters: { pattern: RegExp; resolve: (at: number) => void }[] = [];
  private gcWaiter: ((memory: LiveMemory) => void) | undefined;
  private ended: string | undefined;
  readonly exited: Promise<void>;

  constructor(name: string, command: string, args: string[], env: NodeJS.ProcessEnv) {
    this.name = name;
    this.proc = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        this.ended = `exited with ${signal ?? `code ${code}`}`;
        resolve();
      });
      this.proc.once('error', (error) => {
        this.ended = `could not start: ${error.message}`;
        resolve();
      });
    });
    for (const stream of [this.proc.stdout, this.proc.stderr])
      createInterface({ input: stream }).on('line', (line) => this.line(line));
  }

  private line(line: string): void {
    const at = performance.now();
    if (CHILD_LOG_DIR)
      appendFileSync(join(CHILD_LOG_DIR, `${this.name}-${this.startedWall}.log`), `${at.toFixed(1)} ${line}\n`);
    if (line.startsWith('{"gcMemory"')) {
      this.gcWaiter?.((JSON.parse(line) as { gcMemory: LiveMemory }).gcMemory);
      return;
    }
    this.tail.push(line);
    if (this.tail.length > 30) this.tail.shift();
    for (const waiter of this.lineWaiters.filter((w) => w.pattern.test(line))) {
      this.lineWaiters.splice(this.lineWaiters.indexOf(waiter), 1);
      waiter.resolve(at);
    }
  }

  get pid(): number {
    return this.proc.pid!;
  }

  /** A line of the bench's own in this system's BENCH_CHILD_LOG_DIR file, at `at` (performance.now()). */
  note(text: string, at = performance.now()): void {
    if (CHILD_LOG_DIR)
      appendFileSync(join(CHILD_LOG_DIR, `${this.name}-${this.startedWall}.log`), `${at.toFixed(1)} BENCH ${text}\n`);
  }

  /** Its last lines of output. */
  lastOutput(): string {
    return this.tail.join('\n  ');
  }

  /** Why the process is gone, with its last output; undefined while it runs. */
  failure(): string | undefined {
    return this.ended === undefined
      ? undefined
      : `${this.name} ${this.ended}; its last output:\n  ${this.tail.join('\n  ')}`;
  }

  /** When a line matching `pattern` is printed (performance.now()). */
  async waitLine(pattern: RegExp, timeoutMs: number): Promise<number> {
    let resolveLine!: (at: number) => void;
    const seen = new Promise<number>((resolve) => (resolveLine = resolve));
    this.lineWaiters.push({ pattern, resolve: resolveLine });
    return waitFor(
      `${this.name}: a log line matching ${String(pattern)}`,
      () => Promise.race([seen, delay(100).then(() => undefined)]),
      { timeoutMs, intervalMs: 0, fail: () => this.failure() },
    );
  }

  /** Live heap and RSS after a full GC (a Stateward child preloaded with bench/gc-on-signal.ts). */
  async liveMemory(): Promise<LiveMemory> {
    const answer = new Promise<LiveMemory>((resolve) => (this.gcWaiter = resolve));
    this.proc.kill('SIGUSR2');
    try {
      return await waitFor(
        `${this.name}: its GC answer`,
        () => Promise.race([answer, delay(100).then(() => undefined)]),
        { timeoutMs: 30_000, intervalMs: 0, fail: () => this.failure() },
      );
    } finally {
      this.gcWaiter = undefined;
    }
  }

  async stop(): Promise<void> {
    if (this.ended !== undefined) return;
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 15_000);
    await this.exited;
    clearTimeout(timer);
  }
}
