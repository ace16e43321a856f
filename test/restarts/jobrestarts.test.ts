import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  cronJobRecordPatch,
  cronJobRestartJobName,
  INSTANTIATE_ANNOTATION,
  jobFromCronJob,
  LAST_RESTART_JOB_ANNOTATION,
  RECREATE_FINALIZER,
  RECREATE_INTENT_ANNOTATION,
  recreatedJob,
  recreateMarkPatch,
  recreateStep,
  type CronJob,
  type Job,
} from '../../src/restarts/jobrestarts.ts';

const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function cronJob(name = 'nightly', annotations: Record<string, string> = {}): CronJob {
  return {
    metadata: { name, namespace: 'prod', uid: 'cj-uid-1', resourceVersion: '7', annotations },
    spec: {
      jobTemplate: {
        metadata: { labels: { team: 'data' }, annotations: { note: 'from template' } },
        spec: {
          backoffLimit: 2,
          template: { metadata: { labels: { app: 'nightly' } }, spec: { restartPolicy: 'Never', containers: [] } },
        },
      },
    },
  };
}

/** A Job as the API server returns it. */
function job(extra: Partial<Job['metadata']> = {}, manualSelector = false): Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: 'migrate',
      namespace: 'prod',
      uid: 'job-uid-1',
      resourceVersion: '42',
      creationTimestamp: '2026-11-29T10:00:00Z',
      managedFields: [{ manager: 'kubectl' }],
      labels: {
        'controller-uid': 'job-uid-1',
        'batch.kubernetes.io/controller-uid': 'job-uid-1',
        'job-name': 'migrate',
        'batch.kubernetes.io/job-name': 'migrate',
        team: 'db',
      },
      annotations: { 'reloader.stakater.com/auto': 'true', [APPLIED]: '{"configmap/prod/a":"v1:old"}' },
      ...extra,
    },
    spec: {
      ...(manualSelector ? { manualSelector: true } : {}),
      selector: { matchLabels: { 'batch.kubernetes.io/controller-uid': 'job-uid-1' } },
      backoffLimit: 1,
      template: {
        metadata: {
          labels: {
            'controller-uid': 'job-uid-1',
            'batch.kubernetes.io/controller-uid': 'job-uid-1',
            'job-name': 'migrate',
            'batch.kubernetes.io/job-name': 'migrate',
            app: 'migrate',
          },
        },
        spec: { restartPolicy: 'Never', containers: [{ name: 'm', image: 'x' }] },
      },
    },
    status: { succeeded: 1 },
  };
}

describe('the Job a CronJob restart starts', () => {
  it('is the jobTemplate, marked manual and controlled by the CronJob', () => {
    const created = jobFromCronJob(cronJob(), 'nightly-0123456789');
    assert.deepEqual(created, {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: {
        name: 'nightly-0123456789',
        namespace: 'prod',
        labels: { team: 'data' },
        annotations: { note: 'from template', [INSTANTIATE_ANNOTATION]: 'manual' },
        ownerReferences: [
          {
            apiVersion: 'batch/v1',
            kind: 'CronJob',
            name: 'nightly',
            uid: 'cj-uid-1',
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: cronJob().spec!.jobTemplate!.spec,
    });
  });

  it('is named the same for the same CronJob, checksums and last Job, so a repeat finds it (AlreadyExists)', () => {
    assert.equal(cronJobRestartJobName(cronJob(), '{"a":"1"}'), cronJobRestartJobName(cronJob(), '{"a":"1"}'));
    assert.notEqual(cronJobRestartJobName(cronJob(), '{"a":"1"}'), cronJobRestartJobName(cronJob(), '{"a":"2"}'));
  });

  it('is named anew when the checksums come back to earlier values (A→B→A→B starts three Jobs)', () => {
    const first = cronJobRestartJobName(cronJob(), '{"a":"B"}');
    const second = cronJobRestartJobName(cronJob('nightly', { [LAST_RESTART_JOB_ANNOTATION]: first }), '{"a":"A"}');
    const third = cronJobRestartJobName(cronJob('nightly', { [LAST_RESTART_JOB_ANNOTATION]: second }), '{"a":"B"}');
    assert.equal(new Set([first, second, third]).size, 3);
  });

  it('records the checksums and the Job it started in one patch, keeping the precondition', () => {
    assert.deepEqual(
      cronJobRecordPatch({ metadata: { resourceVersion: '7', annotations: { [APPLIED]: '{}' } } }, 'nightly-1'),
      {
        metadata: {
          resourceVersion: '7',
          annotations: { [APPLIED]: '{}', [LAST_RESTART_JOB_ANNOTATION]: 'nightly-1' },
        },
      },
    );
  });

  it('property: the name is a DNS label of at most 63 characters that changes with the checksums', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,250}[a-z0-9])?$/),
        fc.string(),
        fc.string(),
        (name, a, b) => {
          const one = cronJobRestartJobName(cronJob(name), a);
          assert.ok(one.length <= 63, one);
          assert.match(one, DNS_LABEL);
          if (a !== b) assert.notEqual(one, cronJobRestartJobName(cronJob(name), b));
        },
      ),
    );
  });
});

