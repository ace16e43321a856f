// 5. Webhook configurations: CA injection labels, caBundle, namespace,
// failure policy, and a no-downscale webhook that would guard the operator.
import { INJECT_LABEL, NAMESPACE_LABEL } from '../../vocabulary/keys.ts';
import { labelSelectorMatches } from '../../vocabulary/selectors.ts';
import {
  type Scope,
  type Deployment,
  type Finding,
  OPERATOR_NAMES,
  type Severity,
  type WebhookConfigurationObject,
  type WebhookEntry,
  has,
  objectName,
  shellQuote,
} from './scope.ts';
import { annotationsOf, labelsOf, nameOf, namespaceOf } from '../../vocabulary/metadata.ts';

// ------------------------------------------------------------ 5. webhooks

type WebhookKind =
  | 'no-downscale'
  | 'prepare-downscale'
  | 'pod-eviction'
  | 'zpdb-validation'
  | 'rollout-health-check-validation'
  | 'reschedule-on-eviction';
const WEBHOOK_KINDS: readonly WebhookKind[] = [
  'no-downscale',
  'prepare-downscale',
  'pod-eviction',
  'zpdb-validation',
  'rollout-health-check-validation',
  'reschedule-on-eviction',
];

export function webhookPath(w: WebhookEntry): string | undefined {
  if (w.clientConfig?.service) return w.clientConfig.service.path;
  const url = w.clientConfig?.url;
  if (!url) return undefined;
  try {
    return new URL(url).pathname;
  } catch {
    return undefined;
  }
}

/** Which of the operator's webhooks an entry is, by its path (or, failing that, its name). */
function webhookKind(w: WebhookEntry): WebhookKind | undefined {
  const path = webhookPath(w);
  // Strimzi Drain Cleaner's path and webhook name: the operator serves its Strimzi profile there (drainprofiles.ts).
  if (path === '/drainer' || (w.name ?? '').startsWith('strimzi-drain-cleaner.')) return 'reschedule-on-eviction';
  const byPath = WEBHOOK_KINDS.find((k) => path === `/admission/${k}`);
  if (byPath) return byPath;
  return WEBHOOK_KINDS.find((k) => (w.name ?? '').startsWith(`${k}.`) || (w.name ?? '').startsWith(`${k}-`));
}

export function pointsAtOperator(config: WebhookConfigurationObject): boolean {
  const labels = labelsOf(config);
  if (has(labels, NAMESPACE_LABEL) || has(labels, INJECT_LABEL)) return true;
  return (config.webhooks ?? []).some(
    (w) =>
      OPERATOR_NAMES.includes(w.clientConfig?.service?.name ?? '') ||
      (webhookPath(w) ?? '').match(
        /^\/admission\/(no-downscale|prepare-downscale|pod-eviction|zpdb-validation|rollout-health-check-validation|reschedule-on-eviction)$/,
      ) !== null,
  );
}

const CERT_MANAGER_INJECT = 'cert-manager.io/inject-ca-from';

const RISK_OF_IGNORE: Partial<Record<WebhookKind, { severity: Severity; why: string }>> = {
  'pod-eviction': {
    severity: 'error',
    why: 'while no operator replica answers, evictions (kubectl drain, the cluster autoscaler, Karpenter) pass unchecked and can take two zones down at once',
  },
  'prepare-downscale': {
    severity: 'error',
    why: 'while no operator replica answers, StatefulSets are downscaled without their leaving pods being prepared and without the min-time between zones',
  },
  'zpdb-validation': {
    severity: 'warning',
    why: 'while no operator replica answers, a ZoneAwarePodDisruptionBudget the eviction webhook cannot use is accepted, and then silently ignored',
  },
  'rollout-health-check-validation': {
    severity: 'warning',
    why: 'while no operator replica answers, a RolloutHealthCheck the gate cannot use is accepted, and then holds the StatefulSets it gates',
  },
  'reschedule-on-eviction': {
    severity: 'error',
    why: 'while no operator replica answers, drains evict the selected pods directly instead of asking their own operator to move them',
  },
};

/**
 * Webhook configurations that point at the operator: the CA-injection
 * labels, the caBundle, the failure policy and, for no-downscale, the
 * objectSelector that keeps the operator's own Deployment out.
 */
