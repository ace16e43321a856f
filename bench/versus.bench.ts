// versus: Stateward side by side with grafana/rollout-operator v0.38.1
// (issue 19), the system it is a drop-in for, built from source on first use
// (bench/peers.ts). One local cluster; one namespace per system, each with
// the same rollout group: StatefulSets ingester-zone-a/b/c, 10 pods each,
// `rollout-group: ingester`, `rollout-max-unavailable`, OnDelete, pods made
// Ready by kwok BENCH_VERSUS_READY_DELAY (2s) after they run, with the
// `name: <StatefulSet>` pod label rollout-operator finds a StatefulSet's pods
// by (Stateward goes by ownerReferences). The zone-aware PDB and
// ReplicaTemplate CRDs are installed, as a standard install of either has
// them: rollout-operator v0.38.1 never gets ready without the ZPDB CRD (its
// eviction controller waits for the ZPDB informer to sync); no ZPDB object
// exists.
//
// Stateward runs as the image runs it (bench/stateward-build.ts; from its
// sources with BENCH_STATEWARD_FROM=sources). Each system runs as a local
// process scoped to its namespace with the same
// flags (-kubernetes.namespace, -kubernetes.config-file, -kubernetes.api-url,
// -server.port, -log.level=BENCH_VERSUS_LOG_LEVEL (info)) and its defaults
// otherwise: webhooks off, no leader election, -reconcile.interval 5s,
// client-side limits 5 qps / burst 10 per API group. Only one system runs
// at a time; rounds interleave them (rollout-operator, Stateward,
// rollout-operator, ...). Every API request of both goes through one
// neutral counting proxy (bench/counting-proxy.ts), told apart by
// User-Agent; the bench's own client talks to the apiserver directly.
//
// A run, from a settled group (every pod Ready on one revision,
// max-unavailable 1):
//   1. start → GET /ready answers 200 (polled every 20 ms);
//   2. BENCH_VERSUS_SETTLE_S (10) later: RSS (VmRSS), and the API requests
//      from the start until then;
//   3. idle window BENCH_VERSUS_IDLE_S (60; a shorter one is scaled to 60 s):
//      CPU (time on CPU of its threads, bench/proc.ts) and API requests;
//   4. a rollout at max-unavailable 1: the pod template of all three
//      StatefulSets changed at once; it is complete when every pod runs the
//      update revision and is Ready and every StatefulSet's currentRevision
//      has caught up. API requests from the change to 3 s after completion
//      (so trailing status writes count); makespan from the change to the
//      last pod Ready;
//   5. max-unavailable set to 5 on the three StatefulSets, 1 s, and the same
//      rollout again; then RSS.
// Makespan ÷ ideal: ideal = batches × one batch's time, where batches =
// 3 zones × ⌈10 / max-unavailable⌉ (zones roll one after another, each in
// batches of max-unavailable pods) and one batch's time = the median time a
// pod of that rollout needed from its delete to its replacement being Ready
// (the StatefulSet controller, the scheduler and kwok's delay: nothing the
// operator controls). Ideal is the makespan of an operator that deletes the
// next batch the instant the previous one is Ready; 1.00 is the floor for
// batch-wise rollouts (a sliding window can go a little under it).
//
// Sizes: BENCH_VERSUS_SIZES (30): comma-separated pod counts per namespace;
// above 30, a Deployment of the rest (pods outside the group, Ready at once)
// shares the namespace, e.g. 30,3000. A count ending in `*` is the whole
// cluster's, spread over BENCH_VERSUS_CELLS (10) namespaces ("cells", as one
// per Mimir or Loki cell), each with its own group and an equal share of
// the rest, e.g. 30,3000,10000*. Stateward runs once for the cluster
// (-kubernetes.watch-namespaces=*); rollout-operator v0.38.1 watches one
// namespace only, so it runs as a cluster needs it: one process per cell,
// and its figures are their sums (RSS, CPU, API requests; ready when the
// last one is). Both systems' rollouts are of cell 0's group, in turn.
// BENCH_VERSUS_ROUNDS (3) rounds per size.
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { freePorts } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { resources, type KubeObject, type Pod, type StatefulSet } from '../src/runtime/kube/types.ts';
import { Informer } from '../src/runtime/informer/informer.ts';
import { changeTemplate, createGroup, isReady, waitGroupSettled, ZONES } from '../test/support/rollout-group.ts';
import { Child, outOfClusterEnv } from './child.ts';
import { CountingProxy, type ProxiedRequest } from './counting-proxy.ts';
import { benchNamespace } from './namespace.ts';
import { PEERS, peerBinary } from './peers.ts';
import { cpuPreciseMs, rss } from './proc.ts';
import { envText, statewardEntry, type StatewardEntry } from './stateward-build.ts';
import { envNumber, machine, median, report } from './report.ts';

