// 11. The operator's own permissions: what its ServiceAccount may not do of
// what the features its flags turn on use (src/rbac/permissions.ts), as the
// API server's authorizer answers a SubjectAccessReview for it (gathered in
// doctor/access.ts). An install that kept rollout-operator's Role (grafana's
// Helm chart, its jsonnet) starts and works, degraded: the operator says
// once in its log what it falls back to; the doctor names each missing
// permission, with what it is for, so nobody has to read the log (issue 34).
import { type Finding } from './scope.ts';

export interface MissingPermission {
  /** e.g. "configmaps", "leases.coordination.k8s.io", "validatingwebhookconfigurations.admissionregistration.k8s.io". */
  resource: string;
  verbs: string[];
  names?: string[];
  /** undefined: cluster-scoped, or in every namespace. */
  namespace?: string;
  /** What it is used for (the rule's reason). */
  why: string;
}

export interface OperatorPermissions {
  /** "Deployment ns/name". */
  operator: string;
  /** "ns/name". */
  serviceAccount: string;
  missing: MissingPermission[];
}

const MIGRATION = 'docs/migrating-from-rollout-operator.md#permissions-beyond-rollout-operators-role';

/** One warning per missing rule: the operator falls back, and the doctor says to what it would not. */
export function checkOperatorPermissions(scope: { input: { operatorPermissions?: OperatorPermissions[] } }): Finding[] {
  return (scope.input.operatorPermissions ?? []).flatMap(({ operator, serviceAccount, missing }) =>
    missing.map((m) => {
      const what = `${m.verbs.join(', ')} ${m.resource}${m.names ? ` named ${m.names.join(', ')}` : ''}`;
      const where = m.namespace === undefined ? '' : ` in namespace ${m.namespace}`;
      return {
        severity: 'warning' as const,
        code: 'operator-permission-missing',
        object: operator,
        problem: `its ServiceAccount ${serviceAccount} may not ${what}${where}, which it uses to ${m.why}; it falls back (said once in its log), and retries only rarely`,
        fix: `grant ${what}${where} to ServiceAccount ${serviceAccount} (deploy/kustomize/rbac/PERMISSIONS.md; a Role to add beside rollout-operator's: ${MIGRATION})`,
      };
    }),
  );
}
