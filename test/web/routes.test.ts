// The web view's HTTP handler on a real HTTP server, with a fake report
// source: methods, namespaces, headers, escaping, the event stream.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import { HttpServer } from '../../src/runtime/http/server.ts';
import type { GroupStatusView, NamespaceStatus, StatefulSetRow, StatusReport } from '../../src/status/model.ts';
import { STATUS_API_VERSION } from '../../src/status/model.ts';
import { cellsOf, escapeHtml, formatDuration, namespaceBody, waitWords } from '../../src/web/assets/markup.js';
import {
  CONTENT_SECURITY_POLICY,
  WebHandler,
  type ReportSource,
  type WebHandlerOptions,
} from '../../src/web/routes.ts';
import { waitFor } from '../cluster/probe.ts';

const EVIL = '<img src=x onerror="alert(1)">&\'';

function row(
  name: string,
  pods: { updated: boolean; ready?: boolean; terminating?: boolean }[],
  replicas = pods.length,
): StatefulSetRow {
  return {
    name,
    zone: `zone-${name.slice(-1)}`,
    replicas,
    pods: pods.length,
    ready: pods.filter((p) => p.ready !== false).length,
    updated: pods.filter((p) => p.updated).length,
    maxUnavailable: 1,
    paused: false,
    state: pods.every((p) => p.updated) ? 'up-to-date' : 'rolling',
    podGrid: pods.map((p, ordinal) => ({
      name: `${name}-${ordinal}`,
      ordinal,
      updated: p.updated,
      ready: p.ready ?? true,
      terminating: p.terminating ?? false,
    })),
  };
}

function group(name: string, rows: StatefulSetRow[], extra: Partial<GroupStatusView> = {}): GroupStatusView {
  return { name, phase: 'complete', action: 'idle', warnings: [], statefulSets: rows, ...extra };
}

class FakeSource implements ReportSource {
  readonly watched: string[];
  groups: GroupStatusView[];
  isReady = true;
  builds = 0;
  private readonly listeners = new Set<() => void>();

  constructor(watched: string[], groups: GroupStatusView[]) {
    this.watched = watched;
    this.groups = groups;
  }

  namespaces(): string[] {
    return this.watched;
  }

  watches(namespace: string): boolean {
    return this.watched.includes(namespace);
  }

  ready(): boolean {
    return this.isReady;
  }

  report(namespace: string): StatusReport {
    this.builds++;
    return {
      apiVersion: STATUS_API_VERSION,
      kind: 'Status',
      generatedAt: new Date().toISOString(),
      namespaces: [{ namespace, groups: this.groups, budgets: [], restarts: [] }],
    };
  }

