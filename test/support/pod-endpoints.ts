// Simulated pod HTTP endpoints: kwok gives pods loopback addresses
// (127.x.y.z), so a test can serve each "pod" on its own IP on this machine
// and see exactly which pods the operator called, with what.
//
// Each pod also keeps the state a delayed-downscale endpoint has (Mimir's
// prepare-delayed-downscale): the first POST records the time and every POST
// answers {"timestamp": <that time>}; a DELETE forgets it.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TestContext } from 'node:test';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type Pod } from '../../src/runtime/kube/types.ts';

export interface PodCall {
  pod: string;
  method: string;
  path: string;
  host: string;
}

export class PodEndpoints {
  readonly calls: PodCall[] = [];
  private readonly servers: Server[] = [];
  private readonly sockets = new Set<Socket>();
  /** Status to answer per pod (default 200). */
  readonly status = new Map<string, number>();
  /** Pods that accept a call and never answer it. */
  readonly hang = new Set<string>();
  /** While set, calls to the pods it holds are answered only once `open` resolves: holds a request mid-flight. */
  gate: { holds: (pod: string) => boolean; open: Promise<void> } | undefined;
  /** Per pod: unix seconds of the first POST since the last DELETE. Tests may backdate it. */
  readonly preparedAt = new Map<string, number>();
  /** The clock of the simulated pods (unix seconds). */
  now: () => number = () => Math.floor(Date.now() / 1000);

  async serve(pods: { name: string; ip: string }[], port: number): Promise<void> {
    for (const pod of pods) {
      const server = createServer((req, res) => {
        this.calls.push({ pod: pod.name, method: req.method ?? '', path: req.url ?? '', host: req.headers.host ?? '' });
        req.resume();
        if (this.hang.has(pod.name)) return;
        const gate = this.gate?.holds(pod.name) ? this.gate.open : undefined;
        if (gate) void gate.then(() => this.answer(pod.name, req.method ?? '', res));
        else this.answer(pod.name, req.method ?? '', res);
      });
      server.on('connection', (socket) => {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
      });
      await listenWithRetries(server, port, pod.ip, pod.name);
      this.servers.push(server);
    }
  }

  private answer(pod: string, method: string, res: ServerResponse): void {
    const status = this.status.get(pod) ?? 200;
    res.statusCode = status;
    if (status >= 300) {
      res.end();
      return;
    }
    if (method === 'DELETE') this.preparedAt.delete(pod);
    if (method === 'POST') {
      if (!this.preparedAt.has(pod)) this.preparedAt.set(pod, this.now());
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ timestamp: this.preparedAt.get(pod) }));
      return;
    }
    res.end();
  }

  /** The calls made to one pod, as "METHOD path". */
  callsTo(pod: string): string[] {
    return this.calls.filter((c) => c.pod === pod).map((c) => `${c.method} ${c.path}`);
  }

  async close(): Promise<void> {
    // Hanging calls would keep close() waiting for their connections.
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

/** Serves every pod the namespace has now on `port`, each on its own IP, until the test ends. */
export async function serveNamespacePods(
  t: TestContext,
  kube: KubeClient,
  namespace: string,
  port: number,
): Promise<PodEndpoints> {
  const endpoints = new PodEndpoints();
  t.after(() => endpoints.close());
  await endpoints.serve(
    (await kube.list<Pod>(resources.pods, { namespace })).items.map((p) => ({
      name: p.metadata!.name!,
      ip: p.status!.podIP!,
    })),
    port,
  );
  return endpoints;
}

/**
 * Binds `ip:port`, retrying for up to 5 s when the address is in use. A
 * clean-clone CI run failed once with EADDRINUSE on a pod IP, at a port
 * freshly found free on 127.0.0.1; the cause was not found (a pod IP kwok
 * reused while an earlier server or connection still held it is the likely
 * one), and a moment later the address is free.
 */
async function listenWithRetries(server: Server, port: number, ip: string, pod: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, ip, () => {
          server.off('error', reject);
          resolve();
        });
      });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 25)
        throw new Error(`pod ${pod}: cannot listen on ${ip}:${port} after ${attempt} attempts`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}
