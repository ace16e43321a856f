// What the OTEL_* environment turns on, held to rollout-operator's (dskit's
// NewOTelOrJaegerFromEnv and the Go SDK's autoexport) reading of it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  batchFromEnv,
  DEFAULT_SERVICE_NAME,
  otlpEndpoint,
  propagatorsFromEnv,
  resourceAttributesFromEnv,
  samplerFromEnv,
  serviceName,
  tracingFromEnv,
} from '../../../src/runtime/tracing/env.ts';

const SWITCHES = ['OTEL_TRACES_EXPORTER', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'];

describe('tracingFromEnv', () => {
  it('is off with nothing set, and with only variables that do not switch it on', () => {
    assert.deepEqual(tracingFromEnv({}), { kind: 'off', warnings: [] });
    const others = fc.dictionary(
      fc.constantFrom(
        'OTEL_SERVICE_NAME',
        'OTEL_TRACES_SAMPLER',
        'OTEL_TRACES_SAMPLER_ARG',
        'OTEL_RESOURCE_ATTRIBUTES',
        'OTEL_PROPAGATORS',
        'OTEL_EXPORTER_OTLP_PROTOCOL',
        'JAEGER_SERVICE_NAME',
        'PATH',
      ),
      fc.string(),
    );
    fc.assert(fc.property(others, (env) => tracingFromEnv(env).kind === 'off'));
  });

  it("is on as soon as one of dskit's three variables is non-empty, and says which", () => {
    fc.assert(
      fc.property(fc.subarray(SWITCHES, { minLength: 1 }), (names) => {
        const env = Object.fromEntries(
          names.map((name) => [name, name === 'OTEL_TRACES_EXPORTER' ? 'otlp' : 'http://collector:4318']),
        );
        const decision = tracingFromEnv(env);
        const name = SWITCHES.find((n) => names.includes(n));
        assert.equal(decision.kind, 'on');
        assert.equal(decision.kind === 'on' && decision.config.detectedBy, name);
      }),
    );
    assert.equal(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }).kind, 'off');
  });

  it('defaults to OTLP over HTTP with protobuf on localhost:4318, parent-based always-on sampling, W3C propagation', () => {
    const decision = tracingFromEnv({ OTEL_TRACES_EXPORTER: 'otlp' });
    assert.equal(decision.kind, 'on');
    if (decision.kind !== 'on') return;
    assert.deepEqual(decision.config.exporter, {
      kind: 'otlp',
      protocol: 'http/protobuf',
      endpoint: 'http://localhost:4318/v1/traces',
    });
    assert.deepEqual(decision.config.sampler, { root: 'always_on', ratio: 1, parentBased: true });
    assert.deepEqual(decision.config.propagators, ['tracecontext', 'baggage']);
    assert.equal(decision.config.serviceName, DEFAULT_SERVICE_NAME);
    assert.deepEqual(decision.config.batch, {
      scheduledDelayMillis: 5000,
      exportTimeoutMillis: 30000,
      maxQueueSize: 2048,
      maxExportBatchSize: 512,
    });
  });

  it('takes the protocol from the traces variable first, and refuses one the Go SDK does not know, as rollout-operator', () => {
    const on = tracingFromEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc',
    });
    assert.deepEqual(on.kind === 'on' && on.config.exporter, {
      kind: 'otlp',
      protocol: 'grpc',
      endpoint: 'http://c:4317/',
    });
    assert.equal(
      tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' }).kind,
      'error',
    );
    assert.equal(tracingFromEnv({ OTEL_TRACES_EXPORTER: 'zipkin' }).kind, 'error');
  });

  it('treats OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true as off', () => {
    assert.equal(tracingFromEnv({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' }).kind, 'off');
    assert.equal(tracingFromEnv({ OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' }).kind, 'off');
  });

  it("warns about the Jaeger variables dskit would have used, and uses OpenTelemetry's when both are set", () => {
    const jaegerOnly = tracingFromEnv({ JAEGER_AGENT_HOST: 'agent' });
    assert.equal(jaegerOnly.kind, 'off');
    assert.match(jaegerOnly.kind === 'off' ? jaegerOnly.warnings.join() : '', /JAEGER_AGENT_HOST.*tracing is off/);
    const both = tracingFromEnv({ JAEGER_ENDPOINT: 'http://j', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' });
    assert.equal(both.kind, 'on');
    assert.match(both.kind === 'on' ? both.warnings.join() : '', /JAEGER_ENDPOINT/);
  });
});

describe('serviceName', () => {
  it('is OTEL_SERVICE_NAME, else JAEGER_SERVICE_NAME, else rollout-operator', () => {
    const name = fc.option(fc.string(), { nil: undefined });
    fc.assert(
      fc.property(name, name, (otel, jaeger) => {
        const expected = otel ? otel : jaeger ? jaeger : 'rollout-operator';
        assert.equal(serviceName({ OTEL_SERVICE_NAME: otel, JAEGER_SERVICE_NAME: jaeger }), expected);
      }),
    );
  });
});

describe('otlpEndpoint', () => {
  it('uses the traces endpoint as it is, and adds v1/traces to the general one over HTTP only', () => {
    assert.equal(
      otlpEndpoint(
        { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c:443/custom/path', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x' },
        'http/protobuf',
      ),
      'https://c/custom/path',
    );
    assert.equal(
      otlpEndpoint({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318' }, 'http/protobuf'),
      'http://c:4318/',
    );
    assert.equal(
      otlpEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' }, 'http/json'),
      'http://c:4318/v1/traces',
    );
    assert.equal(
      otlpEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/prefix' }, 'http/protobuf'),
      'http://c:4318/prefix/v1/traces',
    );
    assert.equal(otlpEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317' }, 'grpc'), 'http://c:4317/');
    assert.equal(otlpEndpoint({}, 'grpc'), 'http://localhost:4317');
  });

  it('ignores a value that is not a URL, with a warning', () => {
    const warnings: string[] = [];
    assert.equal(
      otlpEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' }, 'http/protobuf', warnings),
      'http://localhost:4318/v1/traces',
    );
    assert.equal(warnings.length, 1);
  });

  it("over HTTP always ends in the general endpoint's path plus /v1/traces", () => {
    const segment = fc.stringMatching(/^[a-z0-9]{1,8}$/);
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 3 }), fc.boolean(), (segments, slash) => {
        const base = `http://collector:4318/${segments.join('/')}${slash && segments.length > 0 ? '/' : ''}`;
        const url = new URL(otlpEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: base }, 'http/protobuf'));
        assert.equal(url.pathname, `/${[...segments, 'v1', 'traces'].join('/')}`);
      }),
    );
  });
});

describe('samplerFromEnv', () => {
  it('reads every specification sampler, in any case and with spaces', () => {
    assert.deepEqual(samplerFromEnv({ OTEL_TRACES_SAMPLER: ' Always_On ' }), {
      root: 'always_on',
      ratio: 1,
      parentBased: false,
    });
    assert.deepEqual(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'always_off' }), {
      root: 'always_off',
      ratio: 0,
      parentBased: false,
    });
    assert.deepEqual(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }), {
      root: 'always_off',
      ratio: 0,
      parentBased: true,
    });
    assert.deepEqual(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }), {
      root: 'traceidratio',
      ratio: 0.25,
      parentBased: false,
    });
    assert.deepEqual(
      samplerFromEnv({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' }),
      { root: 'traceidratio', ratio: 0.5, parentBased: true },
    );
    assert.deepEqual(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'something' }), {
      root: 'always_on',
      ratio: 1,
      parentBased: true,
    });
  });

  it('keeps a ratio only when it is a number in [0, 1], else 1 (dskit)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.double({ noNaN: true }).map(String), fc.string()), (arg) => {
        const { ratio } = samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: arg });
        const trimmed = arg.trim();
        const parsed = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(trimmed) ? Number(trimmed) : Number.NaN;
        assert.equal(ratio, parsed >= 0 && parsed <= 1 ? parsed : 1);
      }),
    );
  });

  it("stands in for Jaeger's remote sampler with its initial sampling rate, with a warning", () => {
    const warnings: string[] = [];
    assert.deepEqual(
      samplerFromEnv(
        {
          OTEL_TRACES_SAMPLER: 'parentbased_jaeger_remote',
          OTEL_TRACES_SAMPLER_ARG: 'endpoint=http://j:5778,pollingIntervalMs=5000,initialSamplingRate=0.25',
        },
        warnings,
      ),
      { root: 'traceidratio', ratio: 0.25, parentBased: true },
    );
    assert.deepEqual(
      samplerFromEnv(
        { OTEL_TRACES_SAMPLER: 'jaeger_remote', OTEL_TRACES_SAMPLER_ARG: 'endpoint=http://j:5778' },
        warnings,
      ),
      { root: 'traceidratio', ratio: 0.001, parentBased: false },
    );
    assert.equal(warnings.length, 2);
  });
});

