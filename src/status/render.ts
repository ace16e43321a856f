// Pure renderers of the status report: a table for people, JSON for tools,
// and progress bars for `stateward status --watch`.
import { formatGoDuration } from '../runtime/go/duration.ts';
import type {
  BudgetView,
  GroupStatusView,
  NamespaceStatus,
  RestartView,
  StatefulSetRow,
  StatusReport,
} from './model.ts';

export interface RenderOptions {
  /** ANSI colours for phases and problems; off unless asked. */
  color?: boolean;
}

const ANSI = {
  red: '\x1b[31m',
  green: '\x1b[32m',
  yellow: '\x1b[33m',
  cyan: '\x1b[36m',
  bold: '\x1b[1m',
  reset: '\x1b[0m',
} as const;

function paint(text: string, color: keyof typeof ANSI, options: RenderOptions): string {
  return options.color ? `${ANSI[color]}${text}${ANSI.reset}` : text;
}

const PHASE_COLOR: Record<GroupStatusView['phase'], keyof typeof ANSI> = {
  complete: 'green',
  rolling: 'cyan',
  waiting: 'yellow',
  blocked: 'red',
  failing: 'red',
};

/** Display width: code points (the bar glyphs and ANSI-free text are one column each). */
function width(text: string): number {
  // eslint-disable-next-line no-control-regex
  return [...text.replace(/\x1b\[[0-9;]*m/g, '')].length;
}

function pad(text: string, to: number): string {
  return text + ' '.repeat(Math.max(0, to - width(text)));
}

/** Rows of cells, columns aligned by two spaces; the last column is not padded. */
export function alignColumns(rows: readonly (readonly string[])[], indent = ''): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, width(cell))));
  return rows.map(
    (row) =>
      indent +
      row
        .map((cell, i) => (i === row.length - 1 ? cell : pad(cell, widths[i]!)))
        .join('  ')
        .trimEnd(),
  );
}

/** A remaining time as a Go duration in whole seconds, rounded up ("2m3s"). */
export function formatRemaining(ms: number): string {
  return formatGoDuration(Math.ceil(Math.max(0, ms) / 1000) * 1000);
}

function scalingSummary(row: StatefulSetRow): string {
  const s = row.scaling;
  if (!s) return '-';
  const parts: string[] = [];
  if (s.leader !== undefined) parts.push(`follows ${s.leader}`);
  if (s.mirrorOf !== undefined) parts.push(`mirrors ${s.mirrorOf}`);
  if (s.desiredReplicas !== undefined) parts.push(`wants ${s.desiredReplicas}${s.holdReason ? ' (held)' : ''}`);
  if (s.minTimeRemainingMs !== undefined) parts.push(`no downscale for ${formatRemaining(s.minTimeRemainingMs)}`);
  if (s.delayedDownscale) parts.push(`delayed ${s.delayedDownscale.delay}`);
  if (s.errors.length > 0) parts.push(`${s.errors.length} problem${s.errors.length === 1 ? '' : 's'}`);
  return parts.length > 0 ? parts.join(', ') : '-';
}

const GATE_COLOR = { open: 'green', wait: 'yellow', pause: 'red' } as const;

/** The health gate of the next StatefulSet: the verdict, then each check's last result with both values. */
function healthGateLines(group: GroupStatusView, options: RenderOptions): string[] {
  const gate = group.healthGate;
  if (!gate) return [];
  const lines = [
    `  health check ${gate.check} before ${gate.statefulSet}: ${paint(gate.verdict.state, GATE_COLOR[gate.verdict.state], options)}${gate.verdict.bypassed ? ' (bypassed)' : ''}`,
  ];
  for (const r of gate.results) {
    const values = `current ${r.current ?? '-'}, baseline ${r.baseline ?? '-'}`;
    lines.push(
      `    ${r.check}: ${r.outcome.replace('_', ' ')} (${values}) at ${new Date(r.at).toISOString()}: ${r.message}`,
    );
  }
  return lines;
}

