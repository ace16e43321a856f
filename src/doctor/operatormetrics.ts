// The operator's own count of refused requests, read from its /metrics for
// checks/operatorrefusals.ts: from a URL the user gives (-operator-metrics-url,
// e.g. after `kubectl port-forward`), else from each running pod of each
// operator Deployment through the API server's pod proxy (needs `get
// pods/proxy` in the operator's namespace, which read-only roles often lack:
// then nothing is judged, and checks-skipped says so).
import type { KubeClient } from '../runtime/kube/client.ts';
import { isForbidden } from '../runtime/kube/errors.ts';
import { resources, type Pod } from '../runtime/kube/types.ts';
import { namespaceOf, nameOf } from '../vocabulary/metadata.ts';
import { argsOf, flagValue } from './checks/operatorflags.ts';
import { refusedRequests, type OperatorRefusals } from './checks/operatorrefusals.ts';
import type { Deployment } from './checks/scope.ts';

/** Reads a metrics page; throws when it cannot. */
export type MetricsFetcher = (url: string) => Promise<string>;

/** As the endpoint probe: a pod that does not answer at once (a simulated one, a wedged one) is not waited for. */
const TIMEOUT_MS = 2_000;

/** A plain GET with a timeout: no credentials go to a URL the user typed. */
export const fetchMetrics: MetricsFetcher = async (url) => {
  const response = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS), redirect: 'error' });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return response.text();
};

export interface RefusalsGathered {
  refusals: Record<string, OperatorRefusals | undefined>;
  /** The pod proxy was refused: the check could not be made. */
  forbidden: boolean;
}

const serviceAccountOf = (d: Deployment) =>
  `${namespaceOf(d)}/${d.spec?.template?.spec?.serviceAccountName || 'default'}`;

/** The metrics of one operator Deployment's running pods, through the API server's proxy; undefined when none answered. */
async function throughProxy(client: KubeClient, d: Deployment): Promise<string[] | 'forbidden' | undefined> {
  const namespace = namespaceOf(d);
  const selector = Object.entries(d.spec?.selector?.matchLabels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  if (!selector) return undefined;
  const port = flagValue(argsOf(d), 'server.port') || '8001';
  let pods: Pod[];
  try {
    pods = (await client.list<Pod>(resources.pods, { namespace, labelSelector: selector })).items;
  } catch (error) {
    if (isForbidden(error)) return 'forbidden';
    return undefined;
  }
  const running = pods.filter((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp);
  let forbidden = false;
  const pages = await Promise.all(
    running.map((p) =>
      client
        .request<string>(
          'GET',
          `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(nameOf(p))}:${encodeURIComponent(port)}/proxy/metrics`,
          { text: true, accept: 'text/plain', timeoutMs: TIMEOUT_MS },
        )
        .catch((error: unknown) => {
          if (isForbidden(error)) forbidden = true;
          return undefined;
        }),
    ),
  );
  const read = pages.filter((p): p is string => p !== undefined);
  if (read.length > 0) return read;
  return forbidden ? 'forbidden' : undefined;
}

/** Each operator's refused requests: the URL given, else every operator Deployment's pods through the proxy. */
export async function gatherRefusals(
  client: KubeClient,
  operators: Deployment[],
  options: { url?: string; fetch?: MetricsFetcher } = {},
): Promise<RefusalsGathered> {
  const refusals: Record<string, OperatorRefusals | undefined> = {};
  if (options.url) {
    const only = operators.length === 1 ? operators[0] : undefined;
    const page = await (options.fetch ?? fetchMetrics)(options.url).catch(() => undefined);
    refusals[options.url] =
      page === undefined
        ? undefined
        : {
            operator: only
              ? `Deployment ${namespaceOf(only)}/${nameOf(only)}`
              : `the operator's metrics at ${options.url}`,
            ...(only ? { serviceAccount: serviceAccountOf(only) } : {}),
            refused: refusedRequests(page),
          };
    return { refusals, forbidden: false };
  }
  let forbidden = false;
  await Promise.all(
    operators.map(async (d) => {
      const key = `${namespaceOf(d)}/${nameOf(d)}`;
      const pages = await throughProxy(client, d);
      if (pages === 'forbidden') forbidden = true;
      refusals[key] = Array.isArray(pages)
        ? {
            operator: `Deployment ${key}`,
            serviceAccount: serviceAccountOf(d),
            // Each replica counts its own: one refused rule's count is their sum.
            refused: refusedRequests(pages.join('\n')),
          }
        : undefined;
    }),
  );
  return { refusals, forbidden };
}
