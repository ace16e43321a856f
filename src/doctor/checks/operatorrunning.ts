// 11. Whether the operator can be running at all: a Deployment with no
// available replica, and webhook configurations whose Service does not
// exist. The other checks judge the configuration; these judge whether
// anything answers it — a doctor that says "no problems" while nothing runs
// the operator reassures exactly when it should warn.
import type { WebhookConfigurationObject } from './scope.ts';
import { type Finding, type Scope, objectName } from './scope.ts';
import { pointsAtOperator, webhookConcerns } from './webhooks.ts';
import { namespaceOf, nameOf } from '../../vocabulary/metadata.ts';

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
