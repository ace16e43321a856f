// restarts: config-change restarts at scale. 5,000 ConfigMaps and 2,000
// Secrets in one namespace, 500 opted-in Deployments (replicas 0, so no
// pods) each using 2 ConfigMaps and 1 Secret. The operator runs as a child
// process with -restart-grace-period=1.
//   memory: live V8 heap and RSS after a forced GC once synced and every
//     workload recorded, against the same operator on an empty namespace;
//   latency: 20 ConfigMap changes one after another, from the patch to this
//     process's watch seeing the restart trigger, minus the grace period
//     (target ≤ 100 ms);
//   API calls per change, and LISTs among them (target: no LIST per change).
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { freePorts } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { resources, type KubeObject } from '../src/runtime/kube/types.ts';
import { Informer } from '../src/runtime/informer/informer.ts';
import { benchNamespace } from './namespace.ts';
import { mib, percentile, report } from './report.ts';

const CONFIGMAPS = 5000;
const SECRETS = 2000;
const WORKLOADS = 500;
const CHANGES = 20;
const GRACE_MS = 1000;
const TRIGGER = 'com.xing.deployment-restart.timestamp';
const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';

async function inBatches<T>(items: T[], size: number, work: (item: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(work));
}

type LiveMemory = { heapUsed: number; rss: number };

/** The operator as a child process, with GC on SIGUSR2 (bench/gc-on-signal.ts); its stdout is read throughout so it never blocks. */
class BenchOperator {
  private readonly child: ChildProcessByStdio<null, Readable, null>;
  private waiter: ((memory: LiveMemory) => void) | undefined;

  constructor(cluster: LocalCluster, namespace: string, port: number) {
    const preload = fileURLToPath(new URL('./gc-on-signal.ts', import.meta.url));
    const bin = fileURLToPath(new URL('../bin/stateward.ts', import.meta.url));
    this.child = spawn(process.execPath, ['--expose-gc', '--import', preload, bin, `-kubernetes.namespace=${namespace}`, `-kubernetes.config-file=${cluster.kubeconfigPath}`, `-kubernetes.api-url=${cluster.server}`, `-server.port=${port}`, '-log.level=warn', '-config-restarts.enabled', `-restart-grace-period=${GRACE_MS / 1000}`, '-kubernetes.client-qps=0'], { stdio: ['ignore', 'pipe', 'ignore'] });
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      if (line.startsWith('{"gcMemory"')) this.waiter?.((JSON.parse(line) as { gcMemory: LiveMemory }).gcMemory);
    });
  }

  /** Live heap and RSS after a full GC in the operator process. */
  async liveMemory(): Promise<LiveMemory> {
    const answer = new Promise<LiveMemory>((resolve) => (this.waiter = resolve));
    this.child.kill('SIGUSR2');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('no GC answer from the operator in 30 s')), 30_000)));
    try {
      return await Promise.race([answer, timeout]);
    } finally {
      clearTimeout(timer);
      this.waiter = undefined;
    }
  }

  stop(): void {
    this.child.kill('SIGTERM');
  }
}

async function waitOperatorReady(port: number): Promise<void> {
  await waitFor('operator ready', async () => (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status === 200, { timeoutMs: 120_000 });
}

async function metrics(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

const value = (text: string, name: string) => Number(text.split('\n').find((l) => l.startsWith(`${name} `))?.split(' ')[1] ?? NaN);

/** API requests by kind: LIST is a GET of a collection. */
function requests(text: string): { total: number; lists: number; listPaths: Map<string, number>; byPath: Map<string, number> } {
  let total = 0;
  let lists = 0;
  const listPaths = new Map<string, number>();
  const byPath = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('rollout_operator_kubernetes_api_client_request_duration_seconds_count')) continue;
    const n = Number(line.split(' ').at(-1));
    total += n;
    const call = `${/method="([^"]+)"/.exec(line)?.[1] ?? '?'} ${/path="([^"]+)"/.exec(line)?.[1] ?? '?'} ${/status_code="([^"]+)"/.exec(line)?.[1] ?? '?'}`;
    byPath.set(call, (byPath.get(call) ?? 0) + n);
    // The optional ZPDB informer polls (with backoff) while its CRD is not installed here: background, not per change.
    if (line.includes('collection') && line.includes('method="GET"') && !line.includes('zoneawarepoddisruptionbudgets')) {
      lists += n;
      const path = /path="([^"]+)"/.exec(line)?.[1] ?? '?';
      listPaths.set(path, (listPaths.get(path) ?? 0) + n);
    }
  }
  return { total, lists, listPaths, byPath };
}

type Deployment = KubeObject & { spec?: { template?: { metadata?: { annotations?: Record<string, string> } } } };

