// The real Prometheus the health-gated rollout tests query, scraping the
// test exporter: what the test sets is what an instant query answers, with
// the pod's own labels; a stopped Prometheus refuses connections and, started
// again on the same port and data, answers again. No cluster is used; the
// file is named .int because on a machine's first run it builds Prometheus
// (minutes), as test/tools/helm.int.test.ts does for helm.
import assert from 'node:assert/strict';
import { request } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { prometheusRelease } from '../tools/prometheus.ts';
import { MetricExporter } from './metricexporter.ts';
import { PrometheusGateway } from './prometheus-gateway.ts';
import { onlyValue, Prometheus, PrometheusQueryError, waitForQuery } from './prometheus.ts';

const pod = { namespace: 'mimir', pod: 'ingester-zone-a-0' };
const errors = { ...pod, status_code: '500' };
const QUERY = 'http_requests_total{namespace="mimir", pod="ingester-zone-a-0", status_code="500"}';

describe('a real Prometheus scraping the test exporter', { timeout: 900_000 }, () => {
  let exporter: MetricExporter;
  let prometheus: Prometheus;

  before(async () => {
    exporter = await MetricExporter.start();
    prometheus = await Prometheus.start({ targets: [exporter.target] });
  });

  after(async () => {
    await prometheus?.close();
    await exporter?.close();
  });

  it('is the pinned release', async () => {
    const info = (await prometheus.api('/api/v1/status/buildinfo')) as { version: string };
    assert.equal(info.version, prometheusRelease());
  });

  it('answers with the value the exporter publishes, labels as the exporter wrote them', async () => {
    exporter.set('http_requests_total', errors, 7);
    const [sample] = await waitForQuery(prometheus, QUERY, (s) => onlyValue(s) === 7);
    // honor_labels: the exporter's namespace and pod, not exported_namespace.
    assert.equal(sample!.metric['namespace'], 'mimir');
    assert.equal(sample!.metric['pod'], 'ingester-zone-a-0');
    assert.equal(sample!.metric['job'], 'stateward-test');
    assert.equal(sample!.metric['instance'], exporter.target);
  });

  it('sees a change, and a series the exporter drops goes away', async () => {
    exporter.add('http_requests_total', errors, 5);
    await waitForQuery(prometheus, QUERY, (s) => onlyValue(s) === 12);
    exporter.set('up_and_away', pod, 1);
    await waitForQuery(prometheus, 'up_and_away', (s) => s.length === 1);
    exporter.remove('up_and_away');
    await waitForQuery(prometheus, 'up_and_away', (s) => s.length === 0);
  });

  it('rejects a query it cannot parse with its own error', async () => {
    await assert.rejects(prometheus.query('sum('), (error: unknown) => {
      assert.ok(error instanceof PrometheusQueryError, String(error));
      assert.equal(error.errorType, 'bad_data');
      return true;
    });
  });

  it('refuses connections while stopped, and answers again once restarted on the same port', async () => {
    await prometheus.stop();
    assert.equal(prometheus.running, false);
    await assert.rejects(prometheus.query(QUERY), (error: NodeJS.ErrnoException) => {
      assert.equal(error.code, 'ECONNREFUSED', String(error));
      return true;
    });
    exporter.set('http_requests_total', errors, 20);
    await prometheus.resume();
    await waitForQuery(prometheus, QUERY, (s) => onlyValue(s) === 20);
    // The data directory was kept: the samples from before the stop are still there.
    const [before] = await prometheus.query(`max_over_time(${QUERY}[10m]) - min_over_time(${QUERY}[10m])`);
    assert.equal(before!.value, 20 - 7);
  });

  it('comes back after a crash (SIGKILL) too', async () => {
    await prometheus.stop({ signal: 'SIGKILL' });
    exporter.set('http_requests_total', errors, 21);
    await prometheus.resume();
    await waitForQuery(prometheus, QUERY, (s) => onlyValue(s) === 21);
  });

  it('a frozen Prometheus accepts the connection but does not answer', async () => {
    await prometheus.freeze();
    try {
      await assert.rejects(prometheus.query(QUERY, { timeoutMs: 500 }), /no answer from .* within 500 ms/);
    } finally {
      prometheus.thaw();
    }
    await waitForQuery(prometheus, QUERY, (s) => onlyValue(s) === 21);
  });

  it('marks the target down while the exporter fails its scrapes', async () => {
    const up = `up{instance="${exporter.target}"}`;
    exporter.failScrapes(503);
    await waitForQuery(prometheus, up, (s) => onlyValue(s) === 0);
    await waitForQuery(prometheus, QUERY, (s) => s.length === 0);
    exporter.failScrapes(undefined);
    await waitForQuery(prometheus, up, (s) => onlyValue(s) === 1);
    await waitForQuery(prometheus, QUERY, (s) => onlyValue(s) === 21);
  });
});

describe('the gateway in front of it (TLS, bearer token, tenant header)', { timeout: 900_000 }, () => {
  const credentials = { authorization: 'Bearer t0ken', 'X-Scope-OrgID': 'tenant-1' };

  it('forwards what carries the credentials to the real Prometheus, refuses the rest, and is a 502 while it is down', async (t) => {
    const exporter = await MetricExporter.start();
    t.after(() => exporter.close());
    const prometheus = await Prometheus.start({ targets: [exporter.target] });
    t.after(() => prometheus.close());
    const gateway = await PrometheusGateway.start(prometheus.url, { tls: true, require: credentials });
    t.after(() => gateway.close());
    exporter.set('http_requests_total', errors, 3);
    await waitForQuery(prometheus, QUERY, (s) => onlyValue(s) === 3);
    assert.match(gateway.url, /^https:\/\/localhost:\d+$/);

    const query = `/api/v1/query?query=${encodeURIComponent(QUERY)}`;
    // POST, form-encoded, as the health check sends it: the body goes through.
    const admitted = await httpsRequest(
      `${gateway.url}/api/v1/query`,
      gateway.ca,
      credentials,
      `query=${encodeURIComponent(QUERY)}`,
    );
    assert.equal(admitted.status, 200);
    const answer = JSON.parse(admitted.body) as { data: { result: { value: [number, string] }[] } };
    assert.equal(answer.data.result[0]!.value[1], '3');

    const refused = await httpsRequest(`${gateway.url}${query}`, gateway.ca, { authorization: 'Bearer wrong' });
    assert.equal(refused.status, 401);
    assert.doesNotMatch(refused.body, /Bearer|t0ken/, 'no credential in the answer');
    assert.deepEqual(
      gateway.requests.map((r) => [r.admitted, r.headers['x-scope-orgid']]),
      [
        [true, 'tenant-1'],
        [false, undefined],
      ],
    );

    await prometheus.stop();
    assert.equal((await httpsRequest(`${gateway.url}${query}`, gateway.ca, credentials)).status, 502);
    await assert.rejects(
      httpsRequest(`${gateway.url}${query}`, undefined, credentials),
      /self-signed|unable to verify/,
    );
  });
});

async function httpsRequest(
  url: string,
  ca: string | undefined,
  headers: Record<string, string>,
  form?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const options = {
      method: form === undefined ? 'GET' : 'POST',
      headers: form === undefined ? headers : { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
      ...(ca ? { ca } : {}),
      agent: false,
    };
    const req = request(url, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(form);
  });
}
