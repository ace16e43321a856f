import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/runtime/clock.ts';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { nopLogger } from '../../src/runtime/log/logger.ts';
import {
  BATCH_MS,
  PROGRESS_MS,
  stateOf,
  StatusPublisher,
  writableAt,
  ZPDB_WAIT_CODE,
  type GroupStatus,
} from '../../src/rollout/status.ts';
import type { SetSummary } from '../../src/rollout/planner.ts';

const set = (name: string, o: Partial<SetSummary> = {}): SetSummary => ({
  name,
  replicas: 10,
  pods: 10,
  ready: 10,
  updated: 10,
  maxUnavailable: 1,
  paused: false,
  state: 'up-to-date',
  ...o,
});

/** Zone a rolling with `updated` of its 10 pods updated, waiting on its own pace unless told otherwise. */
function rolling(updated: number, o: Partial<GroupStatus> = {}): GroupStatus {
  return {
    group: 'ingester',
    namespace: 'ns',
    since: new Date(updated).toISOString(),
    phase: 'waiting',
    rolling: 'ingester-zone-a',
    waitingFor: {
      code: 'max-unavailable-reached',
      statefulSet: 'ingester-zone-a',
      message: `waiting: 1 pod not Ready in ingester-zone-a (${updated} updated)`,
    },
    errors: [],
    statefulSets: [set('ingester-zone-a', { state: 'waiting', updated, ready: 9 }), set('ingester-zone-b')],
    ...o,
  };
}

const complete: GroupStatus = {
  group: 'ingester',
  namespace: 'ns',
  since: new Date(0).toISOString(),
  phase: 'complete',
  errors: [],
  statefulSets: [set('ingester-zone-a'), set('ingester-zone-b')],
};

describe('stateOf', () => {
  it('is the same through a zone’s progress: counts, messages, rolling and waiting at its own pace', () => {
    const states = [
      rolling(1),
      rolling(5),
      rolling(6, { phase: 'rolling' }),
      rolling(7, { phase: 'rolling', waitingFor: undefined }),
      rolling(8, { waitingFor: { code: 'pods-terminating', message: '1 pod terminating' } }),
      rolling(9, { waitingFor: { code: 'updated-pods-not-ready', statefulSet: 'ingester-zone-a', message: 'm' } }),
      rolling(9, { statefulSets: [set('ingester-zone-a', { state: 'rolling' }), set('ingester-zone-b')] }),
    ].map(stateOf);
    assert.equal(new Set(states).size, 1);
  });

  it('changes when the group completes, rolls another zone, or waits on something else', () => {
    const others = [
      complete,
      rolling(1, { rolling: 'ingester-zone-b' }),
      rolling(1, { waitingFor: { code: ZPDB_WAIT_CODE, statefulSet: 'ingester-zone-a', message: 'm' } }),
      rolling(1, { waitingFor: { code: 'several-statefulsets-not-ready', message: 'm' } }),
      rolling(1, { phase: 'blocked', blocked: 'RollingUpdate' }),
      rolling(1, { phase: 'failing', errors: ['boom'] }),
      rolling(1, { statefulSets: [set('ingester-zone-a', { state: 'paused' }), set('ingester-zone-b')] }),
    ].map(stateOf);
    for (const state of others) assert.notEqual(state, stateOf(rolling(1)));
    assert.equal(new Set(others).size, others.length);
  });
});

describe('writableAt', () => {
  const written = new Map([['ingester', stateOf(rolling(1))]]);
  it('is any time for a first write or a changed state, and PROGRESS_MS after the last write for progress', () => {
    assert.equal(writableAt(new Map(), new Map([['ingester', rolling(1)]]), undefined), -Infinity);
    assert.equal(writableAt(written, new Map([['ingester', complete]]), 1_000), -Infinity);
    assert.equal(writableAt(written, new Map([['ingester', undefined]]), 1_000), -Infinity);
    assert.equal(writableAt(written, new Map([['other', rolling(1)]]), 1_000), -Infinity);
    assert.equal(writableAt(written, new Map([['ingester', rolling(7)]]), 1_000), 1_000 + PROGRESS_MS);
  });
});

/** A publisher writing to a recorder of its patches, on a fake clock. */
function publisher() {
  const clock = new FakeClock(0);
  const writes: { at: number; data: Record<string, string> }[] = [];
  const client = {
    patch: (_resource: unknown, _where: unknown, _type: unknown, ops: [{ value: Record<string, string> }]) => {
      writes.push({ at: clock.monotonic(), data: ops[0].value });
      return Promise.resolve({});
    },
  } as unknown as KubeClient;
  const p = new StatusPublisher({ client, clock, logger: nopLogger });
  const written = () =>
    writes.map((w) => {
      const s = JSON.parse(w.data['ingester']!) as GroupStatus;
      return [w.at, s.phase, s.waitingFor?.code ?? '', s.statefulSets[0]!.updated];
    });
  return { clock, p, written };
}

describe('StatusPublisher', () => {
  it('writes a zone’s progress every PROGRESS_MS, state changes within BATCH_MS', async () => {
    const { clock, p, written } = publisher();
    p.publish(rolling(1));
    await clock.advance(BATCH_MS);
    for (let updated = 2; updated <= 9; updated++) {
      await clock.advance(1_000);
      p.publish(rolling(updated));
    }
    // Progress from 1.5 s on: written at 5.5 s (as it was then), then at 10.5 s.
    await clock.advance(10_000);
    p.publish(complete);
    await clock.advance(BATCH_MS);
    assert.deepEqual(written(), [
      [BATCH_MS, 'waiting', 'max-unavailable-reached', 1],
      [BATCH_MS + PROGRESS_MS, 'waiting', 'max-unavailable-reached', 5],
      [BATCH_MS + 2 * PROGRESS_MS, 'waiting', 'max-unavailable-reached', 9],
      [8_500 + 10_000 + BATCH_MS, 'complete', '', 10],
    ]);
  });

  it('writes a zone-aware budget’s refusal at once amid progress, and a state over within the batch not at all', async () => {
    const { clock, p, written } = publisher();
    p.publish(rolling(1));
    await clock.advance(BATCH_MS);
    await clock.advance(1_000);
    // A delete's plan says "rolling" for a moment: back to the written state before the batch is written.
    p.publish(rolling(2, { phase: 'rolling', waitingFor: undefined, rolling: 'ingester-zone-a' }));
    p.publish(rolling(2, { rolling: 'ingester-zone-b' }));
    p.publish(rolling(2));
    await clock.advance(BATCH_MS);
    assert.equal(written().length, 1);
    p.publish(rolling(2, { waitingFor: { code: ZPDB_WAIT_CODE, statefulSet: 'ingester-zone-a', message: 'm' } }));
    await clock.advance(BATCH_MS);
    assert.deepEqual(written().at(-1), [2 * BATCH_MS + 1_000 + BATCH_MS, 'waiting', ZPDB_WAIT_CODE, 2]);
    // Back to its own pace: a state change too.
    p.publish(rolling(3));
    await clock.advance(BATCH_MS);
    assert.deepEqual(written().at(-1), [2 * BATCH_MS + 1_000 + 2 * BATCH_MS, 'waiting', 'max-unavailable-reached', 3]);
    await clock.advance(PROGRESS_MS * 3);
    assert.equal(written().length, 3);
  });
});
