// Drop-in check: a grafana/rollout-operator v0.39 user's manifests
// (fixtures/rollout-operator.yaml, written from the reference: its flags,
// Role verbs, Secret name, Service 443 → 8443, webhook paths and labels) and
// StatefulSets (keys where v0.39's README puts them) run Stateward with only
// the image changed. The operator process runs here,
// authenticated as that ServiceAccount with only that RBAC; the webhook
// configuration keeps its path and labels but is pointed at this machine
// (a Service cannot route to a local process).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { zpdbResource } from '../../src/drain/zpdb/zpdbresource.ts';
import { resources, type KubeObject, type Pod, type Secret } from '../../src/runtime/kube/types.ts';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { evict } from '../support/evictions.ts';
import { kubectl } from '../support/kubectl.ts';
import { deleteClusterScoped, kubectlApply, type Manifest } from '../support/manifests.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { serveNamespacePods } from '../support/pod-endpoints.ts';
import {
  changeTemplate,
  createGroup,
  testClient,
  waitGroupSettled,
  waitRevisionsPending,
  waitRolledOut,
} from '../support/rollout-group.ts';

const exec = promisify(execFile);
const cluster = testCluster();
const FIXTURE = fileURLToPath(new URL('./fixtures/rollout-operator.yaml', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/stateward.ts', import.meta.url));
const CRDS = fileURLToPath(new URL('../../deploy/crds/', import.meta.url));

type Deployment = Manifest & {
  spec: {
    template: {
      spec: {
        serviceAccountName: string;
        containers: { args: string[]; ports: { name: string; containerPort: number }[] }[];
      };
    };
  };
};
type Service = Manifest & { spec: { ports: { port: number; targetPort: number }[] } };
type WebhookConfiguration = Manifest & {
  webhooks: { clientConfig: { service?: { path?: string; port?: number }; url?: string; caBundle?: string } }[];
};

/** A flag's default as `stateward -help` prints it (Go flag style). */
async function flagDefault(name: string): Promise<string | undefined> {
  const help = await exec(process.execPath, [BIN, '-help']).catch((error: { stdout: string; stderr: string }) => error);
  const text = `${help.stdout}${help.stderr}`;
  const at = text.indexOf(`  -${name} `);
  return at < 0 ? undefined : /\(default "?([^")]*)"?\)/.exec(text.slice(at).split('\n  -')[0]!)?.[1];
}

