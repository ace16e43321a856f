// The metrics a running operator really exposes, with every capability on,
// and the README's metrics table read against them.
import type { TestContext } from 'node:test';
import { freePorts } from '../cluster/ports.ts';
import { DeadlineError, waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { FAST_ELECTION, OperatorProcess } from '../support/operator-process.ts';
import { codeSpans, type Table } from './readme.ts';

/** Runtime metrics of prom-client's default collectors, documented as a family. */
export const RUNTIME_PREFIXES = ['process_', 'nodejs_'];

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

/** name → type, from the `# TYPE` lines prom-client prints for every registered metric (series or not). */
export function metricFamilies(exposition: string): Map<string, MetricType> {
  const families = new Map<string, MetricType>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) families.set(m[1]!, m[2] as MetricType);
  return families;
}

export function isRuntimeMetric(name: string): boolean {
  return RUNTIME_PREFIXES.some((p) => name.startsWith(p));
}

/**
 * Every flag that turns on a capability (and so registers its metrics):
 * webhooks over TLS with CA injection, leader election, config restarts,
 * reschedule-on-eviction, the zone tracker, the web view, client-side rate limiting.
 */
export async function everythingFlags(): Promise<string[]> {
  const [tlsPort] = await freePorts(1);
  return [
    ...FAST_ELECTION,
    '-server-tls.enabled',
    `-server-tls.port=${tlsPort!}`,
    '-server-tls.self-signed-cert.dns-name=localhost',
    '-webhooks.update-ca-bundle=true',
    '-config-restarts.enabled',
    '-reschedule.enabled',
    '-web.enabled',
    '-use-zone-tracker',
    '-kubernetes.client-qps=5',
    '-reconcile.interval=1s',
  ];
}

/** Starts the operator with everything on in a fresh namespace; stopped when the test ends. */
export async function startEverything(cluster: TestCluster, t: TestContext): Promise<OperatorProcess> {
  const namespace = await cluster.namespace(t, 'docs-surface');
  const op = await OperatorProcess.start(cluster, namespace, await everythingFlags());
  t.after(() => op.stop());
  await op.waitReady();
  // Leader-only capabilities (rollouts, restarts, their work queues) register their metrics once leading.
  await waitFor('the operator to lead', async () => (await op.metric('stateward_leader_is_leader')) === 1, {
    timeoutMs: 30_000,
  });
  return op;
}

/**
 * The operator's metric families once `complete` holds for them, or, when it
 * does not within the deadline, what there is then (the caller's assertions
 * name what is missing). Leader-only parts register a moment after the lead.
 */
export async function familiesWhen(
  op: OperatorProcess,
  complete: (families: Map<string, MetricType>) => boolean,
  timeoutMs = 20_000,
): Promise<Map<string, MetricType>> {
  const read = async () => metricFamilies((await op.get('/metrics'))?.body ?? '');
  try {
    return await waitFor(
      'every expected metric registered',
      async () => {
        const families = await read();
        return complete(families) ? families : undefined;
      },
      { timeoutMs },
    );
  } catch (error) {
    if (!(error instanceof DeadlineError)) throw error;
    return read();
  }
}

export interface MetricRow {
  /** Full names, abbreviations expanded against the row's first full name (see resolve). */
  names: string[];
  /** `…_suffix` abbreviations, with the full name they abbreviate from. */
  abbreviations: { base: string; suffix: string }[];
  /** `prefix_*` patterns. */
  patterns: string[];
  types: Set<string>;
  line: string;
}

/** Reads one README metrics row: names in code spans, `…_x` abbreviations, `x_*` patterns; types singular. */
export function parseMetricRow(row: string[]): MetricRow {
  const [nameCell = '', typeCell = ''] = row;
  const out: MetricRow = {
    names: [],
    abbreviations: [],
    patterns: [],
    types: new Set(),
    line: `| ${row.join(' | ')} |`,
  };
  for (const span of codeSpans(nameCell)) {
    if (span.endsWith('*')) out.patterns.push(span.slice(0, -1));
    else if (span.startsWith('…') || span.startsWith('...')) {
      const base = out.names[0];
      if (!base) throw new Error(`metrics row ${out.line}: abbreviation ${span} before any full name`);
      out.abbreviations.push({ base, suffix: span.replace(/^(…|\.\.\.)/, '') });
    } else out.names.push(span);
  }
  for (const word of typeCell
    .split(',')
    .map((w) => w.trim())
    .filter(Boolean))
    out.types.add(word.replace(/s$/, ''));
  return out;
}

/**
 * The full names an abbreviation may stand for: the base name cut at one of
 * its underscores, with the suffix appended. Which cut is meant is settled
 * by what exists (resolve).
 */
export function expansions(base: string, suffix: string): string[] {
  const out: string[] = [];
  for (let i = base.indexOf('_'); i > 0; i = base.indexOf('_', i + 1)) out.push(base.slice(0, i) + suffix);
  return out;
}

export interface DocumentedMetrics {
  /** Documented name → the row documenting it. */
  names: Map<string, MetricRow>;
  /** Rows' problems: abbreviations that match no exposed metric, or several. */
  unresolved: string[];
  patterns: string[];
  rows: MetricRow[];
}

/** The metric names the README table documents, abbreviations resolved against the exposed families. */
export function documentedMetrics(table: Table, exposed: ReadonlyMap<string, unknown>): DocumentedMetrics {
  const rows = table.rows.map(parseMetricRow);
  const names = new Map<string, MetricRow>();
  const unresolved: string[] = [];
  for (const row of rows) {
    for (const name of row.names) names.set(name, row);
    for (const { base, suffix } of row.abbreviations) {
      const found = expansions(base, suffix).filter((n) => exposed.has(n));
      if (found.length === 1) names.set(found[0]!, row);
      else
        unresolved.push(
          `…${suffix} (after ${base}) matches ${found.length === 0 ? 'no exposed metric' : found.join(', ')}`,
        );
    }
  }
  return { names, unresolved, patterns: rows.flatMap((r) => r.patterns), rows };
}
