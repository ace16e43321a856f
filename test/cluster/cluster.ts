// The local control plane: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, each its own process on loopback, owned by the
// process that calls LocalCluster.start(); with `realNode: true`, also one
// real node (containerd, kubelet, kube-proxy: realnode.ts).
import { CoreV1Api, KubeConfig as ClientNodeKubeConfig } from '@kubernetes/client-node';
import { readKubeConfigFile, type KubeConfig } from '../../src/runtime/kube/kubeconfig.ts';
import { copyFile, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { ensureBinaries, cacheRoot, type Binaries } from './build.ts';
import { ensurePauseImage } from './image.ts';
import { processAlive } from './lock.ts';
import { ensureNodeBinaries, type NodeBinaries } from './nodebuild.ts';
import { createClusterPki, type ClusterPki } from './pki.ts';
import { freePorts } from './ports.ts';
import { httpStatus, waitFor } from './probe.ts';
import {
  ComponentProcess,
  type ComponentName,
  type ComponentSpec,
  type ControlPlaneComponentName,
  type NodeComponentName,
} from './process.ts';
import { NODE_COMPONENTS, RealNode, type RealNodeInfo } from './realnode.ts';
import { imageBuildProblems, realNodeLeftovers, realNodeProblems, reclaimRealNode } from './realnode-host.ts';
import { ZONE_LABEL } from '../../src/vocabulary/keys.ts';

const here = dirname(fileURLToPath(import.meta.url));

export const DEFAULT_ZONES = ['zone-a', 'zone-b', 'zone-c'];
export const COMPONENTS: readonly ControlPlaneComponentName[] = [
  'etcd',
  'apiserver',
  'controller-manager',
  'scheduler',
  'kwok',
];

type ComponentStatus = Record<ControlPlaneComponentName, { pid: number | undefined; log: string }> &
  Partial<Record<NodeComponentName, { pid: number | undefined; log: string }>>;

export interface ClusterOptions {
  /** Names the state directory under the cache; default "default". */
  name?: string;
  /** Fake nodes per zone; default 2, so a drained node's pods can stay in their zone. */
  nodesPerZone?: number;
  zones?: string[];
  /** Deadline for the whole start; default 120 s. */
  readyTimeoutMs?: number;
  log?: (line: string) => void;
  /** Pod capacity of each fake node; default 110, as a kubelet's. */
  maxPodsPerNode?: number;
  /** Extra command-line flags per component, e.g. feature gates for one test. */
  extraArgs?: Partial<Record<ControlPlaneComponentName, string[]>>;
  /**
   * Adds this machine's one real node (realnode.ts): needs root and the
   * Debian packages .ci/run installs; builds its binaries and the sandbox
   * image on first use. Waits up to realNodeLockTimeoutMs (default 10 min)
   * while another cluster on this machine has it.
   */
  realNode?: boolean;
  realNodeLockTimeoutMs?: number;
  /** docker-archive images to load into the real node before the cluster counts as ready (image.ts). */
  realNodeImages?: string[];
}

export interface NodeInfo {
  name: string;
  zone: string;
}

/** Written to <stateDir>/state.json; how other processes find the cluster. */
export interface ClusterState {
  name: string;
  stateDir: string;
  kubeconfig: string;
  server: string;
  /** etcd's client URL, for tests that act on storage directly (compaction). */
  etcd: string;
  ownerPid: number;
  controlSocket: string;
  nodes: NodeInfo[];
  components: ComponentStatus;
  versions: Binaries['versions'];
  /** Present when the cluster has the real node. */
  realNode?: RealNodeInfo;
  /** Pod IPs come from this loopback range, so later tests can serve "pod" endpoints on this machine. */
  podCidr: string;
  ready: boolean;
}

interface Ports {
  etcdClient: number;
  etcdPeer: number;
  apiserver: number;
  controllerManager: number;
  scheduler: number;
  kwok: number;
}

export function clustersRoot(): string {
  return join(cacheRoot(), 'clusters');
}

/**
 * The cluster a clone starts when no name is given: its own, named after the
 * clone's directory and a hash of its path. The cache (binaries, clusters)
 * is shared by every clone on the machine; one fixed name made a second
 * clone's demo reuse the first one's cluster, and its `down` stop it.
 */
export function defaultClusterName(root = fileURLToPath(new URL('../..', import.meta.url))): string {
  const path = realpathSync(root);
  const base =
    basename(path)
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 20) || 'clone';
  return `${base}-${createHash('sha256').update(path).digest('hex').slice(0, 8)}`;
}