export async function restartsBench(): Promise<boolean> {
  const cluster = await LocalCluster.start({ name: `bench-restarts-${process.pid}`, nodesPerZone: 1, log: () => {} });
  try {
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 30_000 });
    // Baseline: the same operator watching an empty namespace.
    const empty = await benchNamespace(kube, 'bench-empty');
    const [basePort] = (await freePorts(1)) as [number];
    const baseline = new BenchOperator(cluster, empty, basePort);
    let base: LiveMemory;
    try {
      await waitOperatorReady(basePort);
      base = await baseline.liveMemory();
    } finally {
      baseline.stop();
    }
    const namespace = await benchNamespace(kube);
    await inBatches(Array.from({ length: CONFIGMAPS }, (_, i) => i), 50, (i) => kube.create(resources.configMaps, { metadata: { name: `cm-${i}`, namespace }, data: { 'app.yaml': `setting: ${i}\n`.repeat(20) } }));
    await inBatches(Array.from({ length: SECRETS }, (_, i) => i), 50, (i) => kube.create(resources.secrets, { metadata: { name: `secret-${i}`, namespace }, data: { password: Buffer.from(`pw-${i}`).toString('base64') } }));
    await inBatches(Array.from({ length: WORKLOADS }, (_, i) => i), 50, (i) => kube.create(resources.deployments, {
      metadata: { name: `app-${i}`, namespace, annotations: { 'com.xing.deployment-restart': 'enabled' } },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: `app-${i}` } },
        template: {
          metadata: { labels: { app: `app-${i}` } },
          spec: {
            containers: [{ name: 'app', image: 'example.invalid/app:1', envFrom: [{ configMapRef: { name: `cm-${2 * i}` } }, { secretRef: { name: `secret-${i}` } }] }],
            volumes: [{ name: 'config', configMap: { name: `cm-${2 * i + 1}` } }],
          },
        },
      },
    } as KubeObject));

    const seen = new Map<string, number>();
    const watch = new Informer<Deployment>({ client: kube, type: resources.deployments, namespace });
    watch.addHandlers({ onUpdate: (old, d) => {
      if (old.spec?.template?.metadata?.annotations?.[TRIGGER] !== d.spec?.template?.metadata?.annotations?.[TRIGGER]) seen.set(d.metadata!.name!, performance.now());
    } });
    watch.start();
    await watch.waitForSync();

    const [port] = (await freePorts(1)) as [number];
    const operator = new BenchOperator(cluster, namespace, port);
    try {
      const started = performance.now();
      await waitOperatorReady(port);
      await waitFor('every workload recorded', () => watch.list().every((d) => d.metadata?.annotations?.[APPLIED]), { timeoutMs: 600_000, intervalMs: 500 });
      const recordedMs = performance.now() - started;
      const text = await metrics(port);
      const live = await operator.liveMemory();
      const objects = CONFIGMAPS + SECRETS + WORKLOADS;
      report('restarts-memory', `${CONFIGMAPS} ConfigMaps + ${SECRETS} Secrets + ${WORKLOADS} opted-in Deployments, after a forced GC: live heap ${mib(live.heapUsed)} (empty namespace ${mib(base.heapUsed)}, +${mib(live.heapUsed - base.heapUsed)}, ${((live.heapUsed - base.heapUsed) / objects / 1024).toFixed(1)} KiB per object), RSS ${mib(live.rss)} (empty ${mib(base.rss)}); before the GC: heap ${mib(value(text, 'nodejs_heap_size_used_bytes'))}, RSS ${mib(value(text, 'process_resident_memory_bytes'))}; all ${WORKLOADS} recorded ${(recordedMs / 1000).toFixed(1)} s after start`);

      // Recording 500 workloads asked for 500 Events, written at the recorder's pace: let them finish, or they count as per-change calls.
      let eventCalls = -1;
      let stableSince = performance.now();
      await waitFor('the recording Events written', async () => {
        const now = [...requests(await metrics(port)).byPath].filter(([call]) => call.includes('events.k8s.io')).reduce((sum, [, n]) => sum + n, 0);
        if (now !== eventCalls) [eventCalls, stableSince] = [now, performance.now()];
        return performance.now() - stableSince > 2000;
      }, { timeoutMs: 300_000, intervalMs: 250 });
      const before = requests(await metrics(port));
      const latencies: number[] = [];
      for (let c = 0; c < CHANGES; c++) {
        const i = c * 7;
        const name = `app-${i}`;
        const patchedAt = performance.now();
        await kube.patch(resources.configMaps, { namespace, name: `cm-${2 * i}` }, 'merge', { data: { 'app.yaml': `changed: ${c}\n` } });
        await waitFor(`${name} restarted`, () => ((seen.get(name) ?? 0) > patchedAt ? true : undefined), { timeoutMs: 30_000, intervalMs: 5 });
        latencies.push(seen.get(name)! - patchedAt - GRACE_MS);
      }
      const after = requests(await metrics(port));
      const p99 = percentile(latencies, 99);
      report('restarts-latency', `${CHANGES} changes: change-to-restart minus the ${GRACE_MS} ms grace period p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${p99.toFixed(0)} ms (target ≤ 100 ms: ${p99 <= 100 ? 'met' : 'MISSED'})`);
      const perChange = (after.total - before.total) / CHANGES;
      const lists = after.lists - before.lists;
      const listed = [...after.listPaths].map(([path, n]) => [path, n - (before.listPaths.get(path) ?? 0)] as const).filter(([, n]) => n > 0).map(([path, n]) => `${path} ×${n}`).join(', ');
      const calls = [...after.byPath].map(([call, n]) => [call, n - (before.byPath.get(call) ?? 0)] as const).filter(([, n]) => n > 0).map(([call, n]) => `${call} ×${n}`).join('; ');
      report('restarts-api-calls', `${perChange.toFixed(2)} API calls per change (the changed ConfigMap's GET, the workload's patch, the Event), ${lists} LISTs over ${CHANGES} changes (target 0)${listed ? `: ${listed}` : ''}; by call: ${calls}`);
      await watch.stop();
      return p99 <= 100 && lists === 0;
    } finally {
      operator.stop();
      await kube.close();
    }
  } finally {
    await cluster.teardown();
  }
}
