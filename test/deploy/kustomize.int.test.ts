// Every kustomize overlay renders with the real `kubectl kustomize` into a
// user's namespace and applies to the local control plane, where the
// operator's Deployment becomes available (kwok runs its pod).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resources, type KubeObject } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { serviceAccountCondition, WRITE_POLICY, writePolicySpec } from '../../deploy/generate.ts';
import { caBundleConfigurations, STRIMZI_WEBHOOK_CONFIGURATION, type KubeRule } from '../../src/rbac/permissions.ts';
import { kubectl } from '../support/kubectl.ts';
import { testClient } from '../support/rollout-group.ts';
import {
  CLUSTER_SCOPED,
  deleteClusterScoped,
  kubectlApply,
  OVERLAYS,
  renderOverlay,
  type Manifest,
} from '../support/manifests.ts';
import { lastFlag, narrowingViolations } from '../support/rbac.ts';

const cluster = testCluster();

type Container = {
  args?: string[];
  ports?: { name: string; containerPort: number }[];
  readinessProbe?: { httpGet?: { path?: string } };
  livenessProbe?: { httpGet?: { path?: string } };
  securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean };
  resources?: { requests?: object };
};
type Deployment = Manifest & {
  spec: {
    replicas: number;
    template: {
      metadata?: { labels?: Record<string, string> };
      spec: { serviceAccountName: string; containers: Container[]; securityContext?: { runAsNonRoot?: boolean } };
    };
  };
  status?: { availableReplicas?: number };
};
type Service = Manifest & {
  spec: { selector: Record<string, string>; ports: { name: string; port: number; targetPort: number | string }[] };
};
type NetworkPolicy = Manifest & {
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: {
      from?: { namespaceSelector?: { matchExpressions?: { key: string; operator: string; values: string[] }[] } }[];
      ports?: { port: number | string; protocol?: string }[];
    }[];
  };
};
type Rules = Manifest & { rules: KubeRule[] };
type Policy = Manifest & { spec: { matchConditions: { name: string; expression: string }[] } };
type PolicyBinding = Manifest & { spec: { policyName: string; validationActions: string[] } };
type WebhookConfiguration = Manifest & {
  webhooks: {
    name: string;
    rules?: { resources: string[] }[];
    objectSelector?: { matchExpressions?: { key: string; operator: string; values: string[] }[] };
    failurePolicy?: string;
    clientConfig: { service?: { name: string; namespace: string; port: number } };
    namespaceSelector?: { matchLabels?: Record<string, string> };
  }[];
};

