// What both of Stateward's servers (plain HTTP and the HTTPS webhooks) do
// the same way so that no client can take the process down or hold more
// than a bounded share of it: timeouts on every phase of a connection, a
// connection cap, a request listener that never throws, one response per
// request, their request metrics (rollout-operator's, from dskit's
// instrumentation) and dskit's cluster validation. Every limit here is a
// flag; the numbers and what each protects are in docs/webhooks.md ("Limits").
import type { IncomingMessage, RequestListener, Server, ServerOptions, ServerResponse } from 'node:http';
import { http } from './nodehttp.ts';
import type { Registry } from 'prom-client';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Logger } from '../log/logger.ts';
import { CLUSTER_REJECTED_STATUS } from './clusterlabel.ts';
import { type ClusterValidationConfig, ClusterValidator, invalidClusterRequestsMetric } from './clustervalidation.ts';
import { parseRequestTarget } from './target.ts';
import { checkDeadlinesOnlyWhileActive } from './deadlinechecks.ts';
import { ConnectionGovernor, declaredBodyBytes } from './connections.ts';
import { perRegistry } from '../metrics.ts';
import { everyMs } from './gate.ts';

export interface ServerLimits {
  /** Headers and body must arrive within this; a connection that sends no request at all is closed after it. */
  requestTimeoutMs: number;
  /** A keep-alive connection idle for this long after a response is closed. */
  idleTimeoutMs: number;
  /** Open connections; at the cap a newcomer displaces the longest-idle one (connections.ts). */
  maxConnections: number;
  /** Open connections from one peer address; 0 or absent is half of maxConnections. */
  maxConnectionsPerPeer?: number;
  /** A response its client has not taken this long after its last byte was written closes the connection. */
  writeTimeoutMs: number;
}

/**
 * Node checks request and header deadlines on a timer (30 s by default),
 * which let a slow client hold a connection three times the documented
 * timeout. A tenth of the timeout, between 50 ms and 1 s, keeps the overshoot
 * small; the check runs only while a connection is open (deadlinechecks.ts).
 */
export function serverOptions(limits: ServerLimits): ServerOptions<typeof MeteredRequest, typeof MeteredResponse> {
  return {
    IncomingMessage: MeteredRequest,
    ServerResponse: MeteredResponse,
    requestTimeout: limits.requestTimeoutMs,
    headersTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.floor(limits.requestTimeoutMs / 10))),
  };
}

/**
 * A request that counts the body bytes its handler consumed, as dskit's
 * instrumentation counts what the handler reads (not Content-Length): a body
 * nobody reads (a 404, a 511, a 413 refused by its declared length) is 0.
 * Every consumer, flowing or read(), gets the body through 'data' events;
 * those Node emits to discard a body no one listens to are not counted.
 */
export class MeteredRequest extends http.IncomingMessage {
  bodyBytesRead = 0;

  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'data' && (this.listenerCount('data') > 0 || this.listenerCount('readable') > 0))
      this.bodyBytesRead += byteLength(args[0]);
    return super.emit(event, ...args);
  }
}

/**
 * A response that counts the body bytes its handler wrote (headers
 * excluded), as dskit's instrumentation counts them. Node's end() writes its
 * chunk without going through write(), so nothing is counted twice.
 */
export class MeteredResponse<Request extends IncomingMessage = IncomingMessage> extends http.ServerResponse<Request> {
  bodyBytesWritten = 0;

  override write(chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
    this.bodyBytesWritten += byteLength(chunk, encoding);
    return super.write(chunk, encoding as BufferEncoding, callback as (error: Error | null | undefined) => void);
  }

  override end(chunk?: unknown, encoding?: unknown, callback?: unknown): this {
    if (typeof chunk !== 'function') this.bodyBytesWritten += byteLength(chunk, encoding);
    return super.end(chunk, encoding as BufferEncoding, callback as () => void);
  }
}

