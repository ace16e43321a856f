import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { HttpServer, routeName } from '../../../src/runtime/http/server.ts';

async function started(ready: () => boolean) {
  const registry = new Registry();
  const server = new HttpServer({
    port: 0,
    host: '127.0.0.1',
    registry,
    notReady: () => (ready() ? undefined : 'caches are still syncing'),
  });
  const port = await server.listen();
  return { server, registry, url: (path: string) => `http://127.0.0.1:${port}${path}` };
}

describe('HTTP server', () => {
  it("answers /ready from the readiness function, /healthz (and Reloader's /live) always", async (t) => {
    let ready = false;
    const { server, url } = await started(() => ready);
    t.after(() => server.close());
    assert.equal((await fetch(url('/ready'))).status, 503);
    assert.equal((await fetch(url('/healthz'))).status, 200);
    assert.equal((await fetch(url('/live'))).status, 200);
    ready = true;
    assert.equal((await fetch(url('/ready'))).status, 200);
    assert.equal((await fetch(url('/nope'))).status, 404);
  });

  it('serves Prometheus text from its private registry, counting its own requests by route', async (t) => {
    const { server, url } = await started(() => true);
    t.after(() => server.close());
    await fetch(url('/ready'));
    const response = await fetch(url('/metrics'));
    assert.match(response.headers.get('content-type') ?? '', /text\/plain/);
    const body = await response.text();
    assert.match(
      body,
      /rollout_operator_request_duration_seconds_count\{method="GET",route="ready",status_code="200",ws="false"\} 1/,
    );
  });

  it('turns a failing handler into a 500, not a crash', async (t) => {
    const { server, url } = await started(() => true);
    t.after(() => server.close());
    server.route('/boom', () => {
      throw new Error('handler bug');
    });
    assert.equal((await fetch(url('/boom'))).status, 500);
    assert.equal((await fetch(url('/healthz'))).status, 200);
  });

  it('lets an in-flight request finish on close', async () => {
    const { server, url } = await started(() => true);
    let release!: () => void;
    server.route('/slow', async (_req, res) => {
      await new Promise<void>((resolve) => (release = resolve));
      res.end('done');
    });
    const pending = fetch(url('/slow'));
    await new Promise((resolve) => setImmediate(resolve));
    while (!release) await new Promise((resolve) => setImmediate(resolve));
    const closing = server.close(5000);
    release();
    assert.equal(await (await pending).text(), 'done');
    await closing;
  });

  it('serves a path prefix unless an exact route matches, naming the prefix in metrics', async (t) => {
    const { server, url } = await started(() => true);
    t.after(() => server.close());
    server.routePrefix('/status/', (req, res) => void res.end(`prefix ${req.url}`));
    server.routePrefix('/status/api/', (req, res) => void res.end(`api ${req.url}`));
    server.route('/status/exact', (_req, res) => void res.end('exact'));
    assert.equal(await (await fetch(url('/status/team-a'))).text(), 'prefix /status/team-a');
    assert.equal(await (await fetch(url('/status/api/team-a'))).text(), 'api /status/api/team-a');
    assert.equal(await (await fetch(url('/status/exact'))).text(), 'exact');
    assert.equal((await fetch(url('/statusx'))).status, 404);
    const metrics = await (await fetch(url('/metrics'))).text();
    assert.match(metrics, /route="status",status_code="200"/);
    assert.match(metrics, /route="status_api",status_code="200"/);
    assert.doesNotMatch(metrics, /team_a/);
  });

  it('names routes as rollout-operator does', () => {
    assert.equal(routeName('/admission/pod-eviction'), 'admission_pod_eviction');
    assert.equal(routeName('/metrics'), 'metrics');
    assert.equal(routeName('/'), 'root');
  });
});
