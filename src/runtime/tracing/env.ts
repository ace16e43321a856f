// Which tracing the environment asks for, decided the way rollout-operator
// decides it: rollout-operator calls dskit's tracing.NewOTelOrJaegerFromEnv,
// which turns OpenTelemetry tracing on only when OTEL_TRACES_EXPORTER,
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// exports through the OpenTelemetry Go SDK's autoexport (OTLP over HTTP with
// protobuf unless a protocol is named), samples with dskit's reading of
// OTEL_TRACES_SAMPLER and propagates with dskit's reading of
// OTEL_PROPAGATORS. Pure: no OpenTelemetry package is imported here, so the
// operator pays nothing for tracing it does not use.

export type Env = Readonly<Record<string, string | undefined>>;

export type OtlpProtocol = 'http/protobuf' | 'http/json' | 'grpc';

export interface SamplerConfig {
  root: 'always_on' | 'always_off' | 'traceidratio';
  /** For traceidratio: the fraction of traces kept, in [0, 1]. */
  ratio: number;
  /** Follow the caller's sampling decision when there is a parent span. */
  parentBased: boolean;
}

export type Propagator = 'tracecontext' | 'baggage';

export interface TracingConfig {
  /** The variable that turned tracing on, for the start-up log line. */
  detectedBy: string;
  serviceName: string;
  exporter: { kind: 'otlp'; protocol: OtlpProtocol; endpoint: string } | { kind: 'console' };
  sampler: SamplerConfig;
  propagators: Propagator[];
  /** OTEL_RESOURCE_ATTRIBUTES, decoded (service.name is always serviceName). */
  resourceAttributes: Record<string, string>;
  /** OTEL_BSP_*: the batch span processor, with the Go SDK's defaults. */
  batch: BatchConfig;
}

export interface BatchConfig {
  scheduledDelayMillis: number;
  exportTimeoutMillis: number;
  maxQueueSize: number;
  maxExportBatchSize: number;
}

export type TracingDecision =
  | { kind: 'off'; warnings: string[] }
  | { kind: 'on'; config: TracingConfig; warnings: string[] }
  /** What rollout-operator refuses to start with (an exporter or protocol its SDK does not know). */
  | { kind: 'error'; message: string };

/** rollout-operator's default service name; see docs/runtime.md#tracing for why Stateward keeps it. */
export const DEFAULT_SERVICE_NAME = 'rollout-operator';

const JAEGER_SWITCHES = ['JAEGER_AGENT_HOST', 'JAEGER_ENDPOINT', 'JAEGER_SAMPLER_MANAGER_HOST_PORT'] as const;
const OTEL_SWITCHES = [
  'OTEL_TRACES_EXPORTER',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
] as const;

