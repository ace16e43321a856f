// Leader election when a replica's wall clock steps (an NTP correction, an
// administrator's `date -s`), against the real apiserver. The electors run
// in this process on clocks whose wall reading the test can step; timers and
// the monotonic reading are the system's, so only a step differs from
// production. The API is never mocked: a replica loses it through a TCP
// proxy that the test cuts, and the clients are only observed.
import assert from 'node:assert/strict';
import { createServer, connect, type Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { systemClock, type Clock, type Timer } from '../../../src/runtime/clock.ts';
import { KubeClient, type CallOptions } from '../../../src/runtime/kube/client.ts';
import type { KubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import type { ObjectPath } from '../../../src/runtime/kube/paths.ts';
import { resources, type KubeObject, type Lease, type ResourceType } from '../../../src/runtime/kube/types.ts';
import { LeaderElector, type ElectorOptions } from '../../../src/runtime/leaderelection/elector.ts';
import { waitFor } from '../../cluster/probe.ts';
import { testCluster } from '../../cluster/testing.ts';

const cluster = testCluster();
const LEASE = 'stateward-leader';
const MINUTE = 60_000;

/** The system clock, with a wall reading the test can step. */
class SteppableClock implements Clock {
  private offset = 0;
  now(): number {
    return Date.now() + this.offset;
  }
  monotonic(): number {
    return performance.now();
  }
  setTimer(ms: number, fn: () => void): Timer {
    return systemClock.setTimer(ms, fn);
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return systemClock.sleep(ms, signal);
  }
  step(ms: number): void {
    this.offset += ms;
  }
}

/** A KubeClient that tells the test what the apiserver answered about the Lease. */
class ObservedClient extends KubeClient {
  onLease: ((lease: Lease, how: 'read' | 'written') => void) | undefined;

  override async get<T extends KubeObject>(
    type: ResourceType,
    where: ObjectPath & { name: string },
    options?: CallOptions,
  ): Promise<T> {
    const got = await super.get<T>(type, where, options);
    if (type === resources.leases) this.onLease?.(got as Lease, 'read');
    return got;
  }

  override async update<T extends KubeObject>(
    type: ResourceType,
    object: T,
    options?: Parameters<KubeClient['update']>[2],
  ): Promise<T> {
    const updated = await super.update<T>(type, object, options);
    if (type === resources.leases) this.onLease?.(updated as Lease, 'written');
    return updated;
  }
}

/** A TCP proxy to the apiserver that the test can cut: every connection closed, new ones refused. */
async function cuttableProxy(t: TestContext): Promise<{ kubeConfig: KubeConfig; cut: () => void }> {
  const apiPort = Number(new URL(cluster.state.server).port);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(apiPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s)).on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)),
  );
  const cut = () => {
    server.close();
    for (const s of sockets) s.destroy();
  };
  t.after(cut);
  return { kubeConfig: cluster.kubeConfig().withServer(`https://127.0.0.1:${port}`), cut };
}

function client(kubeConfig: KubeConfig = cluster.kubeConfig()): ObservedClient {
  return new ObservedClient({ kubeConfig, timeoutMs: 5000 });
}

/** Runs an elector until the test ends. */
function campaign(t: TestContext, options: Omit<ElectorOptions, 'name'>): LeaderElector {
  const elector = new LeaderElector({ name: LEASE, ...options });
  const stop = new AbortController();
  const running = elector.run(stop.signal);
  t.after(async () => {
    stop.abort();
    await running;
  });
  return elector;
}

/** Samples both electors every few ms and counts the samples in which both believe they lead. */
function splitBrainMonitor(
  t: TestContext,
  a: LeaderElector,
  b: LeaderElector,
): { readonly both: number; stop: () => void } {
  const state = { both: 0, stop: () => clearInterval(timer) };
  const timer = setInterval(() => {
    if (a.isLeader() && b.isLeader()) state.both++;
  }, 5);
  t.after(state.stop);
  return state;
}

