// The Helm chart, with helm built from its Go module: lints, renders for
// several value sets the same choices as the kustomize overlays (RBAC from
// the one source of truth, the same flags and webhook configurations),
// refuses unsafe values, and a rendered chart applies to the local control
// plane.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { clusterPieceFeatures, serviceAccountCondition, WRITE_POLICY, writePolicySpec } from '../../deploy/generate.ts';
import { policyRules, type Feature, type KubeRule, type Scope } from '../../src/rbac/permissions.ts';
import { resources, type KubeObject } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { testClient } from '../support/rollout-group.ts';
import {
  deleteClusterScoped,
  KUSTOMIZE,
  kubectlApply,
  kustomize,
  renderOverlay,
  type Manifest,
  type Overlay,
} from '../support/manifests.ts';
import { lastFlag, narrowingViolations } from '../support/rbac.ts';
import { helm } from '../tools/helm.ts';

const cluster = testCluster();
const CHART = fileURLToPath(new URL('../../deploy/helm/stateward', import.meta.url));

async function template(namespace: string, values: string[]): Promise<Manifest[]> {
  const rendered = await helm('template', 'stateward', CHART, '-n', namespace, ...values.flatMap((v) => ['--set', v]));
  assert.ok(rendered.ok, rendered.out);
  return parseAllDocuments(rendered.out)
    .map((d) => d.toJS() as Manifest)
    .filter((d) => d !== null);
}

type Rules = Manifest & { rules: KubeRule[] };
type Deployment = Manifest & { spec: { replicas: number; template: { spec: { containers: { args: string[] }[] } } } };
type Webhooks = Manifest & { webhooks: Record<string, unknown>[] };
type Service = Manifest & { spec: { ports: unknown[] } };
type NetworkPolicy = Manifest & { spec: { policyTypes: string[]; ingress: unknown[] } };

const isWebhookConfiguration = (d: Manifest): d is Webhooks =>
  d.kind === 'ValidatingWebhookConfiguration' || d.kind === 'MutatingWebhookConfiguration';
/** The chart names each shipped webhook configuration `<name>-<namespace>`, in its RBAC too. */
const inChart = (rules: KubeRule[], namespace: string) =>
  rules.map((r) =>
    r.apiGroups.includes('admissionregistration.k8s.io') && r.resourceNames
      ? { ...r, resourceNames: r.resourceNames.map((n) => `${n}-${namespace}`) }
      : r,
  );

interface Case {
  name: string;
  values: string[];
  features: Feature[];
  clusterWide: boolean;
  /** The kustomize overlay making the same choices. */
  overlay?: Overlay;
}

const CASES: Case[] = [
  { name: 'defaults (rollouts)', values: [], features: ['rollouts'], clusterWide: false, overlay: 'rollouts' },
  {
    name: 'webhooks',
    values: ['webhooks.enabled=true'],
    features: ['rollouts', 'webhooks'],
    clusterWide: false,
    overlay: 'webhooks',
  },
  {
    name: 'cluster-wide',
    values: ['clusterWide=true'],
    features: ['rollouts'],
    clusterWide: true,
    overlay: 'cluster-wide',
  },
  {
    name: 'ha',
    values: ['leaderElection.enabled=true', 'replicas=2'],
    features: ['rollouts', 'leader-election'],
    clusterWide: false,
    overlay: 'ha',
  },
  {
    name: 'every feature',
    values: [
      'webhooks.enabled=true',
      'reschedule.enabled=true',
      'configRestarts.enabled=true',
      'leaderElection.enabled=true',
      'replicas=2',
    ],
    features: ['rollouts', 'leader-election', 'webhooks', 'reschedule', 'config-restarts'],
    clusterWide: false,
    overlay: 'all',
  },
  {
    name: 'cluster-wide with config restarts',
    values: ['clusterWide=true', 'configRestarts.enabled=true'],
    features: ['rollouts', 'config-restarts'],
    clusterWide: true,
  },
];