/** The webhook configurations an install must be allowed to patch, from the features its flags turn on. */
const webhookFeatures = (args: string[]) => [
  ...(args.includes('-server-tls.enabled') ? ['webhooks' as const] : []),
  ...(args.includes('-reschedule.enabled') ? ['reschedule' as const] : []),
];
const portsOf = (container: Container) => new Map((container.ports ?? []).map((p) => [p.name, p.containerPort]));

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
        if (!CLUSTER_SCOPED.has(d.kind ?? ''))
          assert.equal(d.metadata?.namespace, namespace, `${d.kind}/${d.metadata?.name} in the user's namespace`);
        for (const s of (d as { subjects?: { namespace?: string }[] }).subjects ?? [])
          assert.equal(
            s.namespace,
            namespace,
            `${d.kind}/${d.metadata?.name} binds the ServiceAccount of the user's namespace`,
          );
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
      const webhooks = docs.filter(
        (d): d is WebhookConfiguration =>
          d.kind === 'ValidatingWebhookConfiguration' || d.kind === 'MutatingWebhookConfiguration',
      );
      const tls = FLAGS[overlay].includes('-server-tls.enabled');
      assert.equal(webhooks.length > 0, tls, 'webhook configurations exactly with the webhook server');

      // Metrics/status and webhooks behind separate Services, each with its one port.
      const services = new Map(
        docs.filter((d): d is Service => d.kind === 'Service').map((d) => [d.metadata!.name!, d]),
      );
      assert.deepEqual([...services.keys()].sort(), tls ? ['stateward', 'stateward-metrics'] : ['stateward-metrics']);
      assert.deepEqual(services.get('stateward-metrics')!.spec.ports, [
        { name: 'http-metrics', port: 8001, targetPort: 'http-metrics' },
      ]);
      if (tls)
        assert.deepEqual(services.get('stateward')!.spec.ports, [{ name: 'https', port: 443, targetPort: 'https' }]);
      const podLabels = deployment.spec.template.metadata?.labels ?? {};
      for (const [name, service] of services)
        for (const [k, v] of Object.entries(service.spec.selector))
          assert.equal(podLabels[k], v, `${name} selects the operator's pods`);
      assert.equal(portsOf(container).get('http-metrics'), 8001);
      assert.equal(portsOf(container).get('https'), tls ? 8443 : undefined);
      assert.ok(!docs.some((d) => d.kind === 'NetworkPolicy'), 'the NetworkPolicy is opt-in');
      assert.ok(!container.args?.some((a) => a.startsWith('-web.enabled')), 'the web view stays off');

      // CA injection and its RBAC limited to the shipped configurations.
      const names = webhooks.map((w) => w.metadata!.name!).sort();
      assert.deepEqual(
        lastFlag(container.args ?? [], 'webhooks.ca-bundle-configurations')
          ?.split(',')
          .sort(),
        tls ? names : undefined,
        '-webhooks.ca-bundle-configurations names exactly the shipped configurations',
      );
      assert.deepEqual(caBundleConfigurations(['rollouts', ...webhookFeatures(container.args ?? [])]).sort(), names);
      // The reschedule RBAC also names the configuration of the strimzi-drain-cleaner component (issue 38).
      const patchableNames = [...names, STRIMZI_WEBHOOK_CONFIGURATION];
      for (const role of docs.filter((d): d is Rules => d.kind === 'Role' || d.kind === 'ClusterRole')) {
        assert.deepEqual(
          narrowingViolations(role.rules, patchableNames),
          [],
          `${role.kind}/${role.metadata?.name} narrowed`,
        );
      }
      for (const config of webhooks) {
        assert.equal(config.metadata?.labels?.['grafana.com/inject-rollout-operator-ca'], 'true');
        assert.equal(config.metadata?.labels?.['grafana.com/namespace'], namespace, 'CA injection finds it');
        for (const w of config.webhooks) {
          assert.ok(w.failurePolicy === 'Fail' || w.failurePolicy === 'Ignore', 'failure policy chosen explicitly');
          assert.deepEqual(w.clientConfig.service, {
            ...w.clientConfig.service,
            name: 'stateward',
            namespace,
            port: 443,
          });
          const scope = w.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'];
          if (scope !== undefined)
            assert.equal(scope, namespace, `${config.metadata?.name} scoped to the user's namespace`);
        }
      }
      // A webhook that fails closed must not stand in the way of replacing the operator itself.
      const own = deployment.spec.template.metadata?.labels ?? {};
      for (const config of webhooks) {
        for (const w of config.webhooks) {
          if (!w.rules?.some((r) => r.resources.includes('replicasets'))) continue;
          assert.ok(
            w.objectSelector?.matchExpressions?.some(
              (e) => e.operator === 'NotIn' && e.values.includes(own[e.key] ?? ''),
            ),
            `${w.name} leaves the operator's own ReplicaSets out`,
          );
        }
      }
      // The write policy, whatever the features: the generated one, bound to deny.
      const policy = docs.find((d): d is Policy => d.kind === 'ValidatingAdmissionPolicy');
      const { metadata: _, ...spec } = policy ?? {};
      assert.deepEqual(spec, {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        spec: writePolicySpec(),
      });
      const binding = docs.find((d): d is PolicyBinding => d.kind === 'ValidatingAdmissionPolicyBinding');
      assert.deepEqual(binding?.spec, { policyName: policy?.metadata?.name, validationActions: ['Deny'] });
      await kubectlApply(cluster.kubeconfigPath, docs);
      const kube = testClient(cluster);
      await waitFor(
        `the ${overlay} Deployment available`,
        async () => {
          const live = await kube.get<KubeObject & { status?: { availableReplicas?: number } }>(resources.deployments, {
            namespace,
            name: 'stateward',
          });
          return live.status?.availableReplicas === deployment.spec.replicas;
        },
        { timeoutMs: 60_000 },
      );
    });
  }

  it('network-policy component: the webhook port open, metrics/status only from the named namespaces; applies', async (t) => {
    const namespace = await cluster.namespace(t);
    // As docs/getting-started.md names the namespaces.
    const patches = [
      {
        target: { kind: 'NetworkPolicy', name: 'stateward' },
        patch:
          '- op: replace\n  path: /spec/ingress/1/from/0/namespaceSelector/matchExpressions/0/values\n  value: [monitoring, prometheus]',
      },
    ];
    const docs = await renderOverlay('all', namespace, { components: ['network-policy'], patches });
    const policies = docs.filter((d): d is NetworkPolicy => d.kind === 'NetworkPolicy');
    assert.equal(policies.length, 1);
    const policy = policies[0]!;
    assert.equal(policy.metadata?.namespace, namespace);
    const deployment = docs.find((d): d is Deployment => d.kind === 'Deployment')!;
    const podLabels = deployment.spec.template.metadata?.labels ?? {};
    for (const [k, v] of Object.entries(policy.spec.podSelector.matchLabels))
      assert.equal(podLabels[k], v, 'selects the operator pods');
    assert.deepEqual(policy.spec.policyTypes, ['Ingress'], 'egress (API server, pod endpoints) left alone');
    assert.deepEqual(policy.spec.ingress, [
      { ports: [{ port: 'https', protocol: 'TCP' }] },
      {
        from: [
          {
            namespaceSelector: {
              matchExpressions: [
                { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['monitoring', 'prometheus'] },
              ],
            },
          },
        ],
        ports: [{ port: 'http-metrics', protocol: 'TCP' }],
      },
    ]);
    // The named ports are the container's: webhooks on 8443, metrics/status on 8001.
    const ports = portsOf(deployment.spec.template.spec.containers[0]!);
    assert.deepEqual([ports.get('https'), ports.get('http-metrics')], [8443, 8001]);
    // The API server accepts it (and the Services beside it).
    await kubectlApply(
      cluster.kubeconfigPath,
      docs.filter((d) => d.kind === 'NetworkPolicy' || d.kind === 'Service'),
    );
    const live = await kubectl(cluster, '-n', namespace, 'get', 'networkpolicy', 'stateward', '-o', 'json');
    assert.ok(live.ok, live.out);
    assert.deepEqual((JSON.parse(live.out) as NetworkPolicy).spec.ingress, policy.spec.ingress);
  });

  it('a second install with a nameSuffix, patched as docs/getting-started.md says: CA injection, its RBAC and the configurations agree', async () => {
    const suffixed = (names: string[]) => names.map((n) => `${n}-team-b`);
    const validating = ['stateward-no-downscale', 'stateward-pod-eviction', 'stateward-zpdb-validation'];
    const args = (values: string[]) =>
      values.map((value) => `- op: add\n  path: /spec/template/spec/containers/0/args/-\n  value: ${value}`).join('\n');
    const names = (path: string, from: string[], to: string[]) =>
      `- {op: test, path: ${path}, value: [${from.join(', ')}]}\n- {op: replace, path: ${path}, value: [${to.join(', ')}]}`;
    const patches = [
      {
        target: { kind: 'Deployment', name: 'stateward' },
        patch: args([
          '-server-tls.self-signed-cert.dns-name=stateward-team-b.$(POD_NAMESPACE).svc',
          `-webhooks.ca-bundle-configurations=${suffixed([...validating, 'stateward-prepare-downscale', 'stateward-reschedule-on-eviction']).join(',')}`,
        ]),
      },
      {
        target: { kind: 'ClusterRole', name: 'stateward-webhooks' },
        patch: `${names('/rules/1/resourceNames', validating, suffixed(validating))}\n${names('/rules/2/resourceNames', ['stateward-prepare-downscale'], suffixed(['stateward-prepare-downscale']))}`,
      },
      {
        target: { kind: 'ClusterRole', name: 'stateward-reschedule' },
        patch: names(
          '/rules/0/resourceNames',
          ['stateward-reschedule-on-eviction', STRIMZI_WEBHOOK_CONFIGURATION],
          suffixed(['stateward-reschedule-on-eviction', STRIMZI_WEBHOOK_CONFIGURATION]),
        ),
      },
      {
        target: { kind: 'ValidatingAdmissionPolicy', name: WRITE_POLICY },
        patch: [
          { op: 'test', path: '/spec/matchConditions/0/expression', value: serviceAccountCondition() },
          {
            op: 'replace',
            path: '/spec/matchConditions/0/expression',
            value:
              "request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith(':stateward-team-b')",
          },
        ]
          .map((op) => `- ${JSON.stringify(op)}`)
          .join('\n'),
      },
    ];
    const docs = await renderOverlay('all', 'team-b', { nameSuffix: '-team-b', patches });
    const configurations = docs
      .filter((d) => d.kind === 'ValidatingWebhookConfiguration' || d.kind === 'MutatingWebhookConfiguration')
      .map((d) => d.metadata!.name!)
      .sort();
    assert.equal(configurations.length, 5);
    const container = docs.find((d): d is Deployment => d.kind === 'Deployment')!.spec.template.spec.containers[0]!;
    assert.deepEqual(
      lastFlag(container.args ?? [], 'webhooks.ca-bundle-configurations')
        ?.split(',')
        .sort(),
      configurations,
    );
    const patchable = docs
      .filter((d): d is Rules => d.kind === 'ClusterRole')
      .flatMap((r) => r.rules)
      .filter((r) => r.apiGroups.includes('admissionregistration.k8s.io') && r.verbs.includes('patch'))
      .flatMap((r) => r.resourceNames ?? [])
      .sort();
    assert.deepEqual(patchable, [...configurations, `${STRIMZI_WEBHOOK_CONFIGURATION}-team-b`].sort());
    const service = docs
      .filter((d): d is Service => d.kind === 'Service')
      .find((d) => d.spec.ports.some((p) => p.port === 443))!;
    assert.equal(service.metadata?.name, 'stateward-team-b');
    // The write policy judges the renamed ServiceAccount, under a name of its own (its binding follows).
    const serviceAccount = docs.find((d) => d.kind === 'ServiceAccount')!.metadata!.name!;
    assert.equal(serviceAccount, 'stateward-team-b');
    const policy = docs.find((d): d is Policy => d.kind === 'ValidatingAdmissionPolicy')!;
    assert.equal(policy.metadata?.name, `${WRITE_POLICY}-team-b`);
    assert.deepEqual(policy.spec.matchConditions, [
      { name: 'stateward-service-account', expression: serviceAccountCondition(undefined, serviceAccount) },
    ]);
    assert.equal(
      docs.find((d): d is PolicyBinding => d.kind === 'ValidatingAdmissionPolicyBinding')?.spec.policyName,
      policy.metadata?.name,
    );
    for (const d of docs.filter(
      (x): x is WebhookConfiguration =>
        x.kind === 'ValidatingWebhookConfiguration' || x.kind === 'MutatingWebhookConfiguration',
    )) {
      for (const w of d.webhooks) assert.equal(w.clientConfig.service?.name, 'stateward-team-b');
    }
  });
});
