// /admission/no-downscale (validating): refuses any decrease of the replicas
// of a StatefulSet, Deployment or ReplicaSet labelled
// grafana.com/no-downscale=true, whether through an UPDATE of the object or
// of its /scale subresource. Behaviour of rollout-operator's
// pkg/admission/no_downscale.go, except where the label cannot be known.
//
// Fail-open where the change itself cannot be read: the label is a guard
// rail, and the webhook sits in the path of every replicas change of the
// workloads it matches (the operator's own scaling included), so an
// undecodable or unexpected object is allowed with a warning the client sees.
//
// Fail-closed where the change is a downscale but the label cannot be read:
// a /scale request carries no labels, and its parent comes from the caches
// (no API call) or, when it is not cached (outside the watched namespaces, or
// created a moment ago), from a live read. rollout-operator allows when that
// read fails — and under load its reads queue behind its own client rate
// limit until the deadline, so a burst of `kubectl scale` calls or an HPA
// downscaled exactly what the label protects. Here a read that fails for a
// reason a retry can cure (throttled, timed out, a server error) denies the
// downscale, saying why and to retry; "not found" (nothing to protect) and
// "forbidden" (no retry helps; rollout-operator's Role grants no read of
// Deployments and ReplicaSets) allow with rollout-operator's warning.
// A deny carries no exception for dry-run: a dry-run downscale is denied too,
// so `kubectl scale --dry-run=server` tells the truth.
import { isForbidden, isNotFound } from '../runtime/kube/errors.ts';
import { nopLogger, type Logger } from '../runtime/log/logger.ts';
import type { AdmissionDecision, AdmissionHandler, AdmissionRequestV1 } from '../runtime/admission/admission.ts';
import { NO_DOWNSCALE_LABEL_KEY, NO_DOWNSCALE_LABEL_VALUE } from '../vocabulary/keys.ts';
import { decode, isRecord, replicasOf } from '../vocabulary/replicas.ts';

/** Workload resources whose /scale requests we can resolve to a parent object. */
export const SCALE_PARENT_RESOURCES: readonly string[] = ['statefulsets', 'deployments', 'replicasets'];

export interface NoDownscaleDeps {
  /** Labels of the parent of a Scale (from a cache, or read live); undefined = no labels. Throws a NotFound KubeApiError when there is no parent, another error when it cannot be read. */
  getParentLabels(
    resource: string,
    namespace: string,
    name: string,
    signal: AbortSignal,
  ): Promise<Record<string, string> | undefined>;
  log?: Logger;
}