/** The tracing the environment configures, or why there is none. */
export function tracingFromEnv(env: Env): TracingDecision {
  const warnings: string[] = [];
  const set = (name: string) => (env[name] ?? '') !== '';
  const jaeger = JAEGER_SWITCHES.find(set);
  const otel = OTEL_SWITCHES.find(set);
  if (jaeger !== undefined) {
    // dskit prefers its (deprecated) Jaeger exporter when one of these is set;
    // the OpenTelemetry JavaScript SDK no longer ships one.
    warnings.push(
      `${jaeger} is set, but Stateward does not export to the Jaeger agent or collector protocol (deprecated in rollout-operator since v0.28); ${otel === undefined ? "tracing is off: point OTEL_EXPORTER_OTLP_ENDPOINT at the Jaeger collector's OTLP port instead" : `using the OpenTelemetry configuration (${otel}) instead`}`,
    );
  }
  if (otel === undefined) return { kind: 'off', warnings };
  if ((env['OTEL_SDK_DISABLED'] ?? '').trim().toLowerCase() === 'true') {
    warnings.push(`${otel} is set, but OTEL_SDK_DISABLED=true: tracing is off`);
    return { kind: 'off', warnings };
  }

  const exporterName = (env['OTEL_TRACES_EXPORTER'] ?? '').trim() || 'otlp';
  let exporter: TracingConfig['exporter'];
  switch (exporterName) {
    case 'none':
      // The Go SDK would create spans and drop them; nothing observable is lost by not creating them.
      return { kind: 'off', warnings };
    case 'console':
      exporter = { kind: 'console' };
      break;
    case 'otlp': {
      const protocol = (
        env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ||
        env['OTEL_EXPORTER_OTLP_PROTOCOL'] ||
        'http/protobuf'
      ).trim();
      if (protocol !== 'http/protobuf' && protocol !== 'grpc' && protocol !== 'http/json') {
        return {
          kind: 'error',
          message: `failed to set up tracing: OTLP protocol ${JSON.stringify(protocol)} is not one of http/protobuf, http/json, grpc`,
        };
      }
      exporter = { kind: 'otlp', protocol, endpoint: otlpEndpoint(env, protocol, warnings) };
      break;
    }
    default:
      return {
        kind: 'error',
        message: `failed to set up tracing: OTEL_TRACES_EXPORTER=${JSON.stringify(exporterName)} is not one of otlp, console, none`,
      };
  }

  return {
    kind: 'on',
    warnings,
    config: {
      detectedBy: otel,
      serviceName: serviceName(env),
      exporter,
      sampler: samplerFromEnv(env, warnings),
      propagators: propagatorsFromEnv(env, warnings),
      resourceAttributes: resourceAttributesFromEnv(env['OTEL_RESOURCE_ATTRIBUTES'] ?? '', warnings),
      batch: batchFromEnv(env, warnings),
    },
  };
}

/** rollout-operator's rule: OTEL_SERVICE_NAME, else JAEGER_SERVICE_NAME, else "rollout-operator". */
export function serviceName(env: Env): string {
  return env['OTEL_SERVICE_NAME'] || env['JAEGER_SERVICE_NAME'] || DEFAULT_SERVICE_NAME;
}

/**
 * The OTLP specification's endpoint rules, which the Go and JavaScript
 * exporters share: the traces endpoint is used as it is (an empty path is
 * "/"), the general one is a base to which HTTP exporters add v1/traces,
 * gRPC dials either as given. An unparsable URL is ignored, as in Go.
 */
export function otlpEndpoint(env: Env, protocol: OtlpProtocol, warnings: string[] = []): string {
  const grpc = protocol === 'grpc';
  const parse = (name: string): URL | undefined => {
    const value = (env[name] ?? '').trim();
    if (value === '') return undefined;
    try {
      return new URL(value);
    } catch {
      warnings.push(`${name}=${JSON.stringify(value)} is not a URL; ignored`);
      return undefined;
    }
  };
  const traces = parse('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (traces) return traces.href;
  const base = parse('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (base) {
    if (grpc) return base.href;
    const url = new URL(base.href);
    url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/traces`;
    return url.href;
  }
  return grpc ? 'http://localhost:4317' : 'http://localhost:4318/v1/traces';
}

/**
 * dskit's reading of OTEL_TRACES_SAMPLER (trimmed, any case): an unknown or
 * empty name is parentbased_always_on, and a ratio that is not a number in
 * [0, 1] is 1. Jaeger's remote sampler is not available in JavaScript: its
 * initialSamplingRate (Jaeger's default 0.001) stands in for it.
 */
export function samplerFromEnv(env: Env, warnings: string[] = []): SamplerConfig {
  const name = (env['OTEL_TRACES_SAMPLER'] ?? '').trim().toLowerCase();
  const arg = (env['OTEL_TRACES_SAMPLER_ARG'] ?? '').trim();
  switch (name) {
    case 'always_on':
      return { root: 'always_on', ratio: 1, parentBased: false };
    case 'always_off':
      return { root: 'always_off', ratio: 0, parentBased: false };
    case 'traceidratio':
      return { root: 'traceidratio', ratio: ratioOr(arg, 1), parentBased: false };
    case 'parentbased_always_off':
      return { root: 'always_off', ratio: 0, parentBased: true };
    case 'parentbased_traceidratio':
      return { root: 'traceidratio', ratio: ratioOr(arg, 1), parentBased: true };
    case 'jaeger_remote':
    case 'parentbased_jaeger_remote': {
      const initial = /(?:^|,)\s*initialSamplingRate=([^,]*)/.exec(arg)?.[1]?.trim();
      const ratio = ratioOr(initial ?? '', 0.001);
      warnings.push(
        `OTEL_TRACES_SAMPLER=${name}: Jaeger's remote sampler is not supported; sampling ${ratio} of traces (its initial sampling rate) instead`,
      );
      return { root: 'traceidratio', ratio, parentBased: name.startsWith('parentbased_') };
    }
    default:
      return { root: 'always_on', ratio: 1, parentBased: true };
  }
}

