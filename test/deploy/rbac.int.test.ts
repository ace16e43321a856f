// Least privilege, proved: the operator runs authenticated as the shipped
// ServiceAccount (a token minted by the local control plane's TokenRequest
// API) with only the RBAC the shipped overlay renders bound to it, and the
// shipped write policy (a ValidatingAdmissionPolicy) judging its writes, and
// every feature is driven through it. Not one API call may be refused, and a
// few permissions it must not have are checked to be absent: by RBAC, and
// where RBAC cannot name the object, by the policy.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it, type TestContext } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { WRITE_POLICY } from '../../deploy/generate.ts';
import { zpdbResource } from '../../src/drain/zpdb/zpdbresource.ts';
import { CERTIFICATE_SECRET } from '../../src/rbac/permissions.ts';
import { KubeClient } from '../../src/runtime/kube/client.ts';
import { isForbidden } from '../../src/runtime/kube/errors.ts';
import { readKubeConfigFile } from '../../src/runtime/kube/kubeconfig.ts';
import {
  resources,
  type ResourceType,
  type ConfigMap,
  type KubeObject,
  type Lease,
  type Pod,
  type Secret,
  type StatefulSet,
} from '../../src/runtime/kube/types.ts';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { evict, evictOnceAllowed } from '../support/evictions.ts';
import { kubectl } from '../support/kubectl.ts';
import { deleteClusterScoped, kubectlApply, renderOverlay, type Manifest, type Overlay } from '../support/manifests.ts';
import { FAST_ELECTION, OperatorProcess } from '../support/operator-process.ts';
import { serveNamespacePods } from '../support/pod-endpoints.ts';
import { helm } from '../tools/helm.ts';
import { mirrorAnnotations, REPLICA_TEMPLATE } from '../support/replica-templates.ts';
import {
  changeTemplate,
  createGroup,
  createGroupBudget,
  isReady,
  testClient,
  waitGroupSettled,
  waitRevisionsPending,
  waitRolledOut,
  zoneStatefulSet,
} from '../support/rollout-group.ts';

const exec = promisify(execFile);
const cluster = testCluster();
const CHART = fileURLToPath(new URL('../../deploy/helm/stateward', import.meta.url));
const WEBHOOK_KINDS = new Set(['ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration']);
const RUNS_ELSEWHERE = new Set(['Deployment', 'Service', 'PodDisruptionBudget']);
const POLICY_KINDS = new Set(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);

type Container = { args?: string[] };
type WebhookConfiguration = Manifest & {
  webhooks: { clientConfig: { service?: { path?: string }; url?: string; caBundle?: string } }[];
};

/**
 * Installs the overlay's RBAC, ServiceAccount, CRDs and webhook
 * configurations into `namespace` (the webhooks pointed at this machine's
 * loopback, where the operator process listens), and starts the operator
 * with the rendered Deployment's own arguments, authenticated as the
 * rendered ServiceAccount.
 */
async function install(
  t: TestContext,
  overlay: Overlay,
  namespace: string,
  extraFlags: string[],
  /** Changes the rendered manifests before they are applied (a user's own, narrower Role, say). */
  edit: (docs: Manifest[]) => Manifest[] = (docs) => docs,
): Promise<{ op: OperatorProcess; kubeconfig: string; docs: Manifest[] }> {
  return installRendered(t, edit(await renderOverlay(overlay, namespace)), namespace, extraFlags);
}

/** install(), of manifests rendered by kustomize or helm. */
async function installRendered(
  t: TestContext,
  rendered: Manifest[],
  namespace: string,
  extraFlags: string[],
  /** Where the ServiceAccount may create ConfigMaps, to see the write policy in effect (default: its own namespace). */
  writable = namespace,
): Promise<{ op: OperatorProcess; kubeconfig: string; docs: Manifest[] }> {
  const [webhookPort] = (await freePorts(1)) as [number];
  const docs = rendered
    .filter((d) => !RUNS_ELSEWHERE.has(d.kind ?? ''))
    .map((d) => {
      if (POLICY_KINDS.has(d.kind ?? '')) return ownPolicy(d, namespace);
      if (!WEBHOOK_KINDS.has(d.kind ?? '')) return d;
      const config = structuredClone(d) as WebhookConfiguration;
      for (const w of config.webhooks)
        w.clientConfig = { url: `https://localhost:${webhookPort}${w.clientConfig.service?.path ?? ''}` };
      return config;
    });
  t.after(() => deleteClusterScoped(cluster.kubeconfigPath, docs));
  await kubectlApply(cluster.kubeconfigPath, docs);
  const deployment = rendered.find((d) => d.kind === 'Deployment') as Manifest & {
    spec: { template: { spec: { containers: Container[]; serviceAccountName: string } } };
  };
  const args = (deployment.spec.template.spec.containers[0]!.args ?? [])
    .map((a) => a.replaceAll('$(POD_NAMESPACE)', namespace))
    // The Service's DNS name would not resolve to this machine.
    .filter((a) => !a.startsWith('-server-tls.self-signed-cert.dns-name='));
  const kubeconfig = await cluster.serviceAccountKubeconfig(
    namespace,
    deployment.spec.template.spec.serviceAccountName,
  );
  await waitRbacEffective(kubeconfig, docs, namespace);
  if (docs.some((d) => d.kind === 'ValidatingAdmissionPolicy')) await waitPolicyEffective(kubeconfig, writable);
  const op = await OperatorProcess.start(
    cluster,
    namespace,
    [...args, `-server-tls.port=${webhookPort}`, '-server-tls.self-signed-cert.dns-name=localhost', ...extraFlags],
    { kubeconfig },
  );
  t.after(() => op.stop());
  await op.waitReady();
  return { op, kubeconfig, docs };
}

