// The plain-HTTP surface of the operator (-server.port, default 8001):
// /ready, /healthz, /metrics, and whatever a capability registers (debug
// pages, status). Admission webhooks are served over TLS elsewhere.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { http } from './nodehttp.ts';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { type Logger, nopLogger } from '../log/logger.ts';
import type { ClusterValidationConfig } from './clustervalidation.ts';
import { ConnectionGovernor } from './connections.ts';
import { applyLimits, replyText, requestListener, serverOptions, type Route, type ServerLimits } from './guard.ts';

/** A route's handler; `path` is the request's path, already checked (see target.ts). */
export type Handler = (req: IncomingMessage, res: ServerResponse, path: string) => void | Promise<void>;

export interface HttpServerOptions {
  port: number;
  host?: string;
  registry: Registry;
  /** Readiness: undefined when ready, else what is not ready yet (the 503 body). */
  notReady: () => string | undefined;
  logger?: Logger;
  /** Default: rollout-operator's server (10 s to read a request, 3 min idle keep-alive), 512 connections. */
  limits?: ServerLimits;
  /** -server.cluster-validation.http.* (rollout-operator validates on this server too). */
  clusterValidation?: ClusterValidationConfig;
}

export const DEFAULT_HTTP_LIMITS: ServerLimits = {
  requestTimeoutMs: 10_000,
  idleTimeoutMs: 180_000,
  maxConnections: 512,
  writeTimeoutMs: 10_000,
};

/**
 * A /metrics exposition is reused for this long: however many clients ask,
 * the registry is rendered at most once per interval (Prometheus scrapes
 * every 15 s or more; a flood of scrapes costs one render a second).
 */
export const METRICS_REUSE_MS = 1000;

/** Every plain-server route only reads. */
const READ_METHODS = new Set(['GET', 'HEAD']);

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
  private readonly connections: ConnectionGovernor;

  constructor(options: HttpServerOptions) {
    this.options = options;
    this.log = (options.logger ?? nopLogger).child({ component: 'http' });
    const limits = options.limits ?? DEFAULT_HTTP_LIMITS;
    this.route('/healthz', (_req, res) => replyText(res, 200, 'ok\n'));
    // Reloader's liveness path: its chart probes /live, so its install runs with the image swapped.
    this.route('/live', (_req, res) => replyText(res, 200, 'ok\n'));
    this.route('/ready', (_req, res) => {
      const missing = this.options.notReady();
      replyText(res, missing === undefined ? 200 : 503, missing === undefined ? 'ready\n' : `not ready: ${missing}\n`);
    });
    const exposition = reusedFor(METRICS_REUSE_MS, async () => Buffer.from(await options.registry.metrics()));
    this.route('/metrics', async (_req, res) => {
      const body = await exposition();
      res.writeHead(200, { 'content-type': this.options.registry.contentType, 'content-length': body.length });
      res.end(body);
    });
    const connections = new ConnectionGovernor(limits, 'http', options.registry, this.log);
    this.connections = connections;
    this.server = http.createServer(
      serverOptions(limits),
      requestListener({
        log: this.log,
        registry: options.registry,
        readsBodies: false,
        connections,
        ...(options.clusterValidation ? { clusterValidation: options.clusterValidation } : {}),
        resolve: (path) => this.resolve(path),
      }),
    );
    applyLimits(this.server, limits, 'http', options.registry, this.log, connections);
  }

  /** Serves `path`; every route here only reads, so methods other than GET and HEAD get 405. */
  /** Connections open now (the connection cap counts these). */
  get openConnections(): number {
    return this.connections.open;
  }

  route(path: string, handler: Handler): void {
    this.routes.set(path, onlyReading(handler));
  }

  /**
   * Serves every path that starts with prefix (e.g. "/status/") and has no
   * exact route; the longest prefix wins. Metrics name the prefix, not the
   * path, so paths carrying names (namespaces) add no label values.
   */
  routePrefix(prefix: string, handler: Handler): void {
    this.prefixes.push({ prefix, handler: onlyReading(handler) });
    this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
  }

  private resolve(path: string): Route | undefined {
    const exact = this.routes.get(path);
    if (exact) return { name: routeName(path), handle: exact };
    const prefixed = this.prefixes.find((p) => path.startsWith(p.prefix));
    return prefixed ? { name: routeName(prefixed.prefix), handle: prefixed.handler } : undefined;
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

/** The handler for GET and HEAD; any other method is answered 405. */
function onlyReading(handler: Handler): Handler {
  return (req, res, path) => {
    if (READ_METHODS.has(req.method ?? '')) return handler(req, res, path);
    replyText(res, 405, 'method not allowed\n', { allow: 'GET, HEAD' });
  };
}

/**
 * `make`'s result, made again only when the last one is older than `ms`;
 * callers that ask while it is being made share that one.
 */
export function reusedFor<T>(ms: number, make: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    const now = performance.now();
    if (last === undefined || now - last.at >= ms) {
      const value = make();
      last = { at: now, value };
      // A failed render is not reused.
      value.catch(() => {
        if (last?.value === value) last = undefined;
      });
    }
    return last.value;
  };
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
export async function closeGracefully(
  server: Pick<Server, 'close' | 'closeIdleConnections' | 'closeAllConnections'>,
  graceMs: number,
): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  const timer = setTimeout(() => server.closeAllConnections(), graceMs);
  await closed;
  clearInterval(sweep);
  clearTimeout(timer);
}
