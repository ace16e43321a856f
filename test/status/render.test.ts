import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildStatus } from '../../src/status/build.ts';
import type { StatusReport } from '../../src/status/model.ts';
import { progressBar, renderJson, renderProgress, renderTable } from '../../src/status/render.ts';
import { fullInput, NS } from './fixture.ts';

const report = buildStatus(fullInput());

/** The table rows (from the header line starting with `header`) until a blank, unindented or note (`  * `) line. */
function tableRows(text: string, header: string): string[][] {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim().startsWith(header));
  assert.ok(start >= 0, `a table headed ${header}`);
  const rows: string[][] = [];
  for (const line of lines.slice(start)) {
    if (!line.startsWith('  ') || line.startsWith('  * ') || line.trim() === '') break;
    rows.push(line.trim().split(/\s{2,}/));
  }
  return rows;
}

describe('status table', () => {
  const text = renderTable(report);

  it("prints the group's rollout timeline and a blocked group's fix", () => {
    const lines = text.split('\n');
    const at = lines.findIndex((l) => l === '  rollout: started 2026-01-10T11:50:00.000Z');
    assert.ok(at >= 0, text);
    assert.deepEqual(lines.slice(at + 1, at + 3), [
      '    ingester-zone-a: +0s .. +5m0s; waited: updated-pods-not-ready x3 1m30s',
      '    ingester-zone-b: +5m0s .. rolling',
    ]);
    assert.ok(
      lines.some((l) => /^ {2}fix \(group-not-ondelete, StatefulSet \S+\/store-zone-b\): kubectl -n \S+ patch/.test(l)),
      text,
    );
  });

  it("lists a group's StatefulSets in roll order with their updated/ready counts and state", () => {
    const [header, ...rows] = tableRows(text, 'STATEFULSET');
    assert.deepEqual(header, ['STATEFULSET', 'ZONE', 'UPDATED', 'READY', 'MAX-UNAVAILABLE', 'STATE', 'SCALING']);
    assert.deepEqual(
      rows.map((r) => r[0]),
      ['ingester-zone-b', 'ingester-zone-a', 'ingester-zone-c'],
    );
    assert.deepEqual(rows[0]!.slice(0, 6), ['ingester-zone-b', 'zone-b', '1/3', '2/3', '1', 'waiting']);
    assert.deepEqual(rows[1]!.slice(0, 6), ['ingester-zone-a', 'zone-a', '3/3', '3/3', '1', 'up-to-date']);
    assert.deepEqual(rows[2]!.slice(0, 6), ['ingester-zone-c', 'zone-c', '0/4', '4/4', '1', 'pending']);
    assert.match(rows[2]![6]!, /follows ingester-zone-a/);
    assert.match(rows[2]![6]!, /wants 3 \(held\)/);
    assert.match(rows[2]![6]!, /no downscale for 20m0s/);
  });

  it('aligns the columns: every value starts where its header does', () => {
    const lines = text.split('\n');
    const start = lines.findIndex((l) => l.trim().startsWith('STATEFULSET'));
    const header = lines[start]!;
    const column = header.indexOf('UPDATED');
    for (const line of lines.slice(start + 1, start + 4)) assert.match(line.slice(column), /^\d+\/\d+ /);
  });

  it('heads each group with its phase and action, then why it waits', () => {
    const lines = text.split('\n');
    const head = lines.find((l) => l.startsWith('GROUP ingester'));
    assert.ok(head);
    assert.match(head, /\bwaiting\b/);
    assert.match(head, /rolling ingester-zone-b: waiting for pods to become Ready/);
    assert.ok(
      lines.some(
        (l) =>
          l.includes('waiting: 1 pod not Ready in ingester-zone-b (max unavailable 1)') &&
          l.includes('[max-unavailable-reached]'),
      ),
    );
    assert.ok(lines.some((l) => l.includes('held: not following leader ingester-zone-a down to 3 yet')));
    assert.ok(
      lines.some((l) =>
        /operator last reported: waiting \[pods-terminating\] since 2026-01-10T11:58:00.000Z \(2m ago\)$/.test(l),
      ),
    );
    // Two minutes of a report that disagrees with the cluster: nobody is reporting.
    assert.ok(
      lines.includes(
        '  the operator has not reported what the cluster shows for 2m: is it running? (stateward doctor)',
      ),
      text,
    );
  });

  it('shows budgets and restarts, with their facts', () => {
    const [bHeader, ...budgets] = tableRows(text, 'NAME  ');
    assert.equal(bHeader![0], 'NAME');
    assert.deepEqual(budgets[0]!.slice(0, 4), [
      'ingester',
      '1',
      'zone',
      'ingester-zone-a,ingester-zone-b,ingester-zone-c',
    ]);
    assert.match(budgets[0]![4]!, /ingester-zone-c-3/);
    const [, ...restarts] = tableRows(text, 'KIND');
    assert.deepEqual(
      restarts.map((r) => r.slice(0, 3)),
      [
        ['Deployment', 'querier', 'rolling'],
        ['StatefulSet', 'store-gateway', 'standalone-ondelete'],
      ],
    );
    assert.equal(restarts[0]![5], 'Secret/querier-secret');
    assert.equal(restarts[1]!.at(-1), '1');
    assert.match(text, /broken: invalid, evictions of its pods denied: invalid value/);
    assert.match(text, /store-zone-b-2: CrashLoopBackOff/);
  });

  it('leaves out the budget and restart sections when there are none, and has no colours unless asked', () => {
    const only: StatusReport = { ...report, namespaces: [{ ...report.namespaces[0]!, budgets: [], restarts: [] }] };
    const out = renderTable(only);
    assert.doesNotMatch(out, /BUDGETS|RESTARTS/);
    assert.match(out, /GROUP ingester/);
    // eslint-disable-next-line no-control-regex
    assert.doesNotMatch(text, /\x1b\[/);
    // eslint-disable-next-line no-control-regex
    assert.match(renderTable(report, { color: true }), /\x1b\[33mwaiting\x1b\[0m/);
    const empty = renderTable({
      ...report,
      namespaces: [{ namespace: 'quiet', groups: [], budgets: [], restarts: [] }],
    });
    assert.match(empty, /NAMESPACE quiet/);
    assert.match(empty, /no rollout groups, disruption budgets or config-restart workloads/);
  });
});

describe('status JSON', () => {
  it('round-trips the report', () => {
    assert.deepEqual(JSON.parse(renderJson(report)), JSON.parse(JSON.stringify(report)));
  });

  it('has a fixed key order, whatever order the report was built in, and a 2-space indent', () => {
    const reordered = JSON.parse(
      JSON.stringify(report, (_k, v: unknown) =>
        v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
      ),
    ) as StatusReport;
    assert.equal(renderJson(reordered), renderJson(report));
    const lines = renderJson(report).split('\n');
    assert.deepEqual(lines.slice(0, 4), [
      '{',
      '  "apiVersion": "stateward.dev/v1",',
      '  "kind": "Status",',
      '  "generatedAt": "2026-01-10T12:00:00.000Z",',
    ]);
  });
});

describe('status progress (--watch)', () => {
  it('draws bars proportional to the count', () => {
    assert.equal(progressBar(6, 10, 10), '[██████░░░░]');
    assert.equal(progressBar(0, 10, 10), '[░░░░░░░░░░]');
    assert.equal(progressBar(10, 10, 10), '[██████████]');
    assert.equal(progressBar(0, 0, 4), '[░░░░]');
    // Never full before done, never empty once started.
    assert.equal(progressBar(99, 100, 10), '[█████████░]');
    assert.equal(progressBar(1, 100, 10), '[█░░░░░░░░░]');
  });

  it('shows one line per StatefulSet in roll order with updated and ready bars, then the action and the wait', () => {
    const out = renderProgress(report, 100);
    const lines = out.split('\n');
    const head = lines.findIndex((l) => l.startsWith(`${NS}/ingester`));
    assert.ok(head >= 0);
    assert.match(lines[head]!, /waiting {2}rolling ingester-zone-b: waiting for pods to become Ready/);
    const sets = lines.slice(head + 1, head + 4);
    assert.deepEqual(
      sets.map((l) => l.trim().split(/\s+/)[0]),
      ['ingester-zone-b', 'ingester-zone-a', 'ingester-zone-c'],
    );
    for (const line of sets) assert.ok([...line].length <= 100, `fits in 100 columns: ${line}`);
    const bars = (line: string) =>
      [...line.matchAll(/\[([█░]+)\]/g)].map((m) => {
        const cells = [...m[1]!];
        return cells.filter((c) => c === '█').length / cells.length;
      });
    const [bUpdated, bReady] = bars(sets[0]!);
    assert.ok(Math.abs(bUpdated! - 1 / 3) < 0.1, `zone b 1/3 updated, bar ${bUpdated}`);
    assert.ok(Math.abs(bReady! - 2 / 3) < 0.1, `zone b 2/3 ready, bar ${bReady}`);
    assert.match(sets[0]!, /1\/3 updated .* 2\/3 ready +waiting$/);
    assert.deepEqual(bars(sets[1]!), [1, 1]);
    assert.deepEqual(bars(sets[2]!)[0], 0);
    assert.equal(lines[head + 4]!.trim(), 'waiting: 1 pod not Ready in ingester-zone-b (max unavailable 1)');
  });

  it('uses the width it is given', () => {
    const bar = (columns: number) => /\[([█░]+)\]/.exec(renderProgress(report, columns))![1]!.length;
    assert.ok(bar(160) > bar(100));
    assert.ok(bar(20) >= 5, 'never narrower than 5 cells');
  });
});
