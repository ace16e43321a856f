// Two installs splitting one cluster by namespace labels
// (docs/multiple-installs.md): each watches the whole cluster, acts only in
// the namespaces its selector matches, holds its own leader Lease, and a
// namespace relabelled from one install's selector to the other's changes
// hands: nothing restarts for joining, and a change made between owners is
// not lost.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import { resources, type ConfigMap, type KubeObject, type Lease } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { FAST_ELECTION, OperatorProcess } from '../support/operator-process.ts';
import { testClient } from '../support/rollout-group.ts';

const cluster = testCluster();
const LABEL = 'stateward.dev/install';
const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
const TRIGGER = 'com.xing.deployment-restart.timestamp';
const RESTARTS = 'deployment_restart_controller_deployment_restarts_total';

type Workload = KubeObject & { spec?: { template?: { metadata?: { annotations?: Record<string, string> } } } };

/** The sum of a counter's series (0 when absent), read from the operator's /metrics. */
async function counter(op: OperatorProcess, name: string): Promise<number> {
  const body = (await op.get('/metrics'))?.body ?? '';
  return body
    .split('\n')
    .filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

/** Watch events of an install's namespaces cache (listed with its selector: ADDED joins, DELETED leaves). */
async function namespaceEvents(op: OperatorProcess, type: 'ADDED' | 'DELETED'): Promise<number> {
  const body = (await op.get('/metrics'))?.body ?? '';
  return body
    .split('\n')
    .filter((l) => l.startsWith('stateward_informer_events_total{') && l.includes('resource="v1/namespaces"'))
    .filter((l) => l.includes(`type="${type}"`))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

async function startInstall(t: TestContext, namespace: string, selectorFlag: string): Promise<OperatorProcess> {
  const op = await OperatorProcess.start(cluster, namespace, [
    ...FAST_ELECTION,
    '-kubernetes.watch-namespaces=*',
    '-config-restarts.enabled',
    '-restart-grace-period=1',
    selectorFlag,
  ]);
  t.after(() => op.stop());
  await op.waitReady();
  await waitFor(`${namespace} leading`, async () => (await op.metric('stateward_leader_is_leader')) === 1, {
    timeoutMs: 30_000,
  });
  return op;
}

describe('several installs splitting one cluster by namespace labels', { timeout: 300_000 }, () => {
  it('each acts only in the namespaces its selector matches, with its own Lease; a relabelled namespace changes hands', async (t) => {
    const kube = testClient(cluster);
    const tag = randomBytes(3).toString('hex');
    const [one, two] = [`${tag}-one`, `${tag}-two`];
    const label = async (ns: string, value: string | null) =>
      kube.patch(resources.namespaces, { name: ns }, 'merge', { metadata: { labels: { [LABEL]: value } } });
    const teamA = await cluster.namespace(t, 'split-a');
    const teamB = await cluster.namespace(t, 'split-b');
    const nobody = await cluster.namespace(t, 'split-nobody');
    await label(teamA, one);
    await label(teamB, two);
    for (const ns of [teamA, teamB, nobody]) {
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
    // Stateward's spelling for one; Reloader's, in its legacy form, for the other.
    const opOneNamespace = await cluster.namespace(t, 'split-op-one');
    const opOne = await startInstall(t, opOneNamespace, `-kubernetes.namespace-selector=${LABEL}=${one}`);
    const opTwoNamespace = await cluster.namespace(t, 'split-op-two');
    const opTwo = await startInstall(t, opTwoNamespace, `--namespace-selector=${LABEL}:${two}`);

    const app = (ns: string) => kube.get<Workload>(resources.deployments, { namespace: ns, name: 'app' });
    const change = (ns: string, v: string) =>
      kube.patch(resources.configMaps, { namespace: ns, name: 'app-config' }, 'merge', { data: { v } });
    const restarted = async (ns: string) =>
      (await app(ns)).spec?.template?.metadata?.annotations?.[TRIGGER] !== undefined;
    for (const ns of [teamA, teamB])
      await waitFor(`checksums recorded in ${ns}`, async () => (await app(ns)).metadata?.annotations?.[APPLIED], {
        timeoutMs: 30_000,
      });

    // A change in each namespace: each install restarts its own app, once; the unlabelled namespace is nobody's.
    for (const ns of [nobody, teamA, teamB]) await change(ns, '2');
    await waitFor(
      'one restart by each install',
      async () => (await counter(opOne, RESTARTS)) === 1 && (await counter(opTwo, RESTARTS)) === 1,
      {
        timeoutMs: 30_000,
      },
    );
    assert.ok(await restarted(teamA));
    assert.ok(await restarted(teamB));
    const untouched = await app(nobody);
    assert.equal(untouched.metadata?.annotations?.[APPLIED], undefined, 'nothing recorded where no selector matches');
    assert.equal(untouched.spec?.template?.metadata?.annotations?.[TRIGGER], undefined);

    // Each its own leader Lease, in its own namespace.
    const leader = async (ns: string) =>
      (await kube.get<Lease>(resources.leases, { namespace: ns, name: 'stateward-leader' })).spec?.holderIdentity ?? '';
    assert.notEqual(await leader(opOneNamespace), '');
    assert.notEqual(await leader(opTwoNamespace), '');
    assert.notEqual(await leader(opOneNamespace), await leader(opTwoNamespace));

    // The unlabelled namespace joins install two: its objects are delivered as if listed (recorded, not restarted),
    // and its next change restarts through install two only.
    await label(nobody, two);
    await waitFor(
      'install two records the newly selected namespace',
      async () => (await app(nobody)).metadata?.annotations?.[APPLIED],
      {
        timeoutMs: 30_000,
      },
    );
    assert.equal(
      (await app(nobody)).spec?.template?.metadata?.annotations?.[TRIGGER],
      undefined,
      'joining restarts nothing',
    );
    await change(nobody, '3');
    await waitFor('install two restarts it', async () => (await counter(opTwo, RESTARTS)) === 2, { timeoutMs: 30_000 });

    // Team A leaves install one (its namespaces watch, listed with its selector, says so), its config changes
    // while nobody owns it, and it joins install two: two restarts it, as its record is behind the config.
    const left = await namespaceEvents(opOne, 'DELETED');
    await label(teamA, null);
    await waitFor('install one lets team A go', async () => (await namespaceEvents(opOne, 'DELETED')) > left, {
      timeoutMs: 30_000,
    });
    await change(teamA, '3');
    await label(teamA, two);
    await waitFor(
      'install two restarts team A for the change made between owners',
      async () => (await counter(opTwo, RESTARTS)) === 3,
      {
        timeoutMs: 30_000,
      },
    );
    assert.equal(await counter(opOne, RESTARTS), 1, 'install one restarted only its first app, once');
    assert.doesNotMatch(opOne.logs + opTwo.logs, /level=error/);
  });
});
