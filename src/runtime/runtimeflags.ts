// The runtime's flags: rollout-operator's names and defaults where it has the
// flag, so its command lines work unchanged; new flags where it has none.
import { hostname } from 'node:os';
import type { FlagCodec, FlagSet } from './flags/flagset.ts';
import {
  type ClusterValidationConfig,
  clusterLabels,
  clusterValidationProblem,
  DEFAULT_EXCLUDED_PATHS,
  splitCsv,
} from './http/clustervalidation.ts';
import type { ServerLimits } from './http/guard.ts';
import { namespaceSelectorText } from './informer/namespacescope.ts';
import type { LogFormat, LogLevel } from './log/logger.ts';

export interface RuntimeConfig {
  logFormat: LogFormat;
  logLevel: LogLevel;
  serverPort: number;
  /** The plain HTTP server's timeouts and connection cap (-server.*). */
  httpLimits: ServerLimits;
  /** -server.pprof.enabled: Go's /debug/pprof profiles on the plain HTTP server (pprof/pprofroutes.ts). */
  pprofEnabled: boolean;
  /** -server.cluster-validation.http.*, for both servers; labels from the namespaces (docs/runtime.md). */
  clusterValidation: ClusterValidationConfig;
  kubeApiUrl: string;
  kubeConfigFile: string;
  /** -kubernetes.context: the kubeconfig context to use ("" for the current one). */
  kubeContext: string;
  clientTimeoutMs: number;
  clientQps: number;
  clientBurst: number;
  /** The operator's own namespace: its Lease, Secrets and, by default, what it watches. */
  namespace: string;
  /** Namespaces whose objects are cached and acted on; ['*'] means the whole cluster. */
  watchNamespaces: readonly string[];
  /** Only namespaces whose labels match this selector are acted in ('' for every one); legacy `k:v` forms converted. */
  namespaceSelector: string;
  /** Namespaces never acted in. */
  namespacesToIgnore: readonly string[];
  leaderElection: {
    enabled: boolean;
    leaseName: string;
    leaseNamespace: string;
    identity: string;
    leaseDurationMs: number;
    renewDeadlineMs: number;
    retryPeriodMs: number;
  };
  shutdownGraceMs: number;
}

function registerLogFlags(fs: FlagSet) {
  return {
    format: fs.enumString(
      'log.format',
      'logfmt',
      ['logfmt', 'json'],
      'Output log messages in the given format. Valid formats: [logfmt, json]',
    ),
    level: fs.enumString(
      'log.level',
      'info',
      ['debug', 'info', 'warn', 'error'],
      'Only log messages with the given severity or above. Valid levels: [debug, info, warn, error]',
    ),
  };
}

/** The plain HTTP server's port, timeouts and connection cap. */
function registerServerFlags(fs: FlagSet) {
  return {
    port: fs.int('server.port', 8001, 'Port for the HTTP server: /ready, /healthz, /metrics.'),
    requestTimeout: fs.duration(
      'server.request-timeout',
      10_000,
      "Time a client of the HTTP server has to send a request's headers and body; a connection that sends nothing is closed after it too.",
    ),
    idleTimeout: fs.duration(
      'server.idle-timeout',
      180_000,
      'Keep-alive connections of the HTTP server idle this long are closed.',
    ),
    maxConnections: fs.int(
      'server.max-connections',
      512,
      'Most connections the HTTP server keeps open; at the cap a new one is let in and the longest-idle one closed (counted in stateward_http_connections_closed_total).',
    ),
    maxConnectionsPerPeer: fs.int(
      'server.max-connections-per-peer',
      0,
      "Most connections one client address holds on the HTTP server; beyond it, that address's longest-idle one is closed. 0: half of -server.max-connections.",
    ),
    writeTimeout: fs.duration(
      'server.write-timeout',
      10_000,
      'A response of the HTTP server its client has not read this long after it was written closes the connection.',
    ),
    pprof: fs.bool(
      'server.pprof.enabled',
      false,
      'Serve CPU and heap profiles in the pprof format under /debug/pprof/ on the HTTP server, as rollout-operator does (go tool pprof reads them). Heap sampling runs while enabled.',
    ),
  };
}

