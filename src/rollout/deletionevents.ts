// Which DeletingPod Events a rollout's deletes make (issue 19). One Event per
// delete was 30 of the ~105 API requests of a 30-pod rollout, on top of the
// 30 deletes themselves, and used up the spam budget of a StatefulSet (25
// new Events, one back every 5 minutes) within two rollouts. Now, per
// StatefulSet and revision:
//   - the first delete is reported at once, as before ("deleting pod X for
//     revision R", the pod as the Event's related object);
//   - the deletes after it are gathered and reported together ("deleting
//     pods X, Y, Z for revision R") once WINDOW_MS has passed since the
//     StatefulSet's last DeletingPod Event, when its rollout completes
//     (before its RolloutComplete), when the group settles, or when this
//     replica stops leading.
// Every delete is named by exactly one Event (property-tested in
// test/rollout/deletionevents.test.ts), at most WINDOW_MS (plus one resync)
// after it happened. Pure: times come in as monotonic milliseconds.
import type { DeletionReason } from './planner.ts';

export const WINDOW_MS = 30_000;

export interface DeletedPod {
  pod: string;
  uid: string;
  reason: DeletionReason;
  detail?: string;
}

/** One DeletingPod Event to record. */
export interface DeletionReport {
  namespace: string;
  statefulSet: string;
  revision: string;
  pods: DeletedPod[];
}

interface Digest {
  group: string;
  namespace: string;
  statefulSet: string;
  revision: string;
  lastReport: number;
  held: DeletedPod[];
}

export class DeletionDigests {
  private readonly digests = new Map<string, Digest>();

  /** A pod of `statefulSet` was deleted for `revision`: what to report now. */
  deleted(
    where: { group: string; namespace: string; statefulSet: string; revision: string },
    pod: DeletedPod,
    now: number,
  ): DeletionReport[] {
    const key = JSON.stringify([where.namespace, where.statefulSet]);
    const reports: DeletionReport[] = [];
    let digest = this.digests.get(key);
    if (digest && digest.revision !== where.revision) {
      // A new revision: what is held of the old one is reported first.
      this.take(digest, now, reports);
      digest = undefined;
    }
    if (!digest) {
      this.digests.set(key, { ...where, lastReport: now, held: [] });
      reports.push({
        namespace: where.namespace,
        statefulSet: where.statefulSet,
        revision: where.revision,
        pods: [pod],
      });
      return reports;
    }
    digest.held.push(pod);
    // A window since the last report: this delete and those held go out together.
    if (now - digest.lastReport >= WINDOW_MS) this.take(digest, now, reports);
    return reports;
  }

  /** The gathered deletes whose window has passed; forgets StatefulSets quiet for a window. */
  due(now: number): DeletionReport[] {
    const reports: DeletionReport[] = [];
    for (const [key, digest] of this.digests) {
      if (now - digest.lastReport < WINDOW_MS) continue;
      this.take(digest, now, reports);
      if (digest.held.length === 0 && now - digest.lastReport >= WINDOW_MS) this.digests.delete(key);
    }
    return reports;
  }

  /** Everything gathered for one StatefulSet (its rollout completed). */
  flushStatefulSet(namespace: string, statefulSet: string, now: number): DeletionReport[] {
    const digest = this.digests.get(JSON.stringify([namespace, statefulSet]));
    const reports: DeletionReport[] = [];
    if (digest) this.take(digest, now, reports);
    return reports;
  }

  /** Everything gathered for a group's StatefulSets (it settled), or for all of them (leadership ends). */
  flush(now: number, group?: string): DeletionReport[] {
    const reports: DeletionReport[] = [];
    for (const digest of this.digests.values())
      if (group === undefined || digest.group === group) this.take(digest, now, reports);
    return reports;
  }

  private take(digest: Digest, now: number, reports: DeletionReport[]): void {
    if (digest.held.length === 0) return;
    reports.push({
      namespace: digest.namespace,
      statefulSet: digest.statefulSet,
      revision: digest.revision,
      pods: digest.held,
    });
    digest.held = [];
    digest.lastReport = now;
  }
}

/** Why a pod was deleted, when not simply for the update. */
function why(pod: DeletedPod): string {
  return pod.reason === 'update' ? '' : ` (already unavailable${pod.detail ? `: ${pod.detail}` : ''})`;
}

/** Room for the pods' names in a note (the API allows 1 KiB; the rest of the note is short). */
const NAMES_LIMIT = 800;

/** The Event's note: "deleting pod X for revision R" or "deleting pods X, Y (already unavailable), Z for revision R". */
export function deletionNote(report: DeletionReport): string {
  const [first] = report.pods;
  if (report.pods.length === 1 && first)
    return `deleting pod ${first.pod} for revision ${report.revision}${why(first)}`;
  const names: string[] = [];
  let length = 0;
  for (const pod of report.pods) {
    const name = `${pod.pod}${why(pod)}`;
    if (length + name.length > NAMES_LIMIT) break;
    names.push(name);
    length += name.length + 2;
  }
  const more = report.pods.length - names.length;
  const list = more > 0 ? `${names.join(', ')} and ${more} more` : names.join(', ');
  return `deleting pods ${list} for revision ${report.revision}`;
}
