// Admission webhooks end to end: the real apiserver calls Stateward's HTTPS
// server on loopback, trusting the CA that Stateward itself injected, while
// the real kubectl scales and patches StatefulSets.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type ResourceType, type Secret, type StatefulSet } from '../../src/runtime/kube/types.ts';
import type { WebhookConfiguration } from '../../src/webhooks/cainjection.ts';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { kubectl as run } from '../support/kubectl.ts';
import { FAST_ELECTION, OperatorProcess } from '../support/operator-process.ts';
import { CA_INJECTION_LABELS, loopbackWebhook, servedFingerprint, storedFingerprint } from '../support/webhooks.ts';
import { testClient, zoneStatefulSet } from '../support/rollout-group.ts';

const cluster = testCluster();

const kubectl = (...args: string[]) => run(cluster, ...args);

async function startWithWebhooks(t: TestContext, namespace: string, extra: string[] = []) {
  const [port] = await freePorts(1);
  const operator = await OperatorProcess.start(cluster, namespace, [
    '-server-tls.enabled',
    `-server-tls.port=${port}`,
    '-server-tls.self-signed-cert.dns-name=localhost',
    ...extra,
  ]);
  t.after(() => operator.stop());
  await operator.waitReady();
  return { operator, port: port! };
}

async function noDownscaleWebhook(t: TestContext, namespace: string, port: number, rules?: object[]): Promise<string> {
  const kube = testClient(cluster);
  const name = `no-downscale-${namespace}`;
  await kube.create<WebhookConfiguration>(resources.validatingWebhookConfigurations, {
    metadata: { name, labels: CA_INJECTION_LABELS(namespace) },
    webhooks: [
      loopbackWebhook({
        name: `${name}.grafana.com`,
        namespace,
        port,
        path: '/admission/no-downscale',
        sideEffects: 'None',
        ...(rules ? { rules } : {}),
      }),
    ],
  });
  t.after(() => kube.delete(resources.validatingWebhookConfigurations, { name }).catch(() => undefined));
  return name;
}

async function caBundleOf(name: string): Promise<string | undefined> {
  const config = await testClient(cluster).get<WebhookConfiguration>(resources.validatingWebhookConfigurations, {
    name,
  });
  return config.webhooks?.[0]?.clientConfig?.caBundle;
}

/**
 * A server-side dry-run upscale of ingester-zone-a: it goes through the
 * webhook and changes nothing. A failed call's message goes into `failures`.
 */
async function callThroughWebhook(kube: KubeClient, namespace: string, failures: string[]): Promise<void> {
  try {
    await kube.patch(
      resources.statefulSets,
      { namespace, name: 'ingester-zone-a' },
      'merge',
      { spec: { replicas: 2 } },
      { dryRun: true },
    );
  } catch (error) {
    failures.push(error instanceof Error ? error.message : String(error));
  }
}

/** GETs of StatefulSets, Deployments and ReplicaSets the operator has made, from its API client metrics. */
async function apiGets(operator: OperatorProcess): Promise<number> {
  const metrics = (await operator.get('/metrics'))?.body ?? '';
  let total = 0;
  for (const line of metrics.split('\n')) {
    if (
      line.startsWith('rollout_operator_kubernetes_api_client_request_duration_seconds_count{') &&
      line.includes('method="GET"') &&
      /path="apps\/v1\/(statefulsets|deployments|replicasets) object"/.test(line)
    )
      total += Number(line.split(' ').pop());
  }
  return total;
}

