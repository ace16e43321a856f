// 12. The operator's requests the API server refuses now, as the operator
// itself counts them (stateward_kubernetes_api_refused_requests_total, by the
// RBAC rule that would allow each: src/runtime/kube/apimetrics.ts), read from
// its /metrics (doctor/operatormetrics.ts). operator-permission-missing asks
// the authorizer about the rules Stateward's features use; this one sees
// what is actually refused, whatever the cause (a Role edited by hand, a
// renamed object, a namespace outside the RoleBinding), and names the rule.
import { PERMISSIONS, type Rule } from '../../rbac/permissions.ts';
import { type Finding, plural, shellQuote } from './scope.ts';

export const REFUSED_METRIC = 'stateward_kubernetes_api_refused_requests_total';

/** One rule's refusals, as the counter labels it. */
export interface RefusedRequest {
  verb: string;
  /** "" for the core group. */
  apiGroup: string;
  /** With its subresource: "statefulsets/status". */
  resource: string;
  /** "" when cluster-scoped. */
  namespace: string;
  count: number;
}

export interface OperatorRefusals {
  /** "Deployment ns/name", or "the operator's metrics at <url>". */
  operator: string;
  /** "ns/name", when known. */
  serviceAccount?: string;
  refused: RefusedRequest[];
}

/** Refused that many times since the operator started, a refusal is a loop, not a fallback tried once: an error. */
export const REPEATED_REFUSALS = 10;

const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;
const unescape = (v: string) => v.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));

/** The refusals in a Prometheus text exposition, summed over the series of each rule. */
export function refusedRequests(metrics: string): RefusedRequest[] {
  const byRule = new Map<string, RefusedRequest>();
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(`${REFUSED_METRIC}{`)) continue;
    const close = line.lastIndexOf('}');
    const count = Number(
      line
        .slice(close + 1)
        .trim()
        .split(/\s+/)[0],
    );
    if (close < 0 || !Number.isFinite(count) || count <= 0) continue;
    const labels = new Map([...line.slice(0, close).matchAll(LABEL)].map((m) => [m[1]!, unescape(m[2]!)]));
    const verb = labels.get('verb');
    const resource = labels.get('resource');
    if (!verb || !resource) continue;
    const rule = { verb, apiGroup: labels.get('api_group') ?? '', resource, namespace: labels.get('namespace') ?? '' };
    const key = JSON.stringify(rule);
    byRule.set(key, { ...rule, count: (byRule.get(key)?.count ?? 0) + count });
  }
  return [...byRule.values()].sort((a, b) => b.count - a.count || (a.resource < b.resource ? -1 : 1));
}

/** What Stateward uses the rule for (src/rbac/permissions.ts), if it is one of its own. */
function purposeOf(r: RefusedRequest): string | undefined {
  const matches = (rule: Rule) =>
    rule.apiGroups.includes(r.apiGroup) && rule.resources.includes(r.resource) && rule.verbs.includes(r.verb);
  return Object.values(PERMISSIONS).flat().find(matches)?.why;
}

/** `kubectl auth can-i` for the rule, as the ServiceAccount: the check that it is granted. */
function canI(r: RefusedRequest, serviceAccount: string | undefined): string {
  const [resource, subresource] = r.resource.split('/');
  const words = [
    'kubectl auth can-i',
    r.verb,
    `${resource}${r.apiGroup ? `.${r.apiGroup}` : ''}`,
    ...(subresource ? [`--subresource=${subresource}`] : []),
    ...(r.namespace ? ['-n', shellQuote(r.namespace)] : []),
    ...(serviceAccount ? [`--as=system:serviceaccount:${serviceAccount.replace('/', ':')}`] : []),
  ];
  return words.join(' ');
}

export function checkOperatorRefusals(scope: {
  input: { operatorRefusals?: Readonly<Record<string, OperatorRefusals | undefined>> };
}): Finding[] {
  return Object.values(scope.input.operatorRefusals ?? {}).flatMap((o) =>
    (o?.refused ?? []).map((r): Finding => {
      const what = `${r.verb} ${r.resource}${r.apiGroup ? ` (API group ${r.apiGroup})` : ''}`;
      const where = r.namespace ? ` in namespace ${r.namespace}` : ' cluster-wide';
      const purpose = purposeOf(r);
      const rule = `{apiGroups: [${JSON.stringify(r.apiGroup)}], resources: [${JSON.stringify(r.resource)}], verbs: [${JSON.stringify(r.verb)}]}`;
      const to = o!.serviceAccount ? `ServiceAccount ${o!.serviceAccount}` : "the operator's ServiceAccount";
      const container = r.namespace ? `a Role in namespace ${r.namespace}` : 'a ClusterRole';
      return {
        severity: r.count >= REPEATED_REFUSALS ? 'error' : 'warning',
        code: 'operator-requests-refused',
        object: o!.operator,
        problem: `the API server refused its requests to ${what}${where} ${plural(r.count, 'time')} since it started (${REFUSED_METRIC})${purpose ? `; it uses this to ${purpose}` : ''}`,
        fix: `grant ${to} ${what}${where}: add the rule ${rule} to ${container} bound to it (deploy/kustomize/rbac/PERMISSIONS.md); then ${canI(r, o!.serviceAccount)} says yes`,
      };
    }),
  );
}
