// The one way Stateward talks to the Kubernetes API: JSON over node:https
// (transport.ts) with one connection pool, client-side rate limiting per API
// group, request timeouts, and one error type (KubeApiError) for every failure.
//
// Why not client-node's generated clients: they build a new connection pool
// for every request, turn timestamps into Date objects (while watch events
// carry strings), drop fields the client's schema does not know (dangerous
// for read-modify-write), and throw errors whose body must be parsed by hand.
// Kubeconfig loading and authentication are Stateward's own (kubeconfig.ts).
import { createHash } from 'node:crypto';
import type { Agent } from 'node:http';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import { errorFromResponse, KubeApiError } from './errors.ts';
import { apiGroupOfPath, resourcePath, type ObjectPath } from './paths.ts';
import type { KubeObject, ObjectList, ResourceType } from './types.ts';
import { apiVersionOf } from './types.ts';
import { type Clock, systemClock } from '../clock.ts';
import type { ApiClientMetrics } from './apimetrics.ts';
import type { KubeClientConfig } from './kubeconfig.ts';
import { CLUSTER_HEADER, type ClusterRejections } from '../http/clusterlabel.ts';
import { type Span, tracer } from '../tracing/tracing.ts';
import { proxyFor } from './proxy.ts';
import { closePool, connectionPool, exchange, type Exchange } from './transport.ts';

export type PatchType = 'merge' | 'strategic' | 'json' | 'apply';

const patchContentType: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  json: 'application/json-patch+json',
  // Server-side apply accepts JSON, which is valid YAML.
  apply: 'application/apply-patch+yaml',
};

/** Waits for a token of an API group's bucket; rejects rather than outlive the caller's deadline. */
export interface RequestLimiter {
  /** `deadline` is on the client's clock.monotonic(). */
  wait(group: string, options: { deadline?: number; signal?: AbortSignal }): Promise<void>;
}

export interface KubeClientOptions {
  kubeConfig: KubeClientConfig;
  /** Per-request timeout for everything but watches (-kubernetes.client-timeout). */
  timeoutMs: number;
  limiter?: RequestLimiter;
  metrics?: ApiClientMetrics;
  clock?: Clock;
  userAgent?: string;
  /**
   * The operator's X-Cluster label, sent on every request as rollout-operator
   * does; an answer refusing it (dskit's 511) fails the request as
   * ClusterValidationRejected. The client commands send none.
   */
  cluster?: { label: string; rejections: ClusterRejections };
  /** Where HTTPS_PROXY, HTTP_PROXY and NO_PROXY are read (default process.env). */
  env?: NodeJS.ProcessEnv;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Overrides the client's timeout for this call. */
  timeoutMs?: number;
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface ListOptions extends CallOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continue?: string;
  resourceVersion?: string;
  resourceVersionMatch?: 'NotOlderThan' | 'Exact';
  /** Ask for PartialObjectMetadata: only apiVersion, kind and metadata of each item. */
  metadataOnly?: boolean;
}

export interface WriteOptions extends CallOptions {
  fieldManager?: string;
  dryRun?: boolean;
}

export interface WatchEvent<T extends KubeObject = KubeObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

const METADATA_ACCEPT = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
const METADATA_ACCEPT_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

function authorizationOf(headers: Record<string, string | string[]>): string | undefined {
  const value = headers['Authorization'];
  return typeof value === 'string' ? value : undefined;
}

export class KubeClient {
  private readonly options: KubeClientOptions;
  private readonly kc: KubeClientConfig;
  private readonly timeoutMs: number;
  private readonly limiter: RequestLimiter | undefined;
  private readonly metrics: ApiClientMetrics | undefined;
  private readonly clock: Clock;
  private readonly userAgent: string;
  private readonly server: string;
  /** Headers every request carries besides authentication (X-Cluster). */
  private readonly fixedHeaders: Record<string, string>;
  private agent: { key: string; pool: Agent } | undefined;
  private readonly proxy: URL | undefined;

