// HTTP calls to pods: the prepare-downscale webhook and delayed downscale
// both ask pods to prepare for (or cancel) a shutdown. One implementation so
// the security rule holds everywhere: a call goes to the pod's own IP from
// the API, never to an address taken from an annotation. The URL's host (the
// pod's DNS name) travels as the Host header, as if it had been dialled by
// name, so a pod behind a name-based router still sees the expected host.
import { request as httpRequest } from 'node:http';
import type { FlagSet } from '../runtime/flags/flagset.ts';
import type { Pod } from '../runtime/kube/types.ts';

export interface PodCallConfig {
  /** -kubernetes.cluster-domain: the suffix of pod DNS names (in the Host header). */
  clusterDomain: string;
  /** -pods.client-timeout: the deadline of each call. */
  podTimeoutMs: number;
}

/** rollout-operator's flags for pod calls, shared by the webhook and the replica coordinator. */
export function registerPodCallFlags(fs: FlagSet): { read: () => PodCallConfig; validate: () => string | undefined } {
  const clusterDomain = fs.string('kubernetes.cluster-domain', 'cluster.local.', 'Kubernetes cluster domain, for pod DNS names.');
  const podTimeout = fs.duration('pods.client-timeout', 5_000, 'Timeout of each HTTP call to a pod (prepare-downscale, delayed downscale).');
  return {
    read: () => ({ clusterDomain: clusterDomain.value, podTimeoutMs: podTimeout.value }),
    validate: () => {
      if (!clusterDomain.value) return '-kubernetes.cluster-domain must not be empty';
      if (podTimeout.value <= 0) return '-pods.client-timeout must be greater than 0';
      return undefined;
    },
  };
}

export type PodCallResult = { url: string; status: number; body: string } | { url: string; error: string };

export interface PodCall {
  method: 'POST' | 'DELETE';
  /** http://<pod FQDN>[:port]/path — only its port, path and query are dialled. */
  url: string;
  /** The pod as the API shows it; its status.podIP is the only address used. */
  pod: Pod | undefined;
  podName: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** Answers are small JSON documents; anything larger is cut here, not buffered whole. */
export const MAX_POD_ANSWER_BYTES = 64 * 1024;

export function callPod(call: PodCall): Promise<PodCallResult> {
  const { url, pod, podName, method, timeoutMs, signal } = call;
  const ip = pod?.status?.podIP;
  if (!ip) return Promise.resolve({ url, error: `pod ${podName} has no IP address` });
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return Promise.resolve({ url, error: `${JSON.stringify(url)} is not a URL` });
  }
  if (target.protocol !== 'http:') return Promise.resolve({ url, error: `only http:// pod endpoints are supported, not ${target.protocol}` });
  return new Promise((resolve) => {
    let settled = false;
    let answered = false;
    // The socket timeout covers a silent pod; this overall deadline covers one that trickles.
    const deadline = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const done = (result: PodCallResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      resolve(result);
    };
    const req = httpRequest({
      host: ip,
      port: target.port || 80,
      path: target.pathname + target.search,
      method,
      headers: { host: target.host, 'content-type': 'application/json', 'content-length': 0 },
      timeout: timeoutMs,
      signal,
    }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        if (size >= MAX_POD_ANSWER_BYTES) return;
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on('end', () => done({ url, status: res.statusCode ?? 0, body: Buffer.concat(chunks).subarray(0, MAX_POD_ANSWER_BYTES).toString('utf8') }));
      res.on('error', (error) => done({ url, error: error.message }));
      res.on('close', () => done({ url, error: 'connection closed before the answer was complete' }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (error) => done({ url, error: error.message }));
    req.on('close', () => {
      if (!answered) done({ url, error: 'connection closed before an answer' });
    });
    req.end();
  });
}

/** Runs `work` over `items` with at most `limit` in flight; results in item order. */
export async function mapBounded<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
  return results;
}