const REPLICAS = 10;
const GROUP_PODS = ZONES.length * REPLICAS;
const ROUNDS = Math.round(envNumber('BENCH_VERSUS_ROUNDS', 3));
const IDLE_MS = envNumber('BENCH_VERSUS_IDLE_S', 60) * 1000;
const SETTLE_MS = envNumber('BENCH_VERSUS_SETTLE_S', 10) * 1000;
const READY_DELAY = process.env['BENCH_VERSUS_READY_DELAY'] || '2s';
const LOG_LEVEL = process.env['BENCH_VERSUS_LOG_LEVEL'] || 'info';
interface Size {
  /** Pods per namespace, or in the whole cluster. */
  pods: number;
  /** The pods are the cluster's, over CELLS namespaces each with a group; Stateward watches every namespace. */
  clusterWide: boolean;
}
const CELLS = Math.round(envNumber('BENCH_VERSUS_CELLS', 10));
const SIZES: Size[] = (process.env['BENCH_VERSUS_SIZES'] || String(GROUP_PODS)).split(',').map((s) => {
  const text = s.trim();
  const clusterWide = text.endsWith('*');
  const pods = Number(clusterWide ? text.slice(0, -1) : text);
  const least = clusterWide ? CELLS * GROUP_PODS : GROUP_PODS;
  if (!Number.isInteger(pods) || pods < least)
    throw new Error(`BENCH_VERSUS_SIZES: "${s}" is not a pod count of at least ${least}`);
  return { pods, clusterWide };
});
const sizeTitle = (size: Size) =>
  size.clusterWide ? `${size.pods} pods cluster-wide (${CELLS} namespaces)` : `${size.pods} pods`;
const MAX_UNAVAILABLE = [1, 5] as const;
/** Requests up to this long after a rollout completed count for it. */
const TAIL_MS = 3000;
const ROLLOUT_TIMEOUT_MS = 600_000;

type SystemKey = 'ro' | 'sw';

/** What one process of a system is run for: its namespace (and, cluster-wide, every namespace). */
interface ProcessScope {
  namespace: string;
  clusterWide: boolean;
  port: number;
  kubeconfig: string;
  apiUrl: string;
}

interface System {
  key: SystemKey;
  title: string;
  /** The User-Agent prefix of its API requests. */
  agent: string;
  command: string;
  args: (o: ProcessScope) => string[];
  /** Set on top of the bench's environment: the image's ENV for Stateward. */
  env?: Record<string, string>;
}

function systems(roBinary: string, stateward: StatewardEntry): System[] {
  const common = (o: ProcessScope) => [
    `-kubernetes.namespace=${o.namespace}`,
    `-kubernetes.config-file=${o.kubeconfig}`,
    `-kubernetes.api-url=${o.apiUrl}`,
    `-server.port=${o.port}`,
    `-log.level=${LOG_LEVEL}`,
  ];
  return [
    // client-go's default User-Agent: the binary's name first.
    { key: 'ro', title: 'rollout-operator', agent: 'rollout-operator/', command: roBinary, args: common },
    {
      key: 'sw',
      title: 'Stateward',
      agent: 'stateward/',
      command: process.execPath,
      // As the image runs it (bench/stateward-build.ts): the built entry with the Dockerfile's node flags.
      args: (o) => [
        ...stateward.nodeFlags,
        stateward.entry,
        ...common(o),
        ...(o.clusterWide ? ['-kubernetes.watch-namespaces=*'] : []),
      ],
      env: stateward.env,
    },
  ];
}

async function httpOk(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
  await res?.body?.cancel();
  return res?.status === 200;
}

// --- The bench's own view of a group ---------------------------------------------------------------

interface Transition {
  at: number;
  pod: string;
  from: string;
  to: string;
}

/**
 * Watches the group's pods (by label, so pods outside it cost nothing) and
 * StatefulSets of a namespace with its own informers: every pod's state
 * (<revision>/ready|not-ready|terminating, or absent) as it changes, and
 * breaches of the guarantees (a StatefulSet with more unavailable pods than
 * the budget; two StatefulSets disrupted at once).
 */
class GroupWatch {
  readonly transitions: Transition[] = [];
  readonly violations: string[] = [];
  budget = 1;
  private readonly pods: Informer<Pod>;
  private readonly sets: Informer<StatefulSet>;
  private readonly states = new Map<string, string>();
  private synced = false;