const flagNames = (args: string[]) => new Set(args.map((a) => a.split('=')[0]));
/** A webhook configuration's webhooks with the install's namespace replaced, to compare across installs. */
const normalised = (config: Webhooks, namespace: string) =>
  JSON.parse(JSON.stringify(config.webhooks).replaceAll(namespace, 'NS')) as unknown;

describe('Helm chart', { timeout: 900_000 }, () => {
  it('lints', async () => {
    const lint = await helm('lint', CHART);
    assert.ok(lint.ok, lint.out);
    assert.match(lint.out, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  for (const c of CASES) {
    it(`${c.name}: RBAC from the one source, the overlay's flags and webhook configurations`, async () => {
      const docs = await template('helm-ns', c.values);
      const role = docs.find((d): d is Rules => d.kind === 'Role');
      const clusterRole = docs.find((d): d is Rules => d.kind === 'ClusterRole');
      const [local, wide]: [Scope[], Scope[]] = c.clusterWide
        ? [['own'], ['managed', 'cluster']]
        : [['managed', 'own'], ['cluster']];
      // Order of rules carries no meaning.
      const sorted = (rules: KubeRule[]) =>
        rules.map((r) => JSON.stringify([r.apiGroups, r.resources, r.verbs, r.resourceNames ?? []])).sort();
      assert.deepEqual(
        sorted(role?.rules ?? []),
        sorted(inChart(policyRules(c.features, local), 'helm-ns')),
        'Role rules',
      );
      assert.deepEqual(
        sorted(clusterRole?.rules ?? []),
        sorted(inChart(policyRules(c.features, wide), 'helm-ns')),
        'ClusterRole rules',
      );
      for (const binding of docs.filter((d) => d.kind === 'RoleBinding' || d.kind === 'ClusterRoleBinding')) {
        assert.deepEqual((binding as Manifest & { subjects: unknown[] }).subjects, [
          { kind: 'ServiceAccount', name: 'stateward', namespace: 'helm-ns' },
        ]);
      }
      // CA injection, and the RBAC's webhook-configuration patch, limited to the configurations this release installs.
      const configurations = docs
        .filter(isWebhookConfiguration)
        .map((d) => d.metadata!.name!)
        .sort();
      const args = docs.find((d): d is Deployment => d.kind === 'Deployment')!.spec.template.spec.containers[0]!.args;
      assert.deepEqual(
        lastFlag(args, 'webhooks.ca-bundle-configurations')?.split(',').sort(),
        c.features.includes('webhooks') ? configurations : undefined,
      );
      for (const r of [role, clusterRole])
        if (r) assert.deepEqual(narrowingViolations(r.rules, configurations), [], `${r.kind} narrowed`);
      assert.ok(!args.some((a) => a.startsWith('-web.enabled')), 'the web view stays off');
      assert.ok(!docs.some((d) => d.kind === 'NetworkPolicy'), 'the NetworkPolicy is opt-in');
      // The overlays' write policy, judging exactly this release's ServiceAccount.
      const policy = docs.find((d) => d.kind === 'ValidatingAdmissionPolicy') as Manifest & { spec: unknown };
      assert.equal(policy.metadata?.name, `${WRITE_POLICY}-helm-ns`);
      assert.deepEqual(policy.spec, writePolicySpec(serviceAccountCondition('helm-ns')));
      assert.deepEqual(docs.find((d) => d.kind === 'ValidatingAdmissionPolicyBinding')?.['spec'], {
        policyName: `${WRITE_POLICY}-helm-ns`,
        validationActions: ['Deny'],
      });
      if (!c.overlay) return;
      const overlay = await renderOverlay(c.overlay, 'helm-ns');
      const chartDeployment = docs.find((d): d is Deployment => d.kind === 'Deployment')!;
      const overlayDeployment = overlay.find((d): d is Deployment => d.kind === 'Deployment')!;
      assert.equal(chartDeployment.spec.replicas, overlayDeployment.spec.replicas);
      const chartFlags = flagNames(chartDeployment.spec.template.spec.containers[0]!.args);
      for (const flag of flagNames(overlayDeployment.spec.template.spec.containers[0]!.args))
        assert.ok(chartFlags.has(flag), `the chart passes ${flag} as the overlay does`);
      const webhooks = (list: Manifest[]) =>
        list
          .filter(isWebhookConfiguration)
          .map((d) => normalised(d, 'helm-ns'))
          .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
      assert.deepEqual(webhooks(docs), webhooks(overlay), 'the same webhook configurations');
      const services = (list: Manifest[]) =>
        list
          .filter((d): d is Service => d.kind === 'Service')
          .map((d) => [d.metadata?.name, d.spec.ports])
          .sort();
      assert.deepEqual(
        services(docs),
        services(overlay),
        'the same Services (metrics; webhooks apart), names and ports',
      );
    });
  }

  it("watchNamespaces (listed namespaces, Reloader's --namespaces): the managed rules in a Role per namespace, the own rules at home, no ClusterRole; the same as the kustomize overlay", async () => {
    const sorted = (rules: KubeRule[]) =>
      rules.map((r) => JSON.stringify([r.apiGroups, r.resources, r.verbs, r.resourceNames ?? []])).sort();
    const features: Feature[] = ['rollouts', 'config-restarts'];
    const docs = await template('stateward', ['configRestarts.enabled=true', 'watchNamespaces={team-a,team-b}']);
    assert.deepEqual(
      docs.filter((d) => d.kind?.startsWith('Cluster')).map((d) => d.kind),
      [],
      'no ClusterRole nor ClusterRoleBinding',
    );
    const roles = docs.filter((d): d is Rules => d.kind === 'Role');
    assert.deepEqual(roles.map((r) => r.metadata?.namespace).sort(), ['stateward', 'team-a', 'team-b']);
    for (const role of roles) {
      const scopes: Scope[] = role.metadata?.namespace === 'stateward' ? ['own'] : ['managed'];
      assert.deepEqual(sorted(role.rules), sorted(policyRules(features, scopes)), `${role.metadata?.namespace}'s Role`);
    }
    for (const binding of docs.filter((d) => d.kind === 'RoleBinding'))
      assert.deepEqual((binding as Manifest & { subjects: unknown[] }).subjects, [
        { kind: 'ServiceAccount', name: 'stateward', namespace: 'stateward' },
      ]);
    const args = docs.find((d): d is Deployment => d.kind === 'Deployment')!.spec.template.spec.containers[0]!.args;
    assert.equal(lastFlag(args, 'kubernetes.watch-namespaces'), 'team-a,team-b');

    // The overlay: the same Roles where the chart puts them, and the same flag.
    const overlay = await kustomize(`${KUSTOMIZE}overlays/listed-namespaces`);
    assert.deepEqual(
      overlay.filter((d) => d.kind?.startsWith('Cluster')).map((d) => d.kind),
      [],
      "the overlay's: no ClusterRole",
    );
    const rulesIn = (list: Manifest[], ns: string) =>
      sorted(list.filter((d): d is Rules => d.kind === 'Role' && d.metadata?.namespace === ns).flatMap((r) => r.rules));
    for (const ns of ['stateward', 'team-a', 'team-b']) assert.deepEqual(rulesIn(overlay, ns), rulesIn(docs, ns), ns);
    for (const binding of overlay.filter((d) => d.kind === 'RoleBinding'))
      assert.deepEqual((binding as Manifest & { subjects: unknown[] }).subjects, [
        { kind: 'ServiceAccount', name: 'stateward', namespace: 'stateward' },
      ]);
    const overlayArgs = overlay.find((d): d is Deployment => d.kind === 'Deployment')!.spec.template.spec.containers[0]!
      .args;
    assert.equal(lastFlag(overlayArgs, 'kubernetes.watch-namespaces'), 'team-a,team-b');

    // Webhooks and reschedule keep only their cluster-scoped rules in a ClusterRole; their webhooks see only the listed namespaces.
    const withWebhooks = await template('stateward', [
      'webhooks.enabled=true',
      'reschedule.enabled=true',
      'watchNamespaces={team-a,team-b}',
    ]);
    assert.deepEqual(clusterPieceFeatures().sort(), ['namespace-selector', 'reschedule', 'webhooks']);
    assert.deepEqual(
      sorted(withWebhooks.find((d): d is Rules => d.kind === 'ClusterRole')!.rules),
      sorted(inChart(policyRules(['rollouts', 'webhooks', 'reschedule'], ['cluster']), 'stateward')),
    );
    const inListed = { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['team-a', 'team-b'] };
    for (const config of withWebhooks.filter(isWebhookConfiguration))
      for (const webhook of config.webhooks) {
        const selector = webhook['namespaceSelector'] as { matchExpressions?: unknown[]; matchLabels?: object };
        assert.deepEqual(selector.matchExpressions, [inListed], `${config.metadata?.name}: only the listed namespaces`);
        assert.ok(!Object.hasOwn(selector.matchLabels ?? {}, 'kubernetes.io/metadata.name'));
      }
    const both = await helm(
      'template',
      'stateward',
      CHART,
      '--set',
      'clusterWide=true',
      '--set',
      'watchNamespaces={a}',
    );
    assert.equal(both.ok, false);
    assert.match(both.out, /clusterWide and watchNamespaces exclude each other/);
  });

  it('namespaceSelector and namespacesToIgnore (installs splitting a cluster): the flags, the webhooks called for the same namespaces, namespaces listed by a ClusterRole', async () => {
    const docs = await template('one', [
      'clusterWide=true',
      'webhooks.enabled=true',
      'reschedule.enabled=true',
      'namespaceSelector.matchLabels.stateward\\.dev/install=one',
      'namespaceSelector.matchExpressions[0].key=env',
      'namespaceSelector.matchExpressions[0].operator=NotIn',
      'namespaceSelector.matchExpressions[0].values={dev}',
      'namespacesToIgnore={kube-system}',
    ]);
    const args = docs.find((d): d is Deployment => d.kind === 'Deployment')!.spec.template.spec.containers[0]!.args;
    assert.equal(lastFlag(args, 'kubernetes.namespace-selector'), 'stateward.dev/install=one,env notin (dev)');
    assert.equal(lastFlag(args, 'kubernetes.namespaces-to-ignore'), 'kube-system');
    const scope = [
      { key: 'stateward.dev/install', operator: 'In', values: ['one'] },
      { key: 'env', operator: 'NotIn', values: ['dev'] },
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system'] },
    ];
    const configurations = docs.filter(isWebhookConfiguration);
    assert.ok(configurations.length >= 4);
    for (const config of configurations)
      for (const webhook of config.webhooks) {
        const selector = webhook['namespaceSelector'] as { matchExpressions?: unknown[]; matchLabels?: object };
        assert.deepEqual(selector.matchExpressions, scope, `${config.metadata?.name}: the install's namespaces`);
        assert.ok(!Object.hasOwn(selector.matchLabels ?? {}, 'kubernetes.io/metadata.name'));
      }
    const clusterRole = docs.find((d): d is Rules => d.kind === 'ClusterRole')!;
    assert.ok(
      clusterRole.rules.some(
        (r) => r.resources.includes('namespaces') && r.verbs.includes('list') && r.verbs.includes('watch'),
      ),
      'namespaces listed and watched',
    );
    // Without a selector, no namespaces are read (ignoring goes by name).
    const ignoreOnly = await template('one', ['clusterWide=true', 'namespacesToIgnore={kube-system}']);
    assert.ok(
      !ignoreOnly.some((d) => (d as Partial<Rules>).rules?.some((r) => r.resources.includes('namespaces'))),
      'no namespaces rule',
    );
  });

  it('networkPolicy: opt-in, the same as the kustomize component; the metrics port only from the named namespaces', async () => {
    const policy = async (values: string[]) =>
      (await template('helm-ns', ['networkPolicy.enabled=true', ...values])).filter(
        (d): d is NetworkPolicy => d.kind === 'NetworkPolicy',
      );
    const named = 'networkPolicy.metricsNamespaces={monitoring,prometheus}';
    const [withWebhooks] = await policy(['webhooks.enabled=true', named]);
    const patches = [
      {
        target: { kind: 'NetworkPolicy', name: 'stateward' },
        patch:
          '- op: replace\n  path: /spec/ingress/1/from/0/namespaceSelector/matchExpressions/0/values\n  value: [monitoring, prometheus]',
      },
    ];
    const component = (await renderOverlay('webhooks', 'helm-ns', { components: ['network-policy'], patches })).find(
      (d): d is NetworkPolicy => d.kind === 'NetworkPolicy',
    )!;
    assert.deepEqual(withWebhooks?.spec.ingress, component.spec.ingress);
    assert.deepEqual(withWebhooks.spec.policyTypes, ['Ingress']);
    // Without webhooks only the metrics rule; with no namespace named, nothing but the node (probes) gets in.
    const [metricsOnly] = await policy([named]);
    assert.deepEqual(metricsOnly?.spec.ingress, component.spec.ingress.slice(1));
    const [closed] = await policy(['networkPolicy.metricsNamespaces=null']);
    assert.deepEqual(closed?.spec.ingress, []);
    const [defaults] = await policy([]);
    assert.deepEqual(
      defaults?.spec.ingress,
      [
        {
          from: [
            {
              namespaceSelector: {
                matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['monitoring'] }],
              },
            },
          ],
          ports: [{ port: 'http-metrics', protocol: 'TCP' }],
        },
      ],
      'monitoring by default',
    );
  });

  it('writePolicy.enabled=false leaves the write policy out (clusters before Kubernetes 1.30)', async () => {
    const docs = await template('helm-ns', ['clusterWide=true', 'writePolicy.enabled=false']);
    assert.deepEqual(
      docs.filter((d) => d.kind?.startsWith('ValidatingAdmissionPolicy')),
      [],
    );
  });

  it('refuses values that would be unsafe, saying why', async () => {
    const twoUnelected = await helm('template', 'stateward', CHART, '--set', 'replicas=2');
    assert.equal(twoUnelected.ok, false);
    assert.match(twoUnelected.out, /replicas > 1 needs leaderElection\.enabled=true/);
    const rescheduleAlone = await helm('template', 'stateward', CHART, '--set', 'reschedule.enabled=true');
    assert.equal(rescheduleAlone.ok, false);
    assert.match(rescheduleAlone.out, /reschedule\.enabled needs webhooks\.enabled=true/);
  });

  it('a rendered chart with every feature and the NetworkPolicy applies to the local control plane', async (t) => {
    const namespace = await cluster.namespace(t);
    const docs = await template(namespace, [
      ...CASES.find((c) => c.name === 'every feature')!.values,
      'networkPolicy.enabled=true',
    ]);
    assert.ok(docs.some((d) => d.kind === 'NetworkPolicy'));
    t.after(() => deleteClusterScoped(cluster.kubeconfigPath, docs));
    await kubectlApply(cluster.kubeconfigPath, docs);
    const kube = testClient(cluster);
    await waitFor(
      'the Deployment available',
      async () =>
        (
          await kube.get<KubeObject & { status?: { availableReplicas?: number } }>(resources.deployments, {
            namespace,
            name: 'stateward',
          })
        ).status?.availableReplicas === 2,
      { timeoutMs: 60_000 },
    );
  });
});