/** The last rollout, one line per StatefulSet in the order they started: offsets from its start, and what it waited for. */
function timelineLines(group: GroupStatusView): string[] {
  const t = group.timeline;
  if (!t) return [];
  const start = Date.parse(t.startedAt);
  const offset = (iso: string) => `+${formatRemaining(Date.parse(iso) - start)}`;
  const lines = [
    `  ${t.finishedAt ? 'last rollout' : 'rollout'}: started ${t.startedAt}${t.finishedAt ? `, finished ${offset(t.finishedAt)}` : ''}`,
  ];
  for (const z of t.zones) {
    const waits = z.waits.map(
      (w) =>
        `${w.code}${w.times > 1 ? ` x${w.times}` : ''}${w.until ? ` ${formatRemaining(w.waitedMs)}` : ' (waiting)'}`,
    );
    lines.push(
      `    ${z.statefulSet}: ${offset(z.startedAt)} .. ${z.finishedAt ? offset(z.finishedAt) : 'rolling'}${waits.length > 0 ? `; waited: ${waits.join(', ')}` : ''}`,
    );
  }
  return lines;
}

function groupLines(group: GroupStatusView, options: RenderOptions, now: number): string[] {
  const lines = [
    `GROUP ${paint(group.name === '' ? '""' : group.name, 'bold', options)}  ${paint(group.phase, PHASE_COLOR[group.phase], options)}  ${group.action}`,
  ];
  if (group.waitReason) lines.push(`  ${group.waitReason.message} [${group.waitReason.code}]`);
  lines.push(...healthGateLines(group, options));
  if (group.blocked) lines.push(`  ${paint('blocked', 'red', options)}: ${group.blocked}`);
  for (const f of group.fixes ?? []) lines.push(`  fix (${f.code}, ${f.object}): ${f.fix}`);
  lines.push(...timelineLines(group));
  if (group.operator) lines.push(...operatorLines(group, group.operator, now));
  for (const warning of group.warnings) lines.push(`  ${paint('warning', 'yellow', options)}: ${warning}`);
  const rows = [['STATEFULSET', 'ZONE', 'UPDATED', 'READY', 'MAX-UNAVAILABLE', 'STATE', 'SCALING']];
  for (const row of group.statefulSets) {
    rows.push([
      row.name,
      row.zone ?? '-',
      `${row.updated}/${row.replicas}`,
      `${row.ready}/${row.replicas}`,
      String(row.maxUnavailable),
      row.paused && row.state !== 'paused' ? `${row.state} (paused)` : row.state,
      scalingSummary(row),
    ]);
  }
  lines.push(...alignColumns(rows, '  '));
  for (const row of group.statefulSets) {
    for (const cell of row.podGrid) {
      if (cell.stuckReason) lines.push(`  * ${cell.name}: ${paint(cell.stuckReason, 'red', options)}`);
    }
    if (row.scaling?.holdReason)
      lines.push(`  * ${row.name}: wants ${row.scaling.desiredReplicas} replicas, held: ${row.scaling.holdReason}`);
    for (const error of row.scaling?.errors ?? [])
      lines.push(`  * ${row.name}: ${paint('scaling', 'yellow', options)}: ${error}`);
  }
  return lines;
}

function budgetLines(budgets: BudgetView[], options: RenderOptions): string[] {
  const rows = [['NAME', 'MAX-UNAVAILABLE', 'MODE', 'STATEFULSETS', 'PENDING-EVICTIONS']];
  for (const b of budgets) {
    rows.push([
      b.name,
      b.maxUnavailable,
      b.mode,
      b.matchedStatefulSets.join(',') || '-',
      b.pendingEvictions.length === 0 ? '-' : b.pendingEvictions.map((p) => `${p.pod} (${p.allowedAt})`).join(', '),
    ]);
  }
  const lines = ['BUDGETS', ...alignColumns(rows, '  ')];
  for (const b of budgets) {
    if (b.error)
      lines.push(`  * ${b.name}: ${paint('invalid, evictions of its pods denied', 'red', options)}: ${b.error}`);
    for (const w of b.warnings ?? []) lines.push(`  * ${b.name}: ${paint('warning', 'yellow', options)}: ${w}`);
  }
  return lines;
}

