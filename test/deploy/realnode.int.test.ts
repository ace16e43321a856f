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
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { AppsV1Api, CoreV1Api, CoordinationV1Api, type V1Pod } from '@kubernetes/client-node';
import { parse, stringify } from 'yaml';
import { LocalCluster } from '../cluster/cluster.ts';
import { ensureStatewardImage, type BuiltImage } from '../cluster/image.ts';
import { processAlive, processesMentioning } from '../cluster/lock.ts';
import { nodeBinariesDir } from '../cluster/nodebuild.ts';
import { waitFor } from '../cluster/probe.ts';
import { KUBELET_SYSCTLS } from '../cluster/realnode-config.ts';
import { REAL_NODE, releaseMachineLock } from '../cluster/realnode-host.ts';
import { KUSTOMIZE } from '../support/manifests.ts';

const exec = promisify(execFile);
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

async function kubectl(kubeconfig: string, ...args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const { stdout, stderr } = await exec('kubectl', ['--kubeconfig', kubeconfig, ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });
    return { ok: true, out: stdout + stderr };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

const isReady = (pod: V1Pod) => pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

describe('Stateward on a real node', { timeout: 60 * 60_000 }, () => {
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
        nodesPerZone: 1,
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

  it('kubectl apply -k of the all overlay: Ready by its probes, non-root, read-only root, in-cluster token, no RBAC denial; the apiserver calls no-downscale through the Service', async () => {
    assert.ok(cluster);
    const kubeconfig = cluster.kubeconfigPath;
    // The kubelet set its kernel tunables in its own mount namespace only.
    for (const [key, value] of Object.entries(baseline.kubeletSysctls))
      assert.equal(readFileSync(`/proc/sys/${key}`, 'utf8').trim(), value, `${key} unchanged on the machine`);
    const namespace = `stateward-${process.pid}`;
    const [repository, tag] = image.name.split(/:(?=[^:]+$)/) as [string, string];

    // A user's overlay: their namespace, our replacements (docs/getting-started.md),
    // the locally built image, and what puts the operator on the real node.
    const dir = await mkdtemp(join(tmpdir(), 'stateward-realnode-'));
    try {
      const ours = parse(await readFile(join(KUSTOMIZE, 'overlays', 'all', 'kustomization.yaml'), 'utf8')) as {
        replacements: unknown[];
      };
      await writeFile(
        join(dir, 'kustomization.yaml'),
        stringify({
          apiVersion: 'kustomize.config.k8s.io/v1beta1',
          kind: 'Kustomization',
          namespace,
          resources: [relative(dir, join(KUSTOMIZE, 'overlays', 'all'))],
          images: [{ name: 'ghcr.io/stateward/stateward', newName: repository, newTag: tag }],
          patches: [
            {
              target: { kind: 'Deployment', name: 'stateward' },
              patch: stringify([
                { op: 'add', path: '/spec/template/spec/nodeSelector', value: REAL_NODE.labels },
                {
                  op: 'add',
                  path: '/spec/template/spec/tolerations',
                  value: [{ key: REAL_NODE.taint.key, operator: 'Exists', effect: REAL_NODE.taint.effect }],
                },
                // Loaded into the node's containerd; there is no registry to pull from.
                { op: 'add', path: '/spec/template/spec/containers/0/imagePullPolicy', value: 'Never' },
              ]),
            },
          ],
          replacements: ours.replacements,
        }),
      );
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
           }));`,
        );
        assert.ok(probe.ok, probe.out);
        const inside = JSON.parse(probe.out) as Record<string, unknown>;
        assert.equal(inside['uid'], 65532, 'the shipped non-root user');
        assert.equal(inside['gid'], 65532);
        assert.equal(inside['write'], 'EROFS', 'the root filesystem is read-only');
        assert.match(String(inside['rootOptions']), /^ro\b/);
        assert.equal(inside['token'], true);
        assert.equal(inside['host'], '10.96.0.1', 'the apiserver through the kubernetes Service');
        assert.equal(inside['kubeconfig'], null);
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
        async () => {
          const config = await kubectl(
            kubeconfig,
            'get',
            'validatingwebhookconfiguration',
            'stateward-no-downscale',
            '-o',
            'jsonpath={.webhooks[0].clientConfig.caBundle}',
          );
          return config.ok && config.out.length > 100;
        },
        { timeoutMs: 60_000 },
      );
      await apps.createNamespacedStatefulSet({
        namespace,
        body: {
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
        },
      });
      const up = await kubectl(kubeconfig, '-n', namespace, 'scale', 'statefulset', 'ingester', '--replicas=3');
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
