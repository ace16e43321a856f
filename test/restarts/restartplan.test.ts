import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Pod } from '../../src/runtime/kube/types.ts';
import {
  XING_CHECKSUMS_ANNOTATION as APPLIED,
  XING_ENABLED_ANNOTATION as ENABLED,
  XING_TIMESTAMP_ANNOTATION as TIMESTAMP,
} from '../../src/vocabulary/keys.ts';
import {
  MISSING,
  appliedChecksumsOf,
  formatAppliedChecksums,
  isOptedIn,
  parseAppliedChecksums,
  restartTimestampOf,
  workloadKey,
  type WorkloadRef,
} from '../../src/restarts/checksums.ts';
import {
  due,
  dueAt,
  observeChange,
  resolveRestartSettings,
  type PendingChange,
  type RestartSettings,
} from '../../src/restarts/debounce.ts';
import {
  nextOutdatedPod,
  onDeleteEvent,
  outdatedPods,
  restartMode,
  skipNotices,
  updateTarget,
} from '../../src/restarts/ondelete.ts';
import {
  annotationPatch,
  formatRestartTimestamp,
  nextRestartTimestamp,
  restartPatch,
  type WorkloadPatch,
} from '../../src/restarts/patches.ts';
import { decideRestart, type RestartDecision, type RestartInput } from '../../src/restarts/restartplan.ts';

const NOW = Date.UTC(2024, 0, 2, 12, 0, 0);
const SEC = 1000;
const GRACE = 5 * SEC;
const SETTINGS: RestartSettings = { gracePeriodMs: GRACE, maxWaitMs: 60 * SEC };
const WL: WorkloadRef = { kind: 'Deployment', namespace: 'ns', name: 'app' };
const CM_A = 'configmap/ns/a';
const CM_B = 'configmap/ns/b';
const SEC_C = 'secret/ns/c';

type Checksums = Record<string, string>;

function decide(
  over: Partial<RestartInput> & { applied: Checksums | Map<string, string>; current: Checksums },
): RestartDecision {
  return decideRestart({ workload: WL, optedIn: true, now: NOW, settings: SETTINGS, ...over });
}

/** Decide with a burst that started long enough ago to be due, seen with `firstSeen` (default: `current`). */
function decideDue(
  over: Partial<RestartInput> & { applied: Checksums | Map<string, string>; current: Checksums; firstSeen?: Checksums },
): RestartDecision {
  const pending = observeChange(undefined, NOW - GRACE, over.firstSeen ?? over.current);
  return decide({ pending, ...over });
}

function plain(m: ReadonlyMap<string, string>): Checksums {
  return Object.fromEntries(m);
}

/** RFC 7386 JSON merge patch, enough for the patches under test. */
function mergePatch<T>(target: T, patch: unknown): T {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch as T;
  const out: Record<string, unknown> =
    typeof target === 'object' && target !== null && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out as T;
}

interface WorkloadObject {
  metadata: { name: string; namespace: string; resourceVersion?: string; annotations: Record<string, string> };
  spec: { template: { metadata: { annotations?: Record<string, string> } } };
}

function workloadObject(
  annotations: Record<string, string> = {},
  template: Record<string, string> = {},
): WorkloadObject {
  return {
    metadata: { name: 'app', namespace: 'ns', annotations: { [ENABLED]: 'enabled', ...annotations } },
    spec: { template: { metadata: { annotations: template } } },
  };
}

describe('annotations and their parsing', { timeout: 10000 }, () => {
  it("uses xing's exact keys and opt-in value", () => {
    assert.equal(ENABLED, 'com.xing.deployment-restart');
    assert.equal(APPLIED, 'com.xing.deployment-restart.applied-config-checksums');
    assert.equal(TIMESTAMP, 'com.xing.deployment-restart.timestamp');
    assert.equal(isOptedIn({ [ENABLED]: 'enabled' }), true);
    for (const other of ['Enabled', 'true', '', ' enabled', 'disabled'])
      assert.equal(isOptedIn({ [ENABLED]: other }), false, other);
    assert.equal(isOptedIn({}), false);
    assert.equal(isOptedIn(undefined), false);
  });

  it('names workloads as xing does (lower-case kind/namespace/name)', () => {
    assert.equal(workloadKey(WL), 'deployment/ns/app');
    assert.equal(workloadKey({ kind: 'StatefulSet', namespace: 'db', name: 'pg' }), 'statefulset/db/pg');
    assert.equal(
      workloadKey({ kind: 'DaemonSet', namespace: 'kube-system', name: 'agent' }),
      'daemonset/kube-system/agent',
    );
  });

  it("writes the annotation byte-for-byte as xing's README example (sorted keys, compact)", () => {
    const value = formatAppliedChecksums({
      'secret/namespace-one/secret-two': '6e79832c18c31594',
      'configmap/namespace-one/config-one': '189832cc316e7594',
    });
    assert.equal(
      value,
      '{"configmap/namespace-one/config-one":"189832cc316e7594","secret/namespace-one/secret-two":"6e79832c18c31594"}',
    );
    assert.deepEqual(plain(parseAppliedChecksums(value).checksums), {
      'configmap/namespace-one/config-one': '189832cc316e7594',
      'secret/namespace-one/secret-two': '6e79832c18c31594',
    });
    assert.equal(formatAppliedChecksums(new Map()), '{}');
  });

  it('reads an absent, empty or malformed annotation as an empty map, warning only when malformed, never throwing', () => {
    assert.deepEqual(parseAppliedChecksums(undefined), { checksums: new Map() });
    assert.deepEqual(parseAppliedChecksums(''), { checksums: new Map() });
    for (const bad of ['{', 'not json', '[]', '["a"]', 'null', '42', '"x"', 'true']) {
      const r = parseAppliedChecksums(bad);
      assert.equal(r.checksums.size, 0, bad);
      assert.ok(r.warning?.includes(APPLIED), bad);
    }
    const partial = parseAppliedChecksums('{"configmap/ns/a":"h1","configmap/ns/b":7,"secret/ns/c":null}');
    assert.deepEqual(plain(partial.checksums), { [CM_A]: 'h1' });
    assert.match(partial.warning ?? '', /configmap\/ns\/b, secret\/ns\/c/);
    // A __proto__ key is data, not a prototype.
    const proto = parseAppliedChecksums('{"__proto__":"h1"}');
    assert.equal(proto.checksums.get('__proto__'), 'h1');
    assert.equal(formatAppliedChecksums(proto.checksums), '{"__proto__":"h1"}');
  });

  it('never throws on any string', () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        const r = parseAppliedChecksums(s);
        for (const v of r.checksums.values()) assert.equal(typeof v, 'string');
      }),
    );
  });

  it('reads applied checksums and the trigger from a workload object', () => {
    const obj = workloadObject({ [APPLIED]: '{"configmap/ns/a":"h1"}' }, { [TIMESTAMP]: 'Jan  2 11:00:00' });
    assert.deepEqual(plain(appliedChecksumsOf(obj).checksums), { [CM_A]: 'h1' });
    assert.equal(restartTimestampOf(obj), 'Jan  2 11:00:00');
    assert.equal(restartTimestampOf({}), undefined);
  });
});

