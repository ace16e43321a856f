// The shipped ReplicaTemplate CRD on the real apiserver: the real kubectl
// scales it through its scale subresource, as an HPA would.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';
import { kubectl } from '../../support/kubectl.ts';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import type { KubeObject } from '../../../src/runtime/kube/types.ts';
import { ScaleClient } from '../../../src/downscale/coordination/scaleclient.ts';

const cluster = testCluster();
const crd = fileURLToPath(new URL('../../../deploy/crds/replica-templates.yaml', import.meta.url));

describe('ReplicaTemplate CRD', () => {
  it('installs, defaults spec.replicas to 1, and scales through its scale subresource', async (t) => {
    const namespace = await cluster.namespace(t);
    const applied = await kubectl(cluster, 'apply', '-f', crd);
    assert.ok(applied.ok, applied.out);
    await waitFor(
      'the CRD to be established',
      async () =>
        (
          await kubectl(
            cluster,
            'get',
            'crd',
            'replicatemplates.rollout-operator.grafana.com',
            '-o',
            'jsonpath={.status.conditions[?(@.type=="Established")].status}',
          )
        ).out === 'True',
      { timeoutMs: 30_000 },
    );
    const manifest = JSON.stringify({
      apiVersion: 'rollout-operator.grafana.com/v1',
      kind: 'ReplicaTemplate',
      metadata: { name: 'ingester', namespace },
      spec: { labelSelector: 'name=ingester' },
    });
    const path = join(cluster.state.stateDir, `replicatemplate-${namespace}.json`);
    await writeFile(path, manifest);
    // The API may take a moment to serve a just-established CRD's kind.
    const created = await waitFor(
      'the ReplicaTemplate to be created',
      async () => {
        const result = await kubectl(cluster, 'create', '-f', path);
        return result.ok ? result : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.ok(created.ok, created.out);
    assert.equal(
      (await kubectl(cluster, '-n', namespace, 'get', 'replicatemplate', 'ingester', '-o', 'jsonpath={.spec.replicas}'))
        .out,
      '1',
      'defaulted',
    );
    const scaled = await kubectl(cluster, '-n', namespace, 'scale', 'replicatemplate', 'ingester', '--replicas=5');
    assert.ok(scaled.ok, scaled.out);
    assert.equal(
      (await kubectl(cluster, '-n', namespace, 'get', 'replicatemplate', 'ingester', '-o', 'jsonpath={.spec.replicas}'))
        .out,
      '5',
    );
    const scale = JSON.parse(
      (
        await kubectl(
          cluster,
          '-n',
          namespace,
          'get',
          '--raw',
          `/apis/rollout-operator.grafana.com/v1/namespaces/${namespace}/replicatemplates/ingester/scale`,
        )
      ).out,
    ) as { spec: { replicas: number }; status: { selector?: string } };
    assert.equal(scale.spec.replicas, 5);
    assert.equal(scale.status.selector, 'name=ingester');
  });
});

describe('scale client', () => {
  it("finds a kind's scale subresource through discovery, reads it, writes status back, and says why when it cannot", async (t) => {
    const namespace = await cluster.namespace(t);
    assert.ok((await kubectl(cluster, 'apply', '-f', crd)).ok);
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 10_000 });
    const scales = new ScaleClient(kube);
    const type = await waitFor(
      'the CRD to be served',
      () => scales.resolve('rollout-operator.grafana.com/v1', 'ReplicaTemplate').catch(() => undefined),
      { timeoutMs: 30_000 },
    );
    assert.equal(type.resource, 'replicatemplates');
    await kube.create(type, {
      apiVersion: 'rollout-operator.grafana.com/v1',
      kind: 'ReplicaTemplate',
      metadata: { name: 'rt', namespace },
      spec: { replicas: 4 },
    } as KubeObject);
    const ref = { apiVersion: 'rollout-operator.grafana.com/v1', kind: 'ReplicaTemplate', namespace, name: 'rt' };
    assert.equal((await scales.getScale(ref)).spec?.replicas, 4);
    await scales.writeBackStatusReplicas(ref, 3);
    assert.equal((await scales.getScale(ref)).status?.replicas, 3);
    await assert.rejects(scales.resolve('v1', 'ConfigMap'), /has no scale subresource/);
    await assert.rejects(scales.resolve('nope.example.com/v1', 'Thing'), /is not served/);
    assert.equal((await scales.resolve('apps/v1', 'StatefulSet')).resource, 'statefulsets');
  });
});
