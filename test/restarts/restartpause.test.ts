// Pausing config restarts (restartpause.ts, restartplan.ts R7): what pauses
// a workload, and that a pause holds changes without losing them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MISSING, type WorkloadRef } from '../../src/restarts/checksums.ts';
import { decideRestart, type RestartDecision, type RestartInput } from '../../src/restarts/restartplan.ts';
import { pauseNotices, restartPause } from '../../src/restarts/restartpause.ts';
import type { PendingChange } from '../../src/restarts/debounce.ts';
import { CONFIG_RESTART_PAUSED_ANNOTATION as PAUSED } from '../../src/vocabulary/keys.ts';

const W: WorkloadRef = { kind: 'Deployment', namespace: 'prod', name: 'app' };
const A = 'configmap/prod/a';
const B = 'secret/prod/b';
const NOW = 1_000_000;

function decide(input: Partial<RestartInput>): RestartDecision {
  return decideRestart({
    workload: W,
    optedIn: true,
    applied: {},
    current: {},
    now: NOW,
    settings: { gracePeriodMs: 0, maxWaitMs: 0 },
    ...input,
  });
}

describe('restartPause: what pauses a workload', () => {
  it('the workload, its namespace and the configs it watches, in that order', () => {
    assert.deepEqual(
      restartPause({
        workload: { [PAUSED]: 'true' },
        namespace: { name: 'prod', annotations: { [PAUSED]: 'True' } },
        configs: [
          { key: B, annotations: { [PAUSED]: '1' } },
          { key: A, annotations: { [PAUSED]: 'true' } },
        ],
      }),
      { by: ['workload', 'namespace prod', A, B], warnings: [] },
    );
  });

  it('false, empty or absent values pause nothing; a namespace not read pauses nothing', () => {
    assert.deepEqual(
      restartPause({
        workload: { [PAUSED]: 'false' },
        configs: [
          { key: A, annotations: { [PAUSED]: '' } },
          { key: B, annotations: undefined },
        ],
      }),
      { by: [], warnings: [] },
    );
  });

  it('a value that is not a boolean warns and pauses nothing', () => {
    const pause = restartPause({
      workload: { [PAUSED]: 'yes' },
      namespace: { name: 'prod', annotations: { [PAUSED]: 'please' } },
    });
    assert.deepEqual(pause.by, []);
    assert.deepEqual(pause.warnings, [
      `the workload: ${PAUSED}="yes" is not a boolean; not paused`,
      `namespace prod: ${PAUSED}="please" is not a boolean; not paused`,
    ]);
  });

  it('notices: the pause once, the held changes apart, warnings always; nothing for a workload not opted in', () => {
    const pause = { by: ['namespace prod'], warnings: ['w'] };
    const notices = pauseNotices(pause, [A], true);
    assert.deepEqual(
      notices.map((n) => [n.type, n.reason]),
      [
        ['Warning', 'InvalidAnnotation'],
        ['Normal', 'ConfigRestartPaused'],
        ['Normal', 'ConfigRestartPaused'],
      ],
    );
    assert.match(notices[1]!.message, /paused by namespace prod/);
    assert.match(notices[2]!.message, /held until the pause is lifted: configmap\/prod\/a changed/);
    assert.deepEqual(pauseNotices(pause, [], true).length, 2);
    assert.deepEqual(
      pauseNotices(pause, [A], false).map((n) => n.reason),
      ['InvalidAnnotation'],
    );
  });
});