describe("decision rules (xing's, from its README)", { timeout: 10000 }, () => {
  it('opting in records the checksums of every referenced config and restarts nothing', () => {
    const d = decideDue({ applied: {}, current: { [CM_A]: 'h1', [SEC_C]: 'h2' } });
    assert.equal(d.action, 'update-annotation-only');
    assert.ok(d.action === 'update-annotation-only');
    assert.equal(d.annotation, '{"configmap/ns/a":"h1","secret/ns/c":"h2"}');
    assert.deepEqual(
      d.changes.map((c) => c.change),
      ['added', 'added'],
    );
    assert.deepEqual(d.patch, { metadata: { annotations: { [APPLIED]: d.annotation } } });
  });

  it('a workload that is not opted in (or no longer is) is left alone, even with a changed config', () => {
    const d = decideDue({
      optedIn: false,
      applied: { [CM_A]: 'h1' },
      current: { [CM_A]: 'h2' },
      firstSeen: { [CM_A]: 'h1' },
    });
    assert.equal(d.action, 'nothing');
    assert.equal(d.pending, undefined, 'a pending burst is dropped');
    assert.match(d.reason, /not opted in/);
  });

  it('a config whose applied checksum changes restarts the workload, checksums and trigger in one patch', () => {
    const d = decideDue({
      applied: { [CM_A]: 'h1', [SEC_C]: 's1' },
      current: { [CM_A]: 'h2', [SEC_C]: 's1' },
      firstSeen: { [CM_A]: 'h1', [SEC_C]: 's1' },
    });
    assert.ok(d.action === 'restart', d.reason);
    assert.deepEqual(d.restartedBy, [CM_A]);
    assert.deepEqual(d.changes, [{ key: CM_A, change: 'changed', from: 'h1', to: 'h2' }]);
    assert.deepEqual(d.patch, {
      metadata: { annotations: { [APPLIED]: '{"configmap/ns/a":"h2","secret/ns/c":"s1"}' } },
      spec: { template: { metadata: { annotations: { [TIMESTAMP]: '2024-01-02T12:00:00.000Z' } } } },
    });
  });

  it('a newly referenced config is recorded without a restart', () => {
    const d = decideDue({ applied: { [CM_A]: 'h1' }, current: { [CM_A]: 'h1', [CM_B]: 'b1' } });
    assert.ok(d.action === 'update-annotation-only');
    assert.deepEqual(d.changes, [{ key: CM_B, change: 'added', to: 'b1' }]);
  });

  it('a newly referenced config that changed again before its checksum was recorded restarts', () => {
    // xing: the config's change counter > 1. Here: created (first seen b1), then updated to b2.
    const created = observeChange(undefined, NOW - 4 * SEC, { [CM_A]: 'h1', [CM_B]: MISSING });
    const seen = observeChange(created, NOW - 3 * SEC, { [CM_A]: 'h1', [CM_B]: 'b1' });
    const updated = observeChange(seen, NOW - 2 * SEC, { [CM_A]: 'h1', [CM_B]: 'b2' });
    const d = decide({
      applied: { [CM_A]: 'h1' },
      current: { [CM_A]: 'h1', [CM_B]: 'b2' },
      pending: updated,
      now: NOW + 3 * SEC,
    });
    assert.ok(d.action === 'restart', d.reason);
    assert.deepEqual(d.changes, [{ key: CM_B, change: 'changed-again', from: 'b1', to: 'b2' }]);
    assert.match(d.reason, /changed again before its checksum was recorded: configmap\/ns\/b/);
  });

  it("R3 beyond xing: an existing config newly referenced and changed once restarts (xing's TODO)", () => {
    const added = observeChange(undefined, NOW - 4 * SEC, { [CM_A]: 'h1', [CM_B]: 'b1' });
    const changed = observeChange(added, NOW - 3 * SEC, { [CM_A]: 'h1', [CM_B]: 'b2' });
    const d = decide({
      applied: { [CM_A]: 'h1' },
      current: { [CM_A]: 'h1', [CM_B]: 'b2' },
      pending: changed,
      now: NOW + 2 * SEC,
    });
    assert.equal(d.action, 'restart');
  });

  it('R3 beyond xing: a config changed twice before the workload referenced it does not restart', () => {
    // The changes happened before the reference: the pods of the spec rollout start with b3.
    const referenced = observeChange(undefined, NOW - GRACE, { [CM_A]: 'h1', [CM_B]: 'b3' });
    const d = decide({ applied: { [CM_A]: 'h1' }, current: { [CM_A]: 'h1', [CM_B]: 'b3' }, pending: referenced });
    assert.equal(d.action, 'update-annotation-only');
  });

  it('a config no longer referenced is dropped from the annotation without a restart', () => {
    const d = decideDue({ applied: { [CM_A]: 'h1', [CM_B]: 'b1' }, current: { [CM_A]: 'h1' } });
    assert.ok(d.action === 'update-annotation-only');
    assert.equal(d.annotation, '{"configmap/ns/a":"h1"}');
    assert.deepEqual(d.changes, [{ key: CM_B, change: 'removed', from: 'b1' }]);
  });

  it('a removed reference and a changed one give one restart that also drops the removed one', () => {
    const d = decideDue({
      applied: { [CM_A]: 'h1', [CM_B]: 'b1' },
      current: { [CM_A]: 'h2' },
      firstSeen: { [CM_A]: 'h1' },
    });
    assert.ok(d.action === 'restart');
    assert.equal(d.annotation, '{"configmap/ns/a":"h2"}');
    assert.deepEqual(
      d.changes.map((c) => c.change),
      ['changed', 'removed'],
    );
  });

  it('several changed configs give one patch with one restart', () => {
    const d = decideDue({
      applied: { [CM_A]: 'h1', [CM_B]: 'b1', [SEC_C]: 's1' },
      current: { [CM_A]: 'h2', [CM_B]: 'b2', [SEC_C]: 's2' },
      firstSeen: { [CM_A]: 'h1' },
    });
    assert.ok(d.action === 'restart');
    assert.deepEqual(d.restartedBy, [CM_A, CM_B, SEC_C]);
  });

  it('a config not created yet is not recorded and restarts nothing; when it appears it is a new reference', () => {
    const before = decideDue({ applied: { [CM_A]: 'h1' }, current: { [CM_A]: 'h1', [CM_B]: MISSING } });
    assert.equal(before.action, 'nothing');
    assert.deepEqual(before.missing, [CM_B]);
    const appeared = decideDue({ applied: { [CM_A]: 'h1' }, current: { [CM_A]: 'h1', [CM_B]: 'b1' } });
    assert.ok(appeared.action === 'update-annotation-only');
    assert.deepEqual(appeared.changes, [{ key: CM_B, change: 'added', to: 'b1' }]);
  });

  it('a deleted config keeps its recorded checksum; recreated with other content it restarts, with the same content nothing', () => {
    const deleted = decideDue({ applied: { [CM_A]: 'h1', [CM_B]: 'b1' }, current: { [CM_A]: 'h1', [CM_B]: MISSING } });
    assert.equal(deleted.action, 'nothing');
    assert.match(deleted.reason, /not found, left as recorded: configmap\/ns\/b/);
    const same = decideDue({ applied: { [CM_A]: 'h1', [CM_B]: 'b1' }, current: { [CM_A]: 'h1', [CM_B]: 'b1' } });
    assert.equal(same.action, 'nothing');
    const other = decideDue({ applied: { [CM_A]: 'h1', [CM_B]: 'b1' }, current: { [CM_A]: 'h1', [CM_B]: 'b2' } });
    assert.equal(other.action, 'restart');
  });

  it('--reload-on-create records a missing config as missing; its appearance then restarts, once', () => {
    const onMissing = { reloadOnCreate: true, reloadOnDelete: false };
    const awaited = decideDue({ applied: { [CM_A]: 'h1' }, current: { [CM_A]: 'h1', [CM_B]: MISSING }, onMissing });
    assert.ok(awaited.action === 'update-annotation-only');
    assert.deepEqual(awaited.changes, [{ key: CM_B, change: 'awaited', to: MISSING }]);
    assert.equal(awaited.annotation, '{"configmap/ns/a":"h1","configmap/ns/b":"missing"}');
    const still = decideDue({ applied: awaited.applied, current: { [CM_A]: 'h1', [CM_B]: MISSING }, onMissing });
    assert.equal(still.action, 'nothing');
    const appeared = decideDue({ applied: awaited.applied, current: { [CM_A]: 'h1', [CM_B]: 'b1' }, onMissing });
    assert.ok(appeared.action === 'restart');
    assert.deepEqual(appeared.restartedBy, [CM_B]);
    const after = decideDue({ applied: appeared.applied, current: { [CM_A]: 'h1', [CM_B]: 'b1' }, onMissing });
    assert.equal(after.action, 'nothing');
  });

  it('--reload-on-delete restarts once when an applied config is deleted, and again when it comes back', () => {
    const onMissing = { reloadOnCreate: false, reloadOnDelete: true };
    const applied = { [CM_A]: 'h1', [CM_B]: 'b1' };
    const deleted = decideDue({ applied, current: { [CM_A]: 'h1', [CM_B]: MISSING }, onMissing });
    assert.ok(deleted.action === 'restart');
    assert.deepEqual(deleted.restartedBy, [CM_B]);
    assert.deepEqual(deleted.changes, [{ key: CM_B, change: 'deleted', from: 'b1' }]);
    assert.equal(deleted.applied.get(CM_B), MISSING);
    const again = decideDue({ applied: deleted.applied, current: { [CM_A]: 'h1', [CM_B]: MISSING }, onMissing });
    assert.equal(again.action, 'nothing');
    const back = decideDue({ applied: deleted.applied, current: { [CM_A]: 'h1', [CM_B]: 'b1' }, onMissing });
    assert.equal(back.action, 'restart');
  });

  it("a missing config next to a changed one: the restart keeps the missing one's recorded checksum", () => {
    const d = decideDue({
      applied: { [CM_A]: 'h1', [CM_B]: 'b1' },
      current: { [CM_A]: 'h2', [CM_B]: MISSING },
      firstSeen: { [CM_A]: 'h1' },
    });
    assert.ok(d.action === 'restart');
    assert.equal(d.annotation, '{"configmap/ns/a":"h2","configmap/ns/b":"b1"}');
  });

  it('a removed checksum annotation is restored without a restart', () => {
    const d = decideDue({ applied: parseAppliedChecksums(undefined).checksums, current: { [CM_A]: 'h1' } });
    assert.equal(d.action, 'update-annotation-only');
  });

  it('a malformed annotation is rewritten without a restart', () => {
    const parsed = parseAppliedChecksums('{"configmap/ns/a": h1');
    assert.ok(parsed.warning);
    const d = decideDue({ applied: parsed.checksums, current: { [CM_A]: 'h9' } });
    assert.ok(d.action === 'update-annotation-only');
    assert.equal(d.annotation, '{"configmap/ns/a":"h9"}');
  });

  it('an opted-in workload with nothing changed (a resync) does nothing and keeps no burst', () => {
    const d = decide({
      applied: { [CM_A]: 'h1' },
      current: { [CM_A]: 'h1' },
      pending: observeChange(undefined, NOW, { [CM_A]: 'h1' }),
    });
    assert.equal(d.action, 'nothing');
    assert.equal(d.pending, undefined);
    assert.equal(
      decide({ applied: {}, current: {} }).action,
      'nothing',
      'no references and no annotation: nothing to write',
    );
  });

  it('a change back to the applied content within the burst restarts nothing', () => {
    let p = observeChange(undefined, NOW - 3 * SEC, { [CM_A]: 'h2' });
    p = observeChange(p, NOW - 2 * SEC, { [CM_A]: 'h1' });
    assert.equal(
      decide({ applied: { [CM_A]: 'h1' }, current: { [CM_A]: 'h1' }, pending: p, now: NOW + 10 * SEC }).action,
      'nothing',
    );
  });

  it('changes made while no controller ran restart once it sees the workload, after the grace period', () => {
    const first = decide({ applied: { [CM_A]: 'h1' }, current: { [CM_A]: 'h2' } });
    assert.ok(first.action === 'wait-until');
    assert.equal(first.until, NOW + GRACE);
    const later = decide({
      applied: { [CM_A]: 'h1' },
      current: { [CM_A]: 'h2' },
      pending: first.pending,
      now: first.until,
    });
    assert.equal(later.action, 'restart');
    // With no grace period it acts at once.
    assert.equal(
      decide({ applied: { [CM_A]: 'h1' }, current: { [CM_A]: 'h2' }, settings: { gracePeriodMs: 0, maxWaitMs: 0 } })
        .action,
      'restart',
    );
  });

  it('works the same for StatefulSets and DaemonSets', () => {
    for (const kind of ['StatefulSet', 'DaemonSet'] as const) {
      const d = decideDue({
        workload: { kind, namespace: 'ns', name: 'x' },
        applied: { [CM_A]: 'h1' },
        current: { [CM_A]: 'h2' },
        firstSeen: { [CM_A]: 'h1' },
      });
      assert.ok(d.action === 'restart');
      assert.match(d.reason, new RegExp(`${kind.toLowerCase()}/ns/x`));
    }
  });

  it('taking over from xing: an applied xing checksum of the same content is rewritten, not restarted', () => {
    const legacyCurrent = { [CM_A]: '189832cc316e7594' };
    const same = decideDue({ applied: { [CM_A]: '189832cc316e7594' }, current: { [CM_A]: 'v1:aa' }, legacyCurrent });
    assert.ok(same.action === 'update-annotation-only', same.reason);
    assert.deepEqual(same.changes, [{ key: CM_A, change: 'migrated', from: '189832cc316e7594', to: 'v1:aa' }]);
    assert.equal(same.annotation, '{"configmap/ns/a":"v1:aa"}');
    const changed = decideDue({ applied: { [CM_A]: '0000000000000000' }, current: { [CM_A]: 'v1:aa' }, legacyCurrent });
    assert.equal(changed.action, 'restart');
    assert.equal(
      decideDue({ applied: { [CM_A]: '189832cc316e7594' }, current: { [CM_A]: 'v1:aa' } }).action,
      'restart',
      'without the legacy checksum it is a change',
    );
  });

  it('carries the resourceVersion precondition and the previous trigger into the patch', () => {
    const d = decideDue({
      applied: { [CM_A]: 'h1' },
      current: { [CM_A]: 'h2' },
      firstSeen: { [CM_A]: 'h1' },
      resourceVersion: '42',
      previousTimestamp: '2024-01-02T12:00:00.000Z',
    });
    assert.ok(d.action === 'restart');
    assert.equal(d.patch.metadata.resourceVersion, '42');
    assert.equal(d.patch.spec?.template.metadata.annotations[TIMESTAMP], '2024-01-02T12:00:00.001Z');
    const g = decideDue({
      applied: { [CM_A]: 'h1' },
      current: { [CM_A]: 'h2' },
      firstSeen: { [CM_A]: 'h1' },
      timestampFormat: 'go-stamp',
    });
    assert.ok(g.action === 'restart');
    assert.equal(g.patch.spec?.template.metadata.annotations[TIMESTAMP], 'Jan  2 12:00:00');
  });
});

