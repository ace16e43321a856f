// RolloutHealthCheck parsing: rollout-operator's fields and defaults (PR
// #469), both spellings of the policies, Stateward's endpoint fields, and
// every validation error, each reported under its field path.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parse } from 'yaml';
import {
  DEFAULTS,
  parseHealthCheck,
  type CheckSpec,
  type HealthCheckConfig,
  type RolloutHealthCheck,
} from '../../../src/rollout/healthcheck/resource.ts';

const QUERY = 'sum(rate(errors_total{${targetMatchers}}[${range}]))';
const SUCCESS = '${current} <= bool ${baseline} * 1.1';

function manifest(spec: Record<string, unknown>, checks: Record<string, unknown>[] = [{}]): RolloutHealthCheck {
  return {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'RolloutHealthCheck',
    metadata: { name: 'ingester-health', namespace: 'mimir', generation: 2 },
    spec: {
      selector: { matchLabels: { 'rollout-group': 'ingester' } },
      prometheusURL: 'http://prometheus.monitoring.svc:9090',
      checks: checks.map((c, i) => ({ name: `check-${i}`, query: QUERY, successQuery: SUCCESS, ...c })),
      ...spec,
    },
  };
}

function config(spec: Record<string, unknown> = {}, checks?: Record<string, unknown>[]): HealthCheckConfig {
  const r = parseHealthCheck(manifest(spec, checks));
  assert.ok('config' in r, `expected a config, got ${JSON.stringify(r)}`);
  return r.config;
}

function check(fields: Record<string, unknown>): CheckSpec {
  return config({}, [fields]).checks[0]!;
}

/** The errors of a manifest, which must not parse. */
function errors(spec: Record<string, unknown>, checks?: Record<string, unknown>[]): string[] {
  const r = parseHealthCheck(manifest(spec, checks));
  assert.ok('errors' in r, `expected errors, got ${JSON.stringify(r)}`);
  assert.ok(r.errors.length > 0);
  return r.errors;
}

/** Asserts that exactly one error names `path` and contains `text`. */
function assertError(errs: string[], path: string, text: string): void {
  const matching = errs.filter((e) => e.startsWith(`${path}: `) && e.includes(text));
  assert.equal(matching.length, 1, `one error at ${path} saying ${JSON.stringify(text)} in ${JSON.stringify(errs)}`);
}

const ref = (name: string, key: string) => ({ name, key });

