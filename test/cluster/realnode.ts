// One real Kubernetes node for the local cluster: containerd (v2, from its Go
// module) running pods with Debian's runc, Debian's CNI bridge and host-local
// plugins for their network, the kubelet and kube-proxy (the control plane's
// Kubernetes version, test/cluster/node/), and an in-process TCP forwarder
// that lets pods reach the apiserver, which listens on 127.0.0.1 only,
// through the `kubernetes` Service. Its processes are components like the
// control plane's: a log each, stop/kill/restart through LocalCluster.
//
// A real node uses things a machine has once (port 10250, kube-proxy's
// iptables chains, a bridge, /var/lib and /run directories), so one machine
// runs at most one, under a machine-wide lock; teardown undoes everything it
// changed on the machine (realnode-host.ts). It needs root.
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { DiscoveryV1Api, CoreV1Api, type KubeConfig as ClientNodeKubeConfig } from '@kubernetes/client-node';
import type { NodeBinaries } from './nodebuild.ts';
import { caFromPem, issue, type Pem } from './pki.ts';
import { httpStatus, waitFor } from './probe.ts';
import { ComponentProcess, type ComponentSpec, type NodeComponentName } from './process.ts';
import { nodeConfigFiles } from './realnode-config.ts';
import {
  acquireMachineLock,
  applyHostSysctls,
  cleanupRealNode,
  primaryIPv4,
  reclaimAfterExit,
  recordOwner,
  refuseForeignKubernetes,
  REAL_NODE,
  realNodeProblems,
  releaseMachineLock,
  run,
  tryRun,
} from './realnode-host.ts';

export const NODE_COMPONENTS: readonly NodeComponentName[] = ['containerd', 'kubelet', 'kube-proxy'];

export interface RealNodeInfo {
  name: string;
  ip: string;
  podCidr: string;
  bridge: string;
  containerdSocket: string;
  components: Partial<Record<NodeComponentName, { pid: number | undefined; log: string }>>;
}

// ---- the node -------------------------------------------------------------

export interface RealNodeInit {
  cluster: string;
  stateDir: string;
  /** The apiserver's loopback port (pods reach it through the forwarder on the bridge). */
  apiserverPort: number;
  ca: Pem;
  binaries: NodeBinaries;
  /** The sandbox image's archive and reference (image.ts). */
  pauseImage: { name: string; archive: string };
  /** More docker-archive images to load before the node counts as ready (Stateward's). */
  images: string[];
  kubeConfig: () => ClientNodeKubeConfig;
  log: (line: string) => void;
  /** How long to wait for another cluster's real node on this machine to go. */
  lockTimeoutMs: number;
}

export class RealNode {
  readonly name: string = REAL_NODE.name;
  readonly ip: string;
  private readonly init: RealNodeInit;
  private readonly configDir: string;
  private readonly components = new Map<NodeComponentName, ComponentProcess>();
  private forwarder: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private stopped = false;

  private constructor(init: RealNodeInit, ip: string) {
    this.init = init;
    this.ip = ip;
    this.configDir = join(init.stateDir, 'real-node');
  }

  get containerdSocket(): string {
    return join(REAL_NODE.runDir, 'containerd', 'containerd.sock');
  }

  /**
   * The apiserver's flags for a real node: its kubelet client certificate
   * (the kubelet authenticates the apiserver), the CA that signed the
   * kubelet's serving certificate, the node's InternalIP to dial (its name
   * resolves nowhere), and the Node authorizer with NodeRestriction, as a
   * production cluster limits what each kubelet may read and change.
   */
  static apiserverArgs(stateDir: string): string[] {
    return [
      `--kubelet-client-certificate=${join(stateDir, 'apiserver-kubelet-client.crt')}`,
      `--kubelet-client-key=${join(stateDir, 'apiserver-kubelet-client.key')}`,
      `--kubelet-certificate-authority=${join(stateDir, 'ca.crt')}`,
      '--kubelet-preferred-address-types=InternalIP',
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
    ];
  }

  /** The apiserver's kubelet client certificate: system:masters, so the kubelet's webhook authorizer allows it all. */
  static async apiserverKubeletClient(ca: Pem): Promise<Pem> {
    return issue(await caFromPem(ca), {
      subject: 'CN=kube-apiserver-kubelet-client, O=system:masters',
      usage: 'client',
    });
  }