  constructor(options: KubeClientOptions) {
    this.options = options;
    this.kc = options.kubeConfig;
    this.timeoutMs = options.timeoutMs;
    this.limiter = options.limiter;
    this.metrics = options.metrics;
    this.clock = options.clock ?? systemClock;
    this.userAgent = options.userAgent ?? 'stateward';
    this.fixedHeaders = options.cluster ? { [CLUSTER_HEADER]: options.cluster.label } : {};
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = cluster.server.replace(/\/+$/, '');
    // The cluster's proxy-url, else HTTPS_PROXY/HTTP_PROXY unless NO_PROXY says otherwise (proxy.ts).
    this.proxy = proxyFor(this.server, cluster.proxyUrl, options.env ?? process.env);
  }

  /**
   * A client with the same credentials, timeout and metrics but a rate limit
   * of its own, for a caller that must not wait behind the rest of the
   * operator's requests (nor hold them up). It has its own connection pool.
   */
  withLimiter(limiter: RequestLimiter | undefined): KubeClient {
    return new KubeClient({ ...this.options, limiter });
  }

  get serverUrl(): string {
    return this.server;
  }

  /**
   * Authentication headers and the connection pool. Headers are asked for
   * per request (the kubeconfig caches them: exec credentials until they
   * expire, token files re-read as they rotate); the pool is rebuilt only
   * when the TLS material changes.
   */
  private async connection(): Promise<{ headers: Record<string, string | string[]>; pool: Agent }> {
    const options: HttpsRequestOptions = {};
    await this.kc.applyToHTTPSOptions(options);
    const tls = {
      ca: options.ca as Buffer | string | undefined,
      cert: options.cert as Buffer | string | undefined,
      key: options.key as Buffer | string | undefined,
      rejectUnauthorized: options.rejectUnauthorized,
      servername: options.servername,
    };
    const key = createHash('sha256')
      .update(
        JSON.stringify([
          String(tls.ca ?? ''),
          String(tls.cert ?? ''),
          String(tls.key ?? ''),
          tls.rejectUnauthorized,
          tls.servername,
        ]),
      )
      .digest('hex');
    if (this.agent?.key !== key) {
      const old = this.agent?.pool;
      // Timeouts are ours (AbortSignal per request, idle watchdog for watches), not the pool's.
      // HTTP/1.1 only: over HTTP/2 every request shares one connection, and
      // when that connection silently dies (a NAT or load balancer forgets
      // it) aborting a stream leaves the dead connection in place for the
      // next request. Over HTTP/1.1 an aborted request takes its socket with
      // it, so a watch restarted by the idle watchdog gets a fresh connection.
      this.agent = { key, pool: connectionPool(new URL(this.server).protocol, tls, this.proxy) };
      // Requests in flight on the old pool (watches) finish on their connections.
      if (old) void closePool(old);
    }
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(options.headers ?? {})) {
      // Arrays stay arrays: one header line per value (Impersonate-Group).
      if (value !== undefined) headers[name] = Array.isArray(value) ? value : String(value);
    }
    return { headers, pool: this.agent.pool };
  }

  /** Sends one request; resolves to the parsed JSON body (undefined for an empty one). */
  request<T>(
    method: string,
    path: string,
    init: CallOptions & { query?: Query; body?: unknown; contentType?: string; accept?: string; text?: boolean } = {},
  ): Promise<T> {
    const t = tracer();
    if (t === undefined) return this.send<T>(method, path, init, undefined);
    // A client span per call, named and described as rollout-operator's otelhttp transport does.
    return t.span(
      `HTTP ${method}`,
      { kind: 'client', attributes: spanAttributes(method, this.url(path, init.query)) },
      (span) => this.send<T>(method, path, init, span),
    );
  }

  private async send<T>(
    method: string,
    path: string,
    init: CallOptions & { query?: Query; body?: unknown; contentType?: string; accept?: string; text?: boolean },
    span: Span | undefined,
  ): Promise<T> {
    const url = this.url(path, init.query);
    const timeoutMs = init.timeoutMs ?? this.timeoutMs;
    const deadline = this.clock.monotonic() + timeoutMs;
    const signal = init.signal
      ? AbortSignal.any([init.signal, AbortSignal.timeout(timeoutMs)])
      : AbortSignal.timeout(timeoutMs);
    await this.limit(method, path, deadline, signal);
    const started = performance.now();
    let status = 'error';
    try {
      const { headers, pool } = await this.connection();
      const body = init.body === undefined ? undefined : JSON.stringify(init.body);
      let response: Exchange;
      try {
        response = await exchange(url, {
          method,
          pool,
          signal,
          headers: {
            ...headers,
            ...this.fixedHeaders,
            ...span?.headers(),
            accept: init.accept ?? 'application/json',
            'accept-encoding': 'gzip',
            'user-agent': this.userAgent,
            ...(body !== undefined ? { 'content-type': init.contentType ?? 'application/json' } : {}),
          },
          body,
        });
      } catch (error) {
        throw this.transportError(method, path, error, signal, timeoutMs);
      }
      try {
        status = String(response.status);
        span?.setAttributes({ 'http.response.status_code': response.status });
        if (response.status === 401) this.kc.credentialsRejected?.(authorizationOf(headers));
        let bytes: Buffer;
        try {
          bytes = await readBody(response.body);
        } catch (error) {
          throw this.transportError(method, path, error, signal, timeoutMs);
        }
        try {
          const text = bytes.toString('utf8');
          if (response.status < 200 || response.status > 299) {
            throw (
              this.clusterRejection(method, path, response, text) ??
              errorFromResponse(method, path, response.status, text, response.header('retry-after'))
            );
          }
          // `text`: an answer that is not JSON (a pod's /metrics through the API server's proxy).
          if (init.text) return text as T;
          return (text ? JSON.parse(text) : undefined) as T;
        } finally {
          bytes.fill(0);
        }
      } finally {
        response.close();
      }
    } finally {
      this.metrics?.observeRequest(method, path, status, (performance.now() - started) / 1000);
    }
  }

  private url(path: string, query?: Query): string {
    const url = new URL(this.server + path);
    for (const [key, value] of Object.entries(query ?? {}))
      if (value !== undefined) url.searchParams.set(key, String(value));
    return url.toString();
  }

  private async limit(method: string, path: string, deadline: number, signal: AbortSignal): Promise<void> {
    if (!this.limiter) return;
    const group = apiGroupOfPath(path);
    try {
      await this.limiter.wait(group, { deadline, signal });
    } catch (error) {
      this.metrics?.rateLimited(group);
      throw new KubeApiError({
        code: 0,
        reason: 'RateLimited',
        message: `client-side rate limiter for Kubernetes API group "${group}": ${error instanceof Error ? error.message : String(error)}`,
        method,
        path,
        cause: error,
      });
    }
  }

  /** A server's refusal of our X-Cluster label (dskit's 511 with its JSON body), counted and logged; undefined for any other answer. */
  private clusterRejection(
    method: string,
    path: string,
    response: Pick<Exchange, 'status' | 'header'>,
    text: string,
  ): KubeApiError | undefined {
    const cluster = this.options.cluster;
    const message = cluster?.rejections.check(cluster.label, response.status, response.header('content-type'), text);
    return message === undefined
      ? undefined
      : new KubeApiError({ code: response.status, reason: 'ClusterValidationRejected', message, method, path });
  }

  private transportError(
    method: string,
    path: string,
    error: unknown,
    signal: AbortSignal,
    timeoutMs: number,
  ): KubeApiError {
    const timedOut = signal.aborted && signal.reason instanceof DOMException && signal.reason.name === 'TimeoutError';
    if (timedOut)
      return new KubeApiError({
        code: 0,
        reason: 'Timeout',
        message: `no answer within ${timeoutMs} ms`,
        method,
        path,
        cause: error,
      });
    if (signal.aborted)
      return new KubeApiError({
        code: 0,
        reason: 'Canceled',
        message: 'request canceled by the caller',
        method,
        path,
        cause: error,
      });
    // The system error's code (ECONNREFUSED, ECONNRESET, a TLS verification code) says it best.
    const failure = error as { code?: unknown; message?: unknown };
    return new KubeApiError({
      code: 0,
      reason: 'NetworkError',
      message:
        typeof failure.code === 'string'
          ? failure.code
          : typeof failure.message === 'string'
            ? failure.message
            : String(error),
      method,
      path,
      cause: error,
    });
  }

  // ---- typed helpers over request() ----------------------------------------

  get<T extends KubeObject>(
    type: ResourceType,
    where: ObjectPath & { name: string },
    options: CallOptions & { metadataOnly?: boolean } = {},
  ): Promise<T> {
    return this.request<T>('GET', resourcePath(type, where), {
      ...options,
      ...(options.metadataOnly ? { accept: METADATA_ACCEPT_OBJECT } : {}),
    });
  }

  list<T extends KubeObject>(type: ResourceType, options: ListOptions = {}): Promise<ObjectList<T>> {
    const {
      namespace,
      labelSelector,
      fieldSelector,
      limit,
      resourceVersion,
      resourceVersionMatch,
      metadataOnly,
      ...call
    } = options;
    return this.request<ObjectList<T>>('GET', resourcePath(type, namespace ? { namespace } : {}), {
      ...call,
      query: { labelSelector, fieldSelector, limit, continue: options.continue, resourceVersion, resourceVersionMatch },
      ...(metadataOnly ? { accept: METADATA_ACCEPT } : {}),
    });
  }

  create<T extends KubeObject>(type: ResourceType, object: T, options: WriteOptions = {}): Promise<T> {
    const namespace = object.metadata?.namespace;
    return this.request<T>('POST', resourcePath(type, namespace ? { namespace } : {}), {
      ...options,
      query: writeQuery(options),
      body: { apiVersion: apiVersionOf(type), kind: type.kind, ...object },
    });
  }

  /** PUT: optimistic concurrency through metadata.resourceVersion (409 on a stale one). */
  update<T extends KubeObject>(
    type: ResourceType,
    object: T,
    options: WriteOptions & { subresource?: string } = {},
  ): Promise<T> {
    const name = object.metadata?.name;
    if (!name) throw new Error(`update ${type.kind}: metadata.name is required`);
    return this.request<T>(
      'PUT',
      resourcePath(type, { namespace: object.metadata?.namespace, name, subresource: options.subresource }),
      {
        ...options,
        query: writeQuery(options),
        body: { apiVersion: apiVersionOf(type), kind: type.kind, ...object },
      },
    );
  }

  patch<T extends KubeObject>(
    type: ResourceType,
    where: ObjectPath & { name: string },
    patchType: PatchType,
    patch: unknown,
    options: WriteOptions & { force?: boolean } = {},
  ): Promise<T> {
    if (patchType === 'apply' && !options.fieldManager) throw new Error('server-side apply needs a fieldManager');
    return this.request<T>('PATCH', resourcePath(type, where), {
      ...options,
      query: { ...writeQuery(options), force: patchType === 'apply' ? options.force : undefined },
      body: patch,
      contentType: patchContentType[patchType],
    });
  }

  /** Server-side apply of a whole (partial) object under a field manager. */
  apply<T extends KubeObject>(
    type: ResourceType,
    object: T,
    options: WriteOptions & { fieldManager: string; force?: boolean; subresource?: string },
  ): Promise<T> {
    const name = object.metadata?.name;
    if (!name) throw new Error(`apply ${type.kind}: metadata.name is required`);
    return this.patch<T>(
      type,
      { namespace: object.metadata?.namespace, name, subresource: options.subresource },
      'apply',
      { apiVersion: apiVersionOf(type), kind: type.kind, ...object },
      options,
    );
  }

  delete(
    type: ResourceType,
    where: ObjectPath & { name: string },
    options: CallOptions & {
      uid?: string;
      resourceVersion?: string;
      gracePeriodSeconds?: number;
      propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
    } = {},
  ): Promise<unknown> {
    const { uid, resourceVersion, gracePeriodSeconds, propagationPolicy, ...call } = options;
    const preconditions = uid || resourceVersion ? { uid, resourceVersion } : undefined;
    return this.request('DELETE', resourcePath(type, where), {
      ...call,
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions, gracePeriodSeconds, propagationPolicy },
    });
  }

  /**
   * Opens a watch and yields its events until the server ends the stream or
   * the signal aborts. An in-stream ERROR event is yielded as-is; the caller
   * (the informer) decides what a 410 means. No request timeout applies: the
   * caller's idle watchdog aborts a stream that went quiet.
   *
   * `decode` runs on each ADDED, MODIFIED and DELETED object as its line is
   * parsed, before the event is yielded: what it leaves out (a Secret's
   * values) is never held by this generator or its caller. Each line's bytes
   * are zeroed once parsed, and no line outlives its event.
   */
  async *watch<T extends KubeObject>(
    type: ResourceType,
    options: {
      namespace?: string;
      labelSelector?: string;
      fieldSelector?: string;
      resourceVersion?: string;
      timeoutSeconds?: number;
      metadataOnly?: boolean;
      /**
       * A watch-list (KEP-3157): the stream starts with every object as
       * ADDED, then a bookmark annotated `k8s.io/initial-events-end`, in
       * place of a LIST.
       */
      sendInitialEvents?: boolean;
      decode?: (object: T) => T;
      signal: AbortSignal;
    },
  ): AsyncGenerator<WatchEvent<T>> {
    const path = resourcePath(type, options.namespace ? { namespace: options.namespace } : {});
    const url = this.url(path, {
      watch: true,
      allowWatchBookmarks: true,
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
      resourceVersion: options.resourceVersion || undefined,
      ...(options.sendInitialEvents ? { sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan' } : {}),
      timeoutSeconds: options.timeoutSeconds,
    });
    const response = await this.openWatch(path, url, options);
    try {
      const lines = new LineSplitter();
      try {
        // The stream's own chunks, not copies: the regions zeroed are the received bytes.
        for await (const chunk of response.body) {
          for (const line of lines.push(chunk)) {
            const event = decodeWatchLine<T>(line, path, options.decode);
            if (event) yield event;
          }
        }
      } catch (error) {
        throw this.transportError('WATCH', path, error, options.signal, 0);
      }
      const last = lines.end();
      const event = last && decodeWatchLine<T>(last, path, options.decode);
      if (event) yield event;
    } finally {
      response.close();
    }
  }

  /**
   * Sends a watch's GET and waits for its answer's status, so that watch()
   * only reads the stream. An answer other than 200 is thrown as the API
   * error its body says, the response closed.
   */
  private async openWatch(
    path: string,
    url: string,
    options: { metadataOnly?: boolean; signal: AbortSignal },
  ): Promise<Exchange> {
    await this.limit('WATCH', path, this.clock.monotonic() + this.timeoutMs, options.signal);
    const { headers, pool } = await this.connection();
    const open = async (span: Span | undefined) => {
      let response;
      try {
        response = await exchange(url, {
          method: 'GET',
          pool,
          signal: options.signal,
          headers: {
            ...headers,
            ...this.fixedHeaders,
            ...span?.headers(),
            accept: options.metadataOnly ? METADATA_ACCEPT_OBJECT : 'application/json',
            'accept-encoding': 'gzip',
            'user-agent': this.userAgent,
          },
        });
      } catch (error) {
        throw this.transportError('WATCH', path, error, options.signal, 0);
      }
      span?.setAttributes({ 'http.response.status_code': response.status });
      if (response.status !== 200) span?.fail(`HTTP ${response.status}`);
      return response;
    };
    // A watch is one span: its opening, up to the answer's status. Its events are not traced.
    const t = tracer();
    // Timed as rollout-operator's instrumented round trip times it: a GET, up
    // to the response headers (a watch-list is how the caches are filled).
    const started = performance.now();
    let response: Exchange;
    try {
      response =
        t === undefined
          ? await open(undefined)
          : await t.span('HTTP GET', { kind: 'client', attributes: spanAttributes('GET', url) }, open);
    } catch (error) {
      this.metrics?.observeRequest('GET', path, 'error', (performance.now() - started) / 1000, true);
      throw error;
    }
    try {
      this.metrics?.observeRequest('GET', path, String(response.status), (performance.now() - started) / 1000, true);
      if (response.status === 401) this.kc.credentialsRejected?.(authorizationOf(headers));
      if (response.status !== 200) {
        const text = await readBody(response.body).then(
          (bytes) => {
            const text = bytes.toString('utf8');
            bytes.fill(0);
            return text;
          },
          () => '',
        );
        throw (
          this.clusterRejection('WATCH', path, response, text) ??
          errorFromResponse('WATCH', path, response.status, text, response.header('retry-after'))
        );
      }
    } catch (error) {
      response.close();
      throw error;
    }
    return response;
  }

  async close(): Promise<void> {
    if (this.agent) await closePool(this.agent.pool);
    this.agent = undefined;
  }
}

/**
 * A response body as one buffer, the received chunks zeroed once copied: a
 * LIST of Secrets leaves its values in memory only as the strings parsed
 * from it (the caller zeroes the buffer after parsing), not in freed chunks.
 */
async function readBody(body: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of body) chunks.push(chunk);
    return Buffer.concat(chunks);
  } finally {
    for (const chunk of chunks) chunk.fill(0);
  }
}