describe('debounce', { timeout: 10000 }, () => {
  it("a change waits the grace period; due at exactly grace (≥, as xing's age check)", () => {
    const p = observeChange(undefined, NOW);
    assert.deepEqual(
      { firstAt: p.firstAt, lastAt: p.lastAt, observations: p.observations },
      { firstAt: NOW, lastAt: NOW, observations: 1 },
    );
    assert.equal(dueAt(p, SETTINGS), NOW + GRACE);
    assert.equal(due(p, NOW + GRACE - 1, SETTINGS), false);
    assert.equal(due(p, NOW + GRACE, SETTINGS), true);
  });

  it('a further change extends the window (xing does not: its caveat of two restarts for configs updated 6 s apart)', () => {
    const applied = { [CM_A]: 'h1', [CM_B]: 'b1' };
    let p = observeChange(undefined, NOW, { [CM_A]: 'h2', [CM_B]: 'b1' });
    // At NOW+4s nothing is due yet.
    const early = decide({ applied, current: { [CM_A]: 'h2', [CM_B]: 'b1' }, pending: p, now: NOW + 4 * SEC });
    assert.ok(early.action === 'wait-until');
    p = observeChange(early.pending, NOW + 4 * SEC, { [CM_A]: 'h2', [CM_B]: 'b2' });
    assert.equal(dueAt(p, SETTINGS), NOW + 9 * SEC);
    const mid = decide({ applied, current: { [CM_A]: 'h2', [CM_B]: 'b2' }, pending: p, now: NOW + 6 * SEC });
    assert.ok(mid.action === 'wait-until');
    assert.equal(mid.until, NOW + 9 * SEC);
    const end = decide({ applied, current: { [CM_A]: 'h2', [CM_B]: 'b2' }, pending: p, now: NOW + 9 * SEC });
    assert.ok(end.action === 'restart');
    assert.deepEqual(end.restartedBy, [CM_A, CM_B], 'both changes in one restart');
  });

  it("maxWaitMs = gracePeriodMs is xing's fixed window from the first change", () => {
    const xing = { gracePeriodMs: GRACE, maxWaitMs: GRACE };
    let p = observeChange(undefined, NOW);
    p = observeChange(p, NOW + 4 * SEC);
    assert.equal(p.observations, 2);
    assert.equal(dueAt(p, xing), NOW + GRACE);
  });

  it('a config that keeps changing still rolls by first change + maxWaitMs', () => {
    let p = observeChange(undefined, NOW);
    for (let t = NOW + SEC; t < NOW + 120 * SEC; t += SEC) p = observeChange(p, t);
    assert.equal(dueAt(p, SETTINGS), NOW + 60 * SEC);
  });

  it('a clock stepping back never shortens the window', () => {
    const p = observeChange(observeChange(undefined, NOW + 3 * SEC), NOW);
    assert.equal(p.lastAt, NOW + 3 * SEC);
  });

  it("debounces on `now` (the executor's monotonic clock) and stamps and reports `wallNow`", () => {
    const mono = 42 * SEC; // any origin: only differences count
    const applied = { [CM_A]: 'h1' };
    const current = { [CM_A]: 'h2' };
    const waiting = decide({ applied, current, now: mono, wallNow: NOW });
    assert.ok(waiting.action === 'wait-until');
    assert.equal(waiting.until, mono + GRACE);
    assert.match(waiting.reason, /waiting until 2024-01-02T12:00:05\.000Z for more changes/);
    // The wall clock stepped an hour back meanwhile: the burst is due all the same.
    const due = decide({
      applied,
      current,
      pending: waiting.pending,
      now: mono + GRACE,
      wallNow: NOW - 3_600_000 + GRACE,
    });
    assert.ok(due.action === 'restart');
    assert.equal(
      due.patch.spec?.template.metadata.annotations[TIMESTAMP],
      '2024-01-02T11:00:05.000Z',
      'the trigger is a wall-clock timestamp',
    );
  });

  it('settings: defaults 5 s and 60 s; bad values take the default; maxWait never below grace', () => {
    assert.deepEqual(resolveRestartSettings(), { gracePeriodMs: 5000, maxWaitMs: 60000 });
    assert.deepEqual(resolveRestartSettings({ gracePeriodMs: 10_000, maxWaitMs: 1_000 }), {
      gracePeriodMs: 10_000,
      maxWaitMs: 10_000,
    });
    assert.deepEqual(resolveRestartSettings({ gracePeriodMs: -1, maxWaitMs: Number.NaN }), {
      gracePeriodMs: 5000,
      maxWaitMs: 60000,
    });
    assert.deepEqual(resolveRestartSettings({ gracePeriodMs: 0, maxWaitMs: 0 }), { gracePeriodMs: 0, maxWaitMs: 0 });
  });

  it('observeChange keeps the first non-missing checksum of each reference', () => {
    let p = observeChange(undefined, NOW, { [CM_A]: MISSING });
    assert.equal(p.firstSeen.size, 0);
    p = observeChange(p, NOW + 1, { [CM_A]: 'a1' });
    p = observeChange(p, NOW + 2, { [CM_A]: 'a2', [CM_B]: 'b1' });
    p = observeChange(p, NOW + 3);
    assert.deepEqual(plain(p.firstSeen), { [CM_A]: 'a1', [CM_B]: 'b1' });
  });

  it('a wait fills in first sightings the burst lacked, so a later change of those is R3', () => {
    const p = observeChange(undefined, NOW); // observed without checksums
    const w = decide({ applied: {}, current: { [CM_A]: 'a1' }, pending: p, now: NOW + SEC });
    assert.ok(w.action === 'wait-until');
    assert.equal(w.pending.firstSeen.get(CM_A), 'a1');
    assert.equal(
      decide({
        applied: {},
        current: { [CM_A]: 'a2' },
        pending: observeChange(w.pending, NOW + 2 * SEC),
        now: NOW + 8 * SEC,
      }).action,
      'restart',
    );
  });
});

