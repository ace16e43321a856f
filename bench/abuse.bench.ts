// abuse (issue 16, "Measure"): the real operator executable against a local
// cluster, both servers on (plain HTTP with -web.enabled, HTTPS webhooks
// with a self-signed certificate, default limits and log level), under four
// hostile loads of BENCH_ABUSE_SECONDS (default 20 s) each, a fresh operator
// process for each, the load run by a separate process at nice 19
// (bench/abuse-client.child.ts) so that it neither delays the good requests
// timed here nor takes the CPU the operator would have on its own node:
//   (a) big        16 concurrent 7 MiB AdmissionReviews, back to back
//   (b) idle       3,000 idle connections (TLS and bare TCP, both ports)
//   (c) slowloris  header (and body) bytes one at a time, 200 ms apart
//   (d) fuzz       the raw-socket fuzzer (test/fuzz/http-driver.ts) at full speed
// During each, and alone before and after (the idle baseline: the lower p99
// of the two is the reference), good no-downscale reviews are sent open-loop
// at 200 req/s over 16 keep-alive connections opened before the load starts
// (as the API server keeps its own).
// Figures per row: the operator's RSS when the load starts and its peak
// (/proc/<pid>/status VmRSS sampled every 100 ms; VmHWM since the process
// started), bytes it logged (stdout and stderr), the hostile requests (or
// connections) sent, log bytes per 1,000 of them (beyond what the good
// requests alone make it log, in the idle rows), and the good requests'
// p50/p99 (a failed one counts as infinitely slow).
// Targets: alive throughout; peak RSS (VmHWM: the process is fresh, so it
// is the row's) under 70 % of the chart's 512Mi limit; under 1 MB of log per
// 1,000 hostile requests; good p99 within 2× idle.
//
// Then issue 33's attacks (bench/abuse-rows.ts), Stateward and
// rollout-operator side by side on each: pipeline-metrics,
// pipeline-metrics-20, body-hold, slow-readers, idle-tls, handshake-flood,
// pipeline-reviews, keepalive-plain.
// Environment: BENCH_ABUSE_ROWS (every row): a comma-separated selection
// of the rows above, old and new, e.g. big,pipeline-metrics,body-hold;
// BENCH_ABUSE_SYSTEMS (stateward,rollout-operator): the systems of the
// issue-33 rows; BENCH_ABUSE_SAME_PEER=1: their attacks come from 127.0.0.1,
// the good traffic's own address, instead of 127.0.0.2; BENCH_ABUSE_SECONDS
// (20) per attack; BENCH_ABUSE_FRESH_RPS (20) and BENCH_ABUSE_KEEPALIVE_RPS
// (100), the good reviews' rates there.
import { Agent } from 'node:https';
import { setTimeout as delay } from 'node:timers/promises';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { FuzzOperator, HOST } from '../test/fuzz/http-driver.ts';
import type { Attack } from './abuse-attacks.child.ts';
import type { ClientOptions, ClientResult, Scenario } from './abuse-client.child.ts';
import { ATTACKS, issue33Rows } from './abuse-rows.ts';
import { hostileProcess, RssSampler, SYSTEM_NAMES, type SystemName } from './abuse-systems.ts';
import { benchNamespace } from './namespace.ts';
import { mib, percentile, report } from './report.ts';
import { installCrds } from './versus.bench.ts';
import { drive, reviewTemplate } from './webhooks.bench.ts';

const CHART_MEMORY_LIMIT = 512 * 2 ** 20;
const RSS_TARGET = CHART_MEMORY_LIMIT * 0.7;
const LOG_TARGET_PER_1000 = 1_000_000;
const RATE = 200;
const SECONDS = Number(process.env['BENCH_ABUSE_SECONDS'] ?? 20);
const SEED = Number(process.env['FUZZ_SEED'] || 20240917);

const SCENARIOS: { scenario: Scenario; label: string }[] = [
  { scenario: 'big', label: '(a) 16 × 7 MiB reviews' },
  { scenario: 'idle', label: '(b) 3,000 idle connections' },
  { scenario: 'slowloris', label: '(c) slowloris' },
  { scenario: 'fuzz', label: '(d) fuzzer, full speed' },
];

interface Row {
  label: string;
  alive: boolean;
  rssStart: number;
  rssPeak: number;
  hwm: number;
  logBytes: number;
  hostile: number;
  p50: number;
  p99: number;
  good: number;
  errors: number;
  firstError?: string;
  notes: string[];
}

/** Runs the hostile client for one scenario; resolves to its result (or the reason there is none). */
function hostileClient(options: ClientOptions): Promise<ClientResult | string> {
  return hostileProcess<ClientResult>(new URL('./abuse-client.child.ts', import.meta.url), options, options.seconds);
}

