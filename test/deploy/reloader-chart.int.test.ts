// Stateward in Reloader's own install, with only the image swapped (issue 37
// item 6): stakater/Reloader's Helm chart 2.2.16 (app v1.4.21) rendered at
// its default values (test/fixtures/reloader-chart/default.yaml: ServiceAccount,
// ClusterRole, Role, bindings, Deployment), applied on the real node with the
// image and node placement changed, plus the install doc's one extra step
// (the checksum key Secret). The chart itself is not fetched: the Go module
// proxy refuses github.com/stakater/Reloader ("This module version is not
// available"), and its chart repository and OCI registry are not package
// registries; the fixture is its rendering, byte for byte.
//
// Asserted: Ready by the chart's own probes (/metrics, /live on 9090); a
// ConfigMap change restarts a Deployment opted in with Reloader's
// annotation; a core/v1 `Reloaded` Event is written on it; and the apiserver's
// audit log shows no request of the operator's ServiceAccount refused, not
// even once (workloads are listed, never watched; no pod read; no Secret or
// events.k8s.io write).
//
// Its own cluster with the real node (one machine has one); needs root.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type ConfigMap, type KubeObject, type Pod } from '../../src/runtime/kube/types.ts';
import { CORE_EVENTS, type CoreEventJson } from '../../src/runtime/events/coreevents.ts';
import { keySecretCommand } from '../../src/restarts/reloaderinstall.ts';
import { LocalCluster } from '../cluster/cluster.ts';
import { ensureStatewardImage, type BuiltImage } from '../cluster/image.ts';
import { waitFor } from '../cluster/probe.ts';
import { REAL_NODE } from '../cluster/realnode-host.ts';
import { AUDIT_POLICY, refusedFromAudit } from '../support/refusals.ts';
import { isReady } from '../support/rollout-group.ts';

const exec = promisify(execFile);
const FIXTURE = new URL('../fixtures/reloader-chart/default.yaml', import.meta.url);
const NAMESPACE = 'reloader'; // as rendered
const SERVICE_ACCOUNT = `system:serviceaccount:${NAMESPACE}:reloader-reloader`;
const KEY_SECRET = 'stateward-config-checksum-key';
const TIMESTAMP = 'com.xing.deployment-restart.timestamp';
const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
/** What the test reads of a Deployment. */
type Deployment = KubeObject & {
  metadata?: { generation?: number };
  spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
};
const log = (line: string) => process.stderr.write(`# [reloader chart] ${line}\n`);

