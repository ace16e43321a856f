// The web view in a real browser (Debian's Chromium driven by playwright-core,
// which downloads nothing): the real stateward executable with -web.enabled
// against the test cluster, a 3-zone rollout watched through the page as it
// happens, zone by zone, from the live event stream; and hostile text from a
// fake report source, which must reach the page as text only.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { Registry } from 'prom-client';
import { HttpServer } from '../../src/runtime/http/server.ts';
import {
  STATUS_API_VERSION,
  type BudgetView,
  type GroupStatusView,
  type StatusReport,
} from '../../src/status/model.ts';
import { WebHandler, type ReportSource } from '../../src/web/routes.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import {
  changeTemplate,
  createGroup,
  testClient,
  waitGroupSettled,
  waitRevisionsPending,
  waitRolledOut,
  ZONES,
} from '../support/rollout-group.ts';

const cluster = testCluster();
const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
const SETS = ZONES.map((z) => `ingester-zone-${z}`);

interface Cell {
  pod: string;
  updated: boolean;
  ready: boolean;
  state: string;
}
interface Row {
  statefulSet: string;
  cells: Cell[];
}
interface GridState {
  at: number;
  grid: Row[];
}

// Page-side helpers, installed with page.evaluate (the DevTools protocol,
// outside the page's CSP; the test's TypeScript has no DOM types, hence a
// string). The predicates given to page.waitForFunction are functions, not
// strings: Playwright would eval() a string in the page, which the CSP refuses.
const HELPERS = `(() => {
  const read = () => [...document.querySelectorAll('#report .group[data-group="ingester"] .row')].map((row) => ({
    statefulSet: row.dataset.statefulset,
    cells: [...row.querySelectorAll('.cell')].map((c) => ({ pod: c.dataset.pod, updated: c.dataset.updated === 'true', ready: c.dataset.ready === 'true', state: c.dataset.state })),
  }));
  window.__grid = read;
  window.__connection = () => document.getElementById('connection')?.dataset.connection;
  window.__count = (selector) => document.querySelectorAll(selector).length;
  // Every distinct grid the page shows, as it shows it.
  window.__states = [];
  let last = '';
  const record = () => {
    const grid = read();
    const key = JSON.stringify(grid);
    if (key === last) return;
    last = key;
    window.__states.push({ at: Date.now(), grid });
  };
  new MutationObserver(record).observe(document.getElementById('report'), { childList: true, subtree: true, attributes: true });
  record();
})()`;

/** What HELPERS adds to the page's window. */
interface PageWindow {
  __grid(): Row[];
  __states: GridState[];
  __connection(): string | undefined;
  __count(selector: string): number;
}

/** Every pod updated and ready, after each of `seenOutdated` was shown with an outdated pod. */
const allUpdatedReady = (seenOutdated: string[]) => {
  const w = globalThis as unknown as PageWindow;
  const grid = w.__grid();
  return (
    grid.length === 3 &&
    grid.every((r) => r.cells.length === 3 && r.cells.every((c) => c.updated && c.ready)) &&
    seenOutdated.every((name) =>
      w.__states.some((s) => s.grid.some((r) => r.statefulSet === name && r.cells.some((c) => !c.updated))),
    )
  );
};
/** A zone was shown half rolled: updated and outdated pods side by side. */
const sawMixedRow = () =>
  (globalThis as unknown as PageWindow).__states.some((s) =>
    s.grid.some((r) => r.cells.some((c) => c.updated) && r.cells.some((c) => !c.updated)),
  );
const connectionIs = (state: string) => (globalThis as unknown as PageWindow).__connection() === state;
const polledAllReady = () => {
  const w = globalThis as unknown as PageWindow;
  return w.__connection() === 'polling' && w.__count('#report .cell[data-updated="true"][data-ready="true"]') === 9;
};

interface TimelineRow {
  statefulSet: string;
  started: string;
  finished?: string;
  waits: { code: string; why: string; message: string }[];
}

/** The timeline of group ingester as the page shows it: rows in page order, their times and waits. */
const READ_TIMELINE = `[...document.querySelectorAll('#report .group[data-group="ingester"] .timeline-row')].map((row) => ({
  statefulSet: row.dataset.statefulset,
  started: row.dataset.started,
  finished: row.dataset.finished,
  waits: [...row.querySelectorAll('.timeline-wait')].map((w) => ({ code: w.dataset.code, why: w.querySelector('.wait-why').textContent, message: w.querySelector('.wait-message').textContent })),
}))`;

/** The waits of a zone's own rollout: its deleted pods going and coming back, the StatefulSet controller catching up. */
const WAIT_CODES = [
  'pods-terminating',
  'max-unavailable-reached',
  'updated-pods-not-ready',
  'statefulset-status-pending',
];