describe('RolloutHealthCheck defaults', () => {
  it("fills in rollout-operator's defaults and Stateward's own", () => {
    const c = config();
    assert.equal(c.name, 'ingester-health');
    assert.equal(c.namespace, 'mimir');
    assert.equal(c.generation, 2);
    assert.deepEqual(c.matchLabels, { 'rollout-group': 'ingester' });
    assert.equal(c.access.url.href, 'http://prometheus.monitoring.svc:9090/');
    assert.deepEqual(c.access.headers, []);
    assert.equal(c.access.bearerToken, undefined);
    assert.equal(c.access.basicAuth, undefined);
    assert.equal(c.access.ca, undefined);
    assert.equal(c.bakeTimeMs, 0);
    assert.equal(c.evaluationIntervalMs, 30_000);
    assert.deepEqual(c.checks, [
      {
        name: 'check-0',
        query: QUERY,
        successQuery: SUCCESS,
        currentRangeMs: 5 * 60_000,
        baselineRangeMs: 10 * 60_000,
        queryTimeoutMs: 10_000,
        queryRetries: 3,
        onFailure: 'Pause',
        onNoData: 'Pause',
        onError: 'Pause',
        successThreshold: 1,
        failureThreshold: 1,
        disabled: false,
      } satisfies CheckSpec,
    ]);
    assert.deepEqual(DEFAULTS, {
      currentRangeMs: 300_000,
      baselineRangeMs: 600_000,
      queryTimeoutMs: 10_000,
      queryRetries: 3,
      bakeTimeMs: 0,
      evaluationIntervalMs: 30_000,
    });
  });

  it('a null field is an absent one', () => {
    const c = check({ currentRange: null, queryRetries: null, onFailure: null, disabled: null });
    assert.equal(c.currentRangeMs, 300_000);
    assert.equal(c.queryRetries, 3);
    assert.equal(c.onFailure, 'Pause');
    assert.equal(c.disabled, false);
  });

  it('reads every field that is set', () => {
    const c = check({
      currentRange: '90s',
      baselineRange: '1h30m',
      queryTimeout: '2s500ms',
      queryRetries: 0,
      onFailure: 'Warn',
      onNoData: 'Disabled',
      onError: 'Pause',
      successThreshold: 3,
      failureThreshold: 2,
      disabled: true,
    });
    assert.equal(c.currentRangeMs, 90_000);
    assert.equal(c.baselineRangeMs, 5_400_000);
    assert.equal(c.queryTimeoutMs, 2_500);
    assert.equal(c.queryRetries, 0);
    assert.deepEqual([c.onFailure, c.onNoData, c.onError], ['Warn', 'Disabled', 'Pause']);
    assert.deepEqual([c.successThreshold, c.failureThreshold, c.disabled], [3, 2, true]);
    const top = config({ bakeTime: '2m', evaluationInterval: '10s' });
    assert.deepEqual([top.bakeTimeMs, top.evaluationIntervalMs], [120_000, 10_000]);
    assert.equal(config({ bakeTime: '0' }).bakeTimeMs, 0, 'a bake time of 0 is allowed');
  });

  it("onError defaults to onFailure's policy", () => {
    for (const policy of ['Pause', 'Warn', 'Disabled'])
      assert.equal(check({ onFailure: policy }).onError, policy, `onFailure ${policy}`);
    assert.equal(check({ failurePolicy: 'Warn' }).onError, 'Warn', 'the alias too');
    assert.equal(check({ onFailure: 'Warn', onError: 'Pause' }).onError, 'Pause', 'unless set');
  });

  it('accepts the PR description spellings failurePolicy, noDataPolicy and errorPolicy', () => {
    const c = check({ failurePolicy: 'Warn', noDataPolicy: 'Disabled', errorPolicy: 'Pause' });
    assert.deepEqual([c.onFailure, c.onNoData, c.onError], ['Warn', 'Disabled', 'Pause']);
    assertError(errors({}, [{ noDataPolicy: 'Ignore' }]), 'spec.checks[0].noDataPolicy', 'must be one of');
    assertError(errors({}, [{ errorPolicy: 'pause' }]), 'spec.checks[0].errorPolicy', 'must be one of');
    // Both spellings of one setting is a mistake to name, not a silent choice.
    assertError(
      errors({}, [{ onFailure: 'Disabled', failurePolicy: 'Warn' }]),
      'spec.checks[0].failurePolicy',
      'set only one of onFailure and failurePolicy',
    );
  });

  it('reads the endpoint fields: headers, bearer token, basic auth, CA', () => {
    const c = config({
      prometheusURL: 'https://mimir.example.com/prometheus',
      headers: [
        { name: 'X-Scope-OrgID', value: 'tenant-1' },
        { name: 'X-Token', valueFrom: { secretKeyRef: ref('prom', 'token') } },
      ],
      bearerTokenSecret: ref('prom', 'bearer'),
      tlsConfig: { ca: { configMap: ref('ca', 'ca.crt') } },
    });
    assert.equal(c.access.url.href, 'https://mimir.example.com/prometheus');
    assert.deepEqual(c.access.headers, [
      { name: 'X-Scope-OrgID', value: 'tenant-1' },
      { name: 'X-Token', secret: ref('prom', 'token') },
    ]);
    assert.deepEqual(c.access.bearerToken, ref('prom', 'bearer'));
    assert.deepEqual(c.access.ca, { configMap: ref('ca', 'ca.crt') });
    const basic = config({
      basicAuth: { username: ref('prom', 'user'), password: ref('prom', 'password') },
      tlsConfig: { ca: { secret: ref('ca', 'ca.crt') } },
    });
    assert.deepEqual(basic.access.basicAuth, { username: ref('prom', 'user'), password: ref('prom', 'password') });
    assert.deepEqual(basic.access.ca, { secret: ref('ca', 'ca.crt') });
  });
});

