// The start stamps of a health-gated group (rollout-operator's
// grafana.com/rollout-health-check-started-at, plus Stateward's revision
// companion), written on a StatefulSet before its first pod of a rollout is
// deleted and removed when the group's rollout is complete.
//
// The stamp is written before the deletes, not after: a StatefulSet that
// rolled without one would make the next one look like the first of a
// rollout, which is never gated. A stamp that cannot be written therefore
// holds the deletes (the group is reconciled again). Groups with no
// StatefulSet bound to a check get no writes at all.
import type { KubeClient } from '../../runtime/kube/client.ts';
import { resources } from '../../runtime/kube/types.ts';
import { HEALTH_CHECK_STARTED_AT_ANNOTATION, HEALTH_CHECK_STARTED_REVISION_ANNOTATION } from '../../vocabulary/keys.ts';
import { formatRfc3339 } from '../../vocabulary/rfc3339.ts';
import type { Plan } from '../planner.ts';
import type { GroupSnapshot } from '../snapshot.ts';

const gated = (snapshot: GroupSnapshot) => snapshot.statefulSets.some((s) => s.healthCheck !== undefined);

/** The StatefulSet the plan starts deleting pods of without a current stamp, if the group is gated. */
export function stampNeeded(
  plan: Plan,
  snapshot: GroupSnapshot,
): { statefulSet: string; revision: string } | undefined {
  if (!gated(snapshot) || plan.rolling === undefined || plan.deletions.length === 0) return undefined;
  const set = snapshot.statefulSets.find((s) => s.name === plan.rolling);
  if (!set || set.startedAt !== undefined || set.updateRevision === '') return undefined;
  return { statefulSet: set.name, revision: set.updateRevision };
}

/** StatefulSets whose stamps a complete rollout leaves behind. */
export function stampsToClear(plan: Plan, snapshot: GroupSnapshot): string[] {
  if (!plan.complete) return [];
  return snapshot.statefulSets.filter((s) => s.startedAt !== undefined || s.staleStamp).map((s) => s.name);
}

export async function writeStamp(
  client: KubeClient,
  namespace: string,
  stamp: { statefulSet: string; revision: string },
  now: number,
): Promise<void> {
  await client.patch(resources.statefulSets, { namespace, name: stamp.statefulSet }, 'merge', {
    metadata: {
      annotations: {
        [HEALTH_CHECK_STARTED_AT_ANNOTATION]: formatRfc3339(now),
        [HEALTH_CHECK_STARTED_REVISION_ANNOTATION]: stamp.revision,
      },
    },
  });
}

export async function clearStamp(client: KubeClient, namespace: string, statefulSet: string): Promise<void> {
  await client.patch(resources.statefulSets, { namespace, name: statefulSet }, 'merge', {
    metadata: {
      annotations: { [HEALTH_CHECK_STARTED_AT_ANNOTATION]: null, [HEALTH_CHECK_STARTED_REVISION_ANNOTATION]: null },
    },
  });
}