function byteLength(chunk: unknown, encoding?: unknown): number {
  if (typeof chunk === 'string')
    return Buffer.byteLength(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  return chunk instanceof Uint8Array ? chunk.byteLength : 0;
}

/**
 * The limits a server's constructor options cannot carry; `name` labels the
 * connection metrics ("http", "https"). `connections` is the governor the
 * server's request listener serves requests in turn with.
 */
export function applyLimits(
  server: Server,
  limits: ServerLimits,
  name: string,
  registry: Registry,
  log: Logger,
  connections = new ConnectionGovernor(limits, name, registry, log),
): void {
  server.keepAliveTimeout = limits.idleTimeoutMs;
  // A connection that never sends a byte is closed at the request timeout by
  // two things that race: Node's deadline check (Node 24 starts it at
  // connection, and answers 408 first) and this socket inactivity timeout
  // (closes silently). The second is the one that does not depend on Node's
  // parser bookkeeping. It is switched off as each request starts (see
  // requestListener), as Node itself does for a keep-alive connection's later requests.
  server.timeout = limits.requestTimeoutMs;
  connections.attach(server);
  checkDeadlinesOnlyWhileActive(server);
  const dropped = droppedConnectionsMetric(registry);
  const warn = everyMs(60_000);
  server.on('drop', () => {
    dropped.inc({ server: name });
    if (warn())
      log.warn('connection refused: connections arrive faster than displaced ones close', {
        server: name,
        limit: server.maxConnections,
      });
  });
}

export interface Route {
  /** The route label of the request metrics (rollout-operator's spelling). */
  name: string;
  handle: (req: IncomingMessage, res: ServerResponse, path: string) => void | Promise<void>;
}

export interface ListenerOptions {
  log: Logger;
  registry: Registry;
  /** The route serving a path, or undefined for a 404. */
  resolve: (path: string) => Route | undefined;
  /**
   * False when no route reads request bodies (the plain server): a request
   * that carries one is then answered with `Connection: close`, for the same
   * reason as in replyText. (Patching each response's writeHead to decide
   * this later cost the webhook path 2–3× its p99 at 500 requests/s.)
   */
  readsBodies: boolean;
  /** -server.cluster-validation.http.*; checked only when enabled. */
  clusterValidation?: ClusterValidationConfig;
  /** Serves each connection's requests one at a time (connections.ts); absent, every request is served at once. */
  connections?: ConnectionGovernor;
}

/** Methods that get a label of their own in the request metrics; any other is "other", so that clients cannot grow them. */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE']);

export function methodLabel(method: string | undefined): string {
  return method !== undefined && KNOWN_METHODS.has(method) ? method : 'other';
}

/**
 * A request listener that cannot throw: an unusable target is a 400 (414 when
 * too long), an unknown path a 404, and an error escaping a handler a 500 for
 * that request alone. A response sent before the request has fully arrived
 * closes the connection, so a client never gets a second answer (Node's own
 * 408) to the same request. With cluster validation on, a request that fails
 * it in hard mode is answered 511 before its route (or the 404) runs, and is
 * measured like any other, as dskit's instrumentation wraps its validation.
 */
export function requestListener(options: ListenerOptions): RequestListener {
  const { log, registry, resolve } = options;
  const duration = requestDurationMetric(registry);
  const inflight = inflightMetric(registry);
  const requestBytes = requestBytesMetric(registry);
  const responseBytes = responseBytesMetric(registry);
  // Registered whether or not validation is on, as rollout-operator does.
  invalidClusterRequestsMetric(registry);
  const clusterValidator = options.clusterValidation?.enabled
    ? new ClusterValidator(options.clusterValidation, { registry, log })
    : undefined;
  return (req, res) => {
    if (options.connections && !options.connections.accepts(req)) return;
    req.socket.setTimeout(0);
    if (!options.readsBodies && carriesBody(req)) res.shouldKeepAlive = false;
    const target = parseRequestTarget(req.url);
    const route = target.ok ? resolve(target.path) : undefined;
    const labels = { method: methodLabel(req.method), route: route?.name ?? 'other' };
    const started = performance.now();
    inflight.inc(labels);
    res.once('close', () => {
      inflight.dec(labels);
      duration.observe(
        { ...labels, status_code: String(res.statusCode), ws: 'false' },
        (performance.now() - started) / 1000,
      );
      requestBytes.observe(labels, req instanceof MeteredRequest ? req.bodyBytesRead : 0);
      responseBytes.observe(labels, res instanceof MeteredResponse ? res.bodyBytesWritten : 0);
    });
    const serve = () => dispatch(req, res, target, route, clusterValidator, log);
    if (options.connections) options.connections.serveInTurn(req, res, serve);
    else serve();
  };
}

/** One request, in its connection's turn: the target's checks, cluster validation, then its route. */
function dispatch(
  req: IncomingMessage,
  res: ServerResponse,
  target: ReturnType<typeof parseRequestTarget>,
  route: Route | undefined,
  clusterValidator: ClusterValidator | undefined,
  log: Logger,
): void {
  if (!target.ok) {
    log.debug('unusable request target', { target: req.url ?? '', reason: target.reason });
    return replyText(res, target.status, `${target.reason}\n`);
  }
  const refusal = clusterValidator?.screen(req, target.path, route?.name);
  if (refusal !== undefined)
    return replyText(res, CLUSTER_REJECTED_STATUS, refusal, { 'content-type': 'application/json' });
  if (!route) return replyText(res, 404, '404 page not found\n');
  const failed = (error: unknown) => {
    log.error('request handler failed', {
      path: target.path,
      err: error instanceof Error ? error.message : String(error),
    });
    if (!res.headersSent) replyText(res, 500, 'internal error\n');
    else res.destroy();
  };
  try {
    const pending = route.handle(req, res, target.path);
    if (pending) pending.catch(failed);
  } catch (error) {
    failed(error);
  }
}

/**
 * A plain-text answer, unless one has already started. An answer that starts
 * before its request has fully arrived (a 413, 503 or 408, a 404 for an
 * unknown path) says `Connection: close`, and Node closes the connection once
 * it is sent: otherwise Node would read the rest of the body as the
 * connection's next request, or answer it a second time with its own 408
 * when it never finishes.
 */
export function replyText(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return;
  // A request without a body is whole once its headers are (Node calls the
  // listener before it marks the message complete): keep-alive stays on.
  if (!res.req.complete && carriesBody(res.req)) res.shouldKeepAlive = false;
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    ...headers,
  });
  res.end(body);
}