describe('RolloutHealthCheck validation', () => {
  it('requires the spec, the selector, the URL and at least one check', () => {
    assert.deepEqual(parseHealthCheck({ metadata: { name: 'x' } }), { errors: ['spec: Required value'] });
    assertError(errors({ selector: undefined }), 'spec.selector.matchLabels', 'Required value');
    assertError(errors({ selector: { matchLabels: {} } }), 'spec.selector.matchLabels', 'Required value');
    assertError(errors({ selector: { matchLabels: { a: 1 } } }), 'spec.selector.matchLabels.a', 'must be a string');
    assertError(errors({ prometheusURL: undefined }), 'spec.prometheusURL', 'Required value');
    assertError(errors({ prometheusURL: '  ' }), 'spec.prometheusURL', 'must not be empty');
    assertError(errors({ checks: [] }), 'spec.checks', 'at least one check');
    assertError(errors({ checks: 'errors' }), 'spec.checks', 'at least one check');
    assertError(errors({ checks: ['errors'] }), 'spec.checks[0]', 'must be an object');
  });

  it('requires the placeholders: ${targetMatchers} and ${range} in query, ${current} in successQuery', () => {
    const both = errors({}, [{ query: 'sum(rate(errors_total[5m]))' }]);
    assertError(both, 'spec.checks[0].query', 'must contain ${targetMatchers} and ${range}');
    assertError(errors({}, [{ query: 'sum(errors_total{${targetMatchers}})' }]), 'spec.checks[0].query', '${range}');
    const noMatchers = errors({}, [{ query: 'sum(rate(errors_total[${range}]))' }]);
    assertError(noMatchers, 'spec.checks[0].query', 'must contain ${targetMatchers}');
    assert.ok(!noMatchers[0]!.includes('${range}'), 'names only what is missing');
    assertError(errors({}, [{ successQuery: '${baseline} > bool 1' }]), 'spec.checks[0].successQuery', '${current}');
    assertError(errors({}, [{ query: undefined }]), 'spec.checks[0].query', 'Required value');
    assertError(errors({}, [{ successQuery: '' }]), 'spec.checks[0].successQuery', 'must not be empty');
    assertError(errors({}, [{ query: 42 }]), 'spec.checks[0].query', 'must be a string');
    const long = `${QUERY} + ${'1 + '.repeat(5000)}1`;
    assertError(errors({}, [{ query: long }]), 'spec.checks[0].query', 'longer than 16384 characters');
  });

  it('rejects bad durations, each under its field', () => {
    for (const field of ['currentRange', 'baselineRange', 'queryTimeout']) {
      assertError(errors({}, [{ [field]: '5 minutes' }]), `spec.checks[0].${field}`, 'invalid duration "5 minutes"');
      assertError(errors({}, [{ [field]: '1m1h' }]), `spec.checks[0].${field}`, 'invalid duration');
      assertError(errors({}, [{ [field]: '0' }]), `spec.checks[0].${field}`, 'must be at least 1ms');
      assertError(errors({}, [{ [field]: 300 }]), `spec.checks[0].${field}`, 'must be a string');
    }
    assertError(errors({ bakeTime: '-1m' }), 'spec.bakeTime', 'invalid duration');
    assertError(errors({ evaluationInterval: '500ms' }), 'spec.evaluationInterval', 'must be at least 1s');
    assertError(errors({ evaluationInterval: '1x' }), 'spec.evaluationInterval', 'invalid duration');
  });

  it('rejects bad policies, thresholds, retries, names and disabled', () => {
    for (const field of ['onFailure', 'onNoData', 'onError', 'failurePolicy', 'noDataPolicy', 'errorPolicy']) {
      for (const bad of ['pause', 'Ignore', '', 1])
        assertError(errors({}, [{ [field]: bad }]), `spec.checks[0].${field}`, 'must be one of Pause, Warn, Disabled');
    }
    for (const bad of [-1, 11, 1.5, '3'])
      assertError(errors({}, [{ queryRetries: bad }]), 'spec.checks[0].queryRetries', 'from 0 to 10');
    for (const field of ['successThreshold', 'failureThreshold'])
      for (const bad of [0, 101, 2.5, '2'])
        assertError(errors({}, [{ [field]: bad }]), `spec.checks[0].${field}`, 'from 1 to 100');
    for (const bad of ['Errors', 'error rate', '-errors', 'errors-', 'e'.repeat(64)])
      assertError(errors({}, [{ name: bad }]), 'spec.checks[0].name', 'lower-case letters');
    assertError(errors({}, [{ name: undefined }]), 'spec.checks[0].name', 'Required value');
    assertError(errors({}, [{ disabled: 'yes' }]), 'spec.checks[0].disabled', 'must be a boolean');
    assert.equal(check({ name: 'error_rate.v2' }).name, 'error_rate.v2');
    assert.equal(check({ name: 'e'.repeat(63) }).name, 'e'.repeat(63));
  });

  it('rejects two checks of one name', () => {
    const errs = errors({}, [{ name: 'errors' }, { name: 'latency' }, { name: 'errors' }]);
    assert.deepEqual(errs, ['spec.checks: duplicate check name "errors"']);
  });

  it('reports every problem at once, with the index of the check', () => {
    const errs = errors({ prometheusURL: 'ftp://prom' }, [{}, { onNoData: 'Never', query: 'up' }]);
    assertError(errs, 'spec.prometheusURL', 'scheme must be http or https, not ftp');
    assertError(errs, 'spec.checks[1].onNoData', 'must be one of');
    assertError(errs, 'spec.checks[1].query', 'must contain');
    assert.equal(errs.length, 3, JSON.stringify(errs));
  });
});

