// The status page's markup, in one place for both renderings: the server's
// (src/web/html.ts, typed by markup.d.ts beside this file), which makes the
// page read without JavaScript, and the browser's (app.js, which loads this
// file from /status/assets/ and redraws <main> from every report the event
// stream pushes). Plain JavaScript, since the browser runs it as served.
//
// Markup is built as strings, and every value from the cluster goes through
// escapeHtml on the way in, in attributes and text alike: h() escapes every
// string it is given and passes through only what h() itself made (Raw).

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text or attribute value safe inside HTML (quoted attributes). */
export function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** Markup that is already safe: the output of h(), or a constant of this code's own. */
export class Raw {
  constructor(html) {
    this.html = html;
  }
}

/** One element; string children are escaped, Raw ones (already markup) are not; undefined ones are left out. */
export function h(tag, attrs, ...children) {
  const attributes = Object.entries(attrs)
    .filter(([, v]) => v !== undefined && v !== false)
    .map(([k, v]) => (v === true ? ` ${k}` : ` ${k}="${escapeHtml(String(v))}"`))
    .join('');
  const body = children.map((c) => (c === undefined ? '' : c instanceof Raw ? c.html : escapeHtml(c))).join('');
  return new Raw(`<${tag}${attributes}>${body}</${tag}>`);
}

export const join = (parts) => new Raw(parts.map((p) => p.html).join(''));

/** One cell per ordinal up to the replicas (or the highest pod present): missing ordinals included. */
export function cellsOf(row) {
  const byOrdinal = new Map(row.podGrid.map((p) => [p.ordinal, p]));
  const count = Math.max(row.replicas, ...row.podGrid.map((p) => p.ordinal + 1));
  const cells = [];
  for (let ordinal = 0; ordinal < count; ordinal++) {
    const pod = byOrdinal.get(ordinal);
    if (!pod) {
      cells.push({ pod: `${row.name}-${ordinal}`, ordinal, state: 'missing', updated: false, ready: false });
      continue;
    }
    const state = pod.terminating ? 'terminating' : pod.ready ? 'ready' : 'not-ready';
    cells.push({
      pod: pod.name,
      ordinal,
      state,
      updated: pod.updated,
      ready: pod.ready && !pod.terminating,
      ...(pod.stuckReason ? { stuckReason: pod.stuckReason } : {}),
    });
  }
  return cells;
}

export function cellTitle(cell) {
  if (cell.state === 'missing') return `${cell.pod}: missing`;
  return `${cell.pod}: ${cell.updated ? 'updated' : 'outdated'}, ${cell.state}${cell.stuckReason ? ` (${cell.stuckReason})` : ''}`;
}

export function cellClass(cell) {
  return [
    'cell',
    cell.state === 'missing' ? '' : cell.updated ? 'updated' : 'outdated',
    cell.state,
    cell.stuckReason ? 'stuck' : '',
  ]
    .filter(Boolean)
    .join(' ');
}

function cell(c) {
  return h(
    'span',
    {
      class: cellClass(c),
      'data-pod': c.pod,
      'data-ordinal': c.ordinal,
      'data-updated': String(c.updated),
      'data-ready': String(c.ready),
      'data-state': c.state,
      'data-stuck': c.stuckReason,
      title: cellTitle(c),
    },
    String(c.ordinal),
  );
}

function rowCounts(row) {
  return `${row.ready}/${row.replicas} ready · ${row.updated}/${row.replicas} updated`;
}

function statefulSetRow(row) {
  return h(
    'div',
    { class: 'row', 'data-statefulset': row.name, 'data-zone': row.zone, 'data-state': row.state },
    h(
      'div',
      { class: 'row-label' },
      h('span', { class: 'sts-name' }, row.name),
      row.zone ? h('span', { class: 'zone' }, row.zone) : undefined,
      h('span', { class: 'counts' }, rowCounts(row)),
      h('span', { class: `state state-${row.state}` }, row.state),
    ),
    h('div', { class: 'cells' }, join(cellsOf(row).map(cell))),
  );
}

/** The health gate before the next StatefulSet: the verdict, then each check's last values (docs/health-gates.md). */
function healthGate(gate) {
  const verdict = `${gate.verdict.state}${gate.verdict.bypassed ? ' (bypassed)' : ''}`;
  const rows = gate.results.map((r) =>
    h(
      'tr',
      { 'data-outcome': r.outcome },
      h('td', {}, r.check),
      h('td', {}, r.outcome.replace('_', ' ')),
      h('td', {}, r.current === undefined ? '-' : String(r.current)),
      h('td', {}, r.baseline === undefined ? '-' : String(r.baseline)),
      h('td', {}, r.message),
    ),
  );
  return h(
    'div',
    { class: 'health-gate', 'data-state': gate.verdict.state },
    h('p', {}, `health check ${gate.check} before ${gate.statefulSet}: ${verdict}`),
    rows.length === 0
      ? undefined
      : h(
          'table',
          {},
          h(
            'tr',
            {},
            h('th', {}, 'check'),
            h('th', {}, 'result'),
            h('th', {}, 'current'),
            h('th', {}, 'baseline'),
            h('th', {}, 'why'),
          ),
          join(rows),
        ),
  );
}