function labelsOf(obj: Record<string, unknown>): Record<string, unknown> {
  const metadata = obj.metadata;
  return isRecord(metadata) && isRecord(metadata.labels) ? metadata.labels : {};
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function noDownscaleHandler(deps: NoDownscaleDeps): AdmissionHandler {
  const baseLog = deps.log ?? nopLogger;
  return async (request: AdmissionRequestV1, signal: AbortSignal): Promise<AdmissionDecision> => {
    const resource = request.resource.resource;
    const name = request.name ?? '';
    const namespace = request.namespace ?? '';
    const log = baseLog.child({ webhook: 'no-downscale', uid: request.uid, resource, name, namespace });

    const change = replicasChange(request, log);
    if ('decision' in change) return change.decision;
    const downscale: Downscale = { resource, name, namespace, before: change.before, after: change.after, log };

    // A downscale: the typed object's own labels (as they were before this
    // change), or for a Scale those of its parent, read live.
    let labels: Record<string, unknown>;
    if (change.kind === 'Scale') {
      const parent = await scaleParentLabels(deps, downscale, signal);
      if ('decision' in parent) return parent.decision;
      labels = parent.labels;
    } else {
      labels = labelsOf(change.oldObject);
    }
    return labelDecision(labels[NO_DOWNSCALE_LABEL_KEY], downscale);
  };
}

/** A decrease of replicas the webhook must judge by the label, with the request's logger. */
interface Downscale {
  resource: string;
  name: string;
  namespace: string;
  before: number;
  after: number;
  log: Logger;
}

/**
 * The replicas before and after the request, when it is a downscale; else
 * the decision already (allowed): undecodable objects fail open with a
 * warning the client sees, upscales and unchanged counts pass quietly.
 */
function replicasChange(
  request: AdmissionRequestV1,
  log: Logger,
):
  | { decision: AdmissionDecision }
  | { before: number; after: number; kind: string; oldObject: Record<string, unknown> } {
  const allowErr = (msg: string, err: string) => {
    log.error(msg, { err });
    return { decision: { allowed: true, warnings: [`${msg}, err: ${err}`] } };
  };
  const allowed = { decision: { allowed: true } };

  const oldDecoded = decode(request.oldObject);
  if ('error' in oldDecoded) return allowErr("can't decode old object, allowing the change", oldDecoded.error);
  const oldReplicas = replicasOf(request.oldObject);
  if ('error' in oldReplicas) return allowErr("can't get old replicas, allowing the change", oldReplicas.error);
  const newDecoded = decode(request.object);
  if ('error' in newDecoded) return allowErr("can't decode new object, allowing the change", newDecoded.error);
  const newReplicas = replicasOf(request.object);
  if ('error' in newReplicas) return allowErr("can't get new replicas, allowing the change", newReplicas.error);

  const before = oldReplicas.replicas ?? undefined;
  const after = newReplicas.replicas ?? undefined;
  if (before === undefined && after === undefined) {
    log.debug('no replicas change, allowing');
    return allowed;
  }
  // From or to an unset replicas count is not a downscale strictly speaking.
  if (before === undefined || after === undefined) {
    const warning = 'old/new replicas is nil, allowing the change';
    log.warn(warning);
    return { decision: { allowed: true, warnings: [warning] } };
  }
  if (before < after) {
    log.debug('upscale allowed', { old: before, new: after });
    return allowed;
  }
  if (before === after) {
    log.debug('no replicas change, allowing', { replicas: before });
    return allowed;
  }
  return { before, after, kind: oldReplicas.kind, oldObject: oldDecoded.object };
}

/**
 * The labels of a /scale request's parent, or the decision when they cannot
 * be read: allowed (with rollout-operator's warning) when no retry could
 * help, denied with 503 and "retry" when one could (see the header).
 */
async function scaleParentLabels(
  deps: NoDownscaleDeps,
  { resource, name, namespace, before, after, log }: Downscale,
  signal: AbortSignal,
): Promise<{ labels: Record<string, unknown> } | { decision: AdmissionDecision }> {
  const cannotGet = `can't get ${resource}/${name} in namespace ${namespace}, allowing the change`;
  if (!SCALE_PARENT_RESOURCES.includes(resource)) {
    const err = `unsupported resource ${resource}`;
    log.error(cannotGet, { err });
    return { decision: { allowed: true, warnings: [`${cannotGet}: ${err}`] } };
  }
  try {
    return { labels: (await deps.getParentLabels(resource, namespace, name, signal)) ?? {} };
  } catch (error) {
    const err = errorText(error);
    // No parent: nothing the label could protect. Not permitted to read
    // it (rollout-operator's own Role grants nothing on Deployments and
    // ReplicaSets): no retry would help, so allow as rollout-operator
    // does, and say which permission is missing.
    if (isNotFound(error) || isForbidden(error)) {
      log.warn(cannotGet, {
        err,
        ...(isForbidden(error)
          ? { fix: `grant get, list, watch on ${resource} (deploy/kustomize/rbac/PERMISSIONS.md)` }
          : {}),
      });
      return { decision: { allowed: true, warnings: [`${cannotGet}: ${err}`] } };
    }
    log.error('cannot read the parent of a /scale downscale; denying it', { err });
    return {
      decision: {
        allowed: false,
        status: {
          code: 503,
          message: `downscale of ${resource}/${name} in ${namespace} from ${before} to ${after} replicas is denied because its label '${NO_DOWNSCALE_LABEL_KEY}' could not be read (${err}); retry`,
        },
      },
    };
  }
}

/** Denied only when the label says exactly grafana.com/no-downscale=true. */
function labelDecision(
  value: unknown,
  { resource, name, namespace, before, after, log }: Downscale,
): AdmissionDecision {
  if (value === undefined) {
    log.info(`downscale allowed because resource does not have the label "${NO_DOWNSCALE_LABEL_KEY}"`, {
      old: before,
      new: after,
    });
    return { allowed: true };
  }
  if (value !== NO_DOWNSCALE_LABEL_VALUE) {
    log.info(
      `downscale allowed because resource's label "${NO_DOWNSCALE_LABEL_KEY}" value is not "${NO_DOWNSCALE_LABEL_VALUE}"`,
      {
        label_value: value,
        old: before,
        new: after,
      },
    );
    return { allowed: true };
  }

  const message =
    `downscale of ${resource}/${name} in ${namespace} from ${before} to ${after} replicas is not allowed ` +
    `because it has the label '${NO_DOWNSCALE_LABEL_KEY}=${NO_DOWNSCALE_LABEL_VALUE}'`;
  log.warn('downscale not allowed', { old: before, new: after });
  // Code and reason left empty, as rollout-operator leaves them: the API
  // server reports 403 either way, and kubectl's output stays identical
  // (`Error from server: admission webhook "…" denied the request: …`).
  return { allowed: false, status: { message } };
}