/** The chart rendered into `namespace` with `values` (helm template), its CRDs included as `helm install` applies them. */
async function chart(namespace: string, values: string[]): Promise<Manifest[]> {
  const rendered = await helm(
    'template',
    'stateward',
    CHART,
    '--include-crds',
    '-n',
    namespace,
    ...values.flatMap((v) => ['--set', v]),
  );
  assert.ok(rendered.ok, rendered.out);
  return parseAllDocuments(rendered.out)
    .map((d) => d.toJS() as Manifest)
    .filter((d) => d !== null);
}

type PolicyRule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };

/**
 * The overlays' write policy is one cluster-scoped object that every install
 * shares (it judges the ServiceAccount `stateward` of any namespace). Each
 * test applies the same spec under a name of its own, so another test's
 * clean-up cannot take it away mid-test.
 */
function ownPolicy(doc: Manifest, namespace: string): Manifest {
  const renamed = structuredClone(doc) as Manifest & { spec: { policyName?: string } };
  renamed.metadata = { ...renamed.metadata, name: `${WRITE_POLICY}-${namespace}` };
  if (renamed.kind === 'ValidatingAdmissionPolicyBinding') renamed.spec.policyName = `${WRITE_POLICY}-${namespace}`;
  return renamed;
}

/** A client authenticated as the ServiceAccount, to try writes the operator never makes (dry runs). */
const asServiceAccount = (kubeconfig: string) =>
  new KubeClient({ kubeConfig: readKubeConfigFile(kubeconfig), timeoutMs: 15_000 });

/** The message of a write's refusal, or undefined when it was let through. */
async function refusal(write: Promise<unknown>): Promise<string | undefined> {
  try {
    await write;
    return undefined;
  } catch (error) {
    if (!isForbidden(error)) throw error;
    return error instanceof Error ? error.message : String(error);
  }
}

/** Updates a Lease to name the operator its holder, as a dry run (RBAC grants Leases update, not patch). */
async function takeOver(sa: KubeClient, where: { namespace: string; name: string }): Promise<unknown> {
  const lease = await sa.get<Lease>(resources.leases, where);
  return sa.update<Lease>(
    resources.leases,
    { ...lease, spec: { ...lease.spec, holderIdentity: 'stateward' } },
    { dryRun: true },
  );
}

/** How the write policy's refusal reads: the apiserver names the policy, then our message for the kind. */
const byPolicy = (kind: string) =>
  new RegExp(
    `ValidatingAdmissionPolicy '${WRITE_POLICY}-[^']+'.*denied request: Stateward's ServiceAccount writes ${kind}s only under its own names`,
  );

/**
 * The apiserver compiles a new policy from its own watch, as it learns of
 * RBAC: until then a write it should refuse goes through. Waits until a
 * ConfigMap outside Stateward's names is refused (a dry run: nothing is
 * written even before).
 */