  /** Takes the machine's real node (waiting for another owner), cleans up after a crashed one, starts everything. */
  static async start(init: RealNodeInit, timeoutMs: number): Promise<RealNode> {
    const problems = await realNodeProblems();
    if (problems.length > 0) throw new Error(`this machine cannot run the real node:\n- ${problems.join('\n- ')}`);
    await acquireMachineLock(init.lockTimeoutMs, init.log);
    let node: RealNode | undefined;
    try {
      await cleanupRealNode({ log: init.log, reason: 'what an earlier real node left behind' });
      await refuseForeignKubernetes();
      node = new RealNode(init, await primaryIPv4());
      await node.boot(timeoutMs);
      return node;
    } catch (error) {
      if (node) await node.stop();
      else await releaseMachineLock();
      throw error;
    }
  }

  private path(...parts: string[]): string {
    return join(this.configDir, ...parts);
  }

  private logPath(name: string): string {
    return join(this.init.stateDir, 'logs', `${name}.log`);
  }

  component(name: NodeComponentName): ComponentProcess {
    let component = this.components.get(name);
    if (!component) {
      component = new ComponentProcess(this.spec(name));
      this.components.set(name, component);
    }
    return component;
  }

  componentStatus(): Record<NodeComponentName, { pid: number | undefined; log: string }> {
    const status = {} as Record<NodeComponentName, { pid: number | undefined; log: string }>;
    for (const name of NODE_COMPONENTS) status[name] = { pid: this.component(name).pid, log: this.logPath(name) };
    return status;
  }

  info(): RealNodeInfo {
    return {
      name: this.name,
      ip: this.ip,
      podCidr: REAL_NODE.podCidr,
      bridge: REAL_NODE.bridge,
      containerdSocket: this.containerdSocket,
      components: this.componentStatus(),
    };
  }

  failure(): string | undefined {
    for (const [name, component] of this.components) {
      if (component.unexpectedExit) {
        let tail = '';
        try {
          tail = readFileSync(component.spec.logPath, 'utf8').trimEnd().split('\n').slice(-10).join('\n');
        } catch {
          // no log yet
        }
        return `${name} ${component.unexpectedExit}; log: ${component.spec.logPath}${tail ? `\n${tail}` : ''}`;
      }
    }
    return undefined;
  }

  private spec(name: NodeComponentName): ComponentSpec {
    const b = this.init.binaries;
    const logPath = this.logPath(name);
    switch (name) {
      case 'containerd':
        return {
          name,
          command: b.containerd,
          args: ['--config', this.path('containerd.toml')],
          logPath,
          // containerd starts the runc shim it finds on PATH: the one built with it.
          env: { PATH: `${b.dir}:${process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin'}` },
        };
      case 'kubelet':
        return {
          name,
          // Its own mount namespace (see kubelet-namespace.sh); unshare and sh exec, so
          // the pid is the kubelet's.
          command: 'unshare',
          args: [
            '--mount',
            '--propagation',
            'unchanged',
            'sh',
            this.path('kubelet-namespace.sh'),
            b.node,
            'kubelet',
            `--config=${this.path('kubelet.yaml')}`,
            `--kubeconfig=${this.path('kubelet.kubeconfig')}`,
            `--root-dir=${join(REAL_NODE.varDir, 'kubelet')}`,
            `--hostname-override=${this.name}`,
            `--node-ip=${this.ip}`,
            `--node-labels=${Object.entries(REAL_NODE.labels)
              .map(([k, v]) => `${k}=${v}`)
              .join(',')}`,
            '--v=2',
          ],
          logPath,
        };
      case 'kube-proxy':
        return {
          name,
          command: b.node,
          args: ['kube-proxy', `--config=${this.path('kube-proxy.yaml')}`, '--v=2'],
          logPath,
        };
    }
  }