/** BENCH_ABUSE_ROWS, BENCH_ABUSE_SYSTEMS: what to run (every row and both systems when unset). */
function selection(): { scenarios: typeof SCENARIOS; attacks: Attack[]; systems: SystemName[] } {
  const names = (variable: string) =>
    (process.env[variable] ?? '')
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
  const rows = names('BENCH_ABUSE_ROWS');
  const known = [...SCENARIOS.map((x) => x.scenario), ...ATTACKS.map((x) => x.attack)] as string[];
  for (const row of rows)
    if (!known.includes(row)) throw new Error(`BENCH_ABUSE_ROWS: unknown row "${row}"; one of ${known.join(', ')}`);
  const systems = names('BENCH_ABUSE_SYSTEMS');
  for (const system of systems)
    if (!(SYSTEM_NAMES as string[]).includes(system))
      throw new Error(`BENCH_ABUSE_SYSTEMS: unknown system "${system}"; one of ${SYSTEM_NAMES.join(', ')}`);
  const chosen = (row: string) => rows.length === 0 || rows.includes(row);
  return {
    scenarios: SCENARIOS.filter((x) => chosen(x.scenario)),
    attacks: ATTACKS.filter((x) => chosen(x.attack)).map((x) => x.attack),
    systems: systems.length ? (systems as SystemName[]) : [...SYSTEM_NAMES],
  };
}

export async function abuseBench(): Promise<boolean> {
  if (!(SECONDS > 0)) throw new Error('BENCH_ABUSE_SECONDS must be a positive number');
  const chosen = selection();
  const cluster = await LocalCluster.start({ name: `bench-abuse-${process.pid}`, nodesPerZone: 1, log: () => {} });
  const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
  try {
    let ok = true;
    if (chosen.scenarios.length > 0)
      ok = (await issue16Rows(cluster, await benchNamespace(kube, 'bench-abuse'), chosen.scenarios)) && ok;
    if (chosen.attacks.length > 0) {
      // rollout-operator never gets ready without the zone-aware PDB CRD (bench/versus.bench.ts).
      installCrds(cluster.kubeconfigPath);
      // A namespace each: Stateward would reuse the certificate rollout-operator stored in a shared one.
      const namespaces: Record<SystemName, string> = {
        stateward: await benchNamespace(kube, 'bench-abuse-sw'),
        'rollout-operator': await benchNamespace(kube, 'bench-abuse-ro'),
      };
      const rows = await issue33Rows({
        attacks: chosen.attacks,
        systems: chosen.systems,
        seconds: SECONDS,
        seed: SEED,
        localAddress: process.env['BENCH_ABUSE_SAME_PEER'] === '1' ? '127.0.0.1' : '127.0.0.2',
        scope: (system) => ({
          namespace: namespaces[system],
          kubeconfig: cluster.kubeconfigPath,
          apiUrl: cluster.server,
        }),
      });
      ok = rows && ok;
    }
    return ok;
  } finally {
    await kube.close();
    await cluster.teardown();
  }
}

