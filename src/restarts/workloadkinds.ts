// Every workload kind config restarts handle, and what differs between them:
// the resource, where the pod template is, how a restart is written, and
// which objects of the kind are someone else's to restart. The controller
// reads this table instead of asking `kind ===` at each step; the decision
// (restartplan.ts) and the record (xing's applied-checksums annotation on
// the object's metadata) are the same for every kind.
import { apiVersionOf, resources, type KubeObject, type ResourceType } from '../runtime/kube/types.ts';
import type { WorkloadKind } from './checksums.ts';
import type { WorkloadLike } from './optins.ts';
import type { PodTemplateSpec } from './references.ts';

export const CRONJOBS: ResourceType = {
  group: 'batch',
  version: 'v1',
  resource: 'cronjobs',
  kind: 'CronJob',
  namespaced: true,
};
export const JOBS: ResourceType = { group: 'batch', version: 'v1', resource: 'jobs', kind: 'Job', namespaced: true };
/** Argo Rollouts' CRD: served only where Argo Rollouts is installed. */
export const ARGO_ROLLOUTS: ResourceType = {
  group: 'argoproj.io',
  version: 'v1alpha1',
  resource: 'rollouts',
  kind: 'Rollout',
  namespaced: true,
};

/**
 * How a restart is written:
 * - 'template-patch': one merge patch of the record and the pod template's
 *   trigger annotation (for a Deployment with a pause-period, the pause too;
 *   for a Rollout with rollout-strategy restart, spec.restartAt instead of
 *   the trigger: restartwrites.ts);
 * - 'job-from-cronjob': a Job created from the CronJob's jobTemplate, then
 *   the record on the CronJob (jobrestarts.ts names the Job so that is
 *   exactly once);
 * - 'recreate-job': the Job deleted and created again, carrying the record
 *   (jobrestarts.ts: a finalizer holds the old Job until the new one is due).
 */
export type RestartWrite = 'template-patch' | 'job-from-cronjob' | 'recreate-job';

export interface WorkloadKindSpec {
  kind: WorkloadKind;
  type: ResourceType;
  /** Reconcile keys are `<prefix>/<namespace>/<name>`. */
  prefix: string;
  /** A CRD that may not be served (or not permitted): its informer waits for it instead of failing readiness. */
  optional: boolean;
  restart: RestartWrite;
  /** The object's metadata and pod template, as optins.ts and restartplan.ts read a workload. */
  view: (object: KubeObject) => WorkloadLike;
  /** Why an object of this kind is restarted through another object, or undefined when it is restarted itself. */
  handledElsewhere: (object: KubeObject) => string | undefined;
}

type WithTemplate = KubeObject & { spec?: { template?: PodTemplateSpec } };
type CronJobShape = KubeObject & { spec?: { jobTemplate?: { spec?: { template?: PodTemplateSpec } } } };

const templateAtSpec = (object: KubeObject): WorkloadLike => {
  const template = (object as WithTemplate).spec?.template;
  return { metadata: object.metadata ?? {}, spec: template ? { template } : {} };
};

const nowhereElse = () => undefined;

/** The CronJob that controls a Job, if any: such Jobs are restarted by starting a new one from the CronJob. */
export function owningCronJob(object: KubeObject): string | undefined {
  return object.metadata?.ownerReferences?.find((o) => o.controller && o.kind === 'CronJob')?.name;
}

export const WORKLOAD_KINDS: readonly WorkloadKindSpec[] = [
  {
    kind: 'Deployment',
    type: resources.deployments,
    prefix: 'deployment',
    optional: false,
    restart: 'template-patch',
    view: templateAtSpec,
    handledElsewhere: nowhereElse,
  },
  {
    kind: 'StatefulSet',
    type: resources.statefulSets,
    prefix: 'statefulset',
    optional: false,
    restart: 'template-patch',
    view: templateAtSpec,
    handledElsewhere: nowhereElse,
  },
  {
    kind: 'DaemonSet',
    type: resources.daemonSets,
    prefix: 'daemonset',
    optional: false,
    restart: 'template-patch',
    view: templateAtSpec,
    handledElsewhere: nowhereElse,
  },
  {
    kind: 'CronJob',
    type: CRONJOBS,
    prefix: 'cronjob',
    optional: false,
    restart: 'job-from-cronjob',
    // Reloader reads a CronJob's opt-ins from its metadata, else from the
    // pod template of its jobTemplate; the references are that template's.
    view: (object) => {
      const template = (object as CronJobShape).spec?.jobTemplate?.spec?.template;
      return { metadata: object.metadata ?? {}, spec: template ? { template } : {} };
    },
    handledElsewhere: nowhereElse,
  },
  {
    kind: 'Job',
    type: JOBS,
    prefix: 'job',
    optional: false,
    restart: 'recreate-job',
    view: templateAtSpec,
    // A CronJob's Jobs copy its jobTemplate's annotations, opt-ins included:
    // the CronJob restarts by starting a new Job, and re-creating its old
    // ones as well would run the work twice.
    handledElsewhere: (object) => {
      const cronJob = owningCronJob(object);
      return cronJob === undefined ? undefined : `it belongs to CronJob ${cronJob}, which is restarted instead`;
    },
  },
  {
    kind: 'Rollout',
    type: ARGO_ROLLOUTS,
    prefix: 'rollout',
    optional: true,
    restart: 'template-patch',
    view: templateAtSpec,
    handledElsewhere: nowhereElse,
  },
];

export function kindSpec(kind: WorkloadKind): WorkloadKindSpec {
  return WORKLOAD_KINDS.find((k) => k.kind === kind)!;
}

export function kindByPrefix(prefix: string): WorkloadKindSpec | undefined {
  return WORKLOAD_KINDS.find((k) => k.prefix === prefix);
}

/** The apiVersion of an Event's regarding object of this kind. */
export function eventApiVersion(spec: WorkloadKindSpec): string {
  return apiVersionOf(spec.type);
}