async function waitPolicyEffective(kubeconfig: string, namespace: string): Promise<void> {
  const sa = asServiceAccount(kubeconfig);
  const probe = { metadata: { name: 'not-statewards', namespace } };
  await waitFor(
    'the write policy in effect',
    async () => {
      const message = await refusal(sa.create<ConfigMap>(resources.configMaps, probe, { dryRun: true }));
      return message !== undefined && byPolicy('ConfigMap').test(message);
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
}

/**
 * The apiserver's authorizer learns of new Roles and bindings from its own
 * watch: a process started at once may be refused for a moment. Waits until
 * every rendered rule answers yes for the ServiceAccount.
 */
async function waitRbacEffective(kubeconfig: string, docs: Manifest[], namespace: string): Promise<void> {
  // A SelfSubjectAccessReview asked directly: `kubectl auth can-i` resolves
  // `<resource>.<group>` through discovery, and a CRD not installed here (Argo
  // Rollouts) would read as a core resource and never be allowed.
  const sa = asServiceAccount(kubeconfig);
  for (const role of docs.filter((d) => d.kind === 'Role' || d.kind === 'ClusterRole')) {
    for (const rule of (role as Manifest & { rules: PolicyRule[] }).rules) {
      const [resource, subresource] = rule.resources[0]!.split('/') as [string, string | undefined];
      const attributes = {
        verb: rule.verbs[0]!,
        group: rule.apiGroups[0] ?? '',
        resource,
        ...(subresource ? { subresource } : {}),
        ...(rule.resourceNames?.[0] ? { name: rule.resourceNames[0] } : {}),
        ...(role.kind === 'Role' ? { namespace: role.metadata?.namespace ?? namespace } : {}),
      };
      await waitFor(
        `RBAC in effect: ${JSON.stringify(attributes)}`,
        async () =>
          (
            await sa.create<KubeObject & { status?: { allowed?: boolean } }>(SELF_SUBJECT_ACCESS_REVIEWS, {
              spec: { resourceAttributes: attributes },
            } as KubeObject)
          ).status?.allowed === true,
        { timeoutMs: 30_000, intervalMs: 100 },
      );
    }
  }
}

const SELF_SUBJECT_ACCESS_REVIEWS: ResourceType = {
  group: 'authorization.k8s.io',
  version: 'v1',
  resource: 'selfsubjectaccessreviews',
  kind: 'SelfSubjectAccessReview',
  namespaced: false,
};

/** Every API call the operator made that was refused (403), by path. */
async function refusedCalls(op: OperatorProcess): Promise<string[]> {
  const metrics = (await op.get('/metrics'))?.body ?? '';
  return metrics
    .split('\n')
    .filter(
      (l) =>
        l.startsWith('rollout_operator_kubernetes_api_client_request_duration_seconds_count') &&
        l.includes('status_code="403"'),
    );
}

// A 403 status or a Forbidden reason; not any "403" (a namespace named …-4038c6 matched once).
const refusalsLogged = (op: OperatorProcess) =>
  op.logs
    .split('\n')
    .filter((l) => /\b403\b|forbidden/i.test(l))
    .join('\n');

async function canI(kubeconfig: string, ...args: string[]): Promise<boolean> {
  const { stdout } = await exec('kubectl', ['--kubeconfig', kubeconfig, 'auth', 'can-i', ...args]).catch(
    (error: { stdout: string }) => ({ stdout: error.stdout }),
  );
  return stdout.trim() === 'yes';
}

describe('least-privilege RBAC', { timeout: 600_000 }, () => {
  it('namespaced, every feature: the operator works under exactly the shipped RBAC and no call is refused', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const [podPort] = (await freePorts(1)) as [number];

    // Workloads first: a 3-zone group; zones a and b prepare their downscales.
    await createGroup(kube, namespace, { all: { replicas: 2 } });
    for (const zone of ['a', 'b']) {
      await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
        metadata: {
          labels: { 'grafana.com/prepare-downscale': 'true' },
          annotations: {
            'grafana.com/prepare-downscale-http-path': 'prepare',
            'grafana.com/prepare-downscale-http-port': String(podPort),
          },
        },
      });
    }
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-c' }, 'merge', {
      metadata: { labels: { 'grafana.com/no-downscale': 'true' } },
    });
    await waitGroupSettled(kube, namespace, 60_000);

    // The zone tracker records prepared downscales: its ConfigMap is written by name.
    const { op, kubeconfig, docs } = await install(t, 'all', namespace, [
      ...FAST_ELECTION,
      '-restart-grace-period=1',
      '-reconcile.interval=1s',
      '-use-zone-tracker',
    ]);

    // Leader election and CA injection.
    await waitFor('the leader Lease held', async () => (await op.metric('stateward_leader_is_leader')) === 1, {
      timeoutMs: 30_000,
    });
    const webhookNames = docs
      .filter((d) => WEBHOOK_KINDS.has(d.kind ?? ''))
      .map(
        (d) =>
          [
            d.kind === 'MutatingWebhookConfiguration'
              ? resources.mutatingWebhookConfigurations
              : resources.validatingWebhookConfigurations,
            d.metadata!.name!,
          ] as const,
      );
    await waitFor(
      'the CA injected into every webhook configuration',
      async () => {
        for (const [type, name] of webhookNames) {
          const live = await kube.get<WebhookConfiguration>(type, { name });
          if (!live.webhooks.every((w) => w.clientConfig.caBundle)) return false;
        }
        return true;
      },
      { timeoutMs: 30_000 },
    );

    // The certificate Secret deleted under it: noticed through its watch
    // (list/watch by name, names only) and issued anew at once.
    const certificate = () =>
      kube.get<Secret>(resources.secrets, { namespace, name: CERTIFICATE_SECRET }).catch(() => undefined);
    const firstCa = (await certificate())?.data?.['ca'];
    assert.ok(firstCa, 'the certificate Secret');
    await kube.delete(resources.secrets, { namespace, name: CERTIFICATE_SECRET });
    await waitFor(
      'the certificate issued anew',
      async () => {
        const ca = (await certificate())?.data?.['ca'];
        return ca !== undefined && ca !== firstCa;
      },
      { timeoutMs: 15_000 },
    );

    // A coordinated rollout.
    for (const zone of ['a', 'b', 'c']) await changeTemplate(kube, namespace, zone, '2');
    await waitRevisionsPending(kube, namespace);
    await waitRolledOut(kube, namespace);

    // The rolled pods' own addresses answer the prepare calls.
    const endpoints = await serveNamespacePods(t, kube, namespace, podPort);

    // no-downscale denies; prepare-downscale prepares the leaving pod and records the downscale.
    const denied = await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-c', '--replicas=1');
    assert.equal(denied.ok, false);
    assert.match(denied.out, /grafana\.com\/no-downscale/);
    const prepared = await kubectl(cluster, '-n', namespace, 'scale', 'statefulset', 'ingester-zone-a', '--replicas=1');
    assert.ok(prepared.ok, prepared.out);
    assert.deepEqual(
      endpoints.calls.filter((c) => c.method === 'POST').map((c) => c.pod),
      ['ingester-zone-a-1'],
    );
    const tracker = await kube.get<ConfigMap>(resources.configMaps, {
      namespace,
      name: 'rollout-operator-zone-tracker',
    });
    assert.ok(tracker.data?.['ingester-zone-a'], 'the downscale recorded in the zone tracker');
    // The group's lock is released by clearing its holder (no Lease delete is granted).
    const locks = (await kube.list<Lease>(resources.leases, { namespace })).items.filter((l) =>
      l.metadata?.name?.startsWith('stateward-downscale-'),
    );
    assert.deepEqual(
      locks.map((l) => l.spec?.holderIdentity ?? ''),
      [''],
      'one lock Lease, released',
    );

    // Mirrored replicas from a ReplicaTemplate, with status written back.
    await waitFor(
      'a ReplicaTemplate created',
      () =>
        kube
          .create(REPLICA_TEMPLATE, {
            apiVersion: 'rollout-operator.grafana.com/v1',
            kind: 'ReplicaTemplate',
            metadata: { name: 'mirrored', namespace },
            spec: { replicas: 2 },
          } as KubeObject)
          .catch(() => undefined),
      { timeoutMs: 30_000 },
    );
    const mirror = zoneStatefulSet(namespace, 'm', { group: 'mirrored', replicas: 0 });
    mirror.metadata!.annotations = { ...mirror.metadata!.annotations, ...mirrorAnnotations('mirrored') };
    await kube.create(resources.statefulSets, mirror);
    await waitFor(
      'the mirror at 2 replicas, written back',
      async () => {
        const set = await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-m' });
        const template = await kube.get<KubeObject & { status?: { replicas?: number } }>(REPLICA_TEMPLATE, {
          namespace,
          name: 'mirrored',
        });
        return set.spec?.replicas === 2 && template.status?.replicas === 2;
      },
      { timeoutMs: 30_000 },
    );

    // Zone-aware disruption budget: validated on create, one zone at a time.
    await waitGroupSettled(kube, namespace, 60_000);
    await createGroupBudget(kube, namespace);
    assert.equal((await evict(kube, namespace, 'ingester-zone-b-0')).code, 201);
    assert.equal((await evict(kube, namespace, 'ingester-zone-c-0')).code, 429, 'a second zone refused');

    // Reschedule-on-eviction: the eviction becomes a request to the pod's own operator.
    await kube.patch(resources.namespaces, { name: namespace }, 'merge', {
      metadata: { labels: { 'stateward.dev/reschedule-on-eviction': 'true' } },
    });
    await kube.create(resources.pods, {
      metadata: { name: 'cb-0', namespace, labels: { app: 'couchbase' } },
      spec: { containers: [{ name: 'cb', image: 'example.invalid/cb:1' }] },
    });
    await waitFor('cb-0 Ready', async () => isReady(await kube.get<Pod>(resources.pods, { namespace, name: 'cb-0' })), {
      timeoutMs: 30_000,
    });
    assert.equal((await evict(kube, namespace, 'cb-0')).code, 429);
    assert.equal(
      (await kube.get<Pod>(resources.pods, { namespace, name: 'cb-0' })).metadata?.annotations?.[
        'cao.couchbase.com/reschedule'
      ],
      'true',
    );

    // Config-change restarts: a Deployment restarts, an opted-in OnDelete StatefulSet's pod is evicted.
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'app-config', namespace },
      data: { level: 'info' },
    });
    await kube.create<Secret>(resources.secrets, {
      metadata: { name: 'app-secret', namespace },
      data: { password: Buffer.from('one').toString('base64') },
    });
    const envFrom = [{ configMapRef: { name: 'app-config' } }, { secretRef: { name: 'app-secret' } }];
    await kube.create(resources.deployments, {
      metadata: { name: 'app', namespace, annotations: { 'com.xing.deployment-restart': 'enabled' } },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'app' } },
        template: {
          metadata: { labels: { app: 'app' } },
          spec: { containers: [{ name: 'app', image: 'example.invalid/app:1', envFrom }] },
        },
      },
    } as KubeObject);
    const db = zoneStatefulSet(namespace, 'a', { replicas: 1 });
    const standalone: StatefulSet = {
      metadata: {
        name: 'db',
        namespace,
        annotations: { 'com.xing.deployment-restart': 'enabled', 'stateward.dev/config-restart-ondelete': 'evict' },
      },
      spec: {
        ...db.spec!,
        serviceName: 'db',
        selector: { matchLabels: { app: 'db' } },
        template: {
          ...db.spec!.template,
          metadata: { labels: { app: 'db' } },
          spec: { ...db.spec!.template.spec!, containers: [{ name: 'db', image: 'example.invalid/db:1', envFrom }] },
        },
      },
    };
    await kube.create(resources.statefulSets, standalone);
    const applied = async (type: ResourceType, name: string) =>
      (await kube.get<KubeObject>(type, { namespace, name })).metadata?.annotations?.[
        'com.xing.deployment-restart.applied-config-checksums'
      ];
    await waitFor(
      'checksums recorded',
      async () => (await applied(resources.deployments, 'app')) && (await applied(resources.statefulSets, 'db')),
      { timeoutMs: 30_000 },
    );
    const dbPod = await waitFor(
      'the db pod Ready',
      async () => {
        const pod = await kube.get<Pod>(resources.pods, { namespace, name: 'db-0' }).catch(() => undefined);
        return pod && isReady(pod) ? pod : undefined;
      },
      { timeoutMs: 30_000 },
    );
    await kube.patch(resources.secrets, { namespace, name: 'app-secret' }, 'merge', {
      data: { password: Buffer.from('two').toString('base64') },
    });
    await waitFor(
      'the Deployment restarted',
      async () =>
        (
          await kube.get<
            KubeObject & { spec?: { template?: { metadata?: { annotations?: Record<string, string> } } } }
          >(resources.deployments, { namespace, name: 'app' })
        ).spec?.template?.metadata?.annotations?.['com.xing.deployment-restart.timestamp'],
      { timeoutMs: 30_000 },
    );
    await waitFor(
      'the db pod evicted and replaced',
      async () => {
        const pod = await kube.get<Pod>(resources.pods, { namespace, name: 'db-0' }).catch(() => undefined);
        return pod !== undefined && pod.metadata?.uid !== dbPod.metadata?.uid;
      },
      { timeoutMs: 60_000 },
    );

    assert.deepEqual(await refusedCalls(op), [], `no API call refused; the log says:\n${refusalsLogged(op)}`);
    assert.doesNotMatch(op.logs, /forbidden/i);

    // What it must not be able to do.
    const other = 'default';
    assert.equal(await canI(kubeconfig, 'list', 'secrets', '-n', other), false, 'no Secret list outside its namespace');
    assert.equal(await canI(kubeconfig, 'get', 'secrets', '-n', 'kube-system'), false);
    assert.equal(await canI(kubeconfig, 'delete', 'pods', '-n', other), false, 'no pod deletes outside its namespace');
    assert.equal(await canI(kubeconfig, 'patch', 'namespaces'), false, 'no Namespace patch');
    assert.equal(await canI(kubeconfig, 'list', 'nodes'), false, 'nodes: get only');
    assert.equal(await canI(kubeconfig, 'create', 'clusterrolebindings'), false);
    assert.equal(
      await canI(kubeconfig, 'update', 'secrets/someone-elses', '-n', namespace),
      false,
      'updates only its own certificate Secret',
    );
    assert.equal(await canI(kubeconfig, 'delete', 'validatingwebhookconfigurations'), false);
    // Narrowed: ConfigMap and webhook-configuration writes by name only, no Lease delete.
    for (const verb of ['update', 'patch', 'delete'])
      assert.equal(
        await canI(kubeconfig, verb, 'configmaps/someone-elses', '-n', namespace),
        false,
        `no ${verb} of other ConfigMaps`,
      );
    assert.equal(await canI(kubeconfig, 'delete', 'leases', '-n', namespace), false, 'no Lease delete');
    assert.equal(
      await canI(kubeconfig, 'patch', 'validatingwebhookconfigurations/someone-elses'),
      false,
      'patches only the shipped webhook configurations',
    );
    assert.equal(await canI(kubeconfig, 'patch', 'mutatingwebhookconfigurations/someone-elses'), false);
    // And the ones it needs, as a cross-check of the method.
    assert.equal(await canI(kubeconfig, 'delete', 'pods', '-n', namespace), true);
    assert.equal(await canI(kubeconfig, 'patch', 'configmaps/stateward-rollout-status', '-n', namespace), true);
    assert.equal(
      await canI(kubeconfig, 'get', 'configmaps/stateward-rollout-status', '-n', namespace),
      false,
      'the status ConfigMap is written without being read',
    );
    assert.equal(await canI(kubeconfig, 'patch', 'configmaps/stateward-reschedule-tracking', '-n', namespace), true);
    for (const [type, name] of webhookNames)
      assert.equal(await canI(kubeconfig, 'patch', `${type.resource}/${name}`), true, `patch ${name}`);

    // What RBAC cannot name, the write policy refuses: the ServiceAccount may
    // create ConfigMaps, Secrets and Leases, and update every Lease of the
    // namespace, but only under Stateward's names (dry runs: nothing is written).
    const sa = asServiceAccount(kubeconfig);
    const named = (name: string) => ({ metadata: { name, namespace } });
    const kinds = [resources.configMaps, resources.secrets, resources.leases];
    for (const type of kinds)
      assert.match(
        (await refusal(sa.create(type, named('someone-elses'), { dryRun: true }))) ?? 'let through',
        byPolicy(type.kind),
        `create ${type.kind} someone-elses`,
      );
    await kube.create<Lease>(resources.leases, { ...named('someone-elses'), spec: {} });
    assert.match(
      (await refusal(takeOver(sa, { namespace, name: 'someone-elses' }))) ?? 'let through',
      byPolicy('Lease'),
      'no update of a Lease not its own',
    );
    // Its own names get through, new ones too: a flag renamed within the prefix needs no change to the policy.
    for (const [type, name] of [
      [resources.configMaps, 'stateward-renamed'],
      [resources.secrets, 'stateward-renamed'],
      [resources.leases, 'stateward-renamed-leader'],
      [resources.leases, 'stateward-zpdb-other-0123abcd'],
    ] as const)
      assert.equal(
        await refusal(sa.create(type, named(name), { dryRun: true })),
        undefined,
        `create ${type.kind} ${name}`,
      );
  });

  it("a Role without ZoneAwarePodDisruptionBudgets (rollout-operator's older one): once granted, the budget judges the very next eviction", async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await createGroup(kube, namespace, { all: { replicas: 2 } });
    await waitGroupSettled(kube, namespace, 60_000);
    const grantsZpdbs = (rule: PolicyRule) => rule.resources.includes(zpdbResource.resource);
    const withoutZpdbs = (docs: Manifest[]) =>
      docs.map((d) => {
        if (d.kind !== 'Role') return d;
        const role = structuredClone(d) as Manifest & { rules: PolicyRule[] };
        role.rules = role.rules.filter((rule) => !grantsZpdbs(rule));
        return role;
      });
    const { kubeconfig } = await install(t, 'all', namespace, ['-reconcile.interval=1s'], withoutZpdbs);
    const zpdbList = ['list', `${zpdbResource.resource}.${zpdbResource.group}`, '-n', namespace];
    assert.equal(await canI(kubeconfig, ...zpdbList), false);
    // The overlay installs the CRD; the budget may take a moment to be accepted after it.
    await createGroupBudget(kube, namespace);

    // Not permitted: no budget is known, and two zones can be disrupted at once.
    assert.equal((await evict(kube, namespace, 'ingester-zone-b-0')).code, 201);
    assert.equal((await evict(kube, namespace, 'ingester-zone-c-0')).code, 201, 'no budget while not permitted');
    await waitGroupSettled(kube, namespace, 60_000);

    // Granted (the shipped Role applied over the narrower one). The informer's own next look is
    // minutes away: the eviction itself looks again, so the budget counts at once.
    const shipped = (await renderOverlay('all', namespace)).filter(
      (d) => d.kind === 'Role' && (d as Manifest & { rules: PolicyRule[] }).rules.some(grantsZpdbs),
    );
    assert.equal(shipped.length, 1);
    await kubectlApply(cluster.kubeconfigPath, shipped);
    await waitFor('ZPDBs listable', () => canI(kubeconfig, ...zpdbList), { timeoutMs: 30_000, intervalMs: 100 });
    // As kubectl drain: a 429 while the operator's caches still show a replaced pod not Ready is retried.
    await evictOnceAllowed(kube, namespace, 'ingester-zone-b-1', 'zone b allowed under the budget');
    const second = await evict(kube, namespace, 'ingester-zone-c-1');
    if (second.code !== 429) {
      // kwok can replace zone b's pod and make it Ready within a second: then the second zone is rightly
      // allowed. Allowed while zone b was still short a pod would be the budget not judging.
      const zoneB = (await kube.list<Pod>(resources.pods, { namespace })).items.filter((p) =>
        p.metadata?.name?.startsWith('ingester-zone-b-'),
      );
      assert.equal(second.code, 201, second.message);
      assert.ok(
        zoneB.length === 2 && zoneB.every((p) => isReady(p) && !p.metadata?.deletionTimestamp),
        `a second zone allowed while zone b was not whole: ${zoneB.map((p) => p.metadata?.name).join(', ')}`,
      );
    }
  });

  it('cluster-wide: rolls a group in another namespace with ClusterRoles, still no Secret access', async (t) => {
    const namespace = await cluster.namespace(t);
    const workloads = await cluster.namespace(t);
    const kube = testClient(cluster);
    await createGroup(kube, workloads, { all: { replicas: 1 } });
    await waitGroupSettled(kube, workloads, 60_000);
    const { op, kubeconfig } = await install(t, 'cluster-wide', namespace, ['-reconcile.interval=1s']);
    // A budget, so the rolling deletes commit to its ledger Lease in the workloads' namespace.
    await createGroupBudget(kube, workloads);
    for (const zone of ['a', 'b', 'c']) await changeTemplate(kube, workloads, zone, '2');
    await waitRevisionsPending(kube, workloads);
    await waitRolledOut(kube, workloads);
    // Watching every namespace, it also sees other tests' namespaces being
    // deleted, where the apiserver refuses new objects with a 403 that is not
    // about RBAC: every refusal must be logged, and none for another reason.
    const refusals = (await refusedCalls(op)).length;
    const logged = refusalsLogged(op)
      .split('\n')
      .filter((l) => l !== '');
    assert.ok(refusals === 0 || logged.length > 0, 'every refusal logged');
    // (The log shortens long errors: the admission message may be cut before "because it is being terminated".)
    assert.deepEqual(
      logged.filter((l) => !/because it is being terminated|unable to create new content in namespace/.test(l)),
      [],
      'no refusal by RBAC',
    );
    assert.equal(await canI(kubeconfig, 'delete', 'pods', '-n', workloads), true);
    assert.equal(await canI(kubeconfig, 'list', 'secrets', '-n', workloads), false, 'rollouts need no Secrets');
    assert.equal(await canI(kubeconfig, 'patch', 'namespaces'), false);
    // Every namespace, kube-system's too: only its own ConfigMap, and no Lease delete.
    for (const verb of ['update', 'patch', 'delete'])
      assert.equal(
        await canI(kubeconfig, verb, 'configmaps/kube-proxy', '-n', 'kube-system'),
        false,
        `no ${verb} of kube-system's ConfigMaps`,
      );
    assert.equal(await canI(kubeconfig, 'delete', 'leases', '-n', 'kube-system'), false);
    assert.equal(await canI(kubeconfig, 'patch', 'configmaps/stateward-rollout-status', '-n', workloads), true);

    // Its writes in a namespace it does not run in went through the write policy.
    const ledgers = (await kube.list<Lease>(resources.leases, { namespace: workloads })).items.filter((l) =>
      l.metadata?.name?.startsWith('stateward-zpdb-'),
    );
    assert.equal(ledgers.length, 1, "the budget's ledger written where the budget is");
    await kube.get<ConfigMap>(resources.configMaps, { namespace: workloads, name: 'stateward-rollout-status' });

    // RBAC lets it update every Lease in the cluster and create ConfigMaps in
    // every namespace; the write policy holds it to Stateward's names. Dry
    // runs: a policy that failed to refuse would not touch kube-system.
    const sa = asServiceAccount(kubeconfig);
    const systemLease = await waitFor(
      "a Lease of kube-system's (the apiserver's identity, a leader election's)",
      async () => (await kube.list<Lease>(resources.leases, { namespace: 'kube-system' })).items[0],
      { timeoutMs: 30_000 },
    );
    const where = { namespace: 'kube-system', name: systemLease.metadata!.name! };
    assert.equal(
      await canI(kubeconfig, 'update', `leases.coordination.k8s.io/${where.name}`, '-n', 'kube-system'),
      true,
      'RBAC lets it',
    );
    assert.match(
      (await refusal(takeOver(sa, where))) ?? 'let through',
      byPolicy('Lease'),
      `no update of kube-system's Lease ${where.name}`,
    );
    const elsewhere = (ns: string, name: string) => ({ metadata: { name, namespace: ns } });
    for (const [type, ns, name, why] of [
      [resources.configMaps, 'kube-system', 'someone-elses', 'no ConfigMap created in kube-system but its own'],
      [resources.leases, workloads, 'someone-elses', 'no Lease created but its own'],
      [resources.leases, workloads, 'stateward-leader', 'a leader Lease in its own namespace only'],
    ] as const)
      assert.match(
        (await refusal(sa.create(type, elsewhere(ns, name), { dryRun: true }))) ?? 'let through',
        byPolicy(type.kind),
        why,
      );
    // The policy judges no one else: the cluster's administrator may still write there.
    assert.ok(await kube.patch(resources.leases, where, 'merge', { metadata: {} }, { dryRun: true }));
  });

  it("listed namespaces (Reloader's --namespaces): a Role in each of two watched namespaces and no ClusterRole; restarts and a rollout there, nothing elsewhere, no call refused", async (t) => {
    const namespace = await cluster.namespace(t, 'listed-operator');
    const watched = [await cluster.namespace(t, 'listed-a'), await cluster.namespace(t, 'listed-b')] as const;
    const unwatched = await cluster.namespace(t, 'listed-unwatched');
    const kube = testClient(cluster);
    const rendered = await chart(namespace, [
      'configRestarts.enabled=true',
      'configRestarts.gracePeriodSeconds=1',
      'leaderElection.enabled=true',
      `watchNamespaces={${watched.join(',')}}`,
    ]);
    assert.deepEqual(
      rendered.filter((d) => d.kind === 'ClusterRole' || d.kind === 'ClusterRoleBinding').map((d) => d.kind),
      [],
      'no ClusterRole',
    );
    assert.deepEqual(
      rendered
        .filter((d) => d.kind === 'Role')
        .map((d) => d.metadata?.namespace)
        .sort(),
      [namespace, ...watched].sort(),
      "a Role in each watched namespace and the operator's own",
    );

    // A rollout group in the first watched namespace; an app opted in with Reloader's annotation everywhere.
    await createGroup(kube, watched[0], { all: { replicas: 1 } });
    await waitGroupSettled(kube, watched[0], 60_000);
    const everywhere = [...watched, unwatched];
    for (const ns of everywhere) {
      await kube.create<ConfigMap>(resources.configMaps, {
        metadata: { name: 'app-config', namespace: ns },
        data: { v: '1' },
      });
      await kube.create(resources.deployments, {
        metadata: { name: 'app', namespace: ns, annotations: { 'reloader.stakater.com/auto': 'true' } },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'app' } },
          template: {
            metadata: { labels: { app: 'app' } },
            spec: {
              containers: [
                { name: 'app', image: 'example.invalid/app:1', envFrom: [{ configMapRef: { name: 'app-config' } }] },
              ],
            },
          },
        },
      } as KubeObject);
    }
    const { op, kubeconfig } = await installRendered(
      t,
      rendered,
      namespace,
      [...FAST_ELECTION, '-reconcile.interval=1s'],
      watched[0],
    );
    await waitFor('the leader Lease held', async () => (await op.metric('stateward_leader_is_leader')) === 1, {
      timeoutMs: 30_000,
    });
    type Workload = KubeObject & { spec?: { template?: { metadata?: { annotations?: Record<string, string> } } } };
    const app = (ns: string) => kube.get<Workload>(resources.deployments, { namespace: ns, name: 'app' });
    const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
    const TRIGGER = 'com.xing.deployment-restart.timestamp';
    for (const ns of watched)
      await waitFor(`checksums recorded in ${ns}`, async () => (await app(ns)).metadata?.annotations?.[APPLIED], {
        timeoutMs: 30_000,
      });
    // The unwatched namespace's config changes first: by the time both watched apps restarted, it had its chance.
    for (const ns of everywhere)
      await kube.patch(resources.configMaps, { namespace: ns, name: 'app-config' }, 'merge', { data: { v: '2' } });
    for (const ns of watched)
      await waitFor(
        `the app in ${ns} restarted`,
        async () => (await app(ns)).spec?.template?.metadata?.annotations?.[TRIGGER],
        { timeoutMs: 30_000 },
      );
    const untouched = await app(unwatched);
    assert.equal(untouched.metadata?.annotations?.[APPLIED], undefined, 'nothing recorded in an unwatched namespace');
    assert.equal(untouched.spec?.template?.metadata?.annotations?.[TRIGGER], undefined, 'no restart there');

    // Rollouts, under the Role alone.
    for (const zone of ['a', 'b', 'c']) await changeTemplate(kube, watched[0], zone, '2');
    await waitRevisionsPending(kube, watched[0]);
    await waitRolledOut(kube, watched[0]);

    assert.deepEqual(await refusedCalls(op), [], `no API call refused; the log says:\n${refusalsLogged(op)}`);
    assert.doesNotMatch(op.logs, /forbidden/i);
    // What the Roles give, and nothing beyond them.
    for (const ns of watched) assert.equal(await canI(kubeconfig, 'list', 'configmaps', '-n', ns), true, ns);
    assert.equal(
      await canI(kubeconfig, 'list', 'configmaps', '-n', unwatched),
      false,
      'nothing in an unwatched namespace',
    );
    assert.equal(await canI(kubeconfig, 'list', 'pods', '--all-namespaces'), false, 'no cluster-wide list');
    assert.equal(
      await canI(kubeconfig, 'list', 'configmaps', '-n', namespace),
      false,
      'its own namespace is not watched',
    );
    assert.equal(
      await canI(kubeconfig, 'update', 'leases.coordination.k8s.io/stateward-leader', '-n', namespace),
      true,
      'its leader Lease, by the own-namespace Role',
    );
  });
});
