// restarts: config-change restarts at scale, side by side with
// stakater/Reloader and xing's kubernetes-deployment-restart-controller
// (issue 23). One namespace holds 5,000 ConfigMaps and 2,000 Secrets of
// ~4 KiB and 500 Deployments (replicas 0, so no pods), each using 2
// ConfigMaps (envFrom, a volume) and 1 Secret (envFrom), opted in for all
// three systems at once (`com.xing.deployment-restart: enabled` and
// `reloader.stakater.com/auto: "true"`; Stateward reads both).
//
// Rounds interleave the systems (round 1: Reloader, xing, Stateward; round
// 2: the same, ...). Only one system runs at a time, and before each run
// the Deployments are put back to what the bench created (no recorded
// checksums, no restart trigger, no Reloader env var) and the Deployment
// controller has caught up, so every run starts from the same state. A run:
//   1. cold start: process start → ready → synced → (xing, Stateward) every
//      workload's checksums recorded → settled (no API request for 3 s);
//   2. RSS (VmRSS of the child), then idle CPU (time on CPU of the child's threads, bench/proc.ts)
//      over BENCH_RESTARTS_IDLE_S (default 60 s; a shorter window is scaled to 60 s);
//   3. steady state: BENCH_RESTARTS_CHANGES (10) config changes one after
//      another, each from the bench's patch to the bench's watch seeing the
//      Deployment's generation move — the restart patch, whatever its form
//      (xing's and Stateward's template annotation, Reloader's env var) —
//      minus the system's grace;
//   4. restart: SIGTERM, start again, and the moment it is ready a Secret is
//      changed: from that patch to the restart, minus the grace; start →
//      ready and start → synced again.
// Signals, read from each system's own source:
//   ready:  Stateward: GET /ready answers 200 (its caches have synced).
//           Reloader: GET :9090/live answers 200; it is served by the last
//           step of its start, after its controllers' goroutines are
//           started (their informers may still be listing).
//           xing has no health endpoint (its :10254/metrics is served before
//           anything starts): its glog line "Starting" (at -v 1), logged in
//           Run() just before it starts its informers.
//   synced: every config's content known.
//           Stateward: deployment_restart_controller_configs_total reaches
//           the namespace's ConfigMaps and Secrets (counted just before the
//           start: the bench's 7,000, kube-root-ca.crt, its checksum key)
//           and every workload carries the applied-checksums annotation.
//           xing: its deployment_restart_controller_configs_total — its
//           whole catalog: it watches every namespace — equals the number of
//           ConfigMaps and Secrets in the cluster, counted just before it
//           starts. Configs a Deployment references enter the catalog as
//           "pending" before they are seen, but all of them exist, so the
//           count is reached only once every config was seen with its
//           checksum.
//           Reloader keeps no checksums (it compares the old and new object
//           of each update event); the nearest equivalent is its informers
//           having delivered every config: reloader_events_received_total
//           {event_type="add"} for configmaps and for secrets reaching the
//           namespace's counts (the initial list arrives as Add events).
//   API requests: counted the same way for all three, in the kube-apiserver's
//           audit log (this bench starts the apiserver with a Metadata-level
//           policy), by User-Agent: Stateward's `stateward/<version>`, the
//           peers' client-go default (their binary's name first). A
//           long-running request (watch) counts once.
// Every system runs with its default client rate limits (client-go: 5 qps,
// burst 10; Stateward: 5 qps, burst 10 per API group). Stateward and xing
// get a 1 s grace (-restart-grace-period=1, --restart-grace-period=1; xing
// checks its queue every 500 ms, its default -restart-check-period).
// Reloader has no grace.
//
// The peers are built from source on first use (bench/peers.ts); a peer
// whose source is missing is skipped with what to do.
// BENCH_RESTARTS_SCALE scales the object counts (0.1 while developing),
// BENCH_RESTARTS_ROUNDS (3) the rounds, BENCH_RESTARTS_CHANGES (10) the
// steady changes per run, BENCH_RESTARTS_SYSTEMS (reloader,xing,stateward)
// picks the systems. The targets (issue 23, against Reloader's medians):
// synced ≤ 2×, change right after a restart ≤ 100 ms beyond the grace,
// RSS ≤ 1×, idle CPU ≤ 2×; and, Stateward's own, a steady change's p99
// ≤ 100 ms beyond the grace with no LIST per change.
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { Child, outOfClusterEnv, type LiveMemory } from './child.ts';
import { cpuByThread, cpuMs, cpuPreciseMs, rss, threadCpuText } from './proc.ts';
import { envText, statewardEntry, type StatewardEntry } from './stateward-build.ts';
import { freePorts } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { resources, type KubeObject, type ResourceType } from '../src/runtime/kube/types.ts';
import { Informer } from '../src/runtime/informer/informer.ts';
import { benchNamespace } from './namespace.ts';
import { PEERS, peerBinary, type PeerBinary } from './peers.ts';
import { envNumber, median, mib, percentile, report } from './report.ts';

/** BENCH_STATEWARD_LOG_LEVEL: Stateward's -log.level (default warn). */
const STATEWARD_LOG_LEVEL = process.env['BENCH_STATEWARD_LOG_LEVEL'] ?? 'warn';
/** BENCH_STATEWARD_NODE_FLAGS: Node flags added to Stateward's, space-separated (e.g. --trace-gc, for a diagnosis). */
const STATEWARD_NODE_FLAGS = (process.env['BENCH_STATEWARD_NODE_FLAGS'] ?? '').split(' ').filter(Boolean);
/** BENCH_STATEWARD_ENV: variables added to Stateward's environment, "K=V K2=V2" (e.g. NODE_DEBUG=timer, for a diagnosis). */
const STATEWARD_ENV = Object.fromEntries(
  (process.env['BENCH_STATEWARD_ENV'] ?? '')
    .split(' ')
    .filter(Boolean)
    .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
);
/**
 * BENCH_RESTARTS_PROFILE_DIR: Stateward runs with -server.pprof.enabled and its idle window is
 * profiled (/debug/pprof/profile), saved there as idle-<round>.pb.gz for `go tool pprof -top`.
 * The profiler costs CPU of its own: the idle figure of such a run is not comparable.
 */
const PROFILE_DIR = process.env['BENCH_RESTARTS_PROFILE_DIR'];

