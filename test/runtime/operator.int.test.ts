// The runtime as a whole, run as the real executable: readiness follows the
// caches, metrics include process and runtime metrics, SIGTERM exits cleanly,
// and leader election gives exactly one acting replica.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type Lease } from '../../src/runtime/kube/types.ts';
import { microTime } from '../../src/runtime/kube/time.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { OperatorProcess } from '../support/operator-process.ts';

const cluster = testCluster();
const election = [
  '-leader-election.enabled',
  '-leader-election.lease-duration=4s',
  '-leader-election.renew-deadline=3s',
  '-leader-election.retry-period=500ms',
];

async function leaderOf(processes: OperatorProcess[]): Promise<OperatorProcess[]> {
  const values = await Promise.all(processes.map((p) => p.metric('stateward_leader_is_leader')));
  return processes.filter((_, i) => values[i] === 1);
}

describe('operator runtime', () => {
  it('answers /ready 503 until its caches have synced, then 200; exposes process metrics; exits 0 on SIGTERM', async (t) => {
    const namespace = await cluster.namespace(t);
    await cluster.pauseComponent('apiserver');
    let operator: OperatorProcess | undefined;
    try {
      operator = await OperatorProcess.start(cluster, namespace, ['-kubernetes.client-timeout=3s']);
      t.after(() => operator?.stop());
      const notReady = await waitFor('the HTTP server', () => operator!.get('/ready'), { timeoutMs: 15_000 });
      assert.equal(notReady.status, 503, 'not ready while the apiserver cannot answer the first list');
      assert.equal((await operator.get('/healthz'))?.status, 200, 'alive all the same');
    } finally {
      await cluster.resumeComponent('apiserver');
    }
    await operator.waitReady();
    const metrics = (await operator.get('/metrics'))!.body;
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
      'rollout_operator_kubernetes_api_client_request_duration_seconds_bucket',
    ]) {
      assert.match(metrics, new RegExp(`^${name}`, 'm'), `${name} exported`);
    }
    operator.signal('SIGTERM');
    const exit = await operator.exited;
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.match(operator.logs, /msg=stopped/);
  });

  it('elects exactly one leader; a SIGKILLed leader is replaced within the lease duration', async (t) => {
    const namespace = await cluster.namespace(t);
    const replicas = await Promise.all([0, 1].map(() => OperatorProcess.start(cluster, namespace, election)));
    t.after(() => Promise.all(replicas.map((r) => r.stop())));
    await Promise.all(replicas.map((r) => r.waitReady()));
    const [leader] = await waitFor(
      'a leader',
      async () => {
        const leaders = await leaderOf(replicas);
        return leaders.length === 1 ? leaders : undefined;
      },
      { timeoutMs: 15_000 },
    );
    // Stays exactly one over several renewals: watched on the Lease itself
    // (each renewal is a new resourceVersion, same holder), with the leaders
    // counted at every one of them.
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 5000 });
    t.after(() => kube.close());
    const renewals = new Set<string>();
    let holder: string | undefined;
    const counts: number[] = [];
    await waitFor(
      'four renewals of the leader Lease',
      async () => {
        const lease = await kube.get<Lease>(resources.leases, { namespace, name: 'stateward-leader' });
        holder ??= lease.spec?.holderIdentity;
        assert.equal(lease.spec?.holderIdentity, holder, 'one holder throughout');
        if (!renewals.has(lease.metadata?.resourceVersion ?? '')) {
          renewals.add(lease.metadata?.resourceVersion ?? '');
          counts.push((await leaderOf(replicas)).length);
        }
        return renewals.size >= 5 ? true : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    assert.deepEqual(counts, [1, 1, 1, 1, 1], 'exactly one replica leads at each renewal');
    const standby = replicas.find((r) => r !== leader)!;
    assert.equal(await standby.metric('stateward_leader_is_leader'), 0);
    const killedAt = Date.now();
    leader!.signal('SIGKILL');
    await waitFor('the standby to take over', async () => (await standby.metric('stateward_leader_is_leader')) === 1, {
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    const handover = Date.now() - killedAt;
    // The standby sees the lease expire 4 s after it last saw it change: at
    // most the lease duration plus two retry periods (with jitter), plus
    // scheduling and scrape slack on a loaded machine.
    assert.ok(handover <= 4000 + 2 * 600 + 1500, `handover took ${handover} ms`);
  });

  it('stops acting at once when its lease is stolen', async (t) => {
    const namespace = await cluster.namespace(t);
    const operator = await OperatorProcess.start(cluster, namespace, election);
    t.after(() => operator.stop());
    await operator.waitReady();
    await waitFor('leadership', async () => (await operator.metric('stateward_leader_is_leader')) === 1, {
      timeoutMs: 10_000,
    });
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 5000 });
    const lease = await kube.get<Lease>(resources.leases, { namespace, name: 'stateward-leader' });
    await kube.update<Lease>(resources.leases, {
      ...lease,
      spec: { ...lease.spec, holderIdentity: 'thief', renewTime: microTime(Date.now()), leaseDurationSeconds: 30 },
    });
    const stolenAt = Date.now();
    await waitFor(
      'the operator to stop leading',
      async () => (await operator.metric('stateward_leader_is_leader')) === 0,
      { timeoutMs: 5000, intervalMs: 50 },
    );
    assert.ok(Date.now() - stolenAt < 3000, 'within the renew deadline');
    assert.match(operator.logs, /stopped leading: lease now held by thief/);
  });

  it('caches several namespaces with -kubernetes.watch-namespaces, or the whole cluster with "*"', async (t) => {
    const [a, b] = [await cluster.namespace(t, 'scope-a'), await cluster.namespace(t, 'scope-b')];
    const several = await OperatorProcess.start(cluster, a, [`-kubernetes.watch-namespaces=${a},${b}`]);
    t.after(() => several.stop());
    await several.waitReady();
    for (const ns of [a, b]) assert.match(several.logs, new RegExp(`msg=synced informer=${ns}/statefulsets`));
    const everything = await OperatorProcess.start(cluster, a, ['-kubernetes.watch-namespaces=*']);
    t.after(() => everything.stop());
    await everything.waitReady();
    assert.match(everything.logs, /msg=synced informer=statefulsets /);
    // One cluster-wide informer each: StatefulSets, pods, ZoneAwarePodDisruptionBudgets, budget ledgers,
    // RolloutHealthChecks (the health gates).
    assert.match(everything.logs, /msg="caches synced" informers=5/);
  });
});
