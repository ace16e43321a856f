// The drop-in list: grafana/rollout-operator v0.38.1's flags and metrics
// (its cmd/rollout-operator flags, dskit's cluster-validation flags, and every
// metric it registers), which v0.39 keeps (its #463, #466 and #468 add no flag
// and no metric), against Stateward's. Every flag must exist with the same
// default, except the differences the migration guide gives; every metric
// must be in the README's metrics table with its type and every label, unless
// the guide's "What is missing" names it. The README table is itself read
// against a running operator in reference.int.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { statewardHelp, zeroDefault } from './flags.ts';
import { codeSpans, readRepoFile, section, sectionTable } from './readme.ts';

/** rollout-operator v0.38.1's flags with their defaults as Go's -help prints them ('' for none shown). */
const ROLLOUT_OPERATOR_FLAGS: Record<string, string> = {
  'log.format': 'logfmt',
  'log.level': 'debug',
  'server.port': '8001',
  'kubernetes.api-url': '',
  'kubernetes.config-file': '',
  'kubernetes.client-timeout': '5m0s',
  'kubernetes.client-qps': '5',
  'kubernetes.client-burst': '10',
  'pods.client-timeout': '5s',
  'kubernetes.cluster-domain': 'cluster.local.',
  'kubernetes.namespace': '',
  'reconcile.interval': '5s',
  'server.cluster-validation.http.enabled': 'false',
  'server.cluster-validation.http.soft-validation': 'false',
  'server.cluster-validation.http.excluded-paths': '',
  'server.cluster-validation.http.excluded-user-agents': '',
  'server-tls.enabled': 'false',
  'server-tls.port': '8443',
  'server-tls.cert-file': '',
  'server-tls.key-file': '',
  'server-tls.request-timeout': '10s',
  'server-tls.self-signed-cert.enabled': 'true',
  'server-tls.self-signed-cert.secret-name': 'rollout-operator-self-signed-certificate',
  'server-tls.self-signed-cert.dns-name': '',
  'server-tls.self-signed-cert.org': 'Grafana Labs',
  'server-tls.self-signed-cert.expiration': '1y',
  'webhooks.update-ca-bundle': 'true',
  'use-zone-tracker': 'false',
  'zone-tracker.config-map-name': 'rollout-operator-zone-tracker',
  'zpdb.pod-ready-annotation-patch-timeout': '5s',
};

/** Defaults Stateward changes on purpose (the migration guide's "What differs on purpose"), with Stateward's. */
const DIFFERENT_DEFAULTS: Record<string, string> = { 'log.level': 'info' };

interface Metric {
  type: 'counter' | 'gauge' | 'histogram';
  labels: string[];
}

/** Every metric rollout-operator v0.38.1 registers (its own and dskit's). */
const ROLLOUT_OPERATOR_METRICS: Record<string, Metric> = {
  rollout_operator_group_reconciles_total: { type: 'counter', labels: ['rollout_group'] },
  rollout_operator_group_reconciles_failed_total: { type: 'counter', labels: ['rollout_group'] },
  rollout_operator_group_reconcile_duration_seconds: { type: 'histogram', labels: ['rollout_group'] },
  rollout_operator_last_successful_group_reconcile_timestamp_seconds: { type: 'gauge', labels: ['rollout_group'] },
  rollout_operator_request_duration_seconds: { type: 'histogram', labels: ['method', 'route', 'status_code', 'ws'] },
  rollout_operator_request_message_bytes: { type: 'histogram', labels: ['method', 'route'] },
  rollout_operator_response_message_bytes: { type: 'histogram', labels: ['method', 'route'] },
  rollout_operator_inflight_requests: { type: 'gauge', labels: ['method', 'route'] },
  rollout_operator_client_invalid_cluster_validation_label_requests_total: {
    type: 'counter',
    labels: ['method', 'protocol', 'request_cluster'],
  },
  rollout_operator_server_invalid_cluster_validation_label_requests_total: {
    type: 'counter',
    labels: ['protocol', 'method', 'cluster_validation_label', 'request_cluster_validation_label'],
  },
  rollout_operator_kubernetes_api_client_request_duration_seconds: {
    type: 'histogram',
    labels: ['path', 'method', 'status_code'],
  },
  rollout_operator_kubernetes_api_client_rate_limited_requests_total: { type: 'counter', labels: ['api_group'] },
  rollout_operator_pod_http_client_request_duration_seconds: {
    type: 'histogram',
    labels: ['path', 'method', 'status_code'],
  },
  rollout_operator_zpdb_configurations_observed_total: { type: 'counter', labels: ['result'] },
  rollout_operator_zpdb_eviction_requests_total: { type: 'counter', labels: ['reason', 'status'] },
  rollout_operator_zpdb_inflight_eviction_requests: { type: 'gauge', labels: [] },
  kube_validating_webhook_failure_policy: { type: 'gauge', labels: ['type', 'webhook', 'policy'] },
};