const SCALE = envNumber('BENCH_RESTARTS_SCALE', 1);
const CONFIGMAPS = Math.round(5000 * SCALE);
const SECRETS = Math.round(2000 * SCALE);
const WORKLOADS = Math.round(500 * SCALE);
const ROUNDS = Math.round(envNumber('BENCH_RESTARTS_ROUNDS', 3));
const CHANGES = Math.round(envNumber('BENCH_RESTARTS_CHANGES', 10));
const IDLE_MS = envNumber('BENCH_RESTARTS_IDLE_S', 60) * 1000;
const GRACE_MS = 1000;
const QUIET_MS = 3000;
const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
const OPT_IN: Record<string, string> = {
  'com.xing.deployment-restart': 'enabled',
  'reloader.stakater.com/auto': 'true',
};
const CONFIGS_METRIC = 'deployment_restart_controller_configs_total';
const RELOADER_PORT = 9090;
const XING_PORT = 10254;

type SystemKey = 'reloader' | 'xing' | 'stateward';
const ORDER: SystemKey[] = ['reloader', 'xing', 'stateward'];

type Deployment = KubeObject & {
  spec?: {
    template?: {
      metadata?: { annotations?: Record<string, string> };
      spec?: { containers?: { name?: string; env?: unknown[] }[] };
    };
  };
  status?: { observedGeneration?: number };
};

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const configValue = () => randomBytes(3000).toString('base64'); // 4,000 characters

async function inParallel<T>(items: T[], width: number, work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

const metricValue = (text: string, name: string) =>
  Number(
    text
      .split('\n')
      .find((l) => l.startsWith(`${name} `))
      ?.split(' ')[1] ?? NaN,
  );

async function httpText(url: string): Promise<string | undefined> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) }).catch(() => undefined);
  return res?.ok ? res.text() : undefined;
}

async function httpOk(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
  await res?.body?.cancel();
  return res?.status === 200;
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, () => server.close(() => resolve(true)));
  });
}

// --- The audit log: API requests per system --------------------------------------------------------

interface AuditRecord {
  /** requestReceivedTimestamp, epoch ms. */
  at: number;
  system: SystemKey;
  verb: string;
  resource: string;
}

interface AuditEvent {
  auditID: string;
  stage: string;
  verb: string;
  userAgent?: string;
  requestReceivedTimestamp: string;
  objectRef?: { resource?: string; subresource?: string };
}

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    nonResourceURLs: ['/healthz*', '/readyz*', '/livez*', '/metrics', '/version']
  - level: Metadata
`;

/** Reads the apiserver's audit log as it grows, keeping the requests of the systems under test. */
class AuditLog {
  readonly records: AuditRecord[] = [];
  private offset = 0;
  private partial = '';
  private readonly started = new Set<string>();
  private readonly path: string;
  private readonly agents: [string, SystemKey][];

  constructor(path: string, agents: [string, SystemKey][]) {
    this.path = path;
    this.agents = agents;
  }

  async poll(): Promise<void> {
    const file = await open(this.path, 'r').catch(() => undefined);
    if (!file) return;
    try {
      for (;;) {
        const buffer = Buffer.alloc(4 << 20);
        const { bytesRead } = await file.read(buffer, 0, buffer.length, this.offset);
        if (bytesRead === 0) break;
        this.offset += bytesRead;
        const lines = (this.partial + buffer.subarray(0, bytesRead).toString('utf8')).split('\n');
        this.partial = lines.pop() ?? '';
        for (const line of lines) if (line) this.add(JSON.parse(line) as AuditEvent);
      }
    } finally {
      await file.close();
    }
  }

  private add(event: AuditEvent): void {
    const system = this.agents.find(([prefix]) => event.userAgent?.startsWith(prefix))?.[1];
    if (!system) return;
    // A long-running request (watch) is logged when its response starts and again when it ends: count it once.
    if (event.stage === 'ResponseStarted') this.started.add(event.auditID);
    else if (this.started.delete(event.auditID)) return;
    const resource = `${event.objectRef?.resource ?? '-'}${event.objectRef?.subresource ? `/${event.objectRef.subresource}` : ''}`;
    this.records.push({ at: Date.parse(event.requestReceivedTimestamp), system, verb: event.verb, resource });
  }

  /** The requests `system` made in [from, to) (epoch ms). */
  between(system: SystemKey, from: number, to: number): AuditRecord[] {
    return this.records.filter((r) => r.system === system && r.at >= from && r.at < to);
  }

  lastAt(system: SystemKey): number {
    for (let i = this.records.length - 1; i >= 0; i--)
      if (this.records[i]!.system === system) return this.records[i]!.at;
    return 0;
  }
}

interface Counts {
  total: number;
  byVerb: Record<string, number>;
  /** LISTs, leaving out Stateward's optional ZPDB informer, which retries with backoff while its CRD is not installed. */
  lists: number;
}

function counts(records: AuditRecord[]): Counts {
  const byVerb: Record<string, number> = {};
  for (const r of records) byVerb[r.verb] = (byVerb[r.verb] ?? 0) + 1;
  return {
    total: records.length,
    byVerb,
    lists: records.filter((r) => r.verb === 'list' && r.resource !== 'zoneawarepoddisruptionbudgets').length,
  };
}

/** "verb resource ×n", most first. */
function byCall(records: AuditRecord[]): string {
  const calls = new Map<string, number>();
  for (const r of records) calls.set(`${r.verb} ${r.resource}`, (calls.get(`${r.verb} ${r.resource}`) ?? 0) + 1);
  return [...calls]
    .sort(([, a], [, b]) => b - a)
    .map(([call, n]) => `${call} ×${n}`)
    .join(', ');
}

const formatCounts = (c: Counts, per = 1) =>
  `${fmt(c.total / per, per === 1 ? 0 : 1)} (${Object.entries(c.byVerb)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([verb, n]) => `${verb} ${fmt(n / per, per === 1 ? 0 : 1)}`)
    .join(', ')})`;
const fmt = (n: number, digits: number) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

// --- The systems as child processes -------------------------------------------------------------

/** performance.now() once `check` holds, polled every `intervalMs`; fails at once if the child dies. */
async function pollUntil(
  child: Child,
  what: string,
  check: () => Promise<boolean> | boolean,
  intervalMs: number,
  timeoutMs: number,
): Promise<number> {
  return waitFor(`${child.name}: ${what}`, async () => ((await check()) ? performance.now() : undefined), {
    timeoutMs,
    intervalMs,
    fail: () => child.failure(),
  });
}

interface Started {
  child: Child;
  /** When the system is ready (performance.now()). */
  ready: () => Promise<number>;
  /** One probe of "every config's content known". */
  synced: () => Promise<boolean>;
  /** Stateward only: its API client metrics. */
  metrics?: () => Promise<string>;
  /** Stateward only, with BENCH_RESTARTS_PROFILE_DIR: a CPU profile over the next `seconds` (pprof). */
  profile?: (seconds: number) => Promise<Buffer>;
}

interface SystemContext {
  /** ConfigMaps and Secrets in the bench namespace, counted just before the start (the bench's own, kube-root-ca.crt, Stateward's checksum key). */
  namespaceConfigs: { configMaps: number; secrets: number };
  /** ConfigMaps plus Secrets in the whole cluster, counted just before the start (xing watches every namespace). */
  clusterConfigs: number;
}

interface System {
  key: SystemKey;
  title: string;
  graceMs: number;
  /** The User-Agent its requests carry (a prefix). */
  userAgent: string;
  /** Writes the applied checksums on every workload at its first start (xing, Stateward). */
  records: boolean;
  notes: string[];
  start(context: SystemContext): Promise<Started>;
}

function statewardSystem(cluster: LocalCluster, namespace: string, form: StatewardEntry): System {
  const { gcPreload: preload, entry: bin, nodeFlags } = form;
  return {
    key: 'stateward',
    title: 'Stateward',
    graceMs: GRACE_MS,
    userAgent: 'stateward/',
    records: true,
    notes:
      form.form === 'sources' ? ['run from its sources (BENCH_STATEWARD_FROM=sources), not as the image runs it'] : [],
    async start(context) {
      const [port] = (await freePorts(1)) as [number];
      const child = new Child(
        'Stateward',
        process.execPath,
        [
          ...nodeFlags,
          ...STATEWARD_NODE_FLAGS,
          '--expose-gc',
          '--import',
          preload,
          bin,
          `-kubernetes.namespace=${namespace}`,
          `-kubernetes.config-file=${cluster.kubeconfigPath}`,
          `-kubernetes.api-url=${cluster.server}`,
          `-server.port=${port}`,
          `-log.level=${STATEWARD_LOG_LEVEL}`,
          '-config-restarts.enabled',
          `-restart-grace-period=${GRACE_MS / 1000}`,
          ...(PROFILE_DIR ? ['-server.pprof.enabled'] : []),
        ],
        { ...process.env, ...form.env, ...STATEWARD_ENV },
      );
      const url = (path: string) => `http://127.0.0.1:${port}${path}`;
      return {
        child,
        ready: () => pollUntil(child, 'GET /ready answering 200', () => httpOk(url('/ready')), 50, 180_000),
        // Every config's checksum known, as for xing (its configs metric, the same name): what the issue calls
        // synced. Recording the workloads' checksums on a first start is measured apart (every workload recorded).
        synced: async () =>
          metricValue((await httpText(url('/metrics'))) ?? '', CONFIGS_METRIC) >=
          context.namespaceConfigs.configMaps + context.namespaceConfigs.secrets,
        metrics: async () => (await httpText(url('/metrics'))) ?? '',
        profile: async (seconds: number) => {
          const response = await fetch(url(`/debug/pprof/profile?seconds=${seconds}`));
          if (!response.ok) throw new Error(`GET /debug/pprof/profile: ${response.status}`);
          return Buffer.from(await response.arrayBuffer());
        },
      };
    },
  };
}

