// The shape of deploy/monitoring/ and its links into docs/runbook.md, and
// the runbook against what it must cover: every alert, every Event reason
// the README lists, every shipped webhook with its failure policy. Whether
// the metrics the expressions read exist is checked against a running
// operator in monitoring.int.test.ts.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { alertRules, allPanels, expressions, readDashboard, readRules, variableQuery } from './monitoring.ts';
import { metricNames } from './promql.ts';
import { anchors, codeSpans, githubAnchor, readRepoFile, section, sectionTable, tables } from './readme.ts';

const runbook = readRepoFile('docs/runbook.md');
const runbookAnchors = anchors(runbook);
const SEVERITIES = new Set(['critical', 'warning', 'info']);
const DURATION = /^(\d+(ms|s|m|h|d|w|y))+$/;

describe('Prometheus alerting rules', { timeout: 120000 }, () => {
  const rules = readRules();
  const alerts = alertRules(rules);

  it('is a PrometheusRule with alerts', () => {
    assert.equal(rules.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(rules.kind, 'PrometheusRule');
    assert.equal(typeof rules.metadata?.name, 'string');
    assert.ok(alerts.length >= 10, `only ${alerts.length} rules`);
    const names = alerts.map((a) => a.alert);
    assert.deepEqual(
      names.filter((n, i) => names.indexOf(n) !== i),
      [],
      'duplicate alert names',
    );
  });

  it('gives every alert an expression, a duration, a severity, a summary, a description and a runbook link that resolves', () => {
    const problems: string[] = [];
    for (const rule of alerts) {
      const name = rule.alert ?? '(no name)';
      if (typeof rule.alert !== 'string' || !/^Stateward[A-Z][A-Za-z]+$/.test(rule.alert))
        problems.push(`${name}: alert name`);
      if (typeof rule.expr !== 'string' || metricNames(rule.expr).length === 0)
        problems.push(`${name}: expr reads no metric`);
      if (rule.for !== undefined && (typeof rule.for !== 'string' || !DURATION.test(rule.for)))
        problems.push(`${name}: for ${JSON.stringify(rule.for)}`);
      if (!SEVERITIES.has(String(rule.labels?.severity)))
        problems.push(`${name}: severity ${String(rule.labels?.severity)}`);
      for (const key of ['summary', 'description', 'runbook_url']) {
        const value = rule.annotations?.[key];
        if (typeof value !== 'string' || value.trim() === '') problems.push(`${name}: no ${key}`);
      }
      const url = typeof rule.annotations?.runbook_url === 'string' ? rule.annotations.runbook_url : '';
      const anchor = /^https:\/\/\S+\/docs\/runbook\.md#([^#\s]+)$/.exec(url)?.[1];
      if (!anchor) problems.push(`${name}: runbook_url ${url} is not a link to docs/runbook.md#anchor`);
      else if (!runbookAnchors.has(anchor))
        problems.push(`${name}: docs/runbook.md has no heading with anchor #${anchor}`);
      else if (anchor !== githubAnchor(name))
        problems.push(`${name}: runbook_url points at #${anchor}, not at its own section #${githubAnchor(name)}`);
    }
    assert.deepEqual(problems, []);
  });

  it('has a runbook section for every alert and none for alerts that do not exist', () => {
    const sections = headingsUnder('Alerts', 3);
    assert.deepEqual(sections.sort(), alerts.map((a) => String(a.alert)).sort());
  });
});

/** Headings of one level directly under a level-2 heading of the runbook. */
function headingsUnder(title: string, level: number): string[] {
  return [...section(runbook, title).matchAll(new RegExp(`^${'#'.repeat(level)} (.+)$`, 'gm'))].map((m) =>
    m[1]!.trim(),
  );
}

describe('Grafana dashboard', { timeout: 120000 }, () => {
  const dashboard = readDashboard();
  const panels = allPanels(dashboard);
  const variables = dashboard.templating?.list ?? [];

  it('is a dashboard with a Prometheus data source variable and a namespace variable', () => {
    assert.equal(typeof dashboard.title, 'string');
    assert.equal(typeof dashboard.uid, 'string');
    assert.ok(
      typeof dashboard.schemaVersion === 'number' && dashboard.schemaVersion >= 36,
      `schemaVersion ${String(dashboard.schemaVersion)}`,
    );
    const datasource = variables.find((v) => v.name === 'datasource');
    assert.equal(datasource?.type, 'datasource');
    assert.equal(datasource?.query, 'prometheus');
    const namespace = variables.find((v) => v.name === 'namespace');
    assert.equal(namespace?.type, 'query');
    assert.match(variableQuery(namespace ?? {}) ?? '', /^label_values\(.+, namespace\)$/);
    assert.deepEqual(namespace?.datasource, { type: 'prometheus', uid: '${datasource}' });
  });

  it('gives every panel a title, a place on the grid, and (rows aside) Prometheus queries filtered by namespace', () => {
    assert.ok(panels.length >= 20, `only ${panels.length} panels`);
    const problems: string[] = [];
    const ids = new Set<unknown>();
    for (const panel of panels) {
      const name = JSON.stringify(panel.title);
      if (typeof panel.title !== 'string' || panel.title.trim() === '')
        problems.push(`panel ${String(panel.id)}: no title`);
      if (ids.has(panel.id)) problems.push(`${name}: duplicate id ${String(panel.id)}`);
      ids.add(panel.id);
      const g = panel.gridPos;
      if (!g || !(Number.isInteger(g.x) && Number.isInteger(g.w) && g.x! >= 0 && g.w! > 0 && g.x! + g.w! <= 24))
        problems.push(`${name}: gridPos ${JSON.stringify(g)}`);
      if (panel.type === 'row') continue;
      if (!panel.targets || panel.targets.length === 0) problems.push(`${name}: no target`);
      if (JSON.stringify(panel.datasource) !== JSON.stringify({ type: 'prometheus', uid: '${datasource}' }))
        problems.push(`${name}: datasource ${JSON.stringify(panel.datasource)}`);
      for (const target of panel.targets ?? []) {
        if (typeof target.expr !== 'string' || target.expr.trim() === '')
          problems.push(`${name} ${String(target.refId)}: no expr`);
        else if (!target.expr.includes('namespace="$namespace"'))
          problems.push(`${name} ${String(target.refId)}: not filtered by namespace`);
        else if (metricNames(target.expr).length === 0)
          problems.push(`${name} ${String(target.refId)}: reads no metric`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('covers rollouts, webhooks and evictions, scaling, config restarts and the runtime', () => {
    const rows = panels.filter((p) => p.type === 'row').map((p) => p.title);
    for (const row of ['Rollouts', 'Webhooks and evictions', 'Scaling', 'Config restarts', 'Runtime'])
      assert.ok(rows.includes(row), `no ${row} row`);
  });

  it('parses every expression of both files for metric names', () => {
    const all = expressions();
    assert.ok(all.length > panels.length, `only ${all.length} expressions`);
    for (const { where, expr } of all) assert.ok(metricNames(expr).length > 0, `${where}: no metric in ${expr}`);
  });
});

describe('operations runbook', { timeout: 120000 }, () => {
  it('explains every Event reason the README says Stateward writes', () => {
    const objects = sectionTable(readRepoFile('README.md'), 'Kubernetes objects Stateward writes', ['object', 'when']);
    const reasons = new Set(
      objects.rows.filter((row) => row[0]!.startsWith('Events')).flatMap((row) => codeSpans(row[1]!)),
    );
    assert.ok(reasons.size >= 15, `only ${reasons.size} Event reasons read from the README`);
    const explained = new Set(
      tables(section(runbook, 'Kubernetes Events')).flatMap((t) => t.rows.flatMap((row) => codeSpans(row[0]!))),
    );
    assert.deepEqual(
      [...reasons].filter((r) => !explained.has(r)),
      [],
      'Event reasons the runbook does not explain',
    );
    assert.deepEqual(
      [...explained].filter((r) => !reasons.has(r)),
      [],
      'Event reasons in the runbook the README does not list',
    );
  });

  it('links only to headings that exist', () => {
    const links = [...runbook.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]!);
    assert.ok(links.length >= 10, `only ${links.length} internal links`);
    assert.deepEqual(
      links.filter((anchor) => !runbookAnchors.has(anchor)),
      [],
      'links to anchors docs/runbook.md does not have',
    );
  });

  it('states the failure policy of every shipped webhook as its manifest sets it', () => {
    const shipped = new Map<string, string>();
    const dir = new URL('../../deploy/webhooks/', import.meta.url);
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
      for (const doc of parseAllDocuments(readRepoFile(`deploy/webhooks/${file}`))) {
        const object = doc.toJS() as {
          kind?: string;
          webhooks?: { clientConfig?: { service?: { path?: string } }; failurePolicy?: string }[];
        } | null;
        if (!object?.kind?.endsWith('WebhookConfiguration')) continue;
        for (const webhook of object.webhooks ?? [])
          shipped.set(webhook.clientConfig?.service?.path ?? '', webhook.failurePolicy ?? 'Fail');
      }
    }
    assert.ok(shipped.size >= 5, `only ${shipped.size} webhooks read from deploy/webhooks`);
    const stated = new Map<string, string>();
    for (const table of tables(section(runbook, 'Webhook failure policies'))) {
      const pathColumn = table.header.indexOf('path');
      const policyColumn = table.header.indexOf('failurePolicy');
      if (pathColumn < 0 || policyColumn < 0) continue;
      for (const row of table.rows)
        stated.set(codeSpans(row[pathColumn]!)[0] ?? '', codeSpans(row[policyColumn]!)[0] ?? '');
    }
    assert.deepEqual(Object.fromEntries([...stated].sort()), Object.fromEntries([...shipped].sort()));
  });
});
