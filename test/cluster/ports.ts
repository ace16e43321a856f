// Free loopback ports, so two test runs on one machine never collide.
import { createServer } from 'node:net';

async function onePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port allocated'));
      });
    });
  });
}

/** Distinct free ports. A port could still be taken between this call and the
 * component binding it; the component then fails fast with its log named. */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await onePort());
  return [...ports];
}