function reloaderSystem(cluster: LocalCluster, namespace: string, built: Extract<PeerBinary, { ok: true }>): System {
  const adds = (text: string, resource: string) =>
    text
      .split('\n')
      .filter(
        (l) =>
          l.startsWith('reloader_events_received_total{') &&
          l.includes('event_type="add"') &&
          l.includes(`resource_type="${resource}"`),
      )
      .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
  return {
    key: 'reloader',
    title: 'Reloader',
    graceMs: 0,
    userAgent: `${built.spec.binary}/`,
    records: false,
    notes: built.notes,
    start(context) {
      // --namespaces: Reloader's scoped mode, watching the bench namespace only. Default reload strategy (env vars).
      const child = new Child(
        'Reloader',
        built.path,
        [`--namespaces=${namespace}`],
        outOfClusterEnv({ KUBECONFIG: cluster.kubeconfigPath }),
      );
      const url = (path: string) => `http://127.0.0.1:${RELOADER_PORT}${path}`;
      return Promise.resolve({
        child,
        ready: () => pollUntil(child, 'GET :9090/live answering 200', () => httpOk(url('/live')), 50, 180_000),
        synced: async () => {
          const text = (await httpText(url('/metrics'))) ?? '';
          return (
            adds(text, 'configmaps') >= context.namespaceConfigs.configMaps &&
            adds(text, 'secrets') >= context.namespaceConfigs.secrets
          );
        },
      });
    },
  };
}

function xingSystem(cluster: LocalCluster, built: Extract<PeerBinary, { ok: true }>, home: string): System {
  return {
    key: 'xing',
    title: 'xing',
    graceMs: GRACE_MS,
    userAgent: `${built.spec.binary}/`,
    records: true,
    notes: built.notes,
    async start(context) {
      // xing reads $HOME/.kube/config outside a cluster, and watches every namespace (it has no namespace flag).
      await mkdir(join(home, '.kube'), { recursive: true });
      await copyFile(cluster.kubeconfigPath, join(home, '.kube', 'config'));
      const child = new Child(
        'xing',
        built.path,
        [`--restart-grace-period=${GRACE_MS / 1000}`, '--verbose=1'],
        outOfClusterEnv({ HOME: home }),
      );
      // Listening from the spawn on, so the line cannot pass unseen.
      const ready = child.waitLine(/\] Starting$/, 180_000);
      ready.catch(() => undefined);
      return {
        child,
        ready: () => ready,
        synced: async () =>
          metricValue((await httpText(`http://127.0.0.1:${XING_PORT}/metrics`)) ?? '', CONFIGS_METRIC) >=
          context.clusterConfigs,
      };
    },
  };
}

