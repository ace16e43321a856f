// `npm run demo`: brings up the local cluster (building it on first use),
// applies a 3-zone StatefulSet rollout group with the real kubectl, and
// shows it becoming Ready. The cluster stays up afterwards for exploring.
// Later issues extend this into the full operator demo.
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { AppsV1Api, KubeConfig } from '@kubernetes/client-node';
import { waitFor } from '../test/cluster/probe.ts';

const exec = promisify(execFile);
const root = join(import.meta.dirname, '..');
const namespace = 'stateward-demo';

async function clusterUp(): Promise<string> {
  const child = spawn(process.execPath, [join(root, 'test/cluster/cli.ts'), 'up'], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
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

async function main(): Promise<number> {
  console.log('==> starting the local cluster (kube-apiserver, controller-manager, scheduler, etcd, kwok)');
  const kubeconfig = await clusterUp();
  console.log(await kubectl(kubeconfig, 'get', 'nodes', '-L', 'topology.kubernetes.io/zone'));

  console.log('==> applying examples/zone-aware-statefulsets.yaml with kubectl');
  process.stdout.write(await kubectl(kubeconfig, 'apply', '-f', join(root, 'examples/zone-aware-statefulsets.yaml')));

  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const apps = kc.makeApiClient(AppsV1Api);
  console.log('==> waiting for every StatefulSet of rollout-group=ingester to be Ready');
  let last = '';
  await waitFor('the ingester rollout group to be Ready', async () => {
    const list = await apps.listNamespacedStatefulSet({ namespace, labelSelector: 'rollout-group=ingester' });
    const line = list.items.map((s) => `${s.metadata?.name} ${s.status?.readyReplicas ?? 0}/${s.spec?.replicas}`).join('   ');
    if (line !== last) console.log(`    ${line}`);
    last = line;
    return list.items.length === 3 && list.items.every((s) => s.status?.readyReplicas === s.spec?.replicas);
  }, { timeoutMs: 120_000, intervalMs: 500 });

  console.log('\n==> the group, one StatefulSet per zone');
  console.log(await kubectl(kubeconfig, '-n', namespace, 'get', 'statefulsets', '-L', 'rollout-group'));
  console.log(await kubectl(kubeconfig, '-n', namespace, 'get', 'pods', '-o', 'custom-columns=POD:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,NODE:.spec.nodeName,REVISION:.metadata.labels.controller-revision-hash'));
  console.log('The cluster keeps running. Explore it with:');
  console.log(`  export KUBECONFIG=${kubeconfig}`);
  console.log(`  kubectl -n ${namespace} get pods -o wide`);
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