describe('RolloutHealthCheck endpoint validation', () => {
  it('takes only http and https URLs, without credentials, query or fragment', () => {
    for (const url of ['ftp://prom:9090', 'file:///etc/passwd', 'unix:/run/prom.sock', 'javascript:alert(1)'])
      assertError(errors({ prometheusURL: url }), 'spec.prometheusURL', 'scheme must be http or https');
    assertError(errors({ prometheusURL: 'prometheus:9090' }), 'spec.prometheusURL', 'scheme must be http or https');
    assertError(errors({ prometheusURL: 'not a url' }), 'spec.prometheusURL', 'not a URL');
    assertError(errors({ prometheusURL: '/api/v1' }), 'spec.prometheusURL', 'not a URL');
    for (const url of ['http://admin:s3cret@prom:9090', 'https://admin@prom', 'http://:s3cret@prom']) {
      const errs = errors({ prometheusURL: url });
      assertError(errs, 'spec.prometheusURL', 'must not hold credentials: use basicAuth');
      assert.ok(!errs.join().includes('s3cret'), 'the password is not repeated in the error');
    }
    assertError(errors({ prometheusURL: 'http://prom/?tenant=a' }), 'spec.prometheusURL', 'query or fragment');
    assertError(errors({ prometheusURL: 'http://prom/#x' }), 'spec.prometheusURL', 'query or fragment');
    assert.equal(config({ prometheusURL: 'HTTPS://Prom:443/mimir/' }).access.url.href, 'https://prom/mimir/');
  });

  it('rejects headers with reserved or malformed names, CR/LF/NUL in values, or not exactly one of value and valueFrom', () => {
    const header = (h: Record<string, unknown>) => errors({ headers: [{ name: 'X-Scope-OrgID', ...h }] });
    for (const name of ['Host', 'content-length', 'Content-Type', 'Transfer-Encoding', 'CONNECTION'])
      assertError(header({ name, value: 'v' }), 'spec.headers[0].name', 'cannot be set');
    for (const name of ['X Scope', 'X-Scope:', 'X-Scope\r\nHost', '', 'Ümlaut'])
      assert.ok(
        header({ name, value: 'v' }).some((e) => e.startsWith('spec.headers[0].name: ')),
        `name ${JSON.stringify(name)}`,
      );
    for (const value of ['a\r\nHost: evil', 'a\nb', 'a\rb', 'a\0b'])
      assertError(header({ value }), 'spec.headers[0].value', 'must not contain control characters');
    const secret = { secretKeyRef: ref('tenant', 'id') };
    assertError(header({ value: 'a', valueFrom: secret }), 'spec.headers[0].value', 'set exactly one of value');
    assertError(header({}), 'spec.headers[0].value', 'set exactly one of value');
    const badRef = header({ valueFrom: { secretKeyRef: { name: 'tenant' } } });
    assertError(badRef, 'spec.headers[0].valueFrom.secretKeyRef', 'must be {name, key}');
    assertError(header({ value: 7 }), 'spec.headers[0].value', 'must be a string');
    assertError(header({ valueFrom: 'tenant' }), 'spec.headers[0].valueFrom', 'must be an object');
    assertError(errors({ headers: { 'X-Scope-OrgID': 'a' } }), 'spec.headers', 'must be a list');
    assertError(errors({ headers: ['X-Scope-OrgID: a'] }), 'spec.headers[0]', 'must be an object');
    const second = errors({
      headers: [
        { name: 'A', value: 'a' },
        { name: 'Host', value: 'h' },
      ],
    });
    assertError(second, 'spec.headers[1].name', 'cannot be set');
  });

  it('takes a CA from exactly one of a Secret and a ConfigMap', () => {
    const both = { secret: ref('ca', 'ca.crt'), configMap: ref('ca', 'ca.crt') };
    assertError(
      errors({ tlsConfig: { ca: both } }),
      'spec.tlsConfig.ca.secret',
      'set exactly one of secret and configMap',
    );
    assertError(
      errors({ tlsConfig: { ca: {} } }),
      'spec.tlsConfig.ca.secret',
      'set exactly one of secret and configMap',
    );
    assertError(
      errors({ tlsConfig: { ca: { secret: { name: 'ca' } } } }),
      'spec.tlsConfig.ca.secret',
      'must be {name, key}',
    );
    assertError(errors({ tlsConfig: 'insecure' }), 'spec.tlsConfig', 'must be an object');
    assert.equal(config({ tlsConfig: {} }).access.ca, undefined, 'a tlsConfig without ca is no CA');
  });

  it('takes at most one of a bearer token and basic auth, and basic auth whole', () => {
    const both = errors({
      bearerTokenSecret: ref('prom', 'token'),
      basicAuth: { username: ref('prom', 'user'), password: ref('prom', 'password') },
    });
    assert.deepEqual(both, ['spec.bearerTokenSecret: set at most one of bearerTokenSecret and basicAuth']);
    assertError(
      errors({ basicAuth: { username: ref('prom', 'user') } }),
      'spec.basicAuth.username',
      'needs username and password',
    );
    assertError(errors({ basicAuth: {} }), 'spec.basicAuth.username', 'needs username and password');
    assertError(
      errors({ basicAuth: { username: 'admin', password: ref('p', 'k') } }),
      'spec.basicAuth.username',
      '{name, key}',
    );
    assertError(errors({ bearerTokenSecret: 'token' }), 'spec.bearerTokenSecret', 'must be {name, key}');
    assertError(errors({ bearerTokenSecret: { name: '', key: 'k' } }), 'spec.bearerTokenSecret', 'must be {name, key}');
  });
});