describe('a Job re-created by a restart', () => {
  it('drops what the API server set and carries the record', () => {
    const marked = job({
      finalizers: [RECREATE_FINALIZER],
      annotations: { ...job().metadata!.annotations, [RECREATE_INTENT_ANNOTATION]: '{"configmap/prod/a":"v1:new"}' },
    });
    assert.deepEqual(recreatedJob(marked, '{"configmap/prod/a":"v1:new"}'), {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: {
        name: 'migrate',
        namespace: 'prod',
        labels: { team: 'db' },
        annotations: { 'reloader.stakater.com/auto': 'true', [APPLIED]: '{"configmap/prod/a":"v1:new"}' },
      },
      spec: {
        backoffLimit: 1,
        template: {
          metadata: { labels: { app: 'migrate' } },
          spec: { restartPolicy: 'Never', containers: [{ name: 'm', image: 'x' }] },
        },
      },
    });
  });

  it('keeps the selector and labels the user chose (manualSelector)', () => {
    const copy = recreatedJob(job({}, true), '{}');
    assert.deepEqual(copy.spec?.selector, job().spec?.selector);
    assert.equal(copy.metadata?.labels?.['job-name'], 'migrate');
    assert.equal(copy.spec?.template?.metadata?.labels?.['controller-uid'], 'job-uid-1');
  });

  it('goes mark → delete → release and create, each step read from the Job', () => {
    const start = job();
    assert.deepEqual(recreateStep(start), { step: 'none' });
    const mark = recreateMarkPatch(start, '{"x":"1"}');
    assert.deepEqual(mark, {
      metadata: {
        resourceVersion: '42',
        finalizers: [RECREATE_FINALIZER],
        annotations: { [RECREATE_INTENT_ANNOTATION]: '{"x":"1"}' },
      },
    });
    const marked = job({
      finalizers: [RECREATE_FINALIZER],
      annotations: { [RECREATE_INTENT_ANNOTATION]: '{"x":"1"}' },
    });
    assert.deepEqual(recreateStep(marked), { step: 'delete', uid: 'job-uid-1' });
    const deleting = job({
      finalizers: [RECREATE_FINALIZER],
      deletionTimestamp: '2026-11-29T10:01:00Z',
      annotations: { [RECREATE_INTENT_ANNOTATION]: '{"x":"1"}' },
    });
    const step = recreateStep(deleting);
    assert.equal(step.step, 'release-and-create');
    if (step.step !== 'release-and-create') return;
    assert.deepEqual(step.release, { metadata: { resourceVersion: '42', finalizers: [] } });
    assert.equal(step.job.metadata?.annotations?.[APPLIED], '{"x":"1"}');
    assert.equal(step.job.metadata?.deletionTimestamp, undefined);
    assert.equal(step.job.metadata?.finalizers, undefined);
  });

  it('waits for other finalizers before releasing: its release must delete the old Job at once', () => {
    const deleting = job({
      finalizers: ['example.com/keep', RECREATE_FINALIZER],
      deletionTimestamp: '2026-11-29T10:01:00Z',
    });
    assert.deepEqual(recreateStep(deleting), { step: 'wait-for-finalizers', others: ['example.com/keep'] });
  });

  it('keeps finalizers already on the Job when marking it', () => {
    const mark = recreateMarkPatch(job({ finalizers: ['example.com/keep'] }), '{}') as {
      metadata: { finalizers: string[] };
    };
    assert.deepEqual(mark.metadata.finalizers, ['example.com/keep', RECREATE_FINALIZER]);
  });
});
