// One component of the local cluster (control plane or real node) as an OS
// process with its own log file.
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';

export type ControlPlaneComponentName = 'etcd' | 'apiserver' | 'controller-manager' | 'scheduler' | 'kwok';
/** The real node's processes (test/cluster/realnode.ts), present only in a cluster started with one. */
export type NodeComponentName = 'containerd' | 'kubelet' | 'kube-proxy';
export type ComponentName = ControlPlaneComponentName | NodeComponentName;

export interface ComponentSpec {
  name: ComponentName;
  command: string;
  args: string[];
  logPath: string;
  /** Added to this process's environment. */
  env?: Record<string, string>;
}

export class ComponentProcess {
  readonly spec: ComponentSpec;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  /** Set when the process ended without being asked to; surfaced in errors. */
  unexpectedExit: string | undefined;
  private expectedStop = false;

  constructor(spec: ComponentSpec) {
    this.spec = spec;
  }

  get pid(): number | undefined {
    return this.child?.exitCode === null && this.child.signalCode === null ? this.child.pid : undefined;
  }

  get running(): boolean {
    return this.pid !== undefined;
  }

  start(): void {
    if (this.running) return;
    this.unexpectedExit = undefined;
    // Append: a restarted component keeps its earlier log above the new one.
    const fd = openSync(this.spec.logPath, 'a');
    let child: ChildProcess;
    try {
      child = spawn(this.spec.command, this.spec.args, {
        stdio: ['ignore', fd, fd],
        ...(this.spec.env ? { env: { ...process.env, ...this.spec.env } } : {}),
        // Own process group, so Ctrl-C in the terminal reaches the harness
        // only, which then stops the components in order.
        detached: true,
      });
    } finally {
      closeSync(fd);
    }
    this.child = child;
    this.expectedStop = false;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        if (!this.expectedStop) this.unexpectedExit = `exited with ${signal ?? `code ${code}`}`;
        resolve();
      });
      child.once('error', (error) => {
        this.unexpectedExit = `could not start: ${error.message}`;
        resolve();
      });
    });
  }

  /** SIGTERM, then SIGKILL after the grace period. */
  async stop(graceMs = 10_000): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return this.exited;
    this.expectedStop = true;
    child.kill('SIGCONT'); // a paused process cannot act on SIGTERM
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** Simulates a crash: SIGKILL, no chance to clean up. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return this.exited;
    this.expectedStop = true;
    child.kill('SIGKILL');
    await this.exited;
  }

  /**
   * Freezes the process (SIGSTOP): its sockets stay open but nothing answers,
   * which is what a half-open connection looks like from the other side.
   */
  pause(): void {
    if (this.running) this.child?.kill('SIGSTOP');
  }

  resume(): void {
    if (this.running) this.child?.kill('SIGCONT');
  }

  /** For process-exit handlers, where nothing asynchronous runs any more. */
  killNow(): void {
    if (this.running) {
      this.expectedStop = true;
      this.child?.kill('SIGKILL');
    }
  }

  async waitExit(): Promise<void> {
    await this.exited;
  }
}
