// The view of workloads every capability shares: StatefulSets and their pods
// in the managed namespaces, indexed the ways capabilities look them up.
import type { Informer } from '../runtime/informer/informer.ts';
import { indexByLabel, indexByNodeName, indexByOwnerUid, stripManagedFields } from '../runtime/informer/store.ts';
import { resources, type Pod, type StatefulSet } from '../runtime/kube/types.ts';
import type { Capability, Runtime } from '../runtime/operator.ts';
import { observeLastDownscales } from '../downscale/clocksteps.ts';
import type { Seen } from '../runtime/sightings.ts';
import { lastDownscalesFromAnnotations } from '../downscale/mintime.ts';

export const ROLLOUT_GROUP_LABEL = 'rollout-group';

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
    statefulSets: runtime.informers<StatefulSet>(resources.statefulSets, { indexers: statefulSetIndexers, transform: stripManagedFields }),
    pods: runtime.informers<Pod>(resources.pods, { indexers: podIndexers, transform: stripManagedFields }),
  };
}

/**
 * Registers the shared workload caches, so /ready waits for them, and shows
 * every StatefulSet's grafana.com/last-downscale to the min-time sightings as
 * it changes, on every replica: a watch delivers a new stamp moments after
 * it was written, so one that claims to be much older shows the writer's
 * clock is behind, even on a replica that only serves the prepare-downscale
 * webhook (src/runtime/sightings.ts).
 */
export const workloadsCapability: Capability = {
  name: 'workloads',
  setup(runtime) {
    const see = (set: StatefulSet, seen: Seen) =>
      observeLastDownscales(runtime.sightings, { namespace: set.metadata?.namespace ?? '', statefulSets: [set.metadata?.name ?? ''], lastDownscales: lastDownscalesFromAnnotations([set]), source: 'annotation', seen });
    for (const informer of workloadCache(runtime).statefulSets) {
      // The initial list shows stamps of any age; a later delivery is a change the watch just saw.
      informer.addHandlers({ onAdd: (set, initial) => see(set, initial ? 'read' : 'event'), onUpdate: (_old, set) => see(set, 'event') });
    }
    return {};
  },
};
