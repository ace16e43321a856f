// The pod HTTP client against real loopback servers standing in for pods.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { Pod } from '../../src/runtime/kube/types.ts';
import { callPod, mapBounded, MAX_POD_ANSWER_BYTES } from '../../src/workloads/podclient.ts';
import { freePorts } from '../cluster/ports.ts';

const pod = (ip?: string): Pod => ({ metadata: { name: 'ingester-0' }, status: ip ? { podIP: ip } : {} });

describe('callPod', () => {
  let server: Server;
  let port = 0;
  const seen: { method?: string; url?: string; host?: string }[] = [];
  before(async () => {
    [port] = (await freePorts(1)) as [number];
    server = createServer((req, res) => {
      seen.push({ method: req.method, url: req.url, host: req.headers.host });
      req.resume();
      if (req.url === '/hang') return;
      if (req.url === '/big') {
        res.end('x'.repeat(MAX_POD_ANSWER_BYTES * 3));
        return;
      }
      if (req.url === '/trickle') {
        // Bytes keep coming, each well within the socket timeout; only the overall deadline ends it.
        const timer = setInterval(() => res.write('.'), 20);
        res.on('close', () => clearInterval(timer));
        return;
      }
      res.statusCode = req.url === '/conflict' ? 409 : 200;
      res.end('{"timestamp":1700000000}');
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.9', resolve));
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it('dials the pod IP with the URL host as Host, and returns status and body', async () => {
    const result = await callPod({ method: 'POST', url: `http://ingester-0.ingester.ns.svc.cluster.local.:${port}/prepare?x=1`, pod: pod('127.0.0.9'), podName: 'ingester-0', timeoutMs: 2000 });
    assert.deepEqual(result, { url: `http://ingester-0.ingester.ns.svc.cluster.local.:${port}/prepare?x=1`, status: 200, body: '{"timestamp":1700000000}' });
    assert.deepEqual(seen.at(-1), { method: 'POST', url: '/prepare?x=1', host: `ingester-0.ingester.ns.svc.cluster.local.:${port}` });
  });

  it('reports a non-2xx status as a status, not an error', async () => {
    const result = await callPod({ method: 'DELETE', url: `http://x:${port}/conflict`, pod: pod('127.0.0.9'), podName: 'ingester-0', timeoutMs: 2000 });
    assert.ok('status' in result && result.status === 409);
  });

  it('never dials anything without the pod IP', async () => {
    const before = seen.length;
    const result = await callPod({ method: 'POST', url: `http://127.0.0.9:${port}/prepare`, pod: pod(), podName: 'ingester-0', timeoutMs: 2000 });
    assert.deepEqual(result, { url: `http://127.0.0.9:${port}/prepare`, error: 'pod ingester-0 has no IP address' });
    assert.equal(seen.length, before);
  });

  it('refuses URLs that are not http://', async () => {
    for (const url of ['https://x/prepare', 'not a url']) {
      const result = await callPod({ method: 'POST', url, pod: pod('127.0.0.9'), podName: 'ingester-0', timeoutMs: 2000 });
      assert.ok('error' in result, url);
    }
  });

  it('gives up on a pod that does not answer, or trickles, at the timeout', async () => {
    for (const path of ['/hang', '/trickle']) {
      const started = performance.now();
      const result = await callPod({ method: 'POST', url: `http://x:${port}${path}`, pod: pod('127.0.0.9'), podName: 'ingester-0', timeoutMs: 200 });
      assert.ok('error' in result && /no answer within 200 ms/.test(result.error), `${path}: ${JSON.stringify(result)}`);
      assert.ok(performance.now() - started < 5000, 'not held past the deadline by much');
    }
  });

  it('keeps at most MAX_POD_ANSWER_BYTES of an answer', async () => {
    const result = await callPod({ method: 'POST', url: `http://x:${port}/big`, pod: pod('127.0.0.9'), podName: 'ingester-0', timeoutMs: 2000 });
    assert.ok('body' in result && result.body.length === MAX_POD_ANSWER_BYTES);
  });

  it('reports a refused connection as an error', async () => {
    const [closed] = (await freePorts(1)) as [number];
    const result = await callPod({ method: 'POST', url: `http://x:${closed}/`, pod: pod('127.0.0.9'), podName: 'ingester-0', timeoutMs: 2000 });
    assert.ok('error' in result && /ECONNREFUSED/.test(result.error));
  });

  it('stops when its signal aborts', async () => {
    const controller = new AbortController();
    const pending = callPod({ method: 'POST', url: `http://x:${port}/hang`, pod: pod('127.0.0.9'), podName: 'ingester-0', timeoutMs: 60_000, signal: controller.signal });
    controller.abort(new Error('leadership lost'));
    const result = await pending;
    assert.ok('error' in result);
  });
});

describe('mapBounded', () => {
  it('keeps order and never exceeds the bound', async () => {
    let inFlight = 0;
    let most = 0;
    const results = await mapBounded(Array.from({ length: 40 }, (_, i) => i), 7, async (i) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((resolve) => setImmediate(resolve));
      inFlight--;
      return i * 2;
    });
    assert.deepEqual(results, Array.from({ length: 40 }, (_, i) => i * 2));
    assert.equal(most, 7);
    assert.deepEqual(await mapBounded([], 3, () => Promise.resolve(1)), []);
  });
});
