// Start and stop of the tests' small TCP and HTTP servers (proxies, fake pod
// endpoints): listen on loopback and learn the port; on close, drop every
// open connection first, since server.close() waits for them to end.
import type { Server as NetServer, Socket } from 'node:net';

/** Listens on `host` (loopback by default; port 0 picks a free one) and resolves to the port. */
export async function listenOn(server: NetServer, port = 0, host = '127.0.0.1'): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as { port: number }).port;
}

/** Destroys every socket still open, then closes the server. */
export async function closeServer(server: NetServer, sockets: Iterable<Socket>): Promise<void> {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
