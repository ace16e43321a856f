// `npm run demo`: the local cluster, a 3-zone StatefulSet rollout group,
// Stateward running against it, and a template change rolled out zone by
// zone with live progress. The cluster stays up afterwards for exploring.
// `npm run demo -- --in-cluster`: the same with Stateward as users run it,
// its image installed with `kubectl apply -k` and running as a pod on the
// local cluster's real node (needs root; docs/local-cluster.md).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { readKubeConfigFile, type KubeConfig } from '../src/runtime/kube/kubeconfig.ts';
import { resources, type Pod, type StatefulSet } from '../src/runtime/kube/types.ts';
import { Informer } from '../src/runtime/informer/informer.ts';
import { namespaceStatus } from '../src/status/cli.ts';
import { renderProgress } from '../src/status/render.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { freePorts } from '../test/cluster/ports.ts';
import { ensureStatewardImage } from '../test/cluster/image.ts';
import { writeUserOverlay } from '../test/support/user-overlay.ts';

const exec = promisify(execFile);
const root = join(import.meta.dirname, '..');
const namespace = 'stateward-demo';

async function clusterUp(realNode: boolean): Promise<string> {
  const child = spawn(
    process.execPath,
    [join(root, 'test/cluster/cli.ts'), 'up', ...(realNode ? ['--real-node'] : [])],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
  const kubeconfig = /^KUBECONFIG=(.+)$/m.exec(stdout)?.[1];
  if (code !== 0 || !kubeconfig) throw new Error(`the local cluster did not come up (exit ${code})`);
  return kubeconfig;
}

async function kubectl(kubeconfig: string, ...args: string[]): Promise<string> {
  const { stdout } = await exec('kubectl', ['--kubeconfig', kubeconfig, ...args]);
  return stdout;
}

/** The live progress, as `stateward status -watch` shows it: one bar per zone and why the group waits. */
async function progress(kube: KubeClient): Promise<{ text: string; done: boolean }> {
  const { report } = await namespaceStatus(kube, namespace);
  const group = report.namespaces[0]?.groups.find((g) => g.name === 'ingester');
  const done =
    group?.phase === 'complete' &&
    group.statefulSets.every(
      (s) => s.updated === s.replicas && s.ready === s.replicas && s.currentRevision === s.updateRevision,
    );
  // Without its timestamp line, so a frame is printed only when something changed.
  const text = renderProgress(report, process.stdout.columns || 100)
    .split('\n')
    .filter((l) => !l.startsWith('stateward status at '))
    .join('\n')
    .trim();
  return { text, done: Boolean(done) };
}

/**
 * Watches the demo's pods and keeps, per pod, the first deletionTimestamp
 * the API server stamped on it (when the operator's delete was accepted):
 * a timeline, unlike the operator's DeletingPod Events, which gather a
 * StatefulSet's later deletes into one Event written when it completes.
 */
async function watchDeletions(kube: KubeClient): Promise<{ table: (started: number) => Promise<string> }> {
  const seen = new Map<string, { pod: string; at: number }>();
  const pods = new Informer<Pod>({ client: kube, type: resources.pods, namespace });
  const note = (pod: Pod) => {
    const uid = pod.metadata?.uid ?? '';
    const stamp = pod.metadata?.deletionTimestamp;
    if (!stamp || seen.has(uid)) return;
    // deletionTimestamp is the delete's time plus the grace period: take the grace off.
    const at = Date.parse(String(stamp)) - (pod.metadata?.deletionGracePeriodSeconds ?? 0) * 1000;
    seen.set(uid, { pod: pod.metadata?.name ?? '', at });
  };
  pods.addHandlers({ onAdd: note, onUpdate: (_old, pod) => note(pod) });
  pods.start();
  await pods.waitForSync(AbortSignal.timeout(30_000));
  return {
    table: async (started) => {
      await pods.stop();
      const rows = [...seen.values()].sort((a, b) => a.at - b.at || (a.pod < b.pod ? -1 : 1));
      const width = Math.max(3, ...rows.map((r) => r.pod.length));
      return [
        `${'POD'.padEnd(width)}  DELETED`,
        ...rows.map((r) => `${r.pod.padEnd(width)}  ${(Math.max(0, r.at - started) / 1000).toFixed(0).padStart(4)} s`),
      ].join('\n');
    },
  };
}

/** Stateward as a local process, with its log in .stateward/demo-operator.log. */
async function startProcess(kubeconfig: string, port: number, kc: KubeConfig): Promise<{ stop: () => Promise<void> }> {
  const logPath = join(root, '.stateward', 'demo-operator.log');
  await exec('mkdir', ['-p', join(root, '.stateward')]);
  console.log(`==> starting stateward (log: ${logPath})`);
  const operator = spawn(
    process.execPath,
    [
      join(root, 'bin/stateward.ts'),
      `-kubernetes.namespace=${namespace}`,
      `-kubernetes.config-file=${kubeconfig}`,
      `-kubernetes.api-url=${kc.getCurrentCluster()!.server}`,
      `-server.port=${port}`,
      '-web.enabled',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const log = createWriteStream(logPath);
  operator.stdout.pipe(log);
  operator.stderr.pipe(log);
  const stop = async () => {
    operator.kill('SIGTERM');
    await new Promise((resolve) => operator.once('exit', resolve));
  };
  try {
    await waitFor(
      'stateward to be ready',
      async () => (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status === 200,
      {
        timeoutMs: 30_000,
        fail: () =>
          operator.exitCode !== null ? `stateward exited with ${operator.exitCode}; see ${logPath}` : undefined,
      },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { stop };
}

/**
 * Stateward's image, built from the Dockerfile and loaded on the real node,
 * installed into the demo's namespace with the base overlay, and reached
 * through `kubectl port-forward`. It keeps running in the cluster afterwards.
 */
async function startInCluster(kubeconfig: string, port: number): Promise<{ stop: () => Promise<void> }> {
  const image = await ensureStatewardImage({ log: (line) => console.error(line) });
  const dir = await mkdtemp(join(tmpdir(), 'stateward-demo-'));
  try {
    await writeUserOverlay(dir, { namespace, overlay: 'rollouts', image: image.name, extraArgs: ['-web.enabled'] });
    console.log(`==> installing stateward (${image.name}) into ${namespace} with kubectl apply -k, on the real node`);
    process.stdout.write(await kubectl(kubeconfig, 'apply', '--server-side', '-k', dir));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const started = Date.now();
  process.stdout.write(
    await kubectl(kubeconfig, '-n', namespace, 'rollout', 'status', 'deployment/stateward', '--timeout=180s'),
  );
  console.log(
    `==> stateward's pod Ready ${((Date.now() - started) / 1000).toFixed(1)} s after the apply, by its own probes`,
  );
  console.log(
    await kubectl(kubeconfig, '-n', namespace, 'get', 'pods', '-l', 'app.kubernetes.io/name=stateward', '-o', 'wide'),
  );
  // The web view through the kubelet's port-forward (the metrics/status port).
  const forward: ChildProcess = spawn(
    'kubectl',
    ['--kubeconfig', kubeconfig, '-n', namespace, 'port-forward', 'service/stateward-metrics', `${port}:8001`],
    { stdio: 'ignore' },
  );
  await waitFor(
    'the port-forward to stateward',
    async () => (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status === 200,
    {
      timeoutMs: 30_000,
      fail: () => (forward.exitCode !== null ? `kubectl port-forward exited with ${forward.exitCode}` : undefined),
    },
  );
  return {
    stop: async () => {
      forward.kill('SIGTERM');
      if (forward.exitCode === null) await new Promise((resolve) => forward.once('exit', resolve));
    },
  };
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { 'in-cluster': { type: 'boolean', default: false } } });
  const inCluster = values['in-cluster'];
  console.log(
    `==> starting the local cluster (kube-apiserver, controller-manager, scheduler, etcd, kwok${inCluster ? ', and the real node' : ''})`,
  );
  const kubeconfig = await clusterUp(inCluster);
  if (inCluster && !(await kubectl(kubeconfig, 'get', 'nodes', '-l', 'type=real', '-o', 'name')).trim())
    throw new Error('the running local cluster has no real node: stop it (npm run cluster -- down) and run this again');
  console.log(await kubectl(kubeconfig, 'get', 'nodes', '-L', 'topology.kubernetes.io/zone'));

  console.log(
    '==> applying examples/zone-aware-statefulsets.yaml (3 zones × 2 pods, OnDelete, rollout-group=ingester)',
  );
  process.stdout.write(await kubectl(kubeconfig, 'apply', '-f', join(root, 'examples/zone-aware-statefulsets.yaml')));
  const kc = readKubeConfigFile(kubeconfig);
  const kube = new KubeClient({ kubeConfig: kc, timeoutMs: 15_000 });
  await waitFor(
    'the ingester rollout group to be Ready',
    async () => {
      const list = await kube.list<StatefulSet>(resources.statefulSets, {
        namespace,
        labelSelector: 'rollout-group=ingester',
      });
      return list.items.length === 3 && list.items.every((s) => s.status?.readyReplicas === s.spec?.replicas);
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );

  const [port] = (await freePorts(1)) as [number];
  const operator = inCluster ? await startInCluster(kubeconfig, port) : await startProcess(kubeconfig, port, kc);
  try {
    console.log(
      `==> web view (served by the operator, live while the demo runs): http://127.0.0.1:${port}/status/${namespace}`,
    );
    // When each pod was really deleted, as the API server stamped it: the timeline the closing table shows.
    // Watching before the change, so the first delete is seen too.
    const deletions = await watchDeletions(kube);
    const started = Date.now();
    const version = `demo-${Date.now().toString(36)}`;
    console.log(
      `==> changing the pod template of all three zones (version=${version}); stateward rolls them one zone at a time`,
    );
    for (const zone of ['a', 'b', 'c']) {
      await kubectl(
        kubeconfig,
        '-n',
        namespace,
        'patch',
        'statefulset',
        `ingester-zone-${zone}`,
        '--type=merge',
        '-p',
        JSON.stringify({ spec: { template: { metadata: { annotations: { version } } } } }),
      );
    }
    let last = '';
    await waitFor(
      'the rollout to complete',
      async () => {
        const { text, done } = await progress(kube);
        if (text !== last) console.log(`--- ${((Date.now() - started) / 1000).toFixed(1)}s\n${text}`);
        last = text;
        return done;
      },
      { timeoutMs: 180_000, intervalMs: 200 },
    );
    console.log(
      `==> rollout complete in ${((Date.now() - started) / 1000).toFixed(1)} s: every zone runs the new revision, never two zones disrupted at once`,
    );
    console.log('==> when each pod was deleted (seconds after the template change, as the API server stamped it)');
    console.log(await deletions.table(started));
  } finally {
    await operator.stop();
    await kube.close();
  }
  // The operator's DeletingPod Events, by StatefulSet in roll order. Not a
  // timeline: a StatefulSet's deletes after its first are gathered into one
  // Event written when its rollout completes, seconds after them (the
  // timeline is the progress above).
  console.log(
    '==> the deletes the operator reported, per StatefulSet (REPORTED is when each Event was written, not when each pod was deleted)',
  );
  console.log(
    await kubectl(
      kubeconfig,
      '-n',
      namespace,
      'get',
      'events',
      '--field-selector',
      'reason=DeletingPod',
      '-o',
      'custom-columns=STATEFULSET:.involvedObject.name,REPORTED:.eventTime,MESSAGE:.message',
      '--sort-by=.involvedObject.name',
    ),
  );
  console.log('The cluster keeps running. Explore it with:');
  console.log(`  export KUBECONFIG=${kubeconfig}`);
  console.log(`  kubectl -n ${namespace} get pods -L controller-revision-hash`);
  if (inCluster) console.log(`  kubectl -n ${namespace} logs deployment/stateward`);
  console.log(`  npx stateward status -n ${namespace}`);
  console.log(`  npx stateward doctor -n ${namespace}`);
  if (inCluster)
    console.log(
      `  kubectl -n ${namespace} port-forward service/stateward-metrics ${port}:8001   # the web view again: http://127.0.0.1:${port}/status/${namespace}`,
    );
  else
    console.log(
      `  npx stateward -kubernetes.namespace=${namespace} -kubernetes.config-file=${kubeconfig} -server.port=${port} -web.enabled   # the operator again, and its web view at http://127.0.0.1:${port}/status/${namespace}`,
    );
  console.log('Stop it with: npm run cluster -- down');
  return 0;
}

main().then(
  (code) => (process.exitCode = code),
  (error: unknown) => {
    console.error(`demo failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);
