// Every pod's HTTP endpoint at once: kwok gives pods loopback addresses
// (127.x.y.z) and one server on 0.0.0.0:<port> receives the connections to
// all of them, whatever pods come and go (test/support/pod-endpoints.ts
// binds each pod's address instead, which suits a fixed set of pods). The
// prepare-downscale webhook calls leaving pods here. Knobs for faults: an
// HTTP status to answer with, or hanging (accept, never answer).
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { closeServer, listenOn } from '../support/tcp.ts';

export class AllPodEndpoints {
  /** Status to answer (default 200). */
  status = 200;
  /** Accept calls and never answer them. */
  hang = false;
  readonly calls = { total: 0, failed: 0, hung: 0 };
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  constructor() {
    this.server = createServer((req, res) => {
      this.calls.total++;
      req.resume();
      if (this.hang) {
        this.calls.hung++;
        return;
      }
      res.statusCode = this.status;
      if (this.status >= 300) this.calls.failed++;
      if (req.method === 'POST' && this.status < 300) {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ timestamp: Math.floor(Date.now() / 1000) }));
        return;
      }
      res.end();
    });
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async listen(port: number): Promise<void> {
    await listenOn(this.server, port, '0.0.0.0');
  }

  /** Back to answering 200 at once; connections held by a hang are dropped. */
  heal(): void {
    this.status = 200;
    this.hang = false;
    for (const socket of this.sockets) socket.destroy();
  }

  close(): Promise<void> {
    return closeServer(this.server, this.sockets);
  }
}
