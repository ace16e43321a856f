import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { KubeObject } from '../../src/runtime/kube/types.ts';
import { restartPatch } from '../../src/restarts/patches.ts';
import {
  formatPausedAt,
  PAUSE_PERIOD_ANNOTATION,
  PAUSED_AT_ANNOTATION,
  pauseDecision,
  pausePeriodOf,
  type PausableDeployment,
} from '../../src/restarts/pauseperiod.ts';
import {
  hasUnfinishedWrite,
  kindWarnings,
  planRestartWrite,
  ROLLOUT_STRATEGY_ANNOTATION,
} from '../../src/restarts/restartwrites.ts';
import { kindSpec, owningCronJob, WORKLOAD_KINDS } from '../../src/restarts/workloadkinds.ts';
import { RECREATE_FINALIZER } from '../../src/restarts/jobrestarts.ts';

const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
const TRIGGER = 'com.xing.deployment-restart.timestamp';
const NOW = Date.parse('2026-11-29T10:00:00.250Z');

const decision = () => ({
  annotation: '{"configmap/prod/a":"v1:new"}',
  patch: restartPatch({ applied: { 'configmap/prod/a': 'v1:new' }, now: NOW, resourceVersion: '9' }),
});

function object(annotations: Record<string, string> = {}, spec: Record<string, unknown> = {}): KubeObject {
  return {
    metadata: { name: 'app', namespace: 'prod', uid: 'u1', resourceVersion: '9', annotations },
    spec,
  } as KubeObject;
}

describe('the kinds table', () => {
  it('has one entry per kind, with unique reconcile-key prefixes; only Rollouts are optional', () => {
    assert.deepEqual(
      WORKLOAD_KINDS.map((k) => [k.kind, k.prefix, k.optional, k.restart]),
      [
        ['Deployment', 'deployment', false, 'template-patch'],
        ['StatefulSet', 'statefulset', false, 'template-patch'],
        ['DaemonSet', 'daemonset', false, 'template-patch'],
        ['CronJob', 'cronjob', false, 'job-from-cronjob'],
        ['Job', 'job', false, 'recreate-job'],
        ['Rollout', 'rollout', true, 'template-patch'],
      ],
    );
  });

  it("reads a CronJob's pod template from its jobTemplate, so Reloader's template fallback finds its opt-ins", () => {
    const template = { metadata: { annotations: { 'reloader.stakater.com/auto': 'true' } }, spec: { containers: [] } };
    const view = kindSpec('CronJob').view({
      metadata: { name: 'c' },
      spec: { jobTemplate: { spec: { template } } },
    } as KubeObject);
    assert.deepEqual(view, { metadata: { name: 'c' }, spec: { template } });
  });

  it("leaves a CronJob's Jobs to the CronJob", () => {
    const owned = {
      metadata: {
        name: 'c-1',
        ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'c', uid: 'x', controller: true }],
      },
    };
    assert.equal(owningCronJob(owned), 'c');
    assert.match(kindSpec('Job').handledElsewhere(owned) ?? '', /CronJob c/);
    assert.equal(kindSpec('Job').handledElsewhere(object()), undefined);
  });
});

