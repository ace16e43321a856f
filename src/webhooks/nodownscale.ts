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

    const allowErr = (msg: string, err: string): AdmissionDecision => {
      log.error(msg, { err });
      return { allowed: true, warnings: [`${msg}, err: ${err}`] };
    };
    const allowWarn = (warning: string): AdmissionDecision => {
      log.warn(warning);
      return { allowed: true, warnings: [warning] };
    };

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
      return { allowed: true };
    }
    // From or to an unset replicas count is not a downscale strictly speaking.
    if (before === undefined || after === undefined) return allowWarn('old/new replicas is nil, allowing the change');
    if (before < after) {
      log.debug('upscale allowed', { old: before, new: after });
      return { allowed: true };
    }
    if (before === after) {
      log.debug('no replicas change, allowing', { replicas: before });
      return { allowed: true };
    }

    // A downscale: the typed object's own labels (as they were before this
    // change), or for a Scale those of its parent, read live.
    let labels: Record<string, unknown>;
    if (oldReplicas.kind === 'Scale') {
      const cannotGet = `can't get ${resource}/${name} in namespace ${namespace}, allowing the change`;
      if (!SCALE_PARENT_RESOURCES.includes(resource)) {
        const err = `unsupported resource ${resource}`;
        log.error(cannotGet, { err });
        return { allowed: true, warnings: [`${cannotGet}: ${err}`] };
      }
      try {
        labels = (await deps.getParentLabels(resource, namespace, name, signal)) ?? {};
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
          return { allowed: true, warnings: [`${cannotGet}: ${err}`] };
        }
        log.error('cannot read the parent of a /scale downscale; denying it', { err });
        return {
          allowed: false,
          status: {
            code: 503,
            message: `downscale of ${resource}/${name} in ${namespace} from ${before} to ${after} replicas is denied because its label '${NO_DOWNSCALE_LABEL_KEY}' could not be read (${err}); retry`,
          },
        };
      }
    } else {
      labels = labelsOf(oldDecoded.object);
    }

    const value = labels[NO_DOWNSCALE_LABEL_KEY];
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
  };
}
