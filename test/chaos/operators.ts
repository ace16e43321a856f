// Stateward replicas for the soak: the real executable, each replica in a
// fixed slot (fixed HTTP and HTTPS ports, so a replacement takes over its
// predecessor's address, as a pod behind a Service would), logging to its
// own file, sampled for metrics. The webhook Service in front of them is
// test/support/round-robin-proxy.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { faketimeEnv, LIBFAKETIME } from '../support/faketime.ts';
import { FAST_ELECTION } from '../support/operator-process.ts';

const bin = fileURLToPath(new URL('../../bin/stateward.ts', import.meta.url));

interface Replica {
  slot: number;
  generation: number;
  child: ChildProcess;
  logPath: string;
  exited: Promise<void>;
  running: boolean;
  paused: boolean;
}

export interface PoolOptions {
  cluster: TestCluster;
  /** The operator's own namespace (leases, certificate Secret). */
  namespace: string;
  watchNamespaces: string[];
  logsDir: string;
  replicas: number;
  flags: string[];
  /** Run the replicas under libfaketime so that stepClock() works (when the library is installed). */
  clockSteps?: boolean;
  /** Environment variables of every replica besides the soak's own (e.g. Strimzi Drain Cleaner's STRIMZI_*). */
  env?: Record<string, string>;
}

/** Metric samples by `name{labels}`. */
export type Samples = Record<string, number>;

export function parseMetrics(text: string, names: readonly string[]): Samples {
  const out: Samples = {};
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0];
    if (!name || !names.includes(name)) continue;
    const space = line.lastIndexOf(' ');
    out[line.slice(0, space)] = Number(line.slice(space + 1));
  }
  return out;
}

const SAMPLED = [
  'process_resident_memory_bytes',
  'rollout_operator_zpdb_eviction_requests_total',
  'rollout_operator_kubernetes_api_client_request_duration_seconds_count',
  'stateward_rollout_pods_deleted_total',
  'deployment_restart_controller_deployment_restarts_total',
  'stateward_informer_relists_total',
  'stateward_reschedule_profile_evictions_total',
] as const;

export class OperatorPool {
  readonly ports: { http: number; https: number }[];
  private readonly o: PoolOptions;
  private readonly replicas: (Replica | undefined)[];
  private generations = 0;
  /** Last sample per process (slot/generation) and series. */
  private readonly last = new Map<string, Samples>();
  /**
   * Counter increases summed over every process: a restarted replica starts
   * from zero, and a replica that stops leading drops its rollout-group
   * series, which come back from zero when it leads again.
   */
  private readonly increases: Samples = {};
  peakRssBytes = 0;
  readonly peakRssBySlot: number[];
  /** Highest RSS seen in each minute since the pool started, over all replicas (MiB). */
  readonly rssByMinute: number[] = [];
  private readonly createdAt = Date.now();
  starts = 0;
  /** Whether the replicas run under libfaketime. */
  readonly clockSteps: boolean;

  private constructor(o: PoolOptions, ports: { http: number; https: number }[]) {
    this.o = o;
    this.ports = ports;
    this.clockSteps = o.clockSteps === true && existsSync(LIBFAKETIME);
    if (this.clockSteps) ports.forEach((_, slot) => this.stepClock(slot, 0));
    this.replicas = ports.map(() => undefined);
    this.peakRssBySlot = ports.map(() => 0);
  }

  static async create(o: PoolOptions): Promise<OperatorPool> {
    const free = await freePorts(o.replicas * 2);
    return new OperatorPool(
      o,
      Array.from({ length: o.replicas }, (_, i) => ({ http: free[2 * i]!, https: free[2 * i + 1]! })),
    );
  }

  get size(): number {
    return this.ports.length;
  }

  private clockFile(slot: number): string {
    return join(this.o.logsDir, `clock-offset-${slot}.txt`);
  }

  /** Sets the wall-clock offset of the replica in `slot` (and of its successors) to `seconds`. */
  stepClock(slot: number, seconds: number): void {
    if (!this.clockSteps) return;
    writeFileSync(this.clockFile(slot), `${seconds >= 0 ? '+' : ''}${seconds}s\n`);
  }

  start(slot: number): void {
    const current = this.replicas[slot];
    if (current?.running) return;
    const generation = ++this.generations;
    const logPath = join(this.o.logsDir, `operator-${slot}-${String(generation).padStart(3, '0')}.log`);
    const fd = openSync(logPath, 'a');
    let child: ChildProcess;
    try {
      const { cluster, namespace, watchNamespaces, flags } = this.o;
      child = spawn(
        process.execPath,
        [
          bin,
          `-kubernetes.namespace=${namespace}`,
          `-kubernetes.watch-namespaces=${watchNamespaces.join(',')}`,
          `-kubernetes.config-file=${cluster.kubeconfigPath}`,
          `-kubernetes.api-url=${cluster.state.server}`,
          `-server.port=${this.ports[slot]!.http}`,
          `-server-tls.port=${this.ports[slot]!.https}`,
          '-server-tls.enabled',
          '-server-tls.self-signed-cert.dns-name=localhost',
          `-leader-election.identity=soak-${slot}-${generation}`,
          '-log.level=debug',
          ...FAST_ELECTION,
          ...flags,
        ],
        {
          stdio: ['ignore', fd, fd],
          env: {
            ...process.env,
            ...this.o.env,
            ...(this.clockSteps ? faketimeEnv({ file: this.clockFile(slot) }) : {}),
          },
        },
      );
    } finally {
      closeSync(fd);
    }
    const replica: Replica = {
      slot,
      generation,
      child,
      logPath,
      running: true,
      paused: false,
      exited: Promise.resolve(),
    };
    replica.exited = new Promise((resolve) =>
      child.once('exit', () => {
        replica.running = false;
        resolve();
      }),
    );
    this.replicas[slot] = replica;
    this.starts++;
  }