/**
 * One watch line to its event (undefined for a blank line), in a frame of its
 * own so the text and the undecoded object die with it; the line's bytes are
 * zeroed. An unparsable line is reported by its length only: it may hold a Secret.
 */
function decodeWatchLine<T extends KubeObject>(
  line: Buffer,
  path: string,
  decode: ((object: T) => T) | undefined,
): WatchEvent<T> | undefined {
  try {
    const text = line.toString('utf8').trim();
    if (!text) return undefined;
    let event: WatchEvent<T>;
    try {
      event = JSON.parse(text) as WatchEvent<T>;
    } catch {
      throw new KubeApiError({
        code: 0,
        reason: 'BadWatchEvent',
        message: `unparsable watch line (${line.length} bytes)`,
        method: 'WATCH',
        path,
      });
    }
    const carriesObject = event.type === 'ADDED' || event.type === 'MODIFIED' || event.type === 'DELETED';
    return decode && carriesObject && event.object ? { type: event.type, object: decode(event.object) } : event;
  } finally {
    line.fill(0);
  }
}

/**
 * Splits a byte stream at newlines. A line that spans chunks is copied out of
 * them; every chunk region handed out or copied is the caller's to zero
 * (decodeWatchLine does), and a copied tail is zeroed in the chunk at once.
 */
