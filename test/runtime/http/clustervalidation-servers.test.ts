// Both real servers (plain HTTP and the HTTPS webhook server) with
// -server.cluster-validation.http.* on, as rollout-operator runs dskit's
// middleware on both of its servers: requests with, without and with a wrong
// X-Cluster, the 511 and its JSON body, soft mode, the metric series, and
// the request and response size histograms.
import assert from 'node:assert/strict';
import { type IncomingMessage, request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { describe, it, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import {
  type ClusterValidationConfig,
  DEFAULT_EXCLUDED_PATHS,
  MAX_REQUEST_LABELS,
  OTHER_REQUEST_LABEL,
} from '../../../src/runtime/http/clustervalidation.ts';
import { HttpServer } from '../../../src/runtime/http/server.ts';
import { createLogger } from '../../../src/runtime/log/logger.ts';
import { WebhookServer } from '../../../src/runtime/admission/webhookserver.ts';
import { generateSelfSigned } from '../../../src/webhooks/tls/generate.ts';

const tls = await generateSelfSigned({ org: 'test', dnsNames: ['localhost'], validityMs: 3600_000, now: Date.now() });
const review = JSON.stringify({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'u-1', operation: 'UPDATE', resource: { group: 'apps', version: 'v1', resource: 'statefulsets' } },
});

interface Answer {
  status: number;
  contentType: string | undefined;
  body: string;
}

function send(
  secure: boolean,
  port: number,
  path: string,
  options: { method?: string; headers?: OutgoingHttpHeaders; body?: string } = {},
): Promise<Answer> {
  const body = options.body ?? '';
  const headers = {
    ...(body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}),
    ...options.headers,
  };
  return new Promise((resolve, reject) => {
    const common = {
      host: '127.0.0.1',
      port,
      path,
      method: options.method ?? (body ? 'POST' : 'GET'),
      headers,
      agent: false,
    };
    const onAnswer = (res: IncomingMessage) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], body: text }),
      );
    };
    const req = secure
      ? httpsRequest({ ...common, servername: 'localhost', ca: tls.ca }, onAnswer)
      : httpRequest(common, onAnswer);
    req.on('error', reject);
    req.end(body);
  });
}

async function servers(t: TestContext, validation: Partial<ClusterValidationConfig> = {}) {
  const registry = new Registry();
  const lines: string[] = [];
  const logger = createLogger({ format: 'logfmt', level: 'warn', write: (line) => void lines.push(line) });
  const clusterValidation: ClusterValidationConfig = {
    enabled: true,
    softValidation: false,
    labels: ['mimir'],
    excludedPaths: DEFAULT_EXCLUDED_PATHS,
    excludedUserAgents: [],
    ...validation,
  };
  const http = new HttpServer({
    port: 0,
    host: '127.0.0.1',
    registry,
    notReady: () => undefined,
    logger,
    clusterValidation,
  });
  http.route('/status', (_req, res) => void res.end('status page'));
  const webhooks = new WebhookServer({
    port: 0,
    host: '127.0.0.1',
    requestTimeoutMs: 10_000,
    registry,
    logger,
    tls,
    clusterValidation,
  });
  for (const path of ['/admission/pod-eviction', '/admission/no-downscale', '/admission/reschedule-on-eviction'])
    webhooks.handle(path, () => ({ allowed: true }));
  const httpPort = await http.listen();
  const tlsPort = await webhooks.listen();
  t.after(async () => {
    await http.close(1000);
    await webhooks.close(1000);
  });
  return {
    plain: (path: string, options?: Parameters<typeof send>[3]) => send(false, httpPort, path, options),
    secure: (path: string, options?: Parameters<typeof send>[3]) => send(true, tlsPort, path, options),
    metrics: () => registry.metrics(),
    lines,
  };
}

const INVALID = 'rollout_operator_server_invalid_cluster_validation_label_requests_total';

