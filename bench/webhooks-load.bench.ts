// webhooks under load (issue 22): the real operator process with its HTTPS
// webhook server, against a local cluster, driven open loop straight to its
// port at 200 and 500 requests/s (BENCH_LOAD_SECONDS each, default 10):
//   scale-no-downscale  /scale reviews 5→4 of a StatefulSet labelled
//                       grafana.com/no-downscale=true: every one must be denied
//   eviction-allowed    dry-run evictions of Ready pods of a healthy group
//                       under a ZPDB: every one allowed (dry runs record nothing)
//   eviction-denied     evictions of zone a pods of a group whose zone c is
//                       not Ready, under a ZPDB with maxUnavailable 1: every
//                       one denied
// For each: correct answers, wrong answers (the opposite decision), errors
// (no 200 answer within 5 s), p50/p99, and API calls the operator made per
// request (its rollout_operator_kubernetes_api_client_* count). Targets: 100 %
// correct at 500 req/s, p99 ≤ 5 ms, 0 API calls per denial.
import { Agent, request } from 'node:https';
import { LocalCluster, readState } from '../test/cluster/cluster.ts';
import { TestCluster } from '../test/cluster/testing.ts';
import { freePorts } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { kubectl } from '../test/support/kubectl.ts';
import { OperatorProcess } from '../test/support/operator-process.ts';
import { createGroup, createGroupBudget, isReady, waitGroupSettled } from '../test/support/rollout-group.ts';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { resources, type Pod } from '../src/runtime/kube/types.ts';
import { benchNamespace } from './namespace.ts';
import { percentile, report } from './report.ts';

const RATES = [200, 500];
const TARGET_P99_MS = 5;
const REPLICAS = 5;

type Verdict = 'correct' | 'wrong' | 'error';

interface Case {
  name: string;
  path: string;
  /** The review for request i. */
  review: (i: number) => Record<string, unknown>;
  expectAllowed: boolean;
  /** Text the answer's message must carry (denials). */
  message?: RegExp;
}

function post(
  agent: Agent,
  port: number,
  path: string,
  body: string,
): Promise<{ verdictOf: (c: Case) => Verdict; latencyMs: number; detail: string }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (status: number, text: string) => {
      const latencyMs = performance.now() - started;
      resolve({
        latencyMs,
        detail: `${status} ${text.slice(0, 200)}`,
        verdictOf: (c) => {
          if (status !== 200) return 'error';
          const response = (JSON.parse(text) as { response?: { allowed?: boolean; status?: { message?: string } } })
            .response;
          if (response?.allowed !== c.expectAllowed) return 'wrong';
          return c.message && !c.message.test(response.status?.message ?? '') ? 'wrong' : 'correct';
        },
      });
    };
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        timeout: 5000,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done(res.statusCode ?? 0, Buffer.concat(chunks).toString()));
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer within 5 s')));
    req.on('error', (error) => done(0, error.message));
    req.end(body);
  });
}

/** Open loop: request i leaves at start + i / rate, whatever happened to the earlier ones. */
async function drive(agent: Agent, port: number, c: Case, rate: number, seconds: number) {
  const count = rate * seconds;
  const pending: ReturnType<typeof post>[] = [];
  const start = performance.now();
  await new Promise<void>((finished) => {
    let next = 0;
    const tick = () => {
      while (next < count && start + (next * 1000) / rate <= performance.now()) {
        pending.push(
          post(
            agent,
            port,
            c.path,
            JSON.stringify({
              apiVersion: 'admission.k8s.io/v1',
              kind: 'AdmissionReview',
              request: { uid: `u-${next}`, ...c.review(next) },
            }),
          ),
        );
        next++;
      }
      if (next >= count) return finished();
      setTimeout(tick, Math.max(0, start + (next * 1000) / rate - performance.now()));
    };
    tick();
  });
  return Promise.all(pending);
}

