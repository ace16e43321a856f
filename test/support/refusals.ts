// Counting the requests the API server refused (403) an operator, issue 34's
// measure of a drop-in: a refusal may happen, it must not repeat in a loop.
import { readFile } from 'node:fs/promises';

/** `count` refusals per key ("verb resource[/name]" or "method path"), from the operator's own request metric. */
export function refusedFromMetrics(metrics: string): Map<string, number> {
  const refused = new Map<string, number>();
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('rollout_operator_kubernetes_api_client_request_duration_seconds_count{')) continue;
    if (!line.includes('status_code="403"')) continue;
    const method = /method="([^"]*)"/.exec(line)?.[1];
    const path = /path="([^"]*)"/.exec(line)?.[1];
    refused.set(`${method} ${path}`, Number(line.split(' ').at(-1)));
  }
  return refused;
}

interface AuditEvent {
  auditID?: string;
  verb?: string;
  user?: { username?: string };
  objectRef?: { resource?: string; subresource?: string; name?: string; namespace?: string; apiGroup?: string };
  responseStatus?: { code?: number };
}

/** The apiserver's audit policy for refusals: metadata of every request. */
export const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    nonResourceURLs: ['/healthz*', '/readyz*', '/livez*', '/metrics', '/version']
  - level: Metadata
`;

/**
 * Refusals of `username`'s requests in a JSON audit log, per "verb
 * resource[/subresource] [name]". One per request: a watch is logged twice
 * (ResponseStarted and ResponseComplete) under one auditID.
 */
export async function refusedFromAudit(path: string, username: string): Promise<Map<string, number>> {
  const refused = new Map<string, number>();
  const seen = new Set<string>();
  for (const line of (await readFile(path, 'utf8')).split('\n')) {
    if (!line.includes('"code":403')) continue;
    const e = JSON.parse(line) as AuditEvent;
    if (e.user?.username !== username || e.responseStatus?.code !== 403) continue;
    if (e.auditID !== undefined && seen.has(e.auditID)) continue;
    if (e.auditID !== undefined) seen.add(e.auditID);
    const o = e.objectRef ?? {};
    const key = `${e.verb} ${o.resource}${o.apiGroup ? `.${o.apiGroup}` : ''}${o.subresource ? `/${o.subresource}` : ''}${o.name ? ` ${o.name}` : ''}`;
    refused.set(key, (refused.get(key) ?? 0) + 1);
  }
  return refused;
}

/**
 * The refusals that repeated more than a bounded re-probe allows: once, and
 * once more per `reprobeMs` (the operator looks again every 5 minutes at
 * most, so that a Role fixed meanwhile takes effect) over `elapsedMs`.
 */
export function repeated(refused: Map<string, number>, elapsedMs: number, reprobeMs = 5 * 60_000): string[] {
  const allowed = 1 + Math.floor(elapsedMs / reprobeMs);
  return [...refused].filter(([, n]) => n > allowed).map(([key, n]) => `${key}: ${n} refusals (at most ${allowed})`);
}
