// A neutral counting reverse proxy in front of the apiserver, for benches
// that compare what different systems ask of the API. It speaks HTTPS with
// the apiserver's own certificate (SAN 127.0.0.1, signed by the cluster CA)
// and asks for a client certificate signed by the cluster CA, so the admin
// kubeconfig works unchanged once its server points here; HTTP/2 and
// HTTP/1.1 are both offered (ALPN), so each client speaks what it would
// speak to a real apiserver (client-go HTTP/2, Node's https HTTP/1.1).
// Every request is forwarded over HTTPS/1.1 with the admin's credentials,
// and recorded when it arrives: who (by User-Agent), verb and resource as
// the apiserver's RequestInfo names them, status, response bytes. A watch
// is one request, however long it streams.
import { createSecureServer, type Http2SecureServer, type Http2ServerRequest } from 'node:http2';
import type { IncomingMessage } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { closeServer, listenOn } from '../test/support/tcp.ts';

export interface ProxiedRequest {
  /** Date.now() when the request arrived. */
  at: number;
  /** The first User-Agent prefix that matched, or the User-Agent itself. */
  who: string;
  verb: string;
  /** "pods", "pods/status", "statefulsets", or "discovery", "openapi", "version" for non-resource paths. */
  resource: string;
  /** 0 until the upstream answers; 502 when it could not be reached. */
  status: number;
  /** Response body bytes passed to the client so far. */
  bytes: number;
}

export interface CountingProxyOptions {
  /** The apiserver, https://127.0.0.1:<port>. */
  upstream: string;
  /** How the proxy authenticates to the apiserver: its CA and a client certificate. */
  upstreamTls: { ca: string | Buffer; cert: string | Buffer; key: string | Buffer };
  /** What the proxy serves: a certificate for 127.0.0.1, and the CA client certificates must chain to. */
  serverTls: { cert: string | Buffer; key: string | Buffer; clientCa: string | Buffer };
  /** User-Agent prefixes to name requests by (e.g. ["stateward/", "rollout-operator/"]). */
  agents: string[];
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'http2-settings',
  'host',
]);

/** The apiserver's verb and resource for a request (k8s.io/apiserver RequestInfoFactory, simplified: no legacy /watch/ paths). */
export function requestInfo(method: string, url: string): { verb: string; resource: string } {
  const [path = '/', query = ''] = url.split('?', 2);
  const segments = path.split('/').filter(Boolean);
  const params = new URLSearchParams(query);
  let rest: string[];
  if (segments[0] === 'api' && segments.length >= 2) rest = segments.slice(2);
  else if (segments[0] === 'apis' && segments.length >= 3) rest = segments.slice(3);
  else {
    const kind = segments[0] === 'openapi' ? 'openapi' : segments[0] === 'version' ? 'version' : 'discovery';
    return { verb: method.toLowerCase(), resource: kind };
  }
  if (rest.length === 0) return { verb: method.toLowerCase(), resource: 'discovery' };
  // namespaces/<ns>/<resource>..., but namespaces/<ns> alone is the Namespace itself.
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  const [resource = '?', name, subresource] = rest;
  const full = subresource ? `${resource}/${subresource}` : resource;
  const verb = (() => {
    switch (method) {
      case 'GET':
      case 'HEAD':
        if (name === undefined) return ['true', '1'].includes(params.get('watch') ?? '') ? 'watch' : 'list';
        return 'get';
      case 'POST':
        return 'create';
      case 'PUT':
        return 'update';
      case 'PATCH':
        return 'patch';
      case 'DELETE':
        return name === undefined ? 'deletecollection' : 'delete';
      default:
        return method.toLowerCase();
    }
  })();
  return { verb, resource: full };
}

/** What the proxy needs of an HTTP/1.1 or an HTTP/2 compatibility response. */
interface Response {
  readonly headersSent: boolean;
  writeHead(status: number, headers?: Record<string, string | string[]>): unknown;
  write(chunk: Buffer): unknown;
  end(): unknown;
  destroy(): unknown;
  on(event: 'close', listener: () => void): unknown;
}

export class CountingProxy {
  readonly records: ProxiedRequest[] = [];
  private readonly server: Http2SecureServer;
  private readonly agent: Agent;
  private readonly upstream: URL;
  private readonly agents: string[];
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(options: CountingProxyOptions) {
    this.upstream = new URL(options.upstream);
    this.agents = options.agents;
    this.agent = new Agent({ keepAlive: true, maxSockets: Infinity, ...options.upstreamTls });
    this.server = createSecureServer(
      {
        allowHTTP1: true,
        cert: options.serverTls.cert,
        key: options.serverTls.key,
        ca: options.serverTls.clientCa,
        requestCert: true,
        rejectUnauthorized: true,
      },
      (req, res) => this.forward(req, res),
    );
    this.server.on('secureConnection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    // Streams of a client that goes away (a stopped system) must not take the proxy down.
    this.server.on('sessionError', () => undefined);
    this.server.on('tlsClientError', () => undefined);
  }

  async listen(): Promise<number> {
    this.port = await listenOn(this.server);
    return this.port;
  }

  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** The requests of `who` that arrived in [from, to) (Date.now() values). */
  between(who: string, from: number, to: number): ProxiedRequest[] {
    return this.records.filter((r) => r.who === who && r.at >= from && r.at < to);
  }

  async close(): Promise<void> {
    await closeServer(this.server, this.sockets);
    this.agent.destroy();
  }

  private forward(req: IncomingMessage | Http2ServerRequest, res: Response): void {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const agent = String(req.headers['user-agent'] ?? '');
    const record: ProxiedRequest = {
      at: Date.now(),
      who: this.agents.find((prefix) => agent.startsWith(prefix)) ?? agent,
      ...requestInfo(method, url),
      status: 0,
      bytes: 0,
    };
    this.records.push(record);
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers))
      if (value !== undefined && !name.startsWith(':') && !HOP_BY_HOP.has(name)) headers[name] = value;
    headers['host'] = this.upstream.host;
    const upstream = httpsRequest(
      {
        host: this.upstream.hostname,
        port: this.upstream.port,
        method,
        path: url,
        headers,
        agent: this.agent,
      },
      (answer) => {
        record.status = answer.statusCode ?? 0;
        const out: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answer.headers))
          if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
        res.writeHead(record.status, out);
        // A watch's events must reach the client as they come.
        answer.on('data', (chunk: Buffer) => {
          record.bytes += chunk.length;
          res.write(chunk);
        });
        answer.on('end', () => res.end());
        answer.on('error', () => res.destroy());
      },
    );
    upstream.on('error', () => {
      record.status = record.status || 502;
      if (!res.headersSent) {
        res.writeHead(502);
        res.end();
      } else res.destroy();
    });
    // The client went away (a stopped system, a watch it closed): so does the upstream request.
    res.on('close', () => upstream.destroy());
    (req as IncomingMessage).pipe(upstream);
  }
}
