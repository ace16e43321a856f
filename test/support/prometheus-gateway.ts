// The front a real deployment puts before Prometheus (Mimir's or Cortex's
// gateway, an authenticating proxy): optionally HTTPS with a certificate from
// its own CA, requiring headers such as a bearer token or X-Scope-OrgID, and
// forwarding what it admits to the real Prometheus, whose answers pass back
// unchanged. Prometheus itself checks no bearer token or tenant header, so
// the credential tests query through this. It records each request's headers
// for the tests' assertions; an unreachable Prometheus is a 502, as a real
// gateway answers.
import {
  createServer as createHttpServer,
  request,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Server, Socket } from 'node:net';
import { generateSelfSigned } from '../../src/webhooks/tls/generate.ts';
import { closeServer, listenOn } from './tcp.ts';

export interface GatewayOptions {
  /**
   * Header name → the exact value a request must carry, e.g.
   * { authorization: 'Bearer t0ken', 'x-scope-orgid': 'tenant-1' }; a request
   * without it is answered 401 and not forwarded.
   */
  require?: Record<string, string>;
  /** Serve HTTPS, for `localhost`, with a certificate from a CA of its own (`ca`). */
  tls?: boolean;
}

export interface SeenRequest {
  method: string;
  /** Path and query. */
  path: string;
  /** As Node reads them: names in lower case. */
  headers: IncomingMessage['headers'];
  /** False when refused with 401. */
  admitted: boolean;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'host']);

export class PrometheusGateway {
  /** Where to send queries: https://localhost:<port> with tls, else http://127.0.0.1:<port>. */
  readonly url: string;
  /** The CA (PEM) that signed the serving certificate, with tls. */
  readonly ca: string | undefined;
  /** Every request received, in order. */
  readonly requests: SeenRequest[] = [];
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly upstream: URL;
  private readonly required: [string, string][];

  private constructor(server: Server, url: string, ca: string | undefined, upstream: string, options: GatewayOptions) {
    this.server = server;
    this.url = url;
    this.ca = ca;
    this.upstream = new URL(upstream);
    this.required = Object.entries(options.require ?? {}).map(([name, value]) => [name.toLowerCase(), value]);
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  /** Listens on a free loopback port in front of `upstream` (e.g. Prometheus.url). */
  static async start(upstream: string, options: GatewayOptions = {}): Promise<PrometheusGateway> {
    let server: Server;
    let ca: string | undefined;
    if (options.tls) {
      const issued = await generateSelfSigned({
        org: 'stateward-test-gateway',
        dnsNames: ['localhost'],
        validityMs: 24 * 3600_000,
        now: Date.now(),
      });
      ca = issued.ca;
      server = createHttpsServer({ cert: issued.cert, key: issued.key });
    } else {
      server = createHttpServer();
    }
    const port = await listenOn(server);
    const url = options.tls ? `https://localhost:${port}` : `http://127.0.0.1:${port}`;
    const gateway = new PrometheusGateway(server, url, ca, upstream, options);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => gateway.forward(req, res));
    return gateway;
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    // Which header failed is said, never its value.
    const missing = this.required.find(([name, value]) => req.headers[name] !== value)?.[0];
    this.requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, admitted: !missing });
    if (missing) {
      req.resume();
      res.writeHead(401, { 'content-type': 'text/plain' }).end(`missing or wrong ${missing}\n`);
      return;
    }
    const upstreamRequest = request(
      new URL(req.url ?? '/', this.upstream),
      { method: req.method, headers: withoutHopByHop(req.headers), agent: false },
      (upstreamResponse) => {
        res.writeHead(upstreamResponse.statusCode ?? 502, withoutHopByHop(upstreamResponse.headers));
        upstreamResponse.pipe(res);
      },
    );
    upstreamRequest.on('error', (error) => {
      if (res.headersSent) res.destroy();
      else res.writeHead(502, { 'content-type': 'text/plain' }).end(`upstream: ${error.message}\n`);
    });
    req.pipe(upstreamRequest);
  }

  async close(): Promise<void> {
    await closeServer(this.server, this.sockets);
  }
}

function withoutHopByHop(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name)));
}