  constructor(kube: KubeClient, namespace: string) {
    this.pods = new Informer<Pod>({
      client: kube,
      type: resources.pods,
      namespace,
      labelSelector: 'rollout-group=ingester',
    });
    this.sets = new Informer<StatefulSet>({
      client: kube,
      type: resources.statefulSets,
      namespace,
      labelSelector: 'rollout-group=ingester',
    });
    const seen = (pod: Pod) => this.seen(pod.metadata!.name!, GroupWatch.state(pod));
    this.pods.addHandlers({
      onAdd: seen,
      onUpdate: (_, pod) => seen(pod),
      onDelete: (pod) => this.seen(pod.metadata!.name!, 'absent'),
    });
    this.sets.addHandlers({ onAdd: () => this.check(), onUpdate: () => this.check() });
  }

  private static state(pod: Pod): string {
    const rev = pod.metadata?.labels?.['controller-revision-hash'] ?? '?';
    return `${rev}/${pod.metadata?.deletionTimestamp ? 'terminating' : isReady(pod) ? 'ready' : 'not-ready'}`;
  }

  async start(): Promise<void> {
    this.pods.start();
    this.sets.start();
    await Promise.all([this.pods.waitForSync(), this.sets.waitForSync()]);
    this.synced = true;
  }

  async stop(): Promise<void> {
    await Promise.all([this.pods.stop(), this.sets.stop()]);
  }

  private seen(pod: string, state: string): void {
    const previous = this.states.get(pod) ?? 'absent';
    this.states.set(pod, state);
    if (!this.synced) return;
    if (previous !== state) this.transitions.push({ at: Date.now(), pod, from: previous, to: state });
    this.check();
  }

  private check(): void {
    if (!this.synced) return;
    const disrupted: string[] = [];
    for (const set of this.sets.list()) {
      const name = set.metadata!.name!;
      const pods = this.pods.list().filter((p) => p.metadata?.labels?.['app'] === name);
      const unavailable = pods.filter((p) => !isReady(p)).length + Math.max(0, (set.spec?.replicas ?? 0) - pods.length);
      if (unavailable > 0) disrupted.push(`${name}(${unavailable})`);
      if (unavailable > this.budget)
        this.violations.push(`${name} has ${unavailable} unavailable pods, max-unavailable ${this.budget}`);
    }
    if (disrupted.length > 1)
      this.violations.push(`${disrupted.length} StatefulSets disrupted at once: ${disrupted.join(', ')}`);
  }

  /** Every pod on its StatefulSet's update revision and Ready, every currentRevision caught up, as seen by the caches. */
  rolledOut(): boolean {
    const sets = this.sets.list();
    const pods = this.pods.list();
    return (
      sets.length === ZONES.length &&
      sets.every((s) => {
        const own = pods.filter((p) => p.metadata?.labels?.['app'] === s.metadata?.name);
        return (
          s.status?.observedGeneration === s.metadata?.generation &&
          s.status?.currentRevision === s.status?.updateRevision &&
          s.status?.readyReplicas === s.spec?.replicas &&
          own.length === s.spec?.replicas &&
          own.every((p) => p.metadata?.labels?.['controller-revision-hash'] === s.status?.updateRevision && isReady(p))
        );
      })
    );
  }
}

// --- One run --------------------------------------------------------------------------------------

interface Rollout {
  maxUnavailable: number;
  makespanMs: number;
  /** Median delete → replacement Ready of the rollout's pods. */
  podRestartMs: number;
  batches: number;
  idealMs: number;
  requests: ProxiedRequest[];
  violations: number;
}

interface Run {
  system: SystemKey;
  size: Size;
  round: number;
  readyS: number;
  rssIdle: { total: number; file: number };
  rssAfter: { total: number; file: number };
  startup: ProxiedRequest[];
  idleCpuMsPer60s: number;
  idle: ProxiedRequest[];
  idleWindowMs: number;
  rollouts: Rollout[];
}

interface Bed {
  kube: KubeClient;
  proxy: CountingProxy;
  kubeconfig: string;
  /** Per namespace: the template version last written. */
  versions: Map<string, number>;
  watches: Map<string, GroupWatch>;
}

async function setMaxUnavailable(kube: KubeClient, namespace: string, value: number): Promise<void> {
  for (const zone of ZONES)
    await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
      metadata: { annotations: { 'rollout-max-unavailable': String(value) } },
    });
}

