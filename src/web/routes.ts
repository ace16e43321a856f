// The web view's HTTP handler: read-only pages, the report as JSON, and a
// server-sent event stream of reports, all under /status on the operator's
// plain HTTP server. It knows nothing of caches: a ReportSource (the
// operator's informers in production, a fake in tests) builds reports and
// says when they may have changed.
//
//   GET /status                      the namespaces
//   GET /status/<namespace>          the namespace's page
//   GET /status/api/<namespace>      its StatusReport (JSON)
//   GET /status/events/<namespace>   text/event-stream: a report now and after each change
//   GET /status/assets/<file>        the page's scripts, stylesheet and icon
//
// Read-only by construction: GET and HEAD only, no cookies, and a CSP that
// lets the page load its script and styles from this server and nothing else.
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Logger, nopLogger } from '../runtime/log/logger.ts';
import type { StatusReport } from '../status/model.ts';
import { indexPage, namespacePage } from './html.ts';

export interface ReportSource {
  /** The namespaces /status lists. */
  namespaces(): string[];
  /** Whether the operator watches (and so can report on) this namespace. */
  watches(namespace: string): boolean;
  /** False until the caches have synced: a report before that would be incomplete. */
  ready(): boolean;
  report(namespace: string): StatusReport;
  /** Calls listener after objects of the namespace changed; returns the unsubscribe function. */
  subscribe(namespace: string, listener: () => void): () => void;
}

export interface WebHandlerOptions {
  /** Least time between two reports on one event stream. */
  minIntervalMs?: number;
  /** Interval of the keep-alive comment on an idle event stream. */
  keepAliveMs?: number;
  /** Event streams open at once; more are answered 503. */
  maxClients?: number;
  logger?: Logger;
}

export const CONTENT_SECURITY_POLICY = "default-src 'self'; script-src 'self'; style-src 'self'";

const SECURITY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

interface Asset {
  type: string;
  body: Buffer;
}

function loadAssets(): Map<string, Asset> {
  const read = (file: string) => readFileSync(new URL(`./assets/${file}`, import.meta.url));
  return new Map([
    ['app.js', { type: 'text/javascript; charset=utf-8', body: read('app.js') }],
    ['markup.js', { type: 'text/javascript; charset=utf-8', body: read('markup.js') }],
    ['app.css', { type: 'text/css; charset=utf-8', body: read('app.css') }],
    ['icon.svg', { type: 'image/svg+xml', body: read('icon.svg') }],
  ]);
}

/** A Kubernetes namespace name (DNS-1123 label). */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    'content-type': type,
    'content-length': String(Buffer.byteLength(body)),
    ...extra,
  });
  res.end(body);
}

const plain = (res: ServerResponse, status: number, message: string, extra: Record<string, string> = {}) =>
  send(res, status, 'text/plain; charset=utf-8', `${message}\n`, extra);

/** A report built for a namespace's streams. */
interface Built {
  generation: number;
  at: number;
  key: string;
  event: string;
}

/** The event streams of one namespace: one subscription to the source, one report per change for all. */
interface Topic {
  /** Counts the source's change notifications: a report built at an older one is stale. */
  generation: number;
  listeners: Set<() => void>;
  unsubscribe: () => void;
  built?: Built;
}

/** A report shared by streams is rebuilt when older than this, even without a change. */
const REBUILD_MS = 1000;

/** Unsent bytes a stream may hold for a client that is not reading before it is dropped. */
const MAX_BUFFERED_BYTES = 1 << 20;

/** The report minus its timestamp: what decides whether a stream has news. */
const content = (report: StatusReport) => JSON.stringify({ ...report, generatedAt: '' });

export class WebHandler {
  private readonly source: ReportSource;
  private readonly minIntervalMs: number;
  private readonly keepAliveMs: number;
  private readonly maxClients: number;
  private readonly log: Logger;
  private readonly assets = loadAssets();
  /** Open event streams, each with its way to end. */
  private readonly streams = new Set<() => void>();
  private readonly topics = new Map<string, Topic>();

  constructor(source: ReportSource, options: WebHandlerOptions = {}) {
    this.source = source;
    this.minIntervalMs = options.minIntervalMs ?? 250;
    this.keepAliveMs = options.keepAliveMs ?? 15_000;
    this.maxClients = options.maxClients ?? 32;
    this.log = options.logger ?? nopLogger;
  }

  get clients(): number {
    return this.streams.size;
  }

  /** Ends every event stream (the operator is shutting down); clients reconnect elsewhere. */
  close(): void {
    for (const end of [...this.streams]) end();
  }