describe('what a restart writes, per kind', () => {
  it('Deployment, StatefulSet, DaemonSet, Rollout (strategy rollout): the decided patch as it is', () => {
    for (const kind of ['Deployment', 'StatefulSet', 'DaemonSet', 'Rollout'] as const) {
      assert.deepEqual(planRestartWrite(kindSpec(kind), object(), decision(), NOW), {
        write: 'patch',
        patch: decision().patch,
        note: '',
      });
    }
  });

  it('Rollout with rollout-strategy restart: the record and spec.restartAt in one patch, no template change', () => {
    const plan = planRestartWrite(
      kindSpec('Rollout'),
      object({ [ROLLOUT_STRATEGY_ANNOTATION]: 'restart' }),
      decision(),
      NOW,
    );
    assert.deepEqual(plan, {
      write: 'patch',
      patch: { metadata: decision().patch.metadata, spec: { restartAt: '2026-11-29T10:00:00Z' } },
      note: 'spec.restartAt set to 2026-11-29T10:00:00Z',
    });
    const again = planRestartWrite(
      kindSpec('Rollout'),
      object({ [ROLLOUT_STRATEGY_ANNOTATION]: 'restart' }, { restartAt: '2026-11-29T10:00:00Z' }),
      decision(),
      NOW,
    );
    assert.equal((again as { patch: { spec: { restartAt: string } } }).patch.spec.restartAt, '2026-11-29T10:00:01Z');
  });

  it('Deployment with pause-period: pauses in the same patch, unless already paused', () => {
    const plan = planRestartWrite(kindSpec('Deployment'), object({ [PAUSE_PERIOD_ANNOTATION]: '5m' }), decision(), NOW);
    assert.equal(plan.write, 'patch');
    const patch = (
      plan as {
        patch: {
          metadata: { annotations: Record<string, string>; resourceVersion: string };
          spec: Record<string, unknown>;
        };
      }
    ).patch;
    assert.equal(patch.metadata.resourceVersion, '9');
    assert.equal(patch.metadata.annotations[APPLIED], decision().annotation);
    assert.equal(patch.metadata.annotations[PAUSED_AT_ANNOTATION], '2026-11-29T10:00:00Z');
    assert.equal(patch.spec.paused, true);
    assert.ok(
      (patch.spec.template as { metadata: { annotations: Record<string, string> } }).metadata.annotations[TRIGGER],
    );
    const paused = object(
      { [PAUSE_PERIOD_ANNOTATION]: '5m', [PAUSED_AT_ANNOTATION]: '2026-11-29T09:59:00Z' },
      { paused: true },
    );
    assert.deepEqual(planRestartWrite(kindSpec('Deployment'), paused, decision(), NOW), {
      write: 'patch',
      patch: decision().patch,
      note: '',
    });
  });

  it('Deployment with a bad pause-period: restarts without a pause, and warns', () => {
    const bad = object({ [PAUSE_PERIOD_ANNOTATION]: '5 minutes' });
    assert.deepEqual(planRestartWrite(kindSpec('Deployment'), bad, decision(), NOW), {
      write: 'patch',
      patch: decision().patch,
      note: '',
    });
    assert.match(
      kindWarnings(kindSpec('Deployment'), bad)[0] ?? '',
      /^app: deployment.reloader.stakater.com\/pause-period="5 minutes" is not a Go duration/,
    );
    assert.deepEqual(kindWarnings(kindSpec('Deployment'), object({ [PAUSE_PERIOD_ANNOTATION]: '1h30m' })), []);
  });

  it('Rollout with an unknown rollout-strategy: warns and uses rollout', () => {
    const odd = object({ [ROLLOUT_STRATEGY_ANNOTATION]: 'recreate' });
    assert.equal(planRestartWrite(kindSpec('Rollout'), odd, decision(), NOW).write, 'patch');
    assert.match(kindWarnings(kindSpec('Rollout'), odd)[0] ?? '', /neither "rollout" nor "restart"/);
  });

  it('CronJob: create a Job named from the checksums, then the record', () => {
    const plan = planRestartWrite(kindSpec('CronJob'), object(), decision(), NOW);
    assert.equal(plan.write, 'create-job');
    if (plan.write !== 'create-job') return;
    assert.match(plan.job.metadata?.name ?? '', /^app-[0-9a-f]{10}$/);
    assert.match(plan.note, /^started Job app-[0-9a-f]{10} from CronJob app$/);
  });

  it('Job: mark it for re-creation', () => {
    const plan = planRestartWrite(kindSpec('Job'), object(), decision(), NOW);
    assert.equal(plan.write, 'recreate-job');
  });

  it('knows the work an earlier restart left: a pause, a marked Job', () => {
    assert.equal(hasUnfinishedWrite(kindSpec('Deployment'), object({ [PAUSED_AT_ANNOTATION]: 'x' })), true);
    assert.equal(hasUnfinishedWrite(kindSpec('Deployment'), object()), false);
    const marked = { metadata: { name: 'j', finalizers: [RECREATE_FINALIZER] } } as KubeObject;
    assert.equal(hasUnfinishedWrite(kindSpec('Job'), marked), true);
    assert.equal(hasUnfinishedWrite(kindSpec('Job'), object()), false);
  });
});

