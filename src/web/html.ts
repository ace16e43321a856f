// The web view's pages as HTML, rendered on the server from a StatusReport:
// they read without JavaScript, and src/web/assets/app.js rebuilds the same
// markup (same classes, same data- attributes) from every report the event
// stream pushes. Every name from the cluster goes through escapeHtml here
// and through textContent there.
import type { BudgetView, GroupStatusView, NamespaceStatus, StatefulSetRow, StatusReport } from '../status/model.ts';
import { cellClass, cellsOf, cellTitle, type CellState } from './assets/cells.js';

export const ASSET_PATHS = {
  js: '/status/assets/app.js',
  css: '/status/assets/app.css',
  icon: '/status/assets/icon.svg',
} as const;

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text or attribute value safe inside HTML (quoted attributes). */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** Markup that is already safe: the output of h(). */
class Raw {
  readonly html: string;
  constructor(html: string) {
    this.html = html;
  }
}

type Attrs = Record<string, string | number | boolean | undefined>;

/** One element; string children are escaped, Raw ones (already markup) are not. */
function h(tag: string, attrs: Attrs, ...children: (string | Raw | undefined)[]): Raw {
  const attributes = Object.entries(attrs)
    .filter(([, v]) => v !== undefined && v !== false)
    .map(([k, v]) => (v === true ? ` ${k}` : ` ${k}="${escapeHtml(String(v))}"`))
    .join('');
  const body = children.map((c) => (c === undefined ? '' : c instanceof Raw ? c.html : escapeHtml(c))).join('');
  return new Raw(`<${tag}${attributes}>${body}</${tag}>`);
}

const join = (parts: Raw[]): Raw => new Raw(parts.map((p) => p.html).join(''));

function cell(c: CellState): Raw {
  return h(
    'span',
    {
      class: cellClass(c),
      'data-pod': c.pod,
      'data-ordinal': c.ordinal,
      'data-updated': String(c.updated),
      'data-ready': String(c.ready),
      'data-state': c.state,
      ...(c.stuckReason ? { 'data-stuck': c.stuckReason } : {}),
      title: cellTitle(c),
    },
    String(c.ordinal),
  );
}

export function rowCounts(row: StatefulSetRow): string {
  return `${row.ready}/${row.replicas} ready · ${row.updated}/${row.replicas} updated`;
}

function statefulSetRow(row: StatefulSetRow): Raw {
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

function group(g: GroupStatusView): Raw {
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
    g.blocked ? h('p', { class: 'blocked' }, g.blocked) : undefined,
    g.warnings.length > 0 ? h('ul', { class: 'warnings' }, join(g.warnings.map((w) => h('li', {}, w)))) : undefined,
    h('div', { class: 'grid' }, join(g.statefulSets.map(statefulSetRow))),
  );
}

function budgets(list: BudgetView[]): Raw | undefined {
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

/** The inside of <main>: the namespace's groups, then its budgets. */
export function namespaceBody(ns: NamespaceStatus | undefined): Raw {
  const groups = ns?.groups ?? [];
  return join([
    groups.length > 0 ? join(groups.map(group)) : h('p', { class: 'empty' }, 'No rollout groups in this namespace.'),
    budgets(ns?.budgets ?? []) ?? new Raw(''),
  ]);
}

const LEGEND: CellState[] = [
  { pod: 'updated, ready', ordinal: 0, state: 'ready', updated: true, ready: true },
  { pod: 'updated, not ready', ordinal: 0, state: 'not-ready', updated: true, ready: false },
  { pod: 'outdated, ready', ordinal: 0, state: 'ready', updated: false, ready: true },
  { pod: 'outdated, not ready', ordinal: 0, state: 'not-ready', updated: false, ready: false },
  { pod: 'terminating', ordinal: 0, state: 'terminating', updated: false, ready: false },
  { pod: 'missing', ordinal: 0, state: 'missing', updated: false, ready: false },
];

function legend(): Raw {
  return h(
    'ul',
    { class: 'legend' },
    join(LEGEND.map((c) => h('li', {}, h('span', { class: cellClass(c), 'aria-hidden': 'true' }), ' ', c.pod))),
  );
}

function page(title: string, header: Raw, main: Raw, mainAttrs: Attrs, footer?: Raw): string {
  return `<!doctype html>\n${
    h(
      'html',
      { lang: 'en' },
      h(
        'head',
        {},
        new Raw(
          '<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="referrer" content="no-referrer">',
        ),
        h('title', {}, title),
        new Raw(
          `<link rel="icon" href="${ASSET_PATHS.icon}" type="image/svg+xml"><link rel="stylesheet" href="${ASSET_PATHS.css}">`,
        ),
        h('script', { type: 'module', src: ASSET_PATHS.js }),
      ),
      h(
        'body',
        {},
        h('header', {}, header),
        h('main', { id: 'report', ...mainAttrs }, main),
        footer ? h('footer', {}, footer) : undefined,
      ),
    ).html
  }\n`;
}

/** /status: the namespaces, each a link to its page. */
export function indexPage(namespaces: string[]): string {
  const list =
    namespaces.length > 0
      ? h(
          'ul',
          { class: 'namespaces' },
          join(
            namespaces.map((ns) =>
              h('li', {}, h('a', { href: `/status/${encodeURIComponent(ns)}`, 'data-namespace': ns }, ns)),
            ),
          ),
        )
      : h('p', { class: 'empty' }, 'No namespaces with StatefulSets yet.');
  return page('Stateward status', h('h1', {}, 'Stateward status'), join([h('h2', {}, 'Namespaces'), list]), {});
}

/** /status/<namespace>: the report's groups and budgets, live once app.js runs. */
export function namespacePage(namespace: string, report: StatusReport): string {
  const ns = report.namespaces.find((n) => n.namespace === namespace);
  const header = join([
    h('h1', {}, h('a', { href: '/status' }, 'Stateward'), ' ', h('span', { class: 'namespace' }, namespace)),
    h(
      'p',
      { class: 'meta' },
      h('span', { id: 'connection', 'data-connection': 'static' }, 'static page'),
      ' · report of ',
      h('time', { id: 'generated', datetime: report.generatedAt }, report.generatedAt),
    ),
  ]);
  return page(`Stateward · ${namespace}`, header, namespaceBody(ns), { 'data-namespace': namespace }, legend());
}