async function rollout(bed: Bed, system: System, fleet: Fleet, namespace: string, mu: number): Promise<Rollout> {
  const watch = bed.watches.get(namespace)!;
  watch.budget = mu;
  watch.transitions.length = 0;
  const violationsBefore = watch.violations.length;
  const version = (bed.versions.get(namespace) ?? 1) + 1;
  bed.versions.set(namespace, version);
  const changedAt = Date.now();
  for (const zone of ZONES) await changeTemplate(bed.kube, namespace, zone, String(version));
  await waitFor(`${system.title}: the rollout at max-unavailable ${mu} to complete`, () => watch.rolledOut(), {
    timeoutMs: ROLLOUT_TIMEOUT_MS,
    intervalMs: 50,
    fail: () => fleet.failure(),
  }).catch((error: unknown) => {
    throw new Error(`${String(error)}; ${system.title}'s last output:\n  ${fleet.lastOutput()}`, { cause: error });
  });
  const doneAt = Date.now();
  await delay(TAIL_MS);
  const transitions = [...watch.transitions];
  const lastReady = Math.max(...transitions.filter((t) => t.to.endsWith('/ready')).map((t) => t.at));
  // The operator's deletes: Ready pods going to terminating (kwok now and then deletes a just-created replacement itself).
  const restarts = transitions
    .filter((t) => t.from.endsWith('/ready') && t.to.endsWith('/terminating'))
    .map((d) => {
      const back = transitions.find((t) => t.pod === d.pod && t.at > d.at && t.to.endsWith('/ready'));
      return back ? back.at - d.at : NaN;
    })
    .filter((x) => Number.isFinite(x));
  const podRestartMs = restarts.length > 0 ? median(restarts) : NaN;
  const batches = ZONES.length * Math.ceil(REPLICAS / mu);
  return {
    maxUnavailable: mu,
    makespanMs: lastReady - changedAt,
    podRestartMs,
    batches,
    idealMs: batches * podRestartMs,
    requests: bed.proxy.between(system.agent, changedAt, doneAt + TAIL_MS),
    violations: watch.violations.length - violationsBefore,
  };
}

/**
 * A system's processes for one run: one, or for rollout-operator at a
 * cluster-wide size one per cell. Figures are the processes' sums.
 */
class Fleet {
  readonly children: Child[];
  readonly ports: number[];

  constructor(children: Child[], ports: number[]) {
    this.children = children;
    this.ports = ports;
  }

  failure(): string | undefined {
    for (const child of this.children) {
      const failure = child.failure();
      if (failure) return failure;
    }
    return undefined;
  }

  lastOutput(): string {
    return this.children.map((c) => c.lastOutput()).join('\n  ');
  }

  rss(): { total: number; file: number } {
    return this.children
      .map((c) => rss(c.pid))
      .reduce((a, b) => ({ total: a.total + b.total, file: a.file + b.file }), { total: 0, file: 0 });
  }

  cpuMs(): number {
    return this.children.reduce((n, c) => n + cpuPreciseMs(c.pid), 0);
  }

  async stop(): Promise<void> {
    await Promise.all(this.children.map((c) => c.stop()));
  }
}

async function startFleet(bed: Bed, system: System, size: Size, cells: string[]): Promise<Fleet> {
  // Stateward watches the whole cluster from the first cell; rollout-operator needs a process per cell.
  const scopes = size.clusterWide && system.key === 'ro' ? cells : [cells[0]!];
  const ports = await freePorts(scopes.length);
  const children = scopes.map(
    (namespace, i) =>
      new Child(
        scopes.length > 1 ? `${system.title} ${i}` : system.title,
        system.command,
        system.args({
          namespace,
          clusterWide: size.clusterWide,
          port: ports[i]!,
          kubeconfig: bed.kubeconfig,
          apiUrl: bed.proxy.url,
        }),
        outOfClusterEnv(system.env),
      ),
  );
  return new Fleet(children, ports);
}