  /** `path` is the request's path as the HTTP server checked it (runtime/http/target.ts). */
  readonly handle = (req: IncomingMessage, res: ServerResponse, path: string): void => {
    // Methods other than GET and HEAD are answered 405 by the HTTP server (runtime/http/server.ts).
    const segments = path.split('/').filter((s) => s !== '');
    if (segments[0] !== 'status') return plain(res, 404, 'not found');
    let parts: string[];
    try {
      parts = segments.slice(1).map((s) => decodeURIComponent(s));
    } catch {
      return plain(res, 400, 'malformed path');
    }
    const [first, second, ...rest] = parts;
    if (first === undefined) return send(res, 200, 'text/html; charset=utf-8', indexPage(this.source.namespaces()));
    if (rest.length > 0) return plain(res, 404, 'not found');
    if (second === undefined)
      return this.namespaceRoute(res, first, (ns) =>
        send(res, 200, 'text/html; charset=utf-8', namespacePage(ns, this.source.report(ns))),
      );
    if (first === 'assets') {
      const asset = this.assets.get(second);
      return asset ? send(res, 200, asset.type, asset.body) : plain(res, 404, `no asset ${second}`);
    }
    if (first === 'api')
      return this.namespaceRoute(res, second, (ns) =>
        send(res, 200, 'application/json; charset=utf-8', `${JSON.stringify(this.source.report(ns))}\n`),
      );
    if (first === 'events') return this.namespaceRoute(res, second, (ns) => this.events(req, res, ns));
    return plain(res, 404, 'not found');
  };

  private namespaceRoute(res: ServerResponse, namespace: string, serve: (namespace: string) => void): void {
    if (!NAMESPACE.test(namespace) || !this.source.watches(namespace)) {
      return plain(
        res,
        404,
        `namespace ${JSON.stringify(namespace)} is not watched by this operator (see -kubernetes.watch-namespaces); watched: ${this.source.namespaces().join(', ') || 'none yet'}`,
      );
    }
    if (!this.source.ready())
      return plain(res, 503, 'the operator is starting: its caches are still syncing, retry', { 'retry-after': '2' });
    serve(namespace);
  }

  /** Joins the namespace's topic, subscribing to the source for its first stream; returns the way to leave. */
  private join(namespace: string, listener: () => void): { topic: Topic; leave: () => void } {
    let topic = this.topics.get(namespace);
    if (!topic) {
      const created: Topic = { generation: 0, listeners: new Set(), unsubscribe: () => undefined };
      created.unsubscribe = this.source.subscribe(namespace, () => {
        created.generation++;
        for (const l of created.listeners) l();
      });
      this.topics.set(namespace, created);
      topic = created;
    }
    const joined = topic;
    joined.listeners.add(listener);
    return {
      topic: joined,
      leave: () => {
        joined.listeners.delete(listener);
        if (joined.listeners.size > 0) return;
        joined.unsubscribe();
        this.topics.delete(namespace);
      },
    };
  }

  /**
   * The namespace's report as an event, built once for all its streams: again
   * after a change, or when older than REBUILD_MS (figures relative to now).
   */
  private event(namespace: string, topic: Topic): Built | undefined {
    // Intervals within this process: monotonic (a wall clock step would freeze or flood the streams).
    const now = performance.now();
    if (topic.built && topic.built.generation === topic.generation && now - topic.built.at < REBUILD_MS)
      return topic.built;
    let report: StatusReport;
    try {
      report = this.source.report(namespace);
    } catch (error) {
      // The next change tries again; the page keeps showing the last report.
      this.log.warn('cannot build the status report', {
        namespace,
        err: error instanceof Error ? error.message : String(error),
      });
      return undefined;
    }
    // JSON.stringify escapes newlines, so the report is one data: line.
    topic.built = {
      generation: topic.generation,
      at: now,
      key: content(report),
      event: `event: report\ndata: ${JSON.stringify(report)}\n\n`,
    };
    return topic.built;
  }

  private events(req: IncomingMessage, res: ServerResponse, namespace: string): void {
    if (req.method === 'HEAD') {
      res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream; charset=utf-8' });
      res.end();
      return;
    }
    if (this.streams.size >= this.maxClients)
      return plain(
        res,
        503,
        `too many open event streams (${this.maxClients}); poll /status/api/${namespace} instead`,
        { 'retry-after': '10' },
      );
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': 'text/event-stream; charset=utf-8',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    // Browsers reconnect after this long when the stream drops.
    res.write('retry: 2000\n\n');
    let last = '';
    let lastSentAt = -Infinity; // performance.now(): nothing sent yet
    let timer: NodeJS.Timeout | undefined;
    const push = () => {
      timer = undefined;
      // A client that stopped reading: drop it rather than buffer for it; its browser reconnects.
      if (res.writableLength > MAX_BUFFERED_BYTES) return end();
      const built = this.event(namespace, topic);
      if (!built || built.key === last) return;
      last = built.key;
      lastSentAt = performance.now();
      res.write(built.event);
    };
    const changed = () => {
      // At most one report per interval; changes in between are folded into it.
      timer ??= setTimeout(push, Math.max(0, lastSentAt + this.minIntervalMs - performance.now()));
    };
    const keepAlive = setInterval(() => {
      res.write(': keep-alive\n\n');
      // Also a refresh: figures relative to now move without any change in the caches.
      changed();
    }, this.keepAliveMs);
    const { topic, leave } = this.join(namespace, changed);
    const end = () => {
      if (!this.streams.delete(end)) return;
      leave();
      clearInterval(keepAlive);
      clearTimeout(timer);
      res.end();
    };
    this.streams.add(end);
    res.on('close', end);
    push();
  }
}