describe('cluster validation on both servers', { timeout: 30_000 }, () => {
  it("answers a webhook request without X-Cluster 511 with dskit's JSON body, and serves it with the label", async (t) => {
    const s = await servers(t);
    const refused = await s.secure('/admission/pod-eviction', { body: review });
    assert.equal(refused.status, 511);
    assert.equal(refused.contentType, 'application/json');
    assert.equal(
      refused.body,
      '{"cluster_validation_error_message":"rejected request with empty cluster validation label - it should be one of [mimir]","route":"admission_pod_eviction"}',
    );
    const wrong = await s.secure('/admission/pod-eviction', { body: review, headers: { 'X-Cluster': 'prod' } });
    assert.equal(wrong.status, 511);
    assert.deepEqual(JSON.parse(wrong.body), {
      cluster_validation_error_message:
        'rejected request with wrong cluster validation label "prod" - it should be one of [mimir]',
      route: 'admission_pod_eviction',
    });
    const several = await s.secure('/admission/pod-eviction', {
      body: review,
      headers: { 'X-Cluster': ['mimir', 'mimir'] },
    });
    assert.equal(several.status, 511);
    assert.match(
      several.body,
      /request header should contain exactly 1 value for key \\"X-Cluster\\", but it contains \[mimir mimir\]/,
    );
    const served = await s.secure('/admission/pod-eviction', { body: review, headers: { 'X-Cluster': 'mimir' } });
    assert.equal(served.status, 200);
    assert.equal((JSON.parse(served.body) as { response: { allowed: boolean } }).response.allowed, true);

    const metrics = await s.metrics();
    assert.match(
      metrics,
      new RegExp(
        `^${INVALID}\\{protocol="http",method="admission_pod_eviction",cluster_validation_label="mimir",request_cluster_validation_label=""\\} 2$`,
        'm',
      ),
      'missing and several',
    );
    assert.match(
      metrics,
      new RegExp(
        `^${INVALID}\\{protocol="http",method="admission_pod_eviction",cluster_validation_label="mimir",request_cluster_validation_label="prod"\\} 1$`,
        'm',
      ),
    );
    // Measured like any answer (dskit's instrumentation wraps its validation).
    assert.match(
      metrics,
      /^rollout_operator_request_duration_seconds_count\{method="POST",route="admission_pod_eviction",status_code="511",ws="false"\} 3$/m,
    );
    assert.match(
      s.lines.join(''),
      /level=warn msg="request with no cluster validation label" .*path=\/admission\/pod-eviction method=POST cluster_validation_labels=\[mimir\] soft_validation=false tenant="" user_agent="" host=127\.0\.0\.1:\d+ client_address=127\.0\.0\.1:\d+\n/,
    );
    assert.match(
      s.lines.join(''),
      /msg="request with wrong cluster validation label".* request_cluster_validation_label=prod/,
    );
    assert.match(
      s.lines.join(''),
      /msg="detected error during cluster validation label extraction".* err="request header should contain exactly 1 value/,
    );
  });

  it("leaves out rollout-operator's default excluded paths, dskit's fixed ones, and paths only Stateward serves", async (t) => {
    const s = await servers(t);
    assert.equal(
      (await s.secure('/admission/no-downscale', { body: review })).status,
      200,
      'rollout-operator default: the apiserver sends no X-Cluster',
    );
    assert.equal(
      (await s.secure('/admission/reschedule-on-eviction', { body: review })).status,
      200,
      "Stateward's own webhook",
    );
    assert.equal((await s.plain('/metrics')).status, 200);
    assert.equal((await s.plain('/ready')).status, 200);
    assert.equal((await s.plain('/healthz')).status, 200, 'the liveness probe');
    assert.equal((await s.plain('/status')).status, 200, 'the web view');
    assert.equal((await s.secure('/metrics')).status, 404, 'excluded, then unknown on this server');
    // An unknown path is checked, under dskit's name for no route.
    const unknown = await s.plain('/nope');
    assert.equal(unknown.status, 511);
    assert.equal(
      unknown.body,
      '{"cluster_validation_error_message":"rejected request with empty cluster validation label - it should be one of [mimir]","route":"\\u003cunknown-route\\u003e"}',
    );
    assert.equal((await s.plain('/nope', { headers: { 'X-Cluster': 'mimir' } })).status, 404);
    assert.match(
      await s.metrics(),
      new RegExp(
        `^${INVALID}\\{protocol="http",method="<unknown-route>",cluster_validation_label="mimir",request_cluster_validation_label=""\\} 1$`,
        'm',
      ),
    );
  });

  it('leaves out requests from excluded user agents', async (t) => {
    const s = await servers(t, { excludedUserAgents: ['^kube-apiserver-admission$'] });
    assert.equal(
      (
        await s.secure('/admission/pod-eviction', {
          body: review,
          headers: { 'user-agent': 'kube-apiserver-admission' },
        })
      ).status,
      200,
    );
    assert.equal(
      (await s.secure('/admission/pod-eviction', { body: review, headers: { 'user-agent': 'curl/8' } })).status,
      511,
    );
  });

  it('in soft mode serves every request, counting and logging the invalid ones', async (t) => {
    const s = await servers(t, { softValidation: true });
    assert.equal(
      (await s.secure('/admission/pod-eviction', { body: review, headers: { 'X-Cluster': 'prod' } })).status,
      200,
    );
    assert.equal((await s.plain('/nope')).status, 404);
    const metrics = await s.metrics();
    assert.match(
      metrics,
      new RegExp(
        `^${INVALID}\\{protocol="http",method="admission_pod_eviction",cluster_validation_label="mimir",request_cluster_validation_label="prod"\\} 1$`,
        'm',
      ),
    );
    assert.match(
      metrics,
      new RegExp(
        `^${INVALID}\\{protocol="http",method="<unknown-route>",cluster_validation_label="mimir",request_cluster_validation_label=""\\} 1$`,
        'm',
      ),
    );
    assert.match(s.lines.join(''), /msg="request with wrong cluster validation label".*soft_validation=true/);
  });

  it('accepts any of several labels (-kubernetes.watch-namespaces), the first naming the metric', async (t) => {
    const s = await servers(t, { labels: ['stateward', 'mimir', 'kafka'] });
    assert.equal(
      (await s.secure('/admission/pod-eviction', { body: review, headers: { 'X-Cluster': 'kafka' } })).status,
      200,
    );
    const wrong = await s.secure('/admission/pod-eviction', { body: review, headers: { 'X-Cluster': 'x' } });
    assert.match(wrong.body, /it should be one of \[stateward mimir kafka\]/);
    assert.match(await s.metrics(), /cluster_validation_label="stateward",request_cluster_validation_label="x"/);
  });

  it('keeps at most MAX_REQUEST_LABELS label values a client made up', async (t) => {
    const s = await servers(t, { softValidation: true });
    for (let i = 0; i < MAX_REQUEST_LABELS + 5; i++)
      await s.plain('/nope', { headers: { 'X-Cluster': `made-up-${i}` } });
    const metrics = await s.metrics();
    const series = metrics.split('\n').filter((l) => l.startsWith(`${INVALID}{`));
    assert.equal(series.length, MAX_REQUEST_LABELS + 1);
    assert.match(metrics, new RegExp(`request_cluster_validation_label="${OTHER_REQUEST_LABEL}"\\} 5$`, 'm'));
  });

  it('registers the metric, with no series, when validation is off', async (t) => {
    const s = await servers(t, { enabled: false });
    assert.equal((await s.secure('/admission/pod-eviction', { body: review })).status, 200);
    const metrics = await s.metrics();
    assert.match(metrics, new RegExp(`^# TYPE ${INVALID} counter$`, 'm'));
    assert.doesNotMatch(metrics, new RegExp(`^${INVALID}\\{`, 'm'));
  });
});

