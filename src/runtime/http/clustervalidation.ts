// HTTP cluster validation of incoming requests (-server.cluster-validation.http.*),
// with the semantics of dskit's middleware as rollout-operator wires it onto
// both of its servers: the X-Cluster header must hold exactly one of the
// server's cluster labels. rollout-operator's label is its namespace.
//
// What dskit does, and so what this does:
// - A path containing "/metrics", "/debug/pprof", "/ready" or "/<p>" for each
//   excluded path p is not checked (a substring match anywhere in the path,
//   as dskit's unanchored regular expression; an empty p thus excludes every
//   path). rollout-operator's default excluded paths, used when the flag is
//   empty, are admission/no-downscale and admission/prepare-downscale: the
//   kube-apiserver sends no X-Cluster.
// - A request whose User-Agent matches `(ua1|ua2|…)`, a Go regular
//   expression built from the excluded user agents, is not checked.
// - Otherwise a missing or empty header, several X-Cluster headers, or a
//   label the server does not have is counted in
//   rollout_operator_server_invalid_cluster_validation_label_requests_total
//   and logged as a warning. In soft mode the request then goes on; in hard
//   mode it is answered 511 with a JSON body naming the problem and the route.
//
// Where Stateward differs, and why:
// - Paths only Stateward serves (/healthz, /status…, its own admission
//   webhooks) are never checked: no rollout-operator command line can name
//   them in its excluded paths, and their callers (the kubelet, a browser,
//   the kube-apiserver) send no X-Cluster. Unknown paths are checked, as in
//   rollout-operator.
// - The labels are -kubernetes.namespace followed by every namespace of
//   -kubernetes.watch-namespaces, so one Stateward managing several
//   namespaces accepts what each namespace's rollout-operator accepted; the
//   first is the metric's cluster_validation_label.
// - The metric keeps at most MAX_REQUEST_LABELS distinct label values a
//   client sent; later new ones are counted as OTHER_REQUEST_LABEL, so
//   made-up labels cannot grow the registry without bound.
import type { IncomingMessage } from 'node:http';
import { Counter, type Registry } from 'prom-client';
import { compileGoRegexp, type GoRegexp } from '../go/regexp.ts';
import { quoteGo } from '../go/strconv.ts';
import type { Logger } from '../log/logger.ts';
import { CLUSTER_HEADER } from './clusterlabel.ts';

export interface ClusterValidationConfig {
  enabled: boolean;
  /** Log and count, but serve. */
  softValidation: boolean;
  /** The labels X-Cluster may hold; the first is the metric's cluster_validation_label. */
  labels: readonly string[];
  /** Paths (dskit style, no leading slash) not checked, besides metrics, debug/pprof and ready. */
  excludedPaths: readonly string[];
  /** Alternatives of a Go regular expression; a request whose User-Agent matches it is not checked. */
  excludedUserAgents: readonly string[];
}

/** rollout-operator's default for -server.cluster-validation.http.excluded-paths, applied when the flag is empty. */
export const DEFAULT_EXCLUDED_PATHS: readonly string[] = ['admission/no-downscale', 'admission/prepare-downscale'];

/** What dskit always leaves unchecked (its path expression's fixed alternatives). */
const ALWAYS_EXCLUDED = ['metrics', 'debug/pprof', 'ready'];

/** The paths rollout-operator v0.38.1 serves (on either server): only these and unknown paths are checked. */
export const ROLLOUT_OPERATOR_PATHS: ReadonlySet<string> = new Set([
  '/metrics',
  '/ready',
  '/admission/no-downscale',
  '/admission/prepare-downscale',
  '/admission/pod-eviction',
  '/admission/zpdb-validation',
]);

/** dskit's route name when the router matched none (the 511 body's route and the metric's method). */
export const UNKNOWN_ROUTE = '<unknown-route>';

export const MAX_REQUEST_LABELS = 100;
export const OTHER_REQUEST_LABEL = '<other>';

/** A comma-separated flag value as dskit's StringSliceCSV reads it: empty is none; elements are kept as written. */
export function splitCsv(value: string): string[] {
  return value === '' ? [] : value.split(',');
}

/** The labels for a namespace and the watched namespaces, deduplicated, the namespace first ("*" is no label). */
export function clusterLabels(namespace: string, watchNamespaces: readonly string[]): string[] {
  return [...new Set([namespace, ...watchNamespaces.filter((n) => n !== '*')])];
}

