// The issue-33 rows of `npm run bench -- abuse`: each attack of
// bench/abuse-attacks.child.ts against Stateward and rollout-operator in
// turn (the same flags, ports and certificates each makes itself; a fresh
// process for every row and system), while bench/abuse-good.ts sends and
// times the good traffic. First and last, per system, an idle baseline: the
// same good traffic with no attack; the p99 ratios are against the lower of
// the two (on a shared machine the baseline drifts).
//
// Per row and system: alive at the end; good requests failed, per kind;
// good p50/p99 per kind and p99 ÷ the baseline's; peak RSS during the attack
// (VmHWM: the process is fresh, so its high-water mark is this row's) and the
// largest RSS sampled 10–15 s after the attack stopped; bytes logged from
// the attack's start to then; the size of /metrics before and after (label
// growth); the attack's own figure.
// Targets (Stateward's decide the bench's exit; rollout-operator's are shown
// for comparison): alive; no good request failed; RSS ≤ 70 % of the chart's
// 512Mi during and after; under 1 MB of log per row; good p99 ≤ 2 × idle
// for both review kinds, except the handshake flood, where it is
// rollout-operator's p99 in the same row (a handshake costs CPU however it
// is served: the question is whether Stateward pays more of it than the
// system it replaces).
import { setTimeout as delay } from 'node:timers/promises';
import type { Attack, AttackOptions, AttackResult } from './abuse-attacks.child.ts';
import { GOOD_KINDS, GoodTraffic, FRESH_RPS, KEEPALIVE_RPS, type GoodKind, type GoodResult } from './abuse-good.ts';
import {
  hostileProcess,
  metricsBytes,
  RssSampler,
  RunningSystem,
  systemLaunch,
  type SystemLaunch,
  type SystemName,
  type SystemScope,
} from './abuse-systems.ts';
import { mib, report } from './report.ts';

export const ATTACKS: { attack: Attack; label: string }[] = [
  { attack: 'pipeline-metrics', label: '1 conn × 10,000 pipelined GET /metrics, never read' },
  { attack: 'pipeline-metrics-20', label: '20 conns × 10,000 pipelined GET /metrics, never read' },
  { attack: 'body-hold', label: '5 TLS conns: 1 MiB declared, 1 byte sent, reopened' },
  { attack: 'slow-readers', label: '900 odd methods, then 500 conns GET /metrics never read' },
  { attack: 'idle-tls', label: '1,100 TLS conns: one review each, then idle' },
  { attack: 'handshake-flood', label: '32 loops of TLS connect–handshake–close' },
  { attack: 'pipeline-reviews', label: '20 TLS conns × 2,000 pipelined reviews, never read' },
  { attack: 'keepalive-plain', label: 'GET /healthz then GET /ready on one connection' },
];

const CHART_MEMORY_LIMIT = 512 * 2 ** 20;
const RSS_TARGET = CHART_MEMORY_LIMIT * 0.7;
const LOG_TARGET_BYTES = 1_000_000;
/** RSS "after" is the largest sample in this window after the attack stopped. */
const AFTER_FROM_MS = 10_000;
const AFTER_TO_MS = 15_000;

export interface Issue33Options {
  attacks: Attack[];
  systems: SystemName[];
  seconds: number;
  seed: number;
  /** Where the hostile connections come from: 127.0.0.2, or 127.0.0.1 (the good traffic's own address). */
  localAddress: string;
  scope: (system: SystemName) => SystemScope;
}

type RowName = Attack | 'baseline' | 'baseline, after';
const isBaseline = (row: RowName): row is 'baseline' | 'baseline, after' =>
  row === 'baseline' || row === 'baseline, after';

interface Measured {
  attack: RowName;
  system: SystemName;
  alive: boolean;
  exit?: string;
  good: GoodResult;
  rssPeak: number;
  rssAfter: number;
  logBytes: number;
  metricsBefore: number;
  metricsAfter: number;
  hostile?: AttackResult;
  notes: string[];
}

