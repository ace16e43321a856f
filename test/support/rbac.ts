// What "narrowed" means for Stateward's rendered RBAC (issue 16): checked of
// the generated kustomize components, the overlays as rendered, and the
// Helm chart's render, namespaced and cluster-wide.
import type { KubeRule } from '../../src/rbac/permissions.ts';

const WRITES = ['update', 'patch', 'delete', 'deletecollection', '*'];
const WEBHOOK_CONFIGURATIONS = ['validatingwebhookconfigurations', 'mutatingwebhookconfigurations'];

/**
 * Every way `rules` grant more than the narrowed RBAC allows, as messages
 * (empty when none): ConfigMap writes other than create without
 * resourceNames, any Lease delete, and webhook-configuration writes without
 * resourceNames or on names other than `webhookNames`.
 */
export function narrowingViolations(rules: readonly KubeRule[], webhookNames: readonly string[]): string[] {
  const out: string[] = [];
  for (const rule of rules) {
    const text = JSON.stringify(rule);
    const core = rule.apiGroups.includes('');
    const writes = rule.verbs.filter((v) => WRITES.includes(v));
    if (core && rule.resources.includes('configmaps') && writes.length > 0 && !rule.resourceNames?.length)
      out.push(`ConfigMap ${writes.join(',')} without resourceNames: ${text}`);
    if (
      rule.apiGroups.includes('coordination.k8s.io') &&
      rule.resources.includes('leases') &&
      rule.verbs.some((v) => ['delete', 'deletecollection', '*'].includes(v))
    )
      out.push(`Lease delete: ${text}`);
    if (
      rule.apiGroups.includes('admissionregistration.k8s.io') &&
      rule.resources.some((r) => WEBHOOK_CONFIGURATIONS.includes(r)) &&
      writes.length > 0
    ) {
      if (!rule.resourceNames?.length)
        out.push(`webhook configuration ${writes.join(',')} without resourceNames: ${text}`);
      else if (rule.resourceNames.some((n) => !webhookNames.includes(n)))
        out.push(`webhook configuration ${writes.join(',')} on names not shipped: ${text}`);
    }
  }
  return out;
}

/** The effective value of a repeated flag: the last one given wins, as with Go's flag package. */
export function lastFlag(args: readonly string[], name: string): string | undefined {
  const prefix = `-${name}=`;
  return args
    .filter((a) => a.startsWith(prefix))
    .at(-1)
    ?.slice(prefix.length);
}