async function runOnce(bed: Bed, system: System, cells: string[], size: Size, round: number): Promise<Run> {
  const namespace = cells[0]!;
  const startedWall = Date.now();
  const started = performance.now();
  const fleet = await startFleet(bed, system, size, cells);
  try {
    await waitFor(
      `${system.title}: GET /ready answering 200`,
      async () =>
        (await Promise.all(fleet.ports.map((port) => httpOk(`http://127.0.0.1:${port}/ready`)))).every(Boolean),
      { timeoutMs: 180_000, intervalMs: 20, fail: () => fleet.failure() },
    );
    const readyS = (performance.now() - started) / 1000;
    await delay(SETTLE_MS);
    const rssIdle = fleet.rss();
    const idleFrom = Date.now();
    const startup = bed.proxy.between(system.agent, startedWall, idleFrom);
    const cpu0 = fleet.cpuMs();
    await delay(IDLE_MS);
    const idleCpu = fleet.cpuMs() - cpu0;
    const idleTo = Date.now();
    const rollouts: Rollout[] = [];
    let current = 1;
    for (const mu of MAX_UNAVAILABLE) {
      if (mu !== current) {
        await setMaxUnavailable(bed.kube, namespace, mu);
        current = mu;
        await delay(1000);
      }
      rollouts.push(await rollout(bed, system, fleet, namespace, mu));
    }
    const rssAfter = fleet.rss();
    return {
      system: system.key,
      size,
      round,
      readyS,
      rssIdle,
      rssAfter,
      startup,
      idleCpuMsPer60s: (idleCpu * 60_000) / (idleTo - idleFrom),
      idle: bed.proxy.between(system.agent, idleFrom, idleTo),
      idleWindowMs: idleTo - idleFrom,
      rollouts,
    };
  } finally {
    await fleet.stop();
    // Back to the starting state for the next run in this namespace.
    await setMaxUnavailable(bed.kube, namespace, 1);
  }
}

// --- Setup ----------------------------------------------------------------------------------------

const CRDS = ['replica-templates.yaml', 'zone-aware-pod-disruption-budgets.yaml'].map((f) =>
  fileURLToPath(new URL(`../deploy/crds/${f}`, import.meta.url)),
);

export function installCrds(kubeconfig: string): void {
  execFileSync('kubectl', ['--kubeconfig', kubeconfig, 'apply', ...CRDS.flatMap((f) => ['-f', f])], {
    stdio: 'ignore',
  });
  execFileSync(
    'kubectl',
    [
      '--kubeconfig',
      kubeconfig,
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      ...CRDS.flatMap((f) => ['-f', f]),
    ],
    { stdio: 'ignore' },
  );
}

/** Pods outside the group: a Deployment, Ready as soon as they run. */
function filler(namespace: string, replicas: number): KubeObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'filler', namespace },
    spec: {
      replicas,
      selector: { matchLabels: { app: 'filler' } },
      template: {
        metadata: { labels: { app: 'filler' }, annotations: { 'pod-ready.stage.kwok.x-k8s.io/delay': '0s' } },
        spec: { containers: [{ name: 'filler', image: 'example.invalid/filler:1' }] },
      },
    },
  } as KubeObject;
}

async function prepareNamespace(kube: KubeClient, name: string, size: number): Promise<void> {
  await benchNamespace(kube, name);
  await createGroup(kube, name, {
    all: { replicas: REPLICAS, readyDelay: READY_DELAY, maxUnavailable: '1' },
    ...Object.fromEntries(ZONES.map((zone) => [zone, { podLabels: { name: `ingester-zone-${zone}` } }])),
  });
  if (size > GROUP_PODS) await kube.create(resources.deployments, filler(name, size - GROUP_PODS));
}

async function waitPrepared(kube: KubeClient, name: string, size: number): Promise<void> {
  await waitGroupSettled(kube, name, 600_000);
  if (size > GROUP_PODS)
    await waitFor(
      `${name}: ${size - GROUP_PODS} filler pods Ready`,
      async () => {
        const d = await kube.get<KubeObject & { status?: { readyReplicas?: number } }>(resources.deployments, {
          namespace: name,
          name: 'filler',
        });
        return (d.status?.readyReplicas ?? 0) >= size - GROUP_PODS;
      },
      { timeoutMs: 1_200_000, intervalMs: 2000 },
    );
}

/** The admin kubeconfig with its server pointing at the proxy. */
async function proxiedKubeconfig(adminPath: string, server: string, dir: string): Promise<string> {
  const kc = parse(await readFile(adminPath, 'utf8')) as { clusters: { cluster: { server: string } }[] };
  for (const c of kc.clusters) c.cluster.server = server;
  const path = join(dir, 'proxied.kubeconfig');
  await writeFile(path, stringify(kc), { mode: 0o600 });
  return path;
}

// --- Reporting --------------------------------------------------------------------------------------

const finite = (values: number[]) => values.filter((v) => Number.isFinite(v));

/** Median (min–max); '—' for none. */
function cell(values: number[], format: (n: number) => string): string {
  const xs = finite(values);
  if (xs.length === 0) return '—';
  const [med, min, max] = [median(xs), Math.min(...xs), Math.max(...xs)].map(format) as [string, string, string];
  return min === max ? med : `${med} (${min}–${max})`;
}

