// A ServiceAccount that holds exactly one Role, and a kubeconfig that is it:
// how a test runs the operator (or a CLI) under a user's own permissions.
import { KubeClient } from '../../src/runtime/kube/client.ts';
import { readKubeConfigFile } from '../../src/runtime/kube/kubeconfig.ts';
import type { KubeRule } from '../../src/rbac/permissions.ts';
import { resources, type KubeObject, type ResourceType } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';

const rbac = (resource: string, kind: string): ResourceType => ({
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  resource,
  kind,
  namespaced: true,
});

/**
 * Creates ServiceAccount `name` in `namespace`, a Role of `rules` and its
 * RoleBinding (both named `name`), and returns the path of a kubeconfig
 * authenticating as the ServiceAccount once the Role is in effect: the
 * authorizer learns of a Role from its own watch, and until then the first
 * requests would be refused too. The Role must let it list pods in
 * `namespace` (how "in effect" is told).
 */
export async function serviceAccountUnderRole(
  cluster: TestCluster,
  kube: KubeClient,
  namespace: string,
  name: string,
  rules: readonly KubeRule[],
): Promise<string> {
  await kube.create(resources.serviceAccounts, { metadata: { name, namespace } });
  await kube.create(rbac('roles', 'Role'), { metadata: { name, namespace }, rules } as KubeObject);
  await kube.create(rbac('rolebindings', 'RoleBinding'), {
    metadata: { name, namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
    subjects: [{ kind: 'ServiceAccount', name, namespace }],
  } as KubeObject);
  const kubeconfig = await cluster.serviceAccountKubeconfig(namespace, name);
  const sa = new KubeClient({ kubeConfig: readKubeConfigFile(kubeconfig), timeoutMs: 15_000 });
  try {
    await waitFor(
      `the Role ${namespace}/${name} in effect`,
      () =>
        sa.list(resources.pods, { namespace }).then(
          () => true,
          () => false,
        ),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  } finally {
    await sa.close();
  }
  return kubeconfig;
}
