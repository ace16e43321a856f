// The fault injector of the soak: at intervals drawn from a seeded PRNG it
// picks one fault, injects it, holds it for a drawn time and undoes it, one
// fault at a time, logging each with its time. Faults: control-plane
// components (through the local cluster's harness: stop/start, SIGKILL,
// SIGSTOP/SIGCONT, etcd compaction), the operator replicas (SIGKILL,
// SIGTERM, SIGSTOP of the leader or the standby; wall-clock steps through
// libfaketime), the pods' HTTP endpoints
// (failing, hanging) and a competing writer patching the same objects as the
// operator (so its resourceVersion-guarded writes meet 409 Conflicts); with
// health gates (gatefaults.ts), a bad release in a rolled zone and a
// Prometheus outage.
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import type { ResourceType } from '../../src/runtime/kube/types.ts';
import { controlRequest } from '../cluster/control.ts';
import type { ComponentName } from '../cluster/process.ts';
import type { TestCluster } from '../cluster/testing.ts';
import type { AllPodEndpoints } from './endpoints.ts';
import type { OutageKind, SoakGates } from './gatefaults.ts';
import type { OperatorPool } from './operators.ts';
import type { Prng } from './prng.ts';

/**
 * Every fault with its default weight (how often it is drawn, relative to
 * the others) and what it does, given the helpers of one injection.
 */
const FAULTS = {
  'operator-kill-leader': { weight: 4, inject: (f: Injection) => f.operator('leader', 'SIGKILL', 0, 3000) },
  'operator-kill-standby': { weight: 1, inject: (f: Injection) => f.operator('standby', 'SIGKILL', 0, 3000) },
  'operator-term-leader': { weight: 2, inject: (f: Injection) => f.operator('leader', 'SIGTERM', 0, 2000) },
  'operator-pause-leader': { weight: 2, inject: (f: Injection) => f.operator('leader', 'SIGSTOP', 2000, 8000) },
  'operator-clock-step': { weight: 2, inject: (f: Injection) => f.clockStep() },
  'apiserver-restart': { weight: 1, inject: (f: Injection) => f.component('apiserver', 'restart') },
  'apiserver-kill': { weight: 1, inject: (f: Injection) => f.component('apiserver', 'kill', 1000, 5000) },
  'apiserver-pause': { weight: 1, inject: (f: Injection) => f.component('apiserver', 'pause', 1000, 5000) },
  'etcd-pause': { weight: 1, inject: (f: Injection) => f.component('etcd', 'pause', 1000, 4000) },
  'etcd-restart': { weight: 1, inject: (f: Injection) => f.component('etcd', 'restart') },
  'etcd-compact': { weight: 2, inject: (f: Injection) => f.compact() },
  'controller-manager-kill': {
    weight: 1,
    inject: (f: Injection) => f.component('controller-manager', 'kill', 2000, 10_000),
  },
  'scheduler-kill': { weight: 1, inject: (f: Injection) => f.component('scheduler', 'kill', 2000, 10_000) },
  // Short: nodes stop heartbeating meanwhile, and the node lifecycle controller would mark them NotReady after 50 s.
  'kwok-restart': { weight: 1, inject: (f: Injection) => f.component('kwok', 'stop', 2000, 10_000) },
  'endpoints-fail': { weight: 1, inject: (f: Injection) => f.endpoints('fail', 10_000, 30_000) },
  'endpoints-hang': { weight: 1, inject: (f: Injection) => f.endpoints('hang', 10_000, 30_000) },
  'competing-writer': { weight: 2, inject: (f: Injection) => f.compete(10_000, 40_000) },
  // Only with health gates (SoakOptions.healthGates).
  'bad-release': { weight: 3, inject: (f: Injection) => f.badRelease(4000, 12_000) },
  'prometheus-outage': { weight: 2, inject: (f: Injection) => f.prometheusOutage(3000, 10_000) },
} as const;

const GATE_FAULTS: readonly string[] = ['bad-release', 'prometheus-outage'];

