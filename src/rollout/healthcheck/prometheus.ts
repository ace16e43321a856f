// The Prometheus HTTP API as a health check calls it: an instant query
// (POST /api/v1/query, form-encoded, so a long PromQL never meets a URL
// length limit) at a given time, with the endpoint's credentials, a
// deadline and bounded retries. The credentials come from Secrets read just
// before the queries of one evaluation and dropped after it (resolveAccess):
// nothing here logs them, and no error text includes a header's value.
import http from 'node:http';
import https from 'node:https';
import type { KubeClient } from '../../runtime/kube/client.ts';
import { resources, type ConfigMap, type Secret } from '../../runtime/kube/types.ts';
import type { KeyRef, QueryAccess } from './resource.ts';
import { readQueryResult, type QueryValue } from './promql.ts';

/** What one evaluation sends: headers with values resolved, the CA bundle. Lives for one evaluation. */
export interface ResolvedAccess {
  url: URL;
  headers: Record<string, string>;
  ca?: string;
}

/** The largest answer read: one sample is a few hundred bytes; a runaway vector is cut off, not buffered. */
const MAX_ANSWER_BYTES = 1 << 20;
/** The pause between attempts grows by this much per retry (200 ms, 400 ms, …), never past the deadline. */
const RETRY_STEP_MS = 200;

async function secretValue(client: KubeClient, namespace: string, ref: KeyRef, signal?: AbortSignal): Promise<string> {
  const secret = await client.get<Secret>(resources.secrets, { namespace, name: ref.name }, signal ? { signal } : {});
  const encoded = secret.data?.[ref.key];
  if (encoded === undefined) throw new Error(`Secret ${namespace}/${ref.name} has no key ${JSON.stringify(ref.key)}`);
  return Buffer.from(encoded, 'base64').toString('utf8');
}

async function configMapValue(
  client: KubeClient,
  namespace: string,
  ref: KeyRef,
  signal?: AbortSignal,
): Promise<string> {
  const map = await client.get<ConfigMap>(
    resources.configMaps,
    { namespace, name: ref.name },
    signal ? { signal } : {},
  );
  const value = map.data?.[ref.key];
  if (value === undefined) throw new Error(`ConfigMap ${namespace}/${ref.name} has no key ${JSON.stringify(ref.key)}`);
  return value;
}

/** Reads the Secrets and ConfigMaps `access` names. Throws naming the object and key, never a value. */
export async function resolveAccess(
  client: KubeClient,
  namespace: string,
  access: QueryAccess,
  signal?: AbortSignal,
): Promise<ResolvedAccess> {
  const headers: Record<string, string> = {};
  for (const header of access.headers) {
    const value = header.secret ? await secretValue(client, namespace, header.secret, signal) : header.value!;
    if (/[\r\n\0]/.test(value)) throw new Error(`the value for header ${header.name} contains CR, LF or NUL`);
    headers[header.name] = value;
  }
  if (access.bearerToken)
    headers['Authorization'] = `Bearer ${(await secretValue(client, namespace, access.bearerToken, signal)).trim()}`;
  if (access.basicAuth) {
    const user = await secretValue(client, namespace, access.basicAuth.username, signal);
    const password = await secretValue(client, namespace, access.basicAuth.password, signal);
    headers['Authorization'] = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  }
  const ca = access.ca?.secret
    ? await secretValue(client, namespace, access.ca.secret, signal)
    : access.ca?.configMap
      ? await configMapValue(client, namespace, access.ca.configMap, signal)
      : undefined;
  return { url: access.url, headers, ...(ca !== undefined ? { ca } : {}) };
}

/** The /api/v1/query endpoint under the configured URL, whose path may be a prefix (Mimir's /prometheus). */
export function queryEndpoint(base: URL): URL {
  const url = new URL(base.href);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/api/v1/query`;
  return url;
}

class RetryableError extends Error {}

function post(access: ResolvedAccess, form: string, timeoutMs: number, stop?: AbortSignal): Promise<unknown> {
  const url = queryEndpoint(access.url);
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = transport.request(
      url,
      {
        method: 'POST',
        headers: {
          ...access.headers,
          'Content-Type': 'application/x-www-form-urlencoded',
          'Content-Length': Buffer.byteLength(form),
          Accept: 'application/json',
        },
        timeout: timeoutMs,
        // The operator stopping ends an attempt in flight: a shutdown never waits out a query's timeout.
        signal: stop ? AbortSignal.any([stop, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs),
        ...(access.ca !== undefined && url.protocol === 'https:' ? { ca: access.ca } : {}),
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) {
            response.destroy();
            reject(new Error(`the answer is larger than ${MAX_ANSWER_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        response.on('error', (error) => reject(new RetryableError(error.message)));
        response.on('end', () => {
          const status = response.statusCode ?? 0;
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            // Prometheus answers JSON, errors included; anything else is a proxy or a wrong URL.
            const error = `HTTP ${status} from ${url.origin}${url.pathname}, not a Prometheus answer`;
            reject(status >= 500 || status === 429 ? new RetryableError(error) : new Error(error));
            return;
          }
          // 503 (not ready, overloaded) and 5xx are worth another try; 400/422 (bad PromQL) are not.
          if (status >= 500 || status === 429) reject(new RetryableError(`HTTP ${status}: ${summary(body)}`));
          else resolve(body);
        });
      },
    );
    request.on('timeout', () => request.destroy(new RetryableError(`no answer within ${timeoutMs} ms`)));
    request.on('error', (error) =>
      reject(error instanceof RetryableError ? error : new RetryableError(connectionError(error, url))),
    );
    request.end(form);
  });
}

function summary(body: unknown): string {
  const value = readQueryResult(body);
  return value.kind === 'error' ? value.message : 'unexpected answer';
}

function connectionError(error: Error, url: URL): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return `no answer from ${url.host} in time`;
  return `cannot reach ${url.host}${code ? ` (${code})` : ''}: ${error.message}`;
}

/** Waits `ms`, or less when `signal` aborts first. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

export interface InstantQuery {
  promql: string;
  /** Evaluation time, epoch ms; absent: Prometheus's own now (no clock of ours involved). */
  at?: number;
  timeoutMs: number;
  retries: number;
}

/**
 * One instant query, read as one value (promql.ts's rules). Retries a
 * connection failure, a timeout and a 5xx/429 up to `retries` times; a
 * query Prometheus rejects is an error at once (it will not heal).
 */
export async function instantQuery(
  access: ResolvedAccess,
  query: InstantQuery,
  signal?: AbortSignal,
): Promise<QueryValue> {
  const form = new URLSearchParams({
    query: query.promql,
    ...(query.at !== undefined ? { time: (query.at / 1000).toFixed(3) } : {}),
    timeout: `${Math.max(1, Math.floor(query.timeoutMs / 1000))}s`,
  }).toString();
  let lastError = '';
  let attempts = 0;
  for (let attempt = 0; attempt <= query.retries; attempt++) {
    attempts = attempt + 1;
    if (signal?.aborted) return { kind: 'error', message: 'stopped' };
    if (attempt > 0) await pause(RETRY_STEP_MS * attempt, signal);
    if (signal?.aborted) return { kind: 'error', message: 'stopped' };
    try {
      return readQueryResult(await post(access, form, query.timeoutMs, signal));
    } catch (error) {
      if (signal?.aborted) return { kind: 'error', message: 'stopped' };
      lastError = (error as Error).message;
      if (!(error instanceof RetryableError)) break;
    }
  }
  const tries = attempts > 1 ? ` (after ${attempts} attempts)` : '';
  return { kind: 'error', message: `${lastError}${tries}` };
}
