// The pod HTTP client against real loopback servers standing in for pods.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { nopLogger } from '../../src/runtime/log/logger.ts';
import type { Pod } from '../../src/runtime/kube/types.ts';
import { mapBounded, MAX_POD_ANSWER_BYTES, PodClient, podClient } from '../../src/workloads/podclient.ts';
import { freePorts } from '../cluster/ports.ts';

const pod = (ip?: string, namespace?: string): Pod => ({
  metadata: { name: 'ingester-0', ...(namespace ? { namespace } : {}) },
  status: ip ? { podIP: ip } : {},
});
const client = new PodClient();
const callPod = client.call.bind(client);

describe('PodClient', () => {
  let server: Server;
  let port = 0;
  const seen: { method?: string; url?: string; host?: string; cluster?: string[] }[] = [];
  before(async () => {
    [port] = (await freePorts(1)) as [number];
    server = createServer((req, res) => {
      seen.push({
        method: req.method,
        url: req.url,
        host: req.headers.host,
        cluster: req.headersDistinct['x-cluster'],
      });
      req.resume();
      if (req.url === '/hang') return;
      if (req.url === '/cluster-refused') {
        // dskit's answer to a wrong X-Cluster (its middleware, hard mode).
        res.writeHead(511, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            cluster_validation_error_message:
              'rejected request with wrong cluster validation label "ns" - it should be one of [prod]',
            route: 'ingester_prepare',
          }),
        );
        return;
      }
      if (req.url === '/plain-511') {
        res.writeHead(511, { 'content-type': 'text/plain' });
        res.end('proxy login');
        return;
      }
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
    const result = await callPod({
      method: 'POST',
      url: `http://ingester-0.ingester.ns.svc.cluster.local.:${port}/prepare?x=1`,
      pod: pod('127.0.0.9'),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    assert.deepEqual(result, {
      url: `http://ingester-0.ingester.ns.svc.cluster.local.:${port}/prepare?x=1`,
      status: 200,
      body: '{"timestamp":1700000000}',
    });
    assert.deepEqual(seen.at(-1), {
      method: 'POST',
      url: '/prepare?x=1',
      host: `ingester-0.ingester.ns.svc.cluster.local.:${port}`,
      cluster: undefined,
    });
  });

  it("sends X-Cluster: the pod's namespace (rollout-operator's own, which is its pods')", async () => {
    await callPod({
      method: 'POST',
      url: `http://x:${port}/prepare`,
      pod: pod('127.0.0.9', 'mimir'),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    assert.deepEqual(seen.at(-1)?.cluster, ['mimir']);
    await callPod({
      method: 'DELETE',
      url: `http://x:${port}/prepare`,
      pod: pod('127.0.0.9', 'kafka'),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    assert.deepEqual(seen.at(-1)?.cluster, ['kafka']);
  });

  it("fails a call the pod refuses for its X-Cluster (dskit's 511 with JSON), counting it as rollout-operator does; other 511s are answers", async () => {
    const registry = new Registry();
    const counted = podClient({ registry, logger: nopLogger });
    assert.equal(podClient({ registry, logger: nopLogger }), counted, 'one per registry');
    const refused = await counted.call({
      method: 'POST',
      url: `http://x:${port}/cluster-refused`,
      pod: pod('127.0.0.9', 'ns'),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    assert.deepEqual(refused, {
      url: `http://x:${port}/cluster-refused`,
      error:
        'request rejected by the server: rejected request with wrong cluster validation label "ns" - it should be one of [prod]',
    });
    const plain = await counted.call({
      method: 'POST',
      url: `http://x:${port}/plain-511`,
      pod: pod('127.0.0.9', 'ns'),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    assert.deepEqual(plain, { url: `http://x:${port}/plain-511`, status: 511, body: 'proxy login' });
    await counted.call({
      method: 'POST',
      url: `http://x:${port}/prepare?x=1`,
      pod: pod('127.0.0.9', 'ns'),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    await counted.call({
      method: 'POST',
      url: `http://x:${port}/prepare`,
      pod: pod(),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    const metrics = await registry.metrics();
    assert.match(
      metrics,
      /^rollout_operator_client_invalid_cluster_validation_label_requests_total\{method="ingester_prepare",protocol="http",request_cluster="ns"\} 1$/m,
    );
    // The pod call's duration by path as dialled; a refusal is an "error", as the transport failed it; a call never sent is not measured.
    assert.match(
      metrics,
      /^rollout_operator_pod_http_client_request_duration_seconds_count\{path="\/cluster-refused",method="POST",status_code="error"\} 1$/m,
    );
    assert.match(
      metrics,
      /^rollout_operator_pod_http_client_request_duration_seconds_count\{path="\/plain-511",method="POST",status_code="511"\} 1$/m,
    );
    assert.match(
      metrics,
      /^rollout_operator_pod_http_client_request_duration_seconds_count\{path="\/prepare",method="POST",status_code="200"\} 1$/m,
    );
    assert.doesNotMatch(metrics, /_count\{path="\/prepare",method="POST",status_code="error"\}/);
  });

  it('reports a non-2xx status as a status, not an error', async () => {
    const result = await callPod({
      method: 'DELETE',
      url: `http://x:${port}/conflict`,
      pod: pod('127.0.0.9'),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    assert.ok('status' in result && result.status === 409);
  });

  it('never dials anything without the pod IP', async () => {
    const before = seen.length;
    const result = await callPod({
      method: 'POST',
      url: `http://127.0.0.9:${port}/prepare`,
      pod: pod(),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    assert.deepEqual(result, { url: `http://127.0.0.9:${port}/prepare`, error: 'pod ingester-0 has no IP address' });
    assert.equal(seen.length, before);
  });

  it('refuses URLs that are not http://', async () => {
    for (const url of ['https://x/prepare', 'not a url']) {
      const result = await callPod({
        method: 'POST',
        url,
        pod: pod('127.0.0.9'),
        podName: 'ingester-0',
        timeoutMs: 2000,
      });
      assert.ok('error' in result, url);
    }
  });

  it('gives up on a pod that does not answer, or trickles, at the timeout', async () => {
    for (const path of ['/hang', '/trickle']) {
      const started = performance.now();
      const result = await callPod({
        method: 'POST',
        url: `http://x:${port}${path}`,
        pod: pod('127.0.0.9'),
        podName: 'ingester-0',
        timeoutMs: 200,
      });
      assert.ok(
        'error' in result && /no answer within 200 ms/.test(result.error),
        `${path}: ${JSON.stringify(result)}`,
      );
      assert.ok(performance.now() - started < 5000, 'not held past the deadline by much');
    }
  });

  it('keeps at most MAX_POD_ANSWER_BYTES of an answer', async () => {
    const result = await callPod({
      method: 'POST',
      url: `http://x:${port}/big`,
      pod: pod('127.0.0.9'),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    assert.ok('body' in result && result.body.length === MAX_POD_ANSWER_BYTES);
  });

  it('reports a refused connection as an error', async () => {
    const [closed] = (await freePorts(1)) as [number];
    const result = await callPod({
      method: 'POST',
      url: `http://x:${closed}/`,
      pod: pod('127.0.0.9'),
      podName: 'ingester-0',
      timeoutMs: 2000,
    });
    assert.ok('error' in result && /ECONNREFUSED/.test(result.error));
  });

  it('stops when its signal aborts', async () => {
    const controller = new AbortController();
    const pending = callPod({
      method: 'POST',
      url: `http://x:${port}/hang`,
      pod: pod('127.0.0.9'),
      podName: 'ingester-0',
      timeoutMs: 60_000,
      signal: controller.signal,
    });
    controller.abort(new Error('leadership lost'));
    const result = await pending;
    assert.ok('error' in result);
  });
});

describe('mapBounded', () => {
  it('keeps order and never exceeds the bound', async () => {
    let inFlight = 0;
    let most = 0;
    const results = await mapBounded(
      Array.from({ length: 40 }, (_, i) => i),
      7,
      async (i) => {
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight--;
        return i * 2;
      },
    );
    assert.deepEqual(
      results,
      Array.from({ length: 40 }, (_, i) => i * 2),
    );
    assert.equal(most, 7);
    assert.deepEqual(await mapBounded([], 3, () => Promise.resolve(1)), []);
  });
});
