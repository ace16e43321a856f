// Config-change restarts of the kinds beyond Deployments, StatefulSets and
// DaemonSets, on the real control plane: a CronJob starts exactly one Job
// per change (also across an operator killed between the create and the
// record), a Job is re-created carrying its record (also when the operator
// died mid-way), an Argo Rollout takes a template trigger or spec.restartAt
// (our own minimal CRD: no Argo controller, the write is what is proved),
// and a Deployment with a pause-period is paused by the restart and resumed
// after the period, by a new operator process when the first was killed.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { isAlreadyExists } from '../../src/runtime/kube/errors.ts';
import {
  resources,
  type ConfigMap,
  type Event,
  type KubeObject,
  type ResourceType,
  type Secret,
} from '../../src/runtime/kube/types.ts';
import { formatAppliedChecksums } from '../../src/restarts/checksums.ts';
import { configChecksum } from '../../src/restarts/hash.ts';
import {
  cronJobRestartJobName,
  INSTANTIATE_ANNOTATION,
  jobFromCronJob,
  LAST_RESTART_JOB_ANNOTATION,
  RECREATE_FINALIZER,
  RECREATE_INTENT_ANNOTATION,
  type CronJob,
  type Job,
} from '../../src/restarts/jobrestarts.ts';
import { PAUSE_PERIOD_ANNOTATION, PAUSED_AT_ANNOTATION } from '../../src/restarts/pauseperiod.ts';
import { ARGO_ROLLOUTS, CRONJOBS, JOBS } from '../../src/restarts/workloadkinds.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { testClient } from '../support/rollout-group.ts';

const cluster = testCluster();
const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
const TRIGGER = 'com.xing.deployment-restart.timestamp';
const AUTO = { 'reloader.stakater.com/auto': 'true' };
const FLAGS = ['-config-restarts.enabled', '-restart-grace-period=0'];

const CRDS: ResourceType = {
  group: 'apiextensions.k8s.io',
  version: 'v1',
  resource: 'customresourcedefinitions',
  kind: 'CustomResourceDefinition',
  namespaced: false,
};

type Templated = KubeObject & {
  spec?: {
    paused?: boolean;
    restartAt?: string;
    template?: { metadata?: { annotations?: Record<string, string> } };
  };
};

async function start(t: TestContext, namespace: string): Promise<OperatorProcess> {
  const op = await OperatorProcess.start(cluster, namespace, FLAGS);
  t.after(() => op.stop());
  await op.waitReady();
  return op;
}

/** A pod template reading every key of ConfigMap `config` (and what a Job's pods need). */
function podTemplate(name: string, config: string, restartPolicy?: string) {
  return {
    metadata: { labels: { app: name } },
    spec: {
      ...(restartPolicy ? { restartPolicy } : {}),
      containers: [{ name: 'app', image: 'example.invalid/app:1', envFrom: [{ configMapRef: { name: config } }] }],
    },
  };
}

async function config(kube: KubeClient, namespace: string, name: string): Promise<void> {
  await kube.create<ConfigMap>(resources.configMaps, { metadata: { name, namespace }, data: { level: 'info' } });
}

const change = (kube: KubeClient, namespace: string, name: string, level: string) =>
  kube.patch(resources.configMaps, { namespace, name }, 'merge', { data: { level } });

