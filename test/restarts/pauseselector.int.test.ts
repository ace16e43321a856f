// Beyond Reloader (issue 37 item 7) on the real control plane: configs
// selected by label restart the workload that names the selector, and a
// pause (on the workload, a config, or the namespace) holds restarts
// without losing them: one restart when it is lifted.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type ConfigMap, type Event } from '../../src/runtime/kube/types.ts';
import {
  CONFIG_RESTART_CONFIGMAP_SELECTOR_ANNOTATION as SELECTOR,
  CONFIG_RESTART_PAUSED_ANNOTATION as PAUSED,
} from '../../src/vocabulary/keys.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import {
  APPLIED,
  deployment,
  metricOf,
  settled,
  startConfigRestarts,
  TRIGGER,
  type Deployment,
  VERSIONS,
  WAITING,
} from '../support/config-restarts.ts';
import { testClient } from '../support/rollout-group.ts';

const cluster = testCluster();
const RESTARTS = 'deployment_restart_controller_deployment_restarts_total';

/** A Deployment that uses `config` through envFrom, opted in with xing's annotation. */
function using(namespace: string, name: string, config: string, annotations: Record<string, string> = {}) {
  return deployment(
    namespace,
    name,
    { 'com.xing.deployment-restart': 'enabled', ...annotations },
    { containers: [{ name: 'app', image: 'example.invalid/app:1', envFrom: [{ configMapRef: { name: config } }] }] },
  );
}

const start = (t: TestContext, namespace: string, flags: string[] = []) =>
  startConfigRestarts(t, cluster, namespace, flags);

const metric = metricOf;

const get = (kube: KubeClient, namespace: string, name: string) =>
  kube.get<Deployment>(resources.deployments, { namespace, name });
const trigger = async (kube: KubeClient, namespace: string, name: string) =>
  (await get(kube, namespace, name)).spec?.template?.metadata?.annotations?.[TRIGGER];

async function recorded(kube: KubeClient, namespace: string, name: string, key: string): Promise<void> {
  await waitFor(
    `${key} recorded on ${name}`,
    async () => (await get(kube, namespace, name)).metadata?.annotations?.[APPLIED]?.includes(`"${key}"`),
    { timeoutMs: 20_000 },
  );
}

async function event(kube: KubeClient, namespace: string, reason: string, note: RegExp): Promise<Event> {
  return waitFor(
    `a ${reason} Event matching ${note}`,
    async () =>
      (await kube.list<Event>(resources.events, { namespace })).items.find(
        (e) => e.reason === reason && note.test(e.note ?? ''),
      ),
    { timeoutMs: 20_000 },
  );
}

const setData = (kube: KubeClient, namespace: string, name: string, data: Record<string, string>) =>
  kube.patch(resources.configMaps, { namespace, name }, 'merge', { data });

