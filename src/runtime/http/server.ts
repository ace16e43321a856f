// The plain-HTTP surface of the operator (-server.port, default 8001):
// /ready, /healthz, /metrics, and whatever a capability registers (debug
// pages, status). Admission webhooks are served over TLS elsewhere.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Gauge, Histogram, type Registry } from 'prom-client';
import { type Logger, nopLogger } from '../log/logger.ts';

export type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

export interface HttpServerOptions {
  port: number;
  host?: string;
  registry: Registry;
  /** Readiness: 200 only when this returns true (caches synced). */
  ready: () => boolean;
  logger?: Logger;
}

const DSKIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100];

/** Route names as rollout-operator's dskit middleware spells them: "/admission/pod-eviction" → "admission_pod_eviction". */
export function routeName(path: string): string {
  return path.replace(/^\/+|\/+$/g, '').replace(/[^a-zA-Z0-9]+/g, '_') || 'root';
}

export class HttpServer {
  private readonly options: HttpServerOptions;
  private readonly routes = new Map<string, Handler>();
  private readonly prefixes: { prefix: string; handler: Handler }[] = [];
  private readonly server: Server;
  private readonly log: Logger;
  private readonly duration: Histogram;
  private readonly inflight: Gauge;

  constructor(options: HttpServerOptions) {
    this.options = options;
    this.log = (options.logger ?? nopLogger).child({ component: 'http' });
    this.duration = requestDurationMetric(options.registry);
    this.inflight = inflightMetric(options.registry);
    this.route('/healthz', (_req, res) => text(res, 200, 'ok\n'));
    this.route('/ready', (_req, res) => (this.options.ready() ? text(res, 200, 'ready\n') : text(res, 503, 'not ready: caches are still syncing\n')));
    this.route('/metrics', async (_req, res) => {
      const body = await this.options.registry.metrics();
      res.writeHead(200, { 'content-type': this.options.registry.contentType });
      res.end(body);
    });
    this.server = createServer((req, res) => void this.dispatch(req, res));
    // As rollout-operator's server: 10 s to read a request, 3 min idle keep-alive.
    this.server.requestTimeout = 10_000;
    this.server.headersTimeout = 10_000;
    this.server.keepAliveTimeout = 180_000;
  }

  route(path: string, handler: Handler): void {
    this.routes.set(path, handler);
  }

  /**
   * Serves every path that starts with prefix (e.g. "/status/") and has no
   * exact route; the longest prefix wins. Metrics name the prefix, not the
   * path, so paths carrying names (namespaces) add no label values.
   */
  routePrefix(prefix: string, handler: Handler): void {
    this.prefixes.push({ prefix, handler });
    this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const exact = this.routes.get(path);
    const prefixed = exact ? undefined : this.prefixes.find((p) => path.startsWith(p.prefix));
    const handler = exact ?? prefixed?.handler;
    const route = exact ? routeName(path) : prefixed ? routeName(prefixed.prefix) : 'other';
    const method = req.method ?? 'GET';
    const started = performance.now();
    this.inflight.inc({ method, route });
    try {
      if (!handler) text(res, 404, `404 page not found\n`);
      else await handler(req, res);
    } catch (error) {
      this.log.error('handler failed', { path, err: error instanceof Error ? error.message : String(error) });
      if (!res.headersSent) text(res, 500, 'internal error\n');
      else res.destroy();
    } finally {
      this.inflight.dec({ method, route });
      this.duration.observe({ method, route, status_code: String(res.statusCode), ws: 'false' }, (performance.now() - started) / 1000);
    }
  }

  async listen(): Promise<number> {
    const port = await listenOn(this.server, this.options.port, this.options.host);
    this.log.info('serving HTTP', { port });
    return port;
  }

  /** Stops accepting, lets in-flight requests finish (up to graceMs), then closes. */
  async close(graceMs = 5000): Promise<void> {
    await closeGracefully(this.server, graceMs);
  }
}

/** Listens (port 0 = any free one) and resolves to the bound port; a bind error rejects. */
export async function listenOn(server: Server, port: number, host: string | undefined): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/**
 * Stops accepting, lets in-flight requests finish, then closes. Keep-alive
 * connections go idle as their last request finishes; each is closed as soon
 * as it does, and everything once the grace period is over.
 */
export async function closeGracefully(server: Pick<Server, 'close' | 'closeIdleConnections' | 'closeAllConnections'>, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  const timer = setTimeout(() => server.closeAllConnections(), graceMs);
  await closed;
  clearInterval(sweep);
  clearTimeout(timer);
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(body);
}

// Shared by the HTTP and the HTTPS (webhook) servers: same names and labels as rollout-operator.
const requestDurations = new WeakMap<Registry, Histogram>();
const inflights = new WeakMap<Registry, Gauge>();

export function requestDurationMetric(registry: Registry): Histogram {
  let metric = requestDurations.get(registry);
  if (!metric) {
    metric = new Histogram({ name: 'rollout_operator_request_duration_seconds', help: 'Time (in seconds) spent serving HTTP requests.', labelNames: ['method', 'route', 'status_code', 'ws'], buckets: DSKIT_BUCKETS, registers: [registry] });
    requestDurations.set(registry, metric);
  }
  return metric;
}

export function inflightMetric(registry: Registry): Gauge {
  let metric = inflights.get(registry);
  if (!metric) {
    metric = new Gauge({ name: 'rollout_operator_inflight_requests', help: 'Current number of inflight requests.', labelNames: ['method', 'route'], registers: [registry] });
    inflights.set(registry, metric);
  }
  return metric;
}