/** Issue 16's rows: the operator (from its sources, both servers, -web.enabled) under each scenario, idle before and after. */
async function issue16Rows(cluster: LocalCluster, namespace: string, scenarios: typeof SCENARIOS): Promise<boolean> {
  let operator: FuzzOperator | undefined;
  try {
    const op = (operator = await FuzzOperator.start({
      kubeconfigPath: cluster.kubeconfigPath,
      apiServer: cluster.server,
      namespace,
    }));
    const templates = { deny: reviewTemplate(2), allow: reviewTemplate(4) };

    let rowsMeasured = 0;
    const measure = async (label: string, scenario: Scenario | undefined): Promise<Row> => {
      const notes: string[] = [];
      // A fresh operator for each row, so one scenario's heap growth is not
      // counted against the next (and VmHWM is this row's peak).
      if (rowsMeasured++ > 0 || !op.alive) await op.restart();
      const agent = new Agent({ keepAlive: true, maxSockets: 16, rejectUnauthorized: false });
      // Warm-up, not measured: the 16 keep-alive connections and their handshakes.
      await drive(agent, op.tlsPort, RATE, RATE * 2, templates);
      const logBefore = op.logBytes;
      const sampler = new RssSampler(op.pid!);
      const rssStart = sampler.peak;
      const client = scenario
        ? hostileClient({
            scenario,
            plainPort: op.plainPort,
            tlsPort: op.tlsPort,
            namespace,
            seconds: SECONDS,
            seed: SEED,
          })
        : undefined;
      const { outcomes } = await drive(agent, op.tlsPort, RATE, RATE * SECONDS, templates);
      const result = await client;
      // The aftermath: connections closing, buffers freed, their log lines.
      await delay(2_000);
      sampler.stop();
      agent.destroy();
      if (typeof result === 'string') notes.push(result);
      else if (result) notes.push(...result.notes);
      const alive = op.alive;
      if (!alive)
        notes.push(
          `the operator EXITED (${op.exit?.signal ?? `code ${op.exit?.code}`}); last log lines:\n${op.logTail.split('\n').slice(-15).join('\n')}`,
        );
      const failed = outcomes.filter((o) => !o.ok);
      const latencies = outcomes.map((o) => (o.ok ? o.latencyMs : Infinity));
      return {
        label,
        alive,
        rssStart,
        rssPeak: sampler.peak,
        hwm: sampler.hwm,
        logBytes: op.logBytes - logBefore,
        hostile: typeof result === 'object' ? result.hostile : 0,
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        good: outcomes.length,
        errors: failed.length,
        ...(failed[0]?.error ? { firstError: failed[0].error } : {}),
        notes,
      };
    };

    const before = await measure('idle, before (no hostile load)', undefined);
    const rows = [before];
    for (const { scenario, label } of scenarios) rows.push(await measure(label, scenario));
    // Again at the end: on a shared machine the baseline drifts; the lower one is the reference.
    const after = await measure('idle, after (no hostile load)', undefined);
    rows.push(after);
    const baselines = [before, after];
    const idle = before.p99 <= after.p99 ? before : after;
    const idleLog = Math.min(before.logBytes, after.logBytes);

    const ms = (x: number) => (Number.isFinite(x) ? `${x.toFixed(1)} ms` : '∞');
    const mark = (ok: boolean) => (ok ? 'ok' : 'MISSED');
    const header = [
      'scenario',
      'alive',
      'RSS at start',
      'RSS peak sampled',
      `VmHWM (≤ ${mib(RSS_TARGET)})`,
      'log bytes (beyond idle)',
      'hostile',
      'log per 1,000 (< 1 MB)',
      `good p99 (≤ 2 × ${ms(idle.p99)})`,
      'good p50',
      'good errors',
      'result',
    ];
    const table: string[][] = [header];
    let ok = true;
    for (const r of rows) {
      // What the good requests alone make the operator log (the idle rows) is not the hostile load's.
      const hostileLog = Math.max(0, r.logBytes - idleLog);
      const perThousand = r.hostile > 0 ? (hostileLog / r.hostile) * 1000 : 0;
      const checks = {
        alive: r.alive,
        // VmHWM is the true peak (a 100 ms sample can miss it); each row's process is fresh.
        rss: Math.max(r.rssPeak, r.hwm) <= RSS_TARGET,
        log: perThousand < LOG_TARGET_PER_1000,
        p99: baselines.includes(r) ? r.errors === 0 : r.p99 <= 2 * idle.p99,
      };
      const pass = Object.values(checks).every(Boolean);
      ok &&= pass;
      table.push([
        r.label,
        r.alive ? 'yes' : 'NO',
        mib(r.rssStart),
        mib(r.rssPeak),
        `${mib(r.hwm)} ${mark(checks.rss)}`,
        baselines.includes(r) ? String(r.logBytes) : `${r.logBytes} (${hostileLog})`,
        baselines.includes(r) ? '—' : String(r.hostile),
        baselines.includes(r) ? '—' : `${(perThousand / 1e6).toFixed(3)} MB ${mark(checks.log)}`,
        `${ms(r.p99)} ${mark(checks.p99)}`,
        ms(r.p50),
        `${r.errors} of ${r.good}`,
        pass
          ? 'pass'
          : `FAIL (${Object.entries(checks)
              .filter(([, v]) => !v)
              .map(([k]) => k)
              .join(', ')})`,
      ]);
    }
    const widths = header.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
    console.log(
      `abuse: the operator on ${HOST} (a fresh process for each row), ${SECONDS} s per scenario, good reviews at ${RATE} req/s; chart memory limit ${mib(CHART_MEMORY_LIMIT)}; the hostile client runs at nice 19`,
    );
    for (const row of table) console.log(`  ${row.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ')}`);
    for (const r of rows) {
      for (const note of r.notes) report(`abuse ${r.label.split(' ')[0]}`, note);
      if (r.firstError) report(`abuse ${r.label.split(' ')[0]}`, `first failed good request: ${r.firstError}`);
    }
    return ok;
  } finally {
    await operator?.stop();
  }
}
