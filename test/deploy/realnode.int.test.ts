// Stateward as users run it: the image built from the project's Dockerfile,
// installed with `kubectl apply -k` of the `all` overlay into a namespace of
// the user's, running as a pod on a real node (kubelet, containerd, runc,
// CNI, kube-proxy) of the local cluster. The pod becomes Ready through its
// own probes, as the shipped non-root user on a read-only root filesystem,
// talks to the apiserver with the projected ServiceAccount token only, is
// never refused by RBAC, and the apiserver reaches its no-downscale webhook
// through the Service. Then teardown leaves nothing of the node behind.
//
// This file starts a cluster of its own with the real node (one machine has
// one; the shared test cluster stays as every other file knows it) and needs
// root and the Debian packages .ci/run installs.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { AppsV1Api, CoreV1Api, CoordinationV1Api, type V1Pod } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { LocalCluster } from '../cluster/cluster.ts';
import { ensureStatewardImage, type BuiltImage } from '../cluster/image.ts';
import { processAlive, processesMentioning } from '../cluster/lock.ts';
import { nodeBinariesDir } from '../cluster/nodebuild.ts';
import { waitFor } from '../cluster/probe.ts';
import { KUBELET_SYSCTLS } from '../cluster/realnode-config.ts';
import { REAL_NODE, releaseMachineLock } from '../cluster/realnode-host.ts';
import { writeUserOverlay } from '../support/user-overlay.ts';
import { servedFingerprint, storedFingerprint } from '../support/webhooks.ts';
import { evict } from '../support/evictions.ts';
import {
  changeTemplate,
  createGroup,
  InvariantMonitor,
  waitGroupSettled,
  waitRolledOut,
  ZONES,
} from '../support/rollout-group.ts';
import { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type Pod } from '../../src/runtime/kube/types.ts';
import { helm } from '../tools/helm.ts';

const exec = promisify(execFile);
const CHART = fileURLToPath(new URL('../../deploy/helm/stateward', import.meta.url));
const log = (line: string) => process.stderr.write(`# [real node] ${line}\n`);

/** What the machine looks like without a real node, to compare with after teardown. */
interface MachineState {
  /** Another cluster's real node was up: the machine's settings were its, not the machine's own. */
  otherRealNode: boolean;
  interfaces: string[];
  sysctls: Record<string, string>;
  kubeletSysctls: Record<string, string>;
}

const SYSCTLS = ['net/ipv4/ip_forward', 'net/bridge/bridge-nf-call-iptables'];

function machineState(): MachineState {
  return {
    otherRealNode: existsSync(REAL_NODE.lockDir),
    interfaces: readdirSync('/sys/class/net').sort(),
    sysctls: Object.fromEntries(SYSCTLS.map((s) => [s, readFileSync(`/proc/sys/${s}`, 'utf8').trim()])),
    kubeletSysctls: Object.fromEntries(
      Object.keys(KUBELET_SYSCTLS).map((s) => [s, readFileSync(`/proc/sys/${s}`, 'utf8').trim()]),
    ),
  };
}

function mountsUnder(dirs: string[]): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((m) => dirs.some((d) => m === d || m.startsWith(`${d}/`)));
}

function kubepodsCgroups(): string[] {
  return readdirSync('/sys/fs/cgroup')
    .map((c) => join('/sys/fs/cgroup', c, 'kubepods'))
    .concat('/sys/fs/cgroup/kubepods')
    .filter((p) => existsSync(p));
}

/** Pids in the kubelet's pod cgroups: the containers' processes. */
function podProcesses(): number[] {
  const pids = new Set<number>();
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name === 'cgroup.procs')
        for (const pid of readFileSync(join(dir, e.name), 'utf8').split('\n').filter(Boolean)) pids.add(Number(pid));
    }
  };
  for (const root of kubepodsCgroups()) walk(root);
  return [...pids];
}

/** A pod's memory working set from its cgroup (usage less inactive file pages), as the kubelet reports it. */
function podWorkingSet(uid: string): number {
  const find = (dir: string): string | undefined => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      if (e.name === `pod${uid}`) return join(dir, e.name);
      const found = find(join(dir, e.name));
      if (found) return found;
    }
    return undefined;
  };
  const v1 = existsSync('/sys/fs/cgroup/memory/kubepods');
  const dir = find(v1 ? '/sys/fs/cgroup/memory/kubepods' : '/sys/fs/cgroup/kubepods');
  if (!dir) return 0;
  const usage = Number(readFileSync(join(dir, v1 ? 'memory.usage_in_bytes' : 'memory.current'), 'utf8'));
  const inactive = Number(
    new RegExp(`^${v1 ? 'total_inactive_file' : 'inactive_file'} (\\d+)$`, 'm').exec(
      readFileSync(join(dir, 'memory.stat'), 'utf8'),
    )?.[1] ?? 0,
  );
  return Math.max(0, usage - inactive);
}

