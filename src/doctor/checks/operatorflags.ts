// 9. The operator's own flags; 10. what could not be read.
import type {} from '../../runtime/kube/types.ts';
import { mayOptIn, watchedConfigs } from '../../restarts/optins.ts';
import { NAMESPACE_LABEL } from '../../vocabulary/keys.ts';
import { type Scope, type Deployment, type Finding, objectName, plural } from './scope.ts';
import { pointsAtOperator } from './webhooks.ts';
import { labelsOf, namespaceOf } from '../../vocabulary/metadata.ts';

// ----------------------------------------------------- 9. the operator's flags

/** The value of a flag in an argument list (last one wins; '' for a bare flag), or undefined when absent. */
export function flagValue(args: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  for (const arg of args) {
    const m = /^--?([^=]+)(?:=(.*))?$/s.exec(arg);
    if (m?.[1] === name) value = m[2] ?? '';
  }
  return value;
}

/** The value of a Go boolean flag in an argument list (last one wins), or undefined when absent. */
export function boolFlag(args: readonly string[], name: string): boolean | undefined {
  const value = flagValue(args, name);
  return value === undefined ? undefined : value === '' || ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(value);
}

/** A Deployment's container command lines, flags and all. */
export const argsOf = (d: Deployment) =>
  (d.spec?.template?.spec?.containers ?? []).flatMap((c) => [...(c.command ?? []), ...(c.args ?? [])]);

/** The operator's Deployment (when in view) lacks the flag a configured feature needs. */
export function checkOperatorFlags(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const operators = scope.operatorDeployments();
  if (operators.length === 0) return findings;

  const webhookNamespaces = new Set(
    [...scope.input.validatingWebhookConfigurations, ...scope.input.mutatingWebhookConfigurations]
      .filter(pointsAtOperator)
      .map(
        (c) =>
          labelsOf(c)[NAMESPACE_LABEL] ??
          (c.webhooks ?? []).map((w) => w.clientConfig?.service?.namespace).find((n) => n),
      )
      .filter((n): n is string => Boolean(n)),
  );
  for (const d of operators) {
    if (webhookNamespaces.has(namespaceOf(d)) && boolFlag(argsOf(d), 'server-tls.enabled') !== true) {
      findings.push({
        severity: 'warning',
        code: 'operator-flag-missing',
        object: objectName('Deployment', d),
        problem:
          'webhook configurations point at this operator, but it runs without -server-tls.enabled: nothing serves the admission webhooks, and no CA is injected',
        fix: `add -server-tls.enabled to its container args (the webhooks overlay or --set webhooks.enabled=true in the chart do)`,
      });
    }
  }
  const optedIn = scope.workloads.filter(
    ({ workload }) => mayOptIn(workload) && watchedConfigs(workload).optIns.length > 0,
  );
  if (optedIn.length > 0 && !operators.some((d) => boolFlag(argsOf(d), 'config-restarts.enabled') === true)) {
    const d = operators[0]!;
    findings.push({
      severity: 'warning',
      code: 'operator-flag-missing',
      object: objectName('Deployment', d),
      problem: `${plural(optedIn.length, 'workload')} (${optedIn
        .slice(0, 3)
        .map(({ kind, workload }) => objectName(kind, workload))
        .join(
          ', ',
        )}${optedIn.length > 3 ? ', …' : ''}) opted in to config-change restarts, but the operator runs without -config-restarts.enabled: nothing restarts them`,
      fix: 'add -config-restarts.enabled to its container args (the config-restarts kustomize component or --set configRestarts.enabled=true in the chart)',
    });
  }
  return findings;
}

// ------------------------------------------------------- 10. what was skipped

const SKIPPED: Record<string, string> = {
  validatingwebhookconfigurations:
    'webhook checks (CA labels, caBundle, failure policy, no-downscale objectSelector) for validating webhooks were skipped',
  mutatingwebhookconfigurations:
    'webhook checks (CA labels, caBundle, failure policy) for the prepare-downscale webhook were skipped',
  statefulsets: 'StatefulSet checks (labels, rollout groups, leaders, values, budgets) were skipped',
  zoneawarepoddisruptionbudgets: 'ZoneAwarePodDisruptionBudget checks were skipped',
  rollouthealthchecks:
    'RolloutHealthCheck checks (validation, selectors, the StatefulSets that name them, query endpoints) were skipped',
  pods: 'checks that count pods (unmanaged OnDelete StatefulSets, budgets selecting pods only, overlapping budgets) were skipped',
  configmaps: 'missing-ConfigMap checks of config restarts were skipped',
  secrets: 'missing-Secret checks of config restarts were skipped',
  deployments: 'Deployments were not checked',
  daemonsets: 'DaemonSets were not checked',
  subjectaccessreviews:
    "the operator's own permissions were not checked (create subjectaccessreviews.authorization.k8s.io)",
};

export function checkUnreadable(scope: Scope): Finding[] {
  return (scope.input.unreadable ?? []).map((resource) => ({
    severity: 'warning' as const,
    code: 'checks-skipped',
    object: `resource ${resource}`,
    problem: `cannot ${resource === 'subjectaccessreviews' ? 'create' : 'list'} ${resource} (forbidden): ${SKIPPED[resource] ?? 'the checks that need them were skipped'}`,
    fix: `run the doctor with credentials that may ${resource === 'subjectaccessreviews' ? 'create' : 'list'} ${resource}${resource.endsWith('webhookconfigurations') ? ' (cluster-scoped: a ClusterRole)' : ''}, e.g. check with kubectl auth can-i list ${resource}`,
  }));
}
