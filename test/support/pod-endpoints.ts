// Simulated pod HTTP endpoints: kwok gives pods loopback addresses
// (127.x.y.z), so a test can serve each "pod" on its own IP on this machine
// and see exactly which pods the operator called, with what.
import { createServer, type Server } from 'node:http';

export interface PodCall {
  pod: string;
  method: string;
  path: string;
  host: string;
}

export class PodEndpoints {
  readonly calls: PodCall[] = [];
  private readonly servers: Server[] = [];
  /** Status to answer per pod (default 200). */
  readonly status = new Map<string, number>();

  async serve(pods: { name: string; ip: string }[], port: number): Promise<void> {
    for (const pod of pods) {
      const server = createServer((req, res) => {
        this.calls.push({ pod: pod.name, method: req.method ?? '', path: req.url ?? '', host: req.headers.host ?? '' });
        req.resume();
        res.statusCode = this.status.get(pod.name) ?? 200;
        res.end();
      });
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, pod.ip, () => resolve()));
      this.servers.push(server);
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}
