// The HTTPS server for admission webhooks (-server-tls.*). Served by every
// replica, leader or not. The certificate can be swapped while it runs
// (self-signed renewal, cert-manager file rotation) without dropping
// connections: new handshakes use the new one.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { closeGracefully, inflightMetric, listenOn, requestDurationMetric, routeName } from '../runtime/http/server.ts';
import { type Logger, nopLogger } from '../runtime/log/logger.ts';
import { type AdmissionHandler, BodyTooLargeError, MAX_ADMISSION_BODY_BYTES, readLimitedBody, serveAdmission } from './admission.ts';

export interface TlsPair {
  cert: string;
  key: string;
}

export interface WebhookServerOptions {
  port: number;
  host?: string;
  /** -server-tls.request-timeout: the socket read/write budget; handlers get 90 % of it. */
  requestTimeoutMs: number;
  registry: Registry;
  logger?: Logger;
  tls: TlsPair;
}

export class WebhookServer {
  private readonly o: WebhookServerOptions;
  private readonly server: Server;
  private readonly handlers = new Map<string, AdmissionHandler>();
  private readonly log: Logger;

  constructor(options: WebhookServerOptions) {
    this.o = options;
    this.log = (options.logger ?? nopLogger).child({ component: 'webhook-server' });
    const duration = requestDurationMetric(options.registry);
    const inflight = inflightMetric(options.registry);
    this.server = createServer({ cert: options.tls.cert, key: options.tls.key, minVersion: 'TLSv1.2' }, (req, res) => {
      const path = new URL(req.url ?? '/', 'https://localhost').pathname;
      const handler = this.handlers.get(path);
      const route = handler ? routeName(path) : 'other';
      const method = req.method ?? 'POST';
      const started = performance.now();
      inflight.inc({ method, route });
      res.once('close', () => {
        inflight.dec({ method, route });
        duration.observe({ method, route, status_code: String(res.statusCode), ws: 'false' }, (performance.now() - started) / 1000);
      });
      void this.dispatch(req, res, handler);
    });
    this.server.requestTimeout = options.requestTimeoutMs;
    this.server.headersTimeout = options.requestTimeoutMs;
    // Longer than the apiserver's idle timeout for its webhook client, so the
    // apiserver closes idle connections first and never races our close.
    this.server.keepAliveTimeout = 90_000;
    this.server.on('tlsClientError', (error) => this.log.debug('TLS handshake failed', { err: error.message }));
  }

  handle(path: string, handler: AdmissionHandler): void {
    this.handlers.set(path, handler);
  }

  /** New handshakes use this pair from now on; open connections keep theirs. */
  setCertificate(tls: TlsPair): void {
    this.server.setSecureContext({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' });
    this.log.info('serving certificate updated');
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse, handler: AdmissionHandler | undefined): Promise<void> {
    const reply = (status: number, contentType: string, body: string) => {
      if (res.headersSent) return;
      res.writeHead(status, { 'content-type': contentType });
      res.end(body);
    };
    if (!handler) return reply(404, 'text/plain; charset=utf-8', '404 page not found\n');
    if (req.method !== 'POST') return reply(405, 'text/plain; charset=utf-8', 'only POST is accepted\n');
    // The handler's deadline: 90 % of the request timeout, as rollout-operator,
    // so an answer always leaves before the apiserver gives up on us.
    const signal = AbortSignal.timeout(Math.floor(this.o.requestTimeoutMs * 0.9));
    let body: Buffer;
    try {
      body = await readLimitedBody(req, MAX_ADMISSION_BODY_BYTES, signal);
    } catch (error) {
      const tooLarge = error instanceof BodyTooLargeError;
      this.log.warn('rejected admission request body', { path: req.url, err: error instanceof Error ? error.message : String(error) });
      // The rest of an oversized body is not read: close the connection after answering.
      if (tooLarge) res.setHeader('connection', 'close');
      return reply(tooLarge ? 413 : 400, 'text/plain; charset=utf-8', tooLarge ? `request body exceeds ${MAX_ADMISSION_BODY_BYTES} bytes\n` : 'could not read the request body\n');
    }
    try {
      const answer = await serveAdmission({ contentType: req.headers['content-type'], body, signal }, handler, this.log);
      reply(answer.status, answer.contentType, answer.body);
    } catch (error) {
      this.log.error('admission request failed', { path: req.url, err: error instanceof Error ? error.message : String(error) });
      reply(500, 'text/plain; charset=utf-8', 'internal error\n');
    }
  }

  async listen(): Promise<number> {
    const port = await listenOn(this.server, this.o.port, this.o.host);
    this.log.info('serving admission webhooks over HTTPS', { port, paths: [...this.handlers.keys()].join(',') });
    return port;
  }

  /** Stops accepting; in-flight webhook calls finish (up to graceMs). */
  async close(graceMs = 10_000): Promise<void> {
    await closeGracefully(this.server, graceMs);
  }
}
