// The Helm chart, with helm built from its Go module: lints, renders for
// several value sets the same choices as the kustomize overlays (RBAC from
// the one source of truth, the same flags and webhook configurations),
// refuses unsafe values, and a rendered chart applies to the local control
// plane.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { clusterPieceFeatures, serviceAccountCondition, WRITE_POLICY, writePolicySpec } from '../../deploy/generate.ts';
import { STRIMZI_ANNOTATION, STRIMZI_PROFILE } from '../../src/drain/reschedule/profiles.ts';
import { registerRescheduleFlags } from '../../src/drain/reschedule/webhook.ts';
import {
  policyRules,
  RESCHEDULE_WEBHOOK_CONFIGURATION,
  STRIMZI_WEBHOOK_CONFIGURATION,
  type Feature,
  type KubeRule,
  type Scope,
} from '../../src/rbac/permissions.ts';
import { registerAlertFlags } from '../../src/restarts/alertflags.ts';
import { registerRestartFlags } from '../../src/restarts/controller.ts';
import { registerCsiFlags } from '../../src/restarts/csiinformers.ts';
import { registerReloaderFlags } from '../../src/restarts/reloaderflags.ts';
import { registerRolloutFlags } from '../../src/rollout/controller.ts';
import { registerCompatFlags } from '../../src/runtime/compat.ts';
import { FlagSet } from '../../src/runtime/flags/flagset.ts';
import { registerRuntimeFlags } from '../../src/runtime/runtimeflags.ts';
import { registerWebFlags } from '../../src/web/capability.ts';
import { registerWebhookFlags } from '../../src/webhooks/webhookflags.ts';
import { registerPodCallFlags } from '../../src/workloads/podclient.ts';
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
/**
 * The chart names each shipped webhook configuration `<name>-<namespace>`, in its RBAC too, and grants patch only on
 * the configurations it installs (the reschedule feature names Strimzi's, installed with reschedule.strimzi only).
 */
