// A namespace for a benchmark's objects, ready once its default
// ServiceAccount exists (pods cannot be created before).
import type { KubeClient } from '../src/runtime/kube/client.ts';
import { resources } from '../src/runtime/kube/types.ts';
import { waitFor } from '../test/cluster/probe.ts';

export async function benchNamespace(kube: KubeClient, name = 'bench'): Promise<string> {
  await kube.create(resources.namespaces, { metadata: { name } });
  await waitFor(
    'default ServiceAccount',
    () => kube.get(resources.serviceAccounts, { namespace: name, name: 'default' }),
    { timeoutMs: 30_000 },
  );
  return name;
}
