// How a CronJob and a Job are restarted, as pure manifests and steps.
//
// CronJob: a Job is started at once from the CronJob's jobTemplate (what
// `kubectl create job --from=cronjob/x` and Reloader do), then the applied
// checksums are recorded on the CronJob. Exactly once without a transaction:
// the Job's name is a function of the CronJob, the checksums being applied
// and the name of the last Job a restart started (kept beside the record).
// A crash, a conflict or a new leader between the create and the record
// decides the same thing again, creates the same name, gets AlreadyExists
// (= already started) and then writes the record. The last Job's name is in
// the hash so that configs going A→B→A→B start a third Job, not a name that
// may still exist from the first.
//
// Job: deleted and created again from a cleaned copy of itself (Reloader's
// way; a Job's template cannot be changed). The create cannot precede the
// delete (same name), so the intent is made durable on the Job first:
//   1. mark: one merge patch (resourceVersion precondition) adds our
//      finalizer and the checksums being applied (RECREATE_INTENT);
//   2. delete (background propagation, uid precondition): the finalizer
//      keeps the old Job, spec and all, visible as `deleting`;
//   3. release and create: the finalizer comes off (resourceVersion
//      precondition) and the cleaned Job, carrying the intent as its record,
//      is created.
// Each step is read back from the Job itself, so an operator that dies after
// 1 or 2 finishes the job on its next look. What remains: a death in the
// moment between 3's release and its create loses the re-creation (the old
// Job is gone and nothing else holds the manifest). docs/restarts.md says so.
import { createHash } from 'node:crypto';
import type { KubeObject, ObjectMeta } from '../runtime/kube/types.ts';
import { XING_CHECKSUMS_ANNOTATION } from '../vocabulary/keys.ts';

/** On a CronJob, beside the record: the Job the last restart started (the next name depends on it). */
export const LAST_RESTART_JOB_ANNOTATION = 'stateward.dev/config-restart-last-job';
/** Set by the API server on Jobs `kubectl create job --from=cronjob` makes; Reloader sets it too. */
export const INSTANTIATE_ANNOTATION = 'cronjob.kubernetes.io/instantiate';
/** Holds a Job being re-created until its replacement is due (step 2 → 3). */
export const RECREATE_FINALIZER = 'stateward.dev/config-restart-recreate';
/** On a Job being re-created: the applied-checksums record its replacement carries. */
export const RECREATE_INTENT_ANNOTATION = 'stateward.dev/config-restart-recreate';

/** Labels the API server adds to a Job and its template; a Job created with them is refused (a new uid). */
const SERVER_JOB_LABELS = [
  'controller-uid',
  'batch.kubernetes.io/controller-uid',
  'job-name',
  'batch.kubernetes.io/job-name',
];

const MAX_NAME = 63;
const HASH_CHARS = 10;

type PodTemplate = { metadata?: { labels?: Record<string, string>; [k: string]: unknown }; [k: string]: unknown };
export type JobSpec = {
  selector?: unknown;
  manualSelector?: boolean;
  template?: PodTemplate;
  [k: string]: unknown;
};
export type Job = KubeObject & { spec?: JobSpec; status?: unknown };
export type CronJob = KubeObject & {
  spec?: {
    jobTemplate?: {
      metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec?: JobSpec;
    };
  };
};

/**
 * The name of the Job a CronJob restart starts: `<cronjob>-<hash>`, a DNS
 * label of at most 63 characters (the Job's name is also its pods' job-name
 * label value), the same for the same (CronJob uid, checksums being applied,
 * last restart's Job) and different when any of them differs.
 */
export function cronJobRestartJobName(cronJob: KubeObject, appliedAnnotation: string): string {
  const previous = cronJob.metadata?.annotations?.[LAST_RESTART_JOB_ANNOTATION] ?? '';
  const hash = createHash('sha256')
    .update(`${cronJob.metadata?.uid ?? ''}\n${previous}\n${appliedAnnotation}`)
    .digest('hex')
    .slice(0, HASH_CHARS);
  const base = (cronJob.metadata?.name ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(0, MAX_NAME - HASH_CHARS - 1)
    .replace(/^-+|-+$/g, '');
  return base === '' ? `cronjob-${hash}` : `${base}-${hash}`;
}

/** The Job a CronJob restart creates: its jobTemplate, marked manual and controlled by the CronJob. */
export function jobFromCronJob(cronJob: CronJob, name: string): Job {
  const template = cronJob.spec?.jobTemplate ?? {};
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      namespace: cronJob.metadata?.namespace ?? '',
      ...(template.metadata?.labels ? { labels: { ...template.metadata.labels } } : {}),
      annotations: { ...template.metadata?.annotations, [INSTANTIATE_ANNOTATION]: 'manual' },
      ownerReferences: [
        {
          apiVersion: 'batch/v1',
          kind: 'CronJob',
          name: cronJob.metadata?.name ?? '',
          uid: cronJob.metadata?.uid ?? '',
          controller: true,
          blockOwnerDeletion: true,
        } as NonNullable<ObjectMeta['ownerReferences']>[number],
      ],
    },
    spec: structuredClone(template.spec ?? {}),
  };
}