function registerClusterValidationFlags(fs: FlagSet) {
  return {
    enabled: fs.bool(
      'server.cluster-validation.http.enabled',
      false,
      "Check the X-Cluster header of requests to both servers against the cluster label: -kubernetes.namespace (and the namespaces of -kubernetes.watch-namespaces), as dskit's HTTP cluster validation in rollout-operator.",
    ),
    soft: fs.bool(
      'server.cluster-validation.http.soft-validation',
      false,
      'Only log and count requests with a missing or wrong X-Cluster header instead of answering them 511. Needs -server.cluster-validation.http.enabled.',
    ),
    excludedPaths: fs.string(
      'server.cluster-validation.http.excluded-paths',
      '',
      'Comma-separated URL paths left out of cluster validation, besides metrics, debug/pprof and ready (empty: admission/no-downscale,admission/prepare-downscale).',
    ),
    excludedUserAgents: fs.string(
      'server.cluster-validation.http.excluded-user-agents',
      '',
      'Comma-separated regular expressions (Go syntax); requests whose User-Agent matches one are left out of cluster validation.',
    ),
  };
}

/** The Kubernetes client, and the namespaces the operator runs in and manages. */
function registerKubernetesFlags(fs: FlagSet) {
  return {
    apiUrl: fs.string(
      'kubernetes.api-url',
      '',
      'The Kubernetes server API URL. If not specified, it will be auto-detected when running within a Kubernetes cluster.',
    ),
    context: fs.string(
      'kubernetes.context',
      '',
      "The kubeconfig context to use (default: the kubeconfig's current-context).",
    ),
    configFile: fs.string(
      'kubernetes.config-file',
      '',
      'The Kubernetes config file path. If not specified, it will be auto-detected when running within a Kubernetes cluster.',
    ),
    clientTimeout: fs.duration(
      'kubernetes.client-timeout',
      5 * 60_000,
      'Timeout of each request to the Kubernetes API (watches excepted).',
    ),
    qps: fs.float(
      'kubernetes.client-qps',
      5,
      'Queries per second to the Kubernetes API, per API group. 0 disables client-side rate limiting.',
    ),
    burst: fs.int(
      'kubernetes.client-burst',
      10,
      'Burst of queries to the Kubernetes API, per API group. Must be at least 1 when -kubernetes.client-qps is above 0.',
    ),
    namespace: fs.string(
      'kubernetes.namespace',
      '',
      'The Kubernetes namespace the operator runs in and, unless -kubernetes.watch-namespaces says otherwise, the one it manages.',
      { env: 'POD_NAMESPACE' },
    ),
    watchNamespaces: fs.stringList(
      'kubernetes.watch-namespaces',
      [],
      'Comma-separated namespaces to manage instead of -kubernetes.namespace alone; "*" manages the whole cluster (needs ClusterRole permissions).',
    ),
  };
}

/** pflag's StringSlice as Reloader's flags have it: each occurrence's comma-separated values appended. */
const appendingList: FlagCodec<readonly string[]> = {
  parse: (text, current) => [
    ...current,
    ...text
      .split(',')
      .map((v) => v.trim())
      .filter((v) => v !== ''),
  ],
  format: (value) => value.join(','),
  typeName: 'strings',
};

/**
 * Which namespaces of those watched an install acts in, so several installs
 * can split one cluster (docs/multiple-installs.md); Reloader's spellings
 * too, as its chart passes them.
 */
