// The HTTPS server for admission webhooks (-server-tls.*). Served by every
// replica, leader or not. The certificate can be swapped while it runs
// (self-signed renewal, cert-manager file rotation) without dropping
// connections: new handshakes use the new one.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, Gauge, type Registry } from 'prom-client';
import { ConnectionGovernor, declaredBodyBytes, peerOf } from '../http/connections.ts';
import { everyMsPerKey } from '../http/gate.ts';
import { handshakesInTurn } from '../http/handshakes.ts';
import { perRegistry } from '../metrics.ts';
import { ByteBudget } from '../http/budget.ts';
import type { ClusterValidationConfig } from '../http/clustervalidation.ts';
import {
  applyLimits,
  type MeteredRequest,
  type MeteredResponse,
  replyText,
  requestListener,
  serverOptions,
} from '../http/guard.ts';
import { closeGracefully, listenOn, routeName } from '../http/server.ts';
import { type Span, tracer } from '../tracing/tracing.ts';
import { type Logger, nopLogger } from '../log/logger.ts';
import {
  type AdmissionHandler,
  BodyBudgetExhaustedError,
  BodyStalledError,
  BodyTooLargeError,
  MAX_ADMISSION_BODY_BYTES,
  readLimitedBody,
  serveAdmission,
} from './admission.ts';

export interface TlsPair {
  cert: string;
  key: string;
}

export interface WebhookServerOptions {
  port: number;
  host?: string;
  /** -server-tls.request-timeout: headers and body must arrive within it; handlers get 90 % of it. */
  requestTimeoutMs: number;
  /** -server-tls.idle-timeout (default 90 s). */
  idleTimeoutMs?: number;
  /** -server-tls.max-connections (default 1024). */
  maxConnections?: number;
  /** -server-tls.max-inflight-body-bytes (default 12 MiB). */
  maxInflightBodyBytes?: number;
  /** -server-tls.max-connections-per-peer (default 0: half of maxConnections). */
  maxConnectionsPerPeer?: number;
  /** -server-tls.body-stall-timeout (default 2 s): a body with no byte for this long ends its request. */
  bodyStallTimeoutMs?: number;
  registry: Registry;
  logger?: Logger;
  tls: TlsPair;
  /** -server.cluster-validation.http.*: rollout-operator validates on its webhook server too. */
  clusterValidation?: ClusterValidationConfig;
}

export class WebhookServer {
  private readonly o: WebhookServerOptions;
  private readonly server: Server;
  private readonly handlers = new Map<string, AdmissionHandler>();
  private readonly log: Logger;
  /** Bodies that declare at most SMALL_BODY_BYTES: every review the API server sends for ordinary objects. */
  private readonly smallBodies: ByteBudget;
  /** Larger bodies, and chunked ones of unknown length: one of the largest size at a time. */
  private readonly largeBodies: ByteBudget;
  private listening = false;
  private readonly refused: Counter;
  private readonly connections: ConnectionGovernor;
  private readonly warn = everyMsPerKey(60_000);