const ro0 = 'rollout-operator 0';

function ratio(sw: number[], ro: number[]): string {
  const a = finite(sw);
  const b = finite(ro);
  if (a.length === 0 || b.length === 0) return '—';
  if (median(b) === 0) return median(a) === 0 ? '—' : `— (${ro0})`;
  return `${(median(a) / median(b)).toFixed(2)}×`;
}

const s2 = (n: number) => n.toFixed(2);
const s1 = (n: number) => n.toFixed(1);
const i0 = (n: number) => n.toFixed(0);
const mib1 = (n: number) => (n / 2 ** 20).toFixed(1);

function byCall(requests: ProxiedRequest[]): Map<string, number> {
  const calls = new Map<string, number>();
  for (const r of requests) calls.set(`${r.verb} ${r.resource}`, (calls.get(`${r.verb} ${r.resource}`) ?? 0) + 1);
  return calls;
}

const callList = (requests: ProxiedRequest[]) =>
  [...byCall(requests)]
    .sort(([, a], [, b]) => b - a)
    .map(([call, n]) => `${call} ×${n}`)
    .join(', ') || 'none';

function runLine(run: Run, title: string): string {
  const parts = [
    `${sizeTitle(run.size)}, round ${run.round}, ${title}: ready ${s2(run.readyS)} s`,
    `RSS ${mib1(run.rssIdle.total)} MiB idle (${mib1(run.rssIdle.file)} file-backed), ${mib1(run.rssAfter.total)} MiB after the rollouts`,
    `idle CPU ${i0(run.idleCpuMsPer60s)} ms/60 s`,
    `start → +${SETTLE_MS / 1000} s: ${run.startup.length} requests (${callList(run.startup)})`,
    `idle: ${run.idle.length} requests in ${s1(run.idleWindowMs / 1000)} s${run.idle.length ? ` (${callList(run.idle)})` : ''}`,
    ...run.rollouts.map(
      (r) =>
        `max-unavailable ${r.maxUnavailable}: makespan ${s1(r.makespanMs / 1000)} s, ideal ${s1(r.idealMs / 1000)} s (${r.batches} × ${s2(r.podRestartMs / 1000)} s), ratio ${s2(r.makespanMs / r.idealMs)}, ${r.requests.length} requests (${callList(r.requests)})${r.violations ? `, ${r.violations} VIOLATIONS` : ''}`,
    ),
  ];
  return parts.join('; ');
}

function table(size: Size, runs: Run[], ro: System, sw: System): string[] {
  const of = (key: SystemKey) => runs.filter((r) => r.system === key);
  const row = (label: string, pick: (r: Run) => number, format: (n: number) => string) => {
    const a = of('ro').map(pick);
    const b = of('sw').map(pick);
    return `| ${label} | ${cell(a, format)} | ${cell(b, format)} | ${ratio(b, a)} |`;
  };
  const per60 = (r: Run, n: number) => (n * 60_000) / r.idleWindowMs;
  const lines = [
    `| ${sizeTitle(size)}, ${ROUNDS} rounds: median (min–max) | ${ro.title}${size.clusterWide ? ` (${CELLS} processes, summed)` : ''} | ${sw.title} | ${sw.title} ÷ ${ro.title} |`,
    '|---|---|---|---|',
    row('start → /ready 200 (s)', (r) => r.readyS, s2),
    row(`RSS, idle ${SETTLE_MS / 1000} s after ready (MiB)`, (r) => r.rssIdle.total, mib1),
    row('… of it anonymous (VmRSS − RssFile; MiB)', (r) => r.rssIdle.total - r.rssIdle.file, mib1),
    row('RSS after the two rollouts (MiB)', (r) => r.rssAfter.total, mib1),
    row('… of it anonymous (MiB)', (r) => r.rssAfter.total - r.rssAfter.file, mib1),
    row(
      `idle CPU per 60 s (ms on CPU, from schedstat${IDLE_MS === 60_000 ? '' : `; measured over ${IDLE_MS / 1000} s`})`,
      (r) => r.idleCpuMsPer60s,
      i0,
    ),
    row('API requests per idle minute', (r) => per60(r, r.idle.length), s1),
    row(`API requests, start → ${SETTLE_MS / 1000} s after ready`, (r) => r.startup.length, i0),
  ];
  for (const [i, mu] of MAX_UNAVAILABLE.entries()) {
    lines.push(
      row(`API requests, rollout at max-unavailable ${mu}`, (r) => r.rollouts[i]!.requests.length, i0),
      row(`makespan at max-unavailable ${mu} (s)`, (r) => r.rollouts[i]!.makespanMs / 1000, s1),
      row(`makespan ÷ ideal at max-unavailable ${mu}`, (r) => r.rollouts[i]!.makespanMs / r.rollouts[i]!.idealMs, s2),
    );
  }
  lines.push(
    row('guarantee breaches seen (all rollouts)', (r) => r.rollouts.reduce((n, x) => n + x.violations, 0), i0),
  );
  return lines;
}

