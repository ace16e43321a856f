// A TCP proxy spreading connections over several upstream ports in turn:
// a Service with several endpoints, for webhooks served by more than one
// operator replica (TLS passes through untouched).
import { createServer, connect, type Server, type Socket } from 'node:net';

export class RoundRobinProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private next = 0;
  /** Connections handed to each upstream, in upstream order. */
  readonly counts: number[];

  constructor(upstreamPorts: number[]) {
    this.counts = upstreamPorts.map(() => 0);
    this.server = createServer((client) => {
      const index = this.next++ % upstreamPorts.length;
      this.counts[index]!++;
      const upstream = connect(upstreamPorts[index]!, '127.0.0.1');
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
      }
      client.pipe(upstream).pipe(client);
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    });
  }

  async listen(port = 0): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(port, '127.0.0.1', resolve));
    return (this.server.address() as { port: number }).port;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
