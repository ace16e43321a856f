// The Secrets Store CSI integration's caches and checksum on the real control
// plane: the driver's two CRDs (minimal copies of their v1 schema), real
// Deployments whose pods the controllers create, and
// SecretProviderClassPodStatuses written as the driver writes them (one per
// pod and class, owned by the pod, versions in status.objects). A rotation
// of one pod's versions moves the workload's checksum; another workload's
// pods, a restart's new pods with the versions applied, and the old pods'
// statuses going with their pods (garbage collection) do not; caches built
// afresh (an operator restart) give the same answers.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { KubeClient } from '../../src/runtime/kube/client.ts';
import { Informer } from '../../src/runtime/informer/informer.ts';
import { resources, type KubeObject, type Pod } from '../../src/runtime/kube/types.ts';
import { versionsChecksum } from '../../src/restarts/csichecksum.ts';
import {
  BY_CLASS,
  classPodStatusDigester,
  classPodStatusResource,
  classResource,
  CsiClassView,
  indexByClass,
  type ClassPodStatusDigest,
} from '../../src/restarts/csiinformers.ts';
import { CLASS_AUTO_ANNOTATION } from '../../src/restarts/csioptins.ts';
import { XING_TIMESTAMP_ANNOTATION, RELOADER_IGNORE_ANNOTATION } from '../../src/vocabulary/keys.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { installCsiCrds } from '../support/csi-crds.ts';
import { OperatorProcess } from '../support/operator-process.ts';

const cluster = testCluster();
const KEY = Buffer.from('csi-int-test-key');
const CLASS = 'vault-db';
const NODE_LABEL = 'internal.secrets-store.csi.k8s.io/node-name';

type Deployment = KubeObject & {
  spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
  status?: { updatedReplicas?: number; replicas?: number };
};

function deployment(namespace: string, name: string, replicas: number): Deployment {
  return {
    metadata: { name, namespace, annotations: { [CLASS_AUTO_ANNOTATION]: 'true' } },
    spec: {
      replicas,
      // A new pod counts as available only after 20 s, so the old pods outlive the test's late rotation.
      minReadySeconds: 20,
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [
            { name: 'app', image: 'example.invalid/app:1', volumeMounts: [{ name: 'secrets', mountPath: '/mnt' }] },
          ],
          volumes: [
            {
              name: 'secrets',
              csi: {
                driver: 'secrets-store.csi.k8s.io',
                readOnly: true,
                volumeAttributes: { secretProviderClass: CLASS },
              },
            },
          ],
        },
      },
    },
  } as Deployment;
}

/** What the driver writes once a pod's volume is mounted. */
function podStatus(pod: Pod, versions: Record<string, string>): KubeObject {
  const namespace = pod.metadata!.namespace!;
  return {
    metadata: {
      name: `${pod.metadata!.name}-${namespace}-${CLASS}`,
      namespace,
      labels: { [NODE_LABEL]: pod.spec?.nodeName ?? 'node' },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid! }],
    },
    status: {
      podName: pod.metadata!.name,
      secretProviderClassName: CLASS,
      mounted: true,
      targetPath: `/var/lib/kubelet/pods/${pod.metadata!.uid}/volumes/kubernetes.io~csi/secrets/mount`,
      objects: Object.entries(versions).map(([id, version]) => ({ id, version })),
    },
  } as KubeObject;
}

/** The driver rotating one pod: its status rewritten with the new versions (an update, as the driver's). */
async function rotate(kube: KubeClient, pod: Pod, versions: Record<string, string>): Promise<void> {
  const name = `${pod.metadata!.name}-${pod.metadata!.namespace}-${CLASS}`;
  const current = await kube.get<KubeObject & { status?: Record<string, unknown> }>(classPodStatusResource, {
    namespace: pod.metadata!.namespace!,
    name,
  });
  const next = podStatus(pod, versions) as KubeObject & { status: Record<string, unknown> };
  await kube.update(classPodStatusResource, { ...current, status: next.status });
}

