// A scrape target whose series the test writes: kwok's pods serve no HTTP, so
// the health-gated rollout tests publish the pods' series here, with the pods'
// own `namespace` and `pod` labels, and Prometheus scrapes it under
// honor_labels (test/support/prometheus.ts) so those labels stay as written.
// It serves the Prometheus text format (version 0.0.4) on GET /metrics.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { closeServer, listenOn } from './tcp.ts';

export type Labels = Record<string, string>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Prometheus 3 refuses a text scrape without this content type. */
export const TEXT_FORMAT_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

interface Series {
  name: string;
  labels: Labels;
  value: number;
}

export class MetricExporter {
  /** host:port, as a Prometheus static target. */
  readonly target: string;
  /** Where the series are served. */
  readonly url: string;
  private readonly server: Server;
  private readonly sockets: Set<Socket>;
  private readonly series = new Map<string, Series>();
  private scrapeCount = 0;
  private failure: number | undefined;

  private constructor(server: Server, sockets: Set<Socket>, port: number) {
    this.server = server;
    this.sockets = sockets;
    this.target = `127.0.0.1:${port}`;
    this.url = `http://${this.target}/metrics`;
  }

  static async start(): Promise<MetricExporter> {
    const sockets = new Set<Socket>();
    const server = createServer();
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    // Nobody knows the port before listen resolves, so no request is missed.
    const port = await listenOn(server);
    const exporter = new MetricExporter(server, sockets, port);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => exporter.answer(req, res));
    return exporter;
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    if (req.method !== 'GET' || new URL(req.url ?? '/', 'http://x').pathname !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    this.scrapeCount++;
    if (this.failure !== undefined) {
      res.writeHead(this.failure, { 'content-type': 'text/plain' }).end('failing on purpose\n');
      return;
    }
    res.writeHead(200, { 'content-type': TEXT_FORMAT_CONTENT_TYPE }).end(this.render());
  }

  /** Sets one series (a gauge, or a counter's running total) to `value`. */
  set(name: string, labels: Labels, value: number): void {
    const key = seriesKey(name, labels);
    this.series.set(key, { name, labels: { ...labels }, value });
  }

  /** Adds `delta` to one series (0 if it is new): a counter that the test increments. */
  add(name: string, labels: Labels, delta: number): void {
    const current = this.series.get(seriesKey(name, labels))?.value ?? 0;
    this.set(name, labels, current + delta);
  }

  /** The value last set for a series, if it is published. */
  get(name: string, labels: Labels): number | undefined {
    return this.series.get(seriesKey(name, labels))?.value;
  }

  /**
   * Stops publishing every series of `name` whose labels include `labels`
   * (all of `name`'s with none given). Prometheus marks them stale at its next
   * scrape, so instant queries stop returning them at once.
   */
  remove(name: string, labels: Labels = {}): void {
    for (const [key, series] of this.series) {
      if (series.name === name && Object.entries(labels).every(([k, v]) => series.labels[k] === v)) {
        this.series.delete(key);
      }
    }
  }

  /** Stops publishing every series. */
  clear(): void {
    this.series.clear();
  }

  /**
   * Answers every scrape with `status` (e.g. 503) until called with undefined:
   * the target is down (`up` is 0) and its series go stale, while Prometheus
   * itself still answers queries.
   */
  failScrapes(status: number | undefined): void {
    this.failure = status;
  }

  /** How many scrapes have been answered, failed ones included. */
  get scrapes(): number {
    return this.scrapeCount;
  }

  /** The exposition as a scrape receives it. */
  render(): string {
    return renderTextFormat([...this.series.values()]);
  }

  async close(): Promise<void> {
    await closeServer(this.server, this.sockets);
  }
}

function seriesKey(name: string, labels: Labels): string {
  if (!METRIC_NAME.test(name)) throw new Error(`not a metric name: ${JSON.stringify(name)}`);
  for (const label of Object.keys(labels)) {
    if (!LABEL_NAME.test(label) || label.startsWith('__')) {
      throw new Error(`not a label name for ${name}: ${JSON.stringify(label)}`);
    }
  }
  const sorted = Object.keys(labels)
    .sort()
    .map((k) => [k, labels[k]]);
  return `${name}${JSON.stringify(sorted)}`;
}

/** The text format: one `name{label="value",…} value` line per series, grouped by name. */
export function renderTextFormat(series: Iterable<Series>): string {
  const lines = [...series]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map(({ name, labels, value }) => {
      const pairs = Object.keys(labels)
        .sort()
        .map((k) => `${k}="${escapeLabelValue(labels[k]!)}"`);
      return `${name}${pairs.length > 0 ? `{${pairs.join(',')}}` : ''} ${formatValue(value)}`;
    });
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}
