// `stateward doctor` against the real control plane: one misconfiguration of
// each kind in a namespace, each found with its fix (exit 1); a clean
// namespace passes (exit 0); credentials that may not read webhook
// configurations give a warning, not a failure.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import {
  resources,
  type KubeObject,
  type Pod,
  type ResourceType,
  type StatefulSet,
} from '../../src/runtime/kube/types.ts';
import { zpdbResource } from '../../src/drain/zpdb/zpdbresource.ts';
import { healthCheckResource } from '../../src/rollout/healthcheck/resource.ts';
import type { Finding, WebhookConfigurationObject } from '../../src/doctor/checks/scope.ts';
import { runDoctor } from '../../src/doctor/cli.ts';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { testClient, zoneStatefulSet } from '../support/rollout-group.ts';

const cluster = testCluster();
const crd = fileURLToPath(new URL('../../deploy/crds/zone-aware-pod-disruption-budgets.yaml', import.meta.url));
const healthCheckCrd = fileURLToPath(new URL('../../deploy/crds/rollout-health-checks.yaml', import.meta.url));

const roles: ResourceType = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  resource: 'roles',
  kind: 'Role',
  namespaced: true,
};
const roleBindings: ResourceType = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  resource: 'rolebindings',
  kind: 'RoleBinding',
  namespaced: true,
};

async function doctor(
  args: string[],
  kubeconfig = cluster.kubeconfigPath,
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runDoctor([...args, '--kubeconfig', kubeconfig], {
    out: (s) => (out += s),
    err: (s) => (err += s),
    env: {},
  });
  return { code, out, err };
}

async function doctorJson(namespace: string): Promise<{ code: number; findings: Finding[] }> {
  const { code, out, err } = await doctor(['-n', namespace, '-o', 'json']);
  assert.equal(err, '');
  return { code, findings: (JSON.parse(out) as { findings: Finding[] }).findings };
}

/** A StatefulSet like a zone of the test group, renamed, with extra metadata. */
function statefulSet(
  namespace: string,
  name: string,
  o: {
    group?: string | null;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    strategy?: 'OnDelete' | 'RollingUpdate';
    replicas?: number;
    volumes?: object[];
  } = {},
): StatefulSet {
  const sts = zoneStatefulSet(namespace, 'a', {
    replicas: o.replicas ?? 0,
    strategy: o.strategy ?? 'OnDelete',
    ...(o.group ? { group: o.group } : {}),
  });
  const groupLabel: Record<string, string> = o.group === null ? {} : { 'rollout-group': o.group ?? 'ingester' };
  sts.metadata = { ...sts.metadata, name, labels: { ...groupLabel, ...o.labels }, annotations: { ...o.annotations } };
  sts.spec!.serviceName = name;
  sts.spec!.selector = { matchLabels: { app: name } };
  sts.spec!.template.metadata!.labels = { app: name, ...groupLabel };
  if (o.volumes) sts.spec!.template.spec!.volumes = o.volumes as never;
  return sts;
}

async function applyCrd(kube: KubeClient, namespace: string): Promise<void> {
  const applied = await kubectl(cluster, 'apply', '-f', crd);
  assert.ok(applied.ok, applied.out);
  await waitFor('the ZPDB CRD to be served', async () => (await kube.list(zpdbResource, { namespace })).items, {
    timeoutMs: 30_000,
  });
}

function zpdb(namespace: string, name: string, spec: Record<string, unknown>): KubeObject {
  return {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'ZoneAwarePodDisruptionBudget',
    metadata: { name, namespace },
    spec,
  } as KubeObject;
}

async function webhookConfiguration(
  t: TestContext,
  kube: KubeClient,
  type: ResourceType,
  config: WebhookConfigurationObject,
): Promise<void> {
  await kube.create(type, config);
  t.after(() => kube.delete(type, { name: config.metadata!.name! }).catch(() => undefined));
}

