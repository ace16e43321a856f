// rollout-reaction: 3 zones × 10 pods, 2 s readiness delay, max-unavailable 1.
// Reaction latency: from the watcher seeing a pod become Ready to it seeing
// the operator's next pod delete (p50, p99; target p99 ≤ 50 ms).
// Makespan: template change to last pod Ready, divided by the ideal
// (Σ zones × batches × median pod restart time; target ≤ 1.05).
// API requests the operator made for the rollout.
import { spawn } from 'node:child_process';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { freePorts } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { KubeClient } from '../src/runtime/kube/client.ts';
import {
  changeTemplate,
  createGroup,
  InvariantMonitor,
  waitGroupSettled,
  waitRolledOut,
  ZONES,
} from '../test/support/rollout-group.ts';
import { benchNamespace } from './namespace.ts';
import { statewardEntry } from './stateward-build.ts';
import { percentile, report } from './report.ts';

const REPLICAS = 10;

async function apiRequests(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('rollout_operator_kubernetes_api_client_request_duration_seconds_count'))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

export async function rolloutBench(): Promise<boolean> {
  const cluster = await LocalCluster.start({ name: `bench-rollout-${process.pid}`, nodesPerZone: 1, log: () => {} });
  try {
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
    const namespace = await benchNamespace(kube);
    await createGroup(kube, namespace, { all: { replicas: REPLICAS, readyDelay: '2s' } });
    await waitGroupSettled(kube, namespace);
    const monitor = new InvariantMonitor(kube, namespace, {});
    await monitor.start();
    const [port] = await freePorts(1);
    const operator = spawn(
      process.execPath,
      [
        ...(await statewardEntry()).nodeFlags,
        (await statewardEntry()).entry,
        `-kubernetes.namespace=${namespace}`,
        `-kubernetes.config-file=${cluster.kubeconfigPath}`,
        `-kubernetes.api-url=${cluster.server}`,
        `-server.port=${port}`,
        '-log.level=warn',
      ],
      { stdio: 'ignore', env: { ...process.env, ...(await statewardEntry()).env } },
    );
    try {
      await waitFor(
        'operator ready',
        async () => (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status === 200,
        { timeoutMs: 30_000 },
      );
      const requestsBefore = await apiRequests(port!);
      const started = Date.now();
      for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
      await waitRolledOut(kube, namespace, 600_000);
      const transitions = monitor.transitions;
      const lastReady = Math.max(...transitions.filter((t) => t.to.endsWith('/ready')).map((t) => t.at));
      const makespan = lastReady - started;
      const requests = (await apiRequests(port!)) - requestsBefore;

      // The operator's deletes: Ready pods going to terminating. kwok v0.8 now and
      // then also deletes a just-created replacement pod (it deletes by name,
      // without a UID precondition); those are not the operator's and are counted apart.
      const allDeletes = transitions.filter((t) => t.to.endsWith('/terminating'));
      const deletes = allDeletes.filter((t) => t.from.endsWith('/ready'));
      const strayDeletes = allDeletes.length - deletes.length;
      const latencies: number[] = [];
      for (const d of deletes.slice(1)) {
        const ready = transitions.filter((t) => t.to.endsWith('/ready') && t.at <= d.at).at(-1);
        if (ready) latencies.push(d.at - ready.at);
      }
      // Pod restart: from a pod's delete to its replacement (same name) being Ready.
      const restarts = deletes
        .map((d) => {
          const back = transitions.find((t) => t.pod === d.pod && t.at > d.at && t.to.endsWith('/ready'));
          return back ? back.at - d.at : NaN;
        })
        .filter((x) => !Number.isNaN(x));
      const restart = percentile(restarts, 50);
      const ideal = ZONES.length * REPLICAS * restart;
      const p99 = percentile(latencies, 99);
      const ratio = makespan / ideal;
      report(
        'rollout-reaction',
        `${latencies.length} reactions: p50 ${percentile(latencies, 50)} ms, p99 ${p99} ms, max ${Math.max(...latencies)} ms (target p99 ≤ 50 ms: ${p99 <= 50 ? 'met' : 'MISSED'})`,
      );
      report(
        'rollout-makespan',
        `${(makespan / 1000).toFixed(1)} s for ${ZONES.length}×${REPLICAS} pods; ideal ${(ideal / 1000).toFixed(1)} s (median pod restart ${(restart / 1000).toFixed(2)} s); ratio ${ratio.toFixed(3)} (target ≤ 1.05: ${ratio <= 1.05 ? 'met' : 'MISSED'})`,
      );
      report(
        'rollout-api-requests',
        `${requests} API requests for the rollout (${(requests / (ZONES.length * REPLICAS)).toFixed(1)} per pod); invariant violations: ${monitor.violations.length}; replacement pods deleted by kwok: ${strayDeletes}`,
      );
      return p99 <= 50 && ratio <= 1.05 && monitor.violations.length === 0;
    } finally {
      operator.kill('SIGTERM');
      await monitor.stop();
      await kube.close();
    }
  } finally {
    await cluster.teardown();
  }
}