/** `out` is both streams, for messages; `stdout` alone, for what a command inside a container printed. */
async function kubectl(kubeconfig: string, ...args: string[]): Promise<{ ok: boolean; out: string; stdout: string }> {
  try {
    const { stdout, stderr } = await exec('kubectl', ['--kubeconfig', kubeconfig, ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });
    return { ok: true, out: stdout + stderr, stdout };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}`, stdout: e.stdout ?? '' };
  }
}

/** The caBundle of a ValidatingWebhookConfiguration's first webhook ('' when unset). */
async function caBundleOf(kubeconfig: string, config: string): Promise<string> {
  const got = await kubectl(
    kubeconfig,
    'get',
    'validatingwebhookconfiguration',
    config,
    '-o',
    'jsonpath={.webhooks[0].clientConfig.caBundle}',
  );
  return got.ok ? got.stdout : '';
}

/** A StatefulSet of two kwok pods labelled for no-downscale. */
function noDownscaleStatefulSet() {
  return {
    metadata: { name: 'ingester', labels: { 'grafana.com/no-downscale': 'true' } },
    spec: {
      replicas: 2,
      serviceName: 'ingester',
      selector: { matchLabels: { app: 'ingester' } },
      template: {
        metadata: { labels: { app: 'ingester' } },
        spec: { containers: [{ name: 'main', image: 'example.invalid/app:1' }] },
      },
    },
  };
}

/**
 * `kubectl scale` once a webhook answers: a new webhook Service routes only
 * once the endpoint controller and kube-proxy have caught up with the Ready
 * pods (seconds), and until then the apiserver's call is refused.
 */
function answeredScale(kubeconfig: string, namespace: string, statefulSet: string, replicas: number) {
  return waitFor(
    `a webhook answer through the Service for a scale of ${statefulSet} to ${replicas}`,
    async () => {
      const scaled = await kubectl(
        kubeconfig,
        '-n',
        namespace,
        'scale',
        'statefulset',
        statefulSet,
        `--replicas=${replicas}`,
      );
      return scaled.out.includes('failed calling webhook') ? undefined : scaled;
    },
    { timeoutMs: 30_000, intervalMs: 500 },
  );
}

const isReady = (pod: V1Pod) => pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

describe('Stateward on a real node', { timeout: 60 * 60_000 }, () => {
  /** The user's namespace of the `all` overlay install, which the tests after the first use too. */
  const namespace = `stateward-${process.pid}`;
  let cluster: LocalCluster | undefined;
  let image: BuiltImage;
  let baseline: MachineState;

  before(
    async () => {
      baseline = machineState();
      let started = Date.now();
      image = await ensureStatewardImage({ log });
      log(
        `image ${image.name}: ${(image.sizeBytes / 1024 / 1024).toFixed(0)} MiB, ${image.buildMs > 0 ? `built in ${(image.buildMs / 1000).toFixed(1)} s` : 'cached'} (${((Date.now() - started) / 1000).toFixed(1)} s)`,
      );
      started = Date.now();
      cluster = await LocalCluster.start({
        name: `realnode-${process.pid}`,
        // Two per zone: a drained node's pods have somewhere in their zone to go.
        nodesPerZone: 2,
        realNode: true,
        realNodeImages: [image.archive],
        log,
      });
      log(`cluster with the real node up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    },
    // A cold machine builds the kubelet, containerd, crictl and the images first.
    { timeout: 40 * 60_000 },
  );

  after(async () => {
    await cluster?.teardown();
  });

  /**
   * `kubectl rollout restart` of the operator's Deployment (two replicas, leader
   * election, a PodDisruptionBudget) in `namespace` while the 3-zone group there
   * rolls: the group must finish with one zone disrupted at a time (the
   * independent monitor) and the Lease must move from an old pod to a new one.
   */
  async function restartOperatorDuringGroupRollout(namespace: string, installedBy: string): Promise<void> {
    assert.ok(cluster);
    const kubeconfig = cluster.kubeconfigPath;
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
    const leases = cluster.clientNodeConfig().makeApiClient(CoordinationV1Api);
    await waitGroupSettled(kube, namespace, 60_000);
    const monitor = new InvariantMonitor(
      kube,
      namespace,
      Object.fromEntries(ZONES.map((z) => [`ingester-zone-${z}`, 1])),
    );
    await monitor.start();
    // The independent view of leadership: every holder the Lease names, in order.
    const holders: string[] = [];
    let watching = true;
    // And the operator pods' memory working set (cgroup) while the group rolls.
    let peakWorkingSet = 0;
    const watchLease = (async () => {
      while (watching) {
        const holder = await leases
          .readNamespacedLease({ namespace, name: 'stateward-leader' })
          .then((l) => l.spec?.holderIdentity ?? '')
          .catch(() => undefined);
        if (holder !== undefined && holders.at(-1) !== holder) holders.push(holder);
        const operators = await kube
          .list<Pod>(resources.pods, { namespace, labelSelector: 'app.kubernetes.io/name=stateward' })
          .catch(() => undefined);
        for (const pod of operators?.items ?? [])
          peakWorkingSet = Math.max(peakWorkingSet, podWorkingSet(pod.metadata?.uid ?? ''));
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    try {
      await waitFor('the Lease read', () => holders.length > 0, { timeoutMs: 10_000 });
      const before = holders[0]!;
      for (const zone of ZONES) await changeTemplate(kube, namespace, zone, 'restart-during-rollout');
      await waitFor('the group rollout under way', () => monitor.transitions.length > 0, { timeoutMs: 30_000 });
      const restartAt = Date.now();
      const restarted = await kubectl(kubeconfig, '-n', namespace, 'rollout', 'restart', 'deployment/stateward');
      assert.ok(restarted.ok, restarted.out);
      const status = await kubectl(
        kubeconfig,
        '-n',
        namespace,
        'rollout',
        'status',
        'deployment/stateward',
        '--timeout=180s',
      );
      assert.ok(status.ok, status.out);
      await waitRolledOut(kube, namespace, 180_000);
      log(
        `${installedBy}: operator restarted during a group rollout; Lease holders: ${holders.join(' → ')}; peak memory working set of an operator pod ${(peakWorkingSet / 1024 / 1024).toFixed(0)} MiB (requests 128 MiB, limit 512 MiB)`,
      );
      assert.deepEqual(monitor.violations, [], monitor.report());
      assert.equal(monitor.maxDisruptedAtOnce, 1, 'one zone disrupted at a time');
      const after = monitor.transitions.filter((tr) => tr.at > restartAt).length;
      assert.ok(after > 0, 'the group was still rolling when the operator restarted');
      log(
        `${installedBy}: ${after} of ${monitor.transitions.length} pod transitions came after the operator's restart began`,
      );
      // The Lease goes from an old pod to a new one: released on SIGTERM (no holder until a new
      // pod's next try, within -leader-election.retry-period, 2 s + 20% jitter), or taken once it
      // expires (-leader-election.lease-duration, 15 s after the last renewal) when the old leader
      // could not release it. `rollout status` is done once the old pods are terminating, so the
      // move may still be under way here (a clean-clone CI run looked before it was done).
      const leadership = async () => {
        const pods = (
          await kube.list<Pod>(resources.pods, { namespace, labelSelector: 'app.kubernetes.io/name=stateward' })
        ).items
          .filter((p) => !p.metadata?.deletionTimestamp)
          .map((p) => p.metadata!.name!);
        const last = holders.filter(Boolean).at(-1) ?? '';
        return { pods, last, moved: last !== before && pods.some((p) => last.startsWith(`${p}_`)) };
      };
      await waitFor('leadership to move to a new pod', async () => (await leadership()).moved, {
        timeoutMs: 60_000,
        intervalMs: 250,
      }).catch(() => undefined);
      const { pods, last } = await leadership();
      assert.notEqual(last, before, `leadership moved (Lease holders: ${holders.join(' → ')})`);
      assert.ok(
        pods.some((p) => last.startsWith(`${p}_`)),
        `the leader ${last} is one of the new pods ${pods.join(', ')}`,
      );
    } finally {
      watching = false;
      await watchLease;
      await monitor.stop();
    }
  }

  it('kubectl apply -k of the all overlay: Ready by its probes, non-root, read-only root, in-cluster token, no RBAC denial; the apiserver calls no-downscale through the Service', async () => {
    assert.ok(cluster);
    const kubeconfig = cluster.kubeconfigPath;
    // The kubelet set its kernel tunables in its own mount namespace only.
    for (const [key, value] of Object.entries(baseline.kubeletSysctls))
      assert.equal(readFileSync(`/proc/sys/${key}`, 'utf8').trim(), value, `${key} unchanged on the machine`);
    const dir = await mkdtemp(join(tmpdir(), 'stateward-realnode-'));
    try {
      await writeUserOverlay(dir, { namespace, overlay: 'all', image: image.name });
      const applied = Date.now();
      // Server-side: the CRDs are too large for client-side apply's annotation.
      const apply = await kubectl(kubeconfig, 'apply', '--server-side', '-k', dir);
      assert.ok(apply.ok, apply.out);

      const kc = cluster.clientNodeConfig();
      const core = kc.makeApiClient(CoreV1Api);
      const apps = kc.makeApiClient(AppsV1Api);
      const pods = await waitFor(
        'both operator pods Ready on the real node',
        async () => {
          const list = await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/name=stateward' });
          const ready = list.items.filter((p) => isReady(p) && !p.metadata?.deletionTimestamp);
          return ready.length === 2 ? ready : undefined;
        },
        { timeoutMs: 180_000, intervalMs: 250 },
      );
      log(`operator pods Ready ${((Date.now() - applied) / 1000).toFixed(1)} s after kubectl apply`);

      for (const pod of pods) {
        const name = pod.metadata!.name!;
        const spec = pod.spec;
        assert.ok(spec);
        assert.equal(spec.nodeName, REAL_NODE.name, `${name} runs on the real node`);
        const container = spec.containers[0]!;
        assert.equal(container.image, image.name);
        // Ready is the kubelet's verdict from the shipped readinessProbe.
        assert.equal(container.readinessProbe?.httpGet?.path, '/ready');
        assert.equal(container.livenessProbe?.httpGet?.path, '/healthz');
        assert.equal(pod.status?.containerStatuses?.[0]?.restartCount, 0, `${name} never restarted`);
        // No kubeconfig anywhere: the only credential is the projected token.
        assert.ok(!(container.args ?? []).some((a) => a.includes('config-file')), 'no kubeconfig flag');
        assert.ok(!(container.env ?? []).some((e) => e.name === 'KUBECONFIG'), 'no KUBECONFIG');
        assert.ok(
          spec.volumes?.some((v) => v.projected?.sources?.some((s) => s.serviceAccountToken)),
          'the ServiceAccount token is a projected volume',
        );

        // Inside the container (kubectl exec: apiserver -> kubelet -> containerd):
        // the user, the root filesystem, the token, the in-cluster address.
        const probe = await kubectl(
          kubeconfig,
          '-n',
          namespace,
          'exec',
          name,
          '--',
          '/nodejs/bin/node',
          '-e',
          `const fs = require('node:fs');
           let write = 'written';
           try { fs.writeFileSync('/app/probe', 'x'); } catch (e) { write = e.code; }
           const root = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\\n').find((l) => l.split(' ')[4] === '/');
           process.stdout.write(JSON.stringify({
             uid: process.getuid(), gid: process.getgid(), write,
             rootOptions: root.split(' ')[5],
             token: fs.existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token'),
             host: process.env.KUBERNETES_SERVICE_HOST, kubeconfig: process.env.KUBECONFIG ?? null,
             mmapThreshold: process.env.MALLOC_MMAP_THRESHOLD_ ?? null,
           }));`,
        );
        assert.ok(probe.ok, probe.out);
        const inside = JSON.parse(probe.stdout) as Record<string, unknown>;
        assert.equal(inside['uid'], 65532, 'the shipped non-root user');
        assert.equal(inside['gid'], 65532);
        assert.equal(inside['write'], 'EROFS', 'the root filesystem is read-only');
        assert.match(String(inside['rootOptions']), /^ro\b/);
        assert.equal(inside['token'], true);
        assert.equal(inside['host'], '10.96.0.1', 'the apiserver through the kubernetes Service');
        assert.equal(inside['kubeconfig'], null);
        assert.equal(inside['mmapThreshold'], '16384', "the image's malloc settings (Dockerfile ENV)");
      }

      // Leader election worked: one Lease holder among the pods (the token was enough).
      const lease = await waitFor(
        'a leader',
        async () => {
          const l = await kc
            .makeApiClient(CoordinationV1Api)
            .readNamespacedLease({ namespace, name: 'stateward-leader' });
          return l.spec?.holderIdentity ? l : undefined;
        },
        { timeoutMs: 60_000 },
      );
      assert.ok(
        pods.some((p) => lease.spec!.holderIdentity!.startsWith(`${p.metadata!.name!}_`)),
        `the leader ${lease.spec?.holderIdentity} is one of the pods`,
      );

      // The apiserver calls the webhook through the Service once the operator has injected its CA.
      await waitFor(
        'the CA injected into stateward-no-downscale',
        async () => (await caBundleOf(kubeconfig, 'stateward-no-downscale')).length > 100,
        { timeoutMs: 60_000 },
      );
      await apps.createNamespacedStatefulSet({ namespace, body: noDownscaleStatefulSet() });
      const up = await answeredScale(kubeconfig, namespace, 'ingester', 3);
      assert.ok(up.ok, `a scale-up passes the webhook: ${up.out}`);
      const denied = await kubectl(kubeconfig, '-n', namespace, 'scale', 'statefulset', 'ingester', '--replicas=1');
      assert.equal(denied.ok, false, denied.out);
      assert.match(
        denied.out,
        new RegExp(
          `admission webhook "no-downscale\\.stateward\\.dev" denied the request: downscale of statefulsets/ingester in ${namespace} from 3 to 1 replicas is not allowed because it has the label 'grafana\\.com/no-downscale=true'`,
        ),
      );

      // The kubelet's stats through the apiserver's node proxy (authenticated and authorised by webhook).
      const summary = await kubectl(kubeconfig, 'get', '--raw', `/api/v1/nodes/${REAL_NODE.name}/proxy/stats/summary`);
      assert.ok(summary.ok, summary.out);
      const stats = JSON.parse(summary.out) as { node: { nodeName: string } };
      assert.equal(stats.node.nodeName, REAL_NODE.name);
      for (const pod of pods)
        log(
          `${pod.metadata!.name}: memory working set ${(podWorkingSet(pod.metadata!.uid!) / 1024 / 1024).toFixed(0)} MiB at idle (requests 128 MiB, limit 512 MiB)`,
        );

      // The logs through the kubelet: no request of either replica refused by RBAC.
      for (const pod of pods) {
        const logs = await kubectl(kubeconfig, '-n', namespace, 'logs', pod.metadata!.name!);
        assert.ok(logs.ok, logs.out);
        assert.match(logs.out, /msg="starting stateward"/);
        const denials = logs.out.split('\n').filter((l) => /\b403\b|forbidden/i.test(l));
        assert.deepEqual(denials, [], `${pod.metadata!.name} was refused by RBAC`);
      }
      const allLogs = (
        await Promise.all(pods.map((p) => kubectl(kubeconfig, '-n', namespace, 'logs', p.metadata!.name!)))
      )
        .map((l) => l.out)
        .join('\n');
      assert.match(allLogs, /downscale not allowed/, 'the denial came from an operator pod');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('pod deletion: SIGTERM from the kubelet, a graceful exit well inside the grace period, the Lease released to the other replica', async () => {
    assert.ok(cluster);
    const kubeconfig = cluster.kubeconfigPath;
    const kc = cluster.clientNodeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const leases = kc.makeApiClient(CoordinationV1Api);
    const holder = async () =>
      (await leases.readNamespacedLease({ namespace, name: 'stateward-leader' })).spec?.holderIdentity ?? '';
    const pods = (
      await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/name=stateward' })
    ).items.filter((p) => isReady(p) && !p.metadata?.deletionTimestamp);
    assert.equal(pods.length, 2);
    const leaderIdentity = await holder();
    const leader = pods.find((p) => leaderIdentity.startsWith(`${p.metadata!.name!}_`));
    assert.ok(leader, `the leader ${leaderIdentity} is one of the pods`);
    const grace = leader.spec?.terminationGracePeriodSeconds ?? 30;

    // Its log, followed through the kubelet to the container's end.
    const follow = spawn('kubectl', [
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      'logs',
      '-f',
      leader.metadata!.name!,
    ]);
    let output = '';
    follow.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const followed = new Promise<void>((resolve) => follow.once('close', () => resolve()));
    await waitFor('the log followed', () => output.includes('starting stateward'), { timeoutMs: 10_000 });

    const deleted = Date.now();
    const del = await kubectl(kubeconfig, '-n', namespace, 'delete', 'pod', leader.metadata!.name!, '--wait=false');
    assert.ok(del.ok, del.out);
    // The standby, or the replacement pod if it asks first: the Lease is free at once.
    const holders: string[] = [];
    const takenOver = await waitFor(
      'another replica holds the Lease',
      async () => {
        const now = await holder();
        if (holders.at(-1) !== now) holders.push(now);
        return now !== '' && now !== leaderIdentity ? Date.now() - deleted : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const gone = await waitFor(
      'the deleted pod gone',
      async () =>
        (await core.listNamespacedPod({ namespace })).items.some((p) => p.metadata?.uid === leader.metadata?.uid)
          ? undefined
          : Date.now() - deleted,
      { timeoutMs: (grace + 30) * 1000, intervalMs: 100 },
    );
    await followed;
    log(
      `leader pod deleted: another replica led ${(takenOver / 1000).toFixed(1)} s later (holders seen: ${holders.join(' → ') || 'none'}), the pod was gone after ${(gone / 1000).toFixed(1)} s (grace ${grace} s)`,
    );
    assert.match(output, /msg="shutting down".* reason=SIGTERM/, 'the kubelet sent SIGTERM');
    assert.match(output, /msg="released the lease"/);
    assert.match(output, /msg=stopped/, 'it stopped by itself');
    // A lease not released is taken only once it expires: 15 s after its last renewal.
    assert.ok(takenOver < 10_000, `taken over after ${takenOver} ms: released, not expired`);
    assert.ok(gone < grace * 1000, `gone after ${gone} ms, inside the ${grace} s grace: not killed at its end`);

    // The Deployment brings the second replica back.
    await waitFor(
      'two operator pods Ready again',
      async () =>
        (await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/name=stateward' })).items.filter(
          (p) => isReady(p) && !p.metadata?.deletionTimestamp,
        ).length === 2,
      { timeoutMs: 120_000, intervalMs: 250 },
    );
  });

  it('certificate Secret deleted while running: issued anew, injected, served, and every webhook call answered meanwhile', async () => {
    assert.ok(cluster);
    const kubeconfig = cluster.kubeconfigPath;
    const core = cluster.clientNodeConfig().makeApiClient(CoreV1Api);
    const secretName = 'rollout-operator-self-signed-certificate';
    const caOf = async () => {
      try {
        return (await core.readNamespacedSecret({ namespace, name: secretName })).data?.['ca'];
      } catch {
        return undefined;
      }
    };
    const caBundle = () => caBundleOf(kubeconfig, 'stateward-no-downscale');
    const firstCa = await caOf();
    assert.ok(firstCa);
    assert.equal(await caBundle(), firstCa, 'the current CA is the one injected');

    const deleted = await kubectl(kubeconfig, '-n', namespace, 'delete', 'secret', secretName);
    assert.ok(deleted.ok, deleted.out);
    const started = Date.now();
    const failures: string[] = [];
    let calls = 0;
    let done: number | undefined;
    while (done === undefined && Date.now() - started < 90_000) {
      // Through the Service to either pod: a labelled downscale must be denied, never fail to be decided.
      const scaled = await kubectl(
        kubeconfig,
        '-n',
        namespace,
        'scale',
        'statefulset',
        'ingester',
        '--replicas=1',
        '--dry-run=server',
      );
      calls++;
      if (scaled.ok || !scaled.out.includes('denied the request: downscale of statefulsets/ingester'))
        failures.push(scaled.out.trim());
      const secret = await core.readNamespacedSecret({ namespace, name: secretName }).catch(() => undefined);
      const [ca, cert] = [secret?.data?.['ca'], secret?.data?.['cert']];
      if (!ca || !cert || ca === firstCa || (await caBundle()) !== ca) continue;
      // Both pods serve the new certificate (the host reaches pod addresses over the node's bridge).
      const want = storedFingerprint(cert);
      const ips = (await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/name=stateward' })).items
        .filter((p) => isReady(p) && !p.metadata?.deletionTimestamp)
        .map((p) => p.status?.podIP ?? '');
      const served = await Promise.all(ips.map((ip) => servedFingerprint(ip, 8443).catch(() => undefined)));
      if (served.length === 2 && served.every((f) => f === want)) done = Date.now() - started;
    }
    assert.ok(done !== undefined, 'a new CA issued, injected alone and served by both pods within 90 s');
    log(`certificate Secret deleted: a new CA injected alone after ${(done / 1000).toFixed(1)} s, ${calls} calls`);
    assert.deepEqual(failures, [], `${failures.length} of ${calls} webhook calls not answered with the denial`);
    assert.ok(calls >= 10, `${calls} calls`);
  });

  it('prepare-downscale through the webhook Service: the leaving pod, a real container on the node, is called at its own address before the downscale is allowed', async () => {
    assert.ok(cluster);
    const kubeconfig = cluster.kubeconfigPath;
    const apps = cluster.clientNodeConfig().makeApiClient(AppsV1Api);
    const core = cluster.clientNodeConfig().makeApiClient(CoreV1Api);
    // Pods that answer: the Stateward image (the only image the node has) running a
    // few lines of HTTP server that logs each request it gets.
    const server = `require('node:http').createServer((q, s) => {
      console.log(q.method + ' ' + q.url); s.end('ok');
    }).listen(8080, () => console.log('listening'));`;
    await apps.createNamespacedStatefulSet({
      namespace,
      body: {
        metadata: {
          name: 'prepared',
          labels: { 'grafana.com/prepare-downscale': 'true' },
          annotations: {
            'grafana.com/prepare-downscale-http-path': 'prepare-shutdown',
            'grafana.com/prepare-downscale-http-port': '8080',
          },
        },
        spec: {
          replicas: 2,
          serviceName: 'prepared',
          podManagementPolicy: 'Parallel',
          selector: { matchLabels: { app: 'prepared' } },
          template: {
            metadata: { labels: { app: 'prepared' } },
            spec: {
              nodeSelector: REAL_NODE.labels,
              tolerations: [{ key: REAL_NODE.taint.key, operator: 'Exists', effect: REAL_NODE.taint.effect }],
              containers: [
                {
                  name: 'main',
                  image: image.name,
                  imagePullPolicy: 'Never',
                  command: ['/nodejs/bin/node', '-e', server],
                  ports: [{ containerPort: 8080 }],
                },
              ],
            },
          },
        },
      },
    });
    try {
      await waitFor(
        'both prepared pods Ready on the real node',
        async () =>
          (await core.listNamespacedPod({ namespace, labelSelector: 'app=prepared' })).items.filter(
            (p) => isReady(p) && p.status?.podIP,
          ).length === 2,
        { timeoutMs: 120_000, intervalMs: 250 },
      );
      const scaled = await answeredScale(kubeconfig, namespace, 'prepared', 1);
      assert.ok(scaled.ok, `the downscale allowed once prepared: ${scaled.out}`);
      const leaving = await kubectl(kubeconfig, '-n', namespace, 'logs', 'prepared-1');
      assert.match(leaving.out, /^POST \/prepare-shutdown$/m, 'the leaving pod was asked to prepare');
      const staying = await kubectl(kubeconfig, '-n', namespace, 'logs', 'prepared-0');
      assert.doesNotMatch(staying.out, /prepare-shutdown/, 'the staying pod was not');
      const set = await apps.readNamespacedStatefulSet({ namespace, name: 'prepared' });
      assert.equal(set.spec?.replicas, 1);
      // Copied onto the StatefulSet once the downscale landed (the record is written before the allow elsewhere).
      const recorded = await waitFor(
        'last-downscale on the StatefulSet',
        async () =>
          (await apps.readNamespacedStatefulSet({ namespace, name: 'prepared' })).metadata?.annotations?.[
            'grafana.com/last-downscale'
          ],
        { timeoutMs: 30_000 },
      );
      assert.match(
        recorded,
        /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/,
        'the downscale recorded, as rollout-operator records it',
      );
    } finally {
      await apps.deleteNamespacedStatefulSet({ namespace, name: 'prepared' }).catch(() => undefined);
    }
  });

  it('kubectl drain under a ZoneAwarePodDisruptionBudget, through the webhook Service: refused while another zone is down, completed once it is back, never two zones at once', async () => {
    assert.ok(cluster);
    const kubeconfig = cluster.kubeconfigPath;
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
    // Zone b's pods take 8 s to be Ready again: long enough to see a drain wait for them.
    await createGroup(kube, namespace, {
      all: { replicas: 2, readyDelay: '1s' },
      b: { replicas: 2, readyDelay: '8s' },
    });
    const dir = await mkdtemp(join(tmpdir(), 'stateward-realnode-zpdb-'));
    try {
      // Created through the zpdb-validation webhook, behind the same Service.
      const file = join(dir, 'zpdb.yaml');
      await writeFile(
        file,
        stringify({
          apiVersion: 'rollout-operator.grafana.com/v1',
          kind: 'ZoneAwarePodDisruptionBudget',
          metadata: { name: 'ingester', namespace },
          spec: { maxUnavailable: 1, selector: { matchLabels: { 'rollout-group': 'ingester' } } },
        }),
      );
      const created = await kubectl(kubeconfig, 'apply', '-f', file);
      assert.ok(created.ok, created.out);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    await waitGroupSettled(kube, namespace, 60_000);
    const monitor = new InvariantMonitor(
      kube,
      namespace,
      Object.fromEntries(ZONES.map((z) => [`ingester-zone-${z}`, 1])),
    );
    await monitor.start();
    try {
      const pods = (await kube.list<Pod>(resources.pods, { namespace })).items;
      const zoneB = pods.find((p) => p.metadata?.name?.startsWith('ingester-zone-b-'))!;
      const nodeA = pods.find((p) => p.metadata?.name?.startsWith('ingester-zone-a-'))!.spec!.nodeName!;
      const first = await evict(kube, namespace, zoneB.metadata!.name!);
      assert.equal(first.code, 201, `zone b's eviction allowed: ${first.message}`);
      const drained = await kubectl(
        kubeconfig,
        'drain',
        nodeA,
        '--pod-selector=rollout-group=ingester',
        '--ignore-daemonsets',
        '--delete-emptydir-data',
        '--timeout=120s',
      );
      await kubectl(kubeconfig, 'uncordon', nodeA);
      assert.ok(drained.ok, drained.out);
      // kubectl was refused (429) and retried by itself until zone b was back.
      assert.match(drained.out, /error when evicting pods\/"ingester-zone-a-\d+".*will retry after 5s/);
      assert.match(drained.out, /1 pod (not ready|unknown) in ingester-zone-b/);
      assert.match(drained.out, new RegExp(`node/${nodeA} drained`));
      await waitGroupSettled(kube, namespace, 60_000);
      assert.deepEqual(monitor.violations, [], monitor.report());
      assert.equal(monitor.maxDisruptedAtOnce, 1, 'one zone disrupted at a time, and one was');
    } finally {
      await monitor.stop();
    }
  });

  it("kubectl rollout restart of the operator's own Deployment during a group rollout: the group finishes, one zone at a time, the Lease passed on", async () => {
    // The group of the drain test, under its ZPDB (zone b's pods take 8 s to be Ready).
    await restartOperatorDuringGroupRollout(namespace, 'kubectl apply -k');
  });

  it("helm install of the chart with webhooks on and two replicas: Ready by its probes, non-root, read-only root, no RBAC denial; no-downscale through its Service; a rollout restart under the chart's PodDisruptionBudget during a group rollout; helm uninstall leaves nothing", async () => {
    assert.ok(cluster);
    const kubeconfig = cluster.kubeconfigPath;
    const release = `stateward-helm-${process.pid}`;
    const [repository, tag] = image.name.split(/:(?=[^:]+$)/) as [string, string];
    const started = Date.now();
    const installed = await helm(
      '--kubeconfig',
      kubeconfig,
      'install',
      'stateward',
      CHART,
      '-n',
      release,
      '--create-namespace',
      '--set',
      `image.repository=${repository}`,
      '--set',
      `image.tag=${tag}`,
      // Loaded into the node's containerd; there is no registry to pull from.
      '--set',
      'image.pullPolicy=Never',
      '--set',
      'webhooks.enabled=true',
      // Two replicas with leader election, under the chart's PodDisruptionBudget.
      '--set',
      'replicas=2',
      '--set',
      'leaderElection.enabled=true',
      '--set-json',
      `nodeSelector=${JSON.stringify(REAL_NODE.labels)}`,
      '--set-json',
      `tolerations=${JSON.stringify([{ key: REAL_NODE.taint.key, operator: 'Exists', effect: REAL_NODE.taint.effect }])}`,
      '--wait',
      '--timeout=3m',
    );
    assert.ok(installed.ok, installed.out);
    log(`helm install --wait done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const kc = cluster.clientNodeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const apps = kc.makeApiClient(AppsV1Api);
    const pods = (
      await core.listNamespacedPod({ namespace: release, labelSelector: 'app.kubernetes.io/name=stateward' })
    ).items.filter((p) => isReady(p) && !p.metadata?.deletionTimestamp);
    assert.equal(pods.length, 2, 'both operator pods Ready by their probes');
    const pod = pods[0]!;
    assert.equal(pod.spec?.nodeName, REAL_NODE.name);
    assert.equal(pod.status?.containerStatuses?.[0]?.restartCount, 0);
    const inside = await kubectl(
      kubeconfig,
      '-n',
      release,
      'exec',
      pod.metadata!.name!,
      '--',
      '/nodejs/bin/node',
      '-e',
      `let write = 'written';
       try { require('node:fs').writeFileSync('/app/probe', 'x'); } catch (e) { write = e.code; }
       process.stdout.write(JSON.stringify({ uid: process.getuid(), write }));`,
    );
    assert.ok(inside.ok, inside.out);
    // kubectl may add its own lines on stderr (a container picked by default, a stream closing).
    assert.deepEqual(JSON.parse(inside.stdout), { uid: 65532, write: 'EROFS' });

    // Its no-downscale webhook, named for its namespace, called through its Service once the CA is in.
    const config = `stateward-no-downscale-${release}`;
    await waitFor(`the CA injected into ${config}`, async () => (await caBundleOf(kubeconfig, config)).length > 100, {
      timeoutMs: 60_000,
    });
    await apps.createNamespacedStatefulSet({ namespace: release, body: noDownscaleStatefulSet() });
    const denied = await answeredScale(kubeconfig, release, 'ingester', 1);
    assert.equal(denied.ok, false, denied.out);
    assert.match(
      denied.out,
      /admission webhook "no-downscale\.stateward\.dev" denied the request: downscale of statefulsets\/ingester/,
    );
    const logs = (await Promise.all(pods.map((p) => kubectl(kubeconfig, '-n', release, 'logs', p.metadata!.name!))))
      .map((l) => l.out)
      .join('\n');
    assert.match(logs, /downscale not allowed/, 'the denial came from a chart pod');
    assert.deepEqual(
      logs.split('\n').filter((l) => /\b403\b|forbidden/i.test(l)),
      [],
      'no request refused by RBAC',
    );

    // High availability as the chart installs it: its PodDisruptionBudget, and
    // a rollout restart of the operator while a group in its namespace rolls.
    const pdb = await kubectl(
      kubeconfig,
      '-n',
      release,
      'get',
      'pdb',
      'stateward',
      '-o',
      'jsonpath={.spec.maxUnavailable}',
    );
    assert.equal(pdb.out, '1', `the chart's PodDisruptionBudget: ${pdb.out}`);
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
    await createGroup(kube, release, { all: { replicas: 2, readyDelay: '2s' } });
    await restartOperatorDuringGroupRollout(release, 'helm install');

    const uninstalled = await helm(
      '--kubeconfig',
      kubeconfig,
      'uninstall',
      'stateward',
      '-n',
      release,
      '--wait',
      '--timeout=2m',
    );
    assert.ok(uninstalled.ok, uninstalled.out);
    const left = await kubectl(
      kubeconfig,
      'get',
      'validatingwebhookconfigurations,mutatingwebhookconfigurations,clusterroles,clusterrolebindings',
      '-o',
      'name',
    );
    assert.ok(left.ok, left.out);
    assert.deepEqual(
      left.out.split('\n').filter((l) => l.includes(release)),
      [],
      'no cluster-scoped object of the release left',
    );
    await kubectl(kubeconfig, 'delete', 'namespace', release, '--wait=false');
  });

  it('teardown leaves no process, mount, interface, iptables chain, cgroup or directory behind', async (t) => {
    assert.ok(cluster);
    const node = cluster.realNode;
    assert.ok(node);
    const pids = [...Object.values(node.componentStatus()).map((c) => c.pid), ...podProcesses()].filter(
      (p): p is number => p !== undefined,
    );
    assert.ok(pids.length > 3, 'the node and its pods have processes');
    const { dir: binaries } = await nodeBinariesDir();
    const started = Date.now();
    // Keeping the machine's real-node lock until the checks are done: another
    // test run waiting for the real node cannot start one under our eyes.
    await cluster.teardown({ keepRealNodeLock: true });
    log(`teardown in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    cluster = undefined;
    t.after(releaseMachineLock);

    assert.deepEqual(
      pids.filter((p) => processAlive(p)),
      [],
      'every node and container process is gone',
    );
    assert.deepEqual(processesMentioning(binaries), [], 'nothing runs from the node binaries');
    assert.deepEqual(mountsUnder([REAL_NODE.varDir, REAL_NODE.runDir]), [], 'no mounts');
    const now = machineState();
    if (baseline.otherRealNode) {
      // Our start waited for it; what the machine looked like without one is unknown.
      log('another real node ran when this file started: interfaces and sysctls are checked by name only');
    } else {
      assert.deepEqual(now.interfaces, baseline.interfaces, 'the interfaces of before');
      assert.deepEqual(now.sysctls, baseline.sysctls, 'the sysctls of before');
    }
    for (const name of [REAL_NODE.bridge, 'cni0'])
      assert.ok(!existsSync(`/sys/class/net/${name}`), `no ${name} interface`);
    for (const tool of ['iptables-save', 'ip6tables-save']) {
      const { stdout } = await exec(tool);
      assert.deepEqual(
        stdout.split('\n').filter((l) => /^:KUBE-|-j KUBE-/.test(l)),
        [],
        `no KUBE-* chains or jumps in ${tool}`,
      );
    }
    assert.deepEqual(kubepodsCgroups(), [], 'no kubepods cgroups');
    for (const dir of [REAL_NODE.varDir, REAL_NODE.runDir]) assert.ok(!existsSync(dir), `${dir} removed`);
    const links = existsSync('/var/log/containers') ? readdirSync('/var/log/containers') : [];
    assert.deepEqual(
      links.filter((l) => l.startsWith('stateward-')),
      [],
      'no /var/log/containers links to the pods',
    );
  });
});