/** The caches an operator would start: pods, statuses (digested, indexed) and classes (metadata). */
async function caches(t: TestContext, kube: KubeClient, namespace: string) {
  const pods = new Informer<Pod>({ client: kube, type: resources.pods, namespace });
  const statuses = new Informer<ClassPodStatusDigest>({
    client: kube,
    type: classPodStatusResource,
    namespace,
    transform: classPodStatusDigester(KEY),
    indexers: { [BY_CLASS]: indexByClass },
    optional: true,
  });
  const classes = new Informer<KubeObject>({
    client: kube,
    type: classResource,
    namespace,
    metadataOnly: true,
    optional: true,
  });
  for (const i of [pods, statuses, classes]) {
    i.start();
    t.after(() => i.stop());
  }
  await Promise.all([pods, statuses, classes].map((i) => i.waitForSync(AbortSignal.timeout(20_000))));
  return { pods, statuses, view: new CsiClassView({ statuses: [statuses], classes: [classes] }, [pods]) };
}

const v = (version: string) => ({ 'secret/db-password': version, 'secret/api-key': '7' });
const checksumOf = (version: string) =>
  versionsChecksum(
    KEY,
    Object.entries(v(version)).map(([id, ver]) => ({ id, version: ver })),
  );

describe('CSI SecretProviderClassPodStatuses on the real control plane', { timeout: 300_000 }, () => {
  it('a rotation moves the workload’s checksum once; other workloads’ pods, a restart’s new pods and the old pods’ going do not', async (t) => {
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 10_000 });
    await installCsiCrds(cluster, kube, cluster.state.stateDir);
    const namespace = await cluster.namespace(t, 'csi');
    await kube.create(classResource, {
      metadata: { name: CLASS, namespace },
      spec: { provider: 'vault', parameters: { roleName: 'app' } },
    } as KubeObject);
    await kube.create(resources.deployments, deployment(namespace, 'web', 2));
    await kube.create(resources.deployments, deployment(namespace, 'other', 1));
    const { pods, statuses, view } = await caches(t, kube, namespace);

    const podsOf = (app: string, live = true) =>
      pods.list().filter((p) => p.metadata?.labels?.app === app && (!live || !p.metadata.deletionTimestamp));
    await waitFor('three pods', () => podsOf('web').length === 2 && podsOf('other').length === 1, {
      timeoutMs: 60_000,
    });
    for (const pod of [...podsOf('web'), ...podsOf('other')])
      await kube.create(classPodStatusResource, podStatus(pod, v('1')));

    const web = () => kube.get<Deployment>(resources.deployments, { namespace, name: 'web' });
    const checksum = async (applied: Map<string, string>, v2 = view) => {
      const object = await web();
      return v2
        .checksums({ kind: 'Deployment', object }, v2.watched(object), applied)
        .get(`secretproviderclass/${namespace}/${CLASS}`);
    };
    const none = new Map<string, string>();
    await waitFor('the three statuses cached', () => statuses.size === 3, { timeoutMs: 20_000 });
    assert.deepEqual(view.watched(await web()).keys, [`secretproviderclass/${namespace}/${CLASS}`]);
    assert.equal(await checksum(none), checksumOf('1'), 'first sighting: the versions the pods mounted');
    const applied = new Map([[`secretproviderclass/${namespace}/${CLASS}`, checksumOf('1')]]);

    // Another workload's pod rotated first: not web's concern.
    await rotate(kube, podsOf('other')[0]!, v('2'));
    await waitFor('other’s rotation cached', () => statuses.list().some((s) => s.mount.checksum === checksumOf('2')), {
      timeoutMs: 20_000,
    });
    assert.equal(await checksum(applied), checksumOf('1'));

    // One of web's pods rotated: the checksum moves to the new set (a restart, R1).
    const [first, second] = podsOf('web') as [Pod, Pod];
    await rotate(kube, first, v('2'));
    await waitFor('web’s first rotation seen', async () => (await checksum(applied)) === checksumOf('2'), {
      timeoutMs: 20_000,
    });

    // The restart: the applied record and a new trigger; the new pods mount the versions applied.
    applied.set(`secretproviderclass/${namespace}/${CLASS}`, checksumOf('2'));
    // Paused, so the old generation's second pod outlives the late rotation below however slow the machine
    // (the rollout would otherwise replace it, and its status with it); resumed right after.
    await kube.patch(resources.deployments, { namespace, name: 'web' }, 'merge', {
      spec: {
        paused: true,
        template: { metadata: { annotations: { [XING_TIMESTAMP_ANNOTATION]: new Date().toISOString() } } },
      },
    });
    // The rotated pod of the old generation goes first, and its status with it (garbage collection),
    // while the other old pod still shows the older set: nothing (the old generation no longer counts).
    await kube.delete(resources.pods, { namespace, name: first.metadata!.name! });
    await waitFor(
      'the rotated pod’s status collected',
      () => !statuses.list().some((s) => s.mount.podUid === first.metadata!.uid),
      {
        timeoutMs: 60_000,
      },
    );
    assert.equal(await checksum(applied), checksumOf('2'));
    // The driver rotates the other old pod late: nothing either.
    await rotate(kube, second, v('2'));
    await waitFor(
      'the late rotation cached',
      () =>
        statuses.list().some((s) => s.mount.podUid === second.metadata!.uid && s.mount.checksum === checksumOf('2')),
      { timeoutMs: 20_000 },
    );
    assert.equal(await checksum(applied), checksumOf('2'));
    await kube.patch(resources.deployments, { namespace, name: 'web' }, 'merge', { spec: { paused: false } });
    const trigger = async () => (await web()).spec?.template?.metadata?.annotations?.[XING_TIMESTAMP_ANNOTATION];
    const isNew = async (p: Pod) => p.metadata?.annotations?.[XING_TIMESTAMP_ANNOTATION] === (await trigger());
    const mounted = new Set<string>();
    await waitFor(
      'the rollout done, each new pod’s status written as it came',
      async () => {
        for (const pod of podsOf('web')) {
          if (mounted.has(pod.metadata!.uid!) || !(await isNew(pod))) continue;
          mounted.add(pod.metadata!.uid!);
          await kube.create(classPodStatusResource, podStatus(pod, v('2')));
          assert.equal(await checksum(applied), checksumOf('2'), 'a new pod with the applied versions');
        }
        const all = podsOf('web', false);
        return mounted.size >= 2 && all.length === 2 && (await Promise.all(all.map(isNew))).every(Boolean);
      },
      { timeoutMs: 150_000, intervalMs: 200 },
    );
    // The old pods' statuses go with them (garbage collection); web's checksum stays.
    await waitFor(
      'the old pods’ statuses collected',
      () => statuses.list().filter((s) => s.mount.podName.startsWith('web-')).length === 2,
      { timeoutMs: 60_000 },
    );
    assert.equal(await checksum(applied), checksumOf('2'));

    // An operator started afresh (caches from LISTs): the same answers for the record applied, and a
    // rotation not yet applied is seen.
    const fresh = (await caches(t, kube, namespace)).view;
    assert.equal(await checksum(applied, fresh), checksumOf('2'));
    assert.equal(
      await checksum(new Map([[`secretproviderclass/${namespace}/${CLASS}`, checksumOf('1')]]), fresh),
      checksumOf('2'),
    );

    // reloader.stakater.com/ignore on the class keeps it out (read from the metadata-only class cache).
    await kube.patch(classResource, { namespace, name: CLASS }, 'merge', {
      metadata: { annotations: { [RELOADER_IGNORE_ANNOTATION]: 'true' } },
    });
    await waitFor('the ignore annotation seen', async () => view.watched(await web()).excluded.length === 1, {
      timeoutMs: 20_000,
    });
    assert.deepEqual(view.watched(await web()).keys, []);
  });
});