export function checkWebhooks(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const operatorNamespace = scope.operatorNamespace();
  const operators = scope.operatorDeployments();
  const configs = [
    ...scope.input.validatingWebhookConfigurations.map((config) => ({
      kind: 'ValidatingWebhookConfiguration',
      config,
    })),
    ...scope.input.mutatingWebhookConfigurations.map((config) => ({ kind: 'MutatingWebhookConfiguration', config })),
  ].filter(({ config }) => pointsAtOperator(config) && webhookConcerns(scope, config));

  for (const { kind, config } of configs) {
    const object = objectName(kind, config);
    const labels = labelsOf(config);
    const resource = kind.toLowerCase();
    const name = nameOf(config);
    const webhooks = config.webhooks ?? [];
    const serviceNamespace = webhooks.map((w) => w.clientConfig?.service?.namespace).find((n) => n);
    const ownerNamespace = labels[NAMESPACE_LABEL] ?? serviceNamespace ?? operatorNamespace;
    const certManaged = has(annotationsOf(config), CERT_MANAGER_INJECT);

    const missing = [
      ...(labels[INJECT_LABEL] === 'true' ? [] : [`${INJECT_LABEL}=true`]),
      ...(labels[NAMESPACE_LABEL] ? [] : [`${NAMESPACE_LABEL}=${ownerNamespace ?? '<operator namespace>'}`]),
    ];
    const emptyBundles = webhooks.filter((w) => !w.clientConfig?.caBundle).map((w) => w.name ?? '');
    if (missing.length > 0 && !certManaged) {
      findings.push({
        severity: emptyBundles.length > 0 ? 'error' : 'warning',
        code: 'webhook-ca-labels-missing',
        object,
        problem:
          `it lacks the label${missing.length > 1 ? 's' : ''} ${missing.join(' and ')}, so the operator never injects its CA into it` +
          (emptyBundles.length > 0
            ? ": the API server cannot verify the webhook's certificate and every call fails"
            : ': the caBundle it has goes stale when the operator renews its certificate'),
        fix: `kubectl label ${resource}/${name} ${missing.map(shellQuote).join(' ')} --overwrite`,
      });
    }
    if (emptyBundles.length > 0) {
      const injectable = missing.length === 0;
      findings.push({
        severity: 'error',
        code: 'webhook-ca-bundle-empty',
        object,
        problem: `webhook${emptyBundles.length > 1 ? 's' : ''} ${emptyBundles.join(', ')} ha${emptyBundles.length > 1 ? 've' : 's'} no clientConfig.caBundle: the API server cannot verify the operator's certificate, so every call fails${webhooks.some((w) => w.failurePolicy !== 'Ignore') ? ' and, with failurePolicy Fail, the requests it covers are refused' : ''}`,
        fix: certManaged
          ? `cert-manager's CA injector fills it (annotation ${CERT_MANAGER_INJECT}): check that the named Certificate exists and is Ready`
          : injectable
            ? `the operator in namespace ${labels[NAMESPACE_LABEL]} injects it: check that it runs with -server-tls.enabled, -server-tls.self-signed-cert.enabled=true (the default), -webhooks.update-ca-bundle=true (the default) and -kubernetes.namespace=${labels[NAMESPACE_LABEL]}, that -webhooks.ca-bundle-configurations (if set) names ${name}, and read its log for "CA injection failed"`
            : `label it for CA injection, then the operator injects its CA: kubectl label ${resource}/${name} ${missing.map(shellQuote).join(' ')} --overwrite`,
      });
    }

    const labelled = labels[NAMESPACE_LABEL];
    // Only a namespace the caller named: one guessed from a Deployment seen elsewhere may be another install's.
    const expected = serviceNamespace ?? scope.input.operatorNamespace;
    if (labelled && expected && labelled !== expected) {
      findings.push({
        severity: 'error',
        code: 'webhook-namespace-mismatch',
        object,
        problem: `it is labelled ${NAMESPACE_LABEL}=${labelled}, so the operator in ${labelled} injects its CA, but ${serviceNamespace ? `its webhooks call the Service in namespace ${serviceNamespace}` : `the operator runs in namespace ${expected}`}: the CA does not match the certificate that answers`,
        fix: `kubectl label ${resource}/${name} ${NAMESPACE_LABEL}=${shellQuote(expected)} --overwrite`,
      });
    }

    findings.push(...failurePolicyFindings(scope, { object, resource, name, webhooks }, operators, ownerNamespace));
  }
  return findings;
}

/** Whether a configuration concerns the diagnosed namespaces. */
export function webhookConcerns(scope: Scope, config: WebhookConfigurationObject): boolean {
  const namespaces = scope.input.namespaces;
  if (namespaces === undefined) return true;
  const owner = labelsOf(config)[NAMESPACE_LABEL];
  if (owner !== undefined && namespaces.includes(owner)) return true;
  return (config.webhooks ?? []).some((w) => {
    const serviceNamespace = w.clientConfig?.service?.namespace;
    if (serviceNamespace !== undefined && namespaces.includes(serviceNamespace)) return true;
    return namespaces.some((ns) => labelSelectorMatches(w.namespaceSelector, scope.namespaceLabels(ns)));
  });
}

function coversDeployments(w: WebhookEntry): boolean {
  return (w.rules ?? []).some(
    (r) =>
      (r.apiGroups ?? []).some((g) => g === 'apps' || g === '*') &&
      (r.resources ?? []).some((res) => res === '*' || res === 'deployments' || res === 'replicasets'),
  );
}