describe('patches and the restart trigger', { timeout: 10000 }, () => {
  it("formats the trigger as RFC 3339 (default) or xing's Go time.Stamp", () => {
    assert.equal(formatRestartTimestamp(NOW + 5), '2024-01-02T12:00:00.005Z');
    assert.equal(formatRestartTimestamp(NOW, 'go-stamp'), 'Jan  2 12:00:00');
    assert.equal(formatRestartTimestamp(Date.UTC(2024, 11, 25, 3, 4, 5), 'go-stamp'), 'Dec 25 03:04:05');
  });

  it("a new trigger always differs from the template's current one", () => {
    assert.equal(nextRestartTimestamp(NOW, 'Jan  2 12:00:00', 'go-stamp'), 'Jan  2 12:00:01');
    assert.equal(nextRestartTimestamp(NOW, undefined, 'go-stamp'), 'Jan  2 12:00:00');
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4e12 }),
        fc.constantFrom('rfc3339' as const, 'go-stamp' as const),
        (t, format) => {
          const prev = formatRestartTimestamp(t, format);
          assert.notEqual(nextRestartTimestamp(t, prev, format), prev);
        },
      ),
    );
  });

  it("xing's patch shape: annotation alone, or annotation and template trigger together", () => {
    assert.deepEqual(annotationPatch({ applied: { [CM_A]: 'h1' } }), {
      metadata: { annotations: { [APPLIED]: '{"configmap/ns/a":"h1"}' } },
    });
    const p: WorkloadPatch = restartPatch({
      applied: new Map([[CM_A, 'h1']]),
      now: NOW,
      format: 'go-stamp',
      resourceVersion: '7',
    });
    assert.deepEqual(p, {
      metadata: { annotations: { [APPLIED]: '{"configmap/ns/a":"h1"}' }, resourceVersion: '7' },
      spec: { template: { metadata: { annotations: { [TIMESTAMP]: 'Jan  2 12:00:00' } } } },
    });
    const applied = mergePatch(workloadObject({ other: 'kept' }, { keep: 'me' }), p);
    assert.equal(applied.metadata.annotations.other, 'kept');
    assert.equal(applied.spec.template.metadata.annotations?.keep, 'me');
    assert.deepEqual(plain(appliedChecksumsOf(applied).checksums), { [CM_A]: 'h1' });
  });
});

