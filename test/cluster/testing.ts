// What a test file uses to reach the cluster of the current test run:
// `scripts/test.ts` starts one cluster per run and names its state directory
// in STATEWARD_TEST_CLUSTER; a file run on its own falls back to the cluster
// `npm run cluster -- up` started.
import {
  CoreV1Api,
  KubeConfig as ClientNodeKubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { readKubeConfigFile, type KubeConfig } from '../../src/runtime/kube/kubeconfig.ts';
import { mkdir, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { stringify } from 'yaml';
import { clustersRoot, readState, type ClusterState } from './cluster.ts';
import { controlRequest, type ComponentAction } from './control.ts';
import { processAlive } from './lock.ts';
import type { ComponentName } from './process.ts';
import { waitFor } from './probe.ts';

export const TEST_CLUSTER_ENV = 'STATEWARD_TEST_CLUSTER';

export class TestCluster {
  readonly state: ClusterState;

  constructor(state: ClusterState) {
    this.state = state;
  }

  get kubeconfigPath(): string {
    return this.state.kubeconfig;
  }

  get nodes(): ClusterState['nodes'] {
    return this.state.nodes;
  }

  /** Stateward's kubeconfig of the cluster's admin (what KubeClient takes). */
  kubeConfig(): KubeConfig {
    return readKubeConfigFile(this.state.kubeconfig);
  }

  /** The same as @kubernetes/client-node's KubeConfig, for its typed API clients (test setup only). */
  clientNodeConfig(): ClientNodeKubeConfig {
    const kc = new ClientNodeKubeConfig();
    kc.loadFromFile(this.state.kubeconfig);
    return kc;
  }

  core(): CoreV1Api {
    return this.clientNodeConfig().makeApiClient(CoreV1Api);
  }

  /**
   * A fresh namespace for one test, deleted when the test ends. Waits for its
   * default ServiceAccount so pods can be created at once.
   */
  async namespace(t: Pick<TestContext, 'after' | 'name'>, prefix?: string): Promise<string> {
    const base =
      (prefix ?? t.name)
        .toLowerCase()
        .replace(/[^a-z0-9-]+/g, '-')
        .replace(/^-+|-+$/g, '')
        .slice(0, 40) || 'test';
    const name = `${base}-${randomBytes(3).toString('hex')}`;
    const core = this.core();
    await core.createNamespace({ body: { metadata: { name, labels: { 'stateward.dev/test': 'true' } } } });
    t.after(async () => {
      await core.deleteNamespace({ name }).catch(() => undefined);
    });
    await waitFor(
      `ServiceAccount default in namespace ${name}`,
      async () => {
        return (await core.readNamespacedServiceAccount({ name: 'default', namespace: name })).metadata?.name;
      },
      { timeoutMs: 30_000 },
    );
    return name;
  }

  async cordon(node: string): Promise<void> {
    await this.setUnschedulable(node, true);
  }

  async uncordon(node: string): Promise<void> {
    await this.setUnschedulable(node, false);
  }

  private async setUnschedulable(node: string, unschedulable: boolean): Promise<void> {
    await this.core().patchNode(
      { name: node, body: { spec: { unschedulable } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  /**
   * A kubeconfig that authenticates as the ServiceAccount, with a short-lived
   * token from the TokenRequest API, exactly as a pod running under it would.
   */
  async serviceAccountKubeconfig(namespace: string, serviceAccount: string, expirationSeconds = 3600): Promise<string> {
    const request = await this.core().createNamespacedServiceAccountToken({
      name: serviceAccount,
      namespace,
      body: { spec: { audiences: [], expirationSeconds } },
    });
    const token = request.status?.token;
    if (!token) throw new Error(`TokenRequest for ${namespace}/${serviceAccount} returned no token`);
    const admin = this.kubeConfig().getCurrentCluster();
    if (!admin?.caData) throw new Error('admin kubeconfig has no certificate-authority-data');
    const dir = join(this.state.stateDir, 'serviceaccounts');
    await mkdir(dir, { recursive: true });
    const path = join(dir, `${namespace}.${serviceAccount}.kubeconfig`);
    const user = `system:serviceaccount:${namespace}:${serviceAccount}`;
    await writeFile(
      path,
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'stateward-local',
            cluster: { server: this.state.server, 'certificate-authority-data': admin.caData },
          },
        ],
        users: [{ name: user, user: { token } }],
        contexts: [{ name: user, context: { cluster: 'stateward-local', user, namespace } }],
        'current-context': user,
      }),
      { mode: 0o600 },
    );
    return path;
  }

  // ---- fault injection, carried out by the process that owns the cluster ----

  async stopComponent(name: ComponentName): Promise<void> {
    await this.component(name, 'stop');
  }

  async startComponent(name: ComponentName): Promise<void> {
    await this.component(name, 'start');
  }

  async killComponent(name: ComponentName): Promise<void> {
    await this.component(name, 'kill');
  }

  async restartComponent(name: ComponentName): Promise<void> {
    await this.component(name, 'restart');
  }

  /** SIGSTOP: the component's connections stay open and go silent (half-open from the client's side). */
  async pauseComponent(name: ComponentName): Promise<void> {
    await this.component(name, 'pause');
  }

  async resumeComponent(name: ComponentName): Promise<void> {
    await this.component(name, 'resume');
  }

  /**
   * Compacts etcd's history up to its current revision, through etcd's JSON
   * gateway. Afterwards any watch or list from an older resourceVersion that
   * the apiserver cannot serve from its own cache gets 410 Gone.
   */
  async compactEtcd(): Promise<number> {
    const post = async (path: string, body: unknown) => {
      const response = await fetch(`${this.state.etcd}${path}`, { method: 'POST', body: JSON.stringify(body) });
      if (!response.ok) throw new Error(`etcd ${path}: ${response.status} ${await response.text()}`);
      return (await response.json()) as { header?: { revision?: string } };
    };
    const revision = Number(
      (await post('/v3/kv/range', { key: Buffer.from('/').toString('base64') })).header?.revision,
    );
    if (!Number.isInteger(revision) || revision < 1) throw new Error(`etcd returned no revision`);
    await post('/v3/kv/compaction', { revision, physical: true });
    return revision;
  }

  private async component(name: ComponentName, action: ComponentAction): Promise<void> {
    await controlRequest(this.state.controlSocket, 'POST', `/components/${name}/${action}`);
  }
}

let cached: TestCluster | undefined;

export function findRunningClusterState(): ClusterState | undefined {
  const dirs = [process.env[TEST_CLUSTER_ENV], join(clustersRoot(), 'default')].filter((d): d is string => Boolean(d));
  for (const dir of dirs) {
    const state = readState(dir);
    if (state?.ready && processAlive(state.ownerPid)) return state;
  }
  return undefined;
}

export function testCluster(): TestCluster {
  if (cached) return cached;
  const state = findRunningClusterState();
  if (!state) {
    throw new Error(
      `no local cluster is running: run the suite with \`npm test\` (it starts one), or start one with \`npm run cluster -- up\` before running a single test file`,
    );
  }
  cached = new TestCluster(state);
  return cached;
}
