import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/runtime/clock.ts';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../src/runtime/kube/errors.ts';
import { nopLogger } from '../../src/runtime/log/logger.ts';
import {
  BATCH_MS,
  PROGRESS_MS,
  REFUSED_RETRY_MS,
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

/** A client over one ConfigMap that refuses the verbs not in `granted` with 403, recording every request. */
function roleClient(granted: readonly string[]) {
  const requests: { verb: string; code: number }[] = [];
  let stored:
    | { metadata: { name: string; namespace: string; resourceVersion: string }; data: Record<string, string> }
    | undefined;
  let version = 0;
  const answer = <T>(verb: string, ok: () => T): Promise<T> => {
    if (!granted.includes(verb)) {
      requests.push({ verb, code: 403 });
      return Promise.reject(
        new KubeApiError({
          code: 403,
          reason: 'Forbidden',
          message: `cannot ${verb} configmaps`,
          method: 'X',
          path: '/',
        }),
      );
    }
    try {
      const value = ok();
      requests.push({ verb, code: 200 });
      return Promise.resolve(value);
    } catch (error) {
      const refusal = error as KubeApiError;
      requests.push({ verb, code: refusal.code });
      return Promise.reject(refusal);
    }
  };
  const notFound = () =>
    new KubeApiError({ code: 404, reason: 'NotFound', message: 'not found', method: 'X', path: '/' });
  const save = (data: Record<string, string>) =>
    (stored = {
      metadata: { name: 'stateward-rollout-status', namespace: 'ns', resourceVersion: String(++version) },
      data,
    });
  const client = {
    patch: (_r: unknown, _w: unknown, _t: unknown, ops: [{ value: Record<string, string> }]) =>
      answer('patch', () => {
        if (!stored) throw notFound();
        return save(ops[0].value);
      }),
    get: () =>
      answer('get', () => {
        if (!stored) throw notFound();
        return stored;
      }),
    update: (_r: unknown, cm: { metadata: { resourceVersion: string }; data: Record<string, string> }) =>
      answer('update', () => {
        if (!stored) throw notFound();
        if (cm.metadata.resourceVersion !== stored.metadata.resourceVersion)
          throw new KubeApiError({ code: 409, reason: 'Conflict', message: 'conflict', method: 'X', path: '/' });
        return save(cm.data);
      }),
    create: (_r: unknown, cm: { data: Record<string, string> }) =>
      answer('create', () => {
        if (stored)
          throw new KubeApiError({ code: 409, reason: 'AlreadyExists', message: 'exists', method: 'X', path: '/' });
        return save(cm.data);
      }),
  } as unknown as KubeClient;
  const events: string[] = [];
  const recorder = { event: (_o: unknown, type: string, reason: string) => void events.push(`${type} ${reason}`) };
  const clock = new FakeClock();
  const p = new StatusPublisher({ client, clock, logger: nopLogger, events: recorder });
  return {
    clock,
    p,
    requests,
    events,
    phase: () => (stored ? (JSON.parse(stored.data['ingester']!) as GroupStatus).phase : undefined),
    refused: () => requests.filter((r) => r.code === 403).map((r) => r.verb),
  };
}

describe('StatusPublisher under a Role without patch on ConfigMaps (issue 34)', () => {
  it('rollout-operator’s jsonnet Role (get, update, create): one refused patch, then update, one request per write', async () => {
    const { clock, p, requests, refused, phase } = roleClient(['get', 'update', 'create']);
    p.publish(rolling(1));
    await clock.advance(BATCH_MS);
    assert.equal(phase(), 'waiting');
    p.publish(complete);
    await clock.advance(BATCH_MS);
    p.publish(rolling(2));
    await clock.advance(BATCH_MS);
    assert.equal(phase(), 'waiting');
    assert.deepEqual(refused(), ['patch']);
    // patch (403), get (404), create; then one update per write, from the object last written.
    assert.deepEqual(
      requests.map((r) => `${r.verb} ${r.code}`),
      ['patch 403', 'get 404', 'create 200', 'update 200', 'update 200'],
    );
  });

  it('grafana’s chart Role (nothing on ConfigMaps): said once, kept in memory, tried again only after REFUSED_RETRY_MS', async () => {
    const { clock, p, refused, events } = roleClient([]);
    p.publish(rolling(1));
    await clock.advance(BATCH_MS);
    assert.deepEqual(refused(), ['patch', 'get']);
    assert.deepEqual(p.refused(), ['ns']);
    for (let updated = 2; updated <= 9; updated++) {
      await clock.advance(30_000);
      p.publish(rolling(updated, updated % 2 ? {} : { phase: 'blocked', blocked: 'x' }));
    }
    assert.deepEqual(refused(), ['patch', 'get'], 'no refused request repeats within REFUSED_RETRY_MS');
    assert.equal(p.get('ns', 'ingester')?.statefulSets[0]?.updated, 9, 'served from memory');
    await clock.advance(REFUSED_RETRY_MS);
    assert.deepEqual(refused(), ['patch', 'get', 'get'], 'one more try after REFUSED_RETRY_MS');
    assert.deepEqual(events, ['Warning RolloutStatusNotWritten'], 'said once');
  });

  it('writes again once the Role is fixed, at the next try', async () => {
    const granted: string[] = [];
    const { clock, p, phase } = roleClient(granted);
    p.publish(rolling(1));
    await clock.advance(BATCH_MS);
    assert.equal(phase(), undefined);
    granted.push('get', 'update', 'create');
    await clock.advance(REFUSED_RETRY_MS);
    assert.equal(phase(), 'waiting');
    assert.deepEqual(p.refused(), []);
  });
});
