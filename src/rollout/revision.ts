// Advancing a fully rolled StatefulSet's status.currentRevision to its
// updateRevision (the StatefulSet controller never does it for OnDelete,
// kubernetes#73492) without fighting the StatefulSet controller over the
// object, and without a conflict ever counting as a failed reconcile.
//
// Why a conditional PUT, and not a write that cannot conflict:
// - The only verb rollout-operator's Role grants (and ours) on
//   statefulsets/status is `update`, so a merge patch of the one field,
//   which would be the natural last-writer-wins write, needs a permission a
//   drop-in must not require.
// - A PUT without metadata.resourceVersion is accepted for StatefulSets
//   (unconditional update), but it replaces the WHOLE status: our cached
//   replicas/readyReplicas/updatedReplicas would overwrite the newer counts
//   the StatefulSet controller has written meanwhile. Last-writer-wins is
//   not safe for that.
// So the write stays a PUT with a resourceVersion, and the two ways it used
// to conflict are handled:
// 1. Our own informer lags our write: after a successful PUT, a reconcile
//    that runs before the watch event arrives still sees the old object (the
//    old resourceVersion, currentRevision not advanced), plans the advance
//    again and PUTs with a resourceVersion that is certainly stale: a 409 per
//    such reconcile. We remember which resourceVersions our write superseded
//    and do not write again over them.
// 2. The StatefulSet controller writes status (ready/available/current
//    counts) at the very moments we act (a pod became Ready, we advanced the
//    revision). On a 409 we re-read the live object and, if the advance is
//    still due, retry once on top of it. A second conflict means the
//    controller is still busy with the object: the group is requeued (its
//    next write is a watch event anyway), and that is not a failure.
import { isConflict, isNotFound } from '../runtime/kube/errors.ts';
import type { StatefulSet } from '../runtime/kube/types.ts';

export interface StatusClient {
  /** The live object: a GET, not the cache. */
  read(namespace: string, name: string): Promise<StatefulSet>;
  /** PUT of the status subresource, conditional on metadata.resourceVersion. */
  writeStatus(set: StatefulSet): Promise<StatefulSet>;
}

export type AdvanceOutcome =
  /** currentRevision was written. */
  | 'advanced'
  /** We already wrote it over this very object; the cache has not caught up yet. */
  | 'already-written'
  /** Nothing to do (anymore): advanced by someone, the update revision moved on, the status is stale, or the object is gone. */
  | 'not-needed'
  /** The object kept changing under us; requeue and decide again on a fresh snapshot. */
  | 'conflict';

/** The advance is due on `set`: its status is current and its updateRevision is still `revision`. */
function due(set: StatefulSet, revision: string): boolean {
  const status = set.status;
  if (!status || status.updateRevision !== revision || status.currentRevision === revision) return false;
  const generation = set.metadata?.generation;
  return generation === undefined || status.observedGeneration === undefined || status.observedGeneration >= generation;
}

export class CurrentRevisionWriter {
  private readonly client: StatusClient;
  /** StatefulSet uid → the revision we wrote and the resourceVersions that write superseded. */
  private readonly written = new Map<string, { revision: string; supersededVersions: Set<string> }>();

  constructor(client: StatusClient) {
    this.client = client;
  }

  /**
   * Sets status.currentRevision of `cached` (the informer's copy) to
   * `revision`. Throws only errors other than a conflict or a vanished object.
   */
  async advance(cached: StatefulSet, revision: string): Promise<AdvanceOutcome> {
    const uid = cached.metadata?.uid ?? '';
    const namespace = cached.metadata?.namespace ?? '';
    const name = cached.metadata?.name ?? '';
    const previous = this.written.get(uid);
    if (previous?.revision === revision && previous.supersededVersions.has(cached.metadata?.resourceVersion ?? ''))
      return 'already-written';
    // The cache moved past our write (or we never wrote): decide on what it says now.
    this.written.delete(uid);
    if (!due(cached, revision)) return 'not-needed';
    let base = cached;
    const superseded = new Set<string>([cached.metadata?.resourceVersion ?? '']);
    for (let attempt = 0; ; attempt++) {
      const status = base.status;
      if (!status) return 'not-needed';
      try {
        await this.client.writeStatus({ ...base, status: { ...status, currentRevision: revision } });
        this.written.set(uid, { revision, supersededVersions: superseded });
        return 'advanced';
      } catch (error) {
        if (isNotFound(error)) return 'not-needed';
        if (!isConflict(error)) throw error;
        if (attempt >= 1) return 'conflict';
      }
      try {
        base = await this.client.read(namespace, name);
      } catch (error) {
        if (isNotFound(error)) return 'not-needed';
        throw error;
      }
      // A new StatefulSet under the same name, or the advance no longer due
      // (done by the controller, a new template since): nothing to write.
      if (base.metadata?.uid !== uid || !due(base, revision)) return 'not-needed';
      superseded.add(base.metadata?.resourceVersion ?? '');
    }
  }

  /** Drops what is remembered about a StatefulSet (deleted). */
  forget(uid: string): void {
    this.written.delete(uid);
  }
}