// --- One run of one system ------------------------------------------------------------------------

interface Run {
  system: SystemKey;
  round: number;
  readyS: number;
  syncedS: number;
  recordedS: number | undefined;
  settledS: number;
  cpuToSettledS: number;
  rssBytes: number;
  rssFileBytes: number;
  idleCpuMsPer60s: number;
  /** The idle window's CPU by thread name (unscaled). */
  idleThreads: string;
  steady: number[];
  steadyMissed: number;
  restartReadyS: number;
  restartSyncedS: number;
  /** Change at ready → restart, minus the grace; undefined when no restart came. */
  afterRestartMs: number | undefined;
  api: { cold: Counts; idlePerMin: number; idleCalls: string; perChange: Counts; restart: Counts };
  /** Stateward: memory after a forced GC, and its own count of API calls by call during the changes. */
  live?: LiveMemory;
  calls?: { lists: number; listed: string; byCall: string };
}

/** A config change aimed at one workload. */
interface Change {
  workload: string;
  type: ResourceType;
  config: string;
  patch: () => unknown;
}

function changeFor(k: number, kind: 'configmap-env' | 'configmap-volume' | 'secret'): Change {
  const w = (k * 7 + 1) % WORKLOADS;
  if (kind === 'secret')
    return {
      workload: `app-${w}`,
      type: resources.secrets,
      config: `secret-${w}`,
      patch: () => ({ data: { password: Buffer.from(configValue()).toString('base64') } }),
    };
  const config = kind === 'configmap-env' ? `cm-${2 * w}` : `cm-${2 * w + 1}`;
  return {
    workload: `app-${w}`,
    type: resources.configMaps,
    config,
    patch: () => ({ data: { 'config.yaml': configValue() } }),
  };
}

const steadyChanges = range(CHANGES).map((k) =>
  changeFor(k, (['configmap-env', 'configmap-volume', 'secret'] as const)[k % 3]!),
);
const restartChange = changeFor(CHANGES + 3, 'secret');

/** The bench's view of the Deployments: when each one's generation moves (a restart patch), and whether it is as created. */
class Workloads {
  readonly informer: Informer<Deployment>;
  private readonly waiters = new Map<string, { after: number; resolve: (at: number) => void }>();

  constructor(kube: KubeClient, namespace: string) {
    this.informer = new Informer<Deployment>({ client: kube, type: resources.deployments, namespace });
    this.informer.addHandlers({
      onUpdate: (old, d) => {
        if (old.metadata?.generation === d.metadata?.generation) return;
        const at = performance.now();
        const waiter = this.waiters.get(d.metadata!.name!);
        if (waiter && at > waiter.after) {
          this.waiters.delete(d.metadata!.name!);
          waiter.resolve(at);
        }
      },
    });
  }

  /** The time the workload's generation next moves after `after`, or undefined after `timeoutMs`. */
  async restarted(name: string, after: number, timeoutMs: number): Promise<number | undefined> {
    const seen = new Promise<number>((resolve) => this.waiters.set(name, { after, resolve }));
    const timer = delay(timeoutMs).then(() => undefined);
    const at = await Promise.race([seen, timer]);
    this.waiters.delete(name);
    return at;
  }

  allRecorded(): boolean {
    return this.informer.list().every((d) => d.metadata?.annotations?.[APPLIED]);
  }

  /** As the bench created it: only the opt-in annotations, no template annotations, no env vars, and seen by the Deployment controller. */
  static pristine(d: Deployment): boolean {
    const extra = Object.keys(d.metadata?.annotations ?? {}).filter(
      (k) => !(k in OPT_IN) && !k.startsWith('deployment.kubernetes.io/'),
    );
    return (
      extra.length === 0 &&
      Object.keys(d.spec?.template?.metadata?.annotations ?? {}).length === 0 &&
      (d.spec?.template?.spec?.containers ?? []).every((c) => (c.env ?? []).length === 0)
    );
  }

  /** Puts every Deployment back as created (what xing, Stateward or Reloader wrote removed); the number changed. */
  async reset(kube: KubeClient, namespace: string): Promise<number> {
    const changed = this.informer.list().filter((d) => !Workloads.pristine(d));
    await inParallel(changed, 16, async (d) => {
      const i = Number(d.metadata!.name!.slice('app-'.length));
      const annotations = Object.fromEntries(
        Object.keys(d.metadata?.annotations ?? {})
          .filter((k) => !(k in OPT_IN) && !k.startsWith('deployment.kubernetes.io/'))
          .map((k) => [k, null]),
      );
      // A merge patch replaces lists whole: the container goes back to exactly what was created.
      await kube.patch(resources.deployments, { namespace, name: d.metadata!.name! }, 'merge', {
        metadata: { annotations },
        spec: {
          template: {
            metadata: { annotations: null },
            spec: { containers: deployment(namespace, i).spec.template.spec.containers },
          },
        },
      });
    });
    await waitFor(
      'every Deployment as created, and seen by the Deployment controller',
      () =>
        this.informer
          .list()
          .every((d) => Workloads.pristine(d) && d.status?.observedGeneration === d.metadata?.generation),
      { timeoutMs: 300_000, intervalMs: 100 },
    );
    return changed.length;
  }
}

function deployment(namespace: string, i: number) {
  return {
    metadata: { name: `app-${i}`, namespace, annotations: { ...OPT_IN } },
    spec: {
      replicas: 0,
      selector: { matchLabels: { app: `app-${i}` } },
      template: {
        metadata: { labels: { app: `app-${i}` } },
        spec: {
          // The volume is mounted: Reloader restarts only for a volume some container mounts (Stateward and xing for any volume).
          containers: [
            {
              name: 'app',
              image: 'example.invalid/app:1',
              envFrom: [{ configMapRef: { name: `cm-${2 * i}` } }, { secretRef: { name: `secret-${i}` } }],
              volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
            },
          ],
          volumes: [{ name: 'config', configMap: { name: `cm-${2 * i + 1}` } }],
        },
      },
    },
  };
}

