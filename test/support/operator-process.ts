// Runs the real stateward executable as a child process against the test
// cluster, the way a Deployment would run it, and reads its HTTP surface.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { imageEnv, imageNodeFlags } from '../../scripts/image-runtime.ts';

/** Leader election fast enough for a test to see a failover within seconds. */
export const FAST_ELECTION = [
  '-leader-election.enabled',
  '-leader-election.lease-duration=3s',
  '-leader-election.renew-deadline=2s',
  '-leader-election.retry-period=500ms',
];

const bin = fileURLToPath(new URL('../../bin/stateward.ts', import.meta.url));

/**
 * STATEWARD_NODE_FLAGS: node flags for the operator child (space-separated),
 * for a benchmark comparing runtime settings such as the image's
 * (e.g. "--max-opt=2"); none by default.
 */
const nodeFlags = (process.env['STATEWARD_NODE_FLAGS'] ?? '').split(/\s+/).filter(Boolean);

export class OperatorProcess {
  readonly port: number;
  private readonly child: ChildProcess;
  private output = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(child: ChildProcess, port: number) {
    this.child = child;
    this.port = port;
    child.stdout?.on('data', (c: Buffer) => (this.output += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (this.output += c.toString()));
    this.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  static async start(
    cluster: TestCluster,
    namespace: string,
    flags: string[] = [],
    options: {
      kubeconfig?: string;
      /** false: neither -kubernetes.config-file nor -kubernetes.api-url (the configuration from KUBECONFIG or ~/.kube/config). */
      kubeconfigFlags?: false;
      env?: NodeJS.ProcessEnv;
      /** Node runs as the image runs it: the Dockerfile's ENTRYPOINT flags and ENV (the sources still, not the built form). */
      asImage?: boolean;
    } = {},
  ): Promise<OperatorProcess> {
    const [port] = await freePorts(1);
    const image = options.asImage ? { flags: await imageNodeFlags(), env: await imageEnv() } : { flags: [], env: {} };
    const child = spawn(
      process.execPath,
      [
        ...nodeFlags,
        ...image.flags,
        bin,
        `-kubernetes.namespace=${namespace}`,
        ...(options.kubeconfigFlags === false
          ? []
          : [
              `-kubernetes.config-file=${options.kubeconfig ?? cluster.kubeconfigPath}`,
              `-kubernetes.api-url=${cluster.state.server}`,
            ]),
        `-server.port=${port}`,
        '-log.level=debug',
        ...flags,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...image.env, ...options.env } },
    );
    return new OperatorProcess(child, port!);
  }

  get logs(): string {
    return this.output;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  async get(path: string): Promise<{ status: number; body: string } | undefined> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.port}${path}`, { signal: AbortSignal.timeout(2000) });
      return { status: response.status, body: await response.text() };
    } catch {
      return undefined;
    }
  }

  /** The value of an unlabelled metric, or undefined when unreachable or absent. */
  async metric(name: string): Promise<number | undefined> {
    const response = await this.get('/metrics');
    const line = response?.body.split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.split(' ')[1]);
  }

  async waitReady(timeoutMs = 30_000): Promise<void> {
    await waitFor('the operator to be ready', async () => (await this.get('/ready'))?.status === 200, {
      timeoutMs,
      fail: () =>
        this.child.exitCode !== null
          ? `operator exited with ${this.child.exitCode}:\n${this.output.slice(-2000)}`
          : undefined,
    });
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Kills it if still running; for test teardown. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}