  constructor(options: WebhookServerOptions) {
    this.o = options;
    this.log = (options.logger ?? nopLogger).child({ component: 'webhook-server' });
    // Two lanes out of one budget, so that a flood of large bodies (the
    // costliest to decode) can neither hold the memory ordinary reviews need
    // nor keep more than one large decode on the event loop at once.
    const budget = options.maxInflightBodyBytes ?? 12 * 1024 * 1024;
    this.largeBodies = new ByteBudget(MAX_ADMISSION_BODY_BYTES);
    this.smallBodies = new ByteBudget(Math.max(SMALL_BODY_BYTES, budget - MAX_ADMISSION_BODY_BYTES));
    const limits = {
      requestTimeoutMs: options.requestTimeoutMs,
      // Longer than the apiserver's idle timeout for its webhook client, so the
      // apiserver closes idle connections first and never races our close.
      idleTimeoutMs: options.idleTimeoutMs ?? 90_000,
      maxConnections: options.maxConnections ?? 1024,
      maxConnectionsPerPeer: options.maxConnectionsPerPeer ?? 0,
      // -server-tls.request-timeout is the read and write timeout, as its flag says.
      writeTimeoutMs: options.requestTimeoutMs,
    };
    const connections = new ConnectionGovernor(limits, 'https', options.registry, this.log);
    this.connections = connections;
    this.refused = bodyRefusedMetric(options.registry);
    bodyBytesInFlight(options.registry).lanes = { small: this.smallBodies, large: this.largeBodies };
    const listener = requestListener({
      log: this.log,
      registry: options.registry,
      readsBodies: true,
      connections,
      ...(options.clusterValidation ? { clusterValidation: options.clusterValidation } : {}),
      resolve: (path) => {
        const handler = this.handlers.get(path);
        if (!handler) return undefined;
        const name = routeName(path);
        return { name, handle: (req, res) => this.traced(name, req, res, handler) };
      },
    });
    this.server = createServer<typeof MeteredRequest, typeof MeteredResponse>(
      {
        cert: options.tls.cert,
        key: options.tls.key,
        minVersion: 'TLSv1.2',
        handshakeTimeout: options.requestTimeoutMs,
        ...serverOptions(limits),
      },
      listener,
    );
    // Before applyLimits: the gate takes Node's own 'connection' listener, which must be the only one.
    const gate = handshakesInTurn(this.server, options.requestTimeoutMs);
    if (!gate)
      this.log.warn('TLS handshakes are not put in turn on this Node version: a handshake flood competes with reviews');
    applyLimits(this.server, limits, 'https', options.registry, this.log, connections);
    this.server.on('tlsClientError', (error) => this.log.debug('TLS handshake failed', { err: error.message }));
  }

  /** Connections open now (the connection cap counts these). */
  get openConnections(): number {
    return this.connections.open;
  }

  handle(path: string, handler: AdmissionHandler): void {
    this.handlers.set(path, handler);
  }

  /** True once listen() has bound the port with a certificate, until close(). */
  get serving(): boolean {
    return this.listening;
  }