// As PR #469's schema has a user write it: rollout-operator's fields only,
// the policies in both spellings the design uses.
const ROLLOUT_OPERATOR_MANIFEST = `
apiVersion: rollout-operator.grafana.com/v1
kind: RolloutHealthCheck
metadata:
  name: ingester-rollout-health
  namespace: mimir
spec:
  selector:
    matchLabels:
      rollout-group: ingester
  prometheusURL: http://prometheus.monitoring.svc.cluster.local:9090
  checks:
    - name: error-rate
      query: |
        sum(rate(cortex_request_duration_seconds_count{\${targetMatchers}, status_code=~"5.."}[\${range}]))
        /
        sum(rate(cortex_request_duration_seconds_count{\${targetMatchers}}[\${range}]))
      successQuery: \${current} <= bool (\${baseline} * 1.5 + 0.01)
      currentRange: 5m
      baselineRange: 30m
      onFailure: Pause
      onNoData: Warn
    - name: ingestion-rate
      query: sum(rate(cortex_ingester_ingested_samples_total{\${targetMatchers}}[\${range}]))
      successQuery: \${current} >= bool (\${baseline} * 0.8)
      queryTimeout: 30s
      queryRetries: 1
      failurePolicy: Warn
      noDataPolicy: Pause
    - name: latency
      query: histogram_quantile(0.99, sum by (le) (rate(cortex_request_duration_seconds_bucket{\${targetMatchers}}[\${range}])))
      successQuery: \${current} < bool 2 * \${baseline}
      disabled: true
`;