describe('configs selected by label', () => {
  it('a matching ConfigMap the pods never reference restarts the workload once per change, and one created restarts it', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const dashboard = (name: string, labels: Record<string, string>) =>
      kube.create<ConfigMap>(resources.configMaps, {
        metadata: { name, namespace, labels },
        data: { json: '{}' },
      });
    await dashboard('dash-a', { dashboards: 'grafana' });
    await dashboard('unrelated', { dashboards: 'other' });
    await kube.create(resources.deployments, deployment(namespace, 'grafana', { [SELECTOR]: 'dashboards=grafana' }));
    const op = await start(t, namespace);
    await recorded(kube, namespace, 'grafana', `configmap/${namespace}/dash-a`);
    await recorded(kube, namespace, 'grafana', `configmap-selector/${namespace}/dashboards=grafana`);
    assert.equal(await trigger(kube, namespace, 'grafana'), undefined, 'opting in restarts nothing');

    let versions = await metric(op, VERSIONS);
    await setData(kube, namespace, 'dash-a', { json: '{"v":2}' });
    await waitFor('one restart', async () => (await metric(op, RESTARTS)) >= 1, { timeoutMs: 20_000 });
    await settled(op, versions);
    assert.equal(await metric(op, RESTARTS), 1);
    assert.ok(await trigger(kube, namespace, 'grafana'), 'the template trigger is written');
    await event(kube, namespace, 'ConfigChanged', new RegExp(`configmap/${namespace}/dash-a changed`));

    // A config the selector does not match restarts nothing.
    versions = await metric(op, VERSIONS);
    await setData(kube, namespace, 'unrelated', { json: '{"v":2}' });
    await settled(op, versions);
    assert.equal(await metric(op, RESTARTS), 1, 'no restart for a config the selector does not match');

    // A matching config created later: the set the pods load changed.
    versions = await metric(op, VERSIONS);
    await dashboard('dash-b', { dashboards: 'grafana' });
    await waitFor('a restart for the new match', async () => (await metric(op, RESTARTS)) >= 2, {
      timeoutMs: 20_000,
    });
    await settled(op, versions);
    assert.equal(await metric(op, RESTARTS), 2);
    await event(kube, namespace, 'ConfigChanged', new RegExp(`configmap/${namespace}/dash-b changed`));
    await recorded(kube, namespace, 'grafana', `configmap/${namespace}/dash-b`);
  });

  it('a selector that does not parse warns with an Event and restarts nothing', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create(resources.deployments, deployment(namespace, 'bad', { [SELECTOR]: 'a b' }));
    const op = await start(t, namespace);
    await event(
      kube,
      namespace,
      'InvalidAnnotation',
      /config-restart-configmap-selector is not a valid label selector/,
    );
    assert.equal(await metric(op, RESTARTS), 0);
    assert.notEqual(await op.metric('stateward_leader_is_leader'), undefined, 'still running and serving');
  });
});