/** How many objects of a type there are (in `namespace`, or the cluster): a one-item page, the rest comes as remainingItemCount. */
async function countOf(kube: KubeClient, type: ResourceType, namespace?: string): Promise<number> {
  const page = await kube.list(type, { ...(namespace ? { namespace } : {}), limit: 1, metadataOnly: true });
  return page.items.length + (page.metadata?.remainingItemCount ?? 0);
}

/** The context of a start: the configs there are just before it. */
async function contextFor(kube: KubeClient, namespace: string): Promise<SystemContext> {
  return {
    namespaceConfigs: {
      configMaps: await countOf(kube, resources.configMaps, namespace),
      secrets: await countOf(kube, resources.secrets, namespace),
    },
    clusterConfigs: (await countOf(kube, resources.configMaps)) + (await countOf(kube, resources.secrets)),
  };
}

/** Stateward's API calls by call, from its client metrics (LISTs apart, leaving out the ZPDB informer's retries). */
function statewardCalls(text: string): { lists: number; listPaths: Map<string, number>; byCall: Map<string, number> } {
  let lists = 0;
  const listPaths = new Map<string, number>();
  const byCall = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('rollout_operator_kubernetes_api_client_request_duration_seconds_count')) continue;
    const n = Number(line.split(' ').at(-1));
    const call = `${/method="([^"]+)"/.exec(line)?.[1] ?? '?'} ${/path="([^"]+)"/.exec(line)?.[1] ?? '?'} ${/status_code="([^"]+)"/.exec(line)?.[1] ?? '?'}`;
    byCall.set(call, (byCall.get(call) ?? 0) + n);
    if (
      line.includes('collection') &&
      line.includes('method="GET"') &&
      !line.includes('zoneawarepoddisruptionbudgets')
    ) {
      lists += n;
      const path = /path="([^"]+)"/.exec(line)?.[1] ?? '?';
      listPaths.set(path, (listPaths.get(path) ?? 0) + n);
    }
  }
  return { lists, listPaths, byCall };
}

const diff = (after: Map<string, number>, before: Map<string, number>) =>
  [...after]
    .map(([k, n]) => [k, n - (before.get(k) ?? 0)] as const)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ×${n}`);

async function runSystem(
  system: System,
  round: number,
  env: { kube: KubeClient; namespace: string; workloads: Workloads; audit: AuditLog },
): Promise<Run> {
  const { kube, namespace, workloads, audit } = env;
  await workloads.reset(kube, namespace);

  // 1. Cold start: nothing recorded on the workloads.
  const cold = await system.start(await contextFor(kube, namespace));
  let current = cold.child;
  try {
    const since = (at: number) => (at - cold.child.startedAt) / 1000;
    const readyAt = await cold.ready();
    const syncedAt = await pollUntil(cold.child, 'synced', cold.synced, 100, 900_000);
    const recordedAt = system.records
      ? await pollUntil(cold.child, 'every workload recorded', () => workloads.allRecorded(), 100, 900_000)
      : undefined;
    await waitFor(
      `${system.title}: no API request for ${QUIET_MS / 1000} s`,
      async () => {
        await audit.poll();
        return Date.now() - Math.max(audit.lastAt(system.key), cold.child.startedWall) >= QUIET_MS;
      },
      { timeoutMs: 600_000, intervalMs: 250, fail: () => cold.child.failure() },
    );
    const settledAt = performance.now();
    const settledWall = Date.now();
    const cpuToSettled = cpuMs(cold.child.pid);

    // 2. Memory, then idle CPU.
    const memory = rss(cold.child.pid);
    const idleFrom = Date.now();
    const cpu0 = cpuPreciseMs(cold.child.pid);
    const threads0 = cpuByThread(cold.child.pid);
    if (PROFILE_DIR && cold.profile) {
      await mkdir(PROFILE_DIR, { recursive: true });
      const file = join(PROFILE_DIR, `idle-${round}.pb.gz`);
      await writeFile(file, await cold.profile(Math.min(60, IDLE_MS / 1000)));
      report('restarts-profile', `Stateward, round ${round}: the idle window's CPU profile is in ${file}`);
      await delay(Math.max(0, IDLE_MS - (Date.now() - idleFrom)));
    } else await delay(IDLE_MS);
    const idleCpu = cpuPreciseMs(cold.child.pid) - cpu0;
    const idleThreads = threadCpuText(threads0, cpuByThread(cold.child.pid));
    const idleTo = Date.now();
    const live = system.key === 'stateward' ? await cold.child.liveMemory() : undefined;

    // 3. Steady state: one change at a time.
    const before = cold.metrics ? statewardCalls(await cold.metrics()) : undefined;
    const changesFrom = Date.now();
    const steady: number[] = [];
    let steadyMissed = 0;
    for (const change of steadyChanges) {
      const patchedAt = performance.now();
      await kube.patch(change.type, { namespace, name: change.config }, 'merge', change.patch());
      const at = await workloads.restarted(change.workload, patchedAt, 30_000 + system.graceMs);
      if (at === undefined) {
        steadyMissed++;
        report(
          'restarts-miss',
          `${system.title}, round ${round}: ${change.type.resource}/${change.config} changed, ${change.workload} not restarted within ${(30_000 + system.graceMs) / 1000} s; its last output:\n  ${cold.child.lastOutput()}`,
        );
      } else steady.push(at - patchedAt - system.graceMs);
      await delay(300);
    }
    await delay(1000);
    const changesTo = Date.now();
    const after = cold.metrics ? statewardCalls(await cold.metrics()) : undefined;
    await cold.child.stop();

    // 4. Restart, and a change the moment it is ready.
    const again = await system.start(await contextFor(kube, namespace));
    current = again.child;
    const againSince = (at: number) => (at - again.child.startedAt) / 1000;
    const restartSynced = pollUntil(again.child, 'synced after the restart', again.synced, 100, 900_000);
    restartSynced.catch(() => undefined);
    const restartReadyAt = await again.ready();
    const patchedAt = performance.now();
    await kube.patch(restartChange.type, { namespace, name: restartChange.config }, 'merge', restartChange.patch());
    again.child.note(`ready; patching ${restartChange.config}`, restartReadyAt);
    again.child.note(`patch sent`, patchedAt);
    const restartAt = await workloads.restarted(restartChange.workload, patchedAt, 60_000 + system.graceMs);
    again.child.note(`restart of ${restartChange.workload} seen`, restartAt);
    const restartSyncedAt = await restartSynced;
    const restartTo = Date.now();
    await again.child.stop();
    await delay(500);
    await audit.poll();

    const run: Run = {
      system: system.key,
      round,
      readyS: since(readyAt),
      syncedS: since(syncedAt),
      recordedS: recordedAt === undefined ? undefined : since(recordedAt),
      settledS: since(settledAt),
      cpuToSettledS: cpuToSettled / 1000,
      rssBytes: memory.total,
      rssFileBytes: memory.file,
      idleCpuMsPer60s: (idleCpu * 60_000) / IDLE_MS,
      idleThreads,
      steady,
      steadyMissed,
      restartReadyS: againSince(restartReadyAt),
      restartSyncedS: againSince(restartSyncedAt),
      afterRestartMs: restartAt === undefined ? undefined : restartAt - patchedAt - system.graceMs,
      api: {
        cold: counts(audit.between(system.key, cold.child.startedWall, settledWall)),
        idlePerMin: (audit.between(system.key, idleFrom, idleTo).length * 60_000) / (idleTo - idleFrom),
        idleCalls: byCall(audit.between(system.key, idleFrom, idleTo)),
        perChange: counts(audit.between(system.key, changesFrom, changesTo)),
        restart: counts(audit.between(system.key, again.child.startedWall, restartTo)),
      },
    };
    if (live) run.live = live;
    if (before && after)
      run.calls = {
        lists: after.lists - before.lists,
        listed: diff(after.listPaths, before.listPaths).join(', '),
        byCall: diff(after.byCall, before.byCall).join('; '),
      };
    return run;
  } finally {
    await current.stop();
  }
}

