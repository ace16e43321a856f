// What bench/abuse.bench.ts runs and watches: the systems under attack as
// processes (Stateward as the image runs it, rollout-operator v0.38.1 built
// from source by bench/peers.ts), their memory sampled from /proc, and a
// hostile client process at nice 19.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePorts } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { checkReview } from '../test/fuzz/http-driver.ts';
import { outOfClusterEnv } from './child.ts';
import { PEERS, peerBinary } from './peers.ts';
import { statewardEntry } from './stateward-build.ts';

/** VmRSS and VmHWM of a process, sampled every 100 ms; the samples kept with their time, for windows. */
export class RssSampler {
  peak = 0;
  hwm = 0;
  private readonly samples: { at: number; rss: number }[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly pid: number;

  constructor(pid: number) {
    this.pid = pid;
    this.sample();
    this.timer = setInterval(() => this.sample(), 100);
  }

  private sample(): void {
    let status: string;
    try {
      status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    } catch {
      return; // exited
    }
    const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
    const rss = kib('VmRSS');
    this.samples.push({ at: performance.now(), rss });
    this.peak = Math.max(this.peak, rss);
    this.hwm = Math.max(this.hwm, kib('VmHWM'));
  }

  /** The largest sample taken between two performance.now() times; NaN when none was. */
  peakBetween(from: number, to: number): number {
    const within = this.samples.filter((s) => s.at >= from && s.at <= to).map((s) => s.rss);
    return within.length ? Math.max(...within) : NaN;
  }

  stop(): void {
    clearInterval(this.timer);
    this.sample();
  }
}

/**
 * Runs a hostile client script with `options` as its argv[2] JSON; resolves
 * to the JSON of its one result line, or the reason there is none.
 */
export function hostileProcess<T>(script: URL, options: object, seconds: number): Promise<T | string> {
  const child = spawn(process.execPath, [fileURLToPath(script), JSON.stringify(options)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // Lowest CPU priority: a real attacker runs on another machine; here it
  // shares two cores with the operator, and should take only what is left.
  try {
    if (child.pid) setPriority(child.pid, 19);
  } catch {
    // not permitted: it competes at normal priority
  }
  const lines = createInterface({ input: child.stdout });
  return new Promise((resolve) => {
    let settled = false;
    const done = (value: T | string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(value);
    };
    const timer = setTimeout(
      () => {
        child.kill('SIGKILL');
        done('the hostile client did not finish in time');
      },
      seconds * 1000 + 60_000,
    );
    lines.on('line', (line) => {
      try {
        done(JSON.parse(line) as T);
      } catch {
        // not its result line
      }
    });
    child.on('exit', (code) => done(`the hostile client exited with ${code} without a result`));
  });
}

export type SystemName = 'stateward' | 'rollout-operator';
export const SYSTEM_NAMES: readonly SystemName[] = ['stateward', 'rollout-operator'];

/** How to start one system: the same flags for both (webhooks over TLS with their own self-signed certificate). */
export interface SystemLaunch {
  name: SystemName;
  title: string;
  command: string;
  /** Before the shared flags: Node's flags and the entry, for Stateward. */
  prefix: string[];
  env: NodeJS.ProcessEnv;
  /** For the report: what runs, and its certificate. */
  describe: string;
}

/** Each system's launch, or why it cannot run (rollout-operator's source absent, its build failed). */
export async function systemLaunch(name: SystemName, log: (line: string) => void): Promise<SystemLaunch | string> {
  if (name === 'stateward') {
    const sw = await statewardEntry();
    return {
      name,
      title: 'Stateward',
      command: process.execPath,
      prefix: [...sw.nodeFlags, sw.entry],
      env: outOfClusterEnv(sw.env),
      describe: `Stateward as the image runs it (${sw.form}); its self-signed certificate: ECDSA P-256`,
    };
  }
  const spec = PEERS['rollout-operator'];
  const built = await peerBinary(spec, log);
  if (!built.ok) return built.reason;
  return {
    name,
    title: 'rollout-operator',
    command: built.path,
    prefix: [],
    env: outOfClusterEnv(),
    describe: `${spec.repo} ${spec.describe} (${spec.commit.slice(0, 12)}) built from source; its self-signed certificate: RSA 4096`,
  };
}

export interface SystemScope {
  namespace: string;
  kubeconfig: string;
  apiUrl: string;
}

/**
 * One system process with both servers on loopback ports: the plain one
 * (/ready, /metrics) and HTTPS webhooks with the certificate it makes itself,
 * as each is deployed (-server-tls.enabled, the rest defaults; log level
 * info). Its output is counted (logBytes) and the last 16 KiB kept.
 */
export class RunningSystem {
  readonly launch: SystemLaunch;
  readonly plainPort: number;
  readonly tlsPort: number;
  readonly namespace: string;
  private readonly child: ChildProcess;
  logBytes = 0;
  private tail = '';
  exit: string | undefined;
  private readonly exited: Promise<void>;

  private constructor(launch: SystemLaunch, scope: SystemScope, plainPort: number, tlsPort: number) {
    this.launch = launch;
    this.plainPort = plainPort;
    this.tlsPort = tlsPort;
    this.namespace = scope.namespace;
    const flags = [
      `-kubernetes.namespace=${scope.namespace}`,
      `-kubernetes.config-file=${scope.kubeconfig}`,
      `-kubernetes.api-url=${scope.apiUrl}`,
      `-server.port=${plainPort}`,
      '-log.level=info',
      '-server-tls.enabled',
      `-server-tls.port=${tlsPort}`,
      '-server-tls.self-signed-cert.dns-name=localhost',
    ];
    this.child = spawn(launch.command, [...launch.prefix, ...flags], {
      env: launch.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const take = (chunk: Buffer) => {
      this.logBytes += chunk.length;
      this.tail = (this.tail + chunk.toString('utf8')).slice(-16 * 1024);
    };
    this.child.stdout!.on('data', take);
    this.child.stderr!.on('data', take);
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exit = signal ? `signal ${signal}` : `code ${code}`;
        resolve();
      });
      this.child.once('error', (error) => {
        this.exit = `could not start: ${error.message}`;
        resolve();
      });
    });
  }

  /** Started and answering: GET /ready 200 and a good review over HTTPS (its informers synced, its certificate made). */
  static async start(launch: SystemLaunch, scope: SystemScope): Promise<RunningSystem> {
    const [plainPort, tlsPort] = (await freePorts(2)) as [number, number];
    const system = new RunningSystem(launch, scope, plainPort, tlsPort);
    await waitFor(
      `${launch.title} to answer /ready and a review`,
      async () =>
        (await readyStatus(plainPort)) === 200 && (await checkReview(tlsPort, scope.namespace, 2_000)) === undefined,
      {
        timeoutMs: 180_000,
        intervalMs: 250,
        fail: () =>
          system.exit ? `${launch.title} exited (${system.exit}):\n${system.tail.slice(-3_000)}` : undefined,
      },
    ).catch(async (error: unknown) => {
      await system.stop();
      throw error;
    });
    return system;
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  get logTail(): string {
    return this.tail;
  }

  async stop(): Promise<void> {
    if (this.exit !== undefined) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

async function readyStatus(port: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/ready`, { signal: AbortSignal.timeout(2_000) }).catch(
    () => undefined,
  );
  await res?.body?.cancel();
  return res?.status ?? 0;
}

/** GET /metrics on a fresh connection: the body's size in bytes, NaN without an answer within 5 s. */
export async function metricsBytes(port: number): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5_000) });
    return res.ok ? (await res.arrayBuffer()).byteLength : NaN;
  } catch {
    return NaN;
  }
}
