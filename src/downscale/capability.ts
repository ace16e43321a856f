// Replica coordination as its own capability: zones following a leader or a
// reference resource's scale subresource, min-time between zone downscales,
// and delayed downscales (coordination/). The rollout controller moves a
// group's replicas before it rolls the group, as rollout-operator does, but
// only through the interface it owns: main.ts builds one coordination per
// operator (createReplicaCoordination) and hands it to this capability and to
// the rollout controller; without it, the controller runs without one.
import type { Capability, Runtime } from '../runtime/operator.ts';
import type { StatefulSet } from '../runtime/kube/types.ts';
import type { Seen } from '../runtime/sightings.ts';
import { workloadCache } from '../workloads/cache.ts';
import type { PodCallConfig } from '../workloads/podclient.ts';
import { observeLastDownscales } from './clocksteps.ts';
import { lastDownscalesFromAnnotations, minTimeSetting } from './mintime.ts';
import { MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY } from '../vocabulary/keys.ts';
import { ReplicaCoordinator } from './coordination/coordinator.ts';
import { coordinatesReplicas } from './coordination/scalingfields.ts';

export interface ReplicaCoordination {
  /**
   * Sets the replicas of a group's StatefulSets (the group as cached);
   * true when it changed something, and the group is rolled on the
   * reconcile that change triggers.
   */
  adjust(group: StatefulSet[]): Promise<boolean>;
  /**
   * Whether replicas of the group may change with something other than its
   * own objects' events (a leader, a reference resource, a clock): such a
   * group is reconciled on every resync.
   */
  involves(group: StatefulSet[]): boolean;
  /** `listener` is called when a StatefulSet's group needs another reconcile (a delayed downscale's pod answers arrived). */
  onRequeue(listener: (namespace: string, statefulSet: string) => void): void;
  /** Abandons delayed-downscale pod calls in flight (leadership ended). */
  stop(): void;
}

/** The replica coordination of one operator: build it once and hand it to whoever needs it. */
export function createReplicaCoordination(runtime: Runtime, podCalls: PodCallConfig): ReplicaCoordination {
  const listeners: ((namespace: string, statefulSet: string) => void)[] = [];
  const coordinator = new ReplicaCoordinator(runtime, {
    podCalls,
    requeue: (namespace, statefulSet) => {
      for (const listener of listeners) listener(namespace, statefulSet);
    },
  });
  return {
    adjust: (group) => coordinator.adjust(group),
    involves: (group) => group.some(coordinatesReplicas),
    onRequeue: (listener) => void listeners.push(listener),
    stop: () => coordinator.stop(),
  };
}

export function replicaCoordinationCapability(coordination: (runtime: Runtime) => ReplicaCoordination): Capability {
  return {
    name: 'replica-coordination',
    setup(runtime) {
      showStampsToSightings(runtime);
      warnOfMinTimeLabel(runtime);
      const coordinator = coordination(runtime);
      return {
        // Leadership ended: abandon delayed-downscale pod calls in flight; the next leader starts from what the pods say.
        lead: (signal) =>
          new Promise<void>((resolve) =>
            signal.addEventListener(
              'abort',
              () => {
                coordinator.stop();
                resolve();
              },
              { once: true },
            ),
          ),
      };
    },
  };
}

/**
 * Shows every StatefulSet's grafana.com/last-downscale to the min-time
 * sightings as it changes, on every replica: a watch delivers a new stamp
 * moments after it was written, so one that claims to be much older shows the
 * writer's clock is behind, even on a replica that only serves the
 * prepare-downscale webhook (src/runtime/sightings.ts). Setup runs on every
 * replica, leader or not.
 */
function showStampsToSightings(runtime: Runtime): void {
  const see = (set: StatefulSet, seen: Seen) =>
    observeLastDownscales(runtime.sightings, {
      namespace: set.metadata?.namespace ?? '',
      statefulSets: [set.metadata?.name ?? ''],
      lastDownscales: lastDownscalesFromAnnotations([set]),
      source: 'annotation',
      seen,
    });
  for (const informer of workloadCache(runtime).statefulSets) {
    // The initial list shows stamps of any age; a later delivery is a change the watch just saw.
    informer.addHandlers({
      onAdd: (set, initial) => see(set, initial ? 'read' : 'event'),
      onUpdate: (_old, set) => see(set, 'event'),
    });
  }
}

/**
 * The label form of grafana.com/min-time-between-zones-downscale is still
 * read (when no annotation is set) but deprecated since rollout-operator
 * v0.39 (#463): say so once, at the first StatefulSet still using it, as
 * rollout-operator does. Once per operator, which is once per process
 * outside tests: repeating it for every StatefulSet of a Mimir install would
 * bury the log; `stateward doctor` lists each of them with its fix.
 */
function warnOfMinTimeLabel(runtime: Runtime): void {
  let warned = false;
  const check = (set: StatefulSet) => {
    if (warned || minTimeSetting(set)?.from !== 'label') return;
    warned = true;
    const namespace = set.metadata?.namespace ?? '';
    const name = set.metadata?.name ?? '';
    const value = set.metadata?.labels?.[MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY] ?? '';
    runtime.logger.warn(
      `${MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY} is set as a label, which is deprecated: it is read from the label only while no annotation of that key is set (rollout-operator v0.39 reads the annotation first); move it to an annotation. Logged once; stateward doctor lists every StatefulSet still using the label`,
      {
        statefulset: `${namespace}/${name}`,
        fix: `kubectl -n ${namespace} annotate statefulset/${name} ${MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY}=${value} && kubectl -n ${namespace} label statefulset/${name} ${MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY}-`,
      },
    );
  };
  for (const informer of workloadCache(runtime).statefulSets) {
    informer.addHandlers({ onAdd: (set) => check(set), onUpdate: (_old, set) => check(set) });
  }
}
