// The doctor's probe of a RolloutHealthCheck's prometheusURL, against real
// local HTTP servers: an answer is reachable whatever its status, a 404 on
// buildinfo falls back to a trivial query, a refused or silent port is not,
// and nothing but the request line and a few plain headers is sent.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { probeQueryEndpoint } from '../../src/doctor/endpoints.ts';

interface Seen {
  method: string;
  path: string;
  body: string;
  headers: IncomingMessage['headers'];
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

describe('doctor: probing a query endpoint', () => {
  const seen: Seen[] = [];
  /** path → status; anything else 404. */
  const routes = new Map<string, number>();
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', path: req.url ?? '', body, headers: req.headers });
      const status = routes.get(`${req.method} ${req.url}`) ?? 404;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end('{"status":"success","data":{}}');
    });
  });
  let base = '';
  before(async () => (base = await listen(server)));
  after(() => close(server));

  const reset = (entries: [string, number][]) => {
    seen.length = 0;
    routes.clear();
    for (const [k, v] of entries) routes.set(k, v);
  };

  it('is reachable when buildinfo answers, under the path prefix, with no credentials sent', async () => {
    reset([['GET /prometheus/api/v1/status/buildinfo', 200]]);
    const probe = await probeQueryEndpoint(new URL(`${base}/prometheus/`));
    assert.deepEqual(probe, { url: `${base}/prometheus/`, outcome: 'answered', status: 200 });
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.path, '/prometheus/api/v1/status/buildinfo');
    assert.equal(seen[0]!.headers.authorization, undefined);
    assert.equal(seen[0]!.headers['x-scope-orgid'], undefined);
    assert.equal(seen[0]!.headers['user-agent'], 'stateward-doctor');
  });

  it('counts any answer as reachable: a 401 of a server that wants credentials the doctor does not send', async () => {
    reset([['GET /api/v1/status/buildinfo', 401]]);
    assert.deepEqual(await probeQueryEndpoint(new URL(base)), { url: `${base}/`, outcome: 'answered', status: 401 });
  });

  it('falls back to POST /api/v1/query with query=1 when buildinfo is unknown', async () => {
    reset([['POST /api/v1/query', 200]]);
    const probe = await probeQueryEndpoint(new URL(base));
    assert.deepEqual(probe, { url: `${base}/`, outcome: 'answered', status: 200 });
    assert.deepEqual(
      seen.map((s) => `${s.method} ${s.path} ${s.body}`),
      ['GET /api/v1/status/buildinfo ', 'POST /api/v1/query query=1'],
    );
    assert.equal(seen[1]!.headers['content-type'], 'application/x-www-form-urlencoded');

    reset([]);
    assert.deepEqual(await probeQueryEndpoint(new URL(base)), { url: `${base}/`, outcome: 'answered', status: 404 });
  });

  it('is unreachable when the port refuses the connection', async () => {
    const closed = createServer();
    const url = await listen(closed);
    await close(closed);
    const probe = await probeQueryEndpoint(new URL(url));
    assert.equal(probe.outcome, 'unreachable');
    assert.match('reason' in probe ? probe.reason : '', /^connection refused by 127\.0\.0\.1:\d+$/);
  });

  it('gives up after the timeout when the server never answers', async () => {
    const silent = createServer(() => undefined);
    const url = await listen(silent);
    try {
      const started = Date.now();
      const probe = await probeQueryEndpoint(new URL(url), 200);
      assert.deepEqual(probe, { url: `${url}/`, outcome: 'unreachable', reason: 'no answer within 0.2s' });
      assert.ok(Date.now() - started < 2_000, 'bounded by the timeout');
    } finally {
      await close(silent);
    }
  });
});
