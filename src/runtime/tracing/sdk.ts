// The OpenTelemetry SDK behind tracing.ts, imported only when tracing is on.
// Nothing is registered globally (no global tracer provider, context manager
// or propagator): Stateward's spans are made only through tracing.ts, so two
// operators in one test process, or a restart of tracing, cannot mix state.
import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  diag,
  DiagLogLevel,
  ROOT_CONTEXT,
  SpanKind as OtelSpanKind,
  SpanStatusCode,
  trace,
  type Attributes as OtelAttributes,
  type Span as OtelSpan,
  type TextMapPropagator,
  type Tracer as OtelTracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  CompositePropagator,
  setGlobalErrorHandler,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { Logger } from '../log/logger.ts';
import type { SamplerConfig, TracingConfig } from './env.ts';
import type { Attributes, Span, SpanKind, SpanOptions, Tracer } from './tracing.ts';

/** As dskit: buffered spans get this long to leave at shutdown, then are dropped. */
const SHUTDOWN_TIMEOUT_MS = 5_000;

const KINDS: Record<SpanKind, OtelSpanKind> = {
  internal: OtelSpanKind.INTERNAL,
  server: OtelSpanKind.SERVER,
  client: OtelSpanKind.CLIENT,
};

export interface SdkOptions {
  logger: Logger;
  version: string;
  /** Tests: where spans go instead of the configured exporter. */
  exporter?: SpanExporter;
}

export async function startSdk(
  config: TracingConfig,
  options: SdkOptions,
): Promise<{ tracer: Tracer; flush(): Promise<void>; shutdown(): Promise<void> }> {
  const log = options.logger;
  routeOtelErrorsToLog(log);

  const exporter = options.exporter ?? (await createExporter(config));
  const provider = new TracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({
        'service.version': options.version,
        ...config.resourceAttributes,
        'service.name': config.serviceName,
      }),
    ),
    sampler: sampler(config.sampler),
    spanProcessors: [new BatchSpanProcessor({ exporter, ...config.batch })],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  const propagator = new CompositePropagator({
    propagators: config.propagators.map((name) =>
      name === 'tracecontext' ? new W3CTraceContextPropagator() : new W3CBaggagePropagator(),
    ),
  });
  const tracer = sdkTracer(provider.getTracer('stateward', options.version), contextManager, propagator);

  const endpoint = config.exporter.kind === 'otlp' ? config.exporter.endpoint : 'stdout';
  log.info('OpenTelemetry tracing on', {
    detected_env_var: config.detectedBy,
    service: config.serviceName,
    exporter: config.exporter.kind === 'otlp' ? `otlp ${config.exporter.protocol}` : 'console',
    endpoint,
  });

  return {
    tracer,
    flush: () => provider.forceFlush(),
    shutdown: () => shutdownWithin(provider, contextManager, log),
  };
}

/**
 * Export failures (an unreachable collector) are logged and never thrown:
 * tracing must not stop the operator.
 */
function routeOtelErrorsToLog(log: Logger): void {
  setGlobalErrorHandler((error) =>
    log.warn('OpenTelemetry tracing error', { err: typeof error === 'string' ? error : error.message }),
  );
  diag.setLogger(
    {
      error: (message) => log.warn('OpenTelemetry tracing error', { err: message }),
      warn: (message) => log.warn('OpenTelemetry tracing warning', { err: message }),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
}

/**
 * Stateward's Tracer over the SDK's: a span's parent is the incoming request's
 * trace context when there is one, else the span active in this async context;
 * a thrown error marks the span failed and is rethrown unchanged.
 */
function sdkTracer(
  otelTracer: OtelTracer,
  contextManager: AsyncLocalStorageContextManager,
  propagator: TextMapPropagator,
): Tracer {
  return {
    span<T>(name: string, spanOptions: SpanOptions, work: (span: Span) => Promise<T>): Promise<T> {
      const parent = spanOptions.incoming
        ? propagator.extract(ROOT_CONTEXT, spanOptions.incoming, defaultTextMapGetter)
        : contextManager.active();
      const span = otelTracer.startSpan(
        name,
        {
          kind: KINDS[spanOptions.kind ?? 'internal'],
          ...(spanOptions.attributes ? { attributes: defined(spanOptions.attributes) } : {}),
        },
        parent,
      );
      const active = trace.setSpan(parent, span);
      const handle = new SpanHandle(span, active, propagator);
      return contextManager.with(active, async () => {
        try {
          return await work(handle);
        } catch (error) {
          span.recordException(error instanceof Error ? error : String(error));
          span.setStatus({
            code: SpanStatusCode.ERROR,
            message: error instanceof Error ? error.message : String(error),
          });
          throw error;
        } finally {
          span.end();
        }
      });
    },
  };
}

/** Buffered spans get SHUTDOWN_TIMEOUT_MS to leave, then are dropped with a warning: shutdown never hangs on a collector. */
async function shutdownWithin(
  provider: TracerProvider,
  contextManager: AsyncLocalStorageContextManager,
  log: Logger,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), SHUTDOWN_TIMEOUT_MS);
  });
  try {
    const outcome = await Promise.race([provider.shutdown().then(() => 'done' as const), timeout]);
    if (outcome === 'timeout')
      log.warn('OpenTelemetry tracing: spans still buffered at shutdown were dropped', {
        after_ms: SHUTDOWN_TIMEOUT_MS,
      });
  } catch (error) {
    log.warn('OpenTelemetry tracing: shutdown failed', {
      err: error instanceof Error ? error.message : String(error),
    });
  } finally {
    clearTimeout(timer);
    contextManager.disable();
  }
}

class SpanHandle implements Span {
  private readonly span: OtelSpan;
  private readonly context: Context;
  private readonly propagator: TextMapPropagator;

  constructor(span: OtelSpan, context: Context, propagator: TextMapPropagator) {
    this.span = span;
    this.context = context;
    this.propagator = propagator;
  }

  setAttributes(attributes: Attributes): void {
    this.span.setAttributes(defined(attributes));
  }

  fail(message: string): void {
    this.span.setStatus({ code: SpanStatusCode.ERROR, message });
  }

  headers(): Record<string, string> {
    const carrier: Record<string, string> = {};
    this.propagator.inject(this.context, carrier, defaultTextMapSetter);
    return carrier;
  }
}

function defined(attributes: Attributes): OtelAttributes {
  const result: OtelAttributes = {};
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) result[key] = value;
  return result;
}

function sampler(config: SamplerConfig): Sampler {
  const root =
    config.root === 'always_on'
      ? new AlwaysOnSampler()
      : config.root === 'always_off'
        ? new AlwaysOffSampler()
        : new TraceIdRatioBasedSampler(config.ratio);
  return config.parentBased ? new ParentBasedSampler({ root }) : root;
}

/** The exporter the configuration names; each OTLP flavour loads only its own package (gRPC's is the heaviest). */
async function createExporter(config: TracingConfig): Promise<SpanExporter> {
  if (config.exporter.kind === 'console') return new ConsoleSpanExporter();
  // Headers, timeout, compression and certificates come from the exporters'
  // own reading of OTEL_EXPORTER_OTLP_(TRACES_)* in the process environment.
  const url = config.exporter.endpoint;
  switch (config.exporter.protocol) {
    case 'http/protobuf':
      return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter({ url });
    case 'http/json':
      return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter({ url });
    case 'grpc':
      return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter({ url });
  }
}
