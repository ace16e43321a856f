// Whether a RolloutHealthCheck's query endpoint answers, asked from where
// the doctor runs: GET <prometheusURL>/api/v1/status/buildinfo, and when
// that path is unknown (a 404: some Prometheus-compatible servers lack it)
// a trivial POST /api/v1/query with query=1. Any HTTP answer counts as
// reachable, a 401 or 403 included: the doctor sends no credentials, since
// it never reads Secret values, and a tenant header or token is the
// operator's business. Only the status line is read, and each request is
// bounded by one short timeout, so a black-holed address costs seconds,
// not the request timeout of the Kubernetes API.
import http from 'node:http';
import https from 'node:https';
import type { EndpointProbe } from './checks/healthchecks.ts';

export const PROBE_TIMEOUT_MS = 2_000;

/** Probes one endpoint; never throws. */
export type EndpointProber = (url: URL) => Promise<EndpointProbe>;

const TLS_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

type Answer = { status: number } | { reason: string; tls: boolean };

function reasonOf(error: NodeJS.ErrnoException, target: URL, timeoutMs: number): { reason: string; tls: boolean } {
  const code = error.code ?? '';
  if (error.name === 'AbortError' || error.name === 'TimeoutError' || code === 'ABORT_ERR')
    return { reason: `no answer within ${timeoutMs / 1000}s`, tls: false };
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    return { reason: `the name ${target.hostname} does not resolve (${code})`, tls: false };
  if (code === 'ECONNREFUSED') return { reason: `connection refused by ${target.host}`, tls: false };
  if (TLS_CODES.has(code)) return { reason: `its TLS certificate is not trusted (${code})`, tls: true };
  return { reason: `${code ? `${code}: ` : ''}${error.message}`, tls: false };
}

function send(target: URL, method: 'GET' | 'POST', timeoutMs: number): Promise<Answer> {
  const body = method === 'POST' ? 'query=1' : undefined;
  return new Promise((resolve) => {
    const request = (target.protocol === 'https:' ? https : http).request(
      target,
      {
        method,
        signal: AbortSignal.timeout(timeoutMs),
        headers: {
          'user-agent': 'stateward-doctor',
          accept: 'application/json',
          ...(body ? { 'content-type': 'application/x-www-form-urlencoded', 'content-length': body.length } : {}),
        },
      },
      (response) => {
        // The status line is the answer; the body is not wanted.
        resolve({ status: response.statusCode ?? 0 });
        response.destroy();
      },
    );
    request.on('error', (error: NodeJS.ErrnoException) => resolve(reasonOf(error, target, timeoutMs)));
    request.end(body);
  });
}

/** `path` under the endpoint's own path (Mimir serves the API under /prometheus). */
function under(base: URL, path: string): URL {
  const url = new URL(base.href);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${path}`;
  return url;
}

/** GET buildinfo, then POST query=1 if that path is unknown. */
export async function probeQueryEndpoint(base: URL, timeoutMs = PROBE_TIMEOUT_MS): Promise<EndpointProbe> {
  const url = base.href;
  let answer = await send(under(base, '/api/v1/status/buildinfo'), 'GET', timeoutMs);
  if ('status' in answer && answer.status === 404) answer = await send(under(base, '/api/v1/query'), 'POST', timeoutMs);
  if ('status' in answer) return { url, outcome: 'answered', status: answer.status };
  return { url, outcome: answer.tls ? 'untrusted' : 'unreachable', reason: answer.reason };
}
