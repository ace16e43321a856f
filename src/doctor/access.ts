// What the operator's ServiceAccount may not do, asked of the API server's
// own authorizer (SubjectAccessReview, so every Role, ClusterRole and binding
// counts as it does for the operator): for each operator Deployment in view,
// the rules of src/rbac/permissions.ts for the features its flags turn on,
// under the names its flags give. The doctor needs `create` on
// subjectaccessreviews (cluster-scoped) for this; without it the check is
// skipped and says so.
import type { KubeClient } from '../runtime/kube/client.ts';
import { isForbidden } from '../runtime/kube/errors.ts';
import type { KubeObject, ResourceType } from '../runtime/kube/types.ts';
import { namespaceOf, nameOf } from '../vocabulary/metadata.ts';
import {
  CERTIFICATE_SECRET,
  CHECKSUM_KEY_SECRET,
  LEADER_LEASE,
  PERMISSIONS,
  RESCHEDULE_TRACKING_CONFIGMAP,
  ZONE_TRACKER_CONFIGMAP,
  type Feature,
  type Rule,
} from '../rbac/permissions.ts';
import { reschedulePaths } from './checks/drainprofiles.ts';
import { argsOf, boolFlag, flagValue } from './checks/operatorflags.ts';
import type { MissingPermission, OperatorPermissions } from './checks/operatorpermissions.ts';
import type { Deployment } from './checks/scope.ts';

const SUBJECT_ACCESS_REVIEWS: ResourceType = {
  group: 'authorization.k8s.io',
  version: 'v1',
  resource: 'subjectaccessreviews',
  kind: 'SubjectAccessReview',
  namespaced: false,
};

interface Review extends KubeObject {
  status?: { allowed?: boolean };
}

/** The features the operator's flags turn on, and the names its flags give the objects it writes. */
function installOf(d: Deployment) {
  const args = argsOf(d);
  const on = (name: string) => boolFlag(args, name) === true;
  const features: Feature[] = ['rollouts'];
  if (on('leader-election.enabled')) features.push('leader-election');
  if (on('server-tls.enabled')) features.push('webhooks');
  // Any profile: the flags', the Strimzi one (flags or STRIMZI_* variables), a profiles file (drainprofiles.ts).
  if (reschedulePaths(d).length > 0) features.push('reschedule');
  if (on('config-restarts.enabled')) features.push('config-restarts');
  const renamed = new Map<string, string | undefined>([
    [CERTIFICATE_SECRET, flagValue(args, 'server-tls.self-signed-cert.secret-name')],
    [LEADER_LEASE, flagValue(args, 'leader-election.lease-name')],
    [ZONE_TRACKER_CONFIGMAP, flagValue(args, 'zone-tracker.config-map-name')],
    [RESCHEDULE_TRACKING_CONFIGMAP, flagValue(args, 'reschedule.tracking-config-map')],
    [CHECKSUM_KEY_SECRET, flagValue(args, 'config-restarts.checksum-key-secret')],
  ]);
  const caConfigurations = flagValue(args, 'webhooks.ca-bundle-configurations')?.split(',').filter(Boolean);
  /** A rule's names under this install's flags; undefined: check it without a name; null: not used here. */
  const namesOf = (rule: Rule): string[] | undefined | null => {
    if (!rule.resourceNames) return undefined;
    if (rule.resources.some((r) => r.endsWith('webhookconfigurations')))
      return caConfigurations ? rule.resourceNames.filter((n) => caConfigurations.includes(n)) : undefined;
    return rule.resourceNames.map((n) => renamed.get(n) || n);
  };
  const used = (rule: Rule): boolean => {
    if (rule.why.includes('zone tracker')) return on('use-zone-tracker');
    // The Namespace cache of config restarts exists only cluster-wide: an install
    // of listed namespaces (Roles only) reads no Namespace, so it lacks nothing.
    if (rule.resources.includes('namespaces') && features.includes('config-restarts') && rule.scope === 'managed')
      return flagValue(args, 'kubernetes.watch-namespaces') === '*';
    if (rule.resources.includes('secrets') && features.includes('webhooks') && rule.why.includes('certificate'))
      return flagValue(args, 'server-tls.cert-file') === undefined;
    return true;
  };
  return { features, namesOf, used };
}

/** One SubjectAccessReview per verb, resource and name of every rule the install uses. */
async function missingOf(client: KubeClient, d: Deployment, user: string, groups: string[]) {
  const namespace = namespaceOf(d);
  const { features, namesOf, used } = installOf(d);
  const watched = flagValue(argsOf(d), 'kubernetes.watch-namespaces');
  const managed = watched === '*' ? undefined : namespace;
  const missing: MissingPermission[] = [];
  for (const feature of features) {
    for (const rule of PERMISSIONS[feature]) {
      const names = namesOf(rule);
      if (names === null || (names && names.length === 0) || !used(rule)) continue;
      const where = rule.scope === 'cluster' ? undefined : rule.scope === 'own' ? namespace : managed;
      for (const [group, full] of rule.apiGroups.flatMap((g) => rule.resources.map((r) => [g, r] as const))) {
        const [resource, subresource] = full.split('/') as [string, string | undefined];
        const denied: string[] = [];
        for (const verb of rule.verbs) {
          const answers = await Promise.all(
            (names ?? [undefined]).map((name) =>
              client.create<Review>(SUBJECT_ACCESS_REVIEWS, {
                apiVersion: 'authorization.k8s.io/v1',
                kind: 'SubjectAccessReview',
                spec: {
                  user,
                  groups,
                  resourceAttributes: { verb, group, resource, subresource, name, namespace: where },
                },
              } as KubeObject),
            ),
          );
          if (answers.some((a) => a.status?.allowed !== true)) denied.push(verb);
        }
        if (denied.length > 0)
          missing.push({
            resource: group ? `${resource}.${group}` : full,
            verbs: denied,
            ...(names ? { names } : {}),
            ...(where !== undefined ? { namespace: where } : {}),
            why: rule.why,
          });
      }
    }
  }
  return missing;
}

/**
 * The missing permissions of each operator Deployment's ServiceAccount;
 * undefined when the doctor may not ask (no create on subjectaccessreviews).
 */
export async function operatorPermissions(
  client: KubeClient,
  deployments: readonly Deployment[],
): Promise<OperatorPermissions[] | undefined> {
  const result: OperatorPermissions[] = [];
  try {
    for (const d of deployments) {
      const namespace = namespaceOf(d);
      const account = d.spec?.template?.spec?.serviceAccountName || 'default';
      const user = `system:serviceaccount:${namespace}:${account}`;
      const groups = ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'];
      result.push({
        operator: `Deployment ${namespace}/${nameOf(d)}`,
        serviceAccount: `${namespace}/${account}`,
        missing: await missingOf(client, d, user, groups),
      });
    }
  } catch (error) {
    if (isForbidden(error)) return undefined;
    throw error;
  }
  return result;
}