  subscribe(_namespace: string, listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get subscribers(): number {
    return this.listeners.size;
  }

  changed(): void {
    for (const listener of this.listeners) listener();
  }
}

async function serve(t: TestContext, source: ReportSource, options: WebHandlerOptions = {}) {
  const server = new HttpServer({ port: 0, host: '127.0.0.1', registry: new Registry(), notReady: () => undefined });
  const handler = new WebHandler(source, options);
  server.route('/status', handler.handle);
  server.routePrefix('/status/', handler.handle);
  const port = await server.listen();
  t.after(async () => {
    handler.close();
    await server.close(1000);
  });
  return { handler, url: (path: string) => `http://127.0.0.1:${port}${path}` };
}

/** Reads an event stream with node's http client, collecting what arrives. */
function openStream(url: string) {
  let text = '';
  let status = 0;
  let headers: Record<string, string | string[] | undefined> = {};
  const req = request(url, (res) => {
    status = res.statusCode ?? 0;
    headers = res.headers;
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => (text += chunk));
  });
  req.on('error', () => undefined);
  req.end();
  return {
    get status() {
      return status;
    },
    get headers() {
      return headers;
    },
    get text() {
      return text;
    },
    reports(): StatusReport[] {
      return [...text.matchAll(/^event: report\ndata: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as StatusReport);
    },
    close: () => req.destroy(),
  };
}

const ROLLING = [
  group(
    'ingester',
    [
      row('ingester-zone-a', [{ updated: true }, { updated: true }, { updated: true }]),
      row('ingester-zone-b', [
        { updated: true },
        { updated: false, ready: false, terminating: true },
        { updated: false },
      ]),
    ],
    {
      phase: 'rolling',
      action: 'rolling ingester-zone-b: deleting ingester-zone-b-1',
      waitReason: {
        code: 'pods-not-ready',
        statefulSet: 'ingester-zone-b',
        message: 'waiting for ingester-zone-b-1 to be Ready',
      },
    },
  ),
];

describe('web view routes', () => {
  it('answers anything but GET and HEAD with 405 and Allow: GET, HEAD', async (t) => {
    const { url } = await serve(t, new FakeSource(['team-a'], ROLLING));
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      for (const path of ['/status', '/status/team-a', '/status/api/team-a', '/status/events/team-a']) {
        const response = await fetch(url(path), { method });
        assert.equal(response.status, 405, `${method} ${path}`);
        assert.equal(response.headers.get('allow'), 'GET, HEAD');
      }
    }
    const head = await fetch(url('/status/team-a'), { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
  });

  it('answers 404 with a message for a namespace the operator does not watch', async (t) => {
    const { url } = await serve(t, new FakeSource(['team-a'], ROLLING));
    for (const path of ['/status/team-b', '/status/api/team-b', '/status/events/team-b']) {
      const response = await fetch(url(path));
      assert.equal(response.status, 404, path);
      assert.match(await response.text(), /namespace "team-b" is not watched by this operator.*watched: team-a/);
    }
    // Not a namespace name at all: never echoed as markup.
    const weird = await fetch(url(`/status/${encodeURIComponent('<b>x</b>')}`));
    assert.equal(weird.status, 404);
    assert.match(weird.headers.get('content-type') ?? '', /^text\/plain/);
    assert.equal((await fetch(url('/status/assets/nope.js'))).status, 404);
    assert.equal((await fetch(url('/status/api/team-a/extra'))).status, 404);
  });

  it('sends the CSP and no cookies on every answer', async (t) => {
    const { url } = await serve(t, new FakeSource(['team-a'], ROLLING));
    for (const path of [
      '/status',
      '/status/team-a',
      '/status/api/team-a',
      '/status/assets/app.js',
      '/status/assets/app.css',
      '/status/assets/icon.svg',
      '/status/team-b',
    ]) {
      const response = await fetch(url(path));
      assert.equal(
        response.headers.get('content-security-policy'),
        "default-src 'self'; script-src 'self'; style-src 'self'",
        path,
      );
      assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(response.headers.get('set-cookie'), null);
      await response.arrayBuffer();
    }
    assert.equal(CONTENT_SECURITY_POLICY, "default-src 'self'; script-src 'self'; style-src 'self'");
    const js = await fetch(url('/status/assets/app.js'));
    assert.match(js.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.equal(await js.text(), readFileSync(new URL('../../src/web/assets/app.js', import.meta.url), 'utf8'));
  });

  it('escapes a malicious group name in the HTML and keeps it intact in the JSON', async (t) => {
    const source = new FakeSource(
      ['team-a'],
      [group(EVIL, [row(`${EVIL}-zone-a`, [{ updated: true }])], { action: EVIL, warnings: [EVIL] })],
    );
    const { url } = await serve(t, source);
    const html = await (await fetch(url('/status/team-a'))).text();
    assert.doesNotMatch(html, /<img/);
    assert.doesNotMatch(html, /onerror="/);
    assert.ok(html.includes(`data-group="${escapeHtml(EVIL)}"`), 'the name as an escaped attribute');
    assert.ok(
      html.includes(`<span class="group-name">&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;</span>`),
    );
    const report = (await (await fetch(url('/status/api/team-a'))).json()) as StatusReport;
    assert.equal(report.namespaces[0]!.groups[0]!.name, EVIL);
  });

  it('renders one row per StatefulSet and one cell per ordinal, with state in data- attributes', async (t) => {
    const { url } = await serve(t, new FakeSource(['team-a'], ROLLING));
    const html = await (await fetch(url('/status/team-a'))).text();
    assert.match(html, /<script type="module" src="\/status\/assets\/app.js"><\/script>/);
    assert.match(html, /<main id="report" data-namespace="team-a">/);
    assert.equal([...html.matchAll(/class="row" data-statefulset=/g)].length, 2);
    assert.match(
      html,
      /data-pod="ingester-zone-a-0" data-ordinal="0" data-updated="true" data-ready="true" data-state="ready"/,
    );
    assert.match(
      html,
      /data-pod="ingester-zone-b-1" data-ordinal="1" data-updated="false" data-ready="false" data-state="terminating"/,
    );
    assert.match(
      html,
      /data-pod="ingester-zone-b-2" data-ordinal="2" data-updated="false" data-ready="true" data-state="ready"/,
    );
    assert.match(html, /class="wait" data-code="pods-not-ready">waiting for ingester-zone-b-1 to be Ready</);
    assert.match(html, /class="legend"/);
    // Every page and asset stays on this server.
    for (const text of [
      html,
      ...['app.js', 'markup.js', 'app.css'].map((f) =>
        readFileSync(new URL(`../../src/web/assets/${f}`, import.meta.url), 'utf8'),
      ),
    ]) {
      assert.doesNotMatch(text, /(https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}\//i);
      assert.doesNotMatch(text, /@import|url\(/);
    }
    const index = await (await fetch(url('/status'))).text();
    assert.match(index, /<a href="\/status\/team-a" data-namespace="team-a">team-a<\/a>/);
  });

  it('escapes every value from the cluster in the markup the server and the browser both render', () => {
    // markup.js draws <main> on the server and, from every pushed report, in the browser (app.js sets it as
    // innerHTML): no field may bring a tag or an attribute of its own.
    const sts = row(`${EVIL}-zone-a`, [{ updated: false, ready: false }]);
    sts.zone = EVIL;
    sts.podGrid[0] = { ...sts.podGrid[0]!, name: EVIL, stuckReason: EVIL };
    sts.scaling = { desiredReplicas: 3, holdReason: EVIL, errors: [EVIL] };
    const at = '2026-11-29T12:00:00.000Z';
    const ns: NamespaceStatus = {
      namespace: 'team-a',
      groups: [
        group(EVIL, [sts], {
          phase: 'blocked',
          action: EVIL,
          blocked: EVIL,
          waitReason: { code: EVIL, message: EVIL },
          warnings: [EVIL, EVIL],
          fixes: [{ code: EVIL, object: EVIL, fix: EVIL }],
          timeline: {
            startedAt: at,
            zones: [
              {
                statefulSet: EVIL,
                startedAt: at,
                waits: [{ code: EVIL, message: EVIL, since: at, from: at, times: 2, waitedMs: 1000 }],
              },
            ],
          },
        }),
      ],
      budgets: [
        {
          name: EVIL,
          maxUnavailable: EVIL,
          mode: 'zone',
          matchedStatefulSets: [EVIL, EVIL],
          pendingEvictions: [{ pod: EVIL, allowedAt: EVIL }],
          error: EVIL,
        },
      ],
      restarts: [],
    };
    const html = namespaceBody(ns).html;
    const tags = new Set([...html.matchAll(/<\/?([a-zA-Z0-9]+)/g)].map((m) => m[1]));
    assert.deepEqual([...tags].sort(), [
      'code',
      'div',
      'h2',
      'h3',
      'li',
      'ol',
      'p',
      'pre',
      'rect',
      'section',
      'span',
      'svg',
      'table',
      'tbody',
      'td',
      'th',
      'thead',
      'title',
      'tr',
      'ul',
    ]);
    assert.doesNotMatch(html, /onerror="/);
    // Every attribute is one of the renderer's own, and every quote inside a value is escaped.
    const attributes = new Set([...html.matchAll(/ ([a-zA-Z-]+)="[^"]*"/g)].map((m) => m[1]));
    assert.deepEqual([...attributes].sort(), [
      'aria-label',
      'class',
      'data-budget',
      'data-code',
      'data-group',
      'data-kind',
      'data-open',
      'data-ordinal',
      'data-phase',
      'data-pod',
      'data-ready',
      'data-started',
      'data-state',
      'data-statefulset',
      'data-stuck',
      'data-updated',
      'data-zone',
      'height',
      'preserveAspectRatio',
      'role',
      'title',
      'viewBox',
      'width',
      'x',
      'y',
    ]);
    const escaped = escapeHtml(EVIL);
    assert.ok(html.includes(`data-stuck="${escaped}"`));
    assert.ok(html.includes(`title="${escaped}: outdated, not-ready (${escaped})"`));
    assert.ok(html.includes(`<td>${escaped}, ${escaped}</td>`));
    // The doctor's fix, the scaling problems and the timeline carry it as text too.
    assert.ok(html.includes(`<pre data-code="${escaped}" title="${escaped}"><code>${escaped}</code></pre>`));
    assert.ok(html.includes(`: wants 3 replicas, held: ${escaped}</li>`));
    assert.ok(html.includes(`<li class="timeline-row" data-statefulset="${escaped}"`));
    assert.ok(html.includes(`<span class="wait-message">${escaped}</span>`));
    assert.equal(escapeHtml(`<>&"'`), '&lt;&gt;&amp;&quot;&#39;');
  });

  it("draws a group's last rollout: a row per StatefulSet in the order they started, with what each waited for", () => {
    const at = (s: number) => new Date(Date.parse('2026-11-29T12:00:00.000Z') + s * 1000).toISOString();
    const wait = (code: string, from: number, until: number | undefined, times: number, waitedMs: number) => ({
      code,
      message: `waiting: ${code}`,
      since: at(from),
      from: at(from),
      ...(until !== undefined ? { until: at(until) } : {}),
      times,
      waitedMs,
    });
    const ns: NamespaceStatus = {
      namespace: 'team-a',
      groups: [
        group('ingester', [row('ingester-zone-a', [{ updated: true, ready: true }])], {
          phase: 'waiting',
          timeline: {
            startedAt: at(0),
            zones: [
              {
                statefulSet: 'ingester-zone-a',
                startedAt: at(0),
                finishedAt: at(7),
                waits: [wait('updated-pods-not-ready', 5, 7, 3, 4000)],
              },
              {
                statefulSet: 'ingester-zone-b',
                startedAt: at(7),
                waits: [wait('zpdb-denied', 8, undefined, 1, 0), wait('a-code-of-the-future', 7, 8, 1, 1000)],
              },
            ],
          },
        }),
      ],
      budgets: [],
      restarts: [],
    };
    const html = namespaceBody(ns, at(20)).html;
    const rows = [...html.matchAll(/<li class="timeline-row" data-statefulset="([^"]+)"[^>]*data-state="(\w+)"/g)];
    assert.deepEqual(
      rows.map((m) => [m[1], m[2]]),
      [
        ['ingester-zone-a', 'finished'],
        ['ingester-zone-b', 'rolling'],
      ],
    );
    assert.match(html, /started 12:00:00 UTC, rolling for 20 s/);
    assert.match(html, /<span class="when">\+0 s → \+7 s \(7 s\)<\/span>/);
    assert.match(html, /<span class="when">\+7 s → rolling \(13 s\)<\/span>/);
    assert.match(
      html,
      /updated pods not Ready<\/span> ×3, 4 s: <span class="wait-message">waiting: updated-pods-not-ready/,
    );
    // The wait going on counts up to the report's time; a code the page does not know is shown as it is.
    assert.match(html, /zone-aware disruption budget<\/span>, 12 s so far: /);
    assert.match(html, /a-code-of-the-future<\/span>, 1 s: /);
    assert.deepEqual([0, 59_400, 60_000, 185_000, 3_600_000, 7_260_000].map(formatDuration), [
      '0 s',
      '59 s',
      '1 min',
      '3 min 5 s',
      '1 h',
      '2 h 1 min',
    ]);
    assert.equal(waitWords('pods-terminating'), 'pods terminating');
    assert.equal(waitWords('toString'), 'toString', 'no inherited property is a word');
  });

  it('names the fix for a blocked group, or the doctor command that finds it', () => {
    const blocked = (fixes?: { code: string; object: string; fix: string }[]): NamespaceStatus => ({
      namespace: 'team-a',
      groups: [group('ingester', [], { phase: 'blocked', blocked: 'not OnDelete', ...(fixes ? { fixes } : {}) })],
      budgets: [],
      restarts: [],
    });
    assert.match(
      namespaceBody(blocked([{ code: 'group-not-ondelete', object: 'StatefulSet a/b', fix: 'kubectl patch' }])).html,
      /To fix it \(from stateward doctor\):<\/p><pre data-code="group-not-ondelete" title="StatefulSet a\/b"><code>kubectl patch<\/code><\/pre>/,
    );
    assert.match(namespaceBody(blocked()).html, /Run <code>stateward doctor -n team-a<\/code> for the fix\./);
  });

  it('shows missing ordinals as missing cells', () => {
    const r = row('ingester-zone-c', [{ updated: true }, { updated: true }], 4);
    r.podGrid = [r.podGrid[0]!, { ...r.podGrid[1]!, ordinal: 2, name: 'ingester-zone-c-2' }];
    assert.deepEqual(
      cellsOf(r).map((c) => `${c.pod}:${c.state}`),
      ['ingester-zone-c-0:ready', 'ingester-zone-c-1:missing', 'ingester-zone-c-2:ready', 'ingester-zone-c-3:missing'],
    );
  });

  it('answers 503 while the caches sync', async (t) => {
    const source = new FakeSource(['team-a'], ROLLING);
    source.isReady = false;
    const { url } = await serve(t, source);
    assert.equal((await fetch(url('/status/api/team-a'))).status, 503);
    source.isReady = true;
    assert.equal((await fetch(url('/status/api/team-a'))).status, 200);
  });

  it('streams a report at once and after changes, at most one per interval, with keep-alives', async (t) => {
    const source = new FakeSource(['team-a'], ROLLING);
    const { url, handler } = await serve(t, source, { minIntervalMs: 300, keepAliveMs: 100 });
    const stream = openStream(url('/status/events/team-a'));
    t.after(() => stream.close());
    await waitFor('the first report', () => stream.reports().length === 1 || undefined, {
      timeoutMs: 5000,
      intervalMs: 10,
    });
    assert.equal(stream.status, 200);
    assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
    assert.equal(stream.headers['content-security-policy'], CONTENT_SECURITY_POLICY);
    assert.equal(stream.reports()[0]!.namespaces[0]!.groups[0]!.phase, 'rolling');
    assert.equal(handler.clients, 1);

    // A burst of changes: one report, not one per change.
    source.groups = [group('ingester', [row('ingester-zone-a', [{ updated: true }])])];
    const before = source.builds;
    for (let i = 0; i < 20; i++) source.changed();
    await waitFor('the report after the change', () => stream.reports().length === 2 || undefined, {
      timeoutMs: 5000,
      intervalMs: 10,
    });
    assert.ok(source.builds - before <= 2, `built ${source.builds - before} reports for one burst`);
    assert.equal(stream.reports()[1]!.namespaces[0]!.groups[0]!.phase, 'complete');

    // A change that changes nothing sends nothing; keep-alives keep coming.
    source.changed();
    await waitFor('keep-alive comments', () => (stream.text.match(/^: keep-alive$/gm)?.length ?? 0) >= 3 || undefined, {
      timeoutMs: 5000,
      intervalMs: 20,
    });
    assert.equal(stream.reports().length, 2);

    stream.close();
    await waitFor('the stream to be released', () => (handler.clients === 0 && source.subscribers === 0) || undefined, {
      timeoutMs: 5000,
      intervalMs: 10,
    });
  });

  it('builds one report per change for all the streams of a namespace', async (t) => {
    const source = new FakeSource(['team-a'], ROLLING);
    const { url, handler } = await serve(t, source, { minIntervalMs: 50 });
    const streams = [1, 2, 3].map(() => openStream(url('/status/events/team-a')));
    t.after(() => streams.forEach((s) => s.close()));
    await waitFor(
      'three streams with a report each',
      () => (handler.clients === 3 && streams.every((s) => s.reports().length === 1)) || undefined,
      { timeoutMs: 5000, intervalMs: 10 },
    );
    assert.equal(source.subscribers, 1);
    assert.equal(source.builds, 1);
    source.groups = [group('ingester', [row('ingester-zone-a', [{ updated: true }])])];
    source.changed();
    await waitFor('the new report on every stream', () => streams.every((s) => s.reports().length === 2) || undefined, {
      timeoutMs: 5000,
      intervalMs: 10,
    });
    assert.equal(source.builds, 2);
  });

  it('caps concurrent event streams with 503 and ends them all on close', async (t) => {
    const source = new FakeSource(['team-a'], ROLLING);
    const { url, handler } = await serve(t, source, { maxClients: 2 });
    const streams = [openStream(url('/status/events/team-a')), openStream(url('/status/events/team-a'))];
    t.after(() => streams.forEach((s) => s.close()));
    await waitFor('two streams open', () => handler.clients === 2 || undefined, { timeoutMs: 5000, intervalMs: 10 });
    const third = await fetch(url('/status/events/team-a'));
    assert.equal(third.status, 503);
    assert.match(await third.text(), /too many open event streams \(2\)/);
    // The page and the API still answer: polling is the fallback.
    assert.equal((await fetch(url('/status/api/team-a'))).status, 200);
    handler.close();
    assert.equal(handler.clients, 0);
    assert.equal(source.subscribers, 0);
  });
});