function ratioOr(text: string, fallback: number): number {
  if (text === '') return fallback;
  // Go's strconv.ParseFloat: the whole text must be the number.
  const value = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text) ? Number(text) : Number.NaN;
  return value >= 0 && value <= 1 ? value : fallback;
}

/**
 * dskit's reading of OTEL_PROPAGATORS: unset means W3C trace context and
 * baggage (dskit adds Jaeger's uber-trace-id, which Stateward does not
 * speak), "none" means none, unknown names are skipped.
 */
export function propagatorsFromEnv(env: Env, warnings: string[] = []): Propagator[] {
  const value = env['OTEL_PROPAGATORS'] ?? '';
  if (value === '') return ['tracecontext', 'baggage'];
  const result: Propagator[] = [];
  for (const raw of value.split(',')) {
    const name = raw.trim();
    if (name === 'none') return [];
    if (name === 'tracecontext' || name === 'baggage') {
      if (!result.includes(name)) result.push(name);
    } else {
      warnings.push(
        `OTEL_PROPAGATORS: propagator ${JSON.stringify(name)} is not supported (tracecontext, baggage, none); skipped`,
      );
    }
  }
  return result;
}

/**
 * OTEL_RESOURCE_ATTRIBUTES: comma-separated key=value pairs, values
 * percent-decoded. A malformed pair is skipped with a warning.
 */
export function resourceAttributesFromEnv(value: string, warnings: string[] = []): Record<string, string> {
  const attributes: Record<string, string> = {};
  if (value.trim() === '') return attributes;
  for (const pair of value.split(',')) {
    if (pair.trim() === '') continue;
    const at = pair.indexOf('=');
    const key = at < 0 ? '' : pair.slice(0, at).trim();
    if (key === '') {
      warnings.push(`OTEL_RESOURCE_ATTRIBUTES: ${JSON.stringify(pair)} is not key=value; skipped`);
      continue;
    }
    try {
      attributes[key] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      warnings.push(`OTEL_RESOURCE_ATTRIBUTES: the value of ${key} is not percent-encoded correctly; skipped`);
    }
  }
  return attributes;
}

/**
 * OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT (milliseconds),
 * OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE, which the Go SDK
 * reads and the JavaScript SDK no longer does; a value that is not a positive
 * integer keeps the default, and a batch larger than the queue is the queue.
 */
export function batchFromEnv(env: Env, warnings: string[] = []): BatchConfig {
  const read = (name: string, fallback: number): number => {
    const text = (env[name] ?? '').trim();
    if (text === '') return fallback;
    const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
    if (Number.isSafeInteger(value) && value > 0) return value;
    warnings.push(`${name}=${JSON.stringify(text)} is not a positive integer; using ${fallback}`);
    return fallback;
  };
  const maxQueueSize = read('OTEL_BSP_MAX_QUEUE_SIZE', 2048);
  return {
    scheduledDelayMillis: read('OTEL_BSP_SCHEDULE_DELAY', 5000),
    exportTimeoutMillis: read('OTEL_BSP_EXPORT_TIMEOUT', 30000),
    maxQueueSize,
    maxExportBatchSize: Math.min(read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512), maxQueueSize),
  };
}
