// webhook-no-downscale: /admission/no-downscale served over HTTPS by a
// WebhookServer in a child process (so its CPU is measured alone), driven
// open-loop from this process at a fixed rate (default 500 requests/s for
// 30 s; BENCH_WEBHOOK_RPS, BENCH_WEBHOOK_SECONDS) over a keep-alive agent of
// 16 sockets on loopback. Each request is an admission.k8s.io/v1 review of a
// StatefulSet UPDATE labelled grafana.com/no-downscale=true, alternately 3→2
// (denied) and 3→4 (allowed); every answer is checked. Figures: achieved
// rate, latency p50/p99/max (target p99 ≤ 5 ms), server CPU per 1000
// requests and as % of one core, getParentLabels calls (target 0: the typed
// object's labels come from oldObject), errors. No cluster is needed.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:https';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { envNumber, percentile, report } from './report.ts';

const PATH = '/admission/no-downscale';
const TARGET_P99_MS = 5;
const REQUEST_TIMEOUT_MS = 5_000;
const WARMUP_SECONDS = 1;

function container(name: string, image: string, port: number): Record<string, unknown> {
  return {
    name,
    image,
    imagePullPolicy: 'IfNotPresent',
    args: [
      `-target=${name}`,
      '-config.file=/etc/mimir/mimir.yaml',
      '-server.grpc-max-recv-msg-size-bytes=104857600',
      '-log.level=info',
    ],
    env: [
      { name: 'GOMAXPROCS', value: '4' },
      { name: 'JAEGER_AGENT_HOST', value: 'alloy.tracing.svc.cluster.local.' },
      { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
    ],
    ports: [
      { name: 'http-metrics', containerPort: port, protocol: 'TCP' },
      { name: 'grpc', containerPort: 9095, protocol: 'TCP' },
    ],
    readinessProbe: {
      httpGet: { path: '/ready', port, scheme: 'HTTP' },
      initialDelaySeconds: 15,
      timeoutSeconds: 1,
      periodSeconds: 10,
      successThreshold: 1,
      failureThreshold: 3,
    },
    resources: { limits: { memory: '12Gi' }, requests: { cpu: '2', memory: '8Gi' } },
    volumeMounts: [
      { name: 'config', mountPath: '/etc/mimir' },
      { name: 'storage', mountPath: '/data' },
    ],
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
  };
}

function statefulSet(replicas: number, generation: number): Record<string, unknown> {
  const labels = { name: 'ingester-zone-a', 'rollout-group': 'ingester', 'grafana.com/no-downscale': 'true' };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: {
      name: 'ingester-zone-a',
      namespace: 'mimir',
      uid: '6b1a3f0e-2f59-4c0b-9a57-3f1d2c7e8a90',
      resourceVersion: '4821337',
      generation,
      creationTimestamp: '2025-01-14T09:12:44Z',
      labels,
      annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-b', 'rollout-max-unavailable': '5' },
    },
    spec: {
      replicas,
      selector: { matchLabels: { name: 'ingester-zone-a', 'rollout-group': 'ingester' } },
      serviceName: 'ingester-zone-a',
      podManagementPolicy: 'Parallel',
      updateStrategy: { type: 'OnDelete' },
      revisionHistoryLimit: 10,
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Retain', whenScaled: 'Retain' },
      template: {
        metadata: { labels: { name: 'ingester-zone-a', 'rollout-group': 'ingester', gossip_ring_member: 'true' } },
        spec: {
          affinity: {
            podAntiAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: [
                {
                  labelSelector: {
                    matchExpressions: [
                      { key: 'rollout-group', operator: 'In', values: ['ingester'] },
                      { key: 'name', operator: 'NotIn', values: ['ingester-zone-a'] },
                    ],
                  },
                  topologyKey: 'kubernetes.io/hostname',
                },
              ],
            },
          },
          containers: [
            container('ingester', 'grafana/mimir:2.14.0', 8080),
            container('overrides-exporter', 'grafana/mimir:2.14.0', 8081),
            container('log-shipper', 'grafana/alloy:v1.5.0', 12345),
          ],
          securityContext: { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001 },
          terminationGracePeriodSeconds: 1200,
          volumes: [{ name: 'config', configMap: { name: 'mimir-config', defaultMode: 420 } }],
        },
      },
      volumeClaimTemplates: [
        {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name: 'storage' },
          spec: {
            accessModes: ['ReadWriteOnce'],
            resources: { requests: { storage: '100Gi' } },
            storageClassName: 'fast',
            volumeMode: 'Filesystem',
          },
        },
      ],
    },
    status: {
      replicas: 3,
      readyReplicas: 3,
      currentReplicas: 3,
      updatedReplicas: 3,
      availableReplicas: 3,
      observedGeneration: 7,
      currentRevision: 'ingester-zone-a-5d9c7b8f6',
      updateRevision: 'ingester-zone-a-5d9c7b8f6',
      collisionCount: 0,
    },
  };
}

