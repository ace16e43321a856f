// A real OpenTelemetry Collector (built by test/tools/otelcol.ts) for the
// tracing tests: an OTLP receiver over HTTP on a free loopback port, and the
// debug exporter writing every span it receives, in detail, to a file the
// test reads back. The collector's own telemetry is off, so nothing else
// listens (its default metrics port would collide between test files).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { otelcolBinary } from '../tools/otelcol.ts';

/** One span as the collector received it. */
export interface ReceivedSpan {
  traceId: string;
  /** Empty for a root span. */
  parentId: string;
  id: string;
  name: string;
  /** The collector's names: Server, Client, Internal … */
  kind: string;
  statusCode: string;
  /** Attribute values as the debug exporter prints them, e.g. Str(x) → 'x', Int(3) → '3'. */
  attributes: Record<string, string>;
  /** The resource attributes of the batch the span came in. */
  resource: Record<string, string>;
}

export class Collector {
  /** Where an OTLP/HTTP exporter sends (OTEL_EXPORTER_OTLP_ENDPOINT). */
  readonly endpoint: string;
  private readonly child: ChildProcess;
  private readonly dir: string;
  private readonly outputPath: string;
  private log = '';

  private constructor(child: ChildProcess, dir: string, port: number) {
    this.child = child;
    this.dir = dir;
    this.outputPath = join(dir, 'spans.txt');
    this.endpoint = `http://127.0.0.1:${port}`;
    child.stdout?.on('data', (c: Buffer) => (this.log += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (this.log += c.toString()));
  }

  static async start(): Promise<Collector> {
    const binary = await otelcolBinary();
    const dir = await mkdtemp(join(tmpdir(), 'stateward-otelcol-'));
    const [port] = await freePorts(1);
    // JSON is YAML: the collector reads this as its configuration file.
    const config = {
      receivers: { otlp: { protocols: { http: { endpoint: `127.0.0.1:${port}` } } } },
      exporters: {
        debug: {
          verbosity: 'detailed',
          use_internal_logger: false,
          output_paths: [join(dir, 'spans.txt')],
          // Log every batch: the default sampling would drop some after the first two a second.
          sampling_initial: 1_000_000,
          sampling_thereafter: 1,
        },
      },
      service: {
        telemetry: { metrics: { level: 'none' }, logs: { level: 'info' } },
        pipelines: { traces: { receivers: ['otlp'], exporters: ['debug'] } },
      },
    };
    await writeFile(join(dir, 'config.yaml'), JSON.stringify(config, null, 2));
    const child = spawn(binary, [`--config=file:${join(dir, 'config.yaml')}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    const collector = new Collector(child, dir, port!);
    await waitFor('the OpenTelemetry Collector to be ready', () => collector.log.includes('Everything is ready'), {
      timeoutMs: 30_000,
      fail: () =>
        child.exitCode !== null
          ? `the collector exited with ${child.exitCode}:\n${collector.log.slice(-3000)}`
          : undefined,
    });
    return collector;
  }

  /** Every span received so far. */
  async spans(): Promise<ReceivedSpan[]> {
    let text: string;
    try {
      text = await readFile(this.outputPath, 'utf8');
    } catch {
      return [];
    }
    return parseDebugOutput(text);
  }

  get logs(): string {
    return this.log;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.on('exit', resolve));
      this.child.kill('SIGTERM');
      await exited;
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * Reads the debug exporter's detailed text: "ResourceSpans #n" opens a batch
 * with its "Resource attributes:" list, "Span #n" a span whose fields are
 * "    Key : value" lines and whose "Attributes:" are "     -> key: Type(value)".
 */
export function parseDebugOutput(text: string): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  let resource: Record<string, string> = {};
  let span: ReceivedSpan | undefined;
  let section: 'resource' | 'span' | 'attributes' | 'other' = 'other';
  for (const line of text.split('\n')) {
    if (line.startsWith('ResourceSpans #')) {
      resource = {};
      span = undefined;
      section = 'other';
    } else if (line === 'Resource attributes:') {
      section = 'resource';
    } else if (line.startsWith('Span #')) {
      span = { traceId: '', parentId: '', id: '', name: '', kind: '', statusCode: '', attributes: {}, resource };
      spans.push(span);
      section = 'span';
    } else if (line === 'Attributes:' && span) {
      section = 'attributes';
    } else if (/^[A-Z][A-Za-z ]*:$/.test(line)) {
      section = 'other';
    } else {
      const attribute = /^ {5}-> ([^:]+): \w+\((.*)\)$/.exec(line);
      if (attribute && section === 'resource') resource[attribute[1]!] = attribute[2]!;
      else if (attribute && section === 'attributes' && span) span.attributes[attribute[1]!] = attribute[2]!;
      const field = /^ {4}(\S[^:]*?)\s*: ?(.*)$/.exec(line);
      if (field && section === 'span' && span) {
        const [, key, value] = field;
        if (key === 'Trace ID') span.traceId = value!;
        else if (key === 'Parent ID') span.parentId = value!;
        else if (key === 'ID') span.id = value!;
        else if (key === 'Name') span.name = value!;
        else if (key === 'Kind') span.kind = value!;
        else if (key === 'Status code') span.statusCode = value!;
      }
    }
  }
  return spans;
}