function restartLines(restarts: RestartView[], options: RenderOptions): string[] {
  const rows = [['KIND', 'NAME', 'MODE', 'OPT-INS', 'CONFIGS', 'MISSING', 'LAST-RESTART', 'OUTDATED-PODS']];
  for (const r of restarts) {
    rows.push([
      r.kind,
      r.name,
      r.mode,
      r.optIns.join(',') || '-',
      r.configs.join(',') || '-',
      r.missingConfigs.length > 0 ? paint(r.missingConfigs.join(','), 'yellow', options) : '-',
      r.lastRestart ?? '-',
      r.outdatedPods === undefined ? '-' : String(r.outdatedPods),
    ]);
  }
  const lines = ['RESTARTS', ...alignColumns(rows, '  ')];
  for (const r of restarts)
    for (const w of r.warnings ?? [])
      lines.push(`  * ${r.kind} ${r.name}: ${paint('warning', 'yellow', options)}: ${w}`);
  return lines;
}

/**
 * What the operator last wrote, with its age. The operator writes only when
 * what it sees changes, so an old report that disagrees with the cluster
 * means nobody has been reporting: an operator stopped (the demo's, once it
 * ends) or stuck. Said as such, rather than shown as the present.
 */
function operatorLines(
  group: GroupStatusView,
  operator: NonNullable<GroupStatusView['operator']>,
  now: number,
): string[] {
  const since = Date.parse(operator.since);
  const age = Number.isFinite(since) && Number.isFinite(now) ? ` (${formatAge(now - since)} ago)` : '';
  const agrees = operator.phase === group.phase && (operator.waitCode ?? '') === (group.waitReason?.code ?? '');
  if (agrees) return [`  operator reports the same since ${operator.since}${age}`];
  const lines = [
    `  operator last reported: ${operator.phase}${operator.waitCode ? ` [${operator.waitCode}]` : ''} since ${operator.since}${age}`,
  ];
  if (Number.isFinite(since) && now - since > STALE_REPORT_MS)
    lines.push(
      `  the operator has not reported what the cluster shows for ${formatAge(now - since)}: is it running? (stateward doctor)`,
    );
  return lines;
}

/** A report this old that disagrees with the cluster is no longer the operator's view of it. */
const STALE_REPORT_MS = 60_000;

function formatAge(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

function namespaceLines(ns: NamespaceStatus, options: RenderOptions, now: number): string[] {
  const header = `NAMESPACE ${ns.namespace}`;
  if (ns.groups.length === 0 && ns.budgets.length === 0 && ns.restarts.length === 0) {
    return [header, '  no rollout groups, disruption budgets or config-restart workloads'];
  }
  const sections: string[][] = [];
  if (ns.groups.length === 0) sections.push(['no rollout groups']);
  for (const group of ns.groups) sections.push(groupLines(group, options, now));
  if (ns.budgets.length > 0) sections.push(budgetLines(ns.budgets, options));
  if (ns.restarts.length > 0) sections.push(restartLines(ns.restarts, options));
  return [header, '', ...sections.flatMap((s, i) => (i === 0 ? s : ['', ...s]))];
}

/** The human view: per namespace, each group and its StatefulSets in roll order, then budgets and restarts. */
export function renderTable(report: StatusReport, options: RenderOptions = {}): string {
  if (report.namespaces.length === 0)
    return 'nothing to report: no rollout groups, disruption budgets or config-restart workloads\n';
  return (
    report.namespaces.map((ns) => namespaceLines(ns, options, Date.parse(report.generatedAt)).join('\n')).join('\n\n') +
    '\n'
  );
}

// -------------------------------------------------------------------- JSON

const LEADING_KEYS = ['apiVersion', 'kind', 'generatedAt', 'namespace', 'name'];

function keyOrder(a: string, b: string): number {
  const ia = LEADING_KEYS.indexOf(a);
  const ib = LEADING_KEYS.indexOf(b);
  if (ia >= 0 || ib >= 0) return (ia < 0 ? Infinity : ia) - (ib < 0 ? Infinity : ib);
  return a < b ? -1 : a > b ? 1 : 0;
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort(keyOrder)) {
      const v = (value as Record<string, unknown>)[key];
      if (v !== undefined) out[key] = canonical(v);
    }
    return out;
  }
  return value;
}