function registerNamespaceScopeFlags(fs: FlagSet) {
  return {
    selector: fs.string(
      'kubernetes.namespace-selector',
      '',
      "Act only on objects in namespaces whose labels match this label selector (e.g. team=a,env in (prod)); Reloader's legacy forms key:value and key:* are read as key=value and key. Watches namespaces (a ClusterRole). Empty: every watched namespace.",
    ),
    reloaderSelector: fs.value(
      'namespace-selector',
      [] as readonly string[],
      "Reloader's --namespace-selector: the same as -kubernetes.namespace-selector (its legacy key:value and key:* forms converted).",
      appendingList,
    ),
    ignore: fs.stringList(
      'kubernetes.namespaces-to-ignore',
      [],
      'Comma-separated namespaces never acted in, whatever else selects them.',
    ),
    reloaderIgnore: fs.value(
      'namespaces-to-ignore',
      [] as readonly string[],
      "Reloader's --namespaces-to-ignore: the same as -kubernetes.namespaces-to-ignore.",
      appendingList,
    ),
    reloaderNamespaces: fs.value(
      'namespaces',
      [] as readonly string[],
      "Reloader's --namespaces: the same as -kubernetes.watch-namespaces with a list (a Role per namespace, no ClusterRole).",
      appendingList,
    ),
  };
}

type NamespaceScopeFlags = ReturnType<typeof registerNamespaceScopeFlags>;

/** The namespaces to watch: -kubernetes.watch-namespaces, else Reloader's --namespaces, else the operator's own. */
function readWatchNamespaces(kube: KubernetesFlags, scope: NamespaceScopeFlags): readonly string[] {
  if (kube.watchNamespaces.value.length > 0) return kube.watchNamespaces.value;
  if (scope.reloaderNamespaces.value.length > 0) return scope.reloaderNamespaces.value;
  return [kube.namespace.value];
}

function readNamespaceSelector(scope: NamespaceScopeFlags): string {
  return namespaceSelectorText(scope.selector.value !== '' ? [scope.selector.value] : scope.reloaderSelector.value);
}

function namespaceScopeProblem(kube: KubernetesFlags, scope: NamespaceScopeFlags): string | undefined {
  if (scope.selector.value !== '' && scope.reloaderSelector.value.length > 0)
    return '-kubernetes.namespace-selector and --namespace-selector: give one of them';
  if (kube.watchNamespaces.value.length > 0 && scope.reloaderNamespaces.value.length > 0)
    return '-kubernetes.watch-namespaces and --namespaces: give one of them';
  if (scope.reloaderNamespaces.value.includes('*'))
    return '--namespaces lists namespaces; for the whole cluster give none (or -kubernetes.watch-namespaces=*)';
  return undefined;
}

function registerLeaderElectionFlags(fs: FlagSet) {
  return {
    enabled: fs.bool(
      'leader-election.enabled',
      false,
      'Run several replicas with one active leader elected through a coordination.k8s.io Lease. Standbys keep warm caches and serve webhooks.',
    ),
    leaseName: fs.string('leader-election.lease-name', 'stateward-leader', 'Name of the leader-election Lease.'),
    leaseNamespace: fs.string(
      'leader-election.lease-namespace',
      '',
      'Namespace of the leader-election Lease (default: -kubernetes.namespace).',
    ),
    identity: fs.string(
      'leader-election.identity',
      '',
      "This replica's identity in the Lease (default: the pod name, from POD_NAME or the hostname).",
      { env: 'POD_NAME' },
    ),
    leaseDuration: fs.duration(
      'leader-election.lease-duration',
      15_000,
      "How long standbys wait after the leader's last renewal before taking over.",
    ),
    renewDeadline: fs.duration(
      'leader-election.renew-deadline',
      10_000,
      'How long the leader keeps retrying a renewal before it stops acting.',
    ),
    retryPeriod: fs.duration(
      'leader-election.retry-period',
      2_000,
      'Interval between attempts to acquire or renew the Lease.',
    ),
  };
}

type ClusterValidationFlags = ReturnType<typeof registerClusterValidationFlags>;
type KubernetesFlags = ReturnType<typeof registerKubernetesFlags>;
type LeaderElectionFlags = ReturnType<typeof registerLeaderElectionFlags>;

function readClusterValidation(
  cv: ClusterValidationFlags,
  kube: KubernetesFlags,
  watchNamespaces: readonly string[],
): ClusterValidationConfig {
  const paths = splitCsv(cv.excludedPaths.value);
  return {
    enabled: cv.enabled.value,
    softValidation: cv.soft.value,
    labels: clusterLabels(kube.namespace.value, watchNamespaces),
    // rollout-operator's default replaces an empty list only.
    excludedPaths: paths.length > 0 ? paths : DEFAULT_EXCLUDED_PATHS,
    excludedUserAgents: splitCsv(cv.excludedUserAgents.value),
  };
}