  async waitComponentReady(name: NodeComponentName, timeoutMs: number): Promise<void> {
    const probes: Record<NodeComponentName, () => Promise<boolean>> = {
      containerd: async () =>
        existsSync(this.containerdSocket) &&
        (
          await tryRun(this.init.binaries.ctr, [
            '--address',
            this.containerdSocket,
            '--connect-timeout',
            '2s',
            '--timeout',
            '5s',
            'version',
          ])
        ).ok,
      kubelet: async () => (await httpStatus('http://127.0.0.1:10248/healthz')) === 200,
      'kube-proxy': async () => (await httpStatus('http://127.0.0.1:10256/healthz')) === 200,
    };
    await waitFor(`${name} to become healthy (log: ${this.logPath(name)})`, probes[name], {
      timeoutMs,
      intervalMs: 250,
      fail: () => this.failure(),
    });
  }

  private async boot(timeoutMs: number): Promise<void> {
    const started = Date.now();
    const deadline = started + timeoutMs;
    const remaining = () => Math.max(1000, deadline - Date.now());
    for (const dir of [
      join(REAL_NODE.varDir, 'containerd'),
      join(REAL_NODE.varDir, 'kubelet'),
      join(REAL_NODE.varDir, 'pod-logs'),
      join(REAL_NODE.varDir, 'cni'),
      join(REAL_NODE.runDir, 'containerd'),
      this.path('pki'),
      this.path('cni'),
      this.path('sysctl'),
    ])
      await mkdir(dir, { recursive: true });
    await recordOwner({
      pid: process.pid,
      cluster: this.init.cluster,
      stateDir: this.init.stateDir,
      binDir: this.init.binaries.dir,
    });
    await applyHostSysctls();
    const files = await nodeConfigFiles({
      name: this.name,
      ip: this.ip,
      configDir: this.configDir,
      containerdSocket: this.containerdSocket,
      apiserverPort: this.init.apiserverPort,
      ca: this.init.ca,
      pauseImage: this.init.pauseImage.name,
      runc: (await run('sh', ['-c', 'command -v runc'])).trim(),
    });
    for (const [name, content] of Object.entries(files))
      await writeFile(this.path(name), content, { mode: name.endsWith('.key') ? 0o600 : 0o644 });
    await chmod(this.path('kubelet-namespace.sh'), 0o755);
    await this.createBridge();
    const timings: string[] = [];
    const mark = (what: string) => timings.push(`${what} ${((Date.now() - started) / 1000).toFixed(1)}s`);

    this.component('containerd').start();
    await this.waitComponentReady('containerd', remaining());
    for (const archive of [this.init.pauseImage.archive, ...this.init.images]) await this.importImage(archive);
    mark(`containerd with ${1 + this.init.images.length} images`);

    // The kubelet's root is shared with its mount namespace (volume mounts must reach runc).
    const kubeletRoot = join(REAL_NODE.varDir, 'kubelet');
    await run('mount', ['--bind', kubeletRoot, kubeletRoot]);
    await run('mount', ['--make-rshared', kubeletRoot]);
    this.component('kubelet').start();
    this.component('kube-proxy').start();
    await this.startForwarder();
    await this.publishApiserverEndpoint();
    await this.waitComponentReady('kubelet', remaining());
    await this.waitNodeReady(remaining());
    mark('node Ready');
    await this.waitComponentReady('kube-proxy', remaining());
    mark('kube-proxy');
    this.init.log(`real node ${this.name} (${this.ip}) Ready: ${timings.join(', ')}`);
  }

  /** The bridge with the gateway address, before any pod: the forwarder listens on it (the bridge plugin adopts it). */
  private async createBridge(): Promise<void> {
    const b = REAL_NODE.bridge;
    if (!(await tryRun('ip', ['link', 'show', b])).ok) await run('ip', ['link', 'add', b, 'type', 'bridge']);
    const prefix = REAL_NODE.podCidr.split('/')[1]!;
    const addresses = await run('ip', ['-4', '-o', 'addr', 'show', 'dev', b]);
    if (!addresses.includes(` ${REAL_NODE.gateway}/${prefix} `))
      await run('ip', ['addr', 'add', `${REAL_NODE.gateway}/${prefix}`, 'dev', b]);
    await run('ip', ['link', 'set', b, 'up']);
  }

