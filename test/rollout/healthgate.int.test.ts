// Health-gated rollouts end to end: the real stateward executable, the real
// control plane, and a real Prometheus (built from its Go module) scraping a
// test exporter that publishes an error ratio per pod with the kwok pods'
// namespace and pod labels. An independent monitor checks the one-zone
// guarantee over every pod transition, and the zones the gate holds are
// watched for any delete while it holds them.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { resources, type ConfigMap, type Event, type StatefulSet } from '../../src/runtime/kube/types.ts';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { healthCheckResource, type RolloutHealthCheck } from '../../src/rollout/healthcheck/resource.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { MetricExporter } from '../support/metricexporter.ts';
import { PrometheusGateway } from '../support/prometheus-gateway.ts';
import { ERROR_RATIO_METRIC, errorRatioCheck } from '../support/healthchecks.ts';
import { runStatus } from '../../src/status/cli.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { installLoopbackWebhook, loopbackWebhook } from '../support/webhooks.ts';
import { freePorts } from '../cluster/ports.ts';
import { onlyValue, Prometheus, waitForQuery } from '../support/prometheus.ts';
import {
  changeTemplate,
  createGroup,
  monitorGroup,
  testClient,
  waitGroupSettled,
  waitRevisionsPending,
  waitRolledOut,
  ZONES,
  type Transition,
} from '../support/rollout-group.ts';

const cluster = testCluster();
const crd = fileURLToPath(new URL('../../deploy/crds/rollout-health-checks.yaml', import.meta.url));
const rolloutOperatorManifest = fileURLToPath(
  new URL('../deploy/fixtures/rollout-operator-health-check.yaml', import.meta.url),
);
const CHECK = 'ingester-errors';
const METRIC = ERROR_RATIO_METRIC;

/** The shared error-ratio check (test/support/healthchecks.ts), with overrides of the check's fields. */
function healthCheck(
  namespace: string,
  prometheusURL: string,
  check: Record<string, unknown> = {},
): RolloutHealthCheck {
  // `or vector(0)`: on this loaded machine the baseline query, read at zone
  // a's start stamp, has come back empty in some runs (cause not found yet,
  // see the closing note of issue 36); no data at a fixed past time would
  // hold the gate for good, which is not what these tests are about.
  return errorRatioCheck(CHECK, namespace, prometheusURL, { check, zeroWhenAbsent: true });
}

async function setup(t: TestContext, gated: string[] = ['b', 'c']) {
  const applied = await kubectl(cluster, 'apply', '-f', crd);
  assert.ok(applied.ok, `cannot install the RolloutHealthCheck CRD: ${applied.out}`);
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  await createGroup(kube, namespace, { all: { replicas: 2 } });
  await waitGroupSettled(kube, namespace);
  for (const zone of gated)
    await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
      metadata: { annotations: { 'grafana.com/rollout-health-check': CHECK } },
    });
  const exporter = await MetricExporter.start();
  t.after(() => exporter.close());
  for (const zone of ZONES)
    for (const i of [0, 1]) exporter.set(METRIC, { namespace, pod: `ingester-zone-${zone}-${i}` }, 0);
  const prometheus = await Prometheus.start({ targets: [exporter.target] });
  t.after(() => prometheus.close());
  await waitForQuery(prometheus, `count(${METRIC}{namespace="${namespace}"})`, (s) => onlyValue(s) === 6);
  const monitor = await monitorGroup(t, kube, namespace);
  return { namespace, kube, exporter, prometheus, monitor };
}

async function createCheck(kube: KubeClient, object: RolloutHealthCheck): Promise<void> {
  // The API serves a new CRD's kind a moment after it is established.
  await waitFor(
    'the RolloutHealthCheck to be created',
    () => kube.create(healthCheckResource, object).catch(() => undefined),
    {
      timeoutMs: 30_000,
    },
  );
}

async function startOperator(t: TestContext, namespace: string): Promise<OperatorProcess> {
  const operator = await OperatorProcess.start(cluster, namespace, ['-reconcile.interval=1s', '-web.enabled']);
  t.after(() => operator.stop());
  await operator.waitReady();
  return operator;
}