describe('drop-in for grafana/rollout-operator', { timeout: 600_000 }, () => {
  it("a rollout-operator v0.39 user's manifests run Stateward unchanged: a rollout, denied downscales, a zone-aware budget", async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const docs = parseAllDocuments((await readFile(FIXTURE, 'utf8')).replaceAll('NAMESPACE', namespace)).map(
      (d) => d.toJS() as Manifest,
    );
    const deployment = docs.find((d): d is Deployment => d.kind === 'Deployment')!;
    const service = docs.find((d): d is Service => d.kind === 'Service')!;
    const container = deployment.spec.template.spec.containers[0]!;

    // The ports line up the way rollout-operator's do, with Stateward's defaults.
    assert.deepEqual(
      service.spec.ports.map((p) => [p.port, p.targetPort]),
      [[443, 8443]],
    );
    assert.equal(await flagDefault('server-tls.port'), '8443', 'the Service targets the default HTTPS port');
    assert.equal(await flagDefault('server.port'), '8001', 'the readiness probe targets the default HTTP port');
    assert.equal(
      await flagDefault('server-tls.self-signed-cert.secret-name'),
      'rollout-operator-self-signed-certificate',
    );

    const [webhookPort, podPort] = (await freePorts(2)) as [number, number];
    // Their StatefulSets, with the pod-template `name` label rollout-operator needs.
    await createGroup(kube, namespace, {
      a: { podLabels: { name: 'ingester-zone-a' } },
      b: { podLabels: { name: 'ingester-zone-b' } },
      c: { podLabels: { name: 'ingester-zone-c' } },
    });
    // Zones b and c set up for downscales as v0.39's README says (#463):
    // min-time is an annotation now, no longer a label. Before their webhook
    // configurations exist: updates of StatefulSets go through them.
    for (const zone of ['b', 'c'])
      await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
        metadata: {
          labels: { 'grafana.com/prepare-downscale': 'true' },
          annotations: {
            'grafana.com/min-time-between-zones-downscale': '12h',
            'grafana.com/prepare-downscale-http-path': '/ingester/prepare-shutdown',
            'grafana.com/prepare-downscale-http-port': String(podPort),
          },
        },
      });
    const installed = docs
      .filter((d) => d.kind !== 'Deployment' && d.kind !== 'Service')
      .map((d) => {
        if (d.kind !== 'ValidatingWebhookConfiguration' && d.kind !== 'MutatingWebhookConfiguration') return d;
        const config = structuredClone(d) as WebhookConfiguration;
        for (const w of config.webhooks)
          w.clientConfig = { url: `https://localhost:${webhookPort}${w.clientConfig.service?.path ?? ''}` };
        return config;
      });
    t.after(() => deleteClusterScoped(cluster.kubeconfigPath, installed));
    await kubectlApply(cluster.kubeconfigPath, installed);
    // Stateward's CRDs: rollout-operator's schemas plus one optional field
    // (spec.unhealthyPodEvictionPolicy), a superset their objects apply to unchanged.
    const crds = await kubectl(cluster, 'apply', '-k', CRDS);
    assert.ok(crds.ok, crds.out);
    assert.ok(
      (
        await kubectl(
          cluster,
          'wait',
          '--for=condition=Established',
          '--timeout=30s',
          'crd/zoneawarepoddisruptionbudgets.rollout-operator.grafana.com',
        )
      ).ok,
    );

    await waitGroupSettled(kube, namespace, 60_000);

    const kubeconfig = await cluster.serviceAccountKubeconfig(
      namespace,
      deployment.spec.template.spec.serviceAccountName,
    );
    await waitFor(
      'their RBAC in effect',
      async () =>
        (
          await exec('kubectl', ['--kubeconfig', kubeconfig, 'auth', 'can-i', 'delete', 'pods', '-n', namespace]).catch(
            () => ({ stdout: 'no' }),
          )
        ).stdout.trim() === 'yes',
      { timeoutMs: 30_000 },
    );
    // Their flags, as written; only where to listen differs on this machine.
    const op = await OperatorProcess.start(
      cluster,
      namespace,
      [...container.args, `-server-tls.port=${webhookPort}`, '-server-tls.self-signed-cert.dns-name=localhost'],
      { kubeconfig },
    );
    t.after(() => op.stop());
    // Leases (budget ledgers) and Events are not in their Role: it must start anyway.
    await op.waitReady();

    // Their certificate Secret (keys ca, cert, key) and CA injection by label.
    const secret = await waitFor(
      'the certificate Secret',
      () =>
        kube
          .get<Secret>(resources.secrets, { namespace, name: 'rollout-operator-self-signed-certificate' })
          .catch(() => undefined),
      { timeoutMs: 30_000 },
    );
    assert.deepEqual(Object.keys(secret.data ?? {}).sort(), ['ca', 'cert', 'key']);
    for (const [type, name] of [
      [resources.mutatingWebhookConfigurations, `prepare-downscale-${namespace}`],
      [resources.validatingWebhookConfigurations, `no-downscale-${namespace}`],
      [resources.validatingWebhookConfigurations, `pod-eviction-${namespace}`],
    ] as const) {
      await waitFor(
        `the CA injected into ${name}`,
        async () =>
          (await kube.get<WebhookConfiguration>(type, { name })).webhooks.every((w) => w.clientConfig.caBundle),
        { timeoutMs: 30_000 },
      );
    }

    for (const zone of ['a', 'b', 'c']) await changeTemplate(kube, namespace, zone, '2');
    await waitRevisionsPending(kube, namespace);
    await waitRolledOut(kube, namespace);

    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-a' }, 'merge', {
      metadata: { labels: { 'grafana.com/no-downscale': 'true' } },
    });
    const denied = await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=1');
    assert.equal(denied.ok, false);
    assert.match(
      denied.out,
      new RegExp(
        `downscale of statefulsets/ingester-zone-a in ${namespace} from 3 to 1 replicas is not allowed because it has the label 'grafana.com/no-downscale=true'`,
      ),
    );
    assert.ok(
      ((await op.metric(`rollout_operator_group_reconciles_total{rollout_group="ingester"}`)) ?? 0) > 0,
      "rollout-operator's metric names",
    );
    // A downscale of zone b: its leaving pod prepared at the path v0.39 calls
    // (#468: a path with a leading "/" is not doubled). Zone c must then wait
    // the min-time zone b's annotation sets, refused in v0.39's words.
    const endpoints = await serveNamespacePods(t, kube, namespace, podPort);
    const scaled = await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=2');
    assert.ok(scaled.ok, scaled.out);
    assert.deepEqual(
      endpoints.calls.map((c) => `${c.method} ${c.pod} ${c.path}`),
      ['POST ingester-zone-b-2 /ingester/prepare-shutdown'],
    );
    const held = await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-c', '--replicas=2');
    assert.equal(held.ok, false, held.out);
    assert.match(
      held.out,
      new RegExp(
        `downscale of statefulsets/ingester-zone-c in ${namespace} from 3 to 2 replicas is not allowed because statefulset ingester-zone-b was downscaled at .* UTC and is configured to wait 12h0m0s between zone downscales`,
      ),
    );
    assert.equal(endpoints.calls.length, 1, 'no pod of zone c was called');
    // Their zone-aware budget holds, its ledger kept in the process (their Role has no Leases).
    await waitGroupSettled(kube, namespace, 60_000);
    await waitFor(
      'the pod zone b left gone',
      async () =>
        !(await kube.list<Pod>(resources.pods, { namespace })).items.some(
          (p) => p.metadata?.name === 'ingester-zone-b-2',
        ),
      { timeoutMs: 30_000 },
    );
    await kube.create(zpdbResource, {
      apiVersion: 'rollout-operator.grafana.com/v1',
      kind: 'ZoneAwarePodDisruptionBudget',
      metadata: { name: 'ingester', namespace },
      spec: { maxUnavailable: 1, selector: { matchLabels: { 'rollout-group': 'ingester' } } },
    } as KubeObject);
    await waitFor(
      'the budget cached',
      async () =>
        ((await op.metric('rollout_operator_zpdb_configurations_observed_total{result="updated"}')) ?? 0) >= 1,
      { timeoutMs: 30_000 },
    );
    assert.equal((await evict(kube, namespace, 'ingester-zone-b-0')).code, 201);
    const second = await evict(kube, namespace, 'ingester-zone-c-0');
    assert.equal(second.code, 429, 'a second zone refused');
    assert.match(second.message, /1 pod (not ready|unknown) in ingester-zone-b/);
    assert.equal(op.logs.match(/ledgers are kept in this process/g)?.length, 1);

    // What their Role lacks is said once, with the permission to grant, and is no error.
    assert.equal(op.logs.match(/not permitted to list this resource \(RBAC\).*resource=leases/g)?.length, 1);
    assert.equal(op.logs.match(/not permitted to write Events in this namespace/g)?.length, 1);
    assert.doesNotMatch(op.logs, /level=error/);
  });
});