describe('request and response size histograms', { timeout: 30_000 }, () => {
  it("measure the body bytes handlers read and wrote, by method and route, in dskit's buckets", async (t) => {
    const s = await servers(t, { enabled: false });
    const served = await s.secure('/admission/pod-eviction', { body: review });
    const ready = await s.plain('/ready');
    // A body no handler reads counts 0 (dskit counts reads, not Content-Length).
    const unread = await s.secure('/nope', { body: review });
    assert.equal(unread.status, 404);
    const metrics = await s.metrics();
    const sample = (name: string, labels: string) =>
      Number(new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
    assert.equal(
      sample('rollout_operator_request_message_bytes_sum', 'method="POST",route="admission_pod_eviction"'),
      Buffer.byteLength(review),
    );
    assert.equal(
      sample('rollout_operator_response_message_bytes_sum', 'method="POST",route="admission_pod_eviction"'),
      Buffer.byteLength(served.body),
    );
    assert.equal(sample('rollout_operator_request_message_bytes_sum', 'method="GET",route="ready"'), 0);
    assert.equal(
      sample('rollout_operator_response_message_bytes_sum', 'method="GET",route="ready"'),
      Buffer.byteLength(ready.body),
    );
    assert.equal(sample('rollout_operator_request_message_bytes_sum', 'method="POST",route="other"'), 0);
    assert.equal(sample('rollout_operator_response_message_bytes_count', 'method="POST",route="other"'), 1);
    // ExponentialBuckets(4, 4, 15): 4 B … 1 GiB, then +Inf.
    const buckets = [
      ...metrics.matchAll(
        /^rollout_operator_request_message_bytes_bucket\{le="([^"]+)",method="GET",route="ready"\}/gm,
      ),
    ].map((m) => m[1]);
    assert.deepEqual(buckets, [...Array.from({ length: 15 }, (_, i) => String(4 * 4 ** i)), '+Inf']);
  });
});