describe('OnDelete workloads', { timeout: 10000 }, () => {
  const sts = (strategy: string | undefined, labels: Record<string, string> = {}) => ({
    metadata: { name: 'db', namespace: 'ns', labels },
    spec: strategy === undefined ? {} : { updateStrategy: { type: strategy } },
  });

  it('classifies how a template change reaches the pods', () => {
    assert.equal(restartMode('Deployment', { metadata: { name: 'app' } }).mode, 'rolling');
    assert.equal(restartMode('StatefulSet', sts(undefined)).mode, 'rolling', 'RollingUpdate is the default');
    assert.equal(restartMode('StatefulSet', sts('RollingUpdate', { 'rollout-group': 'ingester' })).mode, 'rolling');
    assert.equal(restartMode('StatefulSet', sts('OnDelete', { 'rollout-group': 'ingester' })).mode, 'rollout-group');
    assert.equal(
      restartMode('StatefulSet', sts('OnDelete', { 'rollout-group': '' })).mode,
      'rollout-group',
      'label present, as the rollout selects',
    );
    assert.equal(restartMode('StatefulSet', sts('OnDelete')).mode, 'standalone-ondelete');
    assert.equal(
      restartMode('DaemonSet', sts('OnDelete', { 'rollout-group': 'x' })).mode,
      'standalone-ondelete',
      'rollout groups are StatefulSets only',
    );
    assert.equal(restartMode('DaemonSet', sts('RollingUpdate')).mode, 'rolling');
  });

  const pod = (name: string, revision: string, opts: { ready?: boolean; terminating?: boolean } = {}): Pod => ({
    metadata: {
      name,
      labels: { 'controller-revision-hash': revision },
      ...(opts.terminating ? { deletionTimestamp: '2024-01-02T12:00:00Z' } : {}),
    },
    status: {
      phase: 'Running',
      containerStatuses: [
        { name: 'c', image: 'i', imageID: '', restartCount: 0, ready: opts.ready ?? true, state: { running: {} } },
      ],
    },
  });

  it('counts outdated pods and words the Event', () => {
    const pods = [pod('db-0', 'new'), pod('db-1', 'old'), pod('db-2', 'old')];
    assert.deepEqual(outdatedPods(pods, 'new'), ['db-1', 'db-2']);
    const generation = (name: string, g: string): Pod => ({
      metadata: { name, labels: { 'pod-template-generation': g } },
    });
    assert.deepEqual(
      outdatedPods([generation('agent-x', '2'), generation('agent-y', '1')], '2', 'pod-template-generation'),
      ['agent-y'],
      'DaemonSet pods by their generation',
    );
    const e = onDeleteEvent({ kind: 'StatefulSet', namespace: 'ns', name: 'db' }, 2, false);
    assert.equal(e.reason, 'ConfigRestartPending');
    assert.match(e.message, /^template updated, 2 pods outdated/);
    assert.match(
      onDeleteEvent({ kind: 'DaemonSet', namespace: 'ns', name: 'd' }, 1, true).message,
      /^template updated, 1 pod outdated .*one at a time/,
    );
  });

  it('evicts outdated pods one at a time, highest ordinal first, not-ready outdated pods before that', () => {
    assert.deepEqual(nextOutdatedPod([pod('db-0', 'old'), pod('db-1', 'old'), pod('db-2', 'old')], 'new'), {
      action: 'evict',
      pod: 'db-2',
      outdated: 3,
      reason: 'pod db-2 is at revision old, not new',
    });
    const stuckFirst = nextOutdatedPod(
      [pod('db-0', 'old', { ready: false }), pod('db-1', 'old'), pod('db-2', 'new')],
      'new',
    );
    assert.ok(stuckFirst.action === 'evict' && stuckFirst.pod === 'db-0');
    assert.equal(
      nextOutdatedPod([pod('db-0', 'old'), pod('db-1', 'old', { terminating: true })], 'new').action,
      'wait',
    );
    assert.equal(nextOutdatedPod([pod('db-0', 'old'), pod('db-1', 'new', { ready: false })], 'new').action, 'wait');
    // An evicted pod gone before its replacement exists is unavailable too: wait, do not take a second one.
    assert.deepEqual(nextOutdatedPod([pod('db-0', 'old'), pod('db-1', 'old')], 'new', 3), {
      action: 'wait',
      outdated: 2,
      reason: '1 pod(s) missing',
    });
    assert.equal(
      nextOutdatedPod([pod('db-0', 'old'), pod('db-1', 'old'), pod('db-2', 'new')], 'new', 3).action,
      'evict',
    );
    assert.equal(nextOutdatedPod([pod('db-0', 'new'), pod('db-1', 'new')], 'new').action, 'done');
    assert.equal(nextOutdatedPod([pod('db-0', 'old')], '').action, 'wait');
  });

  it('knows what a StatefulSet or a DaemonSet should be at, and nothing before its controller caught up', () => {
    const sts = {
      metadata: { name: 'db', generation: 4 },
      spec: { replicas: 3 },
      status: { observedGeneration: 4, updateRevision: 'db-7c9' },
    };
    assert.deepEqual(updateTarget('StatefulSet', sts), {
      revision: 'db-7c9',
      revisionLabel: 'controller-revision-hash',
      replicas: 3,
    });
    assert.equal(
      updateTarget('StatefulSet', { ...sts, status: { ...sts.status, observedGeneration: 3 } }).revision,
      '',
    );
    const ds = {
      metadata: { name: 'agent', generation: 2, annotations: { 'deprecated.daemonset.template.generation': '2' } },
      status: { observedGeneration: 2, desiredNumberScheduled: 6 },
    };
    assert.deepEqual(updateTarget('DaemonSet', ds), {
      revision: '2',
      revisionLabel: 'pod-template-generation',
      replicas: 6,
    });
    assert.equal(updateTarget('DaemonSet', { ...ds, status: {} }).revision, '');
  });

  it("reads a DaemonSet pod's template generation, not its revision hash", () => {
    const dsPod = (name: string, generation: string, ready = true): Pod => {
      const p = pod(name, 'hash-ignored', { ready });
      return {
        ...p,
        metadata: {
          ...p.metadata,
          labels: { 'controller-revision-hash': 'hash-ignored', 'pod-template-generation': generation },
        },
      };
    };
    const step = nextOutdatedPod(
      [dsPod('agent-abcde', '2'), dsPod('agent-fghij', '1'), dsPod('agent-klmno', '1')],
      '2',
      3,
      'pod-template-generation',
    );
    assert.deepEqual(step, {
      action: 'evict',
      pod: 'agent-fghij',
      outdated: 2,
      reason: 'pod agent-fghij is at revision 1, not 2',
    });
    assert.equal(
      nextOutdatedPod([dsPod('agent-abcde', '2', false), dsPod('agent-fghij', '1')], '2', 2, 'pod-template-generation')
        .action,
      'wait',
    );
  });

  it('gives every skip its reason: bad annotations, missing configs (optional or not), ignored configs; nothing for a workload not opted in', () => {
    const notices = skipNotices({
      optedIn: true,
      warnings: ['app: reloader.stakater.com/auto: "yes" is not "true" or "false"'],
      annotationWarning: 'applied-config-checksums is not JSON',
      excluded: [{ key: 'secret/ns/tls', reason: 'ignore-annotation' }],
      missing: ['configmap/ns/b', 'configmap/ns/a'],
      optional: ['configmap/ns/b'],
    });
    assert.deepEqual(
      notices.map((n) => [n.type, n.reason]),
      [
        ['Warning', 'InvalidAnnotation'],
        ['Warning', 'InvalidAnnotation'],
        ['Warning', 'ConfigMissing'],
        ['Normal', 'ConfigMissing'],
        ['Normal', 'ConfigIgnored'],
      ],
    );
    assert.match(notices[2]!.message, /^configmap\/ns\/a is referenced but not found/);
    assert.match(notices[3]!.message, /^optional configmap\/ns\/b is referenced/);
    assert.equal(
      notices[4]!.message,
      'changes to secret/ns/tls restart nothing: it is annotated reloader.stakater.com/ignore: "true"',
    );
    assert.deepEqual(
      skipNotices({
        optedIn: false,
        warnings: [],
        excluded: [{ key: 'secret/ns/tls', reason: 'ignore-annotation' }],
        missing: ['configmap/ns/a'],
      }),
      [],
    );
  });
});

