// Stateward under the Role rollout-operator's jsonnet renders (issue 34):
// ConfigMaps get, update and create but no patch, nothing on Leases, Events
// or Secrets. It must still roll a group zone by zone and write the rollout
// status (with update instead of patch), and no refused request may repeat:
// before, the status ConfigMap's refused patch was retried every 0.5–1 s.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resources, type ConfigMap } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { serviceAccountUnderRole } from '../support/service-account.ts';
import { refusedFromMetrics, repeated } from '../support/refusals.ts';
import {
  changeTemplate,
  createGroup,
  testClient,
  waitGroupSettled,
  waitRolledOut,
  ZONES,
} from '../support/rollout-group.ts';

const cluster = testCluster();

/** rollout-operator's jsonnet Role (operations/rollout-operator), ConfigMaps as issue 34 found them. */
const JSONNET_RULES = [
  { apiGroups: [''], resources: ['pods'], verbs: ['list', 'get', 'watch', 'delete'] },
  { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['list', 'get', 'watch', 'patch'] },
  { apiGroups: ['apps'], resources: ['statefulsets/status'], verbs: ['update'] },
  { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'update', 'create'] },
  {
    apiGroups: ['rollout-operator.grafana.com'],
    resources: ['zoneawarepoddisruptionbudgets'],
    verbs: ['get', 'list', 'watch'],
  },
];

describe('under rollout-operator’s jsonnet Role', () => {
  it('rolls a group, writes the status ConfigMap with update, and no refused request repeats', async () => {
    const kube = testClient(cluster);
    const namespace = `ro-role-${process.pid}`;
    await kube.create(resources.namespaces, { metadata: { name: namespace } });
    try {
      const kubeconfig = await serviceAccountUnderRole(cluster, kube, namespace, 'rollout-operator', JSONNET_RULES);
      await createGroup(kube, namespace, { all: { replicas: 2 } });
      await waitGroupSettled(kube, namespace);
      const op = await OperatorProcess.start(cluster, namespace, [], { kubeconfig });
      const started = Date.now();
      try {
        await op.waitReady();
        for (const zone of ZONES) await changeTemplate(kube, namespace, zone, 'jsonnet-role');
        await waitRolledOut(kube, namespace);
        const status = await waitFor(
          'the rollout status ConfigMap saying the group is complete',
          async () => {
            const cm = await kube
              .get<ConfigMap>(resources.configMaps, { namespace, name: 'stateward-rollout-status' })
              .catch(() => undefined);
            const group = cm?.data?.['ingester'];
            return group && (JSON.parse(group) as { phase: string }).phase === 'complete' ? cm : undefined;
          },
          { timeoutMs: 60_000, intervalMs: 200 },
        );
        assert.equal(status.metadata?.labels?.['app.kubernetes.io/managed-by'], 'stateward');
        const refused = refusedFromMetrics((await op.get('/metrics'))?.body ?? '');
        assert.ok(refused.size > 0, 'the patch (and the Lease and Event writes) were refused');
        assert.deepEqual(repeated(refused, Date.now() - started), [], [...refused].join('\n'));
        assert.match(
          op.logs,
          /not permitted to patch ConfigMap stateward-rollout-status; writing it with update instead/,
        );
      } finally {
        await op.stop();
      }
    } finally {
      await kube.delete(resources.namespaces, { name: namespace }).catch(() => undefined);
    }
  });
});