/** The record patch of a CronJob after its Job was started (or found already started). */
export function cronJobRecordPatch(recordPatch: { metadata: object }, jobName: string): object {
  const metadata = recordPatch.metadata as { annotations: Record<string, string> };
  return {
    ...recordPatch,
    metadata: { ...metadata, annotations: { ...metadata.annotations, [LAST_RESTART_JOB_ANNOTATION]: jobName } },
  };
}

function withoutServerLabels(labels: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!labels) return undefined;
  const kept = Object.fromEntries(Object.entries(labels).filter(([k]) => !SERVER_JOB_LABELS.includes(k)));
  return Object.keys(kept).length > 0 ? kept : undefined;
}

function finalizersOf(job: KubeObject): string[] {
  const f = job.metadata?.finalizers;
  return Array.isArray(f) ? f.filter((x): x is string => typeof x === 'string') : [];
}

/**
 * A Job to create in place of `job`: its spec and metadata without what the
 * API server set (status, uid, resourceVersion, creation time, managed
 * fields, the generated selector and the controller-uid/job-name labels,
 * unless the user chose the selector: manualSelector), without the
 * re-creation's finalizer and intent, and with `appliedAnnotation` as its
 * record (undefined: none, a first sighting records it).
 */
export function recreatedJob(job: Job, appliedAnnotation: string | undefined): Job {
  const manual = job.spec?.manualSelector === true;
  const labels = manual ? job.metadata?.labels : withoutServerLabels(job.metadata?.labels);
  const annotations = { ...job.metadata?.annotations };
  delete annotations[RECREATE_INTENT_ANNOTATION];
  if (appliedAnnotation !== undefined) annotations[XING_CHECKSUMS_ANNOTATION] = appliedAnnotation;
  const finalizers = finalizersOf(job).filter((f) => f !== RECREATE_FINALIZER);
  const spec: JobSpec = structuredClone(job.spec ?? {});
  if (!manual) {
    delete spec.selector;
    const templateLabels = withoutServerLabels(spec.template?.metadata?.labels);
    if (spec.template?.metadata) {
      if (templateLabels) spec.template.metadata.labels = templateLabels;
      else delete spec.template.metadata.labels;
    }
  }
  const owners = job.metadata?.ownerReferences;
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: job.metadata?.name ?? '',
      namespace: job.metadata?.namespace ?? '',
      ...(labels ? { labels: { ...labels } } : {}),
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      ...(owners && owners.length > 0 ? { ownerReferences: owners } : {}),
      ...(finalizers.length > 0 ? { finalizers } : {}),
    },
    spec,
  };
}

/** Step 1: mark the Job for re-creation, in one patch made from the version the decision saw. */
export function recreateMarkPatch(job: KubeObject, appliedAnnotation: string): object {
  const finalizers = finalizersOf(job);
  return {
    metadata: {
      ...(job.metadata?.resourceVersion ? { resourceVersion: job.metadata.resourceVersion } : {}),
      finalizers: finalizers.includes(RECREATE_FINALIZER) ? finalizers : [...finalizers, RECREATE_FINALIZER],
      annotations: { [RECREATE_INTENT_ANNOTATION]: appliedAnnotation },
    },
  };
}

export type RecreateStep =
  /** Not being re-created by us. */
  | { step: 'none' }
  /** Marked (step 1 done): delete it. */
  | { step: 'delete'; uid: string }
  /**
   * Deleted and held, but other finalizers hold it too: wait for them. Our
   * release must delete it at once, or the create would find it still there
   * after the manifest's last durable copy is gone.
   */
  | { step: 'wait-for-finalizers'; others: string[] }
  /** Deleted and held (step 2 done): release the hold, then create `job`. */
  | { step: 'release-and-create'; release: object; job: Job };

/** Where a Job's re-creation stands, read from the Job alone. */
export function recreateStep(job: Job): RecreateStep {
  const finalizers = finalizersOf(job);
  if (!finalizers.includes(RECREATE_FINALIZER)) return { step: 'none' };
  if (!job.metadata?.deletionTimestamp) return { step: 'delete', uid: job.metadata?.uid ?? '' };
  const others = finalizers.filter((f) => f !== RECREATE_FINALIZER);
  if (others.length > 0) return { step: 'wait-for-finalizers', others };
  return {
    step: 'release-and-create',
    release: {
      metadata: {
        ...(job.metadata.resourceVersion ? { resourceVersion: job.metadata.resourceVersion } : {}),
        finalizers: [],
      },
    },
    job: recreatedJob(job, job.metadata.annotations?.[RECREATE_INTENT_ANNOTATION]),
  };
}