// ------------------------------------------------------------ properties

const KEYS = [CM_A, CM_B, SEC_C, 'secret/ns/d'] as const;
const arbChecksum = fc.constantFrom('h1', 'h2', 'h3');
const arbApplied = fc.dictionary(fc.constantFrom(...KEYS), arbChecksum, { maxKeys: 4 });
const arbCurrent = fc.dictionary(fc.constantFrom(...KEYS), fc.oneof(arbChecksum, fc.constant(MISSING)), { maxKeys: 4 });
const arbSettings = fc
  .integer({ min: 1, max: 10_000 })
  .chain((grace) =>
    fc
      .integer({ min: grace, max: grace * 20 })
      .map((maxWait): RestartSettings => ({ gracePeriodMs: grace, maxWaitMs: maxWait })),
  );

/** A burst observed at arbitrary times before `now`, each time with arbitrary checksums. */
const arbPending = fc.option(
  fc
    .array(fc.record({ ago: fc.integer({ min: 0, max: 100_000 }), seen: fc.option(arbCurrent, { nil: undefined }) }), {
      minLength: 1,
      maxLength: 4,
    })
    .map((obs) => {
      let p: PendingChange | undefined;
      for (const o of [...obs].sort((a, b) => b.ago - a.ago)) p = observeChange(p, NOW - o.ago, o.seen);
      return p!;
    }),
  { nil: undefined },
);

