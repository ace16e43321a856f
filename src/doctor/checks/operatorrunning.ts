// 11. Whether the operator can be running at all: a Deployment with no
// available replica, a leader Lease nobody renews, and webhook
// configurations whose Service does not exist or has no ready endpoint. The other checks judge the configuration; these judge whether
// anything answers it — a doctor that says "no problems" while nothing runs
// the operator reassures exactly when it should warn.
import type { WebhookConfigurationObject } from './scope.ts';
import { type Finding, type Scope, objectName } from './scope.ts';
import { pointsAtOperator, webhookConcerns } from './webhooks.ts';
import { namespaceOf, nameOf } from '../../vocabulary/metadata.ts';
import { argsOf, boolFlag, flagValue } from './operatorflags.ts';
import type { Deployment } from './scope.ts';

/** "<namespace>/<name>" of a Service webhook configurations name. */
export const serviceKey = (namespace: string, name: string): string => `${namespace}/${name}`;

/** The Services the operator's webhook configurations call, to look up (doctor/cli.ts gathers them). */
export function webhookServices(scope: Scope): string[] {
  const keys = new Set<string>();
  for (const { config } of operatorWebhookConfigs(scope))
    for (const w of config.webhooks ?? []) {
      const service = w.clientConfig?.service;
      if (service?.name && service.namespace) keys.add(serviceKey(service.namespace, service.name));
    }
  return [...keys].sort();
}

function operatorWebhookConfigs(scope: Scope): { kind: string; config: WebhookConfigurationObject }[] {
  return [
    ...scope.input.validatingWebhookConfigurations.map((config) => ({
      kind: 'ValidatingWebhookConfiguration',
      config,
    })),
    ...scope.input.mutatingWebhookConfigurations.map((config) => ({ kind: 'MutatingWebhookConfiguration', config })),
  ].filter(({ config }) => pointsAtOperator(config) && webhookConcerns(scope, config));
}

/** Operator Deployments in view with no available replica. */
export function checkOperatorAvailable(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const d of scope.operatorDeployments()) {
    const wanted = d.spec?.replicas ?? 1;
    const available = d.status?.availableReplicas ?? 0;
    if (wanted > 0 && available > 0) continue;
    const namespace = namespaceOf(d);
    findings.push({
      severity: 'error',
      code: 'operator-unavailable',
      object: objectName('Deployment', d),
      problem:
        wanted === 0
          ? 'the operator is scaled to 0 replicas: nothing rolls rollout groups or restarts workloads, and its webhooks go unanswered'
          : `none of its ${wanted} replicas is available: nothing rolls rollout groups or restarts workloads, and its webhooks go unanswered (fail-closed ones refuse every request they cover)`,
      fix:
        wanted === 0
          ? `kubectl -n ${namespace} scale deployment/${nameOf(d)} --replicas=1`
          : `see why: kubectl -n ${namespace} describe deployment/${nameOf(d)}; kubectl -n ${namespace} logs deployment/${nameOf(d)}`,
    });
  }
  return findings;
}

/** Webhook configurations of the operator calling a Service that does not exist. */
export function checkWebhookServices(scope: Scope): Finding[] {
  const known = scope.input.webhookServices;
  if (known === undefined) return [];
  const findings: Finding[] = [];
  for (const { kind, config } of operatorWebhookConfigs(scope)) {
    const missing = new Map<string, string[]>();
    for (const w of config.webhooks ?? []) {
      const service = w.clientConfig?.service;
      if (!service?.name || !service.namespace) continue;
      const key = serviceKey(service.namespace, service.name);
      if (known[key] !== false) continue;
      missing.set(key, [...(missing.get(key) ?? []), `${w.name ?? '?'} (failurePolicy ${w.failurePolicy ?? 'Fail'})`]);
    }
    for (const [key, webhooks] of missing) {
      const [namespace, name] = key.split('/') as [string, string];
      const failClosed = webhooks.some((w) => w.endsWith('(failurePolicy Fail)'));
      findings.push({
        severity: 'error',
        code: 'webhook-service-missing',
        object: objectName(kind, config),
        problem: `calls Service ${key}, which does not exist: ${webhooks.join(', ')} ${
          failClosed
            ? 'refuse every request they cover (failurePolicy Fail)'
            : 'are skipped, so what they guard goes unchecked'
        }`,
        fix: `install the operator's Service (deploy/webhooks/service.yaml, or the chart with webhooks enabled) in ${namespace} as ${name}, or point clientConfig.service at the operator's Service`,
      });
    }
  }
  return findings;
}