/** API requests by verb and resource: median per run. */
function callsTable(runs: Run[]): string[] {
  const columns: { title: string; key: SystemKey; pick: (r: Run) => ProxiedRequest[]; per?: (r: Run) => number }[] = [];
  for (const [i, mu] of MAX_UNAVAILABLE.entries())
    for (const key of ['ro', 'sw'] as const)
      columns.push({ title: `${key === 'ro' ? 'RO' : 'SW'} mu ${mu}`, key, pick: (r) => r.rollouts[i]!.requests });
  for (const key of ['ro', 'sw'] as const)
    columns.push({
      title: `${key === 'ro' ? 'RO' : 'SW'} idle /min`,
      key,
      pick: (r) => r.idle,
      per: (r) => 60_000 / r.idleWindowMs,
    });
  const calls = new Set<string>();
  for (const r of runs) for (const c of columns) for (const call of byCall(c.pick(r)).keys()) calls.add(call);
  const value = (call: string, c: (typeof columns)[number]) => {
    const xs = runs
      .filter((r) => r.system === c.key)
      .map((r) => (byCall(c.pick(r)).get(call) ?? 0) * (c.per?.(r) ?? 1));
    const m = xs.length ? median(xs) : 0;
    return m === 0 ? '' : Number.isInteger(m) ? String(m) : m.toFixed(1);
  };
  return [
    `| API requests by verb and resource (median per run) | ${columns.map((c) => c.title).join(' | ')} |`,
    `|---|${columns.map(() => '---:').join('|')}|`,
    ...[...calls].sort().map((call) => `| ${call} | ${columns.map((c) => value(call, c)).join(' | ')} |`),
  ];
}

// --- The bench ------------------------------------------------------------------------------------