// --- Reporting --------------------------------------------------------------------------------------

const finite = (values: (number | undefined)[]) =>
  values.filter((v): v is number => v !== undefined && Number.isFinite(v));

/** Median (min–max) over the runs; '—' for none. */
function cell(values: (number | undefined)[], format: (n: number) => string): string {
  const xs = finite(values);
  if (xs.length === 0) return '—';
  const [med, min, max] = [median(xs), Math.min(...xs), Math.max(...xs)].map(format) as [string, string, string];
  return min === max ? med : `${med} (${min}–${max})`;
}

const s2 = (n: number) => n.toFixed(2);
const ms0 = (n: number) => n.toFixed(0);
const mib1 = (n: number) => (n / 2 ** 20).toFixed(1);

function runLine(run: Run, title: string): string {
  const steady =
    run.steady.length > 0 ? `median ${ms0(median(run.steady))} ms, max ${ms0(Math.max(...run.steady))} ms` : 'none';
  return [
    `round ${run.round} ${title}: cold start: ready ${s2(run.readyS)} s, synced ${s2(run.syncedS)} s${run.recordedS === undefined ? '' : `, every workload recorded ${s2(run.recordedS)} s`}, settled ${s2(run.settledS)} s (CPU ${s2(run.cpuToSettledS)} s)`,
    `RSS ${mib(run.rssBytes)} (${mib(run.rssFileBytes)} of it file-backed), idle CPU ${ms0(run.idleCpuMsPer60s)} ms per 60 s (${run.idleThreads})`,
    `${CHANGES} steady changes → restart − grace: ${steady}${run.steadyMissed ? `, ${run.steadyMissed} MISSED (no restart in 30 s)` : ''}`,
    `restart: ready ${s2(run.restartReadyS)} s, synced ${s2(run.restartSyncedS)} s, change at ready → restart − grace ${run.afterRestartMs === undefined ? 'MISSED (no restart in 60 s)' : `${ms0(run.afterRestartMs)} ms`}`,
    `API requests: cold start → settled ${formatCounts(run.api.cold)}; idle ${run.api.idlePerMin.toFixed(1)}/min${run.api.idleCalls ? ` (${run.api.idleCalls})` : ''}; per change ${formatCounts(run.api.perChange, CHANGES)}; restart → synced ${formatCounts(run.api.restart)}`,
  ].join('; ');
}

function table(systems: System[], runs: Run[]): string[] {
  const of = (key: SystemKey) => runs.filter((r) => r.system === key);
  const row = (label: string, value: (runs: Run[], system: System) => string) =>
    `| ${label} | ${systems.map((s) => value(of(s.key), s)).join(' | ')} |`;
  const afterRestart = (rs: Run[]) => {
    const missed = rs.filter((r) => r.afterRestartMs === undefined).length;
    const text = cell(
      rs.map((r) => r.afterRestartMs),
      ms0,
    );
    return missed === 0 ? text : `${text === '—' ? '' : `${text}; `}missed in ${missed} of ${rs.length} runs`;
  };
  return [
    `| ${ROUNDS} rounds, median (min–max) | ${systems.map((s) => s.title).join(' | ')} |`,
    `|---|${systems.map(() => '---').join('|')}|`,
    row('start → ready, cold (s)', (rs) =>
      cell(
        rs.map((r) => r.readyS),
        s2,
      ),
    ),
    row('start → synced, cold (s)', (rs) =>
      cell(
        rs.map((r) => r.syncedS),
        s2,
      ),
    ),
    row('start → every workload recorded, cold (s)', (rs, s) =>
      s.records
        ? cell(
            rs.map((r) => r.recordedS),
            s2,
          )
        : 'nothing to record',
    ),
    row('start → ready, restart (s)', (rs) =>
      cell(
        rs.map((r) => r.restartReadyS),
        s2,
      ),
    ),
    row('start → synced, restart (s)', (rs) =>
      cell(
        rs.map((r) => r.restartSyncedS),
        s2,
      ),
    ),
    row('change at ready after a restart → restart patch, minus grace (ms)', afterRestart),
    row(
      `steady change → restart patch, minus grace (ms; median of ${CHANGES} per run)`,
      (rs) =>
        cell(
          rs.map((r) => (r.steady.length > 0 ? median(r.steady) : undefined)),
          ms0,
        ) + (rs.some((r) => r.steadyMissed) ? `; ${rs.reduce((n, r) => n + r.steadyMissed, 0)} missed` : ''),
    ),
    row('RSS after sync (MiB)', (rs) =>
      cell(
        rs.map((r) => r.rssBytes),
        mib1,
      ),
    ),
    row('CPU, start → settled (s)', (rs) =>
      cell(
        rs.map((r) => r.cpuToSettledS),
        s2,
      ),
    ),
    row('idle CPU per 60 s (ms)', (rs) =>
      cell(
        rs.map((r) => r.idleCpuMsPer60s),
        ms0,
      ),
    ),
    row('API requests, cold start → settled', (rs) =>
      cell(
        rs.map((r) => r.api.cold.total),
        ms0,
      ),
    ),
    row('API requests, restart → synced', (rs) =>
      cell(
        rs.map((r) => r.api.restart.total),
        ms0,
      ),
    ),
    row('API requests per steady change', (rs) =>
      cell(
        rs.map((r) => r.api.perChange.total / CHANGES),
        (n) => n.toFixed(1),
      ),
    ),
    row('… of which LISTs', (rs) =>
      cell(
        rs.map((r) => r.api.perChange.lists / CHANGES),
        (n) => n.toFixed(1),
      ),
    ),
    row('API requests per idle minute', (rs) =>
      cell(
        rs.map((r) => r.api.idlePerMin),
        (n) => n.toFixed(1),
      ),
    ),
  ];
}

