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

function group(g) {
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
    g.warnings.length > 0 ? h('ul', { class: 'warnings' }, join(g.warnings.map((w) => h('li', {}, w)))) : undefined,
    h('div', { class: 'grid' }, join(g.statefulSets.map(statefulSetRow))),
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

/** The inside of <main id="report">: the namespace's groups, then its budgets. */
export function namespaceBody(ns) {
  const groups = ns?.groups ?? [];
  return join([
    groups.length > 0 ? join(groups.map(group)) : h('p', { class: 'empty' }, 'No rollout groups in this namespace.'),
    budgets(ns?.budgets ?? []) ?? new Raw(''),
  ]);
}