export async function versusBench(): Promise<boolean> {
  const spec = PEERS['rollout-operator'];
  const built = await peerBinary(spec, (line) => report('versus-peer', line));
  if (!built.ok) {
    report('versus-peer', `${spec.title} SKIPPED: ${built.reason.replaceAll('\n', `\n${' '.repeat(29)}`)}`);
    return false;
  }
  const goVersion = (() => {
    try {
      return execFileSync('go', ['version'], { encoding: 'utf8' })
        .trim()
        .replace(/^go version /, '');
    } catch {
      return 'unknown';
    }
  })();
  report(
    'versus-machine',
    `${machine()}; ${goVersion}; ${spec.repo} ${spec.commit} (${spec.describe})${built.notes.length ? `, built with ${built.notes.join('; ')}` : ''}`,
  );
  const form = await statewardEntry();
  report(
    'versus-stateward',
    form.form === 'build'
      ? `run as the image runs it: ${envText(form.env)}node ${form.nodeFlags.join(' ')} ${form.entry} (scripts/build.ts, the Dockerfile's flags and ENV)`
      : `run from its sources: node ${form.nodeFlags.join(' ')} ${form.entry} (BENCH_STATEWARD_FROM=sources)`,
  );
  const [ro, sw] = systems(built.path, form) as [System, System];

  // Pods in the cluster at once: both systems' namespaces, or the cells.
  const largest = Math.max(...SIZES.map((size) => (size.clusterWide ? size.pods : 2 * size.pods)));
  const scratch = await mkdtemp(join(tmpdir(), 'stateward-bench-versus-'));
  const cluster = await LocalCluster.start({
    name: `bench-versus-${process.pid}`,
    nodesPerZone: 1,
    log: () => {},
    // Room for both namespaces' pods on the three fake nodes.
    ...(largest > 2 * GROUP_PODS ? { maxPodsPerNode: Math.ceil(largest / ZONES.length) + 100 } : {}),
  });
  const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 60_000, userAgent: 'stateward-bench' });
  let proxy: CountingProxy | undefined;
  const watches = new Map<string, GroupWatch>();
  let ok = true;
  try {
    installCrds(cluster.kubeconfigPath);
    // The proxy's own way in: the admin's CA and client certificate.
    const admin: HttpsRequestOptions = {};
    await cluster.kubeConfig().applyToHTTPSOptions(admin);
    proxy = new CountingProxy({
      upstream: cluster.server,
      upstreamTls: { ca: admin.ca as string, cert: admin.cert as string, key: admin.key as string },
      serverTls: {
        cert: await readFile(join(cluster.stateDir, 'apiserver.crt')),
        key: await readFile(join(cluster.stateDir, 'apiserver.key')),
        clientCa: await readFile(join(cluster.stateDir, 'ca.crt')),
      },
      agents: [ro.agent, sw.agent],
    });
    await proxy.listen();
    const kubeconfig = await proxiedKubeconfig(cluster.kubeconfigPath, proxy.url, scratch);
    const bed: Bed = { kube, proxy, kubeconfig, versions: new Map(), watches };

    for (const [index, size] of SIZES.entries()) {
      // Per system, the namespaces it runs for (rollouts in the first); at a cluster-wide size both share the cells.
      const cells = Array.from({ length: CELLS }, (_, i) => `versus-cell-${i}-${size.pods}`);
      const scopes: Record<SystemKey, string[]> = size.clusterWide
        ? { ro: cells, sw: cells }
        : { ro: [`versus-ro-${size.pods}`], sw: [`versus-sw-${size.pods}`] };
      const prepared = [...new Set([...scopes.ro, ...scopes.sw])];
      const perNamespace = size.clusterWide ? Math.floor(size.pods / CELLS) : size.pods;
      const preparing = performance.now();
      for (const namespace of prepared) await prepareNamespace(kube, namespace, perNamespace);
      for (const namespace of prepared) await waitPrepared(kube, namespace, perNamespace);
      const rolled = [...new Set([scopes.ro[0]!, scopes.sw[0]!])];
      for (const namespace of rolled) {
        const watch = new GroupWatch(kube, namespace);
        await watch.start();
        watches.set(namespace, watch);
      }
      report(
        'versus-setup',
        `${sizeTitle(size)}: ${perNamespace} pods per namespace (the group: ${ZONES.length} StatefulSets × ${REPLICAS}, ready delay ${READY_DELAY}${perNamespace > GROUP_PODS ? `; ${perNamespace - GROUP_PODS} pods outside it` : ''}) ready in ${((performance.now() - preparing) / 1000).toFixed(0)} s; ${ROUNDS} rounds; idle window ${IDLE_MS / 1000} s (scaled to 60 s), settle ${SETTLE_MS / 1000} s; log level ${LOG_LEVEL}`,
      );
      const runs: Run[] = [];
      for (let round = 1; round <= ROUNDS; round++)
        for (const system of [ro, sw]) {
          const run = await runOnce(bed, system, scopes[system.key], size, round);
          runs.push(run);
          report('versus-run', runLine(run, system.title));
        }
      console.log('');
      for (const line of table(size, runs, ro, sw)) console.log(line);
      console.log('');
      for (const line of callsTable(runs)) console.log(line);
      console.log('');
      report(
        'versus-ideal',
        `ideal makespan = ${ZONES.length} zones × ⌈${REPLICAS} / max-unavailable⌉ batches × the median delete → replacement Ready time of that rollout's pods (kwok ready delay ${READY_DELAY}). rollout-operator acts on a change at its next -reconcile.interval tick (5 s), Stateward at once`,
      );
      if (runs.some((r) => r.system === 'sw' && r.rollouts.some((x) => x.violations > 0))) ok = false;
      for (const namespace of rolled) {
        await watches.get(namespace)?.stop();
        watches.delete(namespace);
      }
      // The next size starts from empty namespaces (the last size's go with the cluster).
      if (index < SIZES.length - 1) {
        for (const namespace of prepared)
          await kube.delete(resources.namespaces, { name: namespace }).catch(() => undefined);
        // Gone before the next size: a cluster-wide Stateward would count their terminating pods.
        await waitFor(
          "the last size's namespaces to be gone",
          async () => {
            const left = await Promise.all(
              prepared.map((name) =>
                kube.get(resources.namespaces, { name }).then(
                  () => true,
                  () => false,
                ),
              ),
            );
            return !left.some(Boolean);
          },
          { timeoutMs: 1_200_000, intervalMs: 2000 },
        );
      }
    }
    return ok;
  } finally {
    for (const watch of watches.values()) await watch.stop();
    await proxy?.close();
    await kube.close();
    await cluster.teardown();
    await rm(scratch, { recursive: true, force: true });
  }
}