describe('propagatorsFromEnv', () => {
  it('defaults to W3C trace context and baggage; none is none; unknown names are skipped', () => {
    assert.deepEqual(propagatorsFromEnv({}), ['tracecontext', 'baggage']);
    assert.deepEqual(propagatorsFromEnv({ OTEL_PROPAGATORS: 'baggage, tracecontext' }), ['baggage', 'tracecontext']);
    assert.deepEqual(propagatorsFromEnv({ OTEL_PROPAGATORS: 'tracecontext,none' }), []);
    const warnings: string[] = [];
    assert.deepEqual(propagatorsFromEnv({ OTEL_PROPAGATORS: 'b3,tracecontext,jaeger' }, warnings), ['tracecontext']);
    assert.equal(warnings.length, 2);
  });
});

describe('resourceAttributesFromEnv', () => {
  it('round-trips percent-encoded key=value pairs', () => {
    const key = fc.stringMatching(/^[a-z][a-z0-9._]{0,15}$/);
    fc.assert(
      fc.property(fc.dictionary(key, fc.string()), (attributes) => {
        const text = Object.entries(attributes)
          .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
          .join(',');
        assert.deepEqual(resourceAttributesFromEnv(text), { ...attributes });
      }),
    );
  });

  it('skips a malformed pair with a warning', () => {
    const warnings: string[] = [];
    assert.deepEqual(resourceAttributesFromEnv('k8s.cluster.name=prod,broken,=x,bad=%zz', warnings), {
      'k8s.cluster.name': 'prod',
    });
    assert.equal(warnings.length, 3);
  });
});

describe('batchFromEnv', () => {
  it('reads OTEL_BSP_* as positive integers, keeping the default otherwise', () => {
    assert.deepEqual(
      batchFromEnv({
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_BSP_MAX_QUEUE_SIZE: '100',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '500',
        OTEL_BSP_EXPORT_TIMEOUT: 'soon',
      }),
      { scheduledDelayMillis: 200, exportTimeoutMillis: 30000, maxQueueSize: 100, maxExportBatchSize: 100 },
    );
  });
});
