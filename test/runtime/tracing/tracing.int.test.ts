// Tracing end to end, as a rollout-operator user has it: the operator runs
// with nothing but the standard OTEL_* environment and exports to a real
// OpenTelemetry Collector (OTLP over HTTP, the default protocol). A rollout
// and a denied eviction must arrive there as spans with the right names,
// kinds, attributes and parent/child links.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../src/runtime/kube/types.ts';
import { zpdbResource } from '../../../src/drain/zpdb/zpdbresource.ts';
import { freePorts } from '../../cluster/ports.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';
import { kubectl } from '../../support/kubectl.ts';
import { OperatorProcess } from '../../support/operator-process.ts';
import { Collector, type ReceivedSpan } from '../../support/otelcol.ts';
import { evict, reviewEviction } from '../../support/evictions.ts';
import {
  changeTemplate,
  createGroup,
  testClient,
  waitGroupSettled,
  waitRolledOut,
  ZONES,
} from '../../support/rollout-group.ts';
import { evictionWebhook, installLoopbackWebhook } from '../../support/webhooks.ts';

const cluster = testCluster();
const crd = fileURLToPath(new URL('../../../deploy/crds/zone-aware-pod-disruption-budgets.yaml', import.meta.url));

const describeSpans = (spans: ReceivedSpan[]) =>
  spans
    .map((s) => `${s.name} [${s.kind}] id=${s.id} parent=${s.parentId || '-'} ${JSON.stringify(s.attributes)}`)
    .join('\n');

describe('OpenTelemetry tracing to a real collector', () => {
  it('a rollout and a denied eviction arrive as spans with their parent/child links', async (t) => {
    const collector = await Collector.start();
    t.after(() => collector.stop());
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const selector = { matchLabels: { 'rollout-group': 'ingester' } };
    await createGroup(kube, namespace, { all: { replicas: 2, readyDelay: '3s' } });
    const applied = await kubectl(cluster, 'apply', '-f', crd);
    assert.ok(applied.ok, applied.out);
    const zpdb = {
      apiVersion: 'rollout-operator.grafana.com/v1',
      kind: 'ZoneAwarePodDisruptionBudget',
      metadata: { name: 'ingester', namespace },
      spec: { maxUnavailable: 1, selector },
    } as KubeObject;
    await waitFor('the ZPDB to be created', () => kube.create(zpdbResource, zpdb).catch(() => undefined), {
      timeoutMs: 30_000,
    });
    await waitGroupSettled(kube, namespace, 60_000);

    const [tlsPort] = await freePorts(1);
    const serviceName = `stateward-${namespace}`;
    // Only the standard variables a rollout-operator Deployment would carry;
    // a short batch delay so the test need not wait the default 5 s.
    const op = await OperatorProcess.start(
      cluster,
      namespace,
      ['-server-tls.enabled', `-server-tls.port=${tlsPort}`, '-server-tls.self-signed-cert.dns-name=localhost'],
      {
        env: {
          OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
          OTEL_SERVICE_NAME: serviceName,
          OTEL_BSP_SCHEDULE_DELAY: '200',
        },
      },
    );
    t.after(() => op.stop());
    await op.waitReady();
    await installLoopbackWebhook(t, kube, {
      name: `pod-eviction-${namespace}`,
      namespace,
      validating: true,
      webhooks: [evictionWebhook(namespace, tlsPort!)],
    });

    // A rollout: every zone's template changes, the operator deletes pods zone by zone.
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    await waitRolledOut(kube, namespace);

    // A denied eviction through the real API server: zone a is disrupted, so zone b waits.
    await waitFor('a-0 evicted', async () => (await evict(kube, namespace, 'ingester-zone-a-0')).code === 201, {
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    const refused = await evict(kube, namespace, 'ingester-zone-b-0');
    assert.equal(refused.code, 429, refused.message);
    // The same decision asked with a caller's trace context continues that trace.
    const traceId = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');
    // (As a tracing kube-apiserver would send it.)
    const answer = await reviewEviction(tlsPort!, namespace, 'ingester-zone-c-0', {
      traceparent: `00-${traceId}-${callerSpan}-01`,
    });
    assert.equal(answer.allowed, false, answer.message);

    const mine = (spans: ReceivedSpan[]) => spans.filter((s) => s.resource['service.name'] === serviceName);
    const spans = await waitFor(
      'the spans to reach the collector',
      async () => {
        const all = mine(await collector.spans());
        const denied = all.filter(
          (s) => s.name === 'HTTP POST - admission_pod_eviction' && s.attributes['admission.decision'] === 'denied',
        );
        return denied.length >= 2 && all.some((s) => s.name === 'HTTP DELETE') ? all : undefined;
      },
      {
        timeoutMs: 30_000,
        intervalMs: 500,
        fail: () =>
          op.logs.includes('OpenTelemetry tracing error') ? `export failed:\n${op.logs.slice(-2000)}` : undefined,
      },
    );
    const context = () => `spans received:\n${describeSpans(spans)}`;

    // Every pod the rollout deleted is a client span, child of the reconcile of its group.
    const byId = new Map(spans.map((s) => [s.id, s]));
    const deletes = spans.filter(
      (s) => s.name === 'HTTP DELETE' && /\/pods\/ingester-zone-[abc]-\d$/.test(s.attributes['url.full'] ?? ''),
    );
    assert.ok(deletes.length >= 6, `expected a DELETE span per rolled pod (6), got ${deletes.length}\n${context()}`);
    for (const span of deletes) {
      assert.equal(span.kind, 'Client', context());
      assert.equal(span.attributes['http.request.method'], 'DELETE');
      const parent = byId.get(span.parentId);
      assert.ok(parent, `DELETE ${span.attributes['url.full']} has no parent among the spans received\n${context()}`);
      assert.equal(parent.name, 'rollout.reconcile_group', context());
      assert.equal(parent.attributes['rollout.group'], 'ingester');
      assert.equal(parent.attributes['k8s.namespace.name'], namespace);
      assert.equal(parent.traceId, span.traceId);
    }

    // The denied evictions are server spans with the decision, the object and rollout-operator's tags.
    const denied = spans.filter(
      (s) => s.name === 'HTTP POST - admission_pod_eviction' && s.attributes['admission.decision'] === 'denied',
    );
    const fromApiServer = denied.find((s) => s.attributes['object.name'] === 'ingester-zone-b-0');
    assert.ok(fromApiServer, context());
    assert.equal(fromApiServer.kind, 'Server');
    assert.equal(
      fromApiServer.attributes['http.response.status_code'],
      '200',
      'a denial is an answered review, not a failed request',
    );
    assert.equal(fromApiServer.attributes['object.namespace'], namespace);
    assert.equal(fromApiServer.attributes['admission.code'], '429');
    const continued = denied.find((s) => s.attributes['object.name'] === 'ingester-zone-c-0');
    assert.ok(continued, context());
    assert.equal(continued.traceId, traceId, "the review continues the caller's trace");
    assert.equal(continued.parentId, callerSpan, "the caller's span is the parent");
  });
});
