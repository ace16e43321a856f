// The health check's query client against a local HTTP server that answers
// as the test scripts it: what it retries (5xx, 429, no answer), what it does
// not (a refused query), and that no answer, however slow or large, holds an
// evaluation past its deadline. What Prometheus itself answers is tested
// against the real Prometheus (test/rollout/healthgate.int.test.ts).
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { instantQuery } from '../../../src/rollout/healthcheck/prometheus.ts';
import { closeServer, listenOn } from '../../support/tcp.ts';
import { waitFor } from '../../cluster/probe.ts';

const ONE_SAMPLE = JSON.stringify({
  status: 'success',
  data: { resultType: 'vector', result: [{ metric: {}, value: [1764400000, '0.25'] }] },
});

type Handler = (n: number, request: IncomingMessage, response: ServerResponse) => void;

/** A server whose n-th request (0-based) the handler answers; it counts requests and stops with the test. */
async function scripted(t: TestContext, handler: Handler) {
  let requests = 0;
  const sockets = new Set<Socket>();
  const server = createServer((request, response) => {
    const n = requests++;
    request.resume();
    request.on('end', () => handler(n, request, response));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const port = await listenOn(server);
  t.after(() => closeServer(server, sockets));
  return { access: { url: new URL(`http://127.0.0.1:${port}`), headers: {} }, requests: () => requests };
}

const query = (retries: number, timeoutMs = 2_000) => ({ promql: 'up', timeoutMs, retries });

describe('instantQuery', () => {
  it('retries a 503 and a 429, then reads the answer', async (t) => {
    const server = await scripted(t, (n, _request, response) => {
      if (n === 0) response.writeHead(503).end(JSON.stringify({ status: 'error', error: 'not ready' }));
      else if (n === 1) response.writeHead(429).end('{}');
      else response.writeHead(200, { 'content-type': 'application/json' }).end(ONE_SAMPLE);
    });
    assert.deepEqual(await instantQuery(server.access, query(3)), { kind: 'value', value: 0.25 });
    assert.equal(server.requests(), 3);
  });

  it('does not retry a query Prometheus refuses (400): the PromQL will not heal', async (t) => {
    const server = await scripted(t, (_n, _request, response) =>
      response
        .writeHead(400)
        .end(JSON.stringify({ status: 'error', errorType: 'bad_data', error: 'parse error at char 3' })),
    );
    assert.deepEqual(await instantQuery(server.access, query(3)), {
      kind: 'error',
      message: 'Prometheus answered bad_data: parse error at char 3',
    });
    assert.equal(server.requests(), 1);
  });

  it('gives up on a server that never answers after its retries, each attempt ended by the timeout', async (t) => {
    const server = await scripted(t, () => undefined);
    const result = await instantQuery(server.access, query(2, 200));
    assert.equal(result.kind, 'error');
    assert.match((result as { message: string }).message, /^no answer .*\(after 3 attempts\)$/);
    assert.equal(server.requests(), 3);
  });

  it('a server that sends its headers and then trickles the body ends the attempt at the timeout', async (t) => {
    const timers = new Set<NodeJS.Timeout>();
    t.after(() => timers.forEach(clearInterval));
    const server = await scripted(t, (_n, _request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"status":"success","data":');
      const timer = setInterval(() => response.write(' '), 20);
      timers.add(timer);
      response.on('close', () => clearInterval(timer));
    });
    // The outer signal cannot end it: were the attempt's own deadline not to, this would hang the test.
    const result = await instantQuery(server.access, query(0, 300));
    assert.equal(result.kind, 'error');
    assert.equal(server.requests(), 1);
  });

  it('cuts off an answer larger than the cap instead of buffering it', async (t) => {
    const server = await scripted(t, (_n, _request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      const pump = () => {
        while (!response.destroyed && response.write(Buffer.alloc(65_536, 32)));
        if (!response.destroyed) response.once('drain', pump);
      };
      pump();
    });
    const result = await instantQuery(server.access, query(0, 10_000));
    assert.deepEqual(result, { kind: 'error', message: 'the answer is larger than 1048576 bytes' });
  });

  it('stops an attempt in flight when the operator stops, without waiting for the timeout', async (t) => {
    const server = await scripted(t, () => undefined);
    const stopping = new AbortController();
    const pending = instantQuery(server.access, query(3, 60_000), stopping.signal);
    await waitFor('the attempt to reach the server', () => server.requests() === 1, { timeoutMs: 10_000 });
    stopping.abort();
    // A 60 s attempt timeout and three retries: only the stop signal can end this within the test's own timeout.
    assert.deepEqual(await pending, { kind: 'error', message: 'stopped' });
    assert.equal(server.requests(), 1);
  });
});