interface Sim {
  restarts: number[];
  writes: number;
  applied: Map<string, string>;
}

/**
 * A controller for one workload: each config change is observed and decided
 * on at once, a wait-until schedules a wake-up, extra resyncs decide at
 * arbitrary times; every write is applied to the stored annotation.
 */
function simulate(opts: {
  applied: Checksums;
  current: Checksums;
  changes: { at: number; key: string; checksum: string }[];
  resyncs: number[];
  settings: RestartSettings;
}): Sim {
  const current = { ...opts.current };
  let annotation = formatAppliedChecksums(opts.applied);
  let pending: PendingChange | undefined;
  let wake: number | undefined;
  const sim: Sim = { restarts: [], writes: 0, applied: new Map() };
  type Step = { at: number; change?: { key: string; checksum: string } };
  const steps: Step[] = [
    ...opts.changes.map((c): Step => ({ at: c.at, change: { key: c.key, checksum: c.checksum } })),
    ...opts.resyncs.map((at): Step => ({ at })),
  ].sort((a, b) => a.at - b.at || Number(b.change !== undefined) - Number(a.change !== undefined));
  const run = (now: number) => {
    const d = decideRestart({
      workload: WL,
      optedIn: true,
      applied: parseAppliedChecksums(annotation).checksums,
      current,
      pending,
      now,
      settings: opts.settings,
    });
    switch (d.action) {
      case 'wait-until':
        pending = d.pending;
        wake = d.until;
        break;
      case 'restart':
      case 'update-annotation-only':
        if (d.action === 'restart') sim.restarts.push(now);
        sim.writes++;
        annotation = d.annotation;
        pending = undefined;
        wake = undefined;
        break;
      case 'nothing':
        pending = undefined;
        wake = undefined;
    }
  };
  let i = 0;
  for (let guard = 0; guard < 10_000; guard++) {
    const step = steps[i];
    if (wake !== undefined && (step === undefined || wake < step.at)) {
      run(wake);
      continue;
    }
    if (step === undefined) break;
    i++;
    if (step.change) {
      current[step.change.key] = step.change.checksum;
      pending = observeChange(pending, step.at, current);
    }
    run(step.at);
  }
  assert.equal(wake, undefined, 'the simulation settles');
  sim.applied = parseAppliedChecksums(annotation).checksums;
  return sim;
}

