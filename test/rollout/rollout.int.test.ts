// Rollouts end to end: the real stateward executable against the real
// control plane, with an independent monitor checking the guarantees over
// every pod transition of the run.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { resources, type ConfigMap, type Event, type Pod, type StatefulSet } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { Prng } from '../chaos/prng.ts';
import { podsNamed } from '../chaos/invariants.ts';
import { PACE_NEWS_MS } from '../../src/rollout/controller.ts';
import { FAST_ELECTION, OperatorProcess } from '../support/operator-process.ts';
import {
  changeTemplate,
  createGroup,
  InvariantMonitor,
  testClient,
  waitGroupSettled,
  waitRevisionsPending,
  waitRolledOut,
  ZONES,
  type Transition,
} from '../support/rollout-group.ts';

const cluster = testCluster();
const FAST = ['-reconcile.interval=1s'];

async function setup(
  t: TestContext,
  options: Parameters<typeof createGroup>[2] = {},
  budgets: Record<string, number> = {},
) {
  const namespace = await cluster.namespace(t);
  const kube = testClient(cluster);
  await createGroup(kube, namespace, options);
  await waitGroupSettled(kube, namespace);
  const monitor = new InvariantMonitor(
    kube,
    namespace,
    Object.fromEntries(ZONES.map((z) => [`ingester-zone-${z}`, budgets[z] ?? 1])),
  );
  await monitor.start();
  t.after(() => monitor.stop());
  return { namespace, kube, monitor };
}

async function startOperator(t: TestContext, namespace: string, flags: string[] = []): Promise<OperatorProcess> {
  const operator = await OperatorProcess.start(cluster, namespace, [...FAST, ...flags]);
  t.after(() => operator.stop());
  await operator.waitReady();
  return operator;
}

/** The operator's Events of one reason in the namespace, oldest first. */
async function operatorEvents(
  kube: ReturnType<typeof testClient>,
  namespace: string,
  reason: string,
): Promise<Event[]> {
  return (await kube.list<Event>(resources.events, { namespace })).items
    .filter((e) => e.reason === reason && e.reportingController === 'stateward.dev/operator')
    .sort((a, b) => (a.eventTime ?? '').localeCompare(b.eventTime ?? ''));
}

/** Waits until `name` is back from a delete and its container waits in CrashLoopBackOff (a broken template); returns it. */
async function waitCrashLooping(kube: ReturnType<typeof testClient>, namespace: string, name: string): Promise<Pod> {
  return waitFor(
    `${name} crash-looping`,
    async () => {
      const pod = await kube.get<Pod>(resources.pods, { namespace, name }).catch(() => undefined);
      return pod?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CrashLoopBackOff' ? pod : undefined;
    },
    { timeoutMs: 30_000 },
  );
}

/** The order in which zones first lost a pod to the rollout. */
function zoneOrder(transitions: Transition[]): string[] {
  const order: string[] = [];
  for (const tr of transitions) {
    const zone = /ingester-zone-([a-z])-/.exec(tr.pod)?.[1];
    if (zone && tr.from.endsWith('/ready') && !order.includes(zone)) order.push(zone);
  }
  return order;
}