describe('pausing restarts', () => {
  it('a paused workload is not restarted while paused, and restarts once when the pause is lifted', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'app-config', namespace },
      data: { level: 'info' },
    });
    await kube.create(resources.deployments, using(namespace, 'app', 'app-config', { [PAUSED]: 'true' }));
    const op = await start(t, namespace);
    // Recording what the pods run is not a restart: it goes on while paused.
    await recorded(kube, namespace, 'app', `configmap/${namespace}/app-config`);
    await event(kube, namespace, 'ConfigRestartPaused', /config restarts paused by workload/);
    const before = (await get(kube, namespace, 'app')).metadata?.annotations?.[APPLIED];

    const versions = await metric(op, VERSIONS);
    await setData(kube, namespace, 'app-config', { level: 'debug' });
    await setData(kube, namespace, 'app-config', { level: 'warn' });
    await settled(op, versions + 1);
    await event(
      kube,
      namespace,
      'ConfigRestartPaused',
      new RegExp(`held until the pause is lifted: configmap/${namespace}/app-config`),
    );
    assert.equal(await metric(op, RESTARTS), 0, 'no restart while paused');
    assert.equal(await trigger(kube, namespace, 'app'), undefined);
    assert.equal(
      (await get(kube, namespace, 'app')).metadata?.annotations?.[APPLIED],
      before,
      'the record is not advanced',
    );
    assert.equal(await metric(op, 'stateward_config_restart_paused_workloads'), 1);
    assert.equal(await metric(op, 'stateward_config_restart_held_workloads'), 1);

    await kube.patch(resources.deployments, { namespace, name: 'app' }, 'merge', {
      metadata: { annotations: { [PAUSED]: null } },
    });
    await waitFor('one restart after the pause', async () => (await metric(op, RESTARTS)) >= 1, { timeoutMs: 20_000 });
    await waitFor('nothing waiting', async () => (await metric(op, WAITING)) === 0, { timeoutMs: 20_000 });
    assert.ok(await trigger(kube, namespace, 'app'));
    assert.notEqual((await get(kube, namespace, 'app')).metadata?.annotations?.[APPLIED], before);
    await waitFor(
      'the gauges back at 0',
      async () => (await metric(op, 'stateward_config_restart_paused_workloads')) === 0,
      {
        timeoutMs: 10_000,
      },
    );
    // Exactly one: a further look (a label on the config moves its version, not its content) decides nothing.
    const later = await metric(op, VERSIONS);
    await kube.patch(resources.configMaps, { namespace, name: 'app-config' }, 'merge', {
      metadata: { labels: { look: 'again' } },
    });
    await settled(op, later);
    assert.equal(await metric(op, RESTARTS), 1);
  });

  it('a paused ConfigMap restarts none of the workloads using it while paused; lifting it restarts them once', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'shared', namespace, annotations: { [PAUSED]: 'true' } },
      data: { level: 'info' },
    });
    await kube.create(resources.deployments, using(namespace, 'one', 'shared'));
    await kube.create(resources.deployments, using(namespace, 'two', 'shared'));
    const op = await start(t, namespace);
    await recorded(kube, namespace, 'one', `configmap/${namespace}/shared`);
    await recorded(kube, namespace, 'two', `configmap/${namespace}/shared`);

    const versions = await metric(op, VERSIONS);
    await setData(kube, namespace, 'shared', { level: 'debug' });
    await settled(op, versions);
    assert.equal(await metric(op, RESTARTS), 0, 'no restart while the config is paused');
    assert.equal(await trigger(kube, namespace, 'one'), undefined);
    assert.equal(await trigger(kube, namespace, 'two'), undefined);
    assert.equal(await metric(op, 'stateward_config_restart_held_workloads'), 2);

    await kube.patch(resources.configMaps, { namespace, name: 'shared' }, 'merge', {
      metadata: { annotations: { [PAUSED]: 'false' } },
    });
    await waitFor('both restarted', async () => (await metric(op, RESTARTS)) >= 2, { timeoutMs: 20_000 });
    await waitFor('nothing waiting', async () => (await metric(op, WAITING)) === 0, { timeoutMs: 20_000 });
    assert.equal(await metric(op, RESTARTS), 2, 'once each');
    assert.ok(await trigger(kube, namespace, 'one'));
    assert.ok(await trigger(kube, namespace, 'two'));
  });

  it('cluster-wide, a paused Namespace holds the restarts of its workloads until the pause is lifted', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube.patch(resources.namespaces, { name: namespace }, 'merge', {
      metadata: { annotations: { [PAUSED]: 'true' } },
    });
    await kube.create<ConfigMap>(resources.configMaps, {
      metadata: { name: 'app-config', namespace },
      data: { level: 'info' },
    });
    await kube.create(resources.deployments, using(namespace, 'app', 'app-config'));
    const op = await start(t, namespace, ['-kubernetes.watch-namespaces=*']);
    await recorded(kube, namespace, 'app', `configmap/${namespace}/app-config`);
    await event(kube, namespace, 'ConfigRestartPaused', new RegExp(`paused by namespace ${namespace}`));

    const restartsBefore = await metric(op, RESTARTS);
    const versions = await metric(op, VERSIONS);
    await setData(kube, namespace, 'app-config', { level: 'debug' });
    await settled(op, versions);
    assert.equal(await metric(op, RESTARTS), restartsBefore, 'no restart while the namespace is paused');
    assert.equal(await trigger(kube, namespace, 'app'), undefined);

    await kube.patch(resources.namespaces, { name: namespace }, 'merge', {
      metadata: { annotations: { [PAUSED]: null } },
    });
    await waitFor('the restart after the pause', async () => (await trigger(kube, namespace, 'app')) !== undefined, {
      timeoutMs: 20_000,
    });
    await waitFor('nothing waiting', async () => (await metric(op, WAITING)) === 0, { timeoutMs: 20_000 });
    assert.equal(await metric(op, RESTARTS), restartsBefore + 1);
  });
});