describe('admission webhooks', () => {
  it('persists its self-signed CA in the rollout-operator Secret and injects it into labelled webhook configurations, again after a wipe', async (t) => {
    const namespace = await cluster.namespace(t);
    const { port } = await startWithWebhooks(t, namespace);
    const name = await noDownscaleWebhook(t, namespace, port);
    const kube = testClient(cluster);
    const secret = await waitFor(
      'the certificate Secret',
      () =>
        kube
          .get<Secret>(resources.secrets, { namespace, name: 'rollout-operator-self-signed-certificate' })
          .catch(() => undefined),
      { timeoutMs: 15_000 },
    );
    assert.deepEqual(Object.keys(secret.data ?? {}).sort(), ['ca', 'cert', 'key']);
    const ca = secret.data!['ca']!;
    const injected = await waitFor(
      'the CA in caBundle',
      async () => ((await caBundleOf(name)) === ca ? ca : undefined),
      { timeoutMs: 15_000 },
    );
    assert.equal(Buffer.from(injected, 'base64').toString().includes('BEGIN CERTIFICATE'), true);
    await kube.patch(resources.validatingWebhookConfigurations, { name }, 'json', [
      { op: 'remove', path: '/webhooks/0/clientConfig/caBundle' },
    ]);
    await waitFor('the CA to reappear after a wipe', async () => (await caBundleOf(name)) === ca, {
      timeoutMs: 15_000,
    });
  });

  it('denies downscales of a labelled StatefulSet through kubectl scale, patch and dry-run, allows the rest', async (t) => {
    const namespace = await cluster.namespace(t);
    const { port } = await startWithWebhooks(t, namespace);
    const name = await noDownscaleWebhook(t, namespace, port);
    const kube = testClient(cluster);
    const labelled = zoneStatefulSet(namespace, 'a', { replicas: 2 });
    labelled.metadata!.labels!['grafana.com/no-downscale'] = 'true';
    await kube.create(resources.statefulSets, labelled);
    await kube.create(resources.statefulSets, zoneStatefulSet(namespace, 'b', { replicas: 2 }));
    await waitFor('CA injected', async () => Boolean(await caBundleOf(name)), { timeoutMs: 15_000 });
    const message = `downscale of statefulsets/ingester-zone-a in ${namespace} from 2 to 1 replicas is not allowed because it has the label 'grafana.com/no-downscale=true'`;

    const scaled = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=1');
    assert.equal(scaled.ok, false);
    assert.ok(scaled.out.includes(message), scaled.out);
    const patched = await kubectl(
      '-n',
      namespace,
      'patch',
      'statefulset',
      'ingester-zone-a',
      '--type=merge',
      '-p',
      '{"spec":{"replicas":1}}',
    );
    assert.equal(patched.ok, false);
    assert.ok(patched.out.includes(message), patched.out);
    const dryRun = await kubectl(
      '-n',
      namespace,
      'scale',
      'statefulset',
      'ingester-zone-a',
      '--replicas=1',
      '--dry-run=server',
    );
    assert.equal(dryRun.ok, false, 'dry-run downscales are denied too, as in rollout-operator');
    assert.ok(dryRun.out.includes(message), dryRun.out);

    assert.ok(
      (await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=3')).ok,
      'upscale allowed',
    );
    assert.ok(
      (await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=1')).ok,
      'unlabelled downscale allowed',
    );
    const a = await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' });
    assert.equal(a.spec?.replicas, 3);
  });

  it('denies every one of 200 concurrent /scale downscales of a labelled StatefulSet and Deployment through the apiserver, from its caches (rollout-operator allowed ~98 % at 200/s)', async (t) => {
    const namespace = await cluster.namespace(t);
    const { operator, port } = await startWithWebhooks(t, namespace);
    const name = await noDownscaleWebhook(t, namespace, port, [
      {
        apiGroups: ['apps'],
        apiVersions: ['v1'],
        operations: ['UPDATE'],
        resources: ['statefulsets', 'statefulsets/scale', 'deployments', 'deployments/scale'],
        scope: 'Namespaced',
      },
    ]);
    const kube = testClient(cluster);
    const protectedLabels = { 'grafana.com/no-downscale': 'true' };
    const set = zoneStatefulSet(namespace, 'a', { replicas: 10 });
    set.metadata!.labels = { ...set.metadata!.labels, ...protectedLabels };
    await kube.create(resources.statefulSets, set);
    const deployment = {
      metadata: { name: 'web', namespace, labels: protectedLabels },
      spec: {
        replicas: 10,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'web:1' }] } },
      },
    };
    await kube.create(resources.deployments, deployment);
    // An unlabelled control: its downscale must go through, or this test could not fail.
    await kube.create(resources.statefulSets, zoneStatefulSet(namespace, 'b', { replicas: 10 }));
    await waitFor('CA injected', async () => Boolean(await caBundleOf(name)), { timeoutMs: 15_000 });
    // The parents are in the operator's caches before the burst (as after any start).
    await waitFor('the parents cached', async () => (await operator.get('/ready'))?.status === 200, {
      timeoutMs: 15_000,
    });
    const apiCallsBefore = await apiGets(operator);

    const scaleDown = (type: ResourceType, target: string, replicas: number) =>
      kube.patch(type, { namespace, name: target, subresource: 'scale' }, 'merge', { spec: { replicas } }).then(
        () => 'allowed',
        (error: unknown) => String(error),
      );
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        i % 2 === 0
          ? scaleDown(resources.statefulSets, 'ingester-zone-a', 9 - (i % 5))
          : scaleDown(resources.deployments, 'web', 9 - (i % 5)),
      ),
    );
    const allowed = answers.filter((a) => a === 'allowed').length;
    assert.equal(
      allowed,
      0,
      `${allowed} of 200 protected downscales went through; answers: ${[...new Set(answers)].slice(0, 3).join(' | ')}`,
    );
    assert.ok(
      answers.every((a) => a.includes("because it has the label 'grafana.com/no-downscale=true'")),
      [...new Set(answers)].slice(0, 3).join(' | '),
    );
    assert.equal(
      (await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' })).spec?.replicas,
      10,
    );
    assert.equal((await kube.get<StatefulSet>(resources.deployments, { namespace, name: 'web' })).spec?.replicas, 10);
    assert.equal(await apiGets(operator), apiCallsBefore, 'no API read per /scale decision');
    assert.equal(await scaleDown(resources.statefulSets, 'ingester-zone-b', 9), 'allowed');
  });

  it("reports each webhook's failure policy as kube_validating_webhook_failure_policy", async (t) => {
    const namespace = await cluster.namespace(t);
    const { operator, port } = await startWithWebhooks(t, namespace);
    const name = await noDownscaleWebhook(t, namespace, port);
    const series = (policy: string, value: number) =>
      `kube_validating_webhook_failure_policy{type="ValidatingWebhook",webhook="${name}.grafana.com",policy="${policy}"} ${value}`;
    await waitFor(
      'the failure policy gauge',
      async () => (await operator.get('/metrics'))?.body.includes(series('Fail', 1)),
      { timeoutMs: 10_000 },
    );
    assert.ok((await operator.get('/metrics'))!.body.includes(series('Ignore', 0)));
    await testClient(cluster).delete(resources.validatingWebhookConfigurations, { name });
    await waitFor(
      'the series to go with the configuration',
      async () => !(await operator.get('/metrics'))?.body.includes(`webhook="${name}.grafana.com"`),
      { timeoutMs: 10_000 },
    );
  });

  it('issues a new certificate when its Secret is deleted, on both replicas, re-injects it, and never fails a call', async (t) => {
    // rollout-operator serves the vanished certificate until it expires and
    // the next process creates another; Stateward watches the Secret (names
    // only) and treats a delete as a renewal: new CA trusted beside the old,
    // then served, then trusted alone.
    const namespace = await cluster.namespace(t);
    const ports = (await freePorts(2)) as [number, number];
    const replicas = await Promise.all(
      ports.map(async (port) => {
        const operator = await OperatorProcess.start(cluster, namespace, [
          ...FAST_ELECTION,
          '-server-tls.enabled',
          `-server-tls.port=${port}`,
          '-server-tls.self-signed-cert.dns-name=localhost',
        ]);
        t.after(() => operator.stop());
        await operator.waitReady();
        return operator;
      }),
    );
    const name = await noDownscaleWebhook(t, namespace, ports[0]);
    const kube = testClient(cluster);
    await kube.create(resources.statefulSets, zoneStatefulSet(namespace, 'a', { replicas: 1 }));
    const secretName = 'rollout-operator-self-signed-certificate';
    const first = await waitFor(
      'the certificate',
      () => kube.get<Secret>(resources.secrets, { namespace, name: secretName }).catch(() => undefined),
      { timeoutMs: 15_000 },
    );
    await waitFor('CA injected', async () => (await caBundleOf(name)) === first.data!['ca'], { timeoutMs: 15_000 });
    for (const port of ports)
      assert.equal(await servedFingerprint('127.0.0.1', port), storedFingerprint(first.data!['cert']!));

    await kube.delete(resources.secrets, { namespace, name: secretName });
    let calls = 0;
    const failures: string[] = [];
    let done: { ca: string; cert: string } | undefined;
    const deadline = Date.now() + 60_000;
    while (!done && Date.now() < deadline) {
      await callThroughWebhook(kube, namespace, failures);
      calls++;
      const now = await kube.get<Secret>(resources.secrets, { namespace, name: secretName }).catch(() => undefined);
      const [ca, cert] = [now?.data?.['ca'], now?.data?.['cert']];
      if (!ca || !cert || ca === first.data!['ca']) continue;
      const served = await Promise.all(
        ports.map((port) => servedFingerprint('127.0.0.1', port).catch(() => undefined)),
      );
      if ((await caBundleOf(name)) === ca && served.every((s) => s === storedFingerprint(cert))) done = { ca, cert };
    }
    assert.ok(done, 'a new CA issued, injected alone, and its certificate served by both replicas within 60 s');
    assert.deepEqual(failures, [], `${failures.length} of ${calls} calls failed`);
    assert.ok(calls > 20, `${calls} calls`);
    for (const replica of replicas)
      assert.equal((await replica.get('/ready'))?.status, 200, 'both replicas still ready');
  });

  it('renews its certificate before expiry while the apiserver keeps calling, without a failed call', async (t) => {
    const namespace = await cluster.namespace(t);
    // 60 s validity: renewed at 40 s (a third before expiry), new CA trusted
    // alongside the old, new certificate served 10 s later.
    const { port } = await startWithWebhooks(t, namespace, ['-server-tls.self-signed-cert.expiration=60s']);
    const name = await noDownscaleWebhook(t, namespace, port);
    const kube = testClient(cluster);
    await kube.create(resources.statefulSets, zoneStatefulSet(namespace, 'a', { replicas: 1 }));
    const secretName = 'rollout-operator-self-signed-certificate';
    const first = await waitFor(
      'the certificate',
      () => kube.get<Secret>(resources.secrets, { namespace, name: secretName }).catch(() => undefined),
      { timeoutMs: 15_000 },
    );
    await waitFor('CA injected', async () => Boolean(await caBundleOf(name)), { timeoutMs: 15_000 });
    let calls = 0;
    const failures: string[] = [];
    const deadline = Date.now() + 58_000;
    let renewedAt: number | undefined;
    while (Date.now() < deadline) {
      await callThroughWebhook(kube, namespace, failures);
      calls++;
      if (!renewedAt) {
        const now = await kube.get<Secret>(resources.secrets, { namespace, name: secretName });
        if (now.data?.['cert'] !== first.data?.['cert']) renewedAt = Date.now();
      } else if (Date.now() - renewedAt > 15_000) {
        break; // the new certificate has been served for a while
      }
    }
    assert.ok(renewedAt, 'the certificate was renewed before it expired');
    assert.deepEqual(failures, [], `${failures.length} of ${calls} calls failed`);
    assert.ok(calls > 50);
  });
});