describe("rollout-operator's own manifest", () => {
  it('parses unchanged, with the defaults for what it leaves out', () => {
    const r = parseHealthCheck(parse(ROLLOUT_OPERATOR_MANIFEST) as RolloutHealthCheck);
    assert.ok('config' in r, JSON.stringify(r));
    const c = r.config;
    assert.deepEqual([c.name, c.namespace], ['ingester-rollout-health', 'mimir']);
    assert.deepEqual(c.matchLabels, { 'rollout-group': 'ingester' });
    assert.equal(c.access.url.host, 'prometheus.monitoring.svc.cluster.local:9090');
    assert.deepEqual(
      c.checks.map((k) => [k.name, k.onFailure, k.onNoData, k.onError, k.disabled]),
      [
        ['error-rate', 'Pause', 'Warn', 'Pause', false],
        ['ingestion-rate', 'Warn', 'Pause', 'Warn', false],
        ['latency', 'Pause', 'Pause', 'Pause', true],
      ],
    );
    const [errorRate, ingestion] = c.checks;
    assert.deepEqual([errorRate!.currentRangeMs, errorRate!.baselineRangeMs], [300_000, 1_800_000]);
    assert.deepEqual([ingestion!.queryTimeoutMs, ingestion!.queryRetries], [30_000, 1]);
    assert.deepEqual([ingestion!.currentRangeMs, ingestion!.baselineRangeMs], [300_000, 600_000]);
    assert.ok(errorRate!.query.includes('${targetMatchers}') && errorRate!.successQuery.includes('${baseline}'));
    assert.deepEqual([c.bakeTimeMs, c.evaluationIntervalMs, c.access.headers], [0, 30_000, []]);
  });
});