const UID = '@@UID@@';

/** The review body around its uid, serialised once: [before uid, after uid]. */
export function reviewTemplate(newReplicas: number): [string, string] {
  const gvk = { group: 'apps', version: 'v1', kind: 'StatefulSet' };
  const gvr = { group: 'apps', version: 'v1', resource: 'statefulsets' };
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: UID,
      kind: gvk,
      resource: gvr,
      requestKind: gvk,
      requestResource: gvr,
      name: 'ingester-zone-a',
      namespace: 'mimir',
      operation: 'UPDATE',
      userInfo: {
        username: 'system:serviceaccount:mimir:rollout-operator',
        uid: 'c0ffee00-1111-2222-3333-444455556666',
        groups: ['system:serviceaccounts', 'system:serviceaccounts:mimir', 'system:authenticated'],
      },
      object: statefulSet(newReplicas, 8),
      oldObject: statefulSet(3, 7),
      dryRun: false,
      options: { kind: 'UpdateOptions', apiVersion: 'meta.k8s.io/v1', fieldManager: 'kubectl-scale' },
    },
  };
  const [before, after] = JSON.stringify(review).split(UID);
  return [before!, after!];
}

interface ServerStats {
  cpuUserUs: number;
  cpuSystemUs: number;
  elapsedMs: number;
  getParentLabelsCalls: number;
}

export interface Outcome {
  ok: boolean;
  latencyMs: number;
  error?: string;
}

