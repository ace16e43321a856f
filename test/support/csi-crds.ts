// The Secrets Store CSI driver's two CRDs, as its config/crd/bases define them
// (v1 only, descriptions left out), for the tests that write the driver's
// objects themselves: the CSI integration test and the chaos soak's driver
// stand-in. No driver runs; the CRDs give the real apiserver its schema.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import type { KubeObject } from '../../src/runtime/kube/types.ts';
import { classPodStatusResource } from '../../src/restarts/csiinformers.ts';
import { waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { kubectl } from './kubectl.ts';

const GROUP = 'secrets-store.csi.x-k8s.io';

function csiCrds(): KubeObject[] {
  const crd = (resource: string, kind: string, body: Record<string, unknown>) => ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${resource}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { kind, listKind: `${kind}List`, plural: resource, singular: kind.toLowerCase() },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                ...body,
              },
            },
          },
        },
      ],
    },
  });
  const str = { type: 'string' };
  return [
    crd('secretproviderclasses', 'SecretProviderClass', {
      spec: {
        type: 'object',
        properties: {
          provider: str,
          parameters: { type: 'object', additionalProperties: str },
          secretObjects: { type: 'array', items: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      },
      status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
    }),
    crd('secretproviderclasspodstatuses', 'SecretProviderClassPodStatus', {
      status: {
        type: 'object',
        properties: {
          mounted: { type: 'boolean' },
          objects: { type: 'array', items: { type: 'object', properties: { id: str, version: str } } },
          podName: str,
          secretProviderClassName: str,
          targetPath: str,
        },
      },
    }),
  ] as KubeObject[];
}

/** Applies the CRDs with kubectl (the file goes in `dir`), then waits until the apiserver serves them. */
export async function installCsiCrds(cluster: TestCluster, kube: KubeClient, dir: string): Promise<void> {
  const file = join(dir, 'crd-secrets-store.json');
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: csiCrds() }));
  const applied = await kubectl(cluster, 'apply', '-f', file);
  if (!applied.ok) throw new Error(`installing the Secrets Store CSI CRDs: ${applied.out}`);
  await waitFor(
    'the Secrets Store CSI resources served',
    () =>
      kube
        .list(classPodStatusResource, { timeoutMs: 5000 })
        .then(() => true)
        .catch(() => false),
    { timeoutMs: 30_000 },
  );
}