describe('leader election under wall-clock steps', { timeout: 60_000 }, () => {
  it('a leader whose clock steps back 60 s as it loses the API stops leading within the renew deadline; the standby takes over alone', async (t) => {
    const namespace = await cluster.namespace(t);
    const timings = { leaseDurationMs: 4000, renewDeadlineMs: 3000, retryPeriodMs: 500 };
    const proxy = await cuttableProxy(t);
    const clockA = new SteppableClock();
    const a = campaign(t, { client: client(proxy.kubeConfig), namespace, identity: 'a', clock: clockA, ...timings });
    await waitFor('a to lead', () => a.isLeader(), { timeoutMs: 10_000, intervalMs: 20 });
    const clientB = client();
    let writesB = 0;
    clientB.onLease = (_, how) => void (how === 'written' && writesB++);
    const b = campaign(t, { client: clientB, namespace, identity: 'b', ...timings });
    await waitFor('b to see a lead', () => b.leaderIdentity === 'a', { timeoutMs: 10_000, intervalMs: 20 });
    const monitor = splitBrainMonitor(t, a, b);

    // a loses the API, and its wall clock steps back a minute.
    proxy.cut();
    clockA.step(-MINUTE);
    // Its last successful renewal is the renewTime it wrote (its clock was not stepped yet).
    const lease = await client().get<Lease>(resources.leases, { namespace, name: LEASE });
    assert.equal(lease.spec?.holderIdentity, 'a');
    const lastRenew = Date.parse(lease.spec?.renewTime ?? '');
    const mustStopBy = lastRenew + timings.renewDeadlineMs + 500;
    const stoppedAt = await waitFor('a to stop believing it leads', () => !a.isLeader() && Date.now(), {
      timeoutMs: Math.max(0, mustStopBy - Date.now()),
      intervalMs: 10,
    });
    assert.ok(
      stoppedAt <= mustStopBy,
      `a stopped leading ${stoppedAt - lastRenew} ms after its last renewal (renew deadline ${timings.renewDeadlineMs} ms)`,
    );

    await waitFor('b to take over', () => b.isLeader(), { timeoutMs: 15_000, intervalMs: 10 });
    // Two more renewals of b's with a still cut off: still one leader.
    const acquired = writesB;
    await waitFor('b to renew twice', () => writesB >= acquired + 2, { timeoutMs: 5000, intervalMs: 20 });
    monitor.stop();
    assert.equal(monitor.both, 0, 'never two leaders');
    assert.equal(a.isLeader(), false);
  });

  it('a standby whose clock steps forward does not take a lease the leader keeps renewing', async (t) => {
    const namespace = await cluster.namespace(t);
    // The leader renews every 3 s; the standby looks every 0.5 s. A step
    // right after the standby read a fresh renewal leaves it about two and a
    // half seconds in which the lease does not change.
    const clientA = client();
    const a = campaign(t, {
      client: clientA,
      namespace,
      identity: 'a',
      leaseDurationMs: 8000,
      renewDeadlineMs: 6000,
      retryPeriodMs: 3000,
    });
    await waitFor('a to lead', () => a.isLeader(), { timeoutMs: 10_000, intervalMs: 20 });
    let lastWrite: { resourceVersion: string | undefined; at: number } | undefined;
    let renewals = 0;
    clientA.onLease = (lease, how) => {
      if (how !== 'written') return;
      lastWrite = { resourceVersion: lease.metadata?.resourceVersion, at: performance.now() };
      renewals++;
    };

    const clockB = new SteppableClock();
    const clientB = client();
    let steppedAt: number | undefined;
    clientB.onLease = (lease, how) => {
      // The moment the standby has read a renewal made less than a second ago: step its clock.
      if (how !== 'read' || steppedAt !== undefined || !lastWrite) return;
      if (lease.metadata?.resourceVersion !== lastWrite.resourceVersion || performance.now() - lastWrite.at > 1000)
        return;
      clockB.step(MINUTE);
      steppedAt = renewals;
    };
    const b = campaign(t, {
      client: clientB,
      namespace,
      identity: 'b',
      clock: clockB,
      leaseDurationMs: 8000,
      renewDeadlineMs: 6000,
      retryPeriodMs: 500,
    });
    const monitor = splitBrainMonitor(t, a, b);
    let bLed = false;
    const watchB = setInterval(() => void (bLed ||= b.isLeader()), 5);
    t.after(() => clearInterval(watchB));

    await waitFor('b to step its clock after reading a fresh renewal', () => steppedAt !== undefined, {
      timeoutMs: 15_000,
      intervalMs: 20,
    });
    // Three more renewals of a's: b reads the lease about 18 times meanwhile.
    await waitFor('a to renew three more times', () => renewals >= steppedAt! + 3 || bLed, {
      timeoutMs: 15_000,
      intervalMs: 20,
    });
    clearInterval(watchB);
    monitor.stop();
    assert.equal(bLed, false, 'the standby took the lease of a live leader');
    assert.equal(monitor.both, 0, 'never two leaders');
    assert.ok(a.isLeader(), 'a still leads');
    assert.equal(b.leaderIdentity, 'a');
  });
});
