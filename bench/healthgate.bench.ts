// healthgate: the 3-zone × 10-pod rollout of rollout.bench.ts behind a
// passing Prometheus health gate (issue 36), against a real Prometheus
// scraping a test exporter, with the same operator and cluster for every run.
//   makespan ÷ ideal: ungated, gated with bakeTime 0, gated with bakeTime 2s,
//     in one run; ideal as rollout.bench.ts defines it (zones × batches ×
//     median pod restart), plus 2 × bake for the baked run (two gated zones
//     each bake once); target ≤ 1.05.
//   queries per rollout per check: every /api/v1/query the operator sends,
//     counted by a forwarding proxy in front of Prometheus, against
//     docs/health-gates.md's 3 × (Z − 1) × E.
//   healthy → next zone's first delete: the check fails (the rolled zone's
//     error ratio is 0.5) until the gate pauses; then the ratio falls, and
//     the time from Prometheus first answering the passing value (polled
//     every 20 ms with the check's own query) to the watcher seeing the next
//     zone's first pod delete; target ≤ evaluationInterval (1 s) + 50 ms.
//     BENCH_HEALTHGATE_REPS repetitions (5 unless given).
import { execFile, spawn } from 'node:child_process';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { freePorts } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { MetricExporter } from '../test/support/metricexporter.ts';
import { onlyValue, Prometheus, waitForQuery } from '../test/support/prometheus.ts';
import { closeServer, listenOn } from '../test/support/tcp.ts';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { resources, type ConfigMap } from '../src/runtime/kube/types.ts';
import { healthCheckResource, type RolloutHealthCheck } from '../src/rollout/healthcheck/resource.ts';
import {
  changeTemplate,
  createGroup,
  InvariantMonitor,
  waitGroupSettled,
  waitRolledOut,
  ZONES,
  type Transition,
} from '../test/support/rollout-group.ts';
import { benchNamespace } from './namespace.ts';
import { statewardEntry } from './stateward-build.ts';
import { envNumber, median, percentile, report } from './report.ts';
import { errorRatioCheck } from '../test/support/healthchecks.ts';

const REPLICAS = 10;
const CHECK = 'bench-errors';
const METRIC = 'bench_error_ratio';
const EVALUATION_INTERVAL_MS = 1000;
const BAKE_MS = 2000;
const CURRENT_RANGE = '3s';
const crd = fileURLToPath(new URL('../deploy/crds/rollout-health-checks.yaml', import.meta.url));

/** A plain-HTTP forwarder in front of Prometheus that records when each /api/v1/query arrives. */
class QueryCounter {
  readonly queries: number[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly server = createServer((req, res) => this.forward(req, res));
  private upstreamPort = 0;
  port = 0;

  async listen(upstreamPort: number): Promise<void> {
    this.upstreamPort = upstreamPort;
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    this.port = await listenOn(this.server);
  }

  between(from: number, to: number): number {
    return this.queries.filter((at) => at >= from && at < to).length;
  }

  close(): Promise<void> {
    return closeServer(this.server, this.sockets);
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    if ((req.url ?? '').startsWith('/api/v1/query')) this.queries.push(Date.now());
    const upstream = request(
      { host: '127.0.0.1', port: this.upstreamPort, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.headersSent || res.writeHead(502).end());
    req.pipe(upstream);
  }
}

function healthCheck(namespace: string, prometheusURL: string, bakeTime: string): RolloutHealthCheck {
  return errorRatioCheck(CHECK, namespace, prometheusURL, {
    metric: METRIC,
    spec: { evaluationInterval: `${EVALUATION_INTERVAL_MS / 1000}s`, bakeTime },
    check: { currentRange: CURRENT_RANGE, baselineRange: CURRENT_RANGE },
  });
}

const zoneOf = (t: Transition) => /ingester-zone-([a-z])-/.exec(t.pod)?.[1] ?? '?';
/** The operator's deletes: a Ready pod going to terminating (kwok's own stray deletes of new pods excluded, as in rollout.bench.ts). */
const isDelete = (t: Transition) => t.from.endsWith('/ready') && t.to.endsWith('/terminating');

interface RolloutFigures {
  makespan: number;
  ideal: number;
  restart: number;
  queries: number;
  /** Per zone after the first: the previous zone's last Ready → this zone's first delete. */
  handoffs: number[];
}

/** Changes every zone's template and measures the rollout as rollout.bench.ts does. */
async function rollOut(
  kube: KubeClient,
  namespace: string,
  monitor: InvariantMonitor,
  counter: QueryCounter,
  version: string,
): Promise<RolloutFigures> {
  const started = Date.now();
  for (const zone of ZONES) await changeTemplate(kube, namespace, zone, version);
  await waitRolledOut(kube, namespace, 600_000);
  const transitions = monitor.transitions.filter((t) => t.at >= started);
  const lastReady = Math.max(...transitions.filter((t) => t.to.endsWith('/ready')).map((t) => t.at));
  const deletes = transitions.filter(isDelete);
  const restarts = deletes
    .map((d) => transitions.find((t) => t.pod === d.pod && t.at > d.at && t.to.endsWith('/ready'))?.at ?? NaN)
    .map((back, i) => back - deletes[i]!.at)
    .filter((x) => !Number.isNaN(x));
  const restart = percentile(restarts, 50);
  const order = [...new Set(deletes.map(zoneOf))];
  const handoffs = order.slice(1).map((zone, i) => {
    const firstDelete = deletes.find((d) => zoneOf(d) === zone)!.at;
    const previousReady = transitions.filter(
      (t) => zoneOf(t) === order[i] && t.to.endsWith('/ready') && t.at <= firstDelete,
    );
    return firstDelete - Math.max(...previousReady.map((t) => t.at));
  });
  return {
    makespan: lastReady - started,
    ideal: ZONES.length * REPLICAS * restart,
    restart,
    queries: counter.between(started, Date.now()),
    handoffs,
  };
}

async function setGated(kube: KubeClient, namespace: string, gated: boolean): Promise<void> {
  for (const zone of ZONES)
    await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
      metadata: { annotations: { 'grafana.com/rollout-health-check': gated ? CHECK : null } },
    });
}