describe('decideRestart R7: a pause holds changes without losing them', () => {
  it('a changed config restarts nothing while paused and keeps its applied checksum', () => {
    const d = decide({ applied: { [A]: 'v1' }, current: { [A]: 'v2' }, paused: ['workload'] });
    assert.equal(d.action, 'nothing');
    assert.deepEqual(d.held, [A]);
    assert.match(d.reason, /held/);
    const after = decide({ applied: { [A]: 'v1' }, current: { [A]: 'v2' } });
    assert.equal(after.action, 'restart');
    assert.deepEqual(after.held, []);
  });

  it('a config changed and changed back while paused restarts nothing after the pause', () => {
    assert.equal(decide({ applied: { [A]: 'v1' }, current: { [A]: 'v1' }, paused: ['workload'] }).action, 'nothing');
    assert.equal(decide({ applied: { [A]: 'v1' }, current: { [A]: 'v1' } }).action, 'nothing');
  });

  it('a new reference is still recorded while paused (no restart): the pods run it already', () => {
    const d = decide({ applied: { [A]: 'v1' }, current: { [A]: 'v2', [B]: 's1' }, paused: ['workload'] });
    assert.equal(d.action, 'update-annotation-only');
    assert.ok(d.action === 'update-annotation-only');
    assert.deepEqual(Object.fromEntries(d.applied), { [A]: 'v1', [B]: 's1' }, 'A held at v1, B recorded');
    assert.deepEqual(d.held, [A]);
  });

  it('R3 while paused records the first-seen checksum, so the change restarts once the pause is lifted', () => {
    const pending: PendingChange = {
      firstAt: NOW - 10,
      lastAt: NOW - 10,
      observations: 1,
      firstSeen: new Map([[B, 's1']]),
    };
    const d = decide({ applied: {}, current: { [B]: 's2' }, pending, paused: [B] });
    assert.ok(d.action === 'update-annotation-only');
    assert.deepEqual(Object.fromEntries(d.applied), { [B]: 's1' });
    assert.equal(decide({ applied: { [B]: 's1' }, current: { [B]: 's2' } }).action, 'restart');
  });

  it('a deletion with --reload-on-delete is held: the recorded checksum stays, the restart comes after the pause', () => {
    const onMissing = { reloadOnCreate: false, reloadOnDelete: true };
    const d = decide({ applied: { [A]: 'v1' }, current: { [A]: MISSING }, onMissing, paused: [A] });
    assert.equal(d.action, 'nothing');
    assert.deepEqual(d.held, [A]);
    const after = decide({ applied: { [A]: 'v1' }, current: { [A]: MISSING }, onMissing });
    assert.equal(after.action, 'restart');
  });

  const value = fc.constantFrom('v1', 'v2', 'v3', MISSING);
  const keys = [A, B, 'configmap/prod/c'];
  const state = fc.tuple(value, value, value).map((vs) => new Map(keys.map((k, i) => [k, vs[i]!])));
  const onMissing = fc.record({ reloadOnCreate: fc.boolean(), reloadOnDelete: fc.boolean() });

  it('property: a paused workload is never restarted, whatever it is given', () => {
    fc.assert(
      fc.property(
        state,
        state,
        fc.option(state, { nil: undefined }),
        onMissing,
        fc.integer({ min: 0, max: 10_000 }),
        (applied, current, firstSeen, missing, grace) => {
          const d = decide({
            applied,
            current,
            onMissing: missing,
            paused: ['workload'],
            settings: { gracePeriodMs: grace, maxWaitMs: grace },
            ...(firstSeen ? { pending: { firstAt: NOW - 5, lastAt: NOW - 5, observations: 1, firstSeen } } : {}),
          });
          assert.notEqual(d.action, 'restart');
          if (d.action === 'update-annotation-only') assert.deepEqual(d.held, d.held.slice().sort());
        },
      ),
    );
  });

  /** What the executor does: act on each decision (grace 0) and decide again until there is nothing to write. */
  function settle(applied: Map<string, string>, current: Map<string, string>, input: Partial<RestartInput>) {
    let restarts = 0;
    for (let i = 0; i < 4; i++) {
      const d = decide({ ...input, applied, current });
      if (d.action === 'nothing') return { applied, restarts };
      assert.notEqual(d.action, 'wait-until', 'grace 0 acts at once');
      if (d.action === 'restart') restarts++;
      if (d.action === 'restart' || d.action === 'update-annotation-only') applied = d.applied;
    }
    assert.fail('deciding again after a write must settle');
  }

  it('property: after a pause, exactly one restart iff the final configs differ from the record at the pause', () => {
    fc.assert(
      fc.property(state, fc.array(state, { minLength: 1, maxLength: 6 }), onMissing, (start, during, missing) => {
        // Every key recorded before the pause: what the pods run.
        let applied = new Map<string, string>(start);
        for (const current of during) {
          const s = settle(applied, current, { onMissing: missing, paused: ['namespace prod'] });
          assert.equal(s.restarts, 0, 'never restarted while paused');
          applied = s.applied;
        }
        const last = during.at(-1)!;
        const after = settle(applied, last, { onMissing: missing });
        // As if one decision had been made, from the record at the pause, on the final configs.
        const expected = decide({ applied: start, current: last, onMissing: missing }).action === 'restart' ? 1 : 0;
        assert.equal(after.restarts, expected);
        // And then nothing more: the record is what the pods run.
        assert.equal(settle(after.applied, last, { onMissing: missing }).restarts, 0);
      }),
    );
  });
});
