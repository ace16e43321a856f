// Every kustomize overlay renders with the real `kubectl kustomize` into a
// user's namespace and applies to the local control plane, where the
// operator's Deployment becomes available (kwok runs its pod).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resources, type KubeObject } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { testClient } from '../support/rollout-group.ts';
import { CLUSTER_SCOPED, deleteClusterScoped, kubectlApply, OVERLAYS, renderOverlay, type Manifest } from '../support/manifests.ts';

const cluster = testCluster();

type Container = { args?: string[]; readinessProbe?: { httpGet?: { path?: string } }; livenessProbe?: { httpGet?: { path?: string } }; securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean }; resources?: { requests?: object } };
type Deployment = Manifest & { spec: { replicas: number; template: { metadata?: { labels?: Record<string, string> }; spec: { serviceAccountName: string; containers: Container[]; securityContext?: { runAsNonRoot?: boolean } } } }; status?: { availableReplicas?: number } };
type WebhookConfiguration = Manifest & { webhooks: { name: string; rules?: { resources: string[] }[]; objectSelector?: { matchExpressions?: { key: string; operator: string; values: string[] }[] }; failurePolicy?: string; clientConfig: { service?: { name: string; namespace: string; port: number } }; namespaceSelector?: { matchLabels?: Record<string, string> } }[] };

const FLAGS: Record<(typeof OVERLAYS)[number], string[]> = {
  rollouts: [],
  webhooks: ['-server-tls.enabled'],
  'cluster-wide': ['-kubernetes.watch-namespaces=*'],
  ha: ['-leader-election.enabled'],
  all: ['-server-tls.enabled', '-reschedule.enabled', '-config-restarts.enabled', '-leader-election.enabled'],
};

describe('kustomize overlays', { timeout: 300_000 }, () => {
  for (const overlay of OVERLAYS) {
    it(`${overlay}: renders into the user's namespace and applies`, async (t) => {
      const namespace = await cluster.namespace(t);
      const docs = await renderOverlay(overlay, namespace);
      t.after(() => deleteClusterScoped(cluster.kubeconfigPath, docs));
      for (const d of docs) {
        if (!CLUSTER_SCOPED.has(d.kind ?? '')) assert.equal(d.metadata?.namespace, namespace, `${d.kind}/${d.metadata?.name} in the user's namespace`);
        for (const s of (d as { subjects?: { namespace?: string }[] }).subjects ?? []) assert.equal(s.namespace, namespace, `${d.kind}/${d.metadata?.name} binds the ServiceAccount of the user's namespace`);
      }
      const deployment = docs.find((d): d is Deployment => d.kind === 'Deployment')!;
      const container = deployment.spec.template.spec.containers[0]!;
      assert.equal(deployment.spec.template.spec.serviceAccountName, 'stateward');
      assert.equal(deployment.spec.replicas, overlay === 'ha' || overlay === 'all' ? 2 : 1);
      for (const flag of FLAGS[overlay]) assert.ok(container.args?.includes(flag), `${overlay} passes ${flag}`);
      assert.equal(container.readinessProbe?.httpGet?.path, '/ready');
      assert.equal(container.livenessProbe?.httpGet?.path, '/healthz');
      assert.equal(container.securityContext?.readOnlyRootFilesystem, true);
      assert.equal(container.securityContext?.allowPrivilegeEscalation, false);
      assert.equal(deployment.spec.template.spec.securityContext?.runAsNonRoot, true);
      assert.ok(container.resources?.requests);
      assert.ok(docs.some((d) => d.kind === 'PodDisruptionBudget'));
      assert.ok(docs.some((d) => d.kind === 'Service'));
      const webhooks = docs.filter((d): d is WebhookConfiguration => d.kind === 'ValidatingWebhookConfiguration' || d.kind === 'MutatingWebhookConfiguration');
      assert.equal(webhooks.length > 0, FLAGS[overlay].includes('-server-tls.enabled'), 'webhook configurations exactly with the webhook server');
      for (const config of webhooks) {
        assert.equal(config.metadata?.labels?.['grafana.com/inject-rollout-operator-ca'], 'true');
        assert.equal(config.metadata?.labels?.['grafana.com/namespace'], namespace, 'CA injection finds it');
        for (const w of config.webhooks) {
          assert.ok(w.failurePolicy === 'Fail' || w.failurePolicy === 'Ignore', 'failure policy chosen explicitly');
          assert.deepEqual(w.clientConfig.service, { ...w.clientConfig.service, name: 'stateward', namespace, port: 443 });
          const scope = w.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'];
          if (scope !== undefined) assert.equal(scope, namespace, `${config.metadata?.name} scoped to the user's namespace`);
        }
      }
      // A webhook that fails closed must not stand in the way of replacing the operator itself.
      const own = deployment.spec.template.metadata?.labels ?? {};
      for (const config of webhooks) {
        for (const w of config.webhooks) {
          if (!w.rules?.some((r) => r.resources.includes('replicasets'))) continue;
          assert.ok(w.objectSelector?.matchExpressions?.some((e) => e.operator === 'NotIn' && e.values.includes(own[e.key] ?? '')), `${w.name} leaves the operator's own ReplicaSets out`);
        }
      }
      await kubectlApply(cluster.kubeconfigPath, docs);
      const kube = testClient(cluster);
      await waitFor(`the ${overlay} Deployment available`, async () => {
        const live = await kube.get<KubeObject & { status?: { availableReplicas?: number } }>(resources.deployments, { namespace, name: 'stateward' });
        return live.status?.availableReplicas === deployment.spec.replicas;
      }, { timeoutMs: 60_000 });
    });
  }
});