/** The object once `test` holds for it. */
function until<T extends KubeObject>(
  kube: KubeClient,
  type: ResourceType,
  namespace: string,
  name: string,
  what: string,
  test: (o: T) => boolean,
  timeoutMs = 20_000,
): Promise<T> {
  return waitFor(
    what,
    async () => {
      const o = await kube.get<T>(type, { namespace, name }).catch(() => undefined);
      return o && test(o) ? o : undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

const jobsOf = async (kube: KubeClient, namespace: string, cronJob: string) =>
  (await kube.list<Job>(JOBS, { namespace })).items.filter((j) =>
    j.metadata?.ownerReferences?.some((o) => o.kind === 'CronJob' && o.name === cronJob),
  );

describe('config restarts of CronJobs, Jobs, Argo Rollouts, and pause-period', () => {
  it('a CronJob starts exactly one Job per change, also when the operator died between the create and the record', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await config(kube, namespace, 'batch-config');
    await kube.create<CronJob>(CRONJOBS, {
      metadata: { name: 'nightly', namespace, annotations: AUTO },
      spec: {
        schedule: '0 0 1 1 *',
        suspend: true,
        jobTemplate: {
          metadata: { labels: { team: 'data' } },
          spec: { template: podTemplate('nightly', 'batch-config', 'Never') },
        },
      },
    } as CronJob);
    let op = await start(t, namespace);
    const recorded = await until<CronJob>(kube, CRONJOBS, namespace, 'nightly', 'first record', (c) =>
      Boolean(c.metadata?.annotations?.[APPLIED]),
    );
    assert.deepEqual(await jobsOf(kube, namespace, 'nightly'), [], 'a first sighting starts nothing');

    await change(kube, namespace, 'batch-config', 'debug');
    const restarted = await until<CronJob>(kube, CRONJOBS, namespace, 'nightly', 'the record of the restart', (c) =>
      Boolean(c.metadata?.annotations?.[LAST_RESTART_JOB_ANNOTATION]),
    );
    assert.notEqual(restarted.metadata?.annotations?.[APPLIED], recorded.metadata?.annotations?.[APPLIED]);
    const first = await jobsOf(kube, namespace, 'nightly');
    assert.equal(first.length, 1);
    const job = first[0]!;
    assert.equal(job.metadata?.name, restarted.metadata?.annotations?.[LAST_RESTART_JOB_ANNOTATION]);
    assert.equal(job.metadata?.annotations?.[INSTANTIATE_ANNOTATION], 'manual');
    assert.equal(job.metadata?.labels?.team, 'data');
    const owner = job.metadata?.ownerReferences?.[0];
    assert.deepEqual([owner?.kind, owner?.uid, owner?.controller], ['CronJob', restarted.metadata?.uid, true]);
    const event = await waitFor(
      'the ConfigChanged Event',
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find(
          (e) => e.reason === 'ConfigChanged' && e.regarding?.kind === 'CronJob',
        ),
      { timeoutMs: 10_000 },
    );
    assert.match(event.note ?? '', /started Job nightly-[0-9a-f]{10} from CronJob nightly/);
    assert.equal(event.regarding?.apiVersion, 'batch/v1');

    // Killed between the create of the next restart's Job and its record: the new
    // process decides the same, finds that name taken (AlreadyExists) and only records.
    await op.stop();
    const key = Buffer.from(
      (await kube.get<Secret>(resources.secrets, { namespace, name: 'stateward-config-checksum-key' })).data!.key!,
      'base64',
    );
    const record = (level: string) =>
      formatAppliedChecksums({ [`configmap/${namespace}/batch-config`]: configChecksum(key, { data: { level } }) });
    assert.equal(
      restarted.metadata?.annotations?.[APPLIED],
      record('debug'),
      'the checksums as the test computes them',
    );
    await change(kube, namespace, 'batch-config', 'warn');
    const crashed = cronJobRestartJobName(restarted, record('warn'));
    await kube.create(JOBS, jobFromCronJob(restarted, crashed));
    op = await start(t, namespace);
    const final = await until<CronJob>(
      kube,
      CRONJOBS,
      namespace,
      'nightly',
      'the record of the change made while no operator ran',
      (c) => c.metadata?.annotations?.[APPLIED] === record('warn'),
    );
    assert.equal(final.metadata?.annotations?.[LAST_RESTART_JOB_ANNOTATION], crashed);
    const names = (await jobsOf(kube, namespace, 'nightly')).map((j) => j.metadata?.name).sort();
    assert.deepEqual(names, [job.metadata?.name, crashed].sort(), 'no Job again for either change');
  });

  it('a Job is re-created carrying its record, also when the operator died after marking it', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await config(kube, namespace, 'job-config');
    const created = await kube.create<Job>(JOBS, {
      metadata: { name: 'migrate', namespace, annotations: { 'configmap.reloader.stakater.com/reload': 'job-config' } },
      spec: { backoffLimit: 0, template: podTemplate('migrate', 'job-config', 'Never') },
    });
    let op = await start(t, namespace);
    const recorded = await until<Job>(kube, JOBS, namespace, 'migrate', 'first record', (j) =>
      Boolean(j.metadata?.annotations?.[APPLIED]),
    );
    assert.equal(recorded.metadata?.uid, created.metadata?.uid, 'a first sighting re-creates nothing');

    await change(kube, namespace, 'job-config', 'debug');
    const recreated = await until<Job>(
      kube,
      JOBS,
      namespace,
      'migrate',
      'the re-created Job',
      (j) => j.metadata?.uid !== created.metadata?.uid && !j.metadata?.deletionTimestamp,
    );
    assert.notEqual(recreated.metadata?.annotations?.[APPLIED], recorded.metadata?.annotations?.[APPLIED]);
    assert.equal(recreated.metadata?.annotations?.[RECREATE_INTENT_ANNOTATION], undefined);
    assert.deepEqual(recreated.metadata?.finalizers ?? [], []);
    assert.equal(recreated.metadata?.annotations?.['configmap.reloader.stakater.com/reload'], 'job-config');
    const event = await waitFor(
      'the ConfigChanged Event',
      async () =>
        (await kube.list<Event>(resources.events, { namespace })).items.find((e) => e.reason === 'ConfigChanged'),
      { timeoutMs: 10_000 },
    );
    assert.match(event.note ?? '', /^restarted: configmap\/.*\/job-config changed; re-created Job migrate$/);

    // Killed after step 1 (the mark): the next process finishes the re-creation from what the Job holds.
    await op.stop();
    const record = recreated.metadata.annotations[APPLIED]!;
    await kube.patch(JOBS, { namespace, name: 'migrate' }, 'merge', {
      metadata: { finalizers: [RECREATE_FINALIZER], annotations: { [RECREATE_INTENT_ANNOTATION]: record } },
    });
    op = await start(t, namespace);
    const again = await until<Job>(
      kube,
      JOBS,
      namespace,
      'migrate',
      'the re-creation finished by the new process',
      (j) => j.metadata?.uid !== recreated.metadata?.uid && !j.metadata?.deletionTimestamp,
    );
    assert.equal(again.metadata?.annotations?.[APPLIED], record);
    assert.deepEqual(again.metadata?.finalizers ?? [], []);
  });

  it('an Argo Rollout takes a template trigger (rollout-strategy rollout) or spec.restartAt (restart)', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    await kube
      .create(CRDS, {
        metadata: { name: 'rollouts.argoproj.io' },
        spec: {
          group: 'argoproj.io',
          scope: 'Namespaced',
          names: { plural: 'rollouts', singular: 'rollout', kind: 'Rollout', listKind: 'RolloutList' },
          versions: [
            {
              name: 'v1alpha1',
              served: true,
              storage: true,
              schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
            },
          ],
        },
      } as KubeObject)
      .catch((e: unknown) => {
        if (!isAlreadyExists(e)) throw e;
      });
    await config(kube, namespace, 'web-config');
    const rollout = (name: string, annotations: Record<string, string>) => ({
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Rollout',
      metadata: { name, namespace, annotations: { ...AUTO, ...annotations } },
      spec: { replicas: 1, template: podTemplate(name, 'web-config') },
    });
    await waitFor(
      'the Rollout CRD served',
      () => kube.create(ARGO_ROLLOUTS, rollout('web', {})).catch(() => undefined),
      { timeoutMs: 30_000 },
    );
    await kube.create(ARGO_ROLLOUTS, rollout('api', { 'reloader.stakater.com/rollout-strategy': 'restart' }));
    await start(t, namespace);
    const recorded = (name: string) =>
      until<Templated>(kube, ARGO_ROLLOUTS, namespace, name, `${name} recorded`, (r) =>
        Boolean(r.metadata?.annotations?.[APPLIED]),
      );
    const before = { web: await recorded('web'), api: await recorded('api') };

    await change(kube, namespace, 'web-config', 'debug');
    const web = await until<Templated>(kube, ARGO_ROLLOUTS, namespace, 'web', 'the template trigger', (r) =>
      Boolean(r.spec?.template?.metadata?.annotations?.[TRIGGER]),
    );
    assert.notEqual(web.metadata?.annotations?.[APPLIED], before.web.metadata?.annotations?.[APPLIED]);
    assert.equal(web.spec?.restartAt, undefined);
    const api = await until<Templated>(kube, ARGO_ROLLOUTS, namespace, 'api', 'spec.restartAt', (r) =>
      Boolean(r.spec?.restartAt),
    );
    assert.match(api.spec!.restartAt!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.notEqual(api.metadata?.annotations?.[APPLIED], before.api.metadata?.annotations?.[APPLIED]);
    assert.equal(
      api.spec?.template?.metadata?.annotations?.[TRIGGER],
      undefined,
      'restart: the template is not changed',
    );
  });

  it('a Deployment with pause-period is paused by the restart and resumed after it, by a new operator process', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    const PERIOD_S = 8;
    await config(kube, namespace, 'app-config');
    await kube.create(resources.deployments, {
      metadata: { name: 'app', namespace, annotations: { ...AUTO, [PAUSE_PERIOD_ANNOTATION]: `${PERIOD_S}s` } },
      spec: { replicas: 1, selector: { matchLabels: { app: 'app' } }, template: podTemplate('app', 'app-config') },
    } as KubeObject);
    const op = await start(t, namespace);
    await until<Templated>(kube, resources.deployments, namespace, 'app', 'first record', (d) =>
      Boolean(d.metadata?.annotations?.[APPLIED]),
    );

    await change(kube, namespace, 'app-config', 'debug');
    const paused = await until<Templated>(kube, resources.deployments, namespace, 'app', 'paused by the restart', (d) =>
      Boolean(d.spec?.paused && d.metadata?.annotations?.[PAUSED_AT_ANNOTATION]),
    );
    const trigger = paused.spec?.template?.metadata?.annotations?.[TRIGGER];
    assert.ok(trigger, 'the restart and the pause are one patch');
    const pausedAt = paused.metadata!.annotations![PAUSED_AT_ANNOTATION]!;

    // A change during the pause lands in the template; the pause is not extended.
    await change(kube, namespace, 'app-config', 'warn');
    const during = await until<Templated>(kube, resources.deployments, namespace, 'app', 'the second restart', (d) => {
      const next = d.spec?.template?.metadata?.annotations?.[TRIGGER];
      return next !== undefined && next !== trigger;
    });
    assert.equal(during.spec?.paused, true);
    assert.equal(during.metadata?.annotations?.[PAUSED_AT_ANNOTATION], pausedAt);

    // Killed during the pause: the next process resumes from the annotations.
    await op.stop();
    await start(t, namespace);
    const resumed = await until<Templated>(
      kube,
      resources.deployments,
      namespace,
      'app',
      'resumed after the pause-period',
      (d) => d.spec?.paused !== true,
      (PERIOD_S + 20) * 1000,
    );
    assert.ok(Date.now() >= Date.parse(pausedAt) + PERIOD_S * 1000, 'not resumed before the period passed');
    assert.equal(resumed.metadata?.annotations?.[PAUSED_AT_ANNOTATION], undefined);
    assert.equal(
      resumed.spec?.template?.metadata?.annotations?.[TRIGGER],
      during.spec?.template?.metadata?.annotations?.[TRIGGER],
    );
  });
});
