// The operator's Kubernetes client sends rollout-operator's X-Cluster (the
// namespace) on every request, watches included, validation on or off; an
// answer refusing it (dskit's 511 with its JSON body) fails the request and
// is counted. A local plain HTTP server stands in for the API server.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { stringify } from 'yaml';
import { registerRuntimeFlags } from '../../../src/runtime/runtimeflags.ts';
import { FlagSet } from '../../../src/runtime/flags/flagset.ts';
import { clusterRejections } from '../../../src/runtime/http/clusterlabel.ts';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../../src/runtime/kube/errors.ts';
import { parseKubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { apiClientMetrics } from '../../../src/runtime/kube/apimetrics.ts';
import { resources } from '../../../src/runtime/kube/types.ts';
import { nopLogger } from '../../../src/runtime/log/logger.ts';
import { Operator } from '../../../src/runtime/operator.ts';

const REFUSAL = JSON.stringify({
  cluster_validation_error_message:
    'rejected request with wrong cluster validation label "mimir" - it should be one of [prod]',
  route: 'api',
});

describe('X-Cluster on Kubernetes API requests', () => {
  let server: Server;
  let url = '';
  const seen: { method: string; url: string; cluster: string[] | undefined }[] = [];
  before(async () => {
    server = createServer((req, res) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', cluster: req.headersDistinct['x-cluster'] });
      req.resume();
      if (req.url?.startsWith('/api/v1/namespaces/refused/')) {
        res.writeHead(511, { 'content-type': 'application/json' });
        res.end(REFUSAL);
        return;
      }
      if (req.url?.startsWith('/api/v1/namespaces/proxy/')) {
        res.writeHead(511, { 'content-type': 'text/html' });
        res.end('<html>log in to the proxy</html>');
        return;
      }
      if (req.url?.includes('watch=true')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a' } } })}\n`);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'PodList', items: [], metadata: {} }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const kubeConfig = () =>
    parseKubeConfig(
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: url } }],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'ctx',
      }),
    );

  it("the operator's client sends X-Cluster: -kubernetes.namespace on every request, with validation off", async () => {
    const fs = new FlagSet('stateward');
    const flags = registerRuntimeFlags(fs);
    const parsed = fs.parse(['-kubernetes.namespace=mimir', '-kubernetes.watch-namespaces=mimir,kafka'], {});
    assert.equal(parsed.kind, 'ok');
    const config = flags.read();
    assert.equal(config.clusterValidation.enabled, false);
    const operator = new Operator({
      config,
      kubeConfig: kubeConfig(),
      logger: nopLogger,
      registry: new Registry(),
      capabilities: [],
      version: 'test',
    });
    try {
      const before = seen.length;
      await operator.client.list(resources.pods, { namespace: 'kafka' });
      await operator.client.create(resources.configMaps, { metadata: { name: 'x', namespace: 'kafka' } });
      for await (const event of operator.client.watch(resources.pods, {
        namespace: 'mimir',
        signal: AbortSignal.timeout(5000),
      }))
        assert.equal(event.type, 'ADDED');
      const requests = seen.slice(before);
      assert.equal(requests.length, 3);
      for (const r of requests) assert.deepEqual(r.cluster, ['mimir'], `${r.method} ${r.url}`);
    } finally {
      await operator.client.close();
    }
  });

  it("fails a request whose X-Cluster the server refuses (dskit's 511 with JSON), counts it as rollout-operator does, and leaves other 511s alone", async () => {
    const registry = new Registry();
    const client = new KubeClient({
      kubeConfig: kubeConfig(),
      timeoutMs: 5000,
      metrics: apiClientMetrics(registry),
      cluster: { label: 'mimir', rejections: clusterRejections(registry, nopLogger) },
    });
    try {
      const refused = await client.list(resources.pods, { namespace: 'refused' }).then(
        () => undefined,
        (error: unknown) => error,
      );
      assert.ok(refused instanceof KubeApiError);
      assert.equal(refused.code, 511);
      assert.equal(refused.reason, 'ClusterValidationRejected');
      assert.equal(
        refused.statusMessage,
        'request rejected by the server: rejected request with wrong cluster validation label "mimir" - it should be one of [prod]',
      );
      const proxy = await client.list(resources.pods, { namespace: 'proxy' }).then(
        () => undefined,
        (error: unknown) => error,
      );
      assert.ok(proxy instanceof KubeApiError);
      assert.notEqual(proxy.reason, 'ClusterValidationRejected');
      const watch = client.watch(resources.pods, { namespace: 'refused', signal: AbortSignal.timeout(5000) });
      await assert.rejects(
        watch.next(),
        (error: unknown) => error instanceof KubeApiError && error.reason === 'ClusterValidationRejected',
      );
      const metrics = await registry.metrics();
      assert.match(
        metrics,
        /^rollout_operator_client_invalid_cluster_validation_label_requests_total\{method="api",protocol="http",request_cluster="mimir"\} 2$/m,
      );
      // The API client's own histogram sees each answer as it came, the watch's too (a GET), as
      // rollout-operator's inner instrumentation does.
      assert.match(
        metrics,
        /^rollout_operator_kubernetes_api_client_request_duration_seconds_count\{path="core\/v1\/pods collection",method="GET",status_code="511"\} 3$/m,
      );
    } finally {
      await client.close();
    }
  });

  it('a client built without a label (the client commands) sends none', async () => {
    const client = new KubeClient({ kubeConfig: kubeConfig(), timeoutMs: 5000 });
    try {
      await client.list(resources.pods, { namespace: 'a' });
      assert.equal(seen.at(-1)?.cluster, undefined);
    } finally {
      await client.close();
    }
  });
});
