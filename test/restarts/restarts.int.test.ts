// Config-change restarts end to end on the real control plane: opted-in
// workloads restart once per burst of real changes to the configs they
// use, never for a change that does not touch the content, and a rollout
// group's StatefulSets take the new template zone by zone.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { Informer } from '../../src/runtime/informer/informer.ts';
import {
  resources,
  type ConfigMap,
  type Event,
  type KubeObject,
  type Pod,
  type Secret,
  type StatefulSet,
} from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { xingLegacyChecksum } from '../../src/restarts/hash.ts';
import { DelayProxy } from '../support/delay-proxy.ts';
import { FAST_ELECTION } from '../support/operator-process.ts';
import {
  APPLIED,
  deployment as xingOrAnyDeployment,
  metricOf,
  settled,
  startConfigRestarts,
  TRIGGER,
  type Deployment,
} from '../support/config-restarts.ts';
import {
  createGroup,
  InvariantMonitor,
  isReady,
  testClient,
  waitGroupSettled,
  waitRolledOut,
  zoneStatefulSet,
  ZONES,
} from '../support/rollout-group.ts';

const cluster = testCluster();
/** A Deployment opted in with xing's annotation, `podSpec` over a one-container pod. */
const deployment = (namespace: string, name: string, podSpec: Record<string, unknown>): Deployment =>
  xingOrAnyDeployment(namespace, name, { 'com.xing.deployment-restart': 'enabled' }, podSpec);

const start = (t: TestContext, namespace: string, flags: string[] = [], env: NodeJS.ProcessEnv = {}) =>
  startConfigRestarts(t, cluster, namespace, flags, env);

const metric = metricOf;

async function get(kube: KubeClient, namespace: string, name: string): Promise<Deployment> {
  return kube.get<Deployment>(resources.deployments, { namespace, name });
}