/** The leader Lease an operator Deployment's flags name, when it runs with leader election. */
export function leaderLeaseOf(d: Deployment): { namespace: string; name: string } | undefined {
  const args = argsOf(d);
  if (boolFlag(args, 'leader-election.enabled') !== true) return undefined;
  const own = namespaceOf(d);
  const name = flagValue(args, 'leader-election.lease-name') || 'stateward-leader';
  const namespace = flagValue(args, 'leader-election.lease-namespace') || own;
  // $(POD_NAMESPACE) and the like are the pod's own namespace.
  return { namespace: namespace.startsWith('$(') ? own : namespace, name };
}

/** A leader Lease nobody renews: no replica leads, so nothing rolls or restarts. */
export function checkOperatorLeading(scope: Scope): Finding[] {
  const leases = scope.input.operatorLeases;
  if (leases === undefined) return [];
  const findings: Finding[] = [];
  for (const d of scope.operatorDeployments()) {
    const wanted = leaderLeaseOf(d);
    if (!wanted) continue;
    const lease = leases[serviceKey(namespaceOf(d), nameOf(d))];
    if (lease === undefined) continue;
    const object = objectName('Deployment', d);
    const where = `${wanted.namespace}/${wanted.name}`;
    const logs = `kubectl -n ${namespaceOf(d)} logs deployment/${nameOf(d)}`;
    if (lease === null) {
      findings.push({
        severity: 'warning',
        code: 'operator-not-leading',
        object,
        problem: `runs with -leader-election.enabled, but its leader Lease ${where} does not exist: no replica has led yet`,
        fix: `see why: ${logs}`,
      });
      continue;
    }
    const duration = (lease.durationSeconds ?? 15) * 1000;
    const age = lease.renewedAt === undefined ? undefined : scope.input.now - lease.renewedAt;
    // Twice the lease duration: a handover takes up to one, and clocks differ a little.
    if (age !== undefined && age <= 2 * duration) continue;
    findings.push({
      severity: 'error',
      code: 'operator-not-leading',
      object,
      problem:
        age === undefined
          ? `its leader Lease ${where} was never renewed: no replica leads, so nothing rolls rollout groups or restarts workloads`
          : `its leader Lease ${where} was last renewed ${Math.round(age / 1000)} s ago by ${lease.holder ?? 'nobody'} (lease ${Math.round(duration / 1000)} s): no replica leads, so nothing rolls rollout groups or restarts workloads`,
      fix: `see why: ${logs}`,
    });
  }
  return findings;
}

/** Webhook Services that exist but have no ready endpoint: the API server's calls go nowhere. */
export function checkWebhookEndpoints(scope: Scope): Finding[] {
  const endpoints = scope.input.webhookEndpoints;
  if (endpoints === undefined) return [];
  const findings: Finding[] = [];
  for (const { kind, config } of operatorWebhookConfigs(scope)) {
    const empty = new Set<string>();
    let failClosed = false;
    for (const w of config.webhooks ?? []) {
      const service = w.clientConfig?.service;
      if (!service?.name || !service.namespace) continue;
      const key = serviceKey(service.namespace, service.name);
      if (scope.input.webhookServices?.[key] !== true || endpoints[key] !== 0) continue;
      empty.add(key);
      failClosed ||= (w.failurePolicy ?? 'Fail') === 'Fail';
    }
    for (const key of empty) {
      const [namespace, name] = key.split('/') as [string, string];
      findings.push({
        severity: 'error',
        code: 'webhook-service-no-endpoints',
        object: objectName(kind, config),
        problem: `calls Service ${key}, which has no ready endpoint: ${
          failClosed
            ? 'its fail-closed webhooks refuse every request they cover'
            : 'its webhooks are skipped, so what they guard goes unchecked'
        } until an operator replica is Ready behind it`,
        fix: `kubectl -n ${namespace} get endpointslices -l kubernetes.io/service-name=${name}; check that the Service's selector matches the operator's pods and that they are Ready`,
      });
    }
  }
  return findings;
}