  /** pods -> 10.96.0.1:443 (kube-proxy) -> gateway:<apiserver port> (here) -> 127.0.0.1:<apiserver port>. */
  private async startForwarder(): Promise<void> {
    const port = this.init.apiserverPort;
    const server = createServer((inbound) => {
      const outbound = connect({ host: '127.0.0.1', port });
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => {
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.pipe(outbound);
      outbound.pipe(inbound);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, REAL_NODE.gateway, () => resolve());
    });
    this.forwarder = server;
  }

  /**
   * The apiserver publishes no endpoint for the `kubernetes` Service while it
   * advertises a loopback address: this EndpointSlice (its own name, so the
   * apiserver's reconciler leaves it alone) points the Service at the forwarder.
   */
  private async publishApiserverEndpoint(): Promise<void> {
    const discovery = this.init.kubeConfig().makeApiClient(DiscoveryV1Api);
    const body = {
      metadata: {
        name: REAL_NODE.endpointSlice,
        namespace: 'default',
        labels: {
          'kubernetes.io/service-name': 'kubernetes',
          'endpointslice.kubernetes.io/managed-by': 'stateward.dev-real-node',
        },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [REAL_NODE.gateway], conditions: { ready: true } }],
      ports: [{ name: 'https', port: this.init.apiserverPort, protocol: 'TCP' }],
    };
    await discovery
      .deleteNamespacedEndpointSlice({ name: body.metadata.name, namespace: 'default' })
      .catch(() => undefined);
    await discovery.createNamespacedEndpointSlice({ namespace: 'default', body });
  }

  private async waitNodeReady(timeoutMs: number): Promise<void> {
    const core = this.init.kubeConfig().makeApiClient(CoreV1Api);
    await waitFor(
      `node ${this.name} to become Ready (kubelet log: ${this.logPath('kubelet')})`,
      async () => {
        const node = await core.readNode({ name: this.name });
        return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      },
      { timeoutMs, intervalMs: 250, fail: () => this.failure() },
    );
  }

  /** Loads a docker-archive image into the node's containerd, where the kubelet finds it (imagePullPolicy: Never or IfNotPresent). */
  async importImage(archive: string): Promise<void> {
    // --local: unpacked by ctr itself into the overlayfs snapshotter the CRI uses.
    await run(
      this.init.binaries.ctr,
      ['--address', this.containerdSocket, '--namespace', 'k8s.io', 'images', 'import', '--local', archive],
      { timeoutMs: 300_000 },
    );
  }

  /** Stops every process, removes every pod and everything the node changed on the machine. Idempotent. */
  async stop(options: { keepLock?: boolean } = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const log = this.init.log;
    // Pod sandboxes first, through CRI, so the CNI plugin releases each pod's
    // interface and address; the kubelet is stopped before so it restarts none.
    await this.component('kubelet').stop(10_000);
    if (this.component('containerd').running) {
      const removed = await tryRun(
        this.init.binaries.crictl,
        ['--runtime-endpoint', `unix://${this.containerdSocket}`, '--timeout', '30s', 'rmp', '--all', '--force'],
        { timeoutMs: 60_000 },
      );
      if (!removed.ok) log(`crictl rmp: ${removed.out}`);
    }
    await this.component('kube-proxy').stop(10_000);
    await this.component('containerd').stop(10_000);
    await new Promise<void>((resolve) => {
      if (!this.forwarder) return resolve();
      for (const socket of this.sockets) socket.destroy();
      this.forwarder.close(() => resolve());
    });
    try {
      const discovery = this.init.kubeConfig().makeApiClient(DiscoveryV1Api);
      await discovery.deleteNamespacedEndpointSlice({ name: REAL_NODE.endpointSlice, namespace: 'default' });
      await this.init.kubeConfig().makeApiClient(CoreV1Api).deleteNode({ name: this.name });
    } catch {
      // the apiserver may be gone already; the cluster's state goes with it
    }
    await cleanupRealNode({ log, binaries: this.init.binaries });
    if (!options.keepLock) await releaseMachineLock();
  }

  /**
   * For the owner's 'exit' handler, where nothing asynchronous runs: kills the
   * node's processes and leaves the rest (pods, mounts, interfaces, chains) to
   * a detached reclaimer, or else to the next start or `npm run cluster -- down`.
   */
  killNow(): void {
    if (this.stopped) return;
    for (const component of this.components.values()) component.killNow();
    reclaimAfterExit();
  }
}