async function setBake(kube: KubeClient, namespace: string, bakeTime: string): Promise<void> {
  await kube.patch(healthCheckResource, { namespace, name: CHECK }, 'merge', { spec: { bakeTime } });
}

async function waitingCode(kube: KubeClient, namespace: string): Promise<string | undefined> {
  const cm = await kube.get<ConfigMap>(resources.configMaps, { namespace, name: 'stateward-rollout-status' });
  const status = JSON.parse(cm.data?.['ingester'] ?? '{}') as { waitingFor?: { code: string } };
  return status.waitingFor?.code;
}

interface Handoff {
  /** Prometheus first answering the passing value → the next zone's first delete. */
  latency: number;
  /** The value lowered → Prometheus first answering it (scrape interval and the query's range). */
  propagation: number;
}

/**
 * One rollout whose first zone fails the check until the gate pauses; then
 * the error ratio falls and the hand-off to the second zone is timed.
 */
async function gatedHandoff(
  kube: KubeClient,
  namespace: string,
  monitor: InvariantMonitor,
  exporter: MetricExporter,
  prometheus: Prometheus,
  version: string,
): Promise<Handoff> {
  const started = Date.now();
  for (const zone of ZONES) await changeTemplate(kube, namespace, zone, version);
  // The zone that rolls first is the one whose release is "bad" (normally a, by name order).
  const first = await waitFor(
    'the first zone to start rolling',
    () => monitor.transitions.find((t) => t.at >= started && isDelete(t)),
    { timeoutMs: 60_000, intervalMs: 5 },
  );
  const bad = zoneOf(first);
  const setRatio = (value: number) => {
    for (let i = 0; i < REPLICAS; i++) exporter.set(METRIC, { namespace, pod: `ingester-zone-${bad}-${i}` }, value);
  };
  setRatio(0.5);
  await waitFor('the gate to pause', async () => (await waitingCode(kube, namespace)) === 'health-check-paused', {
    timeoutMs: 120_000,
    intervalMs: 100,
  });
  const lowered = Date.now();
  setRatio(0);
  const passing = await waitFor(
    'Prometheus to answer the passing value',
    async () => {
      const sent = Date.now();
      const samples = await prometheus.query(
        `max(max_over_time(${METRIC}{namespace="${namespace}",pod=~"ingester-zone-${bad}-.*"}[${CURRENT_RANGE}]))`,
      );
      const value = onlyValue(samples);
      return value !== undefined && value <= 0.05 ? sent : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 20 },
  );
  const next = await waitFor(
    'the next zone to start rolling',
    () => monitor.transitions.find((t) => t.at >= lowered && isDelete(t) && zoneOf(t) !== bad),
    { timeoutMs: 30_000, intervalMs: 5 },
  );
  await waitRolledOut(kube, namespace, 600_000);
  return { latency: next.at - passing, propagation: passing - lowered };
}

const ratioText = (f: RolloutFigures, extra = 0) =>
  `${(f.makespan / 1000).toFixed(1)} s ÷ ${((f.ideal + extra) / 1000).toFixed(1)} s = ${(f.makespan / (f.ideal + extra)).toFixed(3)}`;