async function apiCalls(operator: OperatorProcess): Promise<number> {
  const body = (await operator.get('/metrics'))?.body ?? '';
  return body
    .split('\n')
    .filter((l) => l.startsWith('rollout_operator_kubernetes_api_client_request_duration_seconds_count{'))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

export async function webhooksLoadBench(): Promise<boolean> {
  const seconds = Number(process.env['BENCH_LOAD_SECONDS'] ?? 10);
  const cluster = await LocalCluster.start({
    name: `bench-webhooks-load-${process.pid}`,
    nodesPerZone: 1,
    log: () => {},
  });
  let operator: OperatorProcess | undefined;
  const agent = new Agent({ keepAlive: true, maxSockets: 16, rejectUnauthorized: false });
  try {
    const admin = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
    const healthy = await benchNamespace(admin, 'bench-healthy');
    const degraded = await benchNamespace(admin, 'bench-degraded');
    await createGroup(admin, healthy, { all: { replicas: REPLICAS, readyDelay: '0s' } });
    await createGroup(admin, degraded, {
      all: { replicas: REPLICAS, readyDelay: '0s' },
      c: { replicas: REPLICAS, podLabels: { 'stateward.dev/simulate': 'crash-loop' } },
    });
    await admin.patch(resources.statefulSets, { namespace: healthy, name: 'ingester-zone-a' }, 'merge', {
      metadata: { labels: { 'grafana.com/no-downscale': 'true' } },
    });
    const crd = new URL('../deploy/crds/zone-aware-pod-disruption-budgets.yaml', import.meta.url).pathname;
    if (!(await kubectl({ kubeconfigPath: cluster.kubeconfigPath } as never, 'apply', '-f', crd)).ok)
      throw new Error('cannot install the ZPDB CRD');
    for (const namespace of [healthy, degraded]) await createGroupBudget(admin, namespace);
    await waitGroupSettled(admin, healthy, 300_000);
    await waitFor(
      'zones a and b of the degraded group Ready',
      async () => {
        const pods = (await admin.list<Pod>(resources.pods, { namespace: degraded })).items;
        return pods.filter((p) => !p.metadata?.name?.includes('zone-c') && isReady(p)).length === 2 * REPLICAS;
      },
      { timeoutMs: 300_000 },
    );

    const [port] = (await freePorts(1)) as [number];
    const state = readState(cluster.stateDir);
    if (!state) throw new Error(`no state in ${cluster.stateDir}`);
    operator = await OperatorProcess.start(new TestCluster(state), healthy, [
      `-kubernetes.watch-namespaces=${healthy},${degraded}`,
      '-server-tls.enabled',
      `-server-tls.port=${port}`,
      '-webhooks.update-ca-bundle=false',
      '-log.level=info',
    ]);
    await operator.waitReady(60_000);

    const scaleObject = (replicas: number) => ({
      apiVersion: 'autoscaling/v1',
      kind: 'Scale',
      metadata: { name: 'ingester-zone-a', namespace: healthy },
      spec: { replicas },
    });
    const eviction = (namespace: string, name: string, dryRun: boolean) => ({
      operation: 'CREATE',
      resource: { group: '', version: 'v1', resource: 'pods' },
      subResource: 'eviction',
      namespace,
      name,
      dryRun,
      object: {
        apiVersion: 'policy/v1',
        kind: 'Eviction',
        metadata: { name, namespace },
        ...(dryRun ? { deleteOptions: { dryRun: ['All'] } } : {}),
      },
    });
    const cases: Case[] = [
      {
        name: 'scale-no-downscale',
        path: '/admission/no-downscale',
        review: () => ({
          operation: 'UPDATE',
          resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
          subResource: 'scale',
          namespace: healthy,
          name: 'ingester-zone-a',
          oldObject: scaleObject(REPLICAS),
          object: scaleObject(REPLICAS - 1),
        }),
        expectAllowed: false,
        message: /because it has the label 'grafana\.com\/no-downscale=true'/,
      },
      {
        name: 'eviction-allowed',
        path: '/admission/pod-eviction',
        review: (i) => eviction(healthy, `ingester-zone-b-${i % REPLICAS}`, true),
        expectAllowed: true,
      },
      {
        name: 'eviction-denied',
        path: '/admission/pod-eviction',
        review: (i) => eviction(degraded, `ingester-zone-a-${i % REPLICAS}`, false),
        expectAllowed: false,
      },
    ];
    // Warm-up (not measured): TLS handshakes, JIT.
    for (const c of cases) await drive(agent, port, c, 200, 1);

    let ok = true;
    const rows: string[] = [];
    for (const rate of RATES) {
      for (const c of cases) {
        const callsBefore = await apiCalls(operator);
        const outcomes = await drive(agent, port, c, rate, seconds);
        const calls = (await apiCalls(operator)) - callsBefore;
        const verdicts = outcomes.map((o) => o.verdictOf(c));
        const correct = verdicts.filter((v) => v === 'correct').length;
        const wrong = verdicts.filter((v) => v === 'wrong').length;
        const errors = verdicts.filter((v) => v === 'error').length;
        const latencies = outcomes.map((o) => o.latencyMs);
        const p99 = percentile(latencies, 99);
        const perRequest = calls / outcomes.length;
        const met = correct === outcomes.length && p99 <= TARGET_P99_MS && (c.expectAllowed || calls === 0);
        ok &&= met;
        const firstBad = outcomes.find((o) => o.verdictOf(c) !== 'correct');
        rows.push(
          `| ${c.name} | ${rate} | ${correct} of ${outcomes.length} | ${wrong} | ${errors} | ${percentile(latencies, 50).toFixed(2)} / ${p99.toFixed(2)} ms | ${perRequest.toFixed(3)} | ${met ? 'met' : 'MISSED'}${firstBad ? ` (first wrong: ${firstBad.detail})` : ''} |`,
        );
      }
    }
    report(
      'webhooks-under-load',
      `\n| case | req/s | correct | wrong | errors | p50 / p99 | API calls per request | targets (100 % correct, p99 ≤ ${TARGET_P99_MS} ms, 0 calls per denial) |\n|---|---|---|---|---|---|---|---|\n${rows.join('\n')}`,
    );
    return ok;
  } finally {
    agent.destroy();
    await operator?.stop();
    await cluster.teardown();
  }
}
