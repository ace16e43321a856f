// A small HTTP API on a unix socket in the cluster's state directory, so
// processes other than the owner (test files, the CLI) can stop, start, kill
// and restart single components, and shut the cluster down.
import { createServer, request, type Server } from 'node:http';
import { rm } from 'node:fs/promises';
import type { LocalCluster } from './cluster.ts';

export type ComponentAction = 'stop' | 'start' | 'kill' | 'restart' | 'pause' | 'resume';
const ACTIONS: readonly ComponentAction[] = ['stop', 'start', 'kill', 'restart', 'pause', 'resume'];

export async function serveControl(cluster: LocalCluster, onShutdown: () => void): Promise<Server> {
  await rm(cluster.controlSocket, { force: true });
  const server = createServer((req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const url = req.url ?? '/';
    if (req.method === 'GET' && url === '/state') return reply(200, cluster.state(true));
    if (req.method === 'POST' && url === '/shutdown') {
      reply(200, { ok: true });
      onShutdown();
      return;
    }
    const match = /^\/components\/([a-z-]+)\/([a-z]+)$/.exec(url);
    if (req.method === 'POST' && match) {
      const [, name, action] = match as unknown as [string, string, ComponentAction];
      if (!cluster.hasComponent(name))
        return reply(404, {
          error: `unknown component "${name}"; one of ${Object.keys(cluster.componentStatus()).join(', ')}`,
        });
      if (!ACTIONS.includes(action))
        return reply(404, { error: `unknown action "${action}"; one of ${ACTIONS.join(', ')}` });
      const operations: Record<ComponentAction, () => Promise<void>> = {
        stop: () => cluster.stopComponent(name),
        start: () => cluster.startComponent(name),
        kill: () => cluster.killComponent(name),
        restart: () => cluster.restartComponent(name),
        pause: () => Promise.resolve(cluster.pauseComponent(name)),
        resume: () => Promise.resolve(cluster.resumeComponent(name)),
      };
      operations[action]().then(
        () => reply(200, { ok: true, components: cluster.componentStatus() }),
        (error: unknown) => reply(500, { error: error instanceof Error ? error.message : String(error) }),
      );
      return;
    }
    reply(404, { error: `no route ${req.method} ${url}` });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(cluster.controlSocket, resolve);
  });
  return server;
}

export async function controlRequest<T>(
  socketPath: string,
  method: 'GET' | 'POST',
  path: string,
  timeoutMs = 120_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        let parsed: { error?: string } & Record<string, unknown>;
        try {
          parsed = JSON.parse(body) as typeof parsed;
        } catch {
          return reject(
            new Error(`cluster control ${method} ${path}: unreadable answer ${JSON.stringify(body.slice(0, 200))}`),
          );
        }
        if ((res.statusCode ?? 500) >= 400)
          return reject(new Error(`cluster control ${method} ${path}: ${parsed.error ?? res.statusCode}`));
        resolve(parsed as T);
      });
    });
    req.on('timeout', () =>
      req.destroy(new Error(`cluster control ${method} ${path}: no answer within ${timeoutMs} ms`)),
    );
    req.on('error', (error) =>
      reject(new Error(`cluster control ${method} ${path} via ${socketPath}: ${error.message}`)),
    );
    req.end();
  });
}