describe('properties', { timeout: 10000 }, () => {
  it('never a restart on the first observation of a workload, however its burst was observed', () => {
    fc.assert(
      fc.property(
        arbCurrent,
        fc.array(fc.integer({ min: 0, max: 100_000 }), { maxLength: 4 }),
        fc.integer({ min: 0, max: 200_000 }),
        arbSettings,
        (current, agos, later, settings) => {
          let pending: PendingChange | undefined;
          for (const ago of [...agos].sort((a, b) => b - a)) pending = observeChange(pending, NOW - ago, current);
          const d = decideRestart({
            workload: WL,
            optedIn: true,
            applied: {},
            current,
            pending,
            now: NOW + later,
            settings,
          });
          assert.notEqual(d.action, 'restart');
          if (d.action === 'update-annotation-only') {
            assert.deepEqual(
              plain(d.applied),
              Object.fromEntries(Object.entries(current).filter(([, v]) => v !== MISSING)),
            );
          }
        },
      ),
    );
  });

  it('never a restart for a newly added reference, a removed one, or a missing config', () => {
    fc.assert(
      fc.property(arbApplied, arbCurrent, arbPending, arbSettings, (applied, base, pending, settings) => {
        // Keys in the annotation: unchanged, missing, or no longer referenced. Keys not in it: new, first seen as they are now.
        const current: Checksums = {};
        for (const [k, v] of Object.entries(base))
          current[k] = k in applied ? (v === MISSING ? MISSING : applied[k]!) : v;
        // A new key's first sighting is as it is now (it did not change after being referenced).
        const burst =
          pending === undefined
            ? undefined
            : {
                ...pending,
                firstSeen: new Map([
                  ...[...pending.firstSeen].filter(([k]) => !(k in current) || k in applied),
                  ...Object.entries(current).filter(([k, v]) => !(k in applied) && v !== MISSING),
                ]),
              };
        const d = decideRestart({ workload: WL, optedIn: true, applied, current, pending: burst, now: NOW, settings });
        assert.notEqual(d.action, 'restart', d.reason);
      }),
    );
  });

  it('deciding again after acting does nothing (restart or failover restarts nothing); waiting is stable', () => {
    fc.assert(
      fc.property(
        arbApplied,
        arbCurrent,
        arbPending,
        arbSettings,
        fc.integer({ min: 0, max: 300_000 }),
        fc.boolean(),
        (applied, current, pending, settings, later, optedIn) => {
          const input: RestartInput = {
            workload: WL,
            optedIn,
            applied,
            current,
            pending,
            now: NOW,
            settings,
            resourceVersion: '1',
          };
          const d = decideRestart(input);
          if (d.action === 'restart' || d.action === 'update-annotation-only') {
            // Apply the patch to the object, read it back as a fresh leader would.
            const obj = mergePatch(workloadObject({ [APPLIED]: formatAppliedChecksums(applied) }), d.patch);
            const reread = appliedChecksumsOf(obj);
            assert.equal(reread.warning, undefined);
            for (const now of [NOW, NOW + later]) {
              const again = decideRestart({ ...input, applied: reread.checksums, pending: d.pending, now });
              assert.equal(again.action, 'nothing', again.reason);
              const failover = decideRestart({ ...input, applied: reread.checksums, pending: undefined, now });
              assert.equal(failover.action, 'nothing', failover.reason);
            }
          } else if (d.action === 'wait-until') {
            assert.ok(d.until > NOW);
            const again = decideRestart({ ...input, pending: d.pending });
            assert.ok(again.action === 'wait-until' && again.until === d.until);
            const atDue = decideRestart({ ...input, pending: d.pending, now: d.until });
            assert.ok(atDue.action === 'restart' || atDue.action === 'update-annotation-only', atDue.action);
          } else {
            assert.equal(d.pending, undefined);
          }
        },
      ),
    );
  });

  it('dueAt is never later than first + maxWait, never earlier than either bound allows, and never moves back', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 50_000 }), { minLength: 1, maxLength: 20 }),
        arbSettings,
        (gaps, settings) => {
          let t = NOW;
          let p = observeChange(undefined, t);
          let last = dueAt(p, settings);
          for (const gap of gaps) {
            t += gap;
            p = observeChange(p, t);
            const d = dueAt(p, settings);
            assert.ok(d >= last, 'monotonic');
            assert.ok(d <= p.firstAt + settings.maxWaitMs);
            assert.equal(d, Math.min(t + settings.gracePeriodMs, NOW + settings.maxWaitMs));
            last = d;
          }
        },
      ),
    );
  });

  it('exactly one restart per burst, whatever the timing of changes within the window and of resyncs', () => {
    const arbBurst = arbSettings.chain((settings) =>
      fc.record({
        settings: fc.constant(settings),
        steps: fc.array(
          fc.record({
            gap: fc.integer({ min: 0, max: settings.gracePeriodMs - 1 }),
            key: fc.constantFrom(CM_A, CM_B, SEC_C),
          }),
          { minLength: 1, maxLength: 30 },
        ),
        resyncs: fc.array(fc.integer({ min: 0, max: 3 * settings.maxWaitMs }), { maxLength: 10 }),
      }),
    );
    fc.assert(
      fc.property(arbBurst, ({ settings, steps, resyncs }) => {
        // Keep the burst inside maxWait from its first change.
        const changes: { at: number; key: string; checksum: string }[] = [];
        let t = NOW;
        for (const [i, s] of steps.entries()) {
          t += i === 0 ? 0 : s.gap;
          if (t - NOW >= settings.maxWaitMs) break;
          changes.push({ at: t, key: s.key, checksum: `c${i}` });
        }
        const initial = { [CM_A]: 'h1', [CM_B]: 'h1', [SEC_C]: 'h1' };
        const sim = simulate({
          applied: initial,
          current: initial,
          changes,
          resyncs: resyncs.map((r) => NOW + r),
          settings,
        });
        assert.equal(sim.restarts.length, 1, `restarts at ${sim.restarts.map((r) => r - NOW).join(', ')}`);
        assert.equal(sim.writes, 1, 'one patch: no annotation-only write before or after it');
        const lastAt = changes.at(-1)!.at;
        assert.ok(sim.restarts[0]! >= lastAt, 'after the last change of the burst');
        assert.ok(sim.restarts[0]! <= Math.min(lastAt + settings.gracePeriodMs, NOW + settings.maxWaitMs));
        const final: Checksums = { ...initial };
        for (const c of changes) final[c.key] = c.checksum;
        assert.deepEqual(plain(sim.applied), final, 'the restart records the final checksums');
      }),
    );
  });

  it('a config that keeps changing restarts by first change + maxWait, burst after burst', () => {
    const arbStorm = arbSettings
      .filter((s) => s.gracePeriodMs >= 2)
      .chain((settings) =>
        fc.record({
          settings: fc.constant(settings),
          gaps: fc.array(fc.integer({ min: 1, max: settings.gracePeriodMs - 1 }), { minLength: 200, maxLength: 200 }),
        }),
      );
    fc.assert(
      fc.property(arbStorm, ({ settings, gaps }) => {
        const changes: { at: number; key: string; checksum: string }[] = [];
        let t = NOW;
        for (const [i, gap] of gaps.entries()) {
          changes.push({ at: t, key: CM_A, checksum: `c${i}` });
          t += gap;
        }
        const sim = simulate({ applied: { [CM_A]: 'h1' }, current: { [CM_A]: 'h1' }, changes, resyncs: [], settings });
        assert.ok(sim.restarts.length >= 1);
        // Each burst starts at the first change after the previous restart and restarts within maxWait of it.
        let burstStart = NOW;
        for (const r of sim.restarts) {
          assert.ok(r <= burstStart + settings.maxWaitMs, `restart at +${r - burstStart} ms into its burst`);
          const next = changes.find((c) => c.at > r);
          if (next === undefined) break;
          burstStart = next.at;
        }
        assert.equal(sim.applied.get(CM_A), changes.at(-1)!.checksum);
      }),
      { numRuns: 50 },
    );
  });

  it('removing the opt-in stops restarts whatever changed', () => {
    fc.assert(
      fc.property(arbApplied, arbCurrent, arbPending, (applied, current, pending) => {
        const d = decideRestart({ workload: WL, optedIn: false, applied, current, pending, now: NOW });
        assert.equal(d.action, 'nothing');
      }),
    );
  });
});