export type FaultKind = keyof typeof FAULTS;
export const FAULT_KINDS = Object.keys(FAULTS) as FaultKind[];

export interface FaultRecord {
  at: string;
  kind: FaultKind;
  target?: string;
  /** How long the fault was held before being undone. */
  heldMs: number;
  /** Injection, hold and recovery. */
  totalMs: number;
  ok: boolean;
  error?: string;
}

export interface CompetitorTarget {
  type: ResourceType;
  namespace: string;
  name: string;
}

/** Patches an annotation on the same objects the operator writes, as fast as the API answers, while it runs. */
export class CompetingWriter {
  private readonly kube: KubeClient;
  private readonly targets: () => CompetitorTarget[];
  patches = 0;
  failures = 0;
  private running = false;

  constructor(kube: KubeClient, targets: () => CompetitorTarget[]) {
    this.kube = kube;
    this.targets = targets;
  }

  async run(ms: number): Promise<void> {
    this.running = true;
    const until = Date.now() + ms;
    while (this.running && Date.now() < until) {
      for (const t of this.targets()) {
        if (!this.running) break;
        try {
          await this.kube.patch(
            t.type,
            { namespace: t.namespace, name: t.name },
            'merge',
            { metadata: { annotations: { 'soak.stateward.dev/competitor': String(++this.patches) } } },
            { timeoutMs: 5000 },
          );
        } catch {
          this.failures++;
        }
      }
      await sleep(50);
    }
    this.running = false;
  }

  stop(): void {
    this.running = false;
  }
}

export interface FaultInjectorOptions {
  cluster: TestCluster;
  pool: OperatorPool;
  endpoints: AllPodEndpoints;
  competitor: CompetingWriter;
  /** The soak's health gates, if it has them (their faults are drawn only then). */
  gates?: SoakGates;
  prng: Prng;
  log: (line: string) => void;
  /** Pause between faults, drawn uniformly (ms). */
  intervalMs: [number, number];
  weights?: Partial<Record<FaultKind, number>>;
}

const COMPONENTS: readonly ComponentName[] = ['etcd', 'apiserver', 'controller-manager', 'scheduler', 'kwok'];

export class FaultInjector {
  readonly records: FaultRecord[] = [];
  /** Components that exited by themselves and were started again. */
  readonly restartedComponents: string[] = [];
  private readonly o: FaultInjectorOptions;
  private readonly weights: (readonly [FaultKind, number])[];
  /** Drawn before the others, in a drawn order: the health gates' faults, so a short soak has each. */
  private readonly first: FaultKind[];
  private retries = 0;

  constructor(o: FaultInjectorOptions) {
    this.o = o;
    const weight = (kind: FaultKind) =>
      GATE_FAULTS.includes(kind) && !o.gates
        ? 0
        : (o.weights?.[kind] ?? (kind === 'operator-clock-step' && !o.pool.clockSteps ? 0 : FAULTS[kind].weight));
    this.weights = FAULT_KINDS.map((k) => [k, weight(k)] as const).filter(([, w]) => w > 0);
    this.first = this.weights
      .map(([k]) => k)
      .filter((k) => GATE_FAULTS.includes(k))
      .sort(() => o.prng.next() - 0.5);
  }

  /**
   * Injects faults until `signal` aborts; the fault in progress is always
   * undone before it returns. Between faults it restarts any control-plane
   * component that exited by itself (kube-scheduler exits on purpose when it
   * finds its cache inconsistent after an apiserver outage), every 5 s, as
   * a kubelet restarts a static pod.
   */
  async run(signal: AbortSignal): Promise<void> {
    const { prng } = this.o;
    while (!signal.aborted) {
      const until = Date.now() + prng.int(...this.o.intervalMs);
      try {
        while (Date.now() < until) {
          await this.supervise();
          await sleep(Math.min(5000, Math.max(0, until - Date.now())), undefined, { signal });
        }
      } catch {
        return;
      }
      const kind = this.first.shift() ?? prng.weighted(this.weights);
      const record = await this.inject(kind);
      // A bad release that found no gated rollout in flight is tried again next (up to 3 times in all).
      if (record.target?.startsWith('none') && ++this.retries < 3) this.first.unshift(kind);
    }
  }