interface Verdict {
  text: string;
  /** undefined: not judged (a peer was skipped). */
  met: boolean | undefined;
}

function verdicts(runs: Run[], has: Set<SystemKey>): Verdict[] {
  const med = (key: SystemKey, pick: (r: Run) => number | undefined) => {
    const xs = finite(runs.filter((r) => r.system === key).map(pick));
    return xs.length > 0 ? median(xs) : NaN;
  };
  const out: Verdict[] = [];
  const relative = (
    what: string,
    pick: (r: Run) => number | undefined,
    factor: number,
    format: (n: number) => string,
  ) => {
    if (!has.has('stateward')) return;
    const ours = med('stateward', pick);
    if (!has.has('reloader')) {
      out.push({
        text: `${what} ≤ ${factor === 1 ? '' : `${factor}× `}Reloader's: not judged (Reloader did not run); Stateward ${format(ours)}`,
        met: undefined,
      });
      return;
    }
    const theirs = med('reloader', pick);
    const met = ours <= factor * theirs;
    out.push({
      text: `${what} ≤ ${factor === 1 ? '' : `${factor}× `}Reloader's: Stateward ${format(ours)} vs Reloader ${format(theirs)} (${(ours / theirs).toFixed(2)}×): ${met ? 'met' : 'MISSED'}`,
      met,
    });
  };
  const sec = (n: number) => `${n.toFixed(2)} s`;
  relative('start → synced after a restart', (r) => r.restartSyncedS, 2, sec);
  relative("start → synced, cold (every config's checksum known)", (r) => r.syncedS, 2, sec);
  if (has.has('stateward')) {
    const ours = runs.filter((r) => r.system === 'stateward');
    const missed = ours.filter((r) => r.afterRestartMs === undefined).length;
    const after = med('stateward', (r) => r.afterRestartMs);
    const worst = Math.max(...finite(ours.map((r) => r.afterRestartMs)));
    const met = missed === 0 && after <= 100;
    out.push({
      text: `change right after a restart ≤ 100 ms beyond the grace: Stateward median ${ms0(after)} ms, worst ${ms0(worst)} ms${missed ? `, ${missed} missed` : ''}: ${met ? 'met' : 'MISSED'}`,
      met,
    });
  }
  relative(
    'RSS after sync',
    (r) => r.rssBytes,
    1,
    (n) => `${mib1(n)} MiB`,
  );
  relative(
    'idle CPU',
    (r) => r.idleCpuMsPer60s,
    2,
    (n) => `${ms0(n)} ms per 60 s`,
  );
  if (has.has('stateward')) {
    const ours = runs.filter((r) => r.system === 'stateward');
    const all = ours.flatMap((r) => r.steady);
    const missed = ours.reduce((n, r) => n + r.steadyMissed, 0);
    const p99 = percentile(all, 99);
    out.push({
      text: `steady change → restart p99 ≤ 100 ms beyond the grace: Stateward p50 ${ms0(percentile(all, 50))} ms, p99 ${ms0(p99)} ms over ${all.length} changes${missed ? `, ${missed} missed` : ''}: ${p99 <= 100 && missed === 0 ? 'met' : 'MISSED'}`,
      met: p99 <= 100 && missed === 0,
    });
    const lists = ours.reduce((n, r) => n + (r.calls?.lists ?? 0), 0);
    out.push({
      text: `no LIST per change: Stateward made ${lists} LISTs over ${ours.length * CHANGES} changes (its own client metrics${
        lists
          ? `: ${ours
              .map((r) => r.calls?.listed)
              .filter(Boolean)
              .join('; ')}`
          : ''
      }): ${lists === 0 ? 'met' : 'MISSED'}`,
      met: lists === 0,
    });
  }
  return out;
}

