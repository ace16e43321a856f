// A TCP proxy that slows what clients send through it by a set delay.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { closeServer, listenOn } from './tcp.ts';

/**
 * Holds every chunk from the client for `delayMs` before passing it on (the
 * answers flow back at once): a slow webhook, or, in front of the apiserver,
 * one whose every request takes that much longer.
 */
export class DelayProxy {
  delayMs = 0;
  /** Requests seen arriving: bursts of client data at least 200 ms after the connection's previous one. */
  arrivals = 0;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  constructor(upstreamPort: number) {
    this.server = createServer((client) => {
      const upstream = connect(upstreamPort, '127.0.0.1');
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      let last = 0;
      client.on('data', (chunk) => {
        if (Date.now() - last > 200) this.arrivals++;
        last = Date.now();
        if (this.delayMs > 0) setTimeout(() => upstream.write(chunk), this.delayMs);
        else upstream.write(chunk);
      });
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  listen(): Promise<number> {
    return listenOn(this.server);
  }

  close(): Promise<void> {
    return closeServer(this.server, this.sockets);
  }
}
