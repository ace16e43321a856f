// Reloader's drop-in mode on the real control plane: alerts after a restart
// reach a local receiver in the sink's format; -webhook-url calls the URL
// instead of restarting, is retried until it answers 2xx and only then
// records the change (a new operator process calls nothing more); and
// Reloader's filter flags (reload-on-create, resources-to-ignore,
// ignored-workload-types) act, with Reloader's Event reasons.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type ConfigMap, type Event, type KubeObject, type Secret } from '../../src/runtime/kube/types.ts';
import type { CronJob } from '../../src/restarts/jobrestarts.ts';
import { CRONJOBS, JOBS } from '../../src/restarts/workloadkinds.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { testClient } from '../support/rollout-group.ts';

const cluster = testCluster();
const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
const TRIGGER = 'com.xing.deployment-restart.timestamp';
const AUTO = { 'reloader.stakater.com/auto': 'true' };
const FLAGS = ['-config-restarts.enabled', '-restart-grace-period=0'];

type Deployment = KubeObject & { spec?: { template?: { metadata?: { annotations?: Record<string, string> } } } };

/** A Deployment reading every key of the configs `envFrom` names, opted in with Reloader's auto annotation. */
function deployment(namespace: string, name: string, envFrom: Record<string, unknown>[]): Deployment {
  return {
    metadata: { name, namespace, annotations: AUTO },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'app', image: 'example.invalid/app:1', envFrom }] },
      },
    },
  } as Deployment;
}

const configRef = (name: string, optional = false) => ({ configMapRef: { name, ...(optional ? { optional } : {}) } });

async function start(t: TestContext, namespace: string, flags: string[]): Promise<OperatorProcess> {
  const op = await OperatorProcess.start(cluster, namespace, [...FLAGS, ...flags]);
  t.after(() => op.stop());
  await op.waitReady();
  return op;
}

/** The Deployment once `test` holds for it. */
function until(
  kube: KubeClient,
  namespace: string,
  name: string,
  what: string,
  test: (d: Deployment) => boolean,
): Promise<Deployment> {
  return waitFor(
    what,
    async () => {
      const d = await kube.get<Deployment>(resources.deployments, { namespace, name }).catch(() => undefined);
      return d && test(d) ? d : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 100 },
  );
}

const applied = (d: Deployment) => d.metadata?.annotations?.[APPLIED];
const trigger = (d: Deployment) => d.spec?.template?.metadata?.annotations?.[TRIGGER];

const change = (kube: KubeClient, namespace: string, name: string, level: string) =>
  kube.patch(resources.configMaps, { namespace, name }, 'merge', { data: { level } });

interface Received {
  contentType: string;
  body: string;
  /** What the answer was. */
  status: number;
  /** Whatever the receiver's `onRequest` returned, read before it answered. */
  seen: unknown;
}

/**
 * A local HTTP receiver. `statuses` are the answers in turn (the last one
 * repeats); `onRequest` runs before each answer (to look at the cluster at
 * that moment).
 */
