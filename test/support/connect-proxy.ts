// A real HTTP CONNECT proxy for tests of clients that tunnel through one (the
// API client's proxy-url/HTTPS_PROXY, the reload alerts' ALERT_WEBHOOK_PROXY).
// Every tunnel reaches its port at 127.0.0.1, so the proxy resolves names the
// client cannot, as a bastion in front of a private endpoint does.
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

export interface ConnectProxy {
  /** http://127.0.0.1:<port> */
  url: string;
  port: number;
  /** Each tunnel asked for, as `host:port`, then ` <Proxy-Authorization>` when one was sent. */
  tunnels: string[];
}

/** Starts the proxy; it stops with the test. Hosts named `refused.*` get 403, as a proxy's allow list answers. */
export async function connectProxy(t: { after(fn: () => Promise<void>): void }): Promise<ConnectProxy> {
  const tunnels: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((_request, response) => response.writeHead(405).end());
  server.on('connect', (request, client: Socket) => {
    if (request.url?.startsWith('refused.')) {
      client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      return;
    }
    const auth = request.headers['proxy-authorization'];
    tunnels.push(`${request.url}${auth ? ` ${auth}` : ''}`);
    const port = Number(new URL(`http://${request.url}`).port);
    const upstream = connect(port, '127.0.0.1', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.pipe(client);
      client.pipe(upstream);
    });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, port, tunnels };
}