async function run(file: string, args: string[]): Promise<{ ok: boolean; out: string; stdout: string }> {
  try {
    const { stdout, stderr } = await exec(file, args, { maxBuffer: 16 * 1024 * 1024, shell: false });
    return { ok: true, out: stdout + stderr, stdout };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}`, stdout: e.stdout ?? '' };
  }
}

interface Manifest {
  kind: string;
  spec?: { template: { spec: Record<string, unknown> & { containers: Record<string, unknown>[] } } };
}

/** The chart's rendering with only the image and the node placement changed. */
async function swapped(image: string): Promise<string> {
  const manifests = parseAllDocuments(await readFile(FIXTURE, 'utf8'))
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
  const deployment = manifests.find((m) => m.kind === 'Deployment');
  assert.ok(deployment?.spec, 'the chart renders a Deployment');
  const pod = deployment.spec.template.spec;
  pod.containers[0]!['image'] = image;
  pod.containers[0]!['imagePullPolicy'] = 'Never';
  pod['nodeSelector'] = REAL_NODE.labels;
  pod['tolerations'] = [{ key: REAL_NODE.taint.key, operator: 'Exists', effect: REAL_NODE.taint.effect }];
  return manifests.map((m) => stringify(m)).join('---\n');
}

describe(`Reloader's chart (default values) with Stateward's image, on a real node`, { timeout: 60 * 60_000 }, () => {
  let cluster: LocalCluster | undefined;
  let image: BuiltImage;
  let scratch: string;

  before(
    async () => {
      image = await ensureStatewardImage({ log });
      scratch = await mkdtemp(join(tmpdir(), 'stateward-reloader-chart-'));
      await writeFile(join(scratch, 'audit-policy.yaml'), AUDIT_POLICY);
      cluster = await LocalCluster.start({
        name: `reloader-chart-${process.pid}`,
        nodesPerZone: 1,
        realNode: true,
        realNodeImages: [image.archive],
        log,
        extraArgs: {
          apiserver: [
            `--audit-policy-file=${join(scratch, 'audit-policy.yaml')}`,
            `--audit-log-path=${join(scratch, 'audit.log')}`,
            '--audit-log-format=json',
            '--audit-log-maxsize=0',
          ],
        },
      });
    },
    { timeout: 40 * 60_000 },
  );

  after(async () => {
    await cluster?.teardown();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('restarts an opted-in Deployment on a ConfigMap change, writes Reloaded, and is refused nothing', async () => {
    assert.ok(cluster);
    const kubeconfig = cluster.kubeconfigPath;
    const kubectl = (...args: string[]) => run('kubectl', ['--kubeconfig', kubeconfig, ...args]);
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });

    // The install doc's one extra step, its very command (the key from openssl).
    const created = await kubectl('create', 'namespace', NAMESPACE);
    assert.ok(created.ok, created.out);
    const command = keySecretCommand(NAMESPACE, KEY_SECRET);
    const keyed = await run('sh', ['-c', command.replace(/^kubectl /, `kubectl --kubeconfig '${kubeconfig}' `)]);
    assert.ok(keyed.ok, keyed.out);

    const file = join(scratch, 'reloader.yaml');
    await writeFile(file, await swapped(image.name));
    const applied = await kubectl('apply', '-f', file);
    assert.ok(applied.ok, applied.out);
    const pod = await waitFor(
      'the operator pod Ready by the chart’s readiness probe (/metrics on 9090)',
      async () => {
        const pods = await kube.list<Pod>(resources.pods, {
          namespace: NAMESPACE,
          labelSelector: 'app=reloader-reloader',
        });
        return pods.items.find(isReady);
      },
      { timeoutMs: 180_000, intervalMs: 1_000 },
    );
    assert.equal(pod.spec?.nodeName, REAL_NODE.name);

    // An app opted in as Reloader users opt in, on the kwok nodes.
    const app = 'team';
    assert.ok((await kubectl('create', 'namespace', app)).ok);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'app-config', namespace: app },
      data: { level: 'info' },
    });
    await kube.create<KubeObject & { spec: unknown }>(resources.deployments, {
      metadata: { name: 'web', namespace: app, annotations: { 'reloader.stakater.com/auto': 'true' } },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            containers: [
              { name: 'web', image: 'registry.invalid/web:1', envFrom: [{ configMapRef: { name: 'app-config' } }] },
            ],
          },
        },
      },
    });
    // Seen by a poll (every 10 s) and its configs recorded: the baseline a change is measured against.
    await waitFor(
      'the Deployment’s configs recorded',
      async () => {
        const d = await kube.get<Deployment>(resources.deployments, { namespace: app, name: 'web' });
        return d.metadata?.annotations?.[APPLIED]?.includes('app-config') ? d : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    const changedAt = Date.now();
    await kube.patch(resources.configMaps, { namespace: app, name: 'app-config' }, 'merge', {
      data: { level: 'debug' },
    });
    const restarted = await waitFor(
      'the Deployment restarted (its pod template changed)',
      async () => {
        const d = await kube.get<Deployment>(resources.deployments, { namespace: app, name: 'web' });
        return d.spec?.template?.metadata?.annotations?.[TIMESTAMP] !== undefined ? d : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    log(`restarted ${Date.now() - changedAt} ms after the change (grace period 5 s)`);
    assert.ok(restarted.metadata?.generation && restarted.metadata.generation >= 2);

    const reloaded = await waitFor(
      'a core/v1 Reloaded Event on the Deployment',
      async () => {
        const events = await kube.list<CoreEventJson>(CORE_EVENTS, { namespace: app });
        return events.items.find((e) => e.reason === 'Reloaded' && e.involvedObject.name === 'web');
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    assert.equal(reloaded.involvedObject.kind, 'Deployment');
    assert.equal(reloaded.type, 'Normal');

    // Still Ready, never restarted: the liveness probe (/live) held.
    const still = await kube.get<Pod>(resources.pods, { namespace: NAMESPACE, name: pod.metadata!.name! });
    assert.ok(isReady(still));
    assert.equal(still.status?.containerStatuses?.[0]?.restartCount, 0, 'no restart');

    // Not one request refused (the apiserver's own record of the ServiceAccount's requests).
    const refused = await refusedFromAudit(join(scratch, 'audit.log'), SERVICE_ACCOUNT);
    const requests = (await readFile(join(scratch, 'audit.log'), 'utf8'))
      .split('\n')
      .filter((l) => l.includes(SERVICE_ACCOUNT))
      .map((l) => JSON.parse(l) as { verb?: string; user?: { username?: string }; objectRef?: { resource?: string } })
      .filter((r) => r.user?.username === SERVICE_ACCOUNT);
    assert.ok(requests.length > 10, 'the audit log records the operator’s requests (else this proves nothing)');
    assert.deepEqual([...refused], [], 'no refused request');
    // Deployments listed again and again (polled), never watched.
    const onDeployments = (verb: string) =>
      requests.filter((r) => r.verb === verb && r.objectRef?.resource === 'deployments').length;
    assert.ok(onDeployments('list') >= 2, `Deployments listed ${onDeployments('list')} times`);
    assert.equal(onDeployments('watch'), 0);

    // The one line saying what runs in Reloader's install.
    const logs = await kubectl('-n', NAMESPACE, 'logs', pod.metadata!.name!);
    assert.ok(logs.ok, logs.out);
    assert.equal(logs.out.split('\n').filter((l) => l.includes("Reloader's install (")).length, 1, logs.out);
  });
});
