// API client metrics under rollout-operator's names, so its dashboards work.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { describePath, permissionOf } from './paths.ts';

export interface ApiClientMetrics {
  /** One request, timed to its answer (a watch: to its response headers, as a GET). */
  observeRequest(method: string, path: string, statusCode: string, seconds: number, watch?: boolean): void;
  rateLimited(apiGroup: string): void;
}

// dskit's default buckets (.005 … 100 s), which rollout-operator uses.
const DSKIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100];

export function apiClientMetrics(registry: Registry, options: { qps?: number } = {}): ApiClientMetrics {
  // Published only while limiting is on, so dashboards comparing throughput
  // with it never divide by zero (as rollout-operator does).
  if (options.qps && options.qps > 0) {
    new Gauge({
      name: 'rollout_operator_kubernetes_api_client_rate_limit_qps',
      help: 'The configured -kubernetes.client-qps: the per-API-group token bucket rate. Only exposed while client-side rate limiting is enabled.',
      registers: [registry],
    }).set(options.qps);
  }
  const duration = new Histogram({
    name: 'rollout_operator_kubernetes_api_client_request_duration_seconds',
    help: 'Time spent doing Kubernetes API requests (excluding client-side rate-limit waits).',
    labelNames: ['path', 'method', 'status_code'],
    buckets: DSKIT_BUCKETS,
    registers: [registry],
  });
  const limited = new Counter({
    name: 'rollout_operator_kubernetes_api_client_rate_limited_requests_total',
    help: 'Kubernetes API requests that could not get a client-side per-API-group rate limiter token and were not sent (would have waited past their deadline, or were cancelled while waiting).',
    labelNames: ['api_group'],
    registers: [registry],
  });
  // Stateward's own: the refused requests by the rule that would allow them, so that
  // `stateward doctor` (and an alert) can name the permission to add.
  const refused = new Counter({
    name: 'stateward_kubernetes_api_refused_requests_total',
    help: 'Kubernetes API requests the API server refused (403), by the RBAC rule that would allow them: verb, API group, resource (with subresource), namespace ("" when cluster-scoped).',
    labelNames: ['verb', 'api_group', 'resource', 'namespace'],
    registers: [registry],
  });
  return {
    observeRequest(method, path, statusCode, seconds, watch = false) {
      duration.observe({ path: describePath(path), method, status_code: statusCode }, seconds);
      if (statusCode !== '403') return;
      const permission = permissionOf(method, path, watch);
      if (permission) {
        const { verb, apiGroup, resource, namespace } = permission;
        refused.inc({ verb, api_group: apiGroup, resource, namespace });
      }
    },
    rateLimited(apiGroup) {
      limited.inc({ api_group: apiGroup });
    },
  };
}
