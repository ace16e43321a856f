// `npm run bench [-- name ...]`: performance figures, reported with the
// machine they ran on. Targets live here, never in timed tests.
//   cluster   local cluster warm start and teardown
//   informer  cache memory for 10,000 pods (transform on vs off), watch throughput
//   rollout   reaction latency and makespan of a 3-zone × 10-pod rollout
//   webhooks  no-downscale webhook over HTTPS at 500 req/s: latency, server CPU, API calls; then the
//             real operator at 200 and 500 req/s: /scale no-downscale, allowed and denied evictions
//   evictions pod-eviction decisions with 300 pods over 3 zones: rate, p99, API calls per decision
//   restarts  config-change restarts with 7,000 configs and 500 workloads, side by side with Reloader
//             and xing's restart controller (built from source on first use): start, sync, latency, memory, CPU, API calls
//   abuse     the operator's two servers under hostile clients (issue 16): RSS, log bytes, good-request p99;
//             then issue 33's attacks, side by side with rollout-operator v0.38.1 (BENCH_ABUSE_ROWS,
//             BENCH_ABUSE_SYSTEMS, BENCH_ABUSE_SAME_PEER: see bench/abuse.bench.ts)
//   healthgate the rollout behind a passing Prometheus health gate (issue 36): makespan ÷ ideal gated vs
//             ungated, queries per rollout per check, healthy → next zone's first delete
//   versus    side by side with grafana/rollout-operator v0.38.1 (built from source on first use): start, RSS,
//             idle CPU, API requests (idle, per rollout, through a counting proxy), makespan ÷ ideal (issue 19)
import { clusterBench } from './cluster.bench.ts';
import { informerBench } from './informer.bench.ts';
import { rolloutBench } from './rollout.bench.ts';
import { webhooksBench } from './webhooks.bench.ts';
import { webhooksLoadBench } from './webhooks-load.bench.ts';
import { evictionsBench } from './evictions.bench.ts';
import { restartsBench } from './restarts.bench.ts';
import { abuseBench } from './abuse.bench.ts';
import { versusBench } from './versus.bench.ts';
import { healthgateBench } from './healthgate.bench.ts';
import { machine } from './report.ts';

const runs = Number.parseInt(process.env['BENCH_RUNS'] ?? '3', 10);
const selected = process.argv.slice(2);
const all: Record<string, () => Promise<boolean>> = {
  cluster: () => clusterBench(runs),
  informer: () => informerBench(),
  rollout: () => rolloutBench(),
  webhooks: async () => {
    const server = await webhooksBench();
    const underLoad = await webhooksLoadBench();
    return server && underLoad;
  },
  evictions: () => evictionsBench(),
  restarts: () => restartsBench(),
  abuse: () => abuseBench(),
  versus: () => versusBench(),
  healthgate: () => healthgateBench(),
};
for (const name of selected)
  if (!all[name]) throw new Error(`unknown benchmark "${name}"; one of ${Object.keys(all).join(', ')}`);

console.log(`machine: ${machine()}`);
let ok = true;
for (const [name, bench] of Object.entries(all)) {
  if (selected.length > 0 && !selected.includes(name)) continue;
  ok = (await bench()) && ok;
}
process.exitCode = ok ? 0 : 1;