export class LineSplitter {
  private pending: Buffer[] = [];

  /** The complete lines in `chunk` (without their newline), in order. */
  push(chunk: Buffer): Buffer[] {
    const lines: Buffer[] = [];
    let start = 0;
    for (let newline = chunk.indexOf(0x0a); newline >= 0; newline = chunk.indexOf(0x0a, start)) {
      lines.push(this.take(chunk.subarray(start, newline)));
      start = newline + 1;
    }
    if (start < chunk.length) {
      const tail = chunk.subarray(start);
      this.pending.push(Buffer.from(tail));
      tail.fill(0);
    }
    return lines;
  }

  /** What is left after the stream ended: a last line without a newline, if any. */
  end(): Buffer | undefined {
    return this.pending.length > 0 ? this.take(Buffer.alloc(0)) : undefined;
  }

  private take(piece: Buffer): Buffer {
    if (this.pending.length === 0) return piece;
    const line = Buffer.concat([...this.pending, piece]);
    for (const part of this.pending) part.fill(0);
    piece.fill(0);
    this.pending = [];
    return line;
  }
}

/** The OpenTelemetry HTTP client attributes otelhttp sets on rollout-operator's spans. */
function spanAttributes(method: string, full: string): Record<string, string | number> {
  const url = new URL(full);
  return {
    'http.request.method': method,
    'url.full': url.href,
    'server.address': url.hostname,
    'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
  };
}

function writeQuery(options: WriteOptions): Query {
  return { fieldManager: options.fieldManager, dryRun: options.dryRun ? 'All' : undefined };
}
