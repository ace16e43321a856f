// deploy/monitoring/: the PrometheusRule and the Grafana dashboard, read as
// data, and every PromQL expression in them with where it comes from.
import { parse } from 'yaml';
import { labelValuesQuery } from './promql.ts';
import { readRepoFile } from './readme.ts';

export const RULES_PATH = 'deploy/monitoring/prometheus-rules.yaml';
export const DASHBOARD_PATH = 'deploy/monitoring/grafana-dashboard.json';

export interface AlertRule {
  alert?: string;
  record?: string;
  expr?: unknown;
  for?: unknown;
  labels?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}

export interface PrometheusRule {
  apiVersion?: unknown;
  kind?: unknown;
  metadata?: { name?: unknown };
  spec?: { groups?: { name?: unknown; rules?: AlertRule[] }[] };
}

export interface DashboardTarget {
  refId?: unknown;
  expr?: unknown;
  datasource?: unknown;
}

export interface DashboardPanel {
  id?: unknown;
  type?: unknown;
  title?: unknown;
  datasource?: unknown;
  gridPos?: { x?: number; y?: number; w?: number; h?: number };
  targets?: DashboardTarget[];
  panels?: DashboardPanel[];
}

export interface DashboardVariable {
  name?: unknown;
  type?: unknown;
  query?: unknown;
  datasource?: unknown;
}

export interface Dashboard {
  title?: unknown;
  uid?: unknown;
  schemaVersion?: unknown;
  panels?: DashboardPanel[];
  templating?: { list?: DashboardVariable[] };
}

export function readRules(): PrometheusRule {
  return parse(readRepoFile(RULES_PATH)) as PrometheusRule;
}

export function readDashboard(): Dashboard {
  return JSON.parse(readRepoFile(DASHBOARD_PATH)) as Dashboard;
}

export function alertRules(rules: PrometheusRule): AlertRule[] {
  return (rules.spec?.groups ?? []).flatMap((g) => g.rules ?? []);
}

/** Every panel, those nested in collapsed rows included. */
export function allPanels(dashboard: Dashboard): DashboardPanel[] {
  return (dashboard.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** The text of a query variable's query (a string, or `{query: …}` in newer Grafana). */
export function variableQuery(variable: DashboardVariable): string | undefined {
  const q = variable.query;
  if (typeof q === 'string') return q;
  if (q && typeof q === 'object' && typeof (q as { query?: unknown }).query === 'string')
    return (q as { query: string }).query;
  return undefined;
}

export interface Expression {
  where: string;
  expr: string;
}

/** Every PromQL expression of both files: alert expressions, panel targets, variable queries. */
export function expressions(): Expression[] {
  const out: Expression[] = [];
  for (const rule of alertRules(readRules())) {
    if (typeof rule.expr === 'string')
      out.push({ where: `${RULES_PATH} ${rule.alert ?? rule.record}`, expr: rule.expr });
  }
  const dashboard = readDashboard();
  for (const panel of allPanels(dashboard)) {
    for (const target of panel.targets ?? []) {
      if (typeof target.expr === 'string')
        out.push({
          where: `${DASHBOARD_PATH} panel ${JSON.stringify(panel.title)} ${String(target.refId)}`,
          expr: target.expr,
        });
    }
  }
  for (const variable of dashboard.templating?.list ?? []) {
    if (variable.type !== 'query') continue;
    const query = variableQuery(variable) ?? '';
    const labelValues = labelValuesQuery(query);
    out.push({
      where: `${DASHBOARD_PATH} variable ${String(variable.name)}`,
      expr: labelValues ? labelValues.expr : query,
    });
  }
  return out;
}