export class LocalCluster {
  readonly name: string;
  readonly stateDir: string;
  readonly nodes: NodeInfo[];
  private readonly components = new Map<ComponentName, ComponentProcess>();
  private readonly log: (line: string) => void;
  private readonly pki: ClusterPki;
  private readonly ports: Ports;
  private readonly binaries: Binaries;
  private readonly podCidr: string;
  private readonly extraArgs: Partial<Record<ControlPlaneComponentName, string[]>>;
  private readonly maxPodsPerNode: number | undefined;
  private readonly realNodeParts: RealNodeParts | undefined;
  /** The real node, once started (realNode: true). */
  realNode: RealNode | undefined;
  private exitHook: (() => void) | undefined;
  private tornDown = false;

  private constructor(init: {
    name: string;
    stateDir: string;
    nodes: NodeInfo[];
    log: (line: string) => void;
    pki: ClusterPki;
    ports: Ports;
    binaries: Binaries;
    podCidr: string;
    extraArgs: Partial<Record<ControlPlaneComponentName, string[]>>;
    maxPodsPerNode?: number;
    realNodeParts?: RealNodeParts;
  }) {
    this.name = init.name;
    this.stateDir = init.stateDir;
    this.nodes = init.nodes;
    this.log = init.log;
    this.pki = init.pki;
    this.ports = init.ports;
    this.binaries = init.binaries;
    this.podCidr = init.podCidr;
    this.extraArgs = init.extraArgs;
    this.maxPodsPerNode = init.maxPodsPerNode;
    this.realNodeParts = init.realNodeParts;
  }

  get kubeconfigPath(): string {
    return join(this.stateDir, 'admin.kubeconfig');
  }

  get server(): string {
    return `https://127.0.0.1:${this.ports.apiserver}`;
  }

  get controlSocket(): string {
    return join(this.stateDir, 'control.sock');
  }

  /** Stateward's kubeconfig of the cluster's admin (what KubeClient takes). */
  kubeConfig(): KubeConfig {
    return readKubeConfigFile(this.kubeconfigPath);
  }

  /** The same as @kubernetes/client-node's KubeConfig, for its typed API clients (test setup only). */
  clientNodeConfig(): ClientNodeKubeConfig {
    const kc = new ClientNodeKubeConfig();
    kc.loadFromFile(this.kubeconfigPath);
    return kc;
  }

  static async start(options: ClusterOptions = {}): Promise<LocalCluster> {
    const log = options.log ?? ((line: string) => process.stderr.write(`[cluster] ${line}\n`));
    const name = options.name ?? defaultClusterName();
    const zones = options.zones ?? DEFAULT_ZONES;
    const nodesPerZone = options.nodesPerZone ?? 2;
    if (!Number.isInteger(nodesPerZone) || nodesPerZone < 1)
      throw new Error(`nodesPerZone must be a positive integer, got ${nodesPerZone}`);
    const stateDir = join(clustersRoot(), name);

    await reapStaleClusters(log);
    const existing = readState(stateDir);
    if (existing && processAlive(existing.ownerPid)) {
      throw new Error(
        `cluster "${name}" is already running (owner pid ${existing.ownerPid}); stop it with \`npm run cluster -- down\``,
      );
    }
    if (options.realNode) {
      const problems = [...(await realNodeProblems()), ...(await imageBuildProblems())];
      if (problems.length > 0) throw new Error(`this machine cannot run the real node:\n- ${problems.join('\n- ')}`);
    }
    const binaries = await ensureBinaries({ log });
    const realNodeParts = options.realNode
      ? await prepareRealNode(log, options.realNodeLockTimeoutMs ?? 600_000, options.realNodeImages ?? [])
      : undefined;
    await rm(stateDir, { recursive: true, force: true });
    await mkdir(join(stateDir, 'logs'), { recursive: true });

    const [etcdClient, etcdPeer, apiserver, controllerManager, scheduler, kwok] = await freePorts(6);
    const ports: Ports = {
      etcdClient: etcdClient!,
      etcdPeer: etcdPeer!,
      apiserver: apiserver!,
      controllerManager: controllerManager!,
      scheduler: scheduler!,
      kwok: kwok!,
    };
    const pki = await createClusterPki();
    // A loopback /16 per cluster, picked at random so two clusters on one machine rarely share pod IPs.
    const octet = 100 + Math.floor(Math.random() * 100);
    const podCidr = `127.${octet}.0.0/16`;
    const nodes = zones.flatMap((zone) =>
      Array.from({ length: nodesPerZone }, (_, i) => ({ name: `kwok-${zone}-${i + 1}`, zone })),
    );
    const cluster = new LocalCluster({
      name,
      stateDir,
      nodes,
      log,
      pki,
      ports,
      binaries,
      podCidr,
      extraArgs: options.extraArgs ?? {},
      maxPodsPerNode: options.maxPodsPerNode,
      ...(realNodeParts ? { realNodeParts } : {}),
    });
    cluster.installExitHook();
    try {
      await cluster.writeFiles();
      await cluster.boot(options.readyTimeoutMs ?? 120_000);
    } catch (error) {
      await cluster.teardown();
      throw error;
    }
    return cluster;
  }

