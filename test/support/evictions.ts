// Evictions as kubectl drain, the cluster autoscaler or Karpenter send them:
// a POST to the pod's eviction subresource, answered with the HTTP code.
import { randomBytes } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../src/runtime/kube/errors.ts';
import { waitFor } from '../cluster/probe.ts';

/** Evicts `pod`, retried as kubectl drain retries a 429, until an eviction is allowed. */
export function evictOnceAllowed(kube: KubeClient, namespace: string, pod: string, description: string): Promise<true> {
  return waitFor(description, async () => (await evict(kube, namespace, pod)).code === 201, {
    timeoutMs: 15_000,
    intervalMs: 250,
  });
}

/** POSTs an Eviction; resolves to the HTTP code (201 when allowed) and the message. */
export async function evict(
  kube: KubeClient,
  namespace: string,
  name: string,
  dryRun = false,
): Promise<{ code: number; message: string }> {
  try {
    await kube.request('POST', `/api/v1/namespaces/${namespace}/pods/${name}/eviction`, {
      body: {
        apiVersion: 'policy/v1',
        kind: 'Eviction',
        metadata: { name, namespace },
        ...(dryRun ? { deleteOptions: { dryRun: ['All'] } } : {}),
      },
    });
    return { code: 201, message: '' };
  } catch (error) {
    if (error instanceof KubeApiError) return { code: error.code, message: error.message };
    throw error;
  }
}

/**
 * An eviction's AdmissionReview sent straight to one replica's webhook, as
 * the kube-apiserver sends it (TLS not verified: the replica's own
 * certificate); `headers` adds, e.g., a traceparent.
 */
export async function reviewEviction(
  port: number,
  namespace: string,
  pod: string,
  headers: Record<string, string> = {},
): Promise<{ allowed: boolean; code?: number; message?: string }> {
  const body = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomBytes(8).toString('hex'),
      kind: { group: 'policy', version: 'v1', kind: 'Eviction' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      subResource: 'eviction',
      name: pod,
      namespace,
      operation: 'CREATE',
      userInfo: { username: 'test' },
      object: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod, namespace } },
      dryRun: false,
    },
  });
  const text = await new Promise<string>((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path: '/admission/pod-eviction',
        method: 'POST',
        rejectUnauthorized: false,
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let data = '';
        res
          .setEncoding('utf8')
          .on('data', (c: string) => (data += c))
          .on('end', () => resolve(data));
      },
    );
    req.on('error', reject).end(body);
  });
  const response = (
    JSON.parse(text) as { response: { allowed: boolean; status?: { code?: number; message?: string } } }
  ).response;
  return {
    allowed: response.allowed,
    ...(response.status?.code ? { code: response.status.code } : {}),
    ...(response.status?.message ? { message: response.status.message } : {}),
  };
}