export async function healthgateBench(): Promise<boolean> {
  const reps = Math.round(envNumber('BENCH_HEALTHGATE_REPS', 5));
  const cluster = await LocalCluster.start({ name: `bench-healthgate-${process.pid}`, nodesPerZone: 1, log: () => {} });
  const closers: (() => Promise<unknown>)[] = [];
  try {
    await promisify(execFile)('kubectl', ['--kubeconfig', cluster.kubeconfigPath, 'apply', '-f', crd]);
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
    closers.push(() => kube.close());
    const namespace = await benchNamespace(kube);
    await createGroup(kube, namespace, { all: { replicas: REPLICAS, readyDelay: '2s' } });
    await waitGroupSettled(kube, namespace);

    const exporter = await MetricExporter.start();
    closers.push(() => exporter.close());
    for (const zone of ZONES)
      for (let i = 0; i < REPLICAS; i++) exporter.set(METRIC, { namespace, pod: `ingester-zone-${zone}-${i}` }, 0);
    const prometheus = await Prometheus.start({ targets: [exporter.target] });
    closers.push(() => prometheus.close());
    await waitForQuery(prometheus, `count(${METRIC}{namespace="${namespace}"})`, (s) => onlyValue(s) === 30);
    const counter = new QueryCounter();
    await counter.listen(prometheus.port);
    closers.push(() => counter.close());
    // The API serves a new CRD's kind a moment after it is established.
    await waitFor(
      'the RolloutHealthCheck to be created',
      () =>
        kube
          .create(healthCheckResource, healthCheck(namespace, `http://127.0.0.1:${counter.port}`, '0s'))
          .catch(() => undefined),
      { timeoutMs: 30_000 },
    );

    const monitor = new InvariantMonitor(kube, namespace, {});
    await monitor.start();
    closers.push(() => monitor.stop());
    const entry = await statewardEntry();
    const [port] = await freePorts(1);
    const operator = spawn(
      process.execPath,
      [
        ...entry.nodeFlags,
        entry.entry,
        `-kubernetes.namespace=${namespace}`,
        `-kubernetes.config-file=${cluster.kubeconfigPath}`,
        `-kubernetes.api-url=${cluster.server}`,
        `-server.port=${port}`,
        '-log.level=warn',
      ],
      { stdio: 'ignore', env: { ...process.env, ...entry.env } },
    );
    closers.push(() => Promise.resolve(operator.kill('SIGTERM')));
    await waitFor(
      'operator ready',
      async () => (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status === 200,
      { timeoutMs: 30_000 },
    );

    // 1 and 2: the same rollout ungated, gated, gated with a bake.
    const ungated = await rollOut(kube, namespace, monitor, counter, '2');
    await setGated(kube, namespace, true);
    const gated = await rollOut(kube, namespace, monitor, counter, '3');
    await setBake(kube, namespace, `${BAKE_MS / 1000}s`);
    const baked = await rollOut(kube, namespace, monitor, counter, '4');
    await setBake(kube, namespace, '0s');

    // 3: the hand-off once a failing check turns healthy.
    const handoffs: Handoff[] = [];
    for (let i = 0; i < reps; i++)
      handoffs.push(await gatedHandoff(kube, namespace, monitor, exporter, prometheus, String(5 + i)));

    const gatedRatio = gated.makespan / gated.ideal;
    const bakedRatio = baked.makespan / (baked.ideal + 2 * BAKE_MS);
    const ms = (xs: number[]) => xs.map((x) => `${x} ms`).join(', ');
    report(
      'healthgate-makespan',
      `ungated ${ratioText(ungated)}; gated (bake 0) ${ratioText(gated)}; gated (bake ${BAKE_MS / 1000} s) ${ratioText(baked, 2 * BAKE_MS)} (ideal + 2 × bake) (target ≤ 1.05: ${gatedRatio <= 1.05 && bakedRatio <= 1.05 ? 'met' : 'MISSED'})`,
    );
    report(
      'healthgate-handoffs',
      `previous zone's last Ready → next zone's first delete: ungated ${ms(ungated.handoffs)}; gated ${ms(gated.handoffs)}; baked ${ms(baked.handoffs)}`,
    );
    // One check, Z = 3 zones, so 3 × (Z − 1) × E = 6E.
    report(
      'healthgate-queries',
      `per rollout, one check: ungated ${ungated.queries}, gated (bake 0) ${gated.queries} (3 × (3 − 1) × E, E = ${gated.queries / 6}), gated (bake ${BAKE_MS / 1000} s, interval ${EVALUATION_INTERVAL_MS / 1000} s) ${baked.queries} (E = ${baked.queries / 6})`,
    );
    const latencies = handoffs.map((h) => h.latency);
    const target = EVALUATION_INTERVAL_MS + 50;
    const worst = Math.max(...latencies);
    report(
      'healthgate-healthy-to-delete',
      `${reps} runs: median ${median(latencies)} ms, max ${worst} ms (${ms(latencies)}); value lowered → Prometheus answers it: median ${median(handoffs.map((h) => h.propagation))} ms (target ≤ ${target} ms: ${worst <= target ? 'met' : 'MISSED'})`,
    );
    report('healthgate-invariants', `invariant violations: ${monitor.violations.length}`);
    return gatedRatio <= 1.05 && bakedRatio <= 1.05 && worst <= target && monitor.violations.length === 0;
  } finally {
    for (const close of closers.reverse()) await close().catch(() => undefined);
    await cluster.teardown();
  }
}