async function startRollout(kube: KubeClient, namespace: string): Promise<void> {
  for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
  await waitRevisionsPending(kube, namespace);
}

const zoneOf = (tr: Transition) => /ingester-zone-([a-z])-/.exec(tr.pod)?.[1];
/** Zones that lost a Ready pod to the rollout, in order. */
function zoneOrder(transitions: Transition[]): string[] {
  const order: string[] = [];
  for (const tr of transitions) {
    const zone = zoneOf(tr);
    if (zone && tr.from.endsWith('/ready') && !order.includes(zone)) order.push(zone);
  }
  return order;
}

/** `stateward status -n <namespace>` as a user runs it, its text output. */
async function statusText(namespace: string): Promise<string> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runStatus(['-n', namespace, '--kubeconfig', cluster.kubeconfigPath], {
    out: (s) => out.push(s),
    err: (s) => err.push(s),
    env: {},
    isTTY: false,
    columns: 160,
  });
  assert.equal(code, 0, err.join(''));
  return out.join('');
}

async function metricsText(operator: OperatorProcess): Promise<string> {
  return (await operator.get('/metrics'))?.body ?? '';
}

async function events(kube: KubeClient, namespace: string, reason: string): Promise<Event[]> {
  return (await kube.list<Event>(resources.events, { namespace })).items.filter((e) => e.reason === reason);
}

async function groupStatus(
  kube: KubeClient,
  namespace: string,
): Promise<{ phase: string; waitingFor?: { code: string; message: string; statefulSet?: string } }> {
  const cm = await kube.get<ConfigMap>(resources.configMaps, { namespace, name: 'stateward-rollout-status' });
  return JSON.parse(cm.data!['ingester']!) as {
    phase: string;
    waitingFor?: { code: string; message: string; statefulSet?: string };
  };
}

/**
 * waitRolledOut, whose timeout says why the group waits: the published
 * status (the gate's verdict and each check's last current and baseline
 * values) and the start stamps, so a failure in a loaded CI run can be read
 * from its output alone.
 */