async function receiver(
  t: TestContext,
  statuses: number[],
  onRequest: () => Promise<unknown> = () => Promise.resolve(undefined),
): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (c: Buffer) => chunks.push(c));
    request.on('end', () => {
      void (async () => {
        const seen = await onRequest().catch((error: unknown) => error);
        const status = statuses[Math.min(received.length, statuses.length - 1)]!;
        received.push({
          contentType: request.headers['content-type'] ?? '',
          body: Buffer.concat(chunks).toString('utf8'),
          status,
          seen,
        });
        response.writeHead(status).end(status < 300 ? 'ok' : 'not now');
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  server.unref();
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook/secret-token`, received };
}

async function untilReceived(received: Received[], count: number, what: string): Promise<void> {
  await waitFor(what, () => Promise.resolve(received.length >= count || undefined), {
    timeoutMs: 20_000,
    intervalMs: 50,
  });
}

describe("config restarts as Reloader's drop-in", () => {
  it('alerts a Slack webhook once after a restart, naming the workload and the config', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const { url, received } = await receiver(t, [200]);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'app-config', namespace },
      data: { level: 'info' },
    });
    await kube.create(resources.deployments, deployment(namespace, 'api', [configRef('app-config')]));
    await start(t, namespace, ['-alert-on-reload=true', '-alert-sink=slack', `-alert-webhook-url=${url}`]);
    await until(kube, namespace, 'api', 'the first record', (d) => applied(d) !== undefined);
    assert.equal(received.length, 0, 'recording a first sighting alerts nothing');

    await change(kube, namespace, 'app-config', 'debug');
    await until(kube, namespace, 'api', 'the restart', (d) => trigger(d) !== undefined);
    await untilReceived(received, 1, 'the alert');
    assert.equal(received.length, 1);
    const alert = received[0]!;
    assert.match(alert.contentType, /^application\/json/);
    const payload = JSON.parse(alert.body) as { attachments?: { text?: string; fallback?: string }[] };
    assert.equal(payload.attachments?.length, 1, 'a Slack message with one attachment');
    const text = JSON.stringify(payload);
    assert.ok(text.includes('api') && text.includes(namespace) && text.includes('app-config'), text);
  });

  it('-webhook-url: calls the URL instead of restarting, retries until 2xx, records only then, and once', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    // Each call notes the record as it is while the receiver answers: none may show the change before a 2xx.
    const { url, received } = await receiver(t, [500, 200], async () =>
      applied(await kube.get<Deployment>(resources.deployments, { namespace, name: 'api' })),
    );
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'app-config', namespace },
      data: { level: 'info' },
    });
    await kube.create(resources.deployments, deployment(namespace, 'api', [configRef('app-config')]));
    let op = await start(t, namespace, [`-webhook-url=${url}`]);
    const first = applied(await until(kube, namespace, 'api', 'the first record', (d) => applied(d) !== undefined));
    assert.equal(received.length, 0, 'recording a first sighting calls nothing');

    await change(kube, namespace, 'app-config', 'debug');
    const recorded = await until(kube, namespace, 'api', 'the change recorded', (d) => applied(d) !== first);
    assert.equal(received.length, 2, 'one refused call, then one accepted');
    assert.deepEqual(
      received.map((r) => [r.status, r.seen]),
      [
        [500, first],
        [200, first],
      ],
      'nothing recorded before the URL accepted',
    );
    assert.equal(trigger(recorded), undefined, 'the pod template is not changed');
    const body = JSON.parse(received[1]!.body) as { webhook?: string; name?: string; configs?: string[] };
    assert.equal(body.name, 'api');
    assert.deepEqual(body.configs, [`configmap/${namespace}/app-config`]);

    // A new process finds the change applied: no call.
    await op.stop();
    op = await start(t, namespace, [`-webhook-url=${url}`]);
    await waitFor(
      'the new process to look at the workload',
      async () =>
        ((await op.metric('deployment_restart_controller_deployments_total')) ?? 0) >= 1 &&
        (await op.metric('deployment_restart_controller_changes_waiting_total')) === 0,
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    assert.equal(received.length, 2, 'the recorded change is not sent again');
    assert.equal(applied(await until(kube, namespace, 'api', 'unchanged', () => true)), applied(recorded));
  });

  it('Reloader flags: reload-on-create, resources-to-ignore, ignored-workload-types; Reloaded Events', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'shared', namespace },
      data: { level: 'a' },
    });
    await kube.create<Secret>(resources.secrets, { metadata: { name: 'creds', namespace }, stringData: { p: '1' } });
    // Waits for a config that does not exist yet.
    await kube.create(resources.deployments, deployment(namespace, 'waiter', [configRef('late', true)]));
    await kube.create(
      resources.deployments,
      deployment(namespace, 'both', [configRef('shared'), { secretRef: { name: 'creds' } }]),
    );
    await kube.create<CronJob>(CRONJOBS, {
      metadata: { name: 'nightly', namespace, annotations: AUTO },
      spec: {
        schedule: '0 0 1 1 *',
        suspend: true,
        jobTemplate: {
          spec: {
            template: {
              spec: {
                restartPolicy: 'Never',
                containers: [{ name: 'job', image: 'example.invalid/job:1', envFrom: [configRef('shared')] }],
              },
            },
          },
        },
      },
    } as CronJob);
    await start(t, namespace, [
      '--reload-on-create=true',
      '--resources-to-ignore=secrets',
      '--ignored-workload-types=cronjobs',
    ]);
    const waiting = await until(kube, namespace, 'waiter', 'the absence recorded', (d) => applied(d) !== undefined);
    assert.equal(applied(waiting), `{"configmap/${namespace}/late":"missing"}`);
    const both = await until(kube, namespace, 'both', 'the first record', (d) => applied(d) !== undefined);
    assert.deepEqual(Object.keys(JSON.parse(applied(both)!) as object), [`configmap/${namespace}/shared`]);

    // Ignored: a Secret change restarts nothing (and the Secret is not even in the record).
    await kube.patch(resources.secrets, { namespace, name: 'creds' }, 'merge', { stringData: { p: '2' } });
    await kube.create<ConfigMap>(resources.configMaps, { metadata: { name: 'late', namespace }, data: { x: '1' } });
    await until(kube, namespace, 'waiter', 'the restart on create', (d) => trigger(d) !== undefined);
    const reloaded = await waitFor(
      "Reloader's Reloaded Event",
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find(
          (e) => e.reason === 'Reloaded' && e.regarding?.name === 'waiter',
        ),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    assert.equal(
      reloaded.note,
      `Changes detected in 'late' of type 'CONFIGMAP' in namespace '${namespace}', Updated 'waiter' of type 'Deployment' in namespace '${namespace}'`,
    );
    assert.equal(trigger(await until(kube, namespace, 'both', 'still', () => true)), undefined, 'secret ignored');

    // The ConfigMap both use: the Deployment restarts, the ignored CronJob is left alone.
    await change(kube, namespace, 'shared', 'b');
    await until(kube, namespace, 'both', 'the restart', (d) => trigger(d) !== undefined);
    const cronJob = await kube.get<CronJob>(CRONJOBS, { namespace, name: 'nightly' });
    assert.equal(cronJob.metadata?.annotations?.[APPLIED], undefined, 'the CronJob is not even recorded');
    assert.deepEqual((await kube.list(JOBS, { namespace })).items, [], 'no Job started');
    const events = (await kube.list<Event>(resources.events, { namespace })).items;
    assert.equal(
      events.filter((e) => e.reason === 'ConfigChanged').length,
      0,
      "Reloader's reasons replace Stateward's",
    );
  });
});