export async function restartsBench(): Promise<boolean> {
  const selected = new Set(
    (process.env['BENCH_RESTARTS_SYSTEMS'] ?? ORDER.join(','))
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  for (const name of selected)
    if (!ORDER.includes(name as SystemKey))
      throw new Error(`BENCH_RESTARTS_SYSTEMS: unknown system "${name}"; one of ${ORDER.join(', ')}`);
  if (CONFIGMAPS < 2 * WORKLOADS || SECRETS < WORKLOADS || WORKLOADS < CHANGES + 5)
    throw new Error(
      `BENCH_RESTARTS_SCALE=${SCALE} leaves too few objects (${WORKLOADS} workloads for ${CHANGES} changes)`,
    );

  // The peers: built on first use, skipped (with what to do) when their source is missing or their fixed port is taken.
  const built: { reloader?: Extract<PeerBinary, { ok: true }>; xing?: Extract<PeerBinary, { ok: true }> } = {};
  for (const name of ['reloader', 'xing'] as const) {
    if (!selected.has(name)) continue;
    const spec = PEERS[name];
    const binary = await peerBinary(spec, (line) => report('restarts-peers', line));
    if (!binary.ok) {
      report('restarts-peers', `${spec.title} SKIPPED: ${binary.reason.replaceAll('\n', `\n${' '.repeat(29)}`)}`);
      continue;
    }
    const port = name === 'reloader' ? RELOADER_PORT : XING_PORT;
    if (!(await portFree(port))) {
      report(
        'restarts-peers',
        `${spec.title} SKIPPED: it always listens on port ${port}, which something else on this machine holds`,
      );
      continue;
    }
    built[name] = binary;
    report(
      'restarts-peers',
      `${spec.title}: ${spec.repo} ${spec.commit} (${spec.describe})${binary.notes.length ? `; built with ${binary.notes.join('; ')}` : ''}`,
    );
  }

  const scratch = await mkdtemp(join(tmpdir(), 'stateward-bench-restarts-'));
  const auditPath = join(scratch, 'audit.log');
  await writeFile(join(scratch, 'audit-policy.yaml'), AUDIT_POLICY);
  const cluster = await LocalCluster.start({
    name: `bench-restarts-${process.pid}`,
    nodesPerZone: 1,
    log: () => {},
    extraArgs: {
      apiserver: [
        `--audit-policy-file=${join(scratch, 'audit-policy.yaml')}`,
        `--audit-log-path=${auditPath}`,
        '--audit-log-format=json',
        '--audit-log-maxsize=0',
      ],
    },
  });
  const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 60_000, userAgent: 'stateward-bench' });
  try {
    // Baseline for Stateward's live heap: the same operator watching an empty namespace.
    let baseline: LiveMemory | undefined;
    if (selected.has('stateward')) {
      const empty = await benchNamespace(kube, 'bench-empty');
      const op = await statewardSystem(cluster, empty, await statewardEntry()).start({
        namespaceConfigs: { configMaps: 0, secrets: 0 },
        clusterConfigs: 0,
      });
      try {
        await op.ready();
        baseline = await op.child.liveMemory();
      } finally {
        await op.child.stop();
      }
    }

    const namespace = await benchNamespace(kube);
    const creating = performance.now();
    await inParallel(range(CONFIGMAPS), 32, (i) =>
      kube.create(resources.configMaps, {
        metadata: { name: `cm-${i}`, namespace },
        data: { 'config.yaml': configValue() },
      } as KubeObject),
    );
    await inParallel(range(SECRETS), 32, (i) =>
      kube.create(resources.secrets, {
        metadata: { name: `secret-${i}`, namespace },
        data: { password: Buffer.from(configValue()).toString('base64') },
      } as KubeObject),
    );
    await inParallel(range(WORKLOADS), 32, (i) =>
      kube.create(resources.deployments, deployment(namespace, i) as KubeObject),
    );
    const workloads = new Workloads(kube, namespace);
    workloads.informer.start();
    await workloads.informer.waitForSync();
    report(
      'restarts-setup',
      `${CONFIGMAPS} ConfigMaps + ${SECRETS} Secrets of ~4 KiB and ${WORKLOADS} opted-in Deployments created in ${((performance.now() - creating) / 1000).toFixed(0)} s; ${ROUNDS} rounds of ${ORDER.filter((k) => selected.has(k)).join(', ')}; ${CHANGES} steady changes per run, idle window ${IDLE_MS / 1000} s (CPU scaled to 60 s)`,
    );

    const systems: System[] = [];
    for (const key of ORDER) {
      if (key === 'reloader' && built.reloader) systems.push(reloaderSystem(cluster, namespace, built.reloader));
      if (key === 'xing' && built.xing) systems.push(xingSystem(cluster, built.xing, join(scratch, 'xing-home')));
      if (key === 'stateward' && selected.has('stateward')) {
        const form = await statewardEntry();
        report(
          'restarts-stateward',
          form.form === 'build'
            ? `run as the image runs it: ${envText(form.env)}node ${form.nodeFlags.join(' ')} ${form.entry} (scripts/build.ts, the Dockerfile's flags and ENV)`
            : `run from its sources: ${form.entry} (BENCH_STATEWARD_FROM=sources)`,
        );
        systems.push(statewardSystem(cluster, namespace, form));
      }
    }
    const audit = new AuditLog(
      auditPath,
      systems.map((s) => [s.userAgent, s.key]),
    );
    const runs: Run[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const system of systems) {
        const run = await runSystem(system, round, { kube, namespace, workloads, audit });
        runs.push(run);
        report('restarts-run', runLine(run, system.title));
      }
    }
    await workloads.informer.stop();

    const ours = runs.filter((r) => r.system === 'stateward');
    if (baseline && ours.length > 0) {
      const at = (pick: (m: LiveMemory) => number) =>
        median(finite(ours.map((r) => (r.live ? pick(r.live) : undefined))));
      const heap = at((m) => m.heapUsed);
      const objects = CONFIGMAPS + SECRETS + WORKLOADS;
      const spaces = (m: LiveMemory) =>
        Object.entries(m.spaces)
          .filter(([, n]) => n >= 2 ** 20)
          .map(([name, n]) => `${name.replace(/_space$/, '')} ${mib(n)}`)
          .join(', ');
      report(
        'restarts-memory',
        `Stateward, after a forced GC, synced and idle: live heap ${mib(heap)} (empty namespace ${mib(baseline.heapUsed)}, +${mib(heap - baseline.heapUsed)}, ${((heap - baseline.heapUsed) / objects / 1024).toFixed(2)} KiB per object); RSS ${mib(median(ours.map((r) => r.rssBytes)))} at sync, ${mib(at((m) => m.rss))} after the GC (empty namespace ${mib(baseline.rss)}); V8 heap committed ${mib(at((m) => m.heapTotal))} (empty namespace ${mib(baseline.heapTotal)}), external ${mib(at((m) => m.external))} of which array buffers ${mib(at((m) => m.arrayBuffers))}; spaces of round ${ours[0]!.round}'s run: ${ours[0]!.live ? spaces(ours[0]!.live) : '—'}`,
      );
      const last = ours.at(-1)!;
      if (last.calls)
        report(
          'restarts-api-calls',
          `Stateward, round ${last.round}, its own client metrics over ${CHANGES} changes: ${last.calls.byCall || 'none'}`,
        );
    }
    console.log('');
    for (const line of table(systems, runs)) console.log(line);
    console.log('');
    const judged = verdicts(runs, new Set(systems.map((s) => s.key)));
    for (const v of judged) report('restarts-verdict', v.text);
    return judged.every((v) => v.met !== false);
  } finally {
    await kube.close();
    await cluster.teardown();
    await rm(scratch, { recursive: true, force: true });
  }
}