describe('RolloutHealthCheck parsing (property)', () => {
  const exactlyOne = (r: ReturnType<typeof parseHealthCheck>) => {
    assert.ok('config' in r !== 'errors' in r, `config xor errors: ${Object.keys(r).join(',')}`);
    if ('errors' in r) {
      assert.ok(r.errors.length > 0, 'a rejection says why');
      for (const e of r.errors) assert.match(e, /^spec(\.|\[|:)/, 'every error names its field');
    } else {
      assert.ok(r.config.checks.length > 0);
      assert.ok(r.config.access.url.protocol === 'http:' || r.config.access.url.protocol === 'https:');
    }
  };

  it('never throws on any JSON spec, and returns a config or its errors', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (spec) => exactlyOne(parseHealthCheck({ spec } as RolloutHealthCheck))),
      { numRuns: 2000 },
    );
  });

  it('never throws on anything in a spec, metadata included', () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (spec, metadata) =>
        exactlyOne(parseHealthCheck({ spec, metadata } as RolloutHealthCheck)),
      ),
      { numRuns: 2000 },
    );
  });

  // Arbitrary JSON rarely looks like a manifest: here every field is either
  // a good value or a plausible mistake, so both outcomes are common.
  it('never throws on manifests whose fields are each good or wrong, and accepts them exactly when all are good', () => {
    const field = (good: unknown, ...bad: unknown[]) =>
      fc.oneof(
        { arbitrary: fc.constant({ good: true, value: good }), weight: 6 },
        { arbitrary: fc.constantFrom(...bad).map((value) => ({ good: false, value })), weight: 1 },
      );
    const checkArb = fc.record({
      query: field(QUERY, 'up', 42, '', null),
      successQuery: field(SUCCESS, '${baseline} > bool 1', []),
      currentRange: field('5m', '5', 'five', '0', {}),
      onNoData: field('Warn', 'warn', 'Never', true),
      failureThreshold: field(2, 0, 101, '2', 1.5),
    });
    const arb = fc.record({
      url: field('https://prom:9090/api', 'ftp://prom', 'http://u:p@prom', 'prom', 'http://prom?x=1'),
      headers: field([{ name: 'X-Scope-OrgID', value: 't' }], [{ name: 'Host', value: 'h' }], [{ name: 'X' }], {}),
      bake: field('1m', '-1m', 'soon'),
      checks: fc.array(checkArb, { minLength: 1, maxLength: 3 }),
    });
    let accepted = 0;
    fc.assert(
      fc.property(arb, ({ url, headers, bake, checks }) => {
        const spec = {
          selector: { matchLabels: { 'rollout-group': 'ingester' } },
          prometheusURL: url.value,
          headers: headers.value,
          bakeTime: bake.value,
          checks: checks.map((c, i) => ({
            name: `check-${i}`,
            ...Object.fromEntries(Object.entries(c).map(([k, f]) => [k, f.value])),
          })),
        };
        const r = parseHealthCheck({ spec });
        exactlyOne(r);
        const good = [url, headers, bake, ...checks.flatMap((c) => Object.values(c))].every((f) => f.good);
        assert.equal('config' in r, good, JSON.stringify(spec));
        if ('config' in r) accepted++;
      }),
      { numRuns: 1000 },
    );
    assert.ok(accepted > 50, `accepted ${accepted} of 1000`);
  });
});

// Found writing these tests, and fixed: values the parser accepted but that
// could never work once sent.
describe('RolloutHealthCheck values that cannot work are rejected', () => {
  // Node's http refuses a header value with a control character other than
  // tab, or a character above U+00FF (ERR_INVALID_CHAR), so every query of
  // such a check is an error; the webhook should say so instead.
  it('rejects header values Node cannot send', () => {
    for (const value of ['tenant\u0001', 'tenant\u007f', 'tenant\u001b[0m', 'tenant-€'])
      assertError(errors({ headers: [{ name: 'X-Scope-OrgID', value }] }), 'spec.headers[0].value', 'must not');
  });

  // A timer longer than 2^31-1 ms fires after 1 ms (TimeoutOverflowWarning):
  // a queryTimeout of 25d aborts every query at once (AbortSignal.timeout),
  // and an evaluationInterval of 25d requeues the group every millisecond.
  it('bounds queryTimeout and evaluationInterval below the 24.8-day timer limit', () => {
    assert.ok(errors({}, [{ queryTimeout: '25d' }]).some((e) => e.startsWith('spec.checks[0].queryTimeout: ')));
    assert.ok(errors({ evaluationInterval: '25d' }).some((e) => e.startsWith('spec.evaluationInterval: ')));
  });
});