  private async writeFiles(): Promise<void> {
    const d = this.stateDir;
    const files: Record<string, string> = {
      'ca.crt': this.pki.ca.cert,
      'ca.key': this.pki.ca.key,
      'apiserver.crt': this.pki.apiserver.cert,
      'apiserver.key': this.pki.apiserver.key,
      'sa.key': this.pki.serviceAccount.key,
      'sa.pub': this.pki.serviceAccount.pub,
    };
    if (this.realNodeParts) {
      const client = await RealNode.apiserverKubeletClient(this.pki.ca);
      files['apiserver-kubelet-client.crt'] = client.cert;
      files['apiserver-kubelet-client.key'] = client.key;
    }
    for (const [file, content] of Object.entries(files)) await writeFile(join(d, file), content, { mode: 0o600 });
    await writeFile(this.kubeconfigPath, adminKubeconfig(this.server, this.pki), { mode: 0o600 });
    await copyFile(join(here, 'kwok-stages.yaml'), join(d, 'kwok-stages.yaml'));
  }

  private specs(): Record<ControlPlaneComponentName, ComponentSpec> {
    const d = this.stateDir;
    const cp = this.binaries.controlPlane;
    const p = this.ports;
    const kubeconfig = this.kubeconfigPath;
    const logPath = (name: string) => join(d, 'logs', `${name}.log`);
    const peer = `http://127.0.0.1:${p.etcdPeer}`;
    const delegated = [
      `--kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      '--bind-address=127.0.0.1',
      '--leader-elect=false',
    ];
    return {
      etcd: {
        name: 'etcd',
        command: cp,
        logPath: logPath('etcd'),
        args: [
          'etcd',
          `--name=stateward`,
          `--data-dir=${join(d, 'etcd')}`,
          `--listen-client-urls=http://127.0.0.1:${p.etcdClient}`,
          `--advertise-client-urls=http://127.0.0.1:${p.etcdClient}`,
          `--listen-peer-urls=${peer}`,
          `--initial-advertise-peer-urls=${peer}`,
          `--initial-cluster=stateward=${peer}`,
          // Test data is disposable; fsync would only slow every write down.
          '--unsafe-no-fsync',
          '--log-level=warn',
        ],
      },
      apiserver: {
        name: 'apiserver',
        command: cp,
        logPath: logPath('apiserver'),
        args: [
          'apiserver',
          `--etcd-servers=http://127.0.0.1:${p.etcdClient}`,
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
          `--secure-port=${p.apiserver}`,
          `--cert-dir=${join(d, 'apiserver-certs')}`,
          `--tls-cert-file=${join(d, 'apiserver.crt')}`,
          `--tls-private-key-file=${join(d, 'apiserver.key')}`,
          `--client-ca-file=${join(d, 'ca.crt')}`,
          // With a real node: Node,RBAC and the kubelet's client and CA flags.
          ...(this.realNodeParts ? RealNode.apiserverArgs(d) : ['--authorization-mode=RBAC']),
          '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
          `--service-account-key-file=${join(d, 'sa.pub')}`,
          `--service-account-signing-key-file=${join(d, 'sa.key')}`,
          '--service-cluster-ip-range=10.96.0.0/16',
          '--allow-privileged=true',
          '--profiling=false',
          '--v=1',
        ],
      },
      'controller-manager': {
        name: 'controller-manager',
        command: cp,
        logPath: logPath('controller-manager'),
        args: [
          'controller-manager',
          ...delegated,
          `--secure-port=${p.controllerManager}`,
          `--root-ca-file=${join(d, 'ca.crt')}`,
          `--service-account-private-key-file=${join(d, 'sa.key')}`,
          `--cluster-signing-cert-file=${join(d, 'ca.crt')}`,
          `--cluster-signing-key-file=${join(d, 'ca.key')}`,
          '--controllers=*',
          // kwok beats every 10-25 s, and the node-lifecycle controller marks a
          // node's pods not Ready 50 s after its last beat by default: a kwok
          // starved that long on a loaded machine (or cut off by a test that
          // stops the apiserver) made Ready pods flip with nobody touching them,
          // which the tests' monitors read as disruptions. No test relies on
          // the grace period; a node made NotReady on purpose uses kwok's stage.
          '--node-monitor-grace-period=5m',
          '--profiling=false',
          '--v=1',
        ],
      },
      scheduler: {
        name: 'scheduler',
        command: cp,
        logPath: logPath('scheduler'),
        args: ['scheduler', ...delegated, `--secure-port=${p.scheduler}`, '--profiling=false', '--v=1'],
      },
      kwok: {
        name: 'kwok',
        command: this.binaries.kwok,
        logPath: logPath('kwok'),
        args: [
          `--kubeconfig=${kubeconfig}`,
          `--config=${join(d, 'kwok-stages.yaml')}`,
          '--manage-all-nodes=false',
          '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
          `--cidr=${this.podCidr}`,
          `--node-ip=${this.podCidr.replace(/\.0\.0\/16$/, '.255.254')}`,
          `--server-address=127.0.0.1:${p.kwok}`,
        ],
      },
    };
  }

  private component(name: ComponentName): ComponentProcess {
    if (isNodeComponent(name)) return this.requireRealNode(name).component(name);
    let component = this.components.get(name);
    if (!component) {
      const spec = this.specs()[name];
      component = new ComponentProcess({ ...spec, args: [...spec.args, ...(this.extraArgs[name] ?? [])] });
      this.components.set(name, component);
    }
    return component;
  }

  private requireRealNode(name: ComponentName): RealNode {
    if (!this.realNode) throw new Error(`${name} runs only on the real node, and cluster "${this.name}" has none`);
    return this.realNode;
  }

  /** Whether this cluster runs `name` (the real node's components only with a real node). */
  hasComponent(name: string): name is ComponentName {
    return (
      (COMPONENTS as readonly string[]).includes(name) ||
      (this.realNode !== undefined && (NODE_COMPONENTS as readonly string[]).includes(name))
    );
  }

  /** An error message if any component died on its own, naming its log. */
  private failure(): string | undefined {
    for (const [name, component] of this.components) {
      if (component.unexpectedExit) return componentFailure(name, component);
    }
    return this.realNode?.failure();
  }

  private async boot(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const remaining = () => Math.max(1000, deadline - Date.now());
    const started = Date.now();
    for (const name of COMPONENTS) {
      this.component(name).start();
      // Record pids as soon as they exist, so a killed owner's components can be reaped.
      await this.writeState(false);
      await this.waitComponentReady(name, remaining());
    }
    await this.createNodes();
    await this.waitNodesReady(remaining());
    await waitFor(
      'the default ServiceAccount (created by the controller-manager)',
      async () => {
        const core = this.clientNodeConfig().makeApiClient(CoreV1Api);
        return (await core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' })).metadata?.name;
      },
      { timeoutMs: remaining(), fail: () => this.failure() },
    );
    if (this.realNodeParts) {
      const parts = this.realNodeParts;
      this.realNode = await RealNode.start(
        {
          cluster: this.name,
          stateDir: this.stateDir,
          apiserverPort: this.ports.apiserver,
          ca: this.pki.ca,
          binaries: parts.binaries,
          pauseImage: parts.pauseImage,
          images: parts.images,
          kubeConfig: () => this.clientNodeConfig(),
          log: this.log,
          lockTimeoutMs: parts.lockTimeoutMs,
        },
        120_000,
      );
    }
    await this.writeState(true);
    this.log(
      `cluster "${this.name}" ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${this.server}, ${this.nodes.length} nodes in ${new Set(this.nodes.map((n) => n.zone)).size} zones${this.realNode ? ` and the real node ${this.realNode.name}` : ''}`,
    );
  }

  private async waitComponentReady(name: ComponentName, timeoutMs: number): Promise<void> {
    if (isNodeComponent(name)) return this.requireRealNode(name).waitComponentReady(name, timeoutMs);
    const p = this.ports;
    const tls = { ca: this.pki.ca.cert, cert: this.pki.admin.cert, key: this.pki.admin.key };
    const probes: Record<ControlPlaneComponentName, () => Promise<boolean>> = {
      etcd: async () => (await httpStatus(`http://127.0.0.1:${p.etcdClient}/health`)) === 200,
      apiserver: async () => (await httpStatus(`https://127.0.0.1:${p.apiserver}/readyz`, tls)) === 200,
      // Their serving certificates are self-signed in memory: probe without verifying.
      'controller-manager': async () => (await httpStatus(`https://127.0.0.1:${p.controllerManager}/healthz`)) === 200,
      scheduler: async () => (await httpStatus(`https://127.0.0.1:${p.scheduler}/healthz`)) === 200,
      kwok: async () => (await httpStatus(`http://127.0.0.1:${p.kwok}/healthz`)) === 200,
    };
    await waitFor(`${name} to become healthy (log: ${this.component(name).spec.logPath})`, probes[name], {
      timeoutMs,
      fail: () => this.failure(),
    });
  }

  private async createNodes(): Promise<void> {
    const core = this.clientNodeConfig().makeApiClient(CoreV1Api);
    for (const node of this.nodes) {
      try {
        await core.createNode({
          body: {
            metadata: {
              name: node.name,
              labels: {
                [ZONE_LABEL]: node.zone,
                'topology.kubernetes.io/region': 'local',
                'kubernetes.io/hostname': node.name,
                'kubernetes.io/os': 'linux',
                'kubernetes.io/arch': 'amd64',
                type: 'kwok',
              },
              annotations: {
                'kwok.x-k8s.io/node': 'fake',
                ...(this.maxPodsPerNode ? { 'stateward.dev/max-pods': String(this.maxPodsPerNode) } : {}),
              },
            },
          },
        });
      } catch (error) {
        // A restarted owner reusing etcd data finds its nodes already there.
        if ((error as { code?: number }).code !== 409) throw error;
      }
    }
  }

  async waitNodesReady(timeoutMs = 60_000): Promise<void> {
    const core = this.clientNodeConfig().makeApiClient(CoreV1Api);
    await waitFor(
      `${this.nodes.length} kwok nodes to become Ready (kwok log: ${this.component('kwok').spec.logPath})`,
      async () => {
        const list = await core.listNode({ labelSelector: 'type=kwok' });
        const ready = list.items.filter((n) =>
          n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
        );
        return ready.length >= this.nodes.length;
      },
      { timeoutMs, fail: () => this.failure() },
    );
  }

  // ---- fault injection -------------------------------------------------

  async stopComponent(name: ComponentName): Promise<void> {
    await this.component(name).stop();
    await this.writeState(true);
  }

  async killComponent(name: ComponentName): Promise<void> {
    await this.component(name).kill();
    await this.writeState(true);
  }

  async startComponent(name: ComponentName, timeoutMs = 60_000): Promise<void> {
    const component = this.component(name);
    component.start();
    await this.waitComponentReady(name, timeoutMs);
    await this.writeState(true);
  }

  pauseComponent(name: ComponentName): void {
    this.component(name).pause();
  }

  resumeComponent(name: ComponentName): void {
    this.component(name).resume();
  }

  async restartComponent(name: ComponentName, timeoutMs = 60_000): Promise<void> {
    await this.component(name).stop();
    await this.startComponent(name, timeoutMs);
  }

  componentStatus(): ComponentStatus {
    const status = {} as ComponentStatus;
    for (const name of COMPONENTS) {
      const component = this.component(name);
      status[name] = { pid: component.pid, log: component.spec.logPath };
    }
    return { ...status, ...this.realNode?.componentStatus() };
  }

  state(ready: boolean): ClusterState {
    return {
      name: this.name,
      stateDir: this.stateDir,
      kubeconfig: this.kubeconfigPath,
      server: this.server,
      etcd: `http://127.0.0.1:${this.ports.etcdClient}`,
      ownerPid: process.pid,
      controlSocket: this.controlSocket,
      nodes: this.nodes,
      components: this.componentStatus(),
      versions: this.binaries.versions,
      podCidr: this.podCidr,
      ready,
      ...(this.realNode ? { realNode: this.realNode.info() } : {}),
    };
  }

  private async writeState(ready: boolean): Promise<void> {
    if (this.tornDown) return;
    const path = join(this.stateDir, 'state.json');
    // Write-then-rename: a reader never sees half a file.
    await writeFile(`${path}.tmp`, JSON.stringify(this.state(ready), null, 2));
    await rename(`${path}.tmp`, path);
  }

  /** Stops every component (dependents first) and removes the state directory. */
  async teardown(options: { keepState?: boolean; keepRealNodeLock?: boolean } = {}): Promise<void> {
    if (this.tornDown) return;
    this.tornDown = true;
    // The real node first, while the apiserver can still take its Node and EndpointSlice away.
    // keepRealNodeLock: the caller releases the machine's lock (releaseMachineLock) when done looking.
    await this.realNode?.stop({ keepLock: options.keepRealNodeLock ?? false });
    for (const name of [...COMPONENTS].reverse()) {
      const component = this.components.get(name);
      if (component) await component.stop(5000);
    }
    if (this.exitHook) process.off('exit', this.exitHook);
    if (!options.keepState) await rm(this.stateDir, { recursive: true, force: true });
  }

  /** Last resort: if the owner exits without teardown, no component outlives it. */
  private installExitHook(): void {
    this.exitHook = () => {
      // The real node's pods, mounts, interfaces and chains need more than a
      // signal: a detached reclaimer cleans them up (realnode.ts, killNow).
      this.realNode?.killNow();
      for (const component of this.components.values()) component.killNow();
      rmSync(this.stateDir, { recursive: true, force: true });
    };
    process.on('exit', this.exitHook);
  }
}

