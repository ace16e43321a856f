// What Reloader's filter flags leave in scope, and what a missing config does
// under reload-on-create / reload-on-delete (src/restarts/reloaderscope.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MISSING, type WorkloadKind } from '../../src/restarts/checksums.ts';
import { DEFAULT_SCOPE, decideMissingConfig, restartScope } from '../../src/restarts/reloaderscope.ts';
import { parseLabelSelector } from '../../src/vocabulary/selectors.ts';

const KINDS: WorkloadKind[] = ['Deployment', 'StatefulSet', 'DaemonSet', 'CronJob', 'Job', 'Rollout'];

function selector(text: string) {
  const parsed = parseLabelSelector(text);
  assert.ok(parsed.ok);
  return parsed.value;
}

describe('RestartScope', () => {
  it("the default scope (Stateward's own) takes every config and every kind", () => {
    assert.equal(DEFAULT_SCOPE.configIncluded('configmap', undefined), true);
    assert.equal(DEFAULT_SCOPE.configIncluded('secret', { any: 'thing' }), true);
    assert.deepEqual(
      KINDS.filter((k) => DEFAULT_SCOPE.workloadKindIncluded(k)),
      KINDS,
    );
    assert.equal(restartScope({ argoRollouts: false }).workloadKindIncluded('Rollout'), false);
  });

  it('ignored workload types leave exactly Jobs and/or CronJobs out', () => {
    const scope = restartScope({ ignoreJobs: true });
    assert.deepEqual(
      KINDS.filter((k) => !scope.workloadKindIncluded(k)),
      ['Job'],
    );
    assert.equal(restartScope({ ignoreCronJobs: true }).workloadKindIncluded('CronJob'), false);
  });

  it('an ignored config kind is neither watched nor included, whatever its labels', () => {
    const scope = restartScope({ ignoredConfigKind: 'secret' });
    assert.equal(scope.configKindWatched('secret'), false);
    assert.equal(scope.configIncluded('secret', {}), false);
    assert.equal(scope.configIncluded('configmap', {}), true);
  });

  it('property: with a selector, a config is included exactly when its kind is watched and the selector matches', () => {
    const scope = restartScope({ configSelector: selector('team=a,!legacy'), configSelectorText: 'team=a,!legacy' });
    const labels = fc.dictionary(fc.constantFrom('team', 'legacy', 'other'), fc.constantFrom('a', 'b', ''));
    fc.assert(
      fc.property(fc.constantFrom('configmap' as const, 'secret' as const), labels, (kind, l) => {
        assert.equal(scope.configIncluded(kind, l), l['team'] === 'a' && !('legacy' in l));
      }),
    );
  });
});

describe('decideMissingConfig', () => {
  const flags = fc.record({ reloadOnCreate: fc.boolean(), reloadOnDelete: fc.boolean() });
  const recorded = fc.constantFrom(undefined, MISSING, 'v1:abc', 'v1:def');

  it('without the flags it is R5: nothing restarts, a checksum is kept, nothing new is recorded', () => {
    const none = { reloadOnCreate: false, reloadOnDelete: false };
    assert.deepEqual(decideMissingConfig(none, undefined), { record: undefined, restart: false });
    assert.deepEqual(decideMissingConfig(none, 'v1:abc'), { record: 'v1:abc', restart: false });
  });

  it('reload-on-create records the absence, so the later appearance differs from the record', () => {
    assert.deepEqual(decideMissingConfig({ reloadOnCreate: true, reloadOnDelete: false }, undefined), {
      record: MISSING,
      restart: false,
    });
    // A deleted config keeps its checksum: re-created with the same content it restarts nothing.
    assert.deepEqual(decideMissingConfig({ reloadOnCreate: true, reloadOnDelete: false }, 'v1:abc'), {
      record: 'v1:abc',
      restart: false,
    });
  });

  it('reload-on-delete restarts a workload that had the config applied, once', () => {
    const onDelete = { reloadOnCreate: false, reloadOnDelete: true };
    assert.deepEqual(decideMissingConfig(onDelete, 'v1:abc'), { record: MISSING, restart: true });
    assert.deepEqual(decideMissingConfig(onDelete, MISSING), { record: MISSING, restart: false });
    assert.deepEqual(decideMissingConfig(onDelete, undefined), { record: undefined, restart: false });
  });

  it('property: deciding again from what was recorded never restarts (a failover or operator restart restarts nothing)', () => {
    fc.assert(
      fc.property(flags, recorded, (scope, before) => {
        const first = decideMissingConfig(scope, before);
        const again = decideMissingConfig(scope, first.record);
        assert.equal(again.restart, false);
        assert.equal(again.record, first.record);
      }),
    );
  });

  it('property: only reload-on-delete restarts, and only from a recorded checksum', () => {
    fc.assert(
      fc.property(flags, recorded, (scope, before) => {
        const d = decideMissingConfig(scope, before);
        assert.equal(d.restart, scope.reloadOnDelete && before !== undefined && before !== MISSING);
        // A recorded checksum is dropped only by the restart that replaces it with MISSING.
        if (before !== undefined && before !== MISSING && !d.restart) assert.equal(d.record, before);
      }),
    );
  });
});
