// informer-memory: heap held by a cache of 10,000 kwok-run pods, with the
// default transform (drops managedFields) and without it.
// watch-throughput: events per second the informer applies, (a) from the
// real apiserver during a burst of pod patches, (b) from a local stream
// that isolates our decoding and cache updates from the server.
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { resources, type Pod } from '../src/runtime/kube/types.ts';
import { Informer } from '../src/runtime/informer/informer.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { benchNamespace } from './namespace.ts';
import { mib, report, seconds } from './report.ts';

const exec = promisify(execFile);
const POD_COUNT = Number.parseInt(process.env['BENCH_PODS'] ?? '10000', 10);

/** A pod shaped like a Mimir ingester's: env, resources, probes, volumes. */
function benchPod(namespace: string, i: number, node: string): Pod {
  return {
    metadata: {
      name: `ingester-${i}`,
      namespace,
      labels: { app: 'ingester', 'rollout-group': 'ingester', name: `ingester-zone-${'abc'[i % 3]}` },
      annotations: { 'pod-ready.stage.kwok.x-k8s.io/delay': '0s' },
    },
    spec: {
      nodeName: node,
      containers: [
        {
          name: 'ingester',
          image: 'grafana/mimir:2.14.0',
          args: [
            '-target=ingester',
            '-config.file=/etc/mimir/mimir.yaml',
            '-ingester.ring.instance-availability-zone=zone-a',
            '-server.grpc-max-recv-msg-size-bytes=104857600',
          ],
          env: Array.from({ length: 8 }, (_, k) => ({ name: `ENV_${k}`, value: `value-${k}-${'x'.repeat(20)}` })),
          ports: [
            { name: 'http-metrics', containerPort: 8080 },
            { name: 'grpc', containerPort: 9095 },
          ],
          resources: { requests: { cpu: '4', memory: '15Gi' }, limits: { memory: '25Gi' } },
          readinessProbe: { httpGet: { path: '/ready', port: 8080 }, initialDelaySeconds: 15 },
          volumeMounts: [
            { name: 'data', mountPath: '/data' },
            { name: 'config', mountPath: '/etc/mimir' },
          ],
        },
      ],
      volumes: [
        { name: 'data', emptyDir: {} },
        { name: 'config', configMap: { name: 'mimir-config' } },
      ],
    },
  };
}

async function inParallel<T>(items: T[], concurrency: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

const isReady = (p: Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

async function memory(kubeconfig: string, namespace: string, transform: 'on' | 'off') {
  const child = fileURLToPath(new URL('./informer-memory.child.ts', import.meta.url));
  const { stdout } = await exec(process.execPath, ['--expose-gc', child, kubeconfig, namespace, transform], {
    maxBuffer: 1 << 20,
  });
  return JSON.parse(stdout) as { objects: number; heapBytes: number; rssBytes: number; syncMs: number };
}

async function localStreamThroughput(events: number): Promise<number> {
  const template = JSON.stringify({ type: 'MODIFIED', object: benchPod('bench', 0, 'node') });
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    res.writeHead(200, { 'content-type': 'application/json' });
    if (url.searchParams.get('watch') !== 'true')
      return res.end(JSON.stringify({ kind: 'PodList', metadata: { resourceVersion: '1' }, items: [] }));
    let i = 0;
    const pump = () => {
      while (i < events) {
        const line = template
          .replace('"ingester-0"', `"ingester-${i % 10000}"`)
          .replace('"metadata":{', `"metadata":{"resourceVersion":"${i + 2}",`);
        i++;
        if (!res.write(`${line}\n`)) return res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'local', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'c', cluster: 'local', user: 'u' }],
    currentContext: 'c',
  });
  const client = new KubeClient({ kubeConfig: kc, timeoutMs: 60_000 });
  const informer = new Informer<Pod>({ client, type: resources.pods, namespace: 'bench' });
  let applied = 0;
  informer.addHandlers({ onAdd: () => applied++, onUpdate: () => applied++ });
  const started = performance.now();
  informer.start();
  await waitFor('all streamed events', () => applied >= events, { timeoutMs: 300_000, intervalMs: 20 });
  const elapsed = performance.now() - started;
  await informer.stop();
  await client.close();
  server.close();
  return events / (elapsed / 1000);
}