/**
 * Each webhook's failure policy: Ignore where a silent pass is a risk, and a
 * no-downscale webhook with failurePolicy Fail whose selector covers the
 * operator's own Deployment.
 */
function failurePolicyFindings(
  scope: Scope,
  target: { object: string; resource: string; name: string; webhooks: WebhookEntry[] },
  operators: Deployment[],
  ownerNamespace: string | undefined,
): Finding[] {
  const { object, resource, name, webhooks } = target;
  const findings: Finding[] = [];
  for (const w of webhooks) {
    const type = webhookKind(w);
    const policy = w.failurePolicy ?? 'Fail';
    const risk = type ? RISK_OF_IGNORE[type] : undefined;
    if (risk && policy === 'Ignore') {
      const index = webhooks.indexOf(w);
      findings.push({
        severity: risk.severity,
        code: 'webhook-failure-policy-ignore',
        object,
        problem: `webhook ${w.name ?? index} (${type}) has failurePolicy Ignore: ${risk.why}`,
        fix: `kubectl patch ${resource}/${name} --type=json -p ${shellQuote(JSON.stringify([{ op: 'replace', path: `/webhooks/${index}/failurePolicy`, value: 'Fail' }]))}, and run two operator replicas (the ha overlay) so one always answers (docs/drain.md, "Failure policy")`,
      });
    }
    if (type === 'no-downscale' && policy !== 'Ignore') {
      const finding = noDownscaleSelectsOperator(scope, w, operators, ownerNamespace);
      if (finding) {
        const index = webhooks.indexOf(w);
        findings.push({
          severity: 'error',
          code: 'no-downscale-selects-operator',
          object,
          problem: `webhook ${w.name ?? index} (no-downscale, failurePolicy Fail) ${finding}: while the operator's only replica is being replaced nothing answers, every update of its Deployment and ReplicaSets is refused, and the new ReplicaSet can never scale up`,
          fix: `exclude the operator's labels as deploy/webhooks/no-downscale.yaml does: kubectl patch ${resource}/${name} --type=json -p ${shellQuote(
            JSON.stringify([
              {
                op: 'add',
                path: `/webhooks/${index}/objectSelector`,
                value: {
                  matchExpressions: [
                    { key: 'app.kubernetes.io/name', operator: 'NotIn', values: ['stateward'] },
                    { key: 'name', operator: 'NotIn', values: ['rollout-operator'] },
                  ],
                },
              },
            ]),
          )} (a NotIn selector still lets label-less /scale requests through)`,
        });
      }
    }
  }
  return findings;
}

/**
 * Why the no-downscale webhook would hold the operator's own Deployment, or
 * undefined when it does not. The operator is the one in the configuration's
 * namespace (its grafana.com/namespace label or Service); when its Deployment
 * is not in view, it is judged by the labels the operator ships with.
 */
function noDownscaleSelectsOperator(
  scope: Scope,
  w: WebhookEntry,
  operators: Deployment[],
  ownerNamespace: string | undefined,
): string | undefined {
  if (!coversDeployments(w)) return undefined;
  // The API server defaults an absent objectSelector to {}.
  const hasSelector =
    Object.keys(w.objectSelector?.matchLabels ?? {}).length > 0 ||
    (w.objectSelector?.matchExpressions ?? []).length > 0;
  const own = operators.filter((d) => ownerNamespace === undefined || namespaceOf(d) === ownerNamespace);
  const selected = own.filter((d) => labelSelectorMatches(w.namespaceSelector, scope.namespaceLabels(namespaceOf(d))));
  if (own.length > 0) {
    const caught = selected.filter(
      (d) =>
        labelSelectorMatches(w.objectSelector, labelsOf(d)) ||
        labelSelectorMatches(w.objectSelector, d.spec?.template?.metadata?.labels),
    );
    if (caught.length === 0) return undefined;
    return `${hasSelector ? 'has an objectSelector that selects' : 'has no objectSelector, so it covers'} the operator's own Deployment ${caught.map((d) => `${namespaceOf(d)}/${nameOf(d)}`).join(', ')}`;
  }
  if (ownerNamespace !== undefined && !labelSelectorMatches(w.namespaceSelector, scope.namespaceLabels(ownerNamespace)))
    return undefined;
  const defaults: Record<string, string>[] = [{ 'app.kubernetes.io/name': 'stateward' }, { name: 'rollout-operator' }];
  if (!defaults.every((labels) => labelSelectorMatches(w.objectSelector, labels))) return undefined;
  return hasSelector
    ? "has an objectSelector that excludes neither app.kubernetes.io/name=stateward nor name=rollout-operator, so it covers the operator's own Deployment"
    : "has no objectSelector, so it covers the operator's own Deployment";
}