/** One row for one system, on a fresh process. */
async function measure(launch: SystemLaunch, scope: SystemScope, row: RowName, o: Issue33Options): Promise<Measured> {
  const attack = isBaseline(row) ? undefined : row;
  const system = await RunningSystem.start(launch, scope);
  const good = new GoodTraffic(system);
  try {
    await good.warmUp();
    const metricsBefore = await metricsBytes(system.plainPort);
    const logBefore = system.logBytes;
    const sampler = new RssSampler(system.pid);
    const options: AttackOptions | undefined = attack && {
      attack,
      plainPort: system.plainPort,
      tlsPort: system.tlsPort,
      namespace: scope.namespace,
      seconds: o.seconds,
      localAddress: o.localAddress,
      seed: o.seed,
    };
    const script = new URL('./abuse-attacks.child.ts', import.meta.url);
    const hostile = options && hostileProcess<AttackResult>(script, options, o.seconds);
    const goodResult = await good.run(o.seconds);
    const result = await hostile;
    const stoppedAt = performance.now();
    sampler.stop();
    const rssPeak = Math.max(sampler.peak, sampler.hwm);
    const after = new RssSampler(system.pid);
    if (attack) await delay(AFTER_TO_MS);
    after.stop();
    const rssAfter = attack ? after.peakBetween(stoppedAt + AFTER_FROM_MS, stoppedAt + AFTER_TO_MS) : NaN;
    const measured: Measured = {
      attack: row,
      system: launch.name,
      alive: system.alive,
      ...(system.exit ? { exit: system.exit } : {}),
      good: goodResult,
      rssPeak,
      rssAfter,
      logBytes: system.logBytes - logBefore,
      metricsBefore,
      metricsAfter: system.alive ? await metricsBytes(system.plainPort) : NaN,
      ...(typeof result === 'object' ? { hostile: result } : {}),
      notes: typeof result === 'string' ? [result] : [...(result?.notes ?? [])],
    };
    if (!system.alive)
      measured.notes.push(`EXITED (${system.exit}); last output:\n${system.logTail.split('\n').slice(-15).join('\n')}`);
    return measured;
  } finally {
    good.close();
    await system.stop();
  }
}

/** A row whose system did not start (or the bench failed around it): counted as dead. */
function unmeasured(attack: RowName, system: SystemName, error: unknown): Measured {
  const none = { sent: 0, failed: 0, p50: NaN, p99: NaN };
  return {
    attack,
    system,
    alive: false,
    good: { fresh: none, keepalive: none, probe: none },
    rssPeak: NaN,
    rssAfter: NaN,
    logBytes: 0,
    metricsBefore: NaN,
    metricsAfter: NaN,
    notes: [`not measured: ${error instanceof Error ? error.message : String(error)}`],
  };
}

/** Per kind, the lower p99 of a system's two baselines (NaN for a kind neither measured). */
type Reference = Record<GoodKind, number>;

function reference(results: Measured[], system: SystemName): Reference {
  const baselines = results.filter((r) => r.system === system && isBaseline(r.attack) && r.alive);
  const lowest = (k: GoodKind) => (baselines.length ? Math.min(...baselines.map((b) => b.good[k].p99)) : NaN);
  return { fresh: lowest('fresh'), keepalive: lowest('keepalive'), probe: lowest('probe') };
}

/** The targets for one measured row, given its system's baseline and the other system's same row. */
function checks(m: Measured, baseline: Reference, peer: Measured | undefined): Record<string, boolean> {
  const reviewKinds = ['fresh', 'keepalive'] as const;
  const p99 = reviewKinds.every((k) => {
    if (isBaseline(m.attack)) return true;
    if (m.attack === 'handshake-flood') return m.system !== 'stateward' || !peer || m.good[k].p99 <= peer.good[k].p99;
    return m.good[k].p99 <= 2 * baseline[k];
  });
  return {
    alive: m.alive,
    failed: GOOD_KINDS.every((k) => m.good[k].failed === 0),
    rss: m.rssPeak <= RSS_TARGET && !(m.rssAfter > RSS_TARGET),
    log: m.logBytes < LOG_TARGET_BYTES,
    p99,
  };
}

const ms = (x: number) => (Number.isFinite(x) ? `${x.toFixed(1)}` : '∞');
const bytes = (n: number) => (Number.isFinite(n) ? `${(n / 1024).toFixed(1)} KiB` : '—');

