// The view of workloads every capability shares: StatefulSets and their pods
// in the managed namespaces, indexed the ways capabilities look them up.
import type { Informer } from '../runtime/informer/informer.ts';
import { indexByLabel, indexByNodeName, indexByOwnerUid, stripManagedFields } from '../runtime/informer/store.ts';
import { resources, type Pod, type StatefulSet } from '../runtime/kube/types.ts';
import type { Capability, Runtime } from '../runtime/operator.ts';
import { ROLLOUT_GROUP_LABEL } from '../vocabulary/keys.ts';

export const INDEX = {
  podsByOwner: 'owner-uid',
  /** Pods with no controller ownerReference, under the single value "". */
  orphanPods: 'orphan',
  podsByNode: 'node',
  setsByGroup: 'rollout-group',
} as const;

export interface WorkloadCache {
  statefulSets: Informer<StatefulSet>[];
  pods: Informer<Pod>[];
}

// Created once: every caller asks for the shared informers with these very
// functions, which is how the runtime knows the requests agree.
const statefulSetIndexers = { [INDEX.setsByGroup]: indexByLabel(ROLLOUT_GROUP_LABEL) };
const podIndexers = {
  [INDEX.podsByOwner]: indexByOwnerUid,
  [INDEX.podsByNode]: indexByNodeName,
  [INDEX.orphanPods]: (p: Pod) => (p.metadata?.ownerReferences?.some((r) => r.controller) ? [] : ['']),
};

export function workloadCache(runtime: Runtime): WorkloadCache {
  return {
    statefulSets: runtime.informers<StatefulSet>(resources.statefulSets, {
      indexers: statefulSetIndexers,
      transform: stripManagedFields,
    }),
    pods: runtime.informers<Pod>(resources.pods, { indexers: podIndexers, transform: stripManagedFields }),
  };
}

/** Registers the shared workload caches, so /ready waits for them. */
export const workloadsCapability: Capability = {
  name: 'workloads',
  setup(runtime) {
    workloadCache(runtime);
    return {};
  },
};