/**
 * The tracing environment rollout-operator v0.38.1 reads (dskit's
 * NewOTelOrJaegerFromEnv, the Go SDK's autoexport and batch processor).
 */
const ROLLOUT_OPERATOR_TRACING_ENV = [
  'OTEL_TRACES_EXPORTER',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_SERVICE_NAME',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
  'OTEL_PROPAGATORS',
  'OTEL_BSP_SCHEDULE_DELAY',
  'OTEL_BSP_EXPORT_TIMEOUT',
  'OTEL_BSP_MAX_QUEUE_SIZE',
  'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
  'OTEL_SDK_DISABLED',
];

const readme = readRepoFile('README.md');
const guide = readRepoFile('docs/migrating-from-rollout-operator.md');

describe("rollout-operator v0.38.1's flags and metrics in Stateward", { timeout: 120_000 }, () => {
  it('defines every rollout-operator flag, with its default unless the guide says otherwise', () => {
    const help = statewardHelp();
    assert.equal(help.status, 0, help.text);
    const wrong: string[] = [];
    for (const [name, theirs] of Object.entries(ROLLOUT_OPERATOR_FLAGS)) {
      const flag = help.flags.get(name);
      if (!flag) {
        wrong.push(`-${name}: not defined`);
        continue;
      }
      // A default described in words (the namespace-derived DNS name) is the zero value's stand-in.
      const ours =
        flag.default !== undefined && /<namespace>/.test(flag.default) ? '' : (flag.default ?? zeroDefault(flag) ?? '');
      const expected = DIFFERENT_DEFAULTS[name] ?? theirs;
      if (ours !== expected)
        wrong.push(`-${name}: default ${JSON.stringify(ours)}, expected ${JSON.stringify(expected)}`);
    }
    assert.deepEqual(wrong, []);
    for (const name of Object.keys(DIFFERENT_DEFAULTS))
      assert.match(section(guide, 'What differs on purpose'), new RegExp(`\`-${name.replace('.', '\\.')}\` default`));
  });

  it("documents every rollout-operator metric in the README's metrics table, with its type and labels, or names it missing in the guide", () => {
    const table = sectionTable(readme, 'Metrics', ['metric', 'type', 'labels', 'meaning']);
    const missing = codeSpans(section(guide, 'What is missing'));
    const wrong: string[] = [];
    for (const [name, metric] of Object.entries(ROLLOUT_OPERATOR_METRICS)) {
      const row = table.rows.find((r) => codeSpans(r[0] ?? '').includes(name));
      if (!row) {
        if (!missing.includes(name))
          wrong.push(`${name}: neither in the README metrics table nor in the guide's "What is missing"`);
        continue;
      }
      const types = (row[1] ?? '').split(',').map((t) => t.trim().replace(/s$/, ''));
      if (!types.includes(metric.type)) wrong.push(`${name}: README type ${row[1]}, rollout-operator's ${metric.type}`);
      const labels = new Set(codeSpans(row[2] ?? ''));
      const absent = metric.labels.filter((l) => !labels.has(l));
      if (absent.length > 0) wrong.push(`${name}: README labels lack ${absent.join(', ')}`);
    }
    assert.deepEqual(wrong, []);
  });

  it("documents every tracing variable rollout-operator reads in the README, and the guide says what happened to Jaeger's", () => {
    const table = sectionTable(readme, 'Environment variables', ['variable', 'default', 'meaning']);
    const documented = new Set(table.rows.flatMap((r) => codeSpans(r[0] ?? '')));
    assert.deepEqual(
      ROLLOUT_OPERATOR_TRACING_ENV.filter((name) => !documented.has(name)),
      [],
    );
    assert.match(section(guide, 'What differs on purpose'), /`JAEGER_\*` is not supported/);
    assert.match(section(guide, 'What stays the same'), /\*\*Tracing\*\*/);
  });

  it('lists every rollout-operator metric in the guide\'s "What stays the same" or "What is missing"', () => {
    const same = codeSpans(section(guide, 'What stays the same'));
    const missing = codeSpans(section(guide, 'What is missing'));
    const unlisted = Object.keys(ROLLOUT_OPERATOR_METRICS).filter(
      (name) => !same.includes(name) && !missing.includes(name),
    );
    assert.deepEqual(unlisted, []);
  });
});
