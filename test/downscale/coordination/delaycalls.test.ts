// Delayed downscale's pod calls against simulated pods on loopback IPs: what
// is sent, in which order, when, and that a reconcile never waits for it.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { FakeClock } from '../../../src/runtime/clock.ts';
import type { Pod } from '../../../src/runtime/kube/types.ts';
import { createLogger } from '../../../src/runtime/log/logger.ts';
import { delayedDownscaleDecision } from '../../../src/downscale/coordination/delay.ts';
import { DelayedDownscaleCalls, type DelayTarget } from '../../../src/downscale/coordination/delaycalls.ts';
import { freePorts } from '../../cluster/ports.ts';
import { settlesWithin } from '../../fuzz/support.ts';
import { PodEndpoints } from '../../support/pod-endpoints.ts';

const ZONES = ['a', 'b'];
const ipOf = (zone: string, ordinal: number) => `127.0.${10 + ZONES.indexOf(zone)}.${ordinal + 1}`;
const INT32_MAX = 2 ** 31 - 1;

describe('DelayedDownscaleCalls', () => {
  const endpoints = new PodEndpoints();
  let port = 0;
  let clock: FakeClock;
  let settled: string[];
  let calls: DelayedDownscaleCalls;
  /** Pods the cache shows: every served one but those deleted here. */
  const deleted = new Set<string>();
  const logs: string[] = [];
  const target = (zone: string): DelayTarget => ({
    namespace: 'ns',
    statefulSet: `ingester-zone-${zone}`,
    serviceName: `ingester-zone-${zone}`,
    urlTemplate: `http://placeholder:${port}/prepare-delayed-downscale`,
  });

  before(async () => {
    [port] = (await freePorts(1)) as [number];
    await endpoints.serve(
      ZONES.flatMap((zone) =>
        Array.from({ length: 5 }, (_, i) => ({ name: `ingester-zone-${zone}-${i}`, ip: ipOf(zone, i) })),
      ),
      port,
    );
  });
  after(() => endpoints.close());

  const make = (options: { timeoutMs?: number } = {}) =>
    new DelayedDownscaleCalls({
      clock,
      log: createLogger({ format: 'json', level: 'debug', write: (line) => logs.push(line) }),
      clusterDomain: 'cluster.local.',
      timeoutMs: options.timeoutMs ?? 2000,
      lookupPod: (namespace, name): Pod | undefined => {
        const m = /^ingester-zone-([ab])-(\d+)$/.exec(name);
        return m && namespace === 'ns' && !deleted.has(name)
          ? { metadata: { name, namespace }, status: { podIP: ipOf(m[1]!, Number(m[2])) } }
          : undefined;
      },
      existingPods: (namespace, statefulSet) =>
        namespace === 'ns'
          ? Array.from({ length: 5 }, (_, i) => `${statefulSet}-${i}`).filter((pod) => !deleted.has(pod))
          : [],
      onSettled: (_ns, sts) => settled.push(sts),
    });

  beforeEach(() => {
    clock = new FakeClock(1_700_000_000_000);
    endpoints.calls.length = 0;
    endpoints.status.clear();
    endpoints.hang.clear();
    endpoints.preparedAt.clear();
    deleted.clear();
    endpoints.now = () => Math.floor(clock.now() / 1000);
    settled = [];
    calls = make();
  });

  it('asks, returns at once, and hands the answers to the next reconcile once', async () => {
    assert.equal(calls.prepare(target('a'), 5, 3), 'pending');
    assert.equal(calls.prepare(target('a'), 5, 3), 'pending', 'a second ask while in flight');
    await calls.idle();
    assert.deepEqual(settled, ['ingester-zone-a']);
    assert.deepEqual(endpoints.calls.map((c) => `${c.method} ${c.pod}`).sort(), [
      'DELETE ingester-zone-a-0',
      'DELETE ingester-zone-a-1',
      'DELETE ingester-zone-a-2',
      'POST ingester-zone-a-3',
      'POST ingester-zone-a-4',
    ]);
    for (const call of endpoints.calls)
      assert.equal(call.host, `${call.pod}.ingester-zone-a.ns.svc.cluster.local.:${port}`, 'the pod FQDN as Host');
    const answer = calls.prepare(target('a'), 5, 3);
    assert.notEqual(answer, 'pending');
    assert.deepEqual([...(answer as { results: Map<number, unknown> }).results].sort(), [
      [3, 1_700_000_000],
      [4, 1_700_000_000],
    ]);
    // Handed out once: the next reconcile asks again.
    assert.equal(calls.prepare(target('a'), 5, 3), 'pending');
    await calls.idle();
  });

  it('does not act on answers for another change, or older than freshMs', async () => {
    calls.prepare(target('a'), 5, 3);
    await calls.idle();
    assert.equal(calls.prepare(target('a'), 5, 2), 'pending', 'another desired count');
    await calls.idle();
    await clock.advance(31_000);
    assert.equal(calls.prepare(target('a'), 5, 2), 'pending', 'stale answers');
    await calls.idle();
    assert.notEqual(calls.prepare(target('a'), 5, 2), 'pending');
  });

  it('judges freshness on the monotonic clock: a backward step does not make old answers fresh, a forward one does not age new ones', async () => {
    calls.prepare(target('a'), 5, 3);
    await calls.idle();
    clock.step(-60_000);
    await clock.advance(31_000);
    assert.equal(
      calls.prepare(target('a'), 5, 3),
      'pending',
      'answers 31 s old are stale, whatever the wall clock says',
    );
    await calls.idle();
    clock.step(60_000);
    assert.notEqual(calls.prepare(target('a'), 5, 3), 'pending', 'answers just in are fresh');
  });

  it('reports each failed POST per ordinal (non-2xx, no answer) next to the good ones', async () => {
    calls = make({ timeoutMs: 300 });
    endpoints.status.set('ingester-zone-a-2', 500);
    endpoints.hang.add('ingester-zone-a-4');
    calls.prepare(target('a'), 5, 1);
    await calls.idle();
    const answer = calls.prepare(target('a'), 5, 1) as { results: Map<number, number | { error: string }> };
    assert.deepEqual(answer.results.get(1), 1_700_000_000);
    assert.deepEqual(answer.results.get(2), { error: 'HTTP POST request returned non-2xx status code: 500' });
    assert.equal(answer.results.get(3), 1_700_000_000);
    assert.match((answer.results.get(4) as { error: string }).error, /no answer within 300 ms/);
  });

  it('a hanging pod of one StatefulSet does not hold back another', async () => {
    calls = make({ timeoutMs: 5000 });
    endpoints.hang.add('ingester-zone-a-4');
    calls.prepare(target('a'), 5, 3);
    calls.prepare(target('b'), 5, 3);
    const deadline = Date.now() + 4000;
    while (!settled.includes('ingester-zone-b') && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(settled, ['ingester-zone-b'], 'zone b answered while zone a still waits');
    calls.stop();
    await calls.idle();
    assert.deepEqual(settled, ['ingester-zone-b'], 'no requeue after stop');
  });

  it('cancels on first sight, then only when due: after a prepare, for other replicas, or every cancelRepeatMs', async () => {
    const deletes = () =>
      endpoints.calls.filter((c) => c.method === 'DELETE' && c.pod.startsWith('ingester-zone-a')).length;
    calls.cancel(target('a'), 3);
    await calls.idle();
    assert.equal(deletes(), 3, 'first sight: [0, 3)');
    assert.deepEqual(settled, [], 'nothing waits on a cancel');
    calls.cancel(target('a'), 3);
    await calls.idle();
    assert.equal(deletes(), 3, 'clean and recent: nothing sent');
    calls.cancel(target('a'), 4);
    await calls.idle();
    assert.equal(deletes(), 7, 'replicas changed: [0, 4)');
    await clock.advance(60_000);
    calls.cancel(target('a'), 4);
    await calls.idle();
    assert.equal(deletes(), 11, 'repeated after cancelRepeatMs');
    calls.prepare(target('a'), 4, 2);
    await calls.idle();
    assert.ok(endpoints.preparedAt.has('ingester-zone-a-3'));
    calls.cancel(target('a'), 4);
    await calls.idle();
    assert.equal(endpoints.preparedAt.size, 0, 'the withdrawn downscale is cancelled at once');
  });

  it('a cancel asked while a prepare is in flight goes after it, and voids its answers', async () => {
    calls.prepare(target('a'), 5, 3);
    calls.cancel(target('a'), 5);
    await calls.idle();
    for (const pod of ['ingester-zone-a-3', 'ingester-zone-a-4'])
      assert.deepEqual(endpoints.callsTo(pod), [
        'POST /prepare-delayed-downscale',
        'DELETE /prepare-delayed-downscale',
      ]);
    assert.equal(endpoints.preparedAt.size, 0);
    assert.equal(calls.prepare(target('a'), 5, 3), 'pending', 'the voided answers are not used');
    await calls.idle();
  });

  it('treats 409 on DELETE as success, and retries other failed cancels at the next ask', async () => {
    calls.cancel(target('a'), 2);
    await calls.idle();
    endpoints.calls.length = 0;
    endpoints.status.set('ingester-zone-a-0', 409);
    await clock.advance(60_000);
    calls.cancel(target('a'), 2);
    await calls.idle();
    calls.cancel(target('a'), 2);
    await calls.idle();
    assert.equal(endpoints.calls.length, 2, '409 counts as cancelled: no retry');
    endpoints.status.set('ingester-zone-a-0', 503);
    await clock.advance(60_000);
    calls.cancel(target('a'), 2);
    await calls.idle();
    calls.cancel(target('a'), 2);
    await calls.idle();
    assert.equal(endpoints.calls.length, 6, '503: sent again at the next ask');
    assert.ok(logs.some((l) => l.includes('could not cancel the delayed downscale of 1 pod(s)')));
  });

  it('spec.replicas 2^31-1 with 5 pods: calls those 5 only, and names the first ordinal that cannot answer (was: a 2^31-element array, out of memory)', async () => {
    assert.equal(calls.prepare(target('a'), INT32_MAX, 0), 'pending');
    await settlesWithin(5000, 'a prepare round to 2^31-1 ordinals', calls.idle());
    assert.deepEqual(
      endpoints.calls.map((c) => `${c.method} ${c.pod}`).sort(),
      [0, 1, 2, 3, 4].map((i) => `POST ingester-zone-a-${i}`),
    );
    const answer = calls.prepare(target('a'), INT32_MAX, 0) as { results: Map<number, number | { error: string }> };
    assert.deepEqual(
      [...answer.results].sort(([a], [b]) => a - b),
      [
        [0, 1_700_000_000],
        [1, 1_700_000_000],
        [2, 1_700_000_000],
        [3, 1_700_000_000],
        [4, 1_700_000_000],
        [5, { error: 'pod ingester-zone-a-5 does not exist' }],
      ],
    );
    assert.deepEqual(
      delayedDownscaleDecision({
        current: INT32_MAX,
        desired: 0,
        timestamps: answer.results,
        delayMs: 3_600_000,
        now: clock.now() + 7_200_000,
      }),
      {
        error: 'failed prepare pods for delayed downscale: pod ordinal 5: pod ingester-zone-a-5 does not exist',
      },
    );
    endpoints.calls.length = 0;
    calls.prepare(target('a'), INT32_MAX, 3);
    await settlesWithin(5000, 'a prepare round to 2^31-4 ordinals', calls.idle());
    assert.deepEqual(endpoints.calls.map((c) => `${c.method} ${c.pod}`).sort(), [
      'DELETE ingester-zone-a-0',
      'DELETE ingester-zone-a-1',
      'DELETE ingester-zone-a-2',
      'POST ingester-zone-a-3',
      'POST ingester-zone-a-4',
    ]);
    endpoints.calls.length = 0;
    calls.cancel(target('a'), INT32_MAX);
    await settlesWithin(5000, 'a cancel round to 2^31-1 ordinals', calls.idle());
    assert.deepEqual(
      endpoints.calls.map((c) => `${c.method} ${c.pod}`).sort(),
      [0, 1, 2, 3, 4].map((i) => `DELETE ingester-zone-a-${i}`),
    );
    assert.equal(endpoints.preparedAt.size, 0);
  });

  it('a pod that does not exist is not called: a leaving one is named in the answers, a staying one has nothing to cancel', async () => {
    deleted.add('ingester-zone-a-1');
    deleted.add('ingester-zone-a-3');
    calls.prepare(target('a'), 5, 2);
    await calls.idle();
    assert.deepEqual(endpoints.calls.map((c) => `${c.method} ${c.pod}`).sort(), [
      'DELETE ingester-zone-a-0',
      'POST ingester-zone-a-2',
      'POST ingester-zone-a-4',
    ]);
    const answer = calls.prepare(target('a'), 5, 2) as { results: Map<number, number | { error: string }> };
    assert.deepEqual(
      [...answer.results].sort(([a], [b]) => a - b),
      [
        [2, 1_700_000_000],
        [3, { error: 'pod ingester-zone-a-3 does not exist' }],
        [4, 1_700_000_000],
      ],
    );
    logs.length = 0;
    calls.cancel(target('a'), 5);
    await calls.idle();
    assert.ok(!logs.some((l) => l.includes('could not cancel')), 'a missing pod is not a failed cancel');
  });
});