describe('CSI rotations restart through the operator (wired)', { timeout: 400_000 }, () => {
  it('records on opt-in, restarts once per rotation, not for the restart’s own pods, and catches one made while down', async (t) => {
    const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 10_000 });
    await installCsiCrds(cluster, kube, cluster.state.stateDir);
    const namespace = await cluster.namespace(t, 'csi-e2e');
    await kube.create(classResource, {
      metadata: { name: CLASS, namespace },
      spec: { provider: 'vault' },
    } as KubeObject);
    await kube.create(resources.deployments, deployment(namespace, 'web', 2));
    const key = `secretproviderclass/${namespace}/${CLASS}`;
    const web = () => kube.get<Deployment>(resources.deployments, { namespace, name: 'web' });
    const trigger = async () => (await web()).spec?.template?.metadata?.annotations?.[XING_TIMESTAMP_ANNOTATION];
    const recorded = async () =>
      (JSON.parse((await web()).metadata?.annotations?.[APPLIED] ?? '{}') as Record<string, string>)[key];
    const podsNow = async () =>
      (await kube.list<Pod>(resources.pods, { namespace, labelSelector: 'app=web' })).items.filter(
        (p) => !p.metadata?.deletionTimestamp,
      );
    /** Acts as the driver: every live pod without a status gets one with `version`. */
    const mountNew = async (version: string) => {
      const have = new Set(
        (await kube.list<KubeObject>(classPodStatusResource, { namespace })).items.map((s) => s.metadata?.name),
      );
      for (const pod of await podsNow())
        if (!have.has(`${pod.metadata!.name}-${namespace}-${CLASS}`))
          await kube.create(classPodStatusResource, podStatus(pod, v(version))).catch(() => undefined);
    };
    const restartsEvents = async () =>
      (await kube.list<KubeObject & { reason?: string }>(resources.events, { namespace })).items.filter(
        // ConfigChanged, or Reloader's Reloaded: --enable-csi-integration is Reloader's flag (event reasons auto).
        (e) => e.reason === 'ConfigChanged' || e.reason === 'Reloaded',
      ).length;
    /** Statuses written for every new pod until the rollout is over and only the current generation is left. */
    const rollOut = async (version: string) => {
      await waitFor(
        'the rollout over, every pod mounted',
        async () => {
          await mountNew(version);
          const now = await trigger();
          const all = await kube.list<Pod>(resources.pods, { namespace, labelSelector: 'app=web' });
          return (
            all.items.length === 2 &&
            all.items.every((p) => p.metadata?.annotations?.[XING_TIMESTAMP_ANNOTATION] === now)
          );
        },
        { timeoutMs: 150_000, intervalMs: 500 },
      );
      await mountNew(version);
    };

    await waitFor('two pods', async () => (await podsNow()).length === 2, { timeoutMs: 60_000 });
    await mountNew('1');
    let op = await OperatorProcess.start(cluster, namespace, [
      '-config-restarts.enabled',
      '--enable-csi-integration',
      '-restart-grace-period=1',
    ]);
    t.after(() => op.stop());
    await op.waitReady();
    const first = await waitFor('the versions recorded on opt-in', recorded, { timeoutMs: 30_000 });
    assert.equal(await trigger(), undefined, 'opting in restarts nothing');

    // A rotation: the driver rewrites one pod, then the other.
    const [a, b] = (await podsNow()) as [Pod, Pod];
    await rotate(kube, a, v('2'));
    const restartedAt = await waitFor('one restart', trigger, { timeoutMs: 30_000 });
    await rotate(kube, b, v('2')).catch(() => undefined); // the old pod may be gone already
    const second = await recorded();
    assert.notEqual(second, first);
    const before = (await op.metric('deployment_restart_controller_resource_versions_total')) ?? 0;
    await rollOut('2');
    await waitFor(
      'the new pods’ statuses processed',
      async () =>
        ((await op.metric('deployment_restart_controller_resource_versions_total')) ?? 0) > before &&
        ((await op.metric('deployment_restart_controller_changes_waiting_total')) ?? 0) === 0,
      { timeoutMs: 20_000 },
    );
    assert.equal(await trigger(), restartedAt, 'the restart’s new pods and the old ones’ going restart nothing');
    assert.equal(await restartsEvents(), 1);

    // Down during a rotation: caught once at start-up; a start with nothing new restarts nothing.
    await op.stop();
    for (const pod of await podsNow()) await rotate(kube, pod, v('3'));
    op = await OperatorProcess.start(cluster, namespace, [
      '-config-restarts.enabled',
      '--enable-csi-integration',
      '-restart-grace-period=1',
    ]);
    t.after(() => op.stop());
    await op.waitReady();
    const restartedAgain = await waitFor(
      'the rotation made while down restarted',
      async () => ((await trigger()) !== restartedAt ? trigger() : undefined),
      { timeoutMs: 30_000 },
    );
    await rollOut('3');
    await op.stop();
    op = await OperatorProcess.start(cluster, namespace, [
      '-config-restarts.enabled',
      '--enable-csi-integration',
      '-restart-grace-period=1',
    ]);
    t.after(() => op.stop());
    await op.waitReady();
    await waitFor(
      'the start-up look done',
      async () =>
        ((await op.metric('deployment_restart_controller_changes_waiting_total')) ?? 1) === 0 &&
        ((await op.metric('deployment_restart_controller_deployments_total')) ?? 0) >= 1,
      { timeoutMs: 20_000 },
    );
    assert.equal(await trigger(), restartedAgain);
    assert.equal(await restartsEvents(), 2);
  });
});