describe('pause-period', () => {
  const deployment = (annotations: Record<string, string>, paused = true): PausableDeployment => ({
    metadata: { name: 'd', resourceVersion: '3', annotations },
    spec: { paused },
  });

  it('reads Go durations', () => {
    assert.deepEqual(pausePeriodOf(deployment({ [PAUSE_PERIOD_ANNOTATION]: '1m30s' })), { periodMs: 90_000 });
    assert.deepEqual(pausePeriodOf(deployment({})), {});
    assert.match(
      pausePeriodOf(deployment({ [PAUSE_PERIOD_ANNOTATION]: '0s' })).warning ?? '',
      /not a positive duration/,
    );
  });

  it('waits until paused-at + period, then resumes in one patch (unpause, drop paused-at)', () => {
    const d = deployment({ [PAUSE_PERIOD_ANNOTATION]: '30s', [PAUSED_AT_ANNOTATION]: '2026-11-29T10:00:00Z' });
    assert.deepEqual(pauseDecision(d, Date.parse('2026-11-29T10:00:10Z')), {
      action: 'wait',
      untilWall: Date.parse('2026-11-29T10:00:30Z'),
    });
    const resume = pauseDecision(d, Date.parse('2026-11-29T10:00:30Z'));
    assert.equal(resume.action, 'resume');
    if (resume.action !== 'resume') return;
    assert.deepEqual(resume.patch, {
      metadata: { resourceVersion: '3', annotations: { [PAUSED_AT_ANNOTATION]: null } },
      spec: { paused: false },
    });
  });

  it('leaves a Deployment paused by hand alone (no paused-at)', () => {
    assert.deepEqual(pauseDecision(deployment({ [PAUSE_PERIOD_ANNOTATION]: '30s' }), NOW), { action: 'none' });
  });

  it('resumes at once when the period is gone or paused-at unreadable; drops paused-at someone else resumed', () => {
    assert.equal(pauseDecision(deployment({ [PAUSED_AT_ANNOTATION]: '2026-11-29T10:00:00Z' }), NOW).action, 'resume');
    assert.equal(
      pauseDecision(deployment({ [PAUSE_PERIOD_ANNOTATION]: '1h', [PAUSED_AT_ANNOTATION]: 'yesterday' }), NOW).action,
      'resume',
    );
    const resumed = pauseDecision(
      deployment({ [PAUSE_PERIOD_ANNOTATION]: '1h', [PAUSED_AT_ANNOTATION]: '2026-11-29T10:00:00Z' }, false),
      NOW,
    );
    assert.equal(resumed.action, 'resume');
    if (resumed.action === 'resume') assert.equal((resumed.patch as { spec?: unknown }).spec, undefined);
  });

  it('property: never resumes before the period has passed, always at or after it', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 86_400 }),
        fc.integer({ min: 0, max: 200_000_000 }),
        (seconds, elapsedMs) => {
          const pausedAt = formatPausedAt(NOW);
          const d = deployment({ [PAUSE_PERIOD_ANNOTATION]: `${seconds}s`, [PAUSED_AT_ANNOTATION]: pausedAt });
          const at = Date.parse(pausedAt) + elapsedMs;
          assert.equal(pauseDecision(d, at).action, elapsedMs >= seconds * 1000 ? 'resume' : 'wait');
        },
      ),
    );
  });
});