interface RealNodeParts {
  binaries: NodeBinaries;
  pauseImage: { name: string; archive: string };
  images: string[];
  lockTimeoutMs: number;
}

/** Builds (or finds cached) what the real node runs, before anything starts. */
async function prepareRealNode(
  log: (line: string) => void,
  lockTimeoutMs: number,
  images: string[],
): Promise<RealNodeParts> {
  const binaries = await ensureNodeBinaries({ log });
  const pauseImage = await ensurePauseImage(binaries.pause, { log });
  return { binaries, pauseImage, images, lockTimeoutMs };
}

function isNodeComponent(name: ComponentName): name is NodeComponentName {
  return (NODE_COMPONENTS as readonly string[]).includes(name);
}

function componentFailure(name: string, component: ComponentProcess): string {
  let tail = '';
  try {
    tail = readFileSync(component.spec.logPath, 'utf8').trimEnd().split('\n').slice(-10).join('\n');
  } catch {
    // no log yet
  }
  return `${name} ${component.unexpectedExit ?? 'failed'}; log: ${component.spec.logPath}${tail ? `\n${tail}` : ''}`;
}

function adminKubeconfig(server: string, pki: ClusterPki): string {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'stateward-local', cluster: { server, 'certificate-authority-data': b64(pki.ca.cert) } }],
    users: [
      {
        name: 'stateward-admin',
        user: { 'client-certificate-data': b64(pki.admin.cert), 'client-key-data': b64(pki.admin.key) },
      },
    ],
    contexts: [
      {
        name: 'stateward-local',
        context: { cluster: 'stateward-local', user: 'stateward-admin', namespace: 'default' },
      },
    ],
    'current-context': 'stateward-local',
  });
}

