// ReplicaTemplates (the shipped CRD) on the test cluster, for StatefulSets
// that mirror a reference resource's scale.
import { fileURLToPath } from 'node:url';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import type { KubeObject } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { kubectl } from './kubectl.ts';

export const REPLICA_TEMPLATE = {
  group: 'rollout-operator.grafana.com',
  version: 'v1',
  resource: 'replicatemplates',
  kind: 'ReplicaTemplate',
  namespaced: true,
};

const crd = fileURLToPath(new URL('../../deploy/crds/replica-templates.yaml', import.meta.url));

/** Installs the CRD (idempotent) and creates a ReplicaTemplate once the API serves it. */
export async function createReplicaTemplate(
  cluster: TestCluster,
  kube: KubeClient,
  namespace: string,
  name: string,
  replicas: number,
): Promise<void> {
  const applied = await kubectl(cluster, 'apply', '-f', crd);
  if (!applied.ok) throw new Error(`cannot install the ReplicaTemplate CRD: ${applied.out}`);
  const template = {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'ReplicaTemplate',
    metadata: { name, namespace },
    spec: { replicas },
  } as KubeObject;
  await waitFor(
    `ReplicaTemplate ${name} to be created`,
    () => kube.create(REPLICA_TEMPLATE, template).catch(() => undefined),
    { timeoutMs: 30_000 },
  );
}

/** The annotations that make a StatefulSet mirror ReplicaTemplate `name`. */
export function mirrorAnnotations(name: string): Record<string, string> {
  return {
    'grafana.com/rollout-mirror-replicas-from-resource-name': name,
    'grafana.com/rollout-mirror-replicas-from-resource-kind': 'ReplicaTemplate',
    'grafana.com/rollout-mirror-replicas-from-resource-api-version': 'rollout-operator.grafana.com/v1',
  };
}