  /** Starts every component that is not running; returns their names. */
  async supervise(): Promise<string[]> {
    const restarted: string[] = [];
    const state = await controlRequest<{ components: Record<ComponentName, { pid?: number }> }>(
      this.o.cluster.state.controlSocket,
      'GET',
      '/state',
      5000,
    ).catch(() => undefined);
    if (!state) return restarted;
    // Two passes: starting one waits for health and fails at once while another is still down.
    for (let pass = 0; pass < 2; pass++) {
      for (const name of COMPONENTS) {
        if (state.components[name]?.pid !== undefined && pass === 0) continue;
        if (pass === 1 && !restarted.includes(name)) continue;
        if (pass === 0) restarted.push(name);
        await this.o.cluster.startComponent(name).catch(() => undefined);
      }
    }
    if (restarted.length > 0) {
      this.restartedComponents.push(...restarted);
      this.o.log(`supervisor: restarted ${restarted.join(', ')}, which had exited by itself`);
    }
    return restarted;
  }

  async inject(kind: FaultKind): Promise<FaultRecord> {
    const started = Date.now();
    const record: FaultRecord = { at: new Date(started).toISOString(), kind, heldMs: 0, totalMs: 0, ok: true };
    try {
      await FAULTS[kind].inject(new Injection(this.o, record));
    } catch (error) {
      record.ok = false;
      // The harness appends the failed component's log tail: the first line says what happened.
      record.error = error instanceof Error ? error.message.split('\n')[0] : String(error);
    }
    record.totalMs = Date.now() - started;
    this.records.push(record);
    this.o.log(
      `fault ${record.kind}${record.target ? ` ${record.target}` : ''}: held ${record.heldMs} ms, ${record.totalMs} ms in all${record.ok ? '' : `, FAILED: ${record.error}`}`,
    );
    return record;
  }

  /** Everything back: components running and resumed, both replicas running, endpoints healthy, no competitor. */
  async restoreAll(): Promise<void> {
    const { cluster, pool, endpoints, competitor } = this.o;
    competitor.stop();
    endpoints.heal();
    await this.o.gates
      ?.restore()
      .catch((error: unknown) =>
        this.o.log(`restore health gates: ${error instanceof Error ? error.message : String(error)}`),
      );
    for (const name of COMPONENTS) await cluster.resumeComponent(name).catch(() => undefined);
    await this.supervise();
    for (const name of COMPONENTS) {
      await cluster
        .startComponent(name)
        .catch((error: unknown) =>
          this.o.log(`restore ${name}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`),
        );
    }
    for (let slot = 0; slot < pool.size; slot++) {
      pool.stepClock(slot, 0);
      if (pool.paused(slot)) await pool.signal(slot, 'SIGCONT');
      if (!pool.running(slot)) pool.start(slot);
    }
    for (let slot = 0; slot < pool.size; slot++)
      await pool
        .waitReady(slot)
        .catch((error: unknown) =>
          this.o.log(`restore replica ${slot}: ${error instanceof Error ? error.message : String(error)}`),
        );
  }
}

/** One injection: the helpers the fault table uses, recording target and hold time. */
class Injection {
  private readonly o: FaultInjectorOptions;
  private readonly record: FaultRecord;

  constructor(o: FaultInjectorOptions, record: FaultRecord) {
    this.o = o;
    this.record = record;
  }

  private async hold(min: number, max: number): Promise<void> {
    this.record.heldMs = this.o.prng.int(min, max);
    await sleep(this.record.heldMs);
  }

  /** Injects, holds for a drawn time, and always undoes. */
  private async held(min: number, max: number, inject: () => unknown, undo: () => unknown): Promise<void> {
    await inject();
    try {
      await this.hold(min, max);
    } finally {
      await undo();
    }
  }