/** A compiled configuration. */
export interface ClusterPolicy {
  labels: readonly string[];
  soft: boolean;
  /** Excluded when the path contains "/" + one of these. */
  excludedPaths: readonly string[];
  excludedUserAgents: GoRegexp | undefined;
}

/**
 * What rollout-operator would refuse to start with: soft validation without
 * validation (dskit's config check), or excluded user agents that do not
 * compile (its middleware compiles them, only when enabled, or panics).
 */
export function clusterValidationProblem(config: ClusterValidationConfig): string | undefined {
  if (config.softValidation && !config.enabled)
    return '-server.cluster-validation.http.soft-validation: soft validation can be enabled only if cluster validation is enabled (-server.cluster-validation.http.enabled)';
  if (!config.enabled) return undefined;
  const compiled = compileClusterPolicy(config);
  return 'error' in compiled ? compiled.error : undefined;
}

/** The configuration compiled for checking requests. */
export function compileClusterPolicy(config: ClusterValidationConfig): { policy: ClusterPolicy } | { error: string } {
  if (config.labels.length === 0 || config.labels.includes(''))
    return { error: 'http: validation cannot be enabled if cluster validation label is not configured' };
  let excludedUserAgents: GoRegexp | undefined;
  if (config.excludedUserAgents.length > 0) {
    const compiled = compileGoRegexp(`(${config.excludedUserAgents.join('|')})`);
    if ('error' in compiled)
      return { error: `-server.cluster-validation.http.excluded-user-agents: ${compiled.error}` };
    excludedUserAgents = compiled.regexp;
  }
  return {
    policy: {
      labels: config.labels,
      soft: config.softValidation,
      excludedPaths: [...ALWAYS_EXCLUDED, ...config.excludedPaths],
      excludedUserAgents,
    },
  };
}

/** What the decision needs from a request. */
export interface ClusterCheckInput {
  path: string;
  /** The path is served by Stateward alone (see the module comment). */
  statewardOnly: boolean;
  /** The User-Agent header ('' when absent). */
  userAgent: string;
  /** Every X-Cluster header value, in order. */
  values: readonly string[];
}

export type ClusterVerdict =
  | { valid: true }
  | {
      valid: false;
      problem: 'wrong' | 'missing' | 'several';
      /** The metric's request_cluster_validation_label: the label sent, '' when none or several. */
      requestLabel: string;
      /** dskit's error text, the 511 body's message in hard mode. */
      message: string;
      /** For several headers: the error dskit logs (the message without its "rejected request: "). */
      cause?: string;
    };

/** The decision for one request: pure, no I/O. */
export function checkClusterLabel(policy: ClusterPolicy, request: ClusterCheckInput): ClusterVerdict {
  if (request.statewardOnly) return { valid: true };
  if (policy.excludedPaths.some((p) => request.path.includes(`/${p}`))) return { valid: true };
  if (policy.excludedUserAgents?.matchString(request.userAgent)) return { valid: true };
  const labels = `[${policy.labels.join(' ')}]`;
  const { values } = request;
  if (values.length > 1) {
    const cause = `request header should contain exactly 1 value for key ${quoteGo(CLUSTER_HEADER)}, but it contains [${values.join(' ')}]`;
    return { valid: false, problem: 'several', requestLabel: '', message: `rejected request: ${cause}`, cause };
  }
  const sent = values[0] ?? '';
  if (sent === '')
    return {
      valid: false,
      problem: 'missing',
      requestLabel: '',
      message: `rejected request with empty cluster validation label - it should be one of ${labels}`,
    };
  if (policy.labels.includes(sent)) return { valid: true };
  return {
    valid: false,
    problem: 'wrong',
    requestLabel: sent,
    message: `rejected request with wrong cluster validation label ${quoteGo(sent)} - it should be one of ${labels}`,
  };
}

/** The 511 body, byte for byte as Go's encoding/json writes dskit's error (HTML characters escaped, no newline). */
export function rejectionBody(message: string, route: string): string {
  return goJson({ cluster_validation_error_message: message, route });
}

function goJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * A header value as Go sees it: Node reads header bytes as Latin-1, Go keeps
 * the bytes, which clients write as UTF-8.
 */
function headerText(value: string): string {
  return /[\u0080-\uffff]/.test(value) ? Buffer.from(value, 'latin1').toString('utf8') : value;
}