function carriesBody(req: IncomingMessage): boolean {
  return declaredBodyBytes(req) !== 0;
}

// Shared by the HTTP and the HTTPS (webhook) servers: same names and labels as rollout-operator.
const DSKIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100];
/** dskit's BodySizeBuckets, ExponentialBuckets(4, 4, 15): 4 B to 1 GiB. */
export const BODY_SIZE_BUCKETS = Array.from({ length: 15 }, (_, i) => 4 * 4 ** i);

export const requestDurationMetric = perRegistry(
  (registry) =>
    new Histogram({
      name: 'rollout_operator_request_duration_seconds',
      help: 'Time (in seconds) spent serving HTTP requests.',
      labelNames: ['method', 'route', 'status_code', 'ws'],
      buckets: DSKIT_BUCKETS,
      registers: [registry],
    }),
);

export const requestBytesMetric = perRegistry(
  (registry) =>
    new Histogram({
      name: 'rollout_operator_request_message_bytes',
      help: 'Size in bytes of the HTTP request bodies handlers read.',
      labelNames: ['method', 'route'],
      buckets: BODY_SIZE_BUCKETS,
      registers: [registry],
    }),
);

export const responseBytesMetric = perRegistry(
  (registry) =>
    new Histogram({
      name: 'rollout_operator_response_message_bytes',
      help: 'Size in bytes of the HTTP response bodies sent.',
      labelNames: ['method', 'route'],
      buckets: BODY_SIZE_BUCKETS,
      registers: [registry],
    }),
);

export const inflightMetric = perRegistry(
  (registry) =>
    new Gauge({
      name: 'rollout_operator_inflight_requests',
      help: 'Current number of inflight requests.',
      labelNames: ['method', 'route'],
      registers: [registry],
    }),
);

const droppedConnectionsMetric = perRegistry(
  (registry) =>
    new Counter({
      name: 'stateward_http_connections_refused_total',
      help: 'Connections closed on arrival because the server already had its maximum number open (-server.max-connections, -server-tls.max-connections).',
      labelNames: ['server'],
      registers: [registry],
    }),
);
