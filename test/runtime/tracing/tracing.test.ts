// Tracing in one process: nothing of OpenTelemetry is loaded while no OTEL_*
// variable is set, and once on, the API client and pod client make client
// spans, carry W3C trace context, and are children of the span they run in.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { stringify } from 'yaml';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import { parseKubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { resources } from '../../../src/runtime/kube/types.ts';
import { createLogger, nopLogger } from '../../../src/runtime/log/logger.ts';
import { startTracing, tracer, type Tracing } from '../../../src/runtime/tracing/tracing.ts';
import { PodClient } from '../../../src/workloads/podclient.ts';

const root = join(import.meta.dirname, '..', '..', '..');

/**
 * Imports the whole operator in a fresh process, runs startTracing with
 * `env`, and lists every @opentelemetry module the process resolved.
 */
function openTelemetryModulesLoaded(env: Record<string, string>): string[] {
  const script = `
    import { registerHooks } from 'node:module';
    const seen = [];
    registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); if (r.url.includes('@opentelemetry')) seen.push(r.url); return r; } });
    await import('./src/main.ts');
    const { startTracing } = await import('./src/runtime/tracing/tracing.ts');
    const { nopLogger } = await import('./src/runtime/log/logger.ts');
    const tracing = await startTracing(${JSON.stringify(env)}, { logger: nopLogger, version: 'test' });
    await tracing?.shutdown();
    process.stdout.write(JSON.stringify(seen));
  `;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
    env: { PATH: process.env['PATH'] ?? '' },
  });
  assert.equal(result.status, 0, result.stderr);
  return JSON.parse(result.stdout) as string[];
}

describe('tracing off costs nothing', () => {
  it('loads no OpenTelemetry SDK module when no OTEL_* variable is set, and loads them when one is', () => {
    // prom-client's process CPU collector imports @opentelemetry/api (for
    // exemplars) whether or not tracing is on; the API alone is a set of
    // no-op stubs. Nothing beyond it may load while tracing is off.
    assert.deepEqual(
      openTelemetryModulesLoaded({}).filter((url) => !url.includes('/@opentelemetry/api/')),
      [],
    );
    const loaded = openTelemetryModulesLoaded({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
      OTEL_BSP_EXPORT_TIMEOUT: '100',
    });
    assert.ok(
      loaded.some((url) => url.includes('@opentelemetry/sdk-trace')),
      loaded.join('\n'),
    );
    // OTLP over HTTP with protobuf, the default: gRPC's exporter stays unloaded.
    assert.ok(!loaded.some((url) => url.includes('exporter-trace-otlp-grpc')), loaded.join('\n'));
  });

  it('has no tracer while off', async () => {
    assert.equal(await startTracing({}, { logger: nopLogger, version: 'test' }), undefined);
    assert.equal(tracer(), undefined);
  });

  it("refuses an exporter rollout-operator's SDK does not know, as rollout-operator refuses to start", async () => {
    await assert.rejects(
      startTracing({ OTEL_TRACES_EXPORTER: 'jaeger' }, { logger: nopLogger, version: 'test' }),
      /OTEL_TRACES_EXPORTER/,
    );
  });
});

describe('spans of API and pod calls', () => {
  let server: Server;
  let port = 0;
  const seen: IncomingHttpHeaders[] = [];
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing | undefined;
  before(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      res.writeHead(req.url?.includes('missing') ? 404 : 200, { 'content-type': 'application/json' });
      res.end(
        req.url?.includes('watch=true')
          ? `${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a' } } })}\n`
          : JSON.stringify({ kind: 'PodList', items: [], metadata: {} }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    tracing = await startTracing(
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' },
      { logger: createLogger({ format: 'logfmt', level: 'error', write: () => undefined }), version: 'test', exporter },
    );
  });
  after(async () => {
    await tracing?.shutdown();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const kubeConfig = () =>
    parseKubeConfig(
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${port}` } }],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'ctx',
      }),
    );

  it('makes one client span per API call and per pod call, children of the span they run in, with traceparent naming them', async () => {
    const t = tracer();
    assert.ok(t);
    const client = new KubeClient({ kubeConfig: kubeConfig(), timeoutMs: 5000 });
    const pods = new PodClient();
    seen.length = 0;
    exporter.reset();
    try {
      await t.span('outer', {}, async () => {
        await client.list(resources.pods, { namespace: 'mimir' });
        await assert.rejects(client.get(resources.pods, { namespace: 'mimir', name: 'missing' }));
        for await (const event of client.watch(resources.pods, {
          namespace: 'mimir',
          signal: AbortSignal.timeout(5000),
        }))
          assert.equal(event.type, 'ADDED');
        const answer = await pods.call({
          method: 'POST',
          url: `http://ingester-0.ingester.mimir.svc:${port}/ingester/prepare-shutdown`,
          pod: { metadata: { name: 'ingester-0', namespace: 'mimir' }, status: { podIP: '127.0.0.1' } },
          podName: 'ingester-0',
          timeoutMs: 5000,
        });
        assert.ok('status' in answer && answer.status === 200);
      });
    } finally {
      await client.close();
    }
    await tracing?.flush();
    const spans = exporter.getFinishedSpans();
    const outer = spans.find((s) => s.name === 'outer');
    assert.ok(outer);
    const calls = spans.filter((s) => s !== outer);
    assert.deepEqual(
      calls.map((s) => s.name),
      ['HTTP GET', 'HTTP GET', 'HTTP GET', 'HTTP POST'],
    );
    for (const span of calls) {
      assert.equal(span.parentSpanContext?.spanId, outer.spanContext().spanId);
      assert.equal(span.spanContext().traceId, outer.spanContext().traceId);
    }
    // What the servers received names each client span as the parent.
    assert.deepEqual(
      seen.map((h) => h['traceparent']),
      calls.map((s) => `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`),
    );
    assert.equal(calls[0]!.attributes['http.response.status_code'], 200);
    assert.equal(calls[1]!.attributes['http.response.status_code'], 404);
    assert.equal(calls[1]!.status.code, 2, 'a failed API call fails its span');
    assert.match(String(calls[2]!.attributes['url.full']), /watch=true/);
    assert.equal(calls[3]!.attributes['k8s.pod.name'], 'ingester-0');
  });

  it("a span with incoming headers continues the caller's trace", async () => {
    const t = tracer();
    assert.ok(t);
    exporter.reset();
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    await t.span(
      'HTTP POST - admission_pod_eviction',
      { kind: 'server', incoming: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } },
      () => Promise.resolve(),
    );
    await tracing?.flush();
    const [span] = exporter.getFinishedSpans();
    assert.equal(span?.spanContext().traceId, traceId);
    assert.equal(span?.parentSpanContext?.spanId, 'b7ad6b7169203331');
  });
});