const LOG_MESSAGES = {
  wrong: 'request with wrong cluster validation label',
  missing: 'request with no cluster validation label',
  several: 'detected error during cluster validation label extraction',
} as const;

const invalidRequestCounters = new WeakMap<Registry, Counter>();

/** rollout_operator_server_invalid_cluster_validation_label_requests_total: registered with either server, as rollout-operator always registers it. */
export function invalidClusterRequestsMetric(registry: Registry): Counter {
  let counter = invalidRequestCounters.get(registry);
  if (!counter) {
    counter = new Counter({
      name: 'rollout_operator_server_invalid_cluster_validation_label_requests_total',
      help: "Requests to Stateward's servers whose X-Cluster header was missing, repeated or not one of the cluster labels (counted in soft and hard mode alike).",
      labelNames: ['protocol', 'method', 'cluster_validation_label', 'request_cluster_validation_label'],
      registers: [registry],
    });
    invalidRequestCounters.set(registry, counter);
  }
  return counter;
}

/** The check as a server runs it: the metric, the warning, and in hard mode the 511's body. */
export class ClusterValidator {
  private readonly policy: ClusterPolicy;
  private readonly invalid: Counter;
  private readonly log: Logger;
  /** Request labels the metric has a series for; shared by both servers through the registry. */
  private readonly seenLabels: Set<string>;

  constructor(config: ClusterValidationConfig, options: { registry: Registry; log: Logger }) {
    const compiled = compileClusterPolicy(config);
    if ('error' in compiled) throw new Error(compiled.error);
    this.policy = compiled.policy;
    this.invalid = invalidClusterRequestsMetric(options.registry);
    this.log = options.log;
    let seen = seenLabelSets.get(options.registry);
    if (!seen) seenLabelSets.set(options.registry, (seen = new Set()));
    this.seenLabels = seen;
  }

  /**
   * Checks a request whose target is `path`, routed to `route` (undefined
   * when no route serves it): the 511 body when the request is refused
   * (hard mode), else undefined and the request goes on.
   */
  screen(req: IncomingMessage, path: string, route: string | undefined): string | undefined {
    const userAgent = req.headers['user-agent'];
    const verdict = checkClusterLabel(this.policy, {
      path,
      statewardOnly: route !== undefined && !ROLLOUT_OPERATOR_PATHS.has(path),
      userAgent: userAgent === undefined ? '' : headerText(userAgent),
      values: (req.headersDistinct[CLUSTER_HEADER.toLowerCase()] ?? []).map(headerText),
    });
    if (verdict.valid) return undefined;
    const routeLabel = route ?? UNKNOWN_ROUTE;
    this.invalid.inc({
      protocol: 'http',
      method: routeLabel,
      cluster_validation_label: this.policy.labels[0]!,
      request_cluster_validation_label: this.boundedLabel(verdict.requestLabel),
    });
    this.log.warn(LOG_MESSAGES[verdict.problem], {
      path,
      method: req.method ?? '',
      cluster_validation_labels: `[${this.policy.labels.join(' ')}]`,
      soft_validation: this.policy.soft,
      tenant: req.headers['x-scope-orgid'] ?? '',
      user_agent: userAgent ?? '',
      host: req.headers.host ?? '',
      client_address: clientAddress(req),
      ...(verdict.problem === 'wrong' ? { request_cluster_validation_label: verdict.requestLabel } : {}),
      ...(verdict.cause !== undefined ? { err: verdict.cause } : {}),
    });
    return this.policy.soft ? undefined : rejectionBody(verdict.message, routeLabel);
  }

  private boundedLabel(label: string): string {
    if (this.seenLabels.has(label)) return label;
    if (this.seenLabels.size >= MAX_REQUEST_LABELS) return OTHER_REQUEST_LABEL;
    this.seenLabels.add(label);
    return label;
  }
}

const seenLabelSets = new WeakMap<Registry, Set<string>>();

/** Go's RemoteAddr: host:port, an IPv6 host in brackets. */
function clientAddress(req: IncomingMessage): string {
  const { remoteAddress, remotePort } = req.socket;
  if (remoteAddress === undefined) return '';
  return remoteAddress.includes(':')
    ? `[${remoteAddress}]:${remotePort ?? ''}`
    : `${remoteAddress}:${remotePort ?? ''}`;
}
