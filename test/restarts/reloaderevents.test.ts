// The Events of a restart outcome, in Stateward's and Reloader's reasons (src/restarts/reloaderevents.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { restartEvents, type RestartOutcome } from '../../src/restarts/reloaderevents.ts';

const base = {
  workload: { kind: 'Deployment' as const, namespace: 'shop', name: 'web' },
  configs: [
    { kind: 'configmap' as const, name: 'web-config' },
    { kind: 'secret' as const, name: 'web-tls' },
  ],
};
const restarted: RestartOutcome = { ...base, result: 'restarted', detail: '; its rollout group rolls it zone by zone' };
const failed: RestartOutcome = { ...base, result: 'failed', error: 'deployments.apps "web" is forbidden' };

describe('restartEvents', () => {
  it("Stateward's reasons: one ConfigChanged naming every config, with how it rolls", () => {
    assert.deepEqual(restartEvents(restarted, 'stateward'), [
      {
        type: 'Normal',
        reason: 'ConfigChanged',
        message:
          'restarted: configmap/shop/web-config, secret/shop/web-tls changed; its rollout group rolls it zone by zone',
      },
    ]);
    assert.deepEqual(restartEvents(failed, 'stateward'), [
      {
        type: 'Warning',
        reason: 'ConfigRestartFailed',
        message:
          'restart for configmap/shop/web-config, secret/shop/web-tls failed, retrying: deployments.apps "web" is forbidden',
      },
    ]);
  });

  it("Reloader's reasons: one Reloaded per config, in Reloader's words", () => {
    assert.deepEqual(restartEvents(restarted, 'reloader'), [
      {
        type: 'Normal',
        reason: 'Reloaded',
        message:
          "Changes detected in 'web-config' of type 'CONFIGMAP' in namespace 'shop', Updated 'web' of type 'Deployment' in namespace 'shop'",
      },
      {
        type: 'Normal',
        reason: 'Reloaded',
        message:
          "Changes detected in 'web-tls' of type 'SECRET' in namespace 'shop', Updated 'web' of type 'Deployment' in namespace 'shop'",
      },
    ]);
  });

  it("Reloader's reasons: one ReloadFail per failed write, naming the workload and the error", () => {
    assert.deepEqual(restartEvents(failed, 'reloader'), [
      {
        type: 'Warning',
        reason: 'ReloadFail',
        message: `Update for 'web' of type 'Deployment' in namespace 'shop' failed with error deployments.apps "web" is forbidden`,
      },
    ]);
  });

  it('a restart with no named config still gets its Event', () => {
    const events = restartEvents({ ...base, configs: [], result: 'restarted' }, 'reloader');
    assert.deepEqual(events, [
      { type: 'Normal', reason: 'Reloaded', message: "Updated 'web' of type 'Deployment' in namespace 'shop'" },
    ]);
  });

  it('the kind in the text is the workload kind as Reloader names it', () => {
    const [event] = restartEvents(
      { ...base, workload: { kind: 'CronJob', namespace: 'b', name: 'nightly' }, result: 'restarted' },
      'reloader',
    );
    assert.match(event!.message, /Updated 'nightly' of type 'CronJob' in namespace 'b'$/);
  });
});