describe('rollouts', () => {
  it('rolls 3 zones × 3 pods one zone at a time and advances currentRevision everywhere', async (t) => {
    const { namespace, kube, monitor } = await setup(t);
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    await waitRevisionsPending(kube, namespace);
    await startOperator(t, namespace);
    const sets = await waitRolledOut(kube, namespace);
    assert.deepEqual(monitor.violations, []);
    assert.equal(monitor.maxDisruptedAtOnce, 1);
    assert.deepEqual(zoneOrder(monitor.transitions), ['a', 'b', 'c']);
    for (const set of sets) assert.equal(set.status?.currentRevision, set.status?.updateRevision);
    const status = await kube.get<ConfigMap>(resources.configMaps, { namespace, name: 'stateward-rollout-status' });
    const group = JSON.parse(status.data!['ingester']!) as {
      phase: string;
      statefulSets: { updated: number; replicas: number }[];
    };
    await waitFor(
      'status to say complete',
      async () => {
        const cm = await kube.get<ConfigMap>(resources.configMaps, { namespace, name: 'stateward-rollout-status' });
        return (JSON.parse(cm.data!['ingester']!) as { phase: string }).phase === 'complete';
      },
      { timeoutMs: 10_000 },
    );
    assert.equal(group.statefulSets.length, 3);
    // Every delete is named by exactly one DeletingPod Event: the first of a
    // zone at once, the others gathered (the zone rolled within 30 s), all
    // before the zone's RolloutComplete. A rollout at its own pace has no
    // RolloutWaiting Event.
    const deleted = ZONES.flatMap((zone) => [0, 1, 2].map((i) => `ingester-zone-${zone}-${i}`));
    const [deleting, complete] = await waitFor(
      'a RolloutComplete Event per zone',
      async () => {
        const done = await operatorEvents(kube, namespace, 'RolloutComplete');
        return done.length === 3 ? [await operatorEvents(kube, namespace, 'DeletingPod'), done] : undefined;
      },
      { timeoutMs: 10_000 },
    );
    assert.deepEqual(deleting.flatMap((e) => podsNamed(e.note ?? '')).sort(), deleted);
    for (const zone of ZONES) {
      const name = `ingester-zone-${zone}`;
      const ofZone = deleting.filter((e) => e.regarding?.name === name);
      assert.deepEqual(
        ofZone.map((e) => podsNamed(e.note ?? '')),
        [[`${name}-0`], [`${name}-1`, `${name}-2`]],
      );
      assert.equal(ofZone[0]?.related?.name, `${name}-0`);
      const done = complete.find((e) => e.regarding?.name === name)!;
      for (const e of ofZone) assert.ok(e.eventTime <= done.eventTime, `${e.note} before ${done.note}`);
    }
    assert.deepEqual(await operatorEvents(kube, namespace, 'RolloutWaiting'), []);
  });

  it('takes up to rollout-max-unavailable pods of a zone at once: "2" and "50%"', async (t) => {
    const { namespace, kube, monitor } = await setup(
      t,
      { a: { replicas: 4, maxUnavailable: '2' }, b: { replicas: 4, maxUnavailable: '50%' }, c: { replicas: 2 } },
      { a: 2, b: 2, c: 1 },
    );
    await startOperator(t, namespace);
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    await waitRolledOut(kube, namespace);
    assert.deepEqual(monitor.violations, []);
    // Two pods of zone a (and of b) were down together at some point: the budget was used, not just respected.
    const concurrent = (zone: string) => {
      let down = 0;
      let most = 0;
      const state = new Map<string, boolean>();
      for (const tr of monitor.transitions.filter((x) => x.pod.startsWith(`ingester-zone-${zone}-`))) {
        state.set(tr.pod, !tr.to.endsWith('/ready'));
        down = [...state.values()].filter(Boolean).length;
        most = Math.max(most, down);
      }
      return most;
    };
    assert.equal(concurrent('a'), 2);
    assert.equal(concurrent('b'), 2);
  });

  it('rolls first the zone that already has a not-Ready pod', async (t) => {
    const { namespace, kube } = await setup(t);
    // Zone c's pod 1 goes not-Ready (a kwok knob) before the rollout starts.
    await kube.patch(resources.pods, { namespace, name: 'ingester-zone-c-1' }, 'merge', {
      metadata: { labels: { 'stateward.dev/simulate': 'not-ready' } },
    });
    await waitFor(
      'zone c disrupted',
      async () =>
        (await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-c' })).status
          ?.readyReplicas === 2,
      { timeoutMs: 15_000 },
    );
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    const monitor = new InvariantMonitor(kube, namespace, {});
    await monitor.start();
    t.after(() => monitor.stop());
    const operator = await startOperator(t, namespace);
    await waitRolledOut(kube, namespace, 60_000).catch((error: unknown) => {
      console.log(
        operator.logs
          .split('\n')
          .filter((l) => !l.includes('level=debug msg=synced'))
          .slice(-40)
          .join('\n'),
      );
      throw error;
    });
    // The first pod the rollout touched is zone c's (its not-Ready pod, replaced at once);
    // once zone c is whole again the usual name order resumes.
    const firstDeleted = monitor.transitions.find((tr) => tr.to.endsWith('/terminating'));
    assert.equal(firstDeleted?.pod, 'ingester-zone-c-1');
    assert.deepEqual(monitor.violations, []);
  });

  it('passes over a paused StatefulSet and rolls the next one; rolls it once unpaused', async (t) => {
    const { namespace, kube, monitor } = await setup(t, { a: { paused: true } });
    await startOperator(t, namespace);
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    await waitRolledOut(kube, namespace, 120_000, ['b', 'c']);
    const a = await kube.get<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-a' });
    assert.notEqual(a.status?.currentRevision, a.status?.updateRevision, 'paused zone untouched');
    assert.ok(
      !monitor.transitions.some((tr) => tr.pod.startsWith('ingester-zone-a-')),
      'no pod of the paused zone changed',
    );
    await kube.patch(resources.statefulSets, { namespace, name: 'ingester-zone-a' }, 'merge', {
      metadata: { annotations: { 'grafana.com/rollout-paused': null } },
    });
    await waitRolledOut(kube, namespace);
    assert.deepEqual(monitor.violations, []);
  });

  it('counts a settled group as reconciled on every resync without planning it, and rolls it at its next change', async (t) => {
    const { namespace, kube, monitor } = await setup(t);
    const operator = await startOperator(t, namespace, ['-log.level=debug']);
    const settled = /msg="group settled: resyncs count it as reconciled without planning it/g;
    await waitFor('the group to settle', () => (operator.logs.match(settled)?.length ?? 0) === 1, {
      timeoutMs: 30_000,
    });
    // What dashboards and alerts read (StatewardRolloutGroupNotReconciled) keeps moving at the interval.
    const reconciles = `rollout_operator_group_reconciles_total{rollout_group="ingester"}`;
    const lastSuccess = `rollout_operator_last_successful_group_reconcile_timestamp_seconds{rollout_group="ingester"}`;
    const before = { count: (await operator.metric(reconciles)) ?? 0, at: (await operator.metric(lastSuccess)) ?? 0 };
    await waitFor(
      'three resyncs of the settled group to be counted, each a success',
      async () =>
        ((await operator.metric(reconciles)) ?? 0) >= before.count + 3 &&
        ((await operator.metric(lastSuccess)) ?? 0) > before.at,
      { timeoutMs: 15_000 },
    );
    assert.equal(await operator.metric(`rollout_operator_group_reconciles_failed_total{rollout_group="ingester"}`), 0);
    // Settled means nothing was planned since: no "reconciling" work beyond the first.
    assert.equal(operator.logs.match(settled)?.length, 1, 'settled once, and stayed so');
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    await waitRolledOut(kube, namespace);
    assert.deepEqual(monitor.violations, []);
    assert.equal(monitor.maxDisruptedAtOnce, 1);
    await waitFor(
      'the group to settle again after its rollout',
      () => (operator.logs.match(settled)?.length ?? 0) >= 2,
      { timeoutMs: 30_000 },
    );
  });

  it('blocks a group with a RollingUpdate StatefulSet, with an Event on it and a metric', async (t) => {
    const { namespace, kube, monitor } = await setup(t, { c: { strategy: 'RollingUpdate' } });
    const operator = await startOperator(t, namespace);
    await changeTemplate(kube, namespace, 'a', '2');
    const event = await waitFor(
      'a RolloutBlocked Event on ingester-zone-c',
      async () => {
        const events = (await kube.list<Event>(resources.events, { namespace })).items;
        return events.find((e) => e.reason === 'RolloutBlocked' && e.regarding?.name === 'ingester-zone-c');
      },
      { timeoutMs: 15_000 },
    );
    assert.match(event.note ?? '', /ingester-zone-c has RollingUpdate update strategy while OnDelete is expected/);
    assert.equal(event.type, 'Warning');
    const metrics = (await operator.get('/metrics'))!.body;
    assert.match(metrics, /stateward_rollout_group_blocked\{rollout_group="ingester"\} 1/);
    assert.match(metrics, /rollout_operator_group_reconciles_failed_total\{rollout_group="ingester"\} [1-9]/);
    assert.ok(!monitor.transitions.some((tr) => tr.pod.startsWith('ingester-zone-a-')), 'nothing was rolled');
  });

  it('recovers a crash-looping zone once its template is fixed (rollout-operator #339)', async (t) => {
    const { namespace, kube } = await setup(t, { all: { replicas: 2 } });
    await startOperator(t, namespace);
    await changeTemplate(kube, namespace, 'a', 'broken', { 'stateward.dev/simulate': 'crash-loop' });
    await waitCrashLooping(kube, namespace, 'ingester-zone-a-0');
    // The rollout waits on its own pace (the pod it replaced not Ready):
    // told by an Event once that lasted PACE_NEWS_MS, not before.
    const waiting = await waitFor(
      'a RolloutWaiting Event on ingester-zone-a',
      async () => (await operatorEvents(kube, namespace, 'RolloutWaiting'))[0],
      { timeoutMs: PACE_NEWS_MS + 30_000 },
    );
    assert.equal(waiting.regarding?.name, 'ingester-zone-a');
    assert.match(waiting.note ?? '', /not Ready/);
    const deleted = (await operatorEvents(kube, namespace, 'DeletingPod')).at(-1)!;
    const waitedMs = Date.parse(waiting.eventTime) - Date.parse(deleted.eventTime);
    assert.ok(waitedMs >= PACE_NEWS_MS, `told after ${waitedMs} ms of waiting`);
    const monitor = new InvariantMonitor(kube, namespace, {});
    await monitor.start();
    t.after(() => monitor.stop());
    await changeTemplate(kube, namespace, 'a', 'fixed', { 'stateward.dev/simulate': null });
    await waitRolledOut(kube, namespace, 60_000);
    assert.deepEqual(monitor.violations, []);
  });

  it('recovers from a failed update released to every zone: the broken revision stops at one pod, the fixed one rolls every zone (rollout-operator v0.39 TestRolloutRecoversFromFailedUpdate, #466)', async (t) => {
    const { namespace, kube, monitor } = await setup(t, { all: { replicas: 2 } });
    for (const zone of ZONES)
      await changeTemplate(kube, namespace, zone, 'broken', { 'stateward.dev/simulate': 'crash-loop' });
    await waitRevisionsPending(kube, namespace);
    const operator = await startOperator(t, namespace);
    const broken = await waitCrashLooping(kube, namespace, 'ingester-zone-a-0');
    const brokenRevision = broken.metadata?.labels?.['controller-revision-hash'];
    // The crash-looping pod is on the update revision: it holds zone a's
    // budget of 1, so its other pod stays, and zones b and c wait. Two
    // reconciles after it crash-looped, nothing else has gone.
    const reconciles = () => operator.metric('rollout_operator_group_reconciles_total{rollout_group="ingester"}');
    const seen = (await reconciles()) ?? 0;
    await waitFor('two reconciles of the stuck group', async () => ((await reconciles()) ?? 0) >= seen + 2, {
      timeoutMs: 15_000,
    });
    const gone = (tr: Transition) => tr.to.endsWith('/terminating');
    // Seen once in CI (a-0 terminating twice within 5 s, not reproduced since): every transition goes into the
    // message, so the next occurrence says which revision the second one left from.
    assert.deepEqual(
      monitor.transitions.filter(gone).map((tr) => tr.pod),
      ['ingester-zone-a-0'],
      `the broken revision took one pod; transitions: ${monitor.transitions
        .map((tr) => `${new Date(tr.at).toISOString()} ${tr.pod} ${tr.from} → ${tr.to}`)
        .join('; ')}`,
    );
    const fixedAt = monitor.transitions.length;
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, 'fixed', { 'stateward.dev/simulate': null });
    await waitRolledOut(kube, namespace, 120_000);
    assert.deepEqual(monitor.violations, [], monitor.report());
    assert.deepEqual(zoneOrder(monitor.transitions), ['a', 'b', 'c']);
    // The crash-looping pod went first, from its broken revision: the budget it held was no reason to keep it.
    assert.equal(monitor.transitions.slice(fixedAt).find(gone)?.pod, 'ingester-zone-a-0');
    assert.equal(monitor.transitions.slice(fixedAt).find(gone)?.from, `${brokenRevision}/not-ready`);
  });

  it('completes a rollout while the operator is SIGKILLed at random points and restarted, guarantees intact', async (t) => {
    const { namespace, kube, monitor } = await setup(t);
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    await waitRevisionsPending(kube, namespace);
    // Transitions so far (none of the rollout: nothing deletes a pod before the operator starts).
    const base = monitor.transitions.length;
    let operator = await startOperator(t, namespace);
    const kills: number[] = [];
    // Seeded, and printed with every failure below, so a failing sequence of kill points can be run again (KILL_SEED=<n>).
    const seed = Number(process.env['KILL_SEED'] || Date.now() % 2 ** 31);
    const prng = new Prng(seed);
    t.diagnostic(`kill points seeded with KILL_SEED=${seed}`);
    // Four distinct kill points, in pod state transitions from here. The
    // rollout makes at least 18 (each of 9 pods goes from Ready to
    // terminating and back to Ready), so every point is reached: a point past
    // the end of the rollout would wait for progress that never comes.
    const points = new Set<number>();
    while (points.size < 4) points.add(prng.int(1, 17));
    for (const point of [...points].sort((a, b) => a - b)) {
      // Wait for that much rollout progress, then kill without warning.
      const target = base + point;
      await waitFor(
        `rollout progress to transition ${point} (KILL_SEED=${seed})`,
        () => monitor.transitions.length >= target,
        { timeoutMs: 60_000, intervalMs: 20 },
      );
      operator.signal('SIGKILL');
      await operator.exited;
      kills.push(monitor.transitions.length);
      operator = await startOperator(t, namespace);
    }
    await waitRolledOut(kube, namespace);
    t.diagnostic(
      `killed after transitions ${kills.map((k) => k - base).join(', ')} of ${monitor.transitions.length - base}`,
    );
    assert.equal(kills.length, 4);
    assert.deepEqual(monitor.violations, [], `KILL_SEED=${seed}, killed after transitions ${kills.join(', ')}`);
    assert.deepEqual(
      zoneOrder(monitor.transitions),
      ['a', 'b', 'c'],
      `KILL_SEED=${seed}, killed after transitions ${kills.join(', ')}`,
    );
  });

  it('hands a rollout in flight to the standby when the leader dies', async (t) => {
    const { namespace, kube, monitor } = await setup(t);
    const replicas = [
      await startOperator(t, namespace, FAST_ELECTION),
      await startOperator(t, namespace, FAST_ELECTION),
    ];
    const leader = await waitFor(
      'a leader',
      async () => {
        for (const r of replicas) if ((await r.metric('stateward_leader_is_leader')) === 1) return r;
        return undefined;
      },
      { timeoutMs: 15_000 },
    );
    const standby = replicas.find((r) => r !== leader)!;
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    await waitFor(
      'zone a half rolled',
      () =>
        monitor.transitions.filter((tr) => tr.pod.startsWith('ingester-zone-a-') && tr.to.endsWith('/terminating'))
          .length >= 2,
      { timeoutMs: 60_000, intervalMs: 50 },
    );
    leader.signal('SIGKILL');
    await waitRolledOut(kube, namespace);
    assert.equal(await standby.metric('stateward_leader_is_leader'), 1);
    assert.match(standby.logs, /became leader/);
    assert.match(standby.logs, /deleting pod ingester-zone-[bc]-/, 'the standby carried the rollout on');
    assert.deepEqual(monitor.violations, []);
  });
});