function post(agent: Agent, port: number, body: string, uid: string, expectAllowed: boolean): Promise<Outcome> {
  return new Promise<Outcome>((resolve) => {
    const started = performance.now();
    const fail = (error: string) => resolve({ ok: false, latencyMs: performance.now() - started, error });
    const req = request(
      {
        agent,
        host: '127.0.0.1',
        port,
        servername: 'localhost',
        path: PATH,
        method: 'POST',
        timeout: REQUEST_TIMEOUT_MS,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', (error) => fail(error.message));
        res.on('end', () => {
          const latencyMs = performance.now() - started;
          if (res.statusCode !== 200) return resolve({ ok: false, latencyMs, error: `HTTP ${res.statusCode}` });
          try {
            const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
              response?: { uid?: unknown; allowed?: unknown };
            };
            if (review.response?.uid !== uid)
              return resolve({ ok: false, latencyMs, error: 'response.uid differs from request uid' });
            if (review.response.allowed !== expectAllowed)
              return resolve({
                ok: false,
                latencyMs,
                error: `allowed ${String(review.response.allowed)}, expected ${expectAllowed}`,
              });
            resolve({ ok: true, latencyMs });
          } catch (error) {
            resolve({
              ok: false,
              latencyMs,
              error: `undecodable response: ${error instanceof Error ? error.message : String(error)}`,
            });
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', (error) => fail(error.message));
    req.end(body);
  });
}

/**
 * Open loop: request i is sent at start + i × interval whatever happened to
 * the earlier ones; a late timer sends every request already due. Returns
 * the outcomes, the wall time from first send to last answer, and the
 * largest delay of a send behind its schedule.
 */
export async function drive(
  agent: Agent,
  port: number,
  rate: number,
  count: number,
  templates: { deny: [string, string]; allow: [string, string] },
) {
  const interval = 1000 / rate;
  const pending: Promise<Outcome>[] = [];
  const start = performance.now();
  let maxLagMs = 0;
  await new Promise<void>((done) => {
    let next = 0;
    const tick = () => {
      const now = performance.now();
      while (next < count && start + next * interval <= now) {
        maxLagMs = Math.max(maxLagMs, now - (start + next * interval));
        const deny = next % 2 === 0;
        const [before, after] = deny ? templates.deny : templates.allow;
        const uid = randomUUID();
        pending.push(post(agent, port, before + uid + after, uid, !deny));
        next++;
      }
      if (next >= count) return done();
      setTimeout(tick, Math.max(0, start + next * interval - performance.now()));
    };
    tick();
  });
  const outcomes = await Promise.all(pending);
  return { outcomes, wallMs: performance.now() - start, maxLagMs };
}

export async function webhooksBench(): Promise<boolean> {
  const seconds = envNumber('BENCH_WEBHOOK_SECONDS', 30);
  const rate = envNumber('BENCH_WEBHOOK_RPS', 500);
  const count = Math.round(seconds * rate);
  const templates = { deny: reviewTemplate(2), allow: reviewTemplate(4) };
  const bodyBytes = Buffer.byteLength(templates.deny[0] + randomUUID() + templates.deny[1]);

  const script = fileURLToPath(new URL('./webhooks-server.child.ts', import.meta.url));
  const child = spawn(process.execPath, [script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const nextLine = async (what: string): Promise<unknown> => {
    const timer = AbortSignal.timeout(30_000);
    const line = await Promise.race([
      lines.next(),
      new Promise<never>((_, reject) =>
        timer.addEventListener('abort', () => reject(new Error(`webhook server child: no ${what} within 30 s`)), {
          once: true,
        }),
      ),
    ]);
    if (line.done) throw new Error(`webhook server child exited before its ${what}`);
    return JSON.parse(line.value) as unknown;
  };
  let agent: Agent | undefined;
  try {
    const { port, ca } = (await nextLine('port')) as { port: number; ca: string };
    agent = new Agent({ keepAlive: true, maxSockets: 16, ca });
    // Warm-up (not measured): TLS handshakes, JIT.
    await drive(agent, port, rate, Math.min(count, Math.round(rate * WARMUP_SECONDS)), templates);

    child.stdin.write('start\n');
    await nextLine('start acknowledgement');
    const { outcomes, wallMs, maxLagMs } = await drive(agent, port, rate, count, templates);
    child.stdin.write('stop\n');
    const stats = (await nextLine('CPU figures')) as ServerStats;

    const latencies = outcomes.map((o) => o.latencyMs);
    const errors = outcomes.filter((o) => !o.ok);
    const p99 = percentile(latencies, 99);
    const cpuSeconds = (stats.cpuUserUs + stats.cpuSystemUs) / 1e6;
    const ms = (x: number) => x.toFixed(2);
    report(
      'webhook-no-downscale-rate',
      `${outcomes.length} requests (${(bodyBytes / 1024).toFixed(1)} KiB each, half denied) in ${(wallMs / 1000).toFixed(2)} s: ${(outcomes.length / (wallMs / 1000)).toFixed(1)} req/s achieved (target ${rate}); max send lag behind schedule ${ms(maxLagMs)} ms`,
    );
    report(
      'webhook-no-downscale-latency',
      `p50 ${ms(percentile(latencies, 50))} ms, p99 ${ms(p99)} ms, max ${ms(Math.max(...latencies))} ms (target p99 ≤ ${TARGET_P99_MS} ms: ${p99 <= TARGET_P99_MS ? 'met' : 'MISSED'})`,
    );
    report(
      'webhook-no-downscale-cpu',
      `server ${cpuSeconds.toFixed(3)} CPU s (user ${(stats.cpuUserUs / 1e6).toFixed(3)}, system ${(stats.cpuSystemUs / 1e6).toFixed(3)}): ${((cpuSeconds * 1000) / outcomes.length).toFixed(4)} CPU s per 1000 requests, ${((cpuSeconds * 1000 * 100) / stats.elapsedMs).toFixed(1)} % of one core`,
    );
    report(
      'webhook-no-downscale-checks',
      `getParentLabels calls ${stats.getParentLabelsCalls} (target 0), errors ${errors.length}${errors.length > 0 ? ` (first: ${errors[0]!.error})` : ''}`,
    );
    return p99 <= TARGET_P99_MS && errors.length === 0 && stats.getParentLabelsCalls === 0;
  } finally {
    agent?.destroy();
    if (child.exitCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.stdin.end();
      const killTimer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(killTimer);
    }
  }
}
