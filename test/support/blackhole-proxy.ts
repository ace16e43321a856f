// A TCP proxy in front of the apiserver that can silently stop forwarding on
// the connections it already carries while accepting new ones: exactly what
// a client sees when a NAT or load balancer forgets a long-lived connection.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { closeServer, listenOn } from './tcp.ts';

export class BlackholeProxy {
  private readonly server: Server;
  private readonly pairs = new Set<{ client: Socket; upstream: Socket; dead: boolean }>();
  port = 0;
  accepted = 0;

  constructor(upstreamPort: number) {
    this.server = createServer((client) => {
      this.accepted++;
      const upstream = connect(upstreamPort, '127.0.0.1');
      const pair = { client, upstream, dead: false };
      this.pairs.add(pair);
      client.on('data', (chunk) => pair.dead || upstream.write(chunk));
      upstream.on('data', (chunk) => pair.dead || client.write(chunk));
      const end = () => {
        this.pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', end).on('error', end);
      upstream.on('close', end).on('error', end);
    });
  }

  async listen(): Promise<number> {
    this.port = await listenOn(this.server);
    return this.port;
  }

  /** From now on, existing connections carry nothing either way; sockets stay open. */
  blackholeExisting(): number {
    for (const pair of this.pairs) pair.dead = true;
    return this.pairs.size;
  }

  async close(): Promise<void> {
    await closeServer(
      this.server,
      [...this.pairs].flatMap((pair) => [pair.client, pair.upstream]),
    );
  }
}