async function rolledOut(
  kube: KubeClient,
  namespace: string,
  operator?: OperatorProcess,
  timeoutMs?: number,
): Promise<void> {
  try {
    await waitRolledOut(kube, namespace, timeoutMs);
  } catch (error) {
    const status = await kube
      .get<ConfigMap>(resources.configMaps, { namespace, name: 'stateward-rollout-status' })
      .then((cm) => cm.data?.['ingester'] ?? '(no report for ingester)')
      .catch((e: unknown) => `(no status: ${(e as Error).message})`);
    const stamps = (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items.map((s) => {
      const a = s.metadata?.annotations ?? {};
      return `${s.metadata?.name}: started-at=${a['grafana.com/rollout-health-check-started-at'] ?? '-'} ready=${s.status?.readyReplicas ?? 0}/${s.spec?.replicas ?? 0}`;
    });
    const gateMetrics = operator
      ? (await metricsText(operator)).split('\n').filter((l) => l.startsWith('rollout_operator_health_check_'))
      : [];
    const logTail = operator ? operator.logs.split('\n').slice(-40) : [];
    throw new Error([(error as Error).message, `status: ${status}`, ...stamps, ...gateMetrics, ...logTail].join('\n'), {
      cause: error,
    });
  }
}

/** The error ratio zone a's two pods publish. */
function setZoneA(exporter: MetricExporter, namespace: string, ratio: number): void {
  for (const i of [0, 1]) exporter.set(METRIC, { namespace, pod: `ingester-zone-a-${i}` }, ratio);
}

/** The rollout completes, zone a then b then c, with no violation of the one-zone guarantee on the way. */
async function rolledOutZoneByZone(
  kube: KubeClient,
  namespace: string,
  monitor: { violations: unknown[]; transitions: Transition[] },
  operator?: OperatorProcess,
  timeoutMs?: number,
): Promise<void> {
  await rolledOut(kube, namespace, operator, timeoutMs);
  assert.deepEqual(monitor.violations, []);
  assert.deepEqual(zoneOrder(monitor.transitions), ['a', 'b', 'c']);
}

/** Zone a rolled completely (every pod on the new revision and Ready). */
async function waitZoneRolled(kube: KubeClient, namespace: string, zone: string): Promise<void> {
  await waitFor(
    `zone ${zone} rolled`,
    async () => {
      const set = await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` });
      return set.status?.currentRevision === set.status?.updateRevision && set.status?.readyReplicas === 2;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
}

describe('health-gated rollouts (real Prometheus)', () => {
  it('a bad release stops after zone a; zones b and c roll, one at a time, once the error ratio falls', async (t) => {
    const { namespace, kube, exporter, prometheus, monitor } = await setup(t);
    await createCheck(kube, healthCheck(namespace, prometheus.url));
    // The release is bad in zone a: its pods' error ratio is 0.5 while the
    // stable zones stay at 0, so the check (current ≤ baseline + 0.05) fails.
    setZoneA(exporter, namespace, 0.5);
    await startRollout(kube, namespace);
    const operator = await startOperator(t, namespace);

    await waitZoneRolled(kube, namespace, 'a');
    const blocked = await waitFor(
      'a RolloutBlockedByHealthCheck Event',
      async () => (await events(kube, namespace, 'RolloutBlockedByHealthCheck'))[0],
      { timeoutMs: 60_000 },
    );
    assert.equal(blocked.regarding?.name, 'ingester-zone-b');
    assert.match(blocked.note ?? '', /check error-ratio: fail \(current 0\.5, baseline 0\)/);
    const status = await waitFor(
      'the status to say why the group waits',
      async () => {
        const s = await groupStatus(kube, namespace);
        return s.waitingFor?.code === 'health-check-paused' ? s : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.match(status.waitingFor!.message, /ingester-zone-b is held by health check ingester-errors/);
    // `stateward status` shows the check, the verdict and both values, as the operator last evaluated them.
    const text = await waitFor(
      'stateward status to show the gate',
      async () => {
        const t = await statusText(namespace);
        return /health check ingester-errors before ingester-zone-b: pause/.test(t) ? t : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.match(text, /error-ratio: fail \(current 0\.5, baseline 0\)/);
    assert.match(text, /\[health-check-paused\]/);
    // So does the web view, on the replica evaluating the gate.
    const page = (await operator.get(`/status/${namespace}`))?.body ?? '';
    assert.match(page, /class="health-gate" data-state="pause"/);
    assert.match(page, /<td>error-ratio<\/td><td>fail<\/td><td>0\.5<\/td><td>0<\/td>/);
    await waitFor(
      'the blocked metric',
      async () =>
        /rollout_operator_health_check_blocked\{rollout_group="ingester"\} 1/.test(await metricsText(operator)),
      {
        timeoutMs: 30_000,
      },
    );
    // The gate keeps evaluating, and keeps holding: wait for three more failed evaluations.
    const failures = async () =>
      Number(
        /rollout_operator_health_check_evaluations_total\{rollout_group="ingester",check="error-ratio",result="fail"\} (\d+)/.exec(
          await metricsText(operator),
        )?.[1] ?? 0,
      );
    const seen = await failures();
    await waitFor('three more failed evaluations', async () => (await failures()) >= seen + 3, { timeoutMs: 30_000 });
    assert.deepEqual(
      monitor.transitions.filter((tr) => zoneOf(tr) !== 'a').map((tr) => `${tr.pod}: ${tr.from} → ${tr.to}`),
      [],
      'zones b and c were touched while the gate held them',
    );

    // The error ratio falls (the incident is fixed): b and c roll, one at a time.
    setZoneA(exporter, namespace, 0);
    await rolledOut(kube, namespace);
    assert.deepEqual(monitor.violations, []);
    assert.equal(monitor.maxDisruptedAtOnce, 1);
    assert.deepEqual(zoneOrder(monitor.transitions), ['a', 'b', 'c']);
    // The finished rollout leaves no start stamps behind for the next one to be judged against.
    await waitFor(
      'the start stamps to be removed',
      async () =>
        (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items.every(
          (s) => s.metadata?.annotations?.['grafana.com/rollout-health-check-started-at'] === undefined,
        ),
      { timeoutMs: 30_000 },
    );
  });

  it('Prometheus down mid-rollout holds the next zone (Pause) with a clear reason, and the rollout goes on once it is back', async (t) => {
    const { namespace, kube, prometheus, monitor } = await setup(t);
    // The baseline is read at zone a's start, while Prometheus is down: its
    // window must reach back to samples scraped before the outage (one that
    // holds none is no data, which holds the gate for good, as documented).
    await createCheck(kube, healthCheck(namespace, prometheus.url, { baselineRange: '5m' }));
    await prometheus.stop();
    await startRollout(kube, namespace);
    await startOperator(t, namespace);
    await waitZoneRolled(kube, namespace, 'a');
    const status = await waitFor(
      'the status to name the unreachable Prometheus',
      async () => {
        const s = await groupStatus(kube, namespace);
        return s.waitingFor?.code === 'health-check-paused' ? s : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.match(status.waitingFor!.message, /error: current query: cannot reach 127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
    assert.deepEqual(
      monitor.transitions.filter((tr) => zoneOf(tr) !== 'a'),
      [],
    );
    await prometheus.resume();
    await rolledOutZoneByZone(kube, namespace, monitor);
  });

  it('misconfigurations: an unknown check proceeds with RolloutHealthCheckMisconfigured; a query returning several samples is an error, not a pass', async (t) => {
    const { namespace, kube, prometheus } = await setup(t, ['b']);
    // Zone b names a check that does not exist (rollout-operator: proceed, with an Event).
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', {
      metadata: { annotations: { 'grafana.com/rollout-health-check': 'no-such-check' } },
    });
    // Zone c's check forgets to aggregate: two pods, two samples.
    await createCheck(
      kube,
      healthCheck(namespace, prometheus.url, { query: `${METRIC}{\${targetMatchers}} offset \${range}` }),
    );
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-c' }, 'merge', {
      metadata: { annotations: { 'grafana.com/rollout-health-check': CHECK } },
    });
    await startRollout(kube, namespace);
    await startOperator(t, namespace);
    await waitZoneRolled(kube, namespace, 'b');
    const misconfigured = await waitFor(
      'a RolloutHealthCheckMisconfigured Event',
      async () => (await events(kube, namespace, 'RolloutHealthCheckMisconfigured'))[0],
      { timeoutMs: 30_000 },
    );
    assert.match(misconfigured.note ?? '', /no-such-check .* does not exist; the rollout proceeds/);
    const status = await waitFor(
      'zone c held by the erring check',
      async () => {
        const s = await groupStatus(kube, namespace);
        return s.waitingFor?.code === 'health-check-paused' ? s : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.match(status.waitingFor!.message, /returned \d+ samples; it must return one/);
  });

  it("rollout-operator's own RolloutHealthCheck manifest, applied with kubectl, is accepted and drives the gate", async (t) => {
    const { namespace, kube, prometheus, monitor } = await setup(t, []);
    const manifest = (await readFile(rolloutOperatorManifest, 'utf8'))
      .replaceAll('NAMESPACE', namespace)
      .replaceAll('PROMETHEUS_URL', prometheus.url);
    const file = join(await mkdtemp(join(tmpdir(), 'stateward-rhc-')), 'check.yaml');
    await writeFile(file, manifest);
    await waitFor('kubectl apply of the manifest', async () => (await kubectl(cluster, 'apply', '-f', file)).ok, {
      timeoutMs: 30_000,
    });
    for (const zone of ZONES)
      await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
        metadata: { annotations: { 'grafana.com/rollout-health-check': 'ingester-health' } },
      });
    await startRollout(kube, namespace);
    const operator = await startOperator(t, namespace);
    // The manifest sets no evaluationInterval, so a gate that does not pass
    // at once asks again only 30 s later (the default): a longer deadline
    // than the other tests', which evaluate every second. This test failed
    // twice in loaded CI runs at 180 s and never alone; the deadline's
    // message carries the status, the gate's metrics and the log to say why.
    await rolledOutZoneByZone(kube, namespace, monitor, operator, 360_000);
    // Zones b and c passed the gate (zone a, the first, is never gated); the disabled check never ran.
    const metrics = await metricsText(operator);
    t.diagnostic(
      metrics
        .split('\n')
        .filter((l) => l.startsWith('rollout_operator_health_check_evaluations_total'))
        .join('; '),
    );
    assert.match(
      metrics,
      /rollout_operator_health_check_evaluations_total\{rollout_group="ingester",check="error-ratio",result="pass"\} 2\n/,
    );
    assert.doesNotMatch(metrics, /check="kept-for-later"/);
  });

  it('a config restart of the group passes the same gate between zones', async (t) => {
    const { namespace, kube, exporter, prometheus } = await setup(t, []);
    await createCheck(kube, healthCheck(namespace, prometheus.url));
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'ingester-config', namespace },
      data: { limits: '1' },
    });
    for (const zone of ZONES)
      await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'strategic', {
        metadata: {
          annotations: { 'com.xing.deployment-restart': 'enabled', 'grafana.com/rollout-health-check': CHECK },
        },
        spec: {
          template: {
            spec: { containers: [{ name: 'ingester', envFrom: [{ configMapRef: { name: 'ingester-config' } }] }] },
          },
        },
      });
    // The template edit above is a revision of its own: it rolls (through passing gates) first.
    const operator = await OperatorProcess.start(cluster, namespace, [
      '-reconcile.interval=1s',
      '-config-restarts.enabled',
    ]);
    t.after(() => operator.stop());
    await operator.waitReady();
    await rolledOut(kube, namespace);
    await waitFor(
      'checksums recorded and start stamps cleared everywhere',
      async () =>
        (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items.every(
          (s) =>
            s.metadata?.annotations?.['com.xing.deployment-restart.applied-config-checksums'] !== undefined &&
            s.metadata?.annotations?.['grafana.com/rollout-health-check-started-at'] === undefined,
        ),
      { timeoutMs: 30_000 },
    );
    const monitor = await monitorGroup(t, kube, namespace);
    // The new config is bad in the first zone that takes it.
    setZoneA(exporter, namespace, 0.5);
    await kube.patch(resources.configMaps, { namespace, name: 'ingester-config' }, 'merge', { data: { limits: '2' } });
    await waitZoneRolled(kube, namespace, 'a');
    await waitFor(
      'zone b held by the gate',
      async () => (await groupStatus(kube, namespace)).waitingFor?.code === 'health-check-paused',
      { timeoutMs: 60_000 },
    );
    assert.deepEqual(
      monitor.transitions.filter((tr) => zoneOf(tr) !== 'a'),
      [],
      'zones b and c restarted past a failing gate',
    );
    setZoneA(exporter, namespace, 0);
    await rolledOutZoneByZone(kube, namespace, monitor);
  });

  it('a tenant header and a bearer token from Secrets, over TLS with a CA from a ConfigMap: queries pass the gateway, and no secret reaches the log', async (t) => {
    const { namespace, kube, prometheus, monitor } = await setup(t);
    const TENANT = 'tenant-7f3a';
    const TOKEN = 's3cr3t-t0ken-9b1c';
    const gateway = await PrometheusGateway.start(prometheus.url, {
      tls: true,
      require: { 'x-scope-orgid': TENANT, authorization: `Bearer ${TOKEN}` },
    });
    t.after(() => gateway.close());
    await kube.create(resources.secrets, {
      metadata: { name: 'query-credentials', namespace },
      stringData: { tenant: TENANT, token: `${TOKEN}\n` },
    });
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'query-ca', namespace },
      data: { 'ca.crt': gateway.ca! },
    });
    const check = healthCheck(namespace, gateway.url);
    check.spec = {
      ...check.spec,
      headers: [{ name: 'X-Scope-OrgID', valueFrom: { secretKeyRef: { name: 'query-credentials', key: 'tenant' } } }],
      bearerTokenSecret: { name: 'query-credentials', key: 'token' },
      tlsConfig: { ca: { configMap: { name: 'query-ca', key: 'ca.crt' } } },
    };
    await createCheck(kube, check);
    await startRollout(kube, namespace);
    const operator = await startOperator(t, namespace);
    await rolledOutZoneByZone(kube, namespace, monitor, operator);
    // Two gates (b and c), three queries each, all admitted by the gateway.
    const queries = gateway.requests.filter((r) => r.path.startsWith('/api/v1/query'));
    assert.equal(queries.length, 6, JSON.stringify(gateway.requests.map((r) => [r.path, r.admitted])));
    assert.ok(queries.every((r) => r.admitted));
    assert.ok(!operator.logs.includes(TOKEN) && !operator.logs.includes(TENANT), 'a secret value reached the log');
  });
  it('Prometheus down mid-rollout under Warn policies: the rollout proceeds, with RolloutHealthCheckWarn naming the check and why', async (t) => {
    const { namespace, kube, prometheus, monitor } = await setup(t);
    // onError follows onFailure unless set: Warn for all three outcomes.
    await createCheck(kube, healthCheck(namespace, prometheus.url, { onFailure: 'Warn', onNoData: 'Warn' }));
    await startRollout(kube, namespace);
    await startOperator(t, namespace);
    // Zone a has begun (its start stamp is written before its first delete): Prometheus goes away.
    await waitFor(
      "zone a's start stamp",
      async () =>
        (await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' })).metadata
          ?.annotations?.['grafana.com/rollout-health-check-started-at'] !== undefined,
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    await prometheus.stop();
    await rolledOutZoneByZone(kube, namespace, monitor);
    const warned = await waitFor(
      'a RolloutHealthCheckWarn Event',
      async () => (await events(kube, namespace, 'RolloutHealthCheckWarn'))[0],
      { timeoutMs: 30_000 },
    );
    assert.match(warned.note ?? '', /check error-ratio: error: current query: cannot reach 127\.0\.0\.1:\d+/);
    assert.deepEqual(await events(kube, namespace, 'RolloutBlockedByHealthCheck'), []);
  });

  it('a check whose selector does not select the StatefulSet naming it: the rollout proceeds with RolloutHealthCheckMisconfigured', async (t) => {
    const { namespace, kube, prometheus, monitor } = await setup(t);
    const check = healthCheck(namespace, prometheus.url);
    check.spec = { ...check.spec, selector: { matchLabels: { 'rollout-group': 'distributor' } } };
    await createCheck(kube, check);
    await startRollout(kube, namespace);
    await startOperator(t, namespace);
    await rolledOutZoneByZone(kube, namespace, monitor);
    const misconfigured = await waitFor(
      'a RolloutHealthCheckMisconfigured Event',
      async () => (await events(kube, namespace, 'RolloutHealthCheckMisconfigured'))[0],
      { timeoutMs: 30_000 },
    );
    assert.match(
      misconfigured.note ?? '',
      /RolloutHealthCheck \S+\/ingester-errors does not select StatefulSet ingester-zone-b \(spec\.selector\.matchLabels\); the rollout proceeds without this gate/,
    );
  });

  it('the bypass annotation lets one held StatefulSet start past a failing check, logged and recorded as an Event; the next zone is held again', async (t) => {
    const { namespace, kube, exporter, prometheus, monitor } = await setup(t);
    await createCheck(kube, healthCheck(namespace, prometheus.url));
    setZoneA(exporter, namespace, 0.5);
    await startRollout(kube, namespace);
    const operator = await startOperator(t, namespace);
    await waitZoneRolled(kube, namespace, 'a');
    const heldAt = (name: string) => async () => {
      const s = await groupStatus(kube, namespace);
      return s.waitingFor?.code === 'health-check-paused' && s.waitingFor.statefulSet === name ? s : undefined;
    };
    await waitFor('zone b held by the gate', heldAt('ingester-zone-b'), { timeoutMs: 60_000 });
    const until = new Date(Date.now() + 10 * 60_000).toISOString().replace(/\.\d+Z$/, 'Z');
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', {
      metadata: { annotations: { 'stateward.dev/rollout-health-check-bypass-until': until } },
    });
    await waitZoneRolled(kube, namespace, 'b');
    const bypassed = await waitFor(
      'a RolloutHealthCheckBypassed Event',
      async () => (await events(kube, namespace, 'RolloutHealthCheckBypassed'))[0],
      { timeoutMs: 30_000 },
    );
    assert.equal(bypassed.regarding?.name, 'ingester-zone-b');
    assert.equal(
      bypassed.note,
      `StatefulSet ingester-zone-b starts rolling past health check ${CHECK}: bypassed by annotation until ${until}`,
    );
    assert.ok(operator.logs.includes('bypassed by annotation'), 'the bypass was not logged');
    // Zone a's ratio is still high: the bypass was for zone b only, zone c is held.
    await waitFor('zone c held by the gate', heldAt('ingester-zone-c'), { timeoutMs: 60_000 });
    assert.deepEqual(
      monitor.transitions.filter((tr) => zoneOf(tr) === 'c'),
      [],
    );
    setZoneA(exporter, namespace, 0);
    await rolledOutZoneByZone(kube, namespace, monitor);
  });

  it('basic auth from a Secret: every query carries it through the gateway, and the password never reaches the log', async (t) => {
    const { namespace, kube, prometheus, monitor } = await setup(t);
    const USER = 'rollouts';
    const PASSWORD = 'b4s1c-p4ss-63e2';
    const gateway = await PrometheusGateway.start(prometheus.url, {
      require: { authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}` },
    });
    t.after(() => gateway.close());
    await kube.create(resources.secrets, {
      metadata: { name: 'query-basic-auth', namespace },
      stringData: { username: USER, password: PASSWORD },
    });
    const check = healthCheck(namespace, gateway.url);
    check.spec = {
      ...check.spec,
      basicAuth: {
        username: { name: 'query-basic-auth', key: 'username' },
        password: { name: 'query-basic-auth', key: 'password' },
      },
    };
    await createCheck(kube, check);
    await startRollout(kube, namespace);
    const operator = await startOperator(t, namespace);
    await rolledOut(kube, namespace, operator);
    assert.deepEqual(monitor.violations, []);
    const queries = gateway.requests.filter((r) => r.path.startsWith('/api/v1/query'));
    assert.equal(queries.length, 6, JSON.stringify(gateway.requests.map((r) => [r.path, r.admitted])));
    assert.ok(queries.every((r) => r.admitted));
    assert.ok(!operator.logs.includes(PASSWORD), 'the password reached the log');
  });
  it('the validating webhook, called by the apiserver: a check missing a placeholder is refused with every field error, a valid one is created', async (t) => {
    const applied = await kubectl(cluster, 'apply', '-f', crd);
    assert.ok(applied.ok, `cannot install the RolloutHealthCheck CRD: ${applied.out}`);
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const [port] = await freePorts(1);
    const operator = await OperatorProcess.start(cluster, namespace, [
      '-server-tls.enabled',
      `-server-tls.port=${port}`,
      '-server-tls.self-signed-cert.dns-name=localhost',
    ]);
    t.after(() => operator.stop());
    await operator.waitReady();
    await installLoopbackWebhook(t, kube, {
      name: `rollout-health-check-validation-${namespace}`,
      namespace,
      validating: true,
      webhooks: [
        loopbackWebhook({
          name: `rollout-health-check-validation-${namespace}.grafana.com`,
          namespace,
          port: port!,
          path: '/admission/rollout-health-check-validation',
          sideEffects: 'None',
          rules: [
            {
              apiGroups: ['rollout-operator.grafana.com'],
              apiVersions: ['v1'],
              operations: ['CREATE', 'UPDATE'],
              resources: ['rollouthealthchecks'],
              scope: 'Namespaced',
            },
          ],
        }),
      ],
    });
    // A query without ${targetMatchers} would judge every pod of the namespace, and a zero interval would never wait.
    const bad = healthCheck(namespace, 'http://prometheus.monitoring:9090', {
      query: `max(max_over_time(${METRIC}[\${range}]))`,
    });
    bad.spec = { ...bad.spec, evaluationInterval: '0s' };
    const refusal = await waitFor(
      'the webhook to answer',
      async () => {
        try {
          await kube.create(healthCheckResource, bad);
          return 'created';
        } catch (error) {
          const message = (error as Error).message;
          // Until the apiserver reaches the webhook it refuses for that reason instead: wait past it.
          return /failed calling webhook/.test(message) ? undefined : message;
        }
      },
      { timeoutMs: 30_000 },
    );
    assert.match(refusal, /admission webhook "rollout-health-check-validation-\S+" denied the request/);
    assert.match(refusal, /\$\{targetMatchers\}/);
    assert.match(refusal, /evaluationInterval/);
    await kube.create(healthCheckResource, healthCheck(namespace, 'http://prometheus.monitoring:9090'));
  });
});