  /** New handshakes use this pair from now on; open connections keep theirs. */
  setCertificate(tls: TlsPair): void {
    this.server.setSecureContext({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' });
    this.log.info('serving certificate updated');
  }

  /**
   * One server span per admission request, named as dskit's HTTP tracing
   * middleware names rollout-operator's ("HTTP POST - <route>"), child of
   * the trace context the kube-apiserver sent, if any.
   */
  private traced(route: string, req: IncomingMessage, res: ServerResponse, handler: AdmissionHandler): Promise<void> {
    const t = tracer();
    if (t === undefined) return this.dispatch(req, res, handler, undefined);
    const attributes = {
      'http.request.method': req.method,
      'http.route': route,
      'url.path': req.url?.split('?')[0],
      'user_agent.original': req.headers['user-agent'],
    };
    return t.span(
      `HTTP ${req.method ?? ''} - ${route}`,
      { kind: 'server', attributes, incoming: req.headers },
      async (span) => {
        await this.dispatch(req, res, handler, span);
        span.setAttributes({ 'http.response.status_code': res.statusCode });
        if (res.statusCode >= 500) span.fail(`HTTP ${res.statusCode}`);
      },
    );
  }

  private async dispatch(
    req: IncomingMessage,
    res: ServerResponse,
    handler: AdmissionHandler,
    span: Span | undefined,
  ): Promise<void> {
    if (req.method !== 'POST') return replyText(res, 405, 'only POST is accepted\n');
    const declared = declaredBodyBytes(req);
    if (declared !== undefined && declared > MAX_ADMISSION_BODY_BYTES) {
      return replyText(res, 413, `request body exceeds ${MAX_ADMISSION_BODY_BYTES} bytes\n`);
    }
    // Charged for the bytes received, as they arrive, and held until the
    // answer is sent (the parsed review lives as long as its handler runs).
    // A connection serves one request at a time, so it holds at most one
    // body's share; a declared length reserves nothing.
    const hold = (declared !== undefined && declared <= SMALL_BODY_BYTES ? this.smallBodies : this.largeBodies).hold();
    res.once('close', () => hold.release());
    // The handler's deadline: 90 % of the request timeout, as rollout-operator,
    // so an answer always leaves before the apiserver gives up on us.
    const signal = AbortSignal.timeout(Math.floor(this.o.requestTimeoutMs * 0.9));
    let body: Buffer | undefined;
    try {
      body = await readLimitedBody(
        req,
        MAX_ADMISSION_BODY_BYTES,
        signal,
        (bytes) => hold.take(bytes),
        declared,
        this.o.bodyStallTimeoutMs ?? DEFAULT_BODY_STALL_MS,
      );
    } catch (error) {
      return this.bodyFailed(req, res, error, signal);
    }
    // serveAdmission drops the bytes once decoded; nothing here keeps them.
    const input = { contentType: req.headers['content-type'], body, signal, span };
    body = undefined;
    const answer = await serveAdmission(input, handler, this.log);
    replyText(res, answer.status, answer.body, { 'content-type': answer.contentType });
  }

  /** The answer to a body that could not be read, counted and (at most once a minute per reason) logged with the peer. */
  private bodyFailed(req: IncomingMessage, res: ServerResponse, error: unknown, signal: AbortSignal): void {
    const refuse = (reason: string, status: number, message: string, headers: Record<string, string> = {}) => {
      this.refused.inc({ server: 'https', reason });
      if (this.warn(reason)) this.log.warn('admission request refused', { reason, peer: peerOf(req.socket), status });
      replyText(res, status, message, headers);
    };
    if (error instanceof BodyBudgetExhaustedError)
      return refuse('body-budget', 503, 'too many request bytes in flight; retry\n', { 'retry-after': '1' });
    if (error instanceof BodyStalledError) return refuse('body-stalled', 408, `${error.message}\n`);
    if (error instanceof BodyTooLargeError)
      return replyText(res, 413, `request body exceeds ${MAX_ADMISSION_BODY_BYTES} bytes\n`);
    if (signal.aborted) return refuse('body-deadline', 408, 'the request body did not arrive in time\n');
    this.log.debug('could not read an admission request body', {
      err: error instanceof Error ? error.message : String(error),
    });
    replyText(res, 400, 'could not read the request body\n');
  }

  async listen(): Promise<number> {
    const port = await listenOn(this.server, this.o.port, this.o.host);
    this.listening = true;
    this.log.info('serving admission webhooks over HTTPS', { port, paths: [...this.handlers.keys()].join(',') });
    return port;
  }

  /** Stops accepting; in-flight webhook calls finish (up to graceMs). */
  async close(graceMs = 10_000): Promise<void> {
    this.listening = false;
    await closeGracefully(this.server, graceMs);
  }
}

/** Bodies up to this size (declared) take the ordinary lane of the byte budget; reviews of ordinary objects are tens of KiB. */
const SMALL_BODY_BYTES = 1024 * 1024;

/** -server-tls.body-stall-timeout's default: well under the handler deadline, far over any pause of an API server sending a body. */
export const DEFAULT_BODY_STALL_MS = 2000;

type BodyLanes = Record<'small' | 'large', ByteBudget>;

/**
 * The request body bytes held now, per lane of the budget: one gauge per
 * registry, reading the lanes of the server made last with it (one webhook
 * server per process).
 */
const bodyBytesInFlight = perRegistry((registry) => {
  const current: { lanes?: BodyLanes } = {};
  new Gauge({
    name: 'stateward_http_body_bytes_in_flight',
    help: 'Bytes of AdmissionReview bodies received and held now, by lane of -server-tls.max-inflight-body-bytes: small (bodies declared up to 1 MiB) and large.',
    labelNames: ['server', 'lane'],
    registers: [registry],
    collect() {
      for (const lane of ['small', 'large'] as const)
        this.set({ server: 'https', lane }, current.lanes?.[lane].inUse ?? 0);
    },
  });
  return current;
});

const bodyRefusedMetric = perRegistry(
  (registry) =>
    new Counter({
      name: 'stateward_http_requests_refused_total',
      help: 'Admission requests refused before their handler ran, by reason: body-budget (503: the request bytes in flight are at -server-tls.max-inflight-body-bytes), body-stalled (408: no body byte for -server-tls.body-stall-timeout), body-deadline (408: the body did not arrive within the handler deadline).',
      labelNames: ['server', 'reason'],
      registers: [registry],
    }),
);
