// The X-Cluster header on Stateward's own outgoing requests, as
// rollout-operator sets it through dskit's cluster-validation round tripper:
// every Kubernetes API request and every call to a pod carries
// `X-Cluster: <label>`, whatever -server.cluster-validation.http.enabled says
// (that flag governs only what Stateward's servers check). A server running
// dskit's cluster validation that refuses the label answers 511 with a JSON
// body naming the problem and its route; such an answer is counted in
// rollout_operator_client_invalid_cluster_validation_label_requests_total,
// logged, and fails the request with "request rejected by the server: …".
// Every other answer, a 511 without that body included, is left as it came.
import { Counter, type Registry } from 'prom-client';
import type { Logger } from '../log/logger.ts';

/** dskit's header name (clusterutil.ClusterValidationLabelHeader). */
export const CLUSTER_HEADER = 'X-Cluster';

/** 511 Network Authentication Required: dskit's status for a refused cluster label. */
export const CLUSTER_REJECTED_STATUS = 511;

/** What a dskit server says when it refuses a request's cluster label. */
export interface ClusterRejection {
  message: string;
  /** The server's route name for the request (the metric's `method` label). */
  route: string;
}

/**
 * The rejection an answer carries, or undefined when it is not one. dskit
 * reads it as Go's encoding/json would into its two-field struct: the
 * Content-Type must be exactly application/json; the body must be a JSON
 * object (or null) whose fields, matched without regard to case, are strings
 * or null. Anything else is an ordinary answer.
 */
export function parseClusterRejection(
  status: number,
  contentType: string | null | undefined,
  body: string,
): ClusterRejection | undefined {
  if (status !== CLUSTER_REJECTED_STATUS || contentType !== 'application/json') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  const rejection: ClusterRejection = { message: '', route: '' };
  if (parsed === null) return rejection;
  if (typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  for (const [key, value] of Object.entries(parsed)) {
    const field =
      key.toLowerCase() === 'cluster_validation_error_message'
        ? 'message'
        : key.toLowerCase() === 'route'
          ? 'route'
          : undefined;
    if (!field || value === null) continue;
    if (typeof value !== 'string') return undefined;
    rejection[field] = value;
  }
  return rejection;
}

/** Counts and logs the rejections of our X-Cluster label, as rollout-operator's reporter does. */
export interface ClusterRejections {
  /**
   * The error message to fail a request with when its answer is a dskit
   * rejection of `label` (counted and logged here), else undefined.
   */
  check(label: string, status: number, contentType: string | null | undefined, body: string): string | undefined;
}

/** Recognises rejections without counting or logging them (a client built without the runtime: tests, tools). */
export const uncountedRejections: ClusterRejections = {
  check(_label, status, contentType, body) {
    const rejection = parseClusterRejection(status, contentType, body);
    return rejection && `request rejected by the server: ${rejection.message}`;
  },
};

const reporters = new WeakMap<Registry, ClusterRejections>();

/** One per registry (the Kubernetes client and the pod client share its counter). */
export function clusterRejections(registry: Registry, log: Logger): ClusterRejections {
  let reporter = reporters.get(registry);
  if (reporter) return reporter;
  const rejected = new Counter({
    name: 'rollout_operator_client_invalid_cluster_validation_label_requests_total',
    help: "Outgoing requests (Kubernetes API and pod calls) that a server refused for their X-Cluster label: 511 answers with dskit's JSON body.",
    labelNames: ['method', 'protocol', 'request_cluster'],
    registers: [registry],
  });
  reporter = {
    check(label, status, contentType, body) {
      const rejection = parseClusterRejection(status, contentType, body);
      if (!rejection) return undefined;
      const message = `request rejected by the server: ${rejection.message}`;
      // rollout-operator's labels: `method` holds the route the server named.
      rejected.inc({ method: rejection.route, protocol: 'http', request_cluster: label });
      log.warn(message, { method: rejection.route, cluster_validation_label: label });
      return message;
    },
  };
  reporters.set(registry, reporter);
  return reporter;
}
