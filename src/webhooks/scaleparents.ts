// Where no-downscale learns the labels of a /scale request's parent. A
// /scale AdmissionReview carries a Scale, which has no labels, so the
// parent must be looked up. rollout-operator GETs it on every request,
// through the same client-side rate limit as everything else; under a burst
// those GETs queue past the webhook's deadline and the downscale goes through.
// Here the parents in the watched namespaces come from informers
// (metadata-only for Deployments and ReplicaSets; the shared StatefulSet
// cache), so a decision costs no API call; a parent not cached (outside the
// watched namespaces, or created since the last watch event) is read through
// a client with a rate limit of its own, which nothing else can exhaust.
import { cached } from '../runtime/informer/informer.ts';
import { stripManagedFields } from '../runtime/informer/store.ts';
import { resources, type KubeObject, type ResourceType } from '../runtime/kube/types.ts';
import type { Runtime } from '../runtime/operator.ts';
import { PerKeyTokenBuckets } from '../runtime/workqueue/tokenbucket.ts';
import { workloadCache } from '../workloads/cache.ts';
import type { NoDownscaleDeps } from './nodownscale.ts';

const TYPES: Record<string, ResourceType> = {
  statefulsets: resources.statefulSets,
  deployments: resources.deployments,
  replicasets: resources.replicaSets,
};

export function scaleParentLabels(runtime: Runtime): NoDownscaleDeps['getParentLabels'] {
  const caches: Record<string, (namespace: string, name: string) => KubeObject | undefined> = {
    statefulsets: cached(workloadCache(runtime).statefulSets),
    // Optional: rollout-operator's own Role grants nothing on Deployments and
    // ReplicaSets, and a user swapping the image must still start (a 403 is
    // an empty cache; the lookup then falls through to the live read).
    deployments: cached(
      runtime.informers<KubeObject>(resources.deployments, {
        metadataOnly: true,
        transform: stripManagedFields,
        optional: true,
      }),
    ),
    replicasets: cached(
      runtime.informers<KubeObject>(resources.replicaSets, {
        metadataOnly: true,
        transform: stripManagedFields,
        optional: true,
      }),
    ),
  };
  const { clientQps, clientBurst } = runtime.config;
  const live = runtime.client.withLimiter(
    clientQps > 0 ? new PerKeyTokenBuckets(clientQps, clientBurst, runtime.clock) : undefined,
  );
  return async (resource, namespace, name, signal) => {
    const type = TYPES[resource];
    if (!type) throw new Error(`unsupported resource ${resource}`);
    const parent =
      caches[resource]?.(namespace, name) ??
      (await live.get<KubeObject>(type, { namespace, name }, { signal, metadataOnly: true }));
    return parent.metadata?.labels;
  };
}