export function readState(stateDir: string): ClusterState | undefined {
  const path = join(stateDir, 'state.json');
  if (!existsSync(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as ClusterState;
  } catch {
    return undefined;
  }
}

/**
 * Kills the components of clusters whose owner died without tearing down
 * (SIGKILL, OOM, a closed terminal) and removes their state. A pid is killed
 * only if it still runs one of our binaries, so a reused pid is left alone.
 */
export async function reapStaleClusters(log: (line: string) => void = () => {}): Promise<void> {
  let names: string[];
  try {
    names = await readdir(clustersRoot());
  } catch {
    return;
  }
  for (const name of names) {
    const stateDir = join(clustersRoot(), name);
    const state = readState(stateDir);
    if (state && processAlive(state.ownerPid)) continue;
    if (!state) {
      // A start still writing its state has an owner lock file; leave young dirs alone.
      continue;
    }
    for (const [component, info] of Object.entries(state.components)) {
      if (info?.pid && processAlive(info.pid) && isOurProcess(info.pid)) {
        log(`reaping ${component} (pid ${info.pid}) of stale cluster "${name}"`);
        try {
          process.kill(info.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    await rm(stateDir, { recursive: true, force: true });
  }
  // A real node whose owner died (also before its cluster's state named it),
  // unless another cluster has it now.
  if (realNodeLeftovers()) await reclaimRealNode(log, 'the real node of a cluster whose owner died');
}

function isOurProcess(pid: number): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.includes('stateward-controlplane') || cmdline.includes('kwok') || cmdline.includes('/realnode/bin/');
  } catch {
    return false;
  }
}