function readLeaderElection(le: LeaderElectionFlags, namespace: string): RuntimeConfig['leaderElection'] {
  return {
    enabled: le.enabled.value,
    leaseName: le.leaseName.value,
    leaseNamespace: le.leaseNamespace.value || namespace,
    identity: le.identity.value || hostname(),
    leaseDurationMs: le.leaseDuration.value,
    renewDeadlineMs: le.renewDeadline.value,
    retryPeriodMs: le.retryPeriod.value,
  };
}

/** Defines the runtime flags on fs; call read() after fs.parse(). */
export function registerRuntimeFlags(fs: FlagSet): { read: () => RuntimeConfig; validate: () => string | undefined } {
  const log = registerLogFlags(fs);
  const server = registerServerFlags(fs);
  const cv = registerClusterValidationFlags(fs);
  const kube = registerKubernetesFlags(fs);
  const scope = registerNamespaceScopeFlags(fs);
  const le = registerLeaderElectionFlags(fs);
  const grace = fs.duration(
    'server.shutdown-grace-period',
    10_000,
    'On SIGTERM, how long in-flight requests may take to finish.',
  );

  const read = (): RuntimeConfig => ({
    logFormat: log.format.value,
    logLevel: log.level.value,
    serverPort: server.port.value,
    httpLimits: {
      requestTimeoutMs: server.requestTimeout.value,
      idleTimeoutMs: server.idleTimeout.value,
      maxConnections: server.maxConnections.value,
      maxConnectionsPerPeer: server.maxConnectionsPerPeer.value,
      writeTimeoutMs: server.writeTimeout.value,
    },
    pprofEnabled: server.pprof.value,
    clusterValidation: readClusterValidation(cv, kube, readWatchNamespaces(kube, scope)),
    kubeApiUrl: kube.apiUrl.value,
    kubeConfigFile: kube.configFile.value,
    kubeContext: kube.context.value,
    clientTimeoutMs: kube.clientTimeout.value,
    clientQps: kube.qps.value,
    clientBurst: kube.burst.value,
    namespace: kube.namespace.value,
    watchNamespaces: readWatchNamespaces(kube, scope),
    namespaceSelector: readNamespaceSelector(scope),
    namespacesToIgnore: [...new Set([...scope.ignore.value, ...scope.reloaderIgnore.value])],
    leaderElection: readLeaderElection(le, kube.namespace.value),
    shutdownGraceMs: grace.value,
  });

  const validate = (): string | undefined => {
    const { namespace, qps, burst, clientTimeout, watchNamespaces: watch } = kube;
    if (!namespace.value) return 'the -kubernetes.namespace flag is required';
    if (server.port.value < 0 || server.port.value > 65535)
      return `-server.port=${server.port.value}: not a port number`;
    if (server.requestTimeout.value <= 0) return '-server.request-timeout must be positive';
    if (server.idleTimeout.value <= 0) return '-server.idle-timeout must be positive';
    if (server.maxConnections.value < 1) return '-server.max-connections must be at least 1';
    if (server.maxConnectionsPerPeer.value < 0) return '-server.max-connections-per-peer must not be negative';
    if (server.writeTimeout.value <= 0) return '-server.write-timeout must be positive';
    if (qps.value < 0) return '-kubernetes.client-qps must not be negative';
    if (qps.value > 0 && burst.value < 1)
      return '-kubernetes.client-burst must be at least 1 when -kubernetes.client-qps is above 0';
    if (clientTimeout.value <= 0) return '-kubernetes.client-timeout must be positive';
    if (watch.value.includes('*') && watch.value.length > 1)
      return '-kubernetes.watch-namespaces: "*" (the whole cluster) cannot be combined with other namespaces';
    const scopeProblem = namespaceScopeProblem(kube, scope);
    if (scopeProblem !== undefined) return scopeProblem;
    return clusterValidationProblem(readClusterValidation(cv, kube, readWatchNamespaces(kube, scope)));
  };
  return { read, validate };
}