describe('stateward doctor on the local cluster', { timeout: 120000 }, () => {
  it('finds one misconfiguration of each kind, each with its fix, and exits 1', async (t) => {
    const ns = await cluster.namespace(t, 'doctor-broken');
    const kube = testClient(cluster);
    await applyCrd(kube, ns);

    const sets = [
      // #306: a label set as an annotation; and a min-time label that is no Go duration.
      statefulSet(ns, 'ingester-zone-a', {
        labels: { 'grafana.com/min-time-between-zones-downscale': '12x' },
        annotations: { 'grafana.com/prepare-downscale': 'true' },
      }),
      // Not OnDelete: the whole group is blocked.
      statefulSet(ns, 'ingester-zone-b', { strategy: 'RollingUpdate' }),
      // A leader that does not exist; a max-unavailable that does not parse.
      statefulSet(ns, 'ingester-zone-c', {
        annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-x', 'rollout-max-unavailable': 'lots' },
      }),
      // A leader cycle.
      statefulSet(ns, 'cycle-a', {
        group: 'cycle',
        annotations: { 'grafana.com/rollout-downscale-leader': 'cycle-b' },
      }),
      statefulSet(ns, 'cycle-b', {
        group: 'cycle',
        annotations: { 'grafana.com/rollout-downscale-leader': 'cycle-a' },
      }),
      // Opted in to config restarts, referencing a ConfigMap that does not exist.
      statefulSet(ns, 'configured', {
        group: null,
        strategy: 'RollingUpdate',
        annotations: { 'com.xing.deployment-restart': 'enabled' },
        volumes: [{ name: 'config', configMap: { name: 'runtime-config' } }],
      }),
      // OnDelete, in no group, not opted in to evictions, with a pod.
      statefulSet(ns, 'standalone', { group: null, replicas: 1 }),
    ];
    for (const sts of sets) await kube.create(resources.statefulSets, sts);
    await waitFor(
      'a ZPDB to be created',
      () =>
        kube
          .create(zpdbResource, zpdb(ns, 'typo', { selector: { matchLabels: { 'rollout-group': 'ingestr' } } }))
          .catch(() => undefined),
      { timeoutMs: 30_000 },
    );
    await kube.create(
      zpdbResource,
      zpdb(ns, 'broken', {
        maxUnavailable: 1,
        maxUnavailablePercentage: 20,
        selector: { matchLabels: { 'rollout-group': 'ingester' } },
      }),
    );

    // Webhook configurations of an operator in this namespace. The no-downscale
    // one covers only Deployments and ReplicaSets, of which this namespace has none.
    const service = { name: 'rollout-operator', namespace: ns, port: 443 };
    const scope = {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      timeoutSeconds: 1,
    };
    await webhookConfiguration(t, kube, resources.validatingWebhookConfigurations, {
      metadata: { name: `doctor-no-downscale-${ns}`, labels: { 'grafana.com/namespace': ns } },
      webhooks: [
        {
          name: `no-downscale-${ns}.grafana.com`,
          clientConfig: { service: { ...service, path: '/admission/no-downscale' } },
          failurePolicy: 'Fail',
          rules: [
            {
              apiGroups: ['apps'],
              apiVersions: ['v1'],
              operations: ['UPDATE'],
              resources: ['deployments', 'replicasets'],
            },
          ],
          ...scope,
        },
      ],
    });
    await webhookConfiguration(t, kube, resources.validatingWebhookConfigurations, {
      metadata: {
        name: `doctor-pod-eviction-${ns}`,
        labels: { 'grafana.com/namespace': ns, 'grafana.com/inject-rollout-operator-ca': 'true' },
      },
      webhooks: [
        {
          name: `pod-eviction-${ns}.grafana.com`,
          clientConfig: { service: { ...service, path: '/admission/pod-eviction' } },
          failurePolicy: 'Ignore',
          rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods/eviction'] }],
          ...scope,
        },
      ],
    });

    await waitFor(
      "the standalone StatefulSet's pod",
      async () =>
        (await kube.list<Pod>(resources.pods, { namespace: ns, labelSelector: 'app=standalone' })).items.length > 0,
      { timeoutMs: 60_000 },
    );

    const expected: { code: string; severity: Finding['severity']; object: string; problem: RegExp; fix: RegExp }[] = [
      {
        code: 'key-should-be-label',
        severity: 'error',
        object: `StatefulSet ${ns}/ingester-zone-a`,
        problem: /grafana\.com\/prepare-downscale="true" is set as an annotation/,
        fix: new RegExp(`kubectl -n ${ns} label statefulset/ingester-zone-a grafana\\.com/prepare-downscale=true`),
      },
      {
        code: 'invalid-min-time',
        severity: 'error',
        object: `StatefulSet ${ns}/ingester-zone-a`,
        problem: /"12x" is not a Go duration/,
        fix: /min-time-between-zones-downscale=12h/,
      },
      {
        code: 'group-not-ondelete',
        severity: 'error',
        object: `StatefulSet ${ns}/ingester-zone-b`,
        problem: /RollingUpdate.*blocked/,
        fix: /"type":"OnDelete"/,
      },
      {
        code: 'leader-not-found',
        severity: 'error',
        object: `StatefulSet ${ns}/ingester-zone-c`,
        problem: /"ingester-zone-x", but there is no such StatefulSet/,
        fix: /rollout-downscale-leader=<leader>/,
      },
      {
        code: 'invalid-max-unavailable',
        severity: 'warning',
        object: `StatefulSet ${ns}/ingester-zone-c`,
        problem: /rollout-max-unavailable="lots" is not a number or a percentage/,
        fix: /rollout-max-unavailable=2/,
      },
      {
        code: 'leader-cycle',
        severity: 'error',
        object: `StatefulSet ${ns}/cycle-a`,
        problem: /cycle: cycle-a -> cycle-b -> cycle-a/,
        fix: /annotate statefulset\/<leader> grafana\.com\/rollout-downscale-leader-/,
      },
      {
        code: 'config-missing',
        severity: 'error',
        object: `StatefulSet ${ns}/configured`,
        problem: /pods need ConfigMap runtime-config, which does not exist/,
        fix: new RegExp(`create ConfigMap ${ns}/runtime-config`),
      },
      {
        code: 'ondelete-unmanaged',
        severity: 'warning',
        object: `StatefulSet ${ns}/standalone`,
        problem: /OnDelete with 1 pod but in no rollout group/,
        fix: /stateward\.dev\/config-restart-ondelete=evict/,
      },
      {
        code: 'zpdb-no-statefulsets',
        severity: 'warning',
        object: `ZoneAwarePodDisruptionBudget ${ns}/typo`,
        problem: /rollout-group=ingestr matches no StatefulSet/,
        fix: /spec\.selector\.matchLabels/,
      },
      {
        code: 'zpdb-invalid',
        severity: 'error',
        object: `ZoneAwarePodDisruptionBudget ${ns}/broken`,
        problem: /only one of maxUnavailable or maxUnavailablePercentage may be set/,
        fix: new RegExp(`kubectl -n ${ns} edit zpdb/broken`),
      },
      {
        code: 'webhook-ca-labels-missing',
        severity: 'error',
        object: `ValidatingWebhookConfiguration doctor-no-downscale-${ns}`,
        problem: /lacks the label grafana\.com\/inject-rollout-operator-ca=true/,
        fix: /grafana\.com\/inject-rollout-operator-ca=true --overwrite/,
      },
      {
        code: 'webhook-ca-bundle-empty',
        severity: 'error',
        object: `ValidatingWebhookConfiguration doctor-pod-eviction-${ns}`,
        problem: /has no clientConfig\.caBundle/,
        fix: /-server-tls\.enabled/,
      },
      {
        code: 'no-downscale-selects-operator',
        severity: 'error',
        object: `ValidatingWebhookConfiguration doctor-no-downscale-${ns}`,
        problem: /has no objectSelector, so it covers the operator's own Deployment/,
        fix: /"operator":"NotIn"/,
      },
      {
        code: 'webhook-failure-policy-ignore',
        severity: 'error',
        object: `ValidatingWebhookConfiguration doctor-pod-eviction-${ns}`,
        problem: /failurePolicy Ignore: .*two zones down/,
        fix: /"value":"Fail"/,
      },
      // Nothing in this namespace serves them: the Service they call was never created.
      {
        code: 'webhook-service-missing',
        severity: 'error',
        object: `ValidatingWebhookConfiguration doctor-no-downscale-${ns}`,
        problem: new RegExp(`calls Service ${ns}/rollout-operator, which does not exist: .*refuse every request`),
        fix: /deploy\/webhooks\/service\.yaml/,
      },
      {
        code: 'webhook-service-missing',
        severity: 'error',
        object: `ValidatingWebhookConfiguration doctor-pod-eviction-${ns}`,
        problem: /failurePolicy Ignore\) are skipped, so what they guard goes unchecked/,
        fix: /point clientConfig\.service at the operator's Service/,
      },
    ];

    const { code, findings } = await doctorJson(ns);
    assert.equal(code, 1);
    for (const e of expected) {
      const found = findings.filter((f) => f.code === e.code && f.object === e.object);
      assert.equal(found.length, 1, `${e.code} on ${e.object} in ${JSON.stringify(findings, null, 2)}`);
      const f = found[0]!;
      assert.equal(f.severity, e.severity, e.code);
      assert.match(f.problem, e.problem, e.code);
      assert.match(f.fix, e.fix, e.code);
    }

    // The text form: one block per finding, and the summary.
    const text = await doctor(['-n', ns]);
    assert.equal(text.code, 1);
    assert.equal(text.err, '');
    assert.match(
      text.out,
      new RegExp(
        `^ERROR  StatefulSet ${ns}/ingester-zone-b: its update strategy is RollingUpdate.*\\n  fix: kubectl -n ${ns} patch statefulset/ingester-zone-b `,
        'm',
      ),
    );
    assert.match(text.out, new RegExp(`^WARNING  StatefulSet ${ns}/standalone: `, 'm'));
    assert.match(
      text.out,
      new RegExp(
        `\\n${findings.filter((f) => f.severity === 'error').length} errors, ${findings.filter((f) => f.severity === 'warning').length} warnings in namespace ${ns} \\(checked 7 StatefulSets, 2 ZoneAwarePodDisruptionBudgets, `,
      ),
    );
  });

  it('passes a healthy namespace (exit 0)', async (t) => {
    const ns = await cluster.namespace(t, 'doctor-clean');
    const kube = testClient(cluster);
    await applyCrd(kube, ns);
    for (const z of ['a', 'b', 'c']) await kube.create(resources.statefulSets, zoneStatefulSet(ns, z, { replicas: 1 }));
    await kube.create(resources.configMaps, {
      metadata: { name: 'runtime-config', namespace: ns },
      data: { 'limits.yaml': '{}' },
    });
    await kube.create(
      resources.statefulSets,
      statefulSet(ns, 'configured', {
        group: null,
        strategy: 'RollingUpdate',
        annotations: { 'com.xing.deployment-restart': 'enabled' },
        volumes: [{ name: 'config', configMap: { name: 'runtime-config' } }],
      }),
    );
    await waitFor(
      'the ZPDB to be created',
      () =>
        kube
          .create(
            zpdbResource,
            zpdb(ns, 'ingester', { maxUnavailable: 1, selector: { matchLabels: { 'rollout-group': 'ingester' } } }),
          )
          .catch(() => undefined),
      { timeoutMs: 30_000 },
    );

    const { code, out, err } = await doctor(['-n', ns]);
    assert.equal(err, '');
    assert.doesNotMatch(out, /^ERROR/m);
    assert.equal(code, 0, out);
    const { findings } = await doctorJson(ns);
    assert.deepEqual(
      findings.filter((f) => f.object.includes(`${ns}/`)),
      [],
      "nothing about this namespace's objects",
    );
  });

  it('reports RolloutHealthChecks that do not validate, select nothing, are bound nowhere or named but missing, and an endpoint refusing the probe', async (t) => {
    const ns = await cluster.namespace(t, 'doctor-gates');
    const kube = testClient(cluster);
    const applied = await kubectl(cluster, 'apply', '-f', healthCheckCrd);
    assert.ok(applied.ok, applied.out);
    const served = async () => (await kube.list(healthCheckResource, { namespace: ns })).items;
    await waitFor('the RolloutHealthCheck CRD to be served', served, { timeoutMs: 30_000 });
    const annotated = (z: string, check: string) => {
      const sts = zoneStatefulSet(ns, z, { replicas: 0 });
      sts.metadata!.annotations = { 'grafana.com/rollout-health-check': check };
      return sts;
    };
    await kube.create(resources.statefulSets, annotated('a', 'no-such-check'));
    await kube.create(resources.statefulSets, annotated('b', 'broken'));
    // A port nothing listens on (freePorts closes what it opened): the real probe is refused.
    const [port] = await freePorts(1);
    const check = (name: string, spec: Record<string, unknown>) =>
      kube.create(healthCheckResource, {
        apiVersion: 'rollout-operator.grafana.com/v1',
        kind: 'RolloutHealthCheck',
        metadata: { name, namespace: ns },
        spec: {
          selector: { matchLabels: { 'rollout-group': 'ingester' } },
          prometheusURL: `http://127.0.0.1:${port!}`,
          checks: [
            {
              name: 'errors',
              query: 'sum(rate(e{${targetMatchers}}[${range}]))',
              successQuery: '${current} <= bool 0',
            },
          ],
          ...spec,
        },
      } as KubeObject);
    // No webhook in this cluster: the API server's schema alone lets a missing placeholder through.
    await check('broken', {
      checks: [{ name: 'errors', query: 'sum(rate(e{${targetMatchers}}[5m]))', successQuery: '${current}' }],
    });
    await check('lonely', { selector: { matchLabels: { 'rollout-group': 'nothing' } } });

    const { code, findings } = await doctorJson(ns);
    assert.equal(code, 1, 'an invalid check is an error');
    const gates = findings.filter((f) => f.code.startsWith('health-check'));
    assert.deepEqual(
      gates.map((f) => [f.severity, f.code, f.object]),
      [
        ['error', 'health-check-invalid', `RolloutHealthCheck ${ns}/broken`],
        ['warning', 'health-check-selects-nothing', `RolloutHealthCheck ${ns}/lonely`],
        ['warning', 'health-check-unbound', `RolloutHealthCheck ${ns}/lonely`],
        ['warning', 'health-check-unreachable', `RolloutHealthCheck ${ns}/lonely`],
        ['warning', 'health-check-unknown', `StatefulSet ${ns}/ingester-zone-a`],
      ],
    );
    assert.match(gates[0]!.problem, /spec\.checks\[0\]\.query: must contain \$\{range\}.*held at their gate/);
    assert.match(
      gates[3]!.problem,
      /could not be reached from where doctor runs \(connection refused by 127\.0\.0\.1:\d+\)/,
    );
    assert.match(
      gates[4]!.fix,
      new RegExp(`kubectl -n ${ns} annotate statefulset/ingester-zone-a grafana\\.com/rollout-health-check-$`),
    );
  });

  it('with credentials that may not read webhook configurations or RolloutHealthChecks, says those checks were skipped and still exits 0', async (t) => {
    const ns = await cluster.namespace(t, 'doctor-rbac');
    const kube = testClient(cluster);
    await applyCrd(kube, ns);
    for (const z of ['a', 'b']) await kube.create(resources.statefulSets, zoneStatefulSet(ns, z, { replicas: 0 }));
    await kube.create(resources.serviceAccounts, { metadata: { name: 'doctor', namespace: ns } });
    await kube.create(roles, {
      metadata: { name: 'doctor', namespace: ns },
      rules: [
        { apiGroups: [''], resources: ['pods', 'configmaps', 'secrets'], verbs: ['list'] },
        { apiGroups: ['apps'], resources: ['statefulsets', 'deployments', 'daemonsets'], verbs: ['list'] },
        { apiGroups: ['rollout-operator.grafana.com'], resources: ['zoneawarepoddisruptionbudgets'], verbs: ['list'] },
      ],
    } as KubeObject);
    await kube.create(roleBindings, {
      metadata: { name: 'doctor', namespace: ns },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'doctor' },
      subjects: [{ kind: 'ServiceAccount', name: 'doctor', namespace: ns }],
    } as KubeObject);
    const kubeconfig = await cluster.serviceAccountKubeconfig(ns, 'doctor');

    const result = await waitFor(
      'the Role to take effect',
      async () => {
        const r = await doctor(['-n', ns], kubeconfig);
        // Until the Role applies, namespaced lists are forbidden too (and reported as skipped).
        return r.err === '' &&
          !/resource (statefulsets|pods|deployments|daemonsets|configmaps|secrets|zoneawarepoddisruptionbudgets):/.test(
            r.out,
          )
          ? r
          : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    assert.equal(result.code, 0, result.out);
    assert.match(
      result.out,
      /^WARNING {2}resource validatingwebhookconfigurations: cannot list validatingwebhookconfigurations \(forbidden\): webhook checks .* were skipped\n {2}fix: /m,
    );
    assert.match(result.out, /^WARNING {2}resource mutatingwebhookconfigurations: /m);
    // The Role grants no rollouthealthchecks: a 403 whether or not the CRD is installed (authorization comes first).
    assert.match(
      result.out,
      /^WARNING {2}resource rollouthealthchecks: cannot list rollouthealthchecks \(forbidden\): RolloutHealthCheck checks .* were skipped\n {2}fix: /m,
    );
    assert.match(result.out, new RegExp(`0 errors, 3 warnings in namespace ${ns} \\(checked 2 StatefulSets`));
  });

  it('sees whether anything answers: a webhook Service with no ready endpoint, a leader Lease nobody renews', async (t) => {
    const ns = await cluster.namespace(t, 'doctor-answers');
    const kube = testClient(cluster);
    const services: ResourceType = {
      group: '',
      version: 'v1',
      resource: 'services',
      kind: 'Service',
      namespaced: true,
    };
    // The operator's Service exists, but selects no pod: its EndpointSlice has no endpoint.
    await kube.create(services, {
      metadata: { name: 'stateward', namespace: ns },
      spec: { selector: { app: 'no-such-pod' }, ports: [{ port: 443, targetPort: 8443 }] },
    } as KubeObject);
    await kube.create(resources.deployments, {
      metadata: { name: 'stateward', namespace: ns, labels: { 'app.kubernetes.io/name': 'stateward' } },
      // Scaled to 0: on kwok's nodes a replica would be faked Ready, which is not what this test is about.
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'stateward' } },
        template: {
          metadata: { labels: { app: 'stateward' } },
          spec: {
            containers: [
              {
                name: 'stateward',
                image: 'ghcr.io/stateward/stateward:0.1.0',
                args: ['-kubernetes.namespace=$(POD_NAMESPACE)', '-server-tls.enabled', '-leader-election.enabled'],
              },
            ],
          },
        },
      },
    } as KubeObject);
    // Last renewed ten minutes ago by a replica that is gone.
    await kube.create(resources.leases, {
      metadata: { name: 'stateward-leader', namespace: ns },
      spec: {
        holderIdentity: 'stateward-old-replica',
        leaseDurationSeconds: 15,
        renewTime: new Date(Date.now() - 600_000).toISOString().replace('Z', '000Z'),
      },
    } as KubeObject);
    await webhookConfiguration(t, kube, resources.validatingWebhookConfigurations, {
      metadata: { name: `doctor-answers-${ns}`, labels: { 'grafana.com/namespace': ns } },
      webhooks: [
        {
          name: `pod-eviction-${ns}.grafana.com`,
          clientConfig: { service: { name: 'stateward', namespace: ns, port: 443, path: '/admission/pod-eviction' } },
          failurePolicy: 'Fail',
          rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods/eviction'] }],
          ...{
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
            admissionReviewVersions: ['v1'],
            sideEffects: 'None',
            timeoutSeconds: 1,
          },
        },
      ],
    });
    // The EndpointSlice controller writes the Service's (empty) slice shortly after it.
    await waitFor(
      "the Service's EndpointSlice",
      async () =>
        (
          await kube.list<KubeObject>(
            {
              group: 'discovery.k8s.io',
              version: 'v1',
              resource: 'endpointslices',
              kind: 'EndpointSlice',
              namespaced: true,
            },
            { namespace: ns, labelSelector: 'kubernetes.io/service-name=stateward' },
          )
        ).items.length > 0,
      { timeoutMs: 30_000 },
    );
    const { code, findings } = await doctorJson(ns);
    assert.equal(code, 1);
    const noEndpoints = findings.filter((f) => f.code === 'webhook-service-no-endpoints');
    assert.equal(noEndpoints.length, 1, JSON.stringify(findings, null, 2));
    assert.equal(noEndpoints[0]!.object, `ValidatingWebhookConfiguration doctor-answers-${ns}`);
    assert.match(
      noEndpoints[0]!.problem,
      new RegExp(`calls Service ${ns}/stateward, which has no ready endpoint: its fail-closed webhooks refuse`),
    );
    const leading = findings.filter((f) => f.code === 'operator-not-leading');
    assert.equal(leading.length, 1, JSON.stringify(findings, null, 2));
    assert.equal(leading[0]!.severity, 'error');
    assert.match(
      leading[0]!.problem,
      new RegExp(`leader Lease ${ns}/stateward-leader was last renewed \\d+ s ago by stateward-old-replica`),
    );
    assert.ok(
      findings.some((f) => f.code === 'operator-unavailable' && f.object === `Deployment ${ns}/stateward`),
      'scaled to 0: nothing answers',
    );
  });
});
