// Stateward's status page, live: rebuilds <main> from every report the
// event stream (/status/events/<namespace>) pushes, or, when the stream
// cannot be used, from /status/api/<namespace> every 2 s. The markup is the
// server's (src/web/html.ts): same classes, same data- attributes. Every
// name is set with textContent or setAttribute, never parsed as HTML. The
// cells of the pod grid come from cells.js, which the server renders with too.

import { cellClass, cellsOf, cellTitle } from './cells.js';

const POLL_MS = 2000;

const main = document.getElementById('report');
const connection = document.getElementById('connection');
const generated = document.getElementById('generated');
const namespace = main?.dataset.namespace;

/** An element with attributes; string children become text nodes. */
function h(tag, attrs, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== false) element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === undefined) continue;
    element.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return element;
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

function statefulSetRow(row) {
  return h(
    'div',
    { class: 'row', 'data-statefulset': row.name, 'data-zone': row.zone, 'data-state': row.state },
    h(
      'div',
      { class: 'row-label' },
      h('span', { class: 'sts-name' }, row.name),
      row.zone ? h('span', { class: 'zone' }, row.zone) : undefined,
      h('span', { class: 'counts' }, `${row.ready}/${row.replicas} ready · ${row.updated}/${row.replicas} updated`),
      h('span', { class: `state state-${row.state}` }, row.state),
    ),
    h('div', { class: 'cells' }, ...cellsOf(row).map(cell)),
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
    g.blocked ? h('p', { class: 'blocked' }, g.blocked) : undefined,
    g.warnings.length > 0 ? h('ul', { class: 'warnings' }, ...g.warnings.map((w) => h('li', {}, w))) : undefined,
    h('div', { class: 'grid' }, ...g.statefulSets.map(statefulSetRow)),
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
    h('table', {}, h('thead', {}, head), h('tbody', {}, ...rows)),
  );
}

function render(report) {
  const ns = report.namespaces.find((n) => n.namespace === namespace);
  const groups = ns?.groups ?? [];
  const content =
    groups.length > 0 ? groups.map(group) : [h('p', { class: 'empty' }, 'No rollout groups in this namespace.')];
  const budgetSection = budgets(ns?.budgets ?? []);
  if (budgetSection) content.push(budgetSection);
  main.replaceChildren(...content);
  if (generated) {
    generated.textContent = report.generatedAt;
    generated.setAttribute('datetime', report.generatedAt);
  }
}

function setConnection(state, text) {
  if (!connection) return;
  connection.dataset.connection = state;
  connection.textContent = text;
}

const api = () => `/status/api/${encodeURIComponent(namespace)}`;
const events = () => `/status/events/${encodeURIComponent(namespace)}`;

let polling = false;

function poll() {
  if (polling) return;
  polling = true;
  setConnection('polling', `polling every ${POLL_MS / 1000} s`);
  const tick = async () => {
    try {
      const response = await fetch(api(), { cache: 'no-store', credentials: 'omit' });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      render(await response.json());
      setConnection('polling', `polling every ${POLL_MS / 1000} s`);
    } catch (error) {
      setConnection(
        'offline',
        `cannot reach the operator (${error instanceof Error ? error.message : String(error)}); retrying`,
      );
    }
    setTimeout(() => void tick(), POLL_MS);
  };
  void tick();
}

function listen() {
  if (typeof EventSource !== 'function') return poll();
  const source = new EventSource(events());
  source.addEventListener('open', () => setConnection('live', 'live'));
  source.addEventListener('report', (event) => {
    render(JSON.parse(event.data));
    setConnection('live', 'live');
  });
  source.addEventListener('error', () => {
    // CLOSED: the server refused the stream (e.g. 503, too many clients); the browser will not retry.
    if (source.readyState === EventSource.CLOSED) {
      source.close();
      poll();
    } else {
      setConnection('reconnecting', 'reconnecting…');
    }
  });
}

if (main && namespace) listen();