const inChart = (rules: KubeRule[], namespace: string, installed: readonly string[]) =>
  rules.flatMap((r) => {
    if (!r.apiGroups.includes('admissionregistration.k8s.io') || !r.resourceNames) return [r];
    const names = r.resourceNames.map((n) => `${n}-${namespace}`).filter((n) => installed.includes(n));
    return names.length > 0 ? [{ ...r, resourceNames: names }] : [];
  });

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
      const installed = docs.filter(isWebhookConfiguration).map((d) => d.metadata!.name!);
      assert.deepEqual(
        sorted(role?.rules ?? []),
        sorted(inChart(policyRules(c.features, local), 'helm-ns', installed)),
        'Role rules',
      );
      assert.deepEqual(
        sorted(clusterRole?.rules ?? []),
        sorted(inChart(policyRules(c.features, wide), 'helm-ns', installed)),
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
      sorted(
        inChart(
          policyRules(['rollouts', 'webhooks', 'reschedule'], ['cluster']),
          'stateward',
          withWebhooks.filter(isWebhookConfiguration).map((d) => d.metadata!.name!),
        ),
      ),
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

  it('a rendered chart with every feature, Strimzi, a profiles ConfigMap and the NetworkPolicy applies to the local control plane', async (t) => {
    const namespace = await cluster.namespace(t);
    const docs = await template(namespace, [
      ...CASES.find((c) => c.name === 'every feature')!.values,
      'networkPolicy.enabled=true',
      // Strimzi's /drainer narrowed to the release's namespace, which it also excludes: called for no eviction here.
      'reschedule.strimzi.enabled=true',
      `reschedule.strimzi.namespaces={${namespace}}`,
      'reschedule.profiles[0].name=redis',
      'reschedule.profiles[0].podSelector=app=redis',
      'reschedule.profiles[0].annotation=example.com/move=true',
    ]);
    assert.ok(docs.some((d) => d.kind === 'NetworkPolicy'));
    assert.ok(docs.some((d) => d.kind === 'ConfigMap' && d.metadata?.name === 'stateward-reschedule-profiles'));
    // Named <name>-<namespace>, cut to 63 characters (the test's namespaces are long).
    assert.ok(
      docs.some((d) => isWebhookConfiguration(d) && d.metadata?.name?.startsWith(STRIMZI_WEBHOOK_CONFIGURATION)),
    );
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

// ------------------------------------------------------------ reschedule profiles and Strimzi Drain Cleaner

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string } };
}
interface Container {
  args: string[];
  env?: EnvVar[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}
type FullDeployment = Manifest & {
  spec: {
    template: {
      metadata: { annotations?: Record<string, string> };
      spec: { containers: Container[]; volumes?: { name: string; configMap?: { name: string } }[] };
    };
  };
};
type ConfigMap = Manifest & { data: Record<string, string> };

/** Values given as a file (lists of objects do not fit --set). */
async function templateValues(namespace: string, values: object): Promise<{ ok: boolean; out: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'stateward-helm-values-'));
  try {
    await writeFile(join(dir, 'values.yaml'), stringify(values));
    return await helm('template', 'stateward', CHART, '-n', namespace, '-f', join(dir, 'values.yaml'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function renderValues(namespace: string, values: object): Promise<Manifest[]> {
  const rendered = await templateValues(namespace, values);
  assert.ok(rendered.ok, rendered.out);
  return parseAllDocuments(rendered.out)
    .map((d) => d.toJS() as Manifest)
    .filter((d) => d !== null);
}

const PROFILES = [
  {
    name: 'kafka-connect',
    podSelector: 'strimzi.io/kind=KafkaConnect',
    labelPatterns: { 'strimzi.io/name': '.+-connect' },
    ownerKinds: ['StrimziPodSet'],
    annotation: 'strimzi.io/manual-rolling-update=true',
    namespaces: ['kafka'],
    recordTtl: '1h', // the flags' TTL: profiles sharing a tracking ConfigMap must agree
  },
  {
    name: 'redis',
    podSelector: ['app=redis', 'app.kubernetes.io/name=redis'],
    annotation: 'example.com/move=true',
    answer: 'allow',
  },
];

const STRIMZI_VALUES = {
  webhooks: { enabled: true },
  reschedule: {
    enabled: true,
    strimzi: { enabled: true, namespaces: ['kafka', 'kafka-2'], zookeeper: false, denyCode: 500 },
    profiles: PROFILES,
  },
};

/** Every operator flag, registered as main.ts's registerOperatorFlags does (main is not to be started here). */
function operatorFlags() {
  const fs = new FlagSet('stateward');
  fs.bool('version', false, 'Print the version and exit.');
  const runtime = registerRuntimeFlags(fs);
  const podCalls = registerPodCallFlags(fs);
  registerRolloutFlags(fs);
  const webhooks = registerWebhookFlags(fs, podCalls.read);
  const reschedule = registerRescheduleFlags(fs);
  registerRestartFlags(fs);
  registerAlertFlags(fs);
  registerReloaderFlags(fs);
  registerCsiFlags(fs);
  registerWebFlags(fs);
  registerCompatFlags(fs);
  return { fs, runtime, webhooks, reschedule };
}

const rendered = (docs: Manifest[]) => {
  const deployment = docs.find((d): d is FullDeployment => d.kind === 'Deployment')!;
  return { deployment, container: deployment.spec.template.spec.containers[0]! };
};

describe('Helm chart: reschedule profiles and Strimzi Drain Cleaner', { timeout: 300_000 }, () => {
  it("reschedule.strimzi: Drain Cleaner's variables, the deny code, its /drainer configuration with CA injection, and RBAC naming it", async () => {
    const docs = await renderValues('helm-ns', STRIMZI_VALUES);
    const { container } = rendered(docs);
    const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));
    assert.deepEqual(
      [env['STRIMZI_DENY_EVICTION'], env['STRIMZI_DRAIN_KAFKA'], env['STRIMZI_DRAIN_ZOOKEEPER']],
      ['true', 'true', 'false'],
    );
    assert.equal(env['STRIMZI_DRAIN_NAMESPACES'], 'kafka,kafka-2');
    assert.ok(container.args.includes('-reschedule.strimzi.enabled'));
    assert.equal(lastFlag(container.args, 'reschedule.strimzi.deny-code'), '500');

    const name = `${STRIMZI_WEBHOOK_CONFIGURATION}-helm-ns`;
    const strimzi = docs.filter(isWebhookConfiguration).find((d) => d.metadata?.name === name);
    assert.ok(strimzi, `${name} rendered`);
    assert.equal(strimzi.kind, 'ValidatingWebhookConfiguration');
    assert.deepEqual(strimzi.metadata?.labels, {
      'grafana.com/inject-rollout-operator-ca': 'true',
      'grafana.com/namespace': 'helm-ns',
    });
    const [webhook] = strimzi.webhooks;
    assert.deepEqual((webhook!['clientConfig'] as { service: unknown }).service, {
      name: 'stateward',
      namespace: 'helm-ns',
      path: '/drainer',
      port: 443,
    });
    // Never kube-system nor the operator's own namespace; with STRIMZI_DRAIN_NAMESPACES, only those.
    assert.deepEqual(webhook!['namespaceSelector'], {
      matchExpressions: [
        { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'helm-ns'] },
        { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['kafka', 'kafka-2'] },
      ],
    });
    const installed = docs.filter(isWebhookConfiguration).map((d) => d.metadata!.name!);
    assert.ok(lastFlag(container.args, 'webhooks.ca-bundle-configurations')!.split(',').includes(name), 'CA injected');
    const clusterRole = docs.find((d): d is Rules => d.kind === 'ClusterRole')!;
    const patchable = clusterRole.rules
      .filter((r) => r.resources.includes('validatingwebhookconfigurations') && r.verbs.includes('patch'))
      .flatMap((r) => r.resourceNames ?? []);
    assert.ok(patchable.includes(name), 'the RBAC lets the operator inject its CA there');
    assert.deepEqual(narrowingViolations(clusterRole.rules, installed), []);

    // The Strimzi profile alone: its configuration only, and the RBAC names no configuration it does not install.
    const alone = await renderValues('helm-ns', {
      webhooks: { enabled: true },
      reschedule: { strimzi: { enabled: true } },
    });
    const aloneNames = alone.filter(isWebhookConfiguration).map((d) => d.metadata!.name!);
    assert.ok(aloneNames.includes(name));
    assert.ok(!aloneNames.includes(`${RESCHEDULE_WEBHOOK_CONFIGURATION}-helm-ns`));
    const aloneRole = alone.find((d): d is Rules => d.kind === 'ClusterRole')!;
    assert.deepEqual(narrowingViolations(aloneRole.rules, aloneNames), []);
    const aloneEnv = (rendered(alone).container.env ?? []).map((e) => e.name);
    assert.ok(!aloneEnv.includes('STRIMZI_DRAIN_NAMESPACES'), 'no namespaces: every namespace');
    assert.ok(!alone.some((d) => d.kind === 'ConfigMap'), 'no profiles, no ConfigMap');
    // Off by default: nothing of it.
    const off = await renderValues('helm-ns', { webhooks: { enabled: true } });
    assert.ok(!off.filter(isWebhookConfiguration).some((d) => d.metadata?.name === name));
    assert.ok(!(rendered(off).container.env ?? []).some((e) => e.name.startsWith('STRIMZI_')));
  });

  it('reschedule.profiles: a ConfigMap holding them in the profiles-file format, mounted read-only and passed with -reschedule.profiles-file', async () => {
    const docs = await renderValues('helm-ns', STRIMZI_VALUES);
    const { deployment, container } = rendered(docs);
    const configMap = docs.find(
      (d): d is ConfigMap => d.kind === 'ConfigMap' && d.metadata?.name === 'stateward-reschedule-profiles',
    );
    assert.ok(configMap, 'the profiles ConfigMap');
    assert.equal(configMap.metadata?.namespace, 'helm-ns');
    assert.deepEqual(parse(configMap.data['profiles.yaml']!), { profiles: PROFILES });
    const volume = deployment.spec.template.spec.volumes?.find((v) => v.configMap?.name === configMap.metadata?.name);
    assert.ok(volume, 'mounted from a volume');
    const mount = container.volumeMounts?.find((m) => m.name === volume.name);
    assert.equal(mount?.readOnly, true);
    assert.equal(lastFlag(container.args, 'reschedule.profiles-file'), `${mount.mountPath}/profiles.yaml`);
    // The file is read at start: a change of the profiles changes the pod template.
    const changed = await renderValues('helm-ns', {
      ...STRIMZI_VALUES,
      reschedule: { ...STRIMZI_VALUES.reschedule, profiles: [{ ...PROFILES[1], answer: 'deny-429' }] },
    });
    assert.notEqual(
      rendered(changed).deployment.spec.template.metadata.annotations?.['checksum/reschedule-profiles'],
      deployment.spec.template.metadata.annotations?.['checksum/reschedule-profiles'],
    );
    // The profiles are served by the reschedule webhook: its configuration is installed even without reschedule.enabled.
    const onlyProfiles = await renderValues('helm-ns', {
      webhooks: { enabled: true },
      reschedule: { profiles: PROFILES },
    });
    assert.ok(
      onlyProfiles
        .filter(isWebhookConfiguration)
        .some((d) => d.metadata?.name === `${RESCHEDULE_WEBHOOK_CONFIGURATION}-helm-ns`),
    );
  });

  it('an operator started with exactly the rendered args, environment and mounted file has the four profiles', async () => {
    const docs = await renderValues('helm-ns', STRIMZI_VALUES);
    const { deployment, container } = rendered(docs);
    const configMap = docs.find((d): d is ConfigMap => d.kind === 'ConfigMap')!;
    const mount = container.volumeMounts![0]!;
    // The kubelet's part: the ConfigMap's keys as files under the mount path (a temporary directory here).
    const dir = await mkdtemp(join(tmpdir(), 'stateward-helm-mount-'));
    try {
      for (const [key, value] of Object.entries(configMap.data)) await writeFile(join(dir, key), value);
      const args = container.args.map((a) => a.replace(mount.mountPath, dir));
      assert.equal(deployment.metadata?.namespace, 'helm-ns');
      const env: Record<string, string> = {};
      for (const e of container.env ?? []) {
        const path = e.valueFrom?.fieldRef?.fieldPath;
        if (e.value !== undefined) env[e.name] = e.value;
        else if (path === 'metadata.namespace') env[e.name] = 'helm-ns';
        else if (path === 'metadata.name') env[e.name] = 'stateward-7d9f-abcde';
        else assert.fail(`unexpected env source for ${e.name}`);
      }
      const flags = operatorFlags();
      const parsed = flags.fs.parse(args, env);
      assert.equal(parsed.kind, 'ok', parsed.kind === 'error' ? parsed.message : '');
      assert.deepEqual(parsed.kind === 'ok' && parsed.args, [], 'no argument is left over');
      assert.equal(flags.runtime.validate(), undefined);
      assert.equal(flags.reschedule.enabled(), true);
      const read = flags.reschedule.read();
      assert.ok(!('errors' in read), 'errors' in read ? read.errors.join('\n') : '');
      assert.deepEqual(
        read.profiles.map((p) => p.name),
        [undefined, STRIMZI_PROFILE, 'kafka-connect', 'redis'],
        "the flags' (Couchbase) profile, Strimzi's, then the file's",
      );
      const strimzi = read.strimzi!;
      assert.equal(strimzi.answer, 'deny-500');
      assert.deepEqual([...strimzi.namespaces!].sort(), ['kafka', 'kafka-2']);
      assert.deepEqual(
        strimzi.labelPatterns?.map((p) => [p.key, p.source]),
        [['strimzi.io/name', '.+-kafka']],
        'Kafka only: STRIMZI_DRAIN_ZOOKEEPER=false',
      );
      assert.equal(`${strimzi.annotation.key}=${strimzi.annotation.value}`, STRIMZI_ANNOTATION);
      const [, , connect, redis] = read.profiles;
      assert.deepEqual([...connect!.ownerKinds!], ['StrimziPodSet']);
      assert.equal(connect!.recordTtlMs, 60 * 60_000);
      assert.equal(redis!.answer, 'allow');
      assert.equal(redis!.selectors.length, 2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses the Strimzi profile or profiles without webhooks, and a deny code other than 429 or 500, saying why', async () => {
    const strimzi = await templateValues('helm-ns', { reschedule: { strimzi: { enabled: true } } });
    assert.equal(strimzi.ok, false);
    assert.match(strimzi.out, /reschedule\.strimzi\.enabled needs webhooks\.enabled=true/);
    const profiles = await templateValues('helm-ns', { reschedule: { profiles: PROFILES } });
    assert.equal(profiles.ok, false);
    assert.match(profiles.out, /reschedule\.profiles needs webhooks\.enabled=true/);
    const code = await templateValues('helm-ns', {
      webhooks: { enabled: true },
      reschedule: { strimzi: { enabled: true, denyCode: 503 } },
    });
    assert.equal(code.ok, false);
    assert.match(code.out, /reschedule\.strimzi\.denyCode is 503: 429 .* or 500/);
  });
});
