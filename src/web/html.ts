// The web view's pages as HTML, rendered on the server from a StatusReport,
// so that they read without JavaScript. The inside of a namespace's <main>
// comes from assets/markup.js, the module the browser's app.js redraws it
// with from every report the event stream pushes: one renderer, whose h()
// escapes every name from the cluster. This file adds what only the server
// sends: the page around it, the index of namespaces, the legend.
import type { StatusReport } from '../status/model.ts';
import { type Attrs, cellClass, type CellState, h, join, namespaceBody, Raw } from './assets/markup.js';

export const ASSET_PATHS = {
  js: '/status/assets/app.js',
  css: '/status/assets/app.css',
  icon: '/status/assets/icon.svg',
} as const;

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
  return page(
    `Stateward · ${namespace}`,
    header,
    namespaceBody(ns, report.generatedAt),
    { 'data-namespace': namespace },
    legend(),
  );
}