/** The group's last rollout is shown as finished, all three zones in it. */
const timelineFinished = () => {
  const w = globalThis as unknown as PageWindow;
  return (
    w.__count('#report .group[data-group="ingester"] .timeline[data-finished]') === 1 &&
    w.__count('#report .group[data-group="ingester"] .timeline-row[data-finished]') === 3
  );
};

const code = (c: Cell) =>
  `${c.updated ? 'U' : 'O'}${c.state === 'ready' ? 'r' : c.state === 'not-ready' ? 'n' : c.state === 'terminating' ? 't' : 'm'}`;
const show = (s: GridState) =>
  s.grid.map((r) => `${r.statefulSet.replace('ingester-zone-', '')}: ${r.cells.map(code).join(' ')}`).join(' | ');

describe('web view in a browser', { timeout: 300000 }, () => {
  it("shows a 3-zone rollout live, zone by zone, without leaving the operator's origin", async (t) => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`);
    const started = Date.now();
    const namespace = await cluster.namespace(t);
    const kube = testClient(cluster);
    t.after(() => kube.close());
    await createGroup(kube, namespace);
    await waitGroupSettled(kube, namespace);
    const operator = await OperatorProcess.start(cluster, namespace, ['-web.enabled', '-reconcile.interval=1s']);
    t.after(() => operator.stop());
    await operator.waitReady();
    const origin = `http://127.0.0.1:${operator.port}`;

    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    t.after(() => browser.close());
    const page = await browser.newPage();
    const requests: string[] = [];
    const problems: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    // A CSP violation is reported as a console error: none may occur.
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

    const response = await page.goto(`${origin}/status/${namespace}`);
    assert.equal(response?.status(), 200);
    assert.equal(
      response?.headers()['content-security-policy'],
      "default-src 'self'; script-src 'self'; style-src 'self'",
    );
    await page.evaluate(HELPERS);
    await page.waitForFunction(connectionIs, 'live', { timeout: 30_000 });

    // Settled: 3 rows in roll order, 3 pods each, every one updated and ready.
    await page.waitForFunction(allUpdatedReady, [], { timeout: 30_000, polling: 100 });
    const initial = await page.evaluate<Row[]>('window.__grid()');
    assert.deepEqual(
      initial.map((r) => r.statefulSet),
      SETS,
    );
    assert.deepEqual(
      initial.map((r) => r.cells.map((c) => c.pod)),
      SETS.map((s) => [0, 1, 2].map((i) => `${s}-${i}`)),
    );
    assert.equal(await page.locator('.group[data-group="ingester"] .phase').textContent(), 'complete');

    const change = Date.now();
    for (const zone of ZONES) await changeTemplate(kube, namespace, zone, '2');
    await waitRevisionsPending(kube, namespace);

    // Mid-rollout: a zone with updated and outdated pods side by side.
    await page.waitForFunction(sawMixedRow, undefined, { timeout: 120_000, polling: 100 });
    await mkdir(ARTIFACTS, { recursive: true });
    const screenshot = `${ARTIFACTS}web-rollout.png`;
    await page.screenshot({ path: screenshot, fullPage: true });
    assert.deepEqual(
      [...readFileSync(screenshot).subarray(0, 8)],
      [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
      'a PNG screenshot',
    );

    // Done: every zone was seen outdated, and every pod is updated and ready again.
    await page.waitForFunction(allUpdatedReady, SETS, { timeout: 180_000, polling: 100 });
    const rolled = Date.now();
    await waitRolledOut(kube, namespace, 30_000);
    const states = await page.evaluate<GridState[]>('window.__states');
    const trace = states.map((s) => `${String(s.at - change).padStart(6)} ms  ${show(s)}`).join('\n');
    t.diagnostic(`${states.length} grid states:\n${trace}`);

    assert.ok(
      states.some((s) => s.grid.some((r) => r.cells.some((c) => c.updated) && r.cells.some((c) => !c.updated))),
      `no zone was seen half rolled:\n${trace}`,
    );
    const last = states.at(-1)!;
    assert.ok(
      last.grid.length === 3 &&
        last.grid.every((r) => r.cells.length === 3 && r.cells.every((c) => c.updated && c.ready)),
      `final state not all updated and ready:\n${trace}`,
    );
    // Zone by zone: never two zones half rolled at once, and a zone once done stays done.
    for (const s of states) {
      const mixed = s.grid.filter((r) => r.cells.some((c) => c.updated) && r.cells.some((c) => !c.updated));
      assert.ok(mixed.length <= 1, `two zones rolling at once: ${show(s)}\n${trace}`);
    }
    const doneAt = SETS.map((name) => {
      const outdated = states.findIndex((s) =>
        s.grid.some((r) => r.statefulSet === name && r.cells.some((c) => !c.updated)),
      );
      const done = states.findIndex(
        (s, i) =>
          i > outdated && s.grid.some((r) => r.statefulSet === name && r.cells.every((c) => c.updated && c.ready)),
      );
      assert.ok(outdated >= 0 && done > outdated, `${name} was not seen outdated and then updated:\n${trace}`);
      return done;
    });
    assert.equal(new Set(doneAt).size, 3, `zones finished in the same state: ${doneAt.join(', ')}\n${trace}`);

    // The rollout as a timeline: a row per zone in the order they started, each finished before the next
    // started, each with what it waited for (its own deleted pods going and coming back, at the least).
    await page.waitForFunction(timelineFinished, undefined, { timeout: 30_000, polling: 100 });
    const timeline = await page.evaluate<TimelineRow[]>(READ_TIMELINE);
    const shown = JSON.stringify(timeline, undefined, 2);
    t.diagnostic(`timeline:\n${shown}`);
    assert.deepEqual(
      timeline.map((r) => r.statefulSet),
      SETS,
      shown,
    );
    for (const [i, r] of timeline.entries()) {
      assert.ok(r.finished, `${r.statefulSet} not finished: ${shown}`);
      assert.ok(Date.parse(r.started) >= change - 5_000 && Date.parse(r.finished) <= Date.now(), shown);
      assert.ok(Date.parse(r.started) <= Date.parse(r.finished), shown);
      if (i > 0) assert.ok(Date.parse(timeline[i - 1]!.finished!) <= Date.parse(r.started), `overlap: ${shown}`);
      assert.ok(r.waits.length > 0, `${r.statefulSet} shows no wait: ${shown}`);
      for (const w of r.waits) {
        assert.ok(WAIT_CODES.includes(w.code), `unexpected wait ${w.code}: ${shown}`);
        assert.match(w.message, new RegExp(`^waiting: .*${r.statefulSet}`), shown);
        assert.match(w.why, /\S/, shown);
      }
    }

    // The page reached nothing but its own server: the page, its assets, the stream.
    assert.deepEqual(
      requests.filter((u) => !u.startsWith(`${origin}/`)),
      [],
    );
    for (const path of [
      `/status/${namespace}`,
      '/status/assets/app.js',
      '/status/assets/app.css',
      `/status/events/${namespace}`,
    ]) {
      assert.ok(requests.includes(`${origin}${path}`), `${path} not requested; requests: ${requests.join(', ')}`);
    }
    assert.deepEqual(problems, []);

    // Without EventSource the page polls /status/api instead.
    const polling = await browser.newPage();
    const polled: string[] = [];
    polling.on('request', (r) => polled.push(r.url()));
    await polling.addInitScript('delete window.EventSource');
    await polling.goto(`${origin}/status/${namespace}`);
    await polling.evaluate(HELPERS);
    await polling.waitForFunction(polledAllReady, undefined, { timeout: 30_000, polling: 100 });
    // Polling keeps going: a second request within a few seconds.
    await waitFor(
      'a second poll of /status/api',
      () => polled.filter((u) => u === `${origin}/status/api/${namespace}`).length >= 2,
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    assert.ok(!polled.some((u) => u.includes('/status/events/')), 'polled page opened an event stream');
    t.diagnostic(
      `setup ${((change - started) / 1000).toFixed(1)} s, rollout seen complete after ${((rolled - change) / 1000).toFixed(1)} s`,
    );
  });

  it('puts hostile text into the page as text, live, without running it', async (t) => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`);
    // Names are DNS labels, but actions, wait reasons and warnings quote annotation values, which can hold anything.
    const hostile = (n: number) => `<img src=x onerror="window.__pwned=${n}"><script>window.__pwned=${n}</script>`;
    let groups: GroupStatusView[] = [];
    let budgets: BudgetView[] = [];
    const setGroups = (n: number) => {
      budgets = [
        {
          name: hostile(n),
          maxUnavailable: hostile(n),
          mode: 'zone',
          matchedStatefulSets: [hostile(n)],
          pendingEvictions: [{ pod: hostile(n), allowedAt: hostile(n) }],
          error: hostile(n),
        },
      ];
      groups = [
        {
          name: hostile(n),
          phase: 'blocked',
          action: hostile(n),
          blocked: hostile(n),
          waitReason: { code: 'x', message: hostile(n) },
          warnings: [hostile(n)],
          fixes: [{ code: hostile(n), object: hostile(n), fix: hostile(n) }],
          timeline: {
            startedAt: '2026-11-29T12:00:00.000Z',
            zones: [
              {
                statefulSet: hostile(n),
                startedAt: '2026-11-29T12:00:00.000Z',
                waits: [
                  {
                    code: hostile(n),
                    message: hostile(n),
                    since: '2026-11-29T12:00:01.000Z',
                    from: '2026-11-29T12:00:01.000Z',
                    times: 1,
                    waitedMs: 0,
                  },
                ],
              },
            ],
          },
          statefulSets: [
            {
              name: `${hostile(n)}-zone-a`,
              replicas: 1,
              pods: 1,
              ready: 1,
              updated: 1,
              maxUnavailable: 1,
              paused: false,
              state: 'blocked',
              scaling: { desiredReplicas: 2, holdReason: hostile(n), errors: [hostile(n)] },
              podGrid: [
                {
                  name: hostile(n),
                  ordinal: 0,
                  updated: true,
                  ready: true,
                  terminating: false,
                  stuckReason: hostile(n),
                },
              ],
            },
          ],
        },
      ];
    };
    setGroups(1);
    const listeners = new Set<() => void>();
    const source: ReportSource = {
      namespaces: () => ['team-a'],
      watches: (ns) => ns === 'team-a',
      ready: () => true,
      report: (ns): StatusReport => ({
        apiVersion: STATUS_API_VERSION,
        kind: 'Status',
        generatedAt: new Date().toISOString(),
        namespaces: [{ namespace: ns, groups, budgets, restarts: [] }],
      }),
      subscribe: (_ns, listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
    const server = new HttpServer({ port: 0, host: '127.0.0.1', registry: new Registry(), notReady: () => undefined });
    const handler = new WebHandler(source);
    server.routePrefix('/status/', handler.handle);
    const port = await server.listen();
    t.after(async () => {
      handler.close();
      await server.close(1000);
    });

    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    t.after(() => browser.close());
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${port}/status/team-a`);
    await page.evaluate(HELPERS);
    await page.waitForFunction(connectionIs, 'live', { timeout: 30_000 });
    const texts = () =>
      page.evaluate<{ elements: number; pwned: unknown; texts: string[]; more: string[]; budget: string[] }>(`({
      elements: document.querySelectorAll('#report img, #report script').length,
      pwned: window.__pwned,
      texts: [...document.querySelectorAll('#report .group-name, #report .action, #report .wait, #report .blocked, #report .warnings li, #report .cell')].map((e) => e.textContent + '|' + (e.getAttribute('title') ?? '')),
      more: [...document.querySelectorAll('#report .fix code, #report .scaling li, #report .timeline-row .sts-name, #report .wait-message')].map((e) => e.textContent),
      budget: [...document.querySelectorAll('#report [data-budget] td')].map((e) => e.textContent),
    })`);
    // n = 1 may still be the server's page; n = 2 is app.js's redraw from the stream (markup.js renders both).
    for (const n of [1, 2]) {
      if (n === 2) {
        setGroups(2);
        for (const listener of listeners) listener();
      }
      await page.waitForFunction(
        (text) =>
          (
            globalThis as unknown as { document: { querySelector(s: string): { textContent: string } | null } }
          ).document.querySelector('#report .group-name')?.textContent === text,
        hostile(n),
        { timeout: 10_000, polling: 50 },
      );
      const seen = await texts();
      assert.equal(seen.elements, 0);
      assert.equal(seen.pwned, undefined);
      assert.deepEqual(seen.texts, [
        `${hostile(n)}|`,
        `${hostile(n)}|`,
        `${hostile(n)}|`,
        `${hostile(n)}|`,
        `${hostile(n)}|`,
        `0|${hostile(n)}: updated, ready (${hostile(n)})`,
      ]);
      assert.deepEqual(seen.budget, [hostile(n), hostile(n), 'zone', hostile(n), hostile(n), hostile(n)]);
      // Doctor's fix, the scaling problems and the timeline: text as well.
      assert.deepEqual(seen.more, [
        hostile(n),
        `${hostile(n)}-zone-a: wants 2 replicas, held: ${hostile(n)}`,
        `${hostile(n)}-zone-a: ${hostile(n)}`,
        hostile(n),
        hostile(n),
      ]);
    }

    // Without JavaScript: the server's page, the same text, nothing of it run.
    const noScript = await browser.newContext({ javaScriptEnabled: false });
    t.after(() => noScript.close());
    const staticPage = await noScript.newPage();
    await staticPage.goto(`http://127.0.0.1:${port}/status/team-a`);
    assert.equal(await staticPage.locator('#connection').getAttribute('data-connection'), 'static');
    assert.equal(await staticPage.locator('#report .group-name').textContent(), hostile(2));
    assert.equal(
      await staticPage.locator('#report .cell').getAttribute('title'),
      `${hostile(2)}: updated, ready (${hostile(2)})`,
    );
    assert.deepEqual(await staticPage.locator('#report [data-budget] td').allTextContents(), [
      hostile(2),
      hostile(2),
      'zone',
      hostile(2),
      hostile(2),
      hostile(2),
    ]);
    assert.equal(await staticPage.locator('#report img, #report script').count(), 0);
  });
});