  running(slot: number): boolean {
    return this.replicas[slot]?.running === true;
  }

  paused(slot: number): boolean {
    return this.replicas[slot]?.paused === true;
  }

  async get(slot: number, path: string, timeoutMs = 2000): Promise<{ status: number; body: string } | undefined> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.ports[slot]!.http}${path}`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: response.status, body: await response.text() };
    } catch {
      return undefined;
    }
  }

  async waitReady(slot: number, timeoutMs = 60_000): Promise<void> {
    await waitFor(`operator replica ${slot} ready`, async () => (await this.get(slot, '/ready'))?.status === 200, {
      timeoutMs,
      intervalMs: 250,
      fail: () =>
        this.running(slot) ? undefined : `operator replica ${slot} exited; log: ${this.replicas[slot]?.logPath}`,
    });
  }

  async startAll(): Promise<void> {
    for (let slot = 0; slot < this.size; slot++) this.start(slot);
    await Promise.all(this.ports.map((_, slot) => this.waitReady(slot)));
  }

  /** Sends a signal; SIGKILL/SIGTERM wait for the exit (SIGTERM at most 15 s, then SIGKILL). */
  async signal(slot: number, signal: NodeJS.Signals): Promise<void> {
    const replica = this.replicas[slot];
    if (!replica?.running) return;
    if (signal === 'SIGSTOP') replica.paused = true;
    if (signal === 'SIGCONT') replica.paused = false;
    if (replica.paused && (signal === 'SIGTERM' || signal === 'SIGKILL')) {
      replica.child.kill('SIGCONT');
      replica.paused = false;
    }
    replica.child.kill(signal);
    if (signal === 'SIGKILL' || signal === 'SIGTERM') {
      const timer = setTimeout(() => replica.child.kill('SIGKILL'), 15_000);
      await replica.exited;
      clearTimeout(timer);
    }
  }

  /** The slot whose replica reports itself leader, if any. */
  async leader(): Promise<number | undefined> {
    for (let slot = 0; slot < this.size; slot++) {
      if (!this.running(slot) || this.paused(slot)) continue;
      const body = (await this.get(slot, '/metrics'))?.body;
      if (body && parseMetrics(body, ['stateward_leader_is_leader'])['stateward_leader_is_leader'] === 1) return slot;
    }
    return undefined;
  }

  /** Scrapes every running, unpaused replica once. */
  async sample(): Promise<void> {
    await Promise.all(
      this.replicas.map(async (replica) => {
        if (!replica?.running || replica.paused) return;
        const body = (await this.get(replica.slot, '/metrics'))?.body;
        if (!body) return;
        const samples = parseMetrics(body, SAMPLED);
        const id = `${replica.slot}/${replica.generation}`;
        const last = this.last.get(id) ?? {};
        for (const [key, value] of Object.entries(samples)) {
          const before = last[key] ?? 0;
          this.increases[key] = (this.increases[key] ?? 0) + (value >= before ? value - before : value);
        }
        this.last.set(id, samples);
        const rss = samples['process_resident_memory_bytes'] ?? 0;
        this.peakRssBySlot[replica.slot] = Math.max(this.peakRssBySlot[replica.slot]!, rss);
        this.peakRssBytes = Math.max(this.peakRssBytes, rss);
        const minute = Math.floor((Date.now() - this.createdAt) / 60_000);
        while (this.rssByMinute.length <= minute) this.rssByMinute.push(0);
        this.rssByMinute[minute] = Math.max(this.rssByMinute[minute]!, Math.round(rss / 2 ** 20));
      }),
    );
  }

  /**
   * The increase of counters over every replica process that ever ran, for
   * series whose `name{labels}` key passes `filter`. Increments between a
   * process's last sample (every 3 s) and its death are lost: a lower bound.
   */
  total(filter: (key: string) => boolean): number {
    let sum = 0;
    for (const [key, value] of Object.entries(this.increases)) if (filter(key)) sum += value;
    return sum;
  }

  /** The increases of total(), series by series. */
  increasesOf(filter: (key: string) => boolean): Record<string, number> {
    return Object.fromEntries(Object.entries(this.increases).filter(([key]) => filter(key)));
  }

  async stopAll(): Promise<void> {
    await Promise.all(
      this.replicas.map(async (r, slot) => {
        if (r?.running) await this.signal(slot, 'SIGTERM');
      }),
    );
  }

  logFiles(): string[] {
    return this.replicas.filter((r): r is Replica => r !== undefined).map((r) => r.logPath);
  }
}
