// HTTP calls to pods: the prepare-downscale webhook and delayed downscale
// both ask pods to prepare for (or cancel) a shutdown. One implementation so
// the security rule holds everywhere: a call goes to the pod's own IP from
// the API, never to an address taken from an annotation. The URL's host (the
// pod's DNS name) travels as the Host header, as if it had been dialled by
// name, so a pod behind a name-based router still sees the expected host.
//
// As rollout-operator's pod HTTP client: every call carries X-Cluster (the
// pod's namespace, which is the label the namespace's rollout-operator sends:
// its own namespace), a pod refusing it with dskit's 511 fails the call, and
// each call is measured in rollout_operator_pod_http_client_request_duration_seconds.
import { http } from '../runtime/http/nodehttp.ts';
import { Histogram, type Registry } from 'prom-client';
import type { FlagSet } from '../runtime/flags/flagset.ts';
import {
  CLUSTER_HEADER,
  type ClusterRejections,
  clusterRejections,
  uncountedRejections,
} from '../runtime/http/clusterlabel.ts';
import type { Pod } from '../runtime/kube/types.ts';
import type { Runtime } from '../runtime/operator.ts';
import { type Span, tracer } from '../runtime/tracing/tracing.ts';

export interface PodCallConfig {
  /** -kubernetes.cluster-domain: the suffix of pod DNS names (in the Host header). */
  clusterDomain: string;
  /** -pods.client-timeout: the deadline of each call. */
  podTimeoutMs: number;
}

/** rollout-operator's flags for pod calls, shared by the webhook and the replica coordinator. */
export function registerPodCallFlags(fs: FlagSet): { read: () => PodCallConfig; validate: () => string | undefined } {
  const clusterDomain = fs.string(
    'kubernetes.cluster-domain',
    'cluster.local.',
    'Kubernetes cluster domain, for pod DNS names.',
  );
  const podTimeout = fs.duration(
    'pods.client-timeout',
    5_000,
    'Timeout of each HTTP call to a pod (prepare-downscale, delayed downscale).',
  );
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

// dskit's default buckets (.005 … 100 s), which rollout-operator uses.
const DSKIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100];

export interface PodClientOptions {
  /** Where dskit's refusals of X-Cluster are counted and logged (default: recognised only). */
  rejections?: ClusterRejections;
  /** Where the call durations go (default: not measured). */
  registry?: Registry;
}

/** Calls to pods: one per process (podClient(runtime)); the default one, for tests, measures nothing. */
export class PodClient {
  private readonly rejections: ClusterRejections;
  private readonly durations: Histogram | undefined;

  constructor(options: PodClientOptions = {}) {
    this.rejections = options.rejections ?? uncountedRejections;
    this.durations =
      options.registry &&
      new Histogram({
        name: 'rollout_operator_pod_http_client_request_duration_seconds',
        help: 'Time in seconds of HTTP calls to pods (prepare-downscale, delayed downscale), until the answer is read; status_code is "error" when none arrived or the pod refused the X-Cluster label.',
        labelNames: ['path', 'method', 'status_code'],
        buckets: DSKIT_BUCKETS,
        registers: [options.registry],
      });
  }

  call(call: PodCall): Promise<PodCallResult> {
    const t = tracer();
    if (t === undefined) return this.measured(call, undefined);
    const attributes = {
      'http.request.method': call.method,
      'url.full': call.url,
      'server.address': call.pod?.status?.podIP,
      'k8s.pod.name': call.podName,
      'k8s.namespace.name': call.pod?.metadata?.namespace,
    };
    return t.span(`HTTP ${call.method}`, { kind: 'client', attributes }, async (span) => {
      const result = await this.measured(call, span);
      if ('status' in result) {
        span.setAttributes({ 'http.response.status_code': result.status });
        if (result.status >= 400) span.fail(`HTTP ${result.status}`);
      } else {
        span.fail(result.error);
      }
      return result;
    });
  }

  private async measured(call: PodCall, span: Span | undefined): Promise<PodCallResult> {
    const started = performance.now();
    const { result, path } = await this.send(call, span);
    // rollout-operator labels the path as dialled (its raw URL path); nothing is measured for a call never sent.
    if (path !== undefined)
      this.durations?.observe(
        { path, method: call.method, status_code: 'status' in result ? String(result.status) : 'error' },
        (performance.now() - started) / 1000,
      );
    return result;
  }

  private send(call: PodCall, span: Span | undefined): Promise<{ result: PodCallResult; path?: string }> {
    const { url, pod, podName, method, timeoutMs, signal } = call;
    const ip = pod?.status?.podIP;
    if (!ip) return Promise.resolve({ result: { url, error: `pod ${podName} has no IP address` } });
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return Promise.resolve({ result: { url, error: `${JSON.stringify(url)} is not a URL` } });
    }
    if (target.protocol !== 'http:')
      return Promise.resolve({
        result: { url, error: `only http:// pod endpoints are supported, not ${target.protocol}` },
      });
    // Pods from the API always carry their namespace.
    const label = pod.metadata?.namespace;
    const path = target.pathname;
    return new Promise((resolve) => {
      let settled = false;
      let answered = false;
      // The socket timeout covers a silent pod; this overall deadline covers one that trickles.
      const deadline = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      const done = (result: PodCallResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        resolve({ result, path });
      };
      const req = http.request(
        {
          host: ip,
          port: target.port || 80,
          path: target.pathname + target.search,
          method,
          headers: {
            host: target.host,
            'content-type': 'application/json',
            'content-length': 0,
            ...(label ? { [CLUSTER_HEADER]: label } : {}),
            ...span?.headers(),
          },
          timeout: timeoutMs,
          signal,
        },
        (res) => {
          answered = true;
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            if (size >= MAX_POD_ANSWER_BYTES) return;
            chunks.push(chunk);
            size += chunk.length;
          });
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            const body = Buffer.concat(chunks).subarray(0, MAX_POD_ANSWER_BYTES).toString('utf8');
            const rejected = label
              ? this.rejections.check(label, status, res.headers['content-type'], body)
              : undefined;
            done(rejected === undefined ? { url, status, body } : { url, error: rejected });
          });
          res.on('error', (error) => done({ url, error: error.message }));
          res.on('close', () => done({ url, error: 'connection closed before the answer was complete' }));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on('error', (error) => done({ url, error: error.message }));
      req.on('close', () => {
        if (!answered) done({ url, error: 'connection closed before an answer' });
      });
      req.end();
    });
  }
}

const podClients = new WeakMap<Registry, PodClient>();

/** The process's pod client: X-Cluster, its refusals and durations as rollout-operator's. */
export function podClient(runtime: Pick<Runtime, 'registry' | 'logger'>): PodClient {
  let client = podClients.get(runtime.registry);
  if (!client) {
    client = new PodClient({
      rejections: clusterRejections(runtime.registry, runtime.logger),
      registry: runtime.registry,
    });
    podClients.set(runtime.registry, client);
  }
  return client;
}

/** Runs `work` over `items` with at most `limit` in flight; results in item order. */
export async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
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
