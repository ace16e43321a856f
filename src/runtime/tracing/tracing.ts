// The one way Stateward makes spans. Every traced path does the same:
//
//   const t = tracer();
//   if (t === undefined) return work();          // tracing off: one check
//   return t.span('name', { kind, attributes }, (span) => work(span));
//
// The OpenTelemetry packages sit behind startTracing's dynamic import
// (sdk.ts): with no OTEL_* variable set they are never loaded, so start-up
// time and memory are what they were without tracing.
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { Logger } from '../log/logger.ts';
import { type Env, tracingFromEnv } from './env.ts';

export type SpanKind = 'internal' | 'server' | 'client';

export type Attributes = Record<string, string | number | boolean | undefined>;

export interface Span {
  setAttributes(attributes: Attributes): void;
  /** Marks the span failed without a throw (a call that answered with an error). */
  fail(message: string): void;
  /**
   * The propagation headers (W3C traceparent, tracestate, baggage) that make
   * this span the parent of the outgoing call they travel on.
   */
  headers(): Record<string, string>;
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /**
   * Headers of an incoming request: its trace context becomes the parent
   * (a server span). Without them the parent is the span active where
   * span() is called (AsyncLocalStorage), or none.
   */
  incoming?: Readonly<Record<string, string | string[] | undefined>>;
}

export interface Tracer {
  /**
   * Runs `work` as a span: active for everything `work` awaits, ended when
   * it settles, failed (with the error) when it throws.
   */
  span<T>(name: string, options: SpanOptions, work: (span: Span) => Promise<T>): Promise<T>;
}

export interface Tracing {
  readonly tracer: Tracer;
  /** Exports what is buffered now. */
  flush(): Promise<void>;
  /** Exports what is buffered (bounded by a timeout) and stops tracing. */
  shutdown(): Promise<void>;
}

let current: Tracer | undefined;

/** The process's tracer, or undefined when tracing is off (the hot-path check). */
export function tracer(): Tracer | undefined {
  return current;
}

/**
 * Starts tracing when the environment asks for it (see env.ts); resolves to
 * undefined when it does not, and rejects with rollout-operator's start-up
 * error for an exporter or protocol it would refuse. Export failures later
 * are logged, never thrown.
 */
export async function startTracing(
  env: Env,
  options: { logger: Logger; version: string; /** Tests: where spans go instead. */ exporter?: SpanExporter },
): Promise<Tracing | undefined> {
  const decision = tracingFromEnv(env);
  if (decision.kind === 'error') throw new Error(decision.message);
  for (const warning of decision.warnings) options.logger.warn(warning);
  if (decision.kind === 'off') return undefined;
  const { startSdk } = await import('./sdk.ts');
  const sdk = await startSdk(decision.config, options);
  current = sdk.tracer;
  return {
    tracer: sdk.tracer,
    flush: () => sdk.flush(),
    shutdown: async () => {
      if (current === sdk.tracer) current = undefined;
      await sdk.shutdown();
    },
  };
}