/** The wait codes (src/rollout/planner.ts, zpdb-denied) in a few words; an unknown one is shown as it is. */
const WAIT_WORDS = {
  'several-statefulsets-not-ready': 'other StatefulSets not Ready',
  'max-unavailable-reached': 'max unavailable reached',
  'pods-terminating': 'pods terminating',
  'updated-pods-not-ready': 'updated pods not Ready',
  'paused-statefulset-not-ready': 'a paused StatefulSet not Ready',
  'statefulset-status-pending': 'the StatefulSet controller',
  'health-check-waiting': 'health check',
  'health-check-paused': 'health check (paused)',
  'zpdb-denied': 'zone-aware disruption budget',
};

export function waitWords(code) {
  return Object.hasOwn(WAIT_WORDS, code) ? WAIT_WORDS[code] : code;
}

/** A duration in whole seconds, as people read it: "42 s", "3 min 5 s", "2 h 1 min". */
export function formatDuration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ''}`;
}

/** The time of day of an ISO timestamp, UTC, as the report's other times are. */
const clock = (iso) => `${iso.slice(11, 19)} UTC`;

/** One span of the timeline's bar, as SVG (attributes, not inline styles: the CSP allows no style attribute). */
function bar(cls, from, to, range, title, extra = {}) {
  const x = ((from - range.start) / range.span) * 1000;
  const width = Math.max(2, ((to - from) / range.span) * 1000);
  return h(
    'rect',
    { class: cls, x: x.toFixed(1), y: 0, width: width.toFixed(1), height: 12, ...extra },
    h('title', {}, title),
  );
}

function timelineWait(w, now) {
  const total = w.waitedMs + (w.until === undefined ? Math.max(0, now - Date.parse(w.from)) : 0);
  const times = w.times > 1 ? ` ×${w.times}` : '';
  return h(
    'li',
    { class: 'timeline-wait', 'data-code': w.code, 'data-open': String(w.until === undefined), title: w.message },
    h('span', { class: 'wait-why' }, waitWords(w.code)),
    `${times}, ${formatDuration(total)}${w.until === undefined ? ' so far' : ''}: `,
    h('span', { class: 'wait-message' }, w.message),
  );
}

function timelineRow(z, range, now) {
  const started = Date.parse(z.startedAt);
  const finished = z.finishedAt === undefined ? undefined : Date.parse(z.finishedAt);
  const end = finished ?? now;
  const waits = z.waits.map((w) =>
    bar(
      'bar-wait',
      Date.parse(w.from),
      w.until === undefined ? now : Date.parse(w.until),
      range,
      `waited: ${waitWords(w.code)}`,
      {
        'data-code': w.code,
      },
    ),
  );
  return h(
    'li',
    {
      class: 'timeline-row',
      'data-statefulset': z.statefulSet,
      'data-started': z.startedAt,
      'data-finished': z.finishedAt,
      'data-state': finished === undefined ? 'rolling' : 'finished',
    },
    h(
      'div',
      { class: 'timeline-label' },
      h('span', { class: 'sts-name' }, z.statefulSet),
      h(
        'span',
        { class: 'when' },
        `+${formatDuration(started - range.start)} → `,
        finished === undefined ? 'rolling' : `+${formatDuration(finished - range.start)}`,
        ` (${formatDuration(end - started)})`,
      ),
    ),
    h(
      'svg',
      {
        class: 'timeline-bar',
        viewBox: '0 0 1000 12',
        preserveAspectRatio: 'none',
        role: 'img',
        'aria-label': `${z.statefulSet}: started ${clock(z.startedAt)}${z.finishedAt ? `, finished ${clock(z.finishedAt)}` : ''}`,
      },
      bar(
        finished === undefined ? 'bar-span rolling' : 'bar-span',
        started,
        end,
        range,
        `${clock(z.startedAt)} → ${z.finishedAt ? clock(z.finishedAt) : 'now'}`,
      ),
      join(waits),
    ),
    z.waits.length > 0
      ? h('ul', { class: 'timeline-waits' }, join(z.waits.map((w) => timelineWait(w, now))))
      : undefined,
  );
}

/** The group's last rollout: a row per StatefulSet in the order they started, each with its bar and what it waited for. */
function timeline(t, generatedAt) {
  const now = generatedAt ? Date.parse(generatedAt) : Date.now();
  const start = Date.parse(t.startedAt);
  const end = Math.max(
    t.finishedAt ? Date.parse(t.finishedAt) : now,
    ...t.zones.map((z) => Date.parse(z.finishedAt ?? t.startedAt)),
  );
  const range = { start, span: Math.max(1000, end - start) };
  const summary = t.finishedAt
    ? `started ${clock(t.startedAt)}, finished ${clock(t.finishedAt)} (${formatDuration(Date.parse(t.finishedAt) - start)})`
    : `started ${clock(t.startedAt)}, rolling for ${formatDuration(now - start)}`;
  return h(
    'section',
    { class: 'timeline', 'data-started': t.startedAt, 'data-finished': t.finishedAt },
    h('h3', {}, t.finishedAt ? 'Last rollout' : 'Rollout', ' ', h('span', { class: 'timeline-summary' }, summary)),
    h('ol', { class: 'timeline-rows' }, join(t.zones.map((z) => timelineRow(z, range, now)))),
  );
}

/** What the CLI lists under a group's StatefulSets: replicas held back and scaling metadata it cannot use. */
function scalingProblems(rows) {
  const items = rows.flatMap((row) => [
    ...(row.scaling?.holdReason
      ? [
          h(
            'li',
            { 'data-statefulset': row.name, 'data-kind': 'held' },
            h('span', { class: 'sts-name' }, row.name),
            `: wants ${row.scaling.desiredReplicas} replicas, held: ${row.scaling.holdReason}`,
          ),
        ]
      : []),
    ...(row.scaling?.errors ?? []).map((e) =>
      h(
        'li',
        { 'data-statefulset': row.name, 'data-kind': 'error' },
        h('span', { class: 'sts-name' }, row.name),
        ': ',
        e,
      ),
    ),
  ]);
  return items.length === 0 ? undefined : h('ul', { class: 'scaling' }, join(items));
}

/** A blocked group: doctor's fix when the report carries it, else the command that finds it. */
function blockedFix(g, namespace) {
  if (!g.blocked) return undefined;
  if (g.fixes?.length)
    return h(
      'div',
      { class: 'fix' },
      h('p', {}, 'To fix it (from stateward doctor):'),
      join(g.fixes.map((f) => h('pre', { 'data-code': f.code, title: f.object }, h('code', {}, f.fix)))),
    );
  return h(
    'p',
    { class: 'fix' },
    'Run ',
    h('code', {}, `stateward doctor -n ${namespace ?? '<namespace>'}`),
    ' for the fix.',
  );
}

function group(g, namespace, generatedAt) {
  return h(
    'section',
    { class: 'group', 'data-group': g.name, 'data-phase': g.phase },
    h(
      'h2',
      {},
      h('span', { class: 'group-name' }, g.name),
      ' ',
      h('span', { class: `phase phase-${g.phase}` }, g.phase),
    ),
    h('p', { class: 'action' }, g.action),
    g.waitReason ? h('p', { class: 'wait', 'data-code': g.waitReason.code }, g.waitReason.message) : undefined,
    g.healthGate ? healthGate(g.healthGate) : undefined,
    g.blocked ? h('p', { class: 'blocked' }, g.blocked) : undefined,
    blockedFix(g, namespace),
    g.warnings.length > 0 ? h('ul', { class: 'warnings' }, join(g.warnings.map((w) => h('li', {}, w)))) : undefined,
    h('div', { class: 'grid' }, join(g.statefulSets.map(statefulSetRow))),
    scalingProblems(g.statefulSets),
    g.timeline ? timeline(g.timeline, generatedAt) : undefined,
  );
}

function budgets(list) {
  if (list.length === 0) return undefined;
  const head = h(
    'tr',
    {},
    ...['budget', 'max unavailable', 'mode', 'StatefulSets', 'pending evictions', 'error'].map((t) => h('th', {}, t)),
  );
  const rows = list.map((b) =>
    h(
      'tr',
      { 'data-budget': b.name },
      h('td', {}, b.name),
      h('td', {}, b.maxUnavailable),
      h('td', {}, b.mode),
      h('td', {}, b.matchedStatefulSets.join(', ')),
      h('td', {}, b.pendingEvictions.map((e) => e.pod).join(', ')),
      h('td', {}, b.error ?? ''),
    ),
  );
  return h(
    'section',
    { class: 'budgets' },
    h('h2', {}, 'Zone-aware disruption budgets'),
    h('table', {}, h('thead', {}, head), h('tbody', {}, join(rows))),
  );
}

/**
 * The inside of <main id="report">: the namespace's groups, then its
 * budgets. `generatedAt`, the report's time, is the "now" of a rollout still
 * going on, so both renderings of one report are the same.
 */
export function namespaceBody(ns, generatedAt) {
  const groups = ns?.groups ?? [];
  return join([
    groups.length > 0
      ? join(groups.map((g) => group(g, ns?.namespace, generatedAt)))
      : h('p', { class: 'empty' }, 'No rollout groups in this namespace.'),
    budgets(ns?.budgets ?? []) ?? new Raw(''),
  ]);
}
