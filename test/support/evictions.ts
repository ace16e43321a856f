// Evictions as kubectl drain, the cluster autoscaler or Karpenter send them:
// a POST to the pod's eviction subresource, answered with the HTTP code.
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../src/runtime/kube/errors.ts';

/** POSTs an Eviction; resolves to the HTTP code (201 when allowed) and the message. */
export async function evict(kube: KubeClient, namespace: string, name: string, dryRun = false): Promise<{ code: number; message: string }> {
  try {
    await kube.request('POST', `/api/v1/namespaces/${namespace}/pods/${name}/eviction`, {
      body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace }, ...(dryRun ? { deleteOptions: { dryRun: ['All'] } } : {}) },
    });
    return { code: 201, message: '' };
  } catch (error) {
    if (error instanceof KubeApiError) return { code: error.code, message: error.message };
    throw error;
  }
}