function tableRow(m: Measured, baseline: Reference, peer: Measured | undefined): string[] {
  const c = checks(m, baseline, peer);
  const pass = Object.values(c).every(Boolean);
  const latency = (k: 'fresh' | 'keepalive') => {
    const ratio = isBaseline(m.attack) ? '' : ` (${(m.good[k].p99 / baseline[k]).toFixed(1)}×)`;
    return `${ms(m.good[k].p50)} / ${ms(m.good[k].p99)}${ratio}`;
  };
  // Without rollout-operator's figure the handshake flood's p99 has nothing to be held to.
  const unjudged = m.attack === 'handshake-flood' && m.system === 'stateward' && !peer ? ' (p99 not judged)' : '';
  return [
    m.attack,
    m.system,
    m.alive ? 'yes' : 'NO',
    GOOD_KINDS.map((k) => m.good[k].failed).join(' / '),
    latency('fresh'),
    latency('keepalive'),
    ms(m.good.probe.p99),
    mib(m.rssPeak),
    Number.isFinite(m.rssAfter) ? mib(m.rssAfter) : '—',
    String(m.logBytes),
    `${bytes(m.metricsBefore)} → ${bytes(m.metricsAfter)}`,
    m.hostile?.headline ?? '—',
    pass
      ? `pass${unjudged}`
      : `FAIL (${Object.entries(c)
          .filter(([, v]) => !v)
          .map(([k]) => k)
          .join(', ')})`,
  ];
}

function printTable(results: Measured[], o: Issue33Options): boolean {
  const header = [
    'row',
    'system',
    'alive',
    'failed fresh / keep-alive / probe',
    'fresh review p50 / p99 ms (p99 × idle)',
    'keep-alive review p50 / p99 ms (× idle)',
    'probe p99 ms',
    `RSS peak (≤ ${mib(RSS_TARGET)})`,
    `RSS +${AFTER_FROM_MS / 1000}–${AFTER_TO_MS / 1000} s`,
    'log bytes (< 1 MB)',
    '/metrics before → after',
    'attack',
    'result',
  ];
  const table = [header];
  let ok = true;
  for (const m of results) {
    const baseline = reference(results, m.system);
    const peer = results.find((r) => r.system !== m.system && r.attack === m.attack);
    const row = tableRow(m, baseline, peer);
    if (m.system === 'stateward') ok &&= row.at(-1)!.startsWith('pass');
    table.push(row);
  }
  const widths = header.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  console.log(
    `abuse (issue 33): ${o.systems.join(' and ')}, a fresh process per row, ${o.seconds} s per attack from ${o.localAddress} at nice 19; good traffic from 127.0.0.1: reviews on fresh TLS connections at ${FRESH_RPS}/s, on 16 keep-alive ones at ${KEEPALIVE_RPS}/s, GET /ready on a new connection every 1 s`,
  );
  for (const row of table) console.log(`  ${row.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ')}`);
  for (const m of results) {
    const name = `abuse ${m.attack} ${m.system === 'stateward' ? 'SW' : 'RO'}`;
    for (const note of m.notes) report(name, note);
    for (const k of GOOD_KINDS)
      if (m.good[k].firstError)
        report(name, `first failed good ${k} request (of ${m.good[k].failed}): ${m.good[k].firstError}`);
  }
  return ok;
}

/** Every selected row for every selected system, rows interleaved by system; false when a Stateward target was missed or a system could not run. */
export async function issue33Rows(o: Issue33Options): Promise<boolean> {
  const launches: SystemLaunch[] = [];
  let ok = true;
  for (const name of o.systems) {
    const launch = await systemLaunch(name, (line) => report('abuse-peer', line));
    if (typeof launch === 'string') {
      report('abuse-peer', `${name} SKIPPED: ${launch.replaceAll('\n', `\n${' '.repeat(29)}`)}`);
      ok = false;
      continue;
    }
    report('abuse-system', launch.describe);
    launches.push(launch);
  }
  const results: Measured[] = [];
  const rows: RowName[] = ['baseline', ...o.attacks, 'baseline, after'];
  for (const row of rows)
    for (const launch of launches) {
      const m = await measure(launch, o.scope(launch.name), row, o).catch((error: unknown) =>
        unmeasured(row, launch.name, error),
      );
      report(
        'abuse-row',
        `${m.attack} on ${launch.title}: ${m.alive ? 'alive' : 'DIED'}${m.hostile ? `, ${m.hostile.headline}` : ''}`,
      );
      results.push(m);
    }
  return printTable(results, o) && ok;
}