  async component(name: ComponentName, how: 'kill' | 'stop' | 'pause' | 'restart', min = 0, max = 0): Promise<void> {
    const { cluster } = this.o;
    this.record.target = name;
    if (how === 'restart') return cluster.restartComponent(name);
    if (how === 'pause')
      return this.held(
        min,
        max,
        () => cluster.pauseComponent(name),
        () => cluster.resumeComponent(name),
      );
    return this.held(
      min,
      max,
      () => (how === 'kill' ? cluster.killComponent(name) : cluster.stopComponent(name)),
      () => cluster.startComponent(name),
    );
  }

  private async pickReplica(which: 'leader' | 'standby' | 'any'): Promise<number> {
    const { pool, prng } = this.o;
    const leader = await pool.leader();
    const slots = Array.from({ length: pool.size }, (_, i) => i);
    const slot =
      which === 'leader'
        ? (leader ?? prng.pick(slots))
        : which === 'standby'
          ? prng.pick(slots.filter((s) => s !== leader))
          : prng.pick(slots);
    this.record.target = `replica ${slot}${leader === slot ? ' (leader)' : leader === undefined ? ' (no leader seen)' : ''}`;
    return slot;
  }

  async operator(
    which: 'leader' | 'standby',
    how: 'SIGKILL' | 'SIGTERM' | 'SIGSTOP',
    min: number,
    max: number,
  ): Promise<void> {
    const { pool } = this.o;
    const slot = await this.pickReplica(which);
    await this.held(
      min,
      max,
      () => pool.signal(slot, how),
      async () => {
        if (how === 'SIGSTOP') return pool.signal(slot, 'SIGCONT');
        pool.start(slot);
        await pool.waitReady(slot);
      },
    );
  }

  /**
   * Steps one replica's wall clock (libfaketime; the monotonic clock keeps
   * running) by 20 s to 10 min either way, holds it, and steps it back: an
   * NTP correction of a wrong clock, or a wrong step and its correction.
   */
  async clockStep(): Promise<void> {
    const { pool, prng } = this.o;
    const slot = await this.pickReplica(prng.chance(0.6) ? 'leader' : 'any');
    const seconds = prng.int(20, 600) * (prng.chance(0.5) ? 1 : -1);
    this.record.target += ` ${seconds > 0 ? '+' : ''}${seconds} s`;
    await this.held(
      5000,
      30_000,
      () => pool.stepClock(slot, seconds),
      () => pool.stepClock(slot, 0),
    );
  }

  async compact(): Promise<void> {
    this.record.target = `revision ${await this.o.cluster.compactEtcd()}`;
  }

  async endpoints(how: 'fail' | 'hang', min: number, max: number): Promise<void> {
    const { endpoints } = this.o;
    await this.held(
      min,
      max,
      () => {
        if (how === 'fail') endpoints.status = 500;
        else endpoints.hang = true;
      },
      () => endpoints.heal(),
    );
  }

  /**
   * Waits (up to 20 s) for a gated group whose first zone is rolling or has
   * rolled in the rollout in flight, raises that zone's error ratio for a
   * drawn time, and lowers it.
   */
  async badRelease(min: number, max: number): Promise<void> {
    const gates = this.o.gates!;
    const target = await gates.rolledZone(this.o.prng, 20_000);
    if (!target) {
      this.record.target = 'none: no gated rollout in flight with a rolled zone';
      return;
    }
    this.record.target = `${target.namespace} zone ${target.zone}`;
    await this.held(
      min,
      max,
      () => gates.raise(target),
      () => gates.lower(target.namespace),
    );
  }

  async prometheusOutage(min: number, max: number): Promise<void> {
    const gates = this.o.gates!;
    const how = this.o.prng.pick<OutageKind>(['stop', 'kill', 'freeze']);
    this.record.target = how;
    await this.held(
      min,
      max,
      () => gates.outage(how),
      () => gates.recover(),
    );
  }

  async compete(min: number, max: number): Promise<void> {
    this.record.heldMs = this.o.prng.int(min, max);
    await this.o.competitor.run(this.record.heldMs);
  }
}