export async function informerBench(): Promise<boolean> {
  const cluster = await LocalCluster.start({
    name: `bench-informer-${process.pid}`,
    nodesPerZone: 1,
    maxPodsPerNode: Math.ceil(POD_COUNT / 3) + 10,
    log: () => {},
  });
  try {
    const kc = cluster.kubeConfig();
    const client = new KubeClient({ kubeConfig: kc, timeoutMs: 60_000 });
    const namespace = await benchNamespace(client);

    // A watching informer measures how fast pods come to life.
    const watcher = new Informer<Pod>({ client, type: resources.pods, namespace });
    let events = 0;
    watcher.addHandlers({ onAdd: () => events++, onUpdate: () => events++ });
    watcher.start();
    await watcher.waitForSync();
    const nodes = cluster.nodes.map((n) => n.name);
    const createStart = performance.now();
    await inParallel(
      Array.from({ length: POD_COUNT }, (_, i) => i),
      32,
      (i) => client.create(resources.pods, benchPod(namespace, i, nodes[i % nodes.length]!)),
    );
    const createMs = performance.now() - createStart;
    await waitFor(`${POD_COUNT} pods Ready`, () => watcher.list().filter(isReady).length === POD_COUNT, {
      timeoutMs: 600_000,
      intervalMs: 500,
    });
    const readyMs = performance.now() - createStart;
    report(
      'pods-created',
      `${POD_COUNT} pods in ${seconds(createMs)} (${(POD_COUNT / (createMs / 1000)).toFixed(0)}/s, 32 concurrent); all Ready after ${seconds(readyMs)}; the watching informer applied ${events} events (${(events / (readyMs / 1000)).toFixed(0)}/s)`,
    );

    // A burst of label patches: events the informer applies per second, end to end.
    let patchedSeen = 0;
    watcher.addHandlers({ onUpdate: (_o, n) => void (n.metadata?.labels?.['bench'] === 'patched' && patchedSeen++) });
    const burst = Math.min(5000, POD_COUNT);
    const burstStart = performance.now();
    await inParallel(
      Array.from({ length: burst }, (_, i) => i),
      32,
      (i) =>
        client.patch(resources.pods, { namespace, name: `ingester-${i}` }, 'merge', {
          metadata: { labels: { bench: 'patched' } },
        }),
    );
    await waitFor('every patch observed', () => patchedSeen >= burst, { timeoutMs: 300_000, intervalMs: 50 });
    const burstMs = performance.now() - burstStart;
    report(
      'watch-throughput-apiserver',
      `${burst} patches observed in ${seconds(burstMs)}: ${(burst / (burstMs / 1000)).toFixed(0)} events/s (bounded by the apiserver's write rate on this machine)`,
    );
    await watcher.stop();

    const off = await memory(cluster.kubeconfigPath, namespace, 'off');
    const on = await memory(cluster.kubeconfigPath, namespace, 'on');
    report(
      'informer-memory',
      `${on.objects} pods: transform on ${mib(on.heapBytes)} (${(on.heapBytes / on.objects / 1024).toFixed(1)} KiB/pod), off ${mib(off.heapBytes)} (${(off.heapBytes / off.objects / 1024).toFixed(1)} KiB/pod); on/off = ${(on.heapBytes / off.heapBytes).toFixed(2)}; initial list+sync ${seconds(on.syncMs)} (on) / ${seconds(off.syncMs)} (off)`,
    );
    await client.close();
  } finally {
    await cluster.teardown();
  }
  const local = await localStreamThroughput(100_000);
  report(
    'watch-throughput-local',
    `${local.toFixed(0)} events/s decoded and applied from a local stream of 100,000 pod events (no apiserver in the way)`,
  );
  return true;
}
