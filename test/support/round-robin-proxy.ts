// A TCP proxy spreading connections over several upstream ports in turn:
// a Service with several endpoints, for webhooks served by more than one
// operator replica (TLS passes through untouched). A connection an upstream
// refuses goes to the next one, as a Service would stop routing to a pod
// that is gone; a paused upstream still accepts, so its requests time out,
// as they would behind a real Service until a readiness probe noticed.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { closeServer, listenOn } from './tcp.ts';

export class RoundRobinProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private next = 0;
  /** Connections handed to each upstream, by index in the upstream list. */
  readonly counts: number[];
  /** Connections no upstream accepted. */
  refused = 0;

  /** `upstreams`: the ports, or a function asked at each connection (replicas come and go). */
  constructor(upstreams: number[] | (() => number[])) {
    const ports = typeof upstreams === 'function' ? upstreams : () => upstreams;
    this.counts = typeof upstreams === 'function' ? [] : upstreams.map(() => 0);
    this.server = createServer((client) => {
      this.track(client);
      client.on('error', () => client.destroy());
      client.pause();
      const candidates = ports();
      const first = this.next++;
      const attempt = (i: number) => {
        if (i >= candidates.length) {
          this.refused++;
          client.destroy();
          return;
        }
        const index = (first + i) % candidates.length;
        const upstream = connect(candidates[index]!, '127.0.0.1');
        let connected = false;
        upstream.once('connect', () => {
          connected = true;
          this.counts[index] = (this.counts[index] ?? 0) + 1;
          this.track(upstream);
          client.pipe(upstream).pipe(client);
          client.resume();
          const end = () => {
            client.destroy();
            upstream.destroy();
          };
          client.on('close', end);
          upstream.on('close', end);
        });
        upstream.on('error', () => {
          if (!connected) attempt(i + 1);
          else client.destroy();
        });
      };
      attempt(0);
    });
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
  }

  listen(port = 0): Promise<number> {
    return listenOn(this.server, port);
  }

  close(): Promise<void> {
    return closeServer(this.server, this.sockets);
  }
}