/**
 * The report as JSON, 2-space indented, keys in a fixed order whoever built
 * the report: apiVersion, kind, generatedAt, namespace, name first, then the
 * rest alphabetically.
 */
export function renderJson(report: StatusReport): string {
  return JSON.stringify(canonical(report), null, 2) + '\n';
}

// ---------------------------------------------------------------- progress

/** `[██████░░░░]`: `done` of `total` over `size` cells (rounded, never full before done). */
export function progressBar(done: number, total: number, size: number): string {
  const cells = Math.max(1, size);
  const ratio = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  let filled = Math.round(ratio * cells);
  if (filled === cells && done < total) filled = cells - 1;
  if (filled === 0 && done > 0) filled = 1;
  return `[${'█'.repeat(filled)}${'░'.repeat(cells - filled)}]`;
}

/**
 * The --watch view: per group one line per StatefulSet (roll order) with
 * bars of updated/replicas and ready/replicas, then what the group does and
 * why it waits. Lines fit in `columns` where the names allow.
 */
export function renderProgress(report: StatusReport, columns: number, options: RenderOptions = {}): string {
  const lines = [`stateward status at ${report.generatedAt}`];
  const groups = report.namespaces.flatMap((ns) => ns.groups.map((g) => ({ ns: ns.namespace, g })));
  if (groups.length === 0)
    lines.push(`no rollout groups in ${report.namespaces.map((n) => n.namespace).join(', ') || 'any namespace'}`);
  const rows = groups.flatMap(({ g }) => g.statefulSets);
  const nameWidth = Math.max(0, ...rows.map((r) => width(r.name)));
  const countWidth = Math.max(0, ...rows.map((r) => `${Math.max(r.updated, r.ready)}/${r.replicas}`.length));
  const stateWidth = Math.max(0, ...rows.map((r) => r.state.length));
  // "  name  [bar] n/m updated  [bar] n/m ready  state"
  const fixed =
    2 +
    nameWidth +
    2 +
    2 +
    1 +
    countWidth +
    ' updated'.length +
    2 +
    2 +
    1 +
    countWidth +
    ' ready'.length +
    2 +
    stateWidth;
  const bar = Math.max(5, Math.min(40, Math.floor((columns - fixed) / 2)));
  for (const { ns, g } of groups) {
    lines.push('');
    lines.push(`${ns}/${g.name}  ${paint(g.phase, PHASE_COLOR[g.phase], options)}  ${g.action}`);
    for (const r of g.statefulSets) {
      const updated = `${progressBar(r.updated, r.replicas, bar)} ${pad(`${r.updated}/${r.replicas}`, countWidth)} updated`;
      const ready = `${progressBar(r.ready, r.replicas, bar)} ${pad(`${r.ready}/${r.replicas}`, countWidth)} ready`;
      lines.push(`  ${pad(r.name, nameWidth)}  ${updated}  ${ready}  ${r.state}`);
    }
    if (g.waitReason) lines.push(`  ${g.waitReason.message}`);
    if (g.blocked) lines.push(`  ${g.blocked}`);
  }
  return lines.join('\n') + '\n';
}