describe('config-change restarts', () => {
  it('records on opt-in, restarts once per burst of content changes, never for metadata-only changes', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'app-config', namespace },
      data: { level: 'info' },
    });
    await kube.create(
      resources.deployments,
      deployment(namespace, 'app', {
        containers: [
          { name: 'app', image: 'example.invalid/app:1', envFrom: [{ configMapRef: { name: 'app-config' } }] },
        ],
      }),
    );
    const op = await start(t, namespace);
    const recorded = await waitFor(
      'checksums recorded',
      async () =>
        (await get(kube, namespace, 'app')).metadata?.annotations?.[APPLIED] ? get(kube, namespace, 'app') : undefined,
      { timeoutMs: 20_000 },
    );
    assert.match(
      recorded.metadata!.annotations![APPLIED]!,
      new RegExp(`^\\{"configmap/${namespace}/app-config":"v1:[0-9a-f]{64}"\\}$`),
    );
    assert.equal(recorded.spec?.template?.metadata?.annotations?.[TRIGGER], undefined, 'opting in restarts nothing');
    const skip = await waitFor(
      'the recorded-without-restart Event',
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find(
          (e) => e.reason === 'ConfigChecksumsRecorded',
        ),
      { timeoutMs: 10_000 },
    );
    assert.match(
      skip.note ?? '',
      new RegExp(
        `^recording checksums of .*app.*configmap/${namespace}/app-config.*\\(a first sighting restarts nothing\\)$`,
      ),
    );

    const change = (data: Record<string, string>, extra: Partial<ConfigMap> = {}) =>
      kube.patch(resources.configMaps, { namespace, name: 'app-config' }, 'merge', { data, ...extra });
    let versions = await metric(op, 'deployment_restart_controller_resource_versions_total');
    await change({ level: 'debug' });
    await waitFor(
      'one restart',
      async () => (await get(kube, namespace, 'app')).spec?.template?.metadata?.annotations?.[TRIGGER],
      { timeoutMs: 20_000 },
    );
    await settled(op, versions);
    assert.equal(await metric(op, 'deployment_restart_controller_deployment_restarts_total'), 1);

    // A label-only change moves the resourceVersion, not the content.
    versions = await metric(op, 'deployment_restart_controller_resource_versions_total');
    await kube.patch(resources.configMaps, { namespace, name: 'app-config' }, 'merge', {
      metadata: { labels: { team: 'a' } },
    });
    await settled(op, versions);
    assert.equal(
      await metric(op, 'deployment_restart_controller_deployment_restarts_total'),
      1,
      'no restart for a label change',
    );

    // Two changes within the grace period: one restart.
    versions = await metric(op, 'deployment_restart_controller_resource_versions_total');
    await change({ level: 'warn' });
    await change({ level: 'error' });
    await waitFor(
      'the second restart',
      async () => (await metric(op, 'deployment_restart_controller_deployment_restarts_total')) >= 2,
      { timeoutMs: 20_000 },
    );
    await settled(op, versions + 1);
    assert.equal(
      await metric(op, 'deployment_restart_controller_deployment_restarts_total'),
      2,
      'one restart for the burst',
    );

    // binaryData counts too.
    await change({}, { binaryData: { blob: Buffer.from([0, 1, 2]).toString('base64') } });
    await waitFor(
      'a restart for binaryData',
      async () => (await metric(op, 'deployment_restart_controller_deployment_restarts_total')) === 3,
      { timeoutMs: 20_000 },
    );
  });

  it('restarts for a Secret used through a projected volume of an initContainer, and catches changes made while it was down', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<Secret>(resources.secrets, {
      metadata: { name: 'creds', namespace },
      data: { password: Buffer.from('hunter2').toString('base64') },
    });
    await kube.create(
      resources.deployments,
      deployment(namespace, 'db', {
        initContainers: [
          { name: 'init', image: 'example.invalid/init:1', volumeMounts: [{ name: 'all', mountPath: '/etc/all' }] },
        ],
        volumes: [{ name: 'all', projected: { sources: [{ secret: { name: 'creds' } }] } }],
      }),
    );
    let op = await start(t, namespace);
    await waitFor(
      'checksums recorded',
      async () =>
        (await get(kube, namespace, 'db')).metadata?.annotations?.[APPLIED]?.includes(`secret/${namespace}/creds`),
      { timeoutMs: 20_000 },
    );
    await kube.patch(resources.secrets, { namespace, name: 'creds' }, 'merge', {
      data: { password: Buffer.from('correct horse').toString('base64') },
    });
    const first = await waitFor(
      'a restart',
      async () => (await get(kube, namespace, 'db')).spec?.template?.metadata?.annotations?.[TRIGGER],
      { timeoutMs: 20_000 },
    );

    await op.stop();
    await kube.patch(resources.secrets, { namespace, name: 'creds' }, 'merge', {
      data: { password: Buffer.from('battery staple').toString('base64') },
    });
    op = await start(t, namespace);
    await waitFor(
      'a restart for the change made while down',
      async () => (await get(kube, namespace, 'db')).spec?.template?.metadata?.annotations?.[TRIGGER] !== first,
      { timeoutMs: 20_000 },
    );
    await waitFor(
      'nothing waiting',
      async () => (await metric(op, 'deployment_restart_controller_changes_waiting_total')) === 0,
      { timeoutMs: 20_000 },
    );
    assert.equal(
      await metric(op, 'deployment_restart_controller_deployment_restarts_total'),
      1,
      'exactly one restart after the start',
    );
  });

  it('a rollout group whose ConfigMap changes rolls zone by zone through the coordinator', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'ingester-config', namespace },
      data: { limits: '1' },
    });
    await createGroup(kube, namespace, { all: { replicas: 2 } });
    for (const zone of ZONES) {
      await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'strategic', {
        metadata: { annotations: { 'com.xing.deployment-restart': 'enabled' } },
        spec: {
          template: {
            spec: { containers: [{ name: 'ingester', envFrom: [{ configMapRef: { name: 'ingester-config' } }] }] },
          },
        },
      });
    }
    await waitGroupSettled(kube, namespace);
    // The template edit above is itself a revision: let that roll first, then watch the restart's.
    const op = await start(t, namespace, ['-reconcile.interval=1s']);
    await waitRolledOut(kube, namespace);
    await waitFor(
      'checksums recorded everywhere',
      async () =>
        (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items.every(
          (s) => s.metadata?.annotations?.[APPLIED],
        ),
      { timeoutMs: 20_000 },
    );
    const monitor = new InvariantMonitor(
      kube,
      namespace,
      Object.fromEntries(ZONES.map((z) => [`ingester-zone-${z}`, 1])),
    );
    await monitor.start();
    t.after(() => monitor.stop());
    await kube.patch(resources.configMaps, { namespace, name: 'ingester-config' }, 'merge', { data: { limits: '2' } });
    await waitFor(
      'every zone restarted',
      async () =>
        (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items.every(
          (s) => s.spec?.template?.metadata?.annotations?.[TRIGGER],
        ),
      { timeoutMs: 20_000 },
    );
    await waitRolledOut(kube, namespace);
    assert.deepEqual(monitor.violations, []);
    assert.equal(monitor.maxDisruptedAtOnce, 1);
    assert.equal(await metric(op, 'deployment_restart_controller_deployment_restarts_total'), 3);
  });

  it('honours Reloader opt-ins: auto, named lists, and ignore on a config', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    for (const name of ['used', 'listed', 'ignored'])
      await kube.create<ConfigMap>(resources.configMaps, {
        metadata: {
          name,
          namespace,
          ...(name === 'ignored' ? { annotations: { 'reloader.stakater.com/ignore': 'true' } } : {}),
        },
        data: { v: '1' },
      });
    const app = deployment(namespace, 'app', {
      containers: [
        {
          name: 'app',
          image: 'example.invalid/app:1',
          envFrom: [{ configMapRef: { name: 'used' } }, { configMapRef: { name: 'ignored' } }],
        },
      ],
    });
    app.metadata!.annotations = {
      'reloader.stakater.com/auto': 'true',
      'configmap.reloader.stakater.com/reload': 'listed',
    };
    await kube.create(resources.deployments, app);
    const op = await start(t, namespace);
    const recorded = await waitFor(
      'checksums recorded',
      async () => (await get(kube, namespace, 'app')).metadata?.annotations?.[APPLIED],
      { timeoutMs: 20_000 },
    );
    assert.deepEqual(
      Object.keys(JSON.parse(recorded) as object).sort(),
      [`configmap/${namespace}/listed`, `configmap/${namespace}/used`],
      'the ignored config is not watched; the listed one is, referenced or not',
    );
    const versions = await metric(op, 'deployment_restart_controller_resource_versions_total');
    await kube.patch(resources.configMaps, { namespace, name: 'ignored' }, 'merge', { data: { v: '2' } });
    await settled(op, versions);
    assert.equal(
      await metric(op, 'deployment_restart_controller_deployment_restarts_total'),
      0,
      'no restart for an ignored config',
    );
    await kube.patch(resources.configMaps, { namespace, name: 'listed' }, 'merge', { data: { v: '2' } });
    await waitFor(
      'a restart for the listed config',
      async () => (await metric(op, 'deployment_restart_controller_deployment_restarts_total')) === 1,
      { timeoutMs: 20_000 },
    );
  });

  it('a new leader restarts nothing that was already applied', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'app-config', namespace },
      data: { level: 'info' },
    });
    await kube.create(
      resources.deployments,
      deployment(namespace, 'app', {
        containers: [
          { name: 'app', image: 'example.invalid/app:1', envFrom: [{ configMapRef: { name: 'app-config' } }] },
        ],
      }),
    );
    const replicas = [await start(t, namespace, FAST_ELECTION), await start(t, namespace, FAST_ELECTION)];
    const leader = await waitFor(
      'a leader',
      async () => {
        for (const r of replicas) if ((await r.metric('stateward_leader_is_leader')) === 1) return r;
        return undefined;
      },
      { timeoutMs: 20_000 },
    );
    await kube.patch(resources.configMaps, { namespace, name: 'app-config' }, 'merge', { data: { level: 'debug' } });
    const trigger = await waitFor(
      'a restart by the first leader',
      async () => (await get(kube, namespace, 'app')).spec?.template?.metadata?.annotations?.[TRIGGER],
      { timeoutMs: 20_000 },
    );
    leader.signal('SIGKILL');
    await leader.exited;
    const standby = replicas.find((r) => r !== leader)!;
    await waitFor('the standby leads', async () => (await standby.metric('stateward_leader_is_leader')) === 1, {
      timeoutMs: 20_000,
    });
    // It looked at every opted-in workload and found nothing to do.
    await waitFor(
      'the standby processed its queue',
      async () =>
        (await metric(standby, 'workqueue_adds_total{name="config-restarts"}')) >= 1 &&
        (await metric(standby, 'workqueue_depth{name="config-restarts"}')) === 0 &&
        (await metric(standby, 'deployment_restart_controller_changes_waiting_total')) === 0,
      { timeoutMs: 20_000 },
    );
    assert.equal(await metric(standby, 'deployment_restart_controller_deployment_restarts_total'), 0);
    assert.equal((await get(kube, namespace, 'app')).spec?.template?.metadata?.annotations?.[TRIGGER], trigger);
  });

  it('applies every change while its lease renewals answer late, the term going on (no reconcile dropped)', async (t) => {
    // Every request to the apiserver takes ~0.5 s longer: a renewal (GET and
    // PUT of the Lease) then ends after the renew deadline of 2 s since the
    // previous one started, though in time to keep the lease. In between,
    // isLeader() is false inside a term that goes on; a reconcile due then
    // (a debounce ending) used to be dropped, and the change waited for the
    // workload's next event: the chaos soak's "content change never applied".
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'app-config', namespace },
      data: { level: 'v0' },
    });
    await kube.create(
      resources.deployments,
      deployment(namespace, 'app', {
        containers: [
          { name: 'app', image: 'example.invalid/app:1', envFrom: [{ configMapRef: { name: 'app-config' } }] },
        ],
      }),
    );
    const apiserver = new URL(cluster.state.server);
    const slow = new DelayProxy(Number(apiserver.port));
    const port = await slow.listen();
    t.after(() => slow.close());
    const op = await start(t, namespace, [...FAST_ELECTION, `-kubernetes.api-url=https://127.0.0.1:${port}`]);
    await waitFor('leading', async () => (await op.metric('stateward_leader_is_leader')) === 1, { timeoutMs: 20_000 });
    await waitFor(
      'checksums recorded',
      async () => (await get(kube, namespace, 'app')).metadata?.annotations?.[APPLIED],
      {
        timeoutMs: 20_000,
      },
    );
    slow.delayMs = 500;
    for (let i = 1; i <= 8; i++) {
      await kube.patch(resources.configMaps, { namespace, name: 'app-config' }, 'merge', { data: { level: `v${i}` } });
      await waitFor(
        `change ${i} applied`,
        async () => (await metric(op, 'deployment_restart_controller_deployment_restarts_total')) >= i,
        { timeoutMs: 30_000, intervalMs: 100 },
      );
    }
    assert.equal(await metric(op, 'deployment_restart_controller_deployment_restarts_total'), 8, 'one restart each');
  });

  it('keeps no Secret value in memory after processing it (heap snapshot)', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const values = [randomBytes(12).toString('hex'), randomBytes(12).toString('hex')];
    await kube.create<Secret>(resources.secrets, {
      metadata: { name: 'creds', namespace },
      data: { password: Buffer.from(values[0]!).toString('base64') },
    });
    await kube.create(
      resources.deployments,
      deployment(namespace, 'app', {
        containers: [
          {
            name: 'app',
            image: 'example.invalid/app:1',
            env: [{ name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'creds', key: 'password' } } }],
          },
        ],
      }),
    );
    const dir = await mkdtemp(join(tmpdir(), 'stateward-heap-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const op = await start(t, namespace, [], { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}` });
    await waitFor(
      'checksums recorded',
      async () => (await get(kube, namespace, 'app')).metadata?.annotations?.[APPLIED],
      { timeoutMs: 20_000 },
    );
    await kube.patch(resources.secrets, { namespace, name: 'creds' }, 'merge', {
      data: { password: Buffer.from(values[1]!).toString('base64') },
    });
    await waitFor(
      'a restart',
      async () => (await metric(op, 'deployment_restart_controller_deployment_restarts_total')) === 1,
      { timeoutMs: 20_000 },
    );
    // The snapshot (taken after a full GC) holds every object still reachable.
    op.signal('SIGUSR2');
    const snapshot = await waitFor(
      'the heap snapshot written',
      async () => {
        const file = (await readdir(dir)).find((f) => f.endsWith('.heapsnapshot'));
        if (!file) return undefined;
        const text = await readFile(join(dir, file), 'utf8');
        return text.trimEnd().endsWith(']}') ? text : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    assert.ok(snapshot.includes(`"${namespace}"`), 'the search sees strings the operator does keep (the namespace)');
    for (const value of values) {
      assert.ok(!snapshot.includes(value), 'no Secret value in the heap');
      assert.ok(!snapshot.includes(Buffer.from(value).toString('base64')), 'nor its base64 form');
    }
  });

  it('a standalone OnDelete StatefulSet says how many pods are outdated and, opted in, has them evicted one at a time', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'db-config', namespace },
      data: { cache: '1' },
    });
    const base = zoneStatefulSet(namespace, 'a', { replicas: 3 });
    const template = base.spec!.template;
    // No rollout-group label on the StatefulSet: not coordinated by a group.
    const set: StatefulSet = {
      ...base,
      metadata: {
        name: 'ingester-zone-a',
        namespace,
        labels: {},
        annotations: { 'com.xing.deployment-restart': 'enabled', 'stateward.dev/config-restart-ondelete': 'evict' },
      },
      spec: {
        ...base.spec!,
        template: {
          ...template,
          spec: {
            ...template.spec!,
            containers: [
              {
                name: 'ingester',
                image: 'example.invalid/ingester:1',
                envFrom: [{ configMapRef: { name: 'db-config' } }],
              },
            ],
          },
        },
      },
    };
    await kube.create(resources.statefulSets, set);
    await waitFor(
      '3 pods Ready',
      async () =>
        (await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' })).status
          ?.readyReplicas === 3,
      { timeoutMs: 30_000 },
    );
    const monitor = new InvariantMonitor(kube, namespace, { 'ingester-zone-a': 1 });
    await monitor.start();
    t.after(() => monitor.stop());
    await start(t, namespace);
    await waitFor(
      'checksums recorded',
      async () =>
        (await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' })).metadata
          ?.annotations?.[APPLIED],
      { timeoutMs: 20_000 },
    );
    await kube.patch(resources.configMaps, { namespace, name: 'db-config' }, 'merge', { data: { cache: '2' } });
    const note = await waitFor(
      'the outdated-pods Event',
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find(
          (e) => e.reason === 'ConfigRestartPending',
        ),
      { timeoutMs: 20_000 },
    );
    assert.match(
      note.note ?? '',
      /^template updated, 3 pods outdated \(StatefulSet ingester-zone-a uses OnDelete\); evicting them one at a time$/,
    );
    // OnDelete never advances currentRevision by itself: what matters is every pod Ready on the new revision.
    await waitFor(
      'every pod Ready on the new revision',
      async () => {
        const sts = await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' });
        const pods = (await kube.list<Pod>(resources.pods, { namespace })).items;
        return (
          sts.status?.updateRevision !== sts.status?.currentRevision &&
          pods.length === 3 &&
          sts.status?.readyReplicas === 3 &&
          pods.every((p) => p.metadata?.labels?.['controller-revision-hash'] === sts.status?.updateRevision)
        );
      },
      { timeoutMs: 120_000 },
    );
    assert.deepEqual(monitor.violations, [], 'one pod at a time');
    const evictions = (await kube.list<Event>(resources.events, { namespace })).items.filter(
      (e) => e.reason === 'EvictingOutdatedPod',
    );
    assert.equal(evictions.length, 3);
  });

  it('restarts a DaemonSet too, and a config that keeps changing still restarts within -restart-max-wait', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'agent-config', namespace },
      data: { n: '0' },
    });
    await kube.create(resources.daemonSets, {
      metadata: { name: 'agent', namespace, annotations: { 'com.xing.deployment-restart': 'enabled' } },
      spec: {
        selector: { matchLabels: { app: 'agent' } },
        template: {
          metadata: { labels: { app: 'agent' } },
          spec: {
            containers: [
              {
                name: 'agent',
                image: 'example.invalid/agent:1',
                volumeMounts: [{ name: 'config', mountPath: '/etc/agent' }],
              },
            ],
            volumes: [{ name: 'config', configMap: { name: 'agent-config' } }],
          },
        },
      },
    } as KubeObject);
    // Grace 1 s, cap 3 s: changes every 400 ms would hold a restart back forever without the cap.
    const op = await start(t, namespace, ['-restart-max-wait=3s']);
    const trigger = async () =>
      (await kube.get<Deployment>(resources.daemonSets, { namespace, name: 'agent' })).spec?.template?.metadata
        ?.annotations?.[TRIGGER];
    await waitFor(
      'checksums recorded',
      async () =>
        (await kube.get<Deployment>(resources.daemonSets, { namespace, name: 'agent' })).metadata?.annotations?.[
          APPLIED
        ],
      { timeoutMs: 20_000 },
    );
    const first = Date.now();
    let restartedAt: number | undefined;
    for (let n = 1; n <= 25 && restartedAt === undefined; n++) {
      await kube.patch(resources.configMaps, { namespace, name: 'agent-config' }, 'merge', { data: { n: String(n) } });
      if (await trigger()) restartedAt = Date.now();
      else await new Promise((resolve) => setTimeout(resolve, 400)); // the change cadence under test, not a synchronisation
    }
    assert.ok(restartedAt !== undefined, 'restarted while the config kept changing');
    assert.ok(
      restartedAt - first < 3000 + 2000,
      `restarted ${restartedAt - first} ms after the first change (cap 3 s)`,
    );
    assert.ok((await metric(op, 'deployment_restart_controller_deployment_restarts_total')) >= 1);
  });

  it('a standalone OnDelete DaemonSet, opted in, has its outdated pods evicted one at a time; a missing optional config is reported, not fatal', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'agent-config', namespace },
      data: { n: '0' },
    });
    await kube.create(resources.daemonSets, {
      metadata: {
        name: 'agent',
        namespace,
        annotations: { 'com.xing.deployment-restart': 'enabled', 'stateward.dev/config-restart-ondelete': 'evict' },
      },
      spec: {
        selector: { matchLabels: { app: 'agent' } },
        updateStrategy: { type: 'OnDelete' },
        template: {
          metadata: { labels: { app: 'agent' } },
          spec: {
            containers: [
              {
                name: 'agent',
                image: 'example.invalid/agent:1',
                envFrom: [
                  { configMapRef: { name: 'agent-config' } },
                  { configMapRef: { name: 'agent-overrides', optional: true } },
                ],
              },
            ],
          },
        },
      },
    } as KubeObject);
    const nodes = (await kube.list<KubeObject>(resources.nodes)).items.length;
    await waitFor(
      'one Ready pod per node',
      async () => (await kube.list<Pod>(resources.pods, { namespace })).items.filter(isReady).length === nodes,
      { timeoutMs: 30_000 },
    );
    // An independent watcher: never more than one of the DaemonSet's pods unavailable (not Ready, terminating or not recreated yet).
    const pods = new Informer<Pod>({ client: kube, type: resources.pods, namespace });
    let worst = 0;
    let synced = false;
    const check = () => {
      if (!synced) return; // the initial list arrives one pod at a time
      const list = pods.list();
      worst = Math.max(worst, list.filter((p) => !isReady(p)).length + Math.max(0, nodes - list.length));
    };
    pods.addHandlers({ onAdd: check, onUpdate: check, onDelete: check });
    pods.start();
    t.after(() => pods.stop());
    await pods.waitForSync();
    synced = true;
    check();
    assert.equal(worst, 0, 'every pod up before the change');
    await start(t, namespace);
    await waitFor(
      'checksums recorded',
      async () =>
        (await kube.get<Deployment>(resources.daemonSets, { namespace, name: 'agent' })).metadata?.annotations?.[
          APPLIED
        ],
      { timeoutMs: 20_000 },
    );
    const missing = await waitFor(
      'the missing optional config reported',
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find((e) => e.reason === 'ConfigMissing'),
      { timeoutMs: 10_000 },
    );
    assert.equal(missing.type, 'Normal');
    assert.equal(
      missing.note,
      `optional configmap/${namespace}/agent-overrides is referenced but not found: no restart for it until it exists (its last recorded checksum is kept)`,
    );

    await kube.patch(resources.configMaps, { namespace, name: 'agent-config' }, 'merge', { data: { n: '1' } });
    const note = await waitFor(
      'the outdated-pods Event',
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find(
          (e) => e.reason === 'ConfigRestartPending',
        ),
      { timeoutMs: 20_000 },
    );
    assert.equal(
      note.note,
      `template updated, ${nodes} pods outdated (DaemonSet agent uses OnDelete); evicting them one at a time`,
    );
    const generation = async () =>
      (await kube.get<KubeObject>(resources.daemonSets, { namespace, name: 'agent' })).metadata?.annotations?.[
        'deprecated.daemonset.template.generation'
      ];
    await waitFor(
      'every pod Ready on the new template',
      async () => {
        const want = await generation();
        const list = (await kube.list<Pod>(resources.pods, { namespace })).items;
        return (
          want === '2' &&
          list.length === nodes &&
          list.every((p) => isReady(p) && p.metadata?.labels?.['pod-template-generation'] === want)
        );
      },
      { timeoutMs: 120_000 },
    );
    assert.equal(worst, 1, 'exactly one pod down at a time');
    const evictions = (await kube.list<Event>(resources.events, { namespace })).items.filter(
      (e) => e.reason === 'EvictingOutdatedPod',
    );
    assert.equal(evictions.length, nodes);
  });

  it("takes over from xing without a restart: xing's stored checksums are rewritten, a real change still restarts", async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const data = { level: 'info' };
    await kube.create<ConfigMap>(resources.configMaps, { metadata: { name: 'app-config', namespace }, data });
    await kube.create<Secret>(resources.secrets, {
      metadata: { name: 'app-secret', namespace },
      data: { password: Buffer.from('s3cret').toString('base64') },
    });
    const secret = await kube.get<Secret>(resources.secrets, { namespace, name: 'app-secret' });
    // What xing left on the workload: its own checksums of the current content.
    const xing = {
      [`configmap/${namespace}/app-config`]: xingLegacyChecksum({ data }),
      [`secret/${namespace}/app-secret`]: xingLegacyChecksum({ data: secret.data! }),
    };
    const app = deployment(namespace, 'app', {
      containers: [
        {
          name: 'app',
          image: 'example.invalid/app:1',
          envFrom: [{ configMapRef: { name: 'app-config' } }, { secretRef: { name: 'app-secret' } }],
        },
      ],
    });
    app.metadata!.annotations![APPLIED] = JSON.stringify(xing);
    await kube.create(resources.deployments, app);
    const op = await start(t, namespace);
    await waitFor(
      'the checksums rewritten in our scheme',
      async () =>
        Object.values(
          JSON.parse((await get(kube, namespace, 'app')).metadata?.annotations?.[APPLIED] ?? '{}') as Record<
            string,
            string
          >,
        ).every((v) => v.startsWith('v1:')),
      { timeoutMs: 20_000 },
    );
    assert.equal(
      (await get(kube, namespace, 'app')).spec?.template?.metadata?.annotations?.[TRIGGER],
      undefined,
      'no restart for the takeover',
    );
    assert.equal(await metric(op, 'deployment_restart_controller_deployment_restarts_total'), 0);
    const note = await waitFor(
      'the takeover Event',
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find(
          (e) => e.reason === 'ConfigChecksumsRecorded',
        ),
      { timeoutMs: 10_000 },
    );
    assert.match(note.note ?? '', /xing checksum rewritten/);
    await kube.patch(resources.configMaps, { namespace, name: 'app-config' }, 'merge', { data: { level: 'debug' } });
    await waitFor(
      'a restart for a real change',
      async () => (await get(kube, namespace, 'app')).spec?.template?.metadata?.annotations?.[TRIGGER],
      { timeoutMs: 20_000 },
    );
  });
});
