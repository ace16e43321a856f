// The runtime's flags: rollout-operator's names and defaults where it has the
// flag, so its command lines work unchanged; new flags where it has none.
import { hostname } from 'node:os';
import type { FlagSet } from './flags/flagset.ts';
import {
  type ClusterValidationConfig,
  clusterLabels,
  clusterValidationProblem,
  DEFAULT_EXCLUDED_PATHS,
  splitCsv,
} from './http/clustervalidation.ts';
import type { ServerLimits } from './http/guard.ts';
import type { LogFormat, LogLevel } from './log/logger.ts';

export interface RuntimeConfig {
  logFormat: LogFormat;
  logLevel: LogLevel;
  serverPort: number;
  /** The plain HTTP server's timeouts and connection cap (-server.*). */
  httpLimits: ServerLimits;
  /** -server.cluster-validation.http.*, for both servers; labels from the namespaces (docs/runtime.md). */
  clusterValidation: ClusterValidationConfig;
  kubeApiUrl: string;
  kubeConfigFile: string;
  clientTimeoutMs: number;
  clientQps: number;
  clientBurst: number;
  /** The operator's own namespace: its Lease, Secrets and, by default, what it watches. */
  namespace: string;
  /** Namespaces whose objects are cached and acted on; ['*'] means the whole cluster. */
  watchNamespaces: readonly string[];
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

/** Defines the runtime flags on fs; call read() after fs.parse(). */
export function registerRuntimeFlags(fs: FlagSet): { read: () => RuntimeConfig; validate: () => string | undefined } {
  const logFormat = fs.enumString(
    'log.format',
    'logfmt',
    ['logfmt', 'json'],
    'Output log messages in the given format. Valid formats: [logfmt, json]',
  );
  const logLevel = fs.enumString(
    'log.level',
    'info',
    ['debug', 'info', 'warn', 'error'],
    'Only log messages with the given severity or above. Valid levels: [debug, info, warn, error]',
  );
  const serverPort = fs.int('server.port', 8001, 'Port for the HTTP server: /ready, /healthz, /metrics.');
  const serverTimeout = fs.duration(
    'server.request-timeout',
    10_000,
    "Time a client of the HTTP server has to send a request's headers and body; a connection that sends nothing is closed after it too.",
  );
  const serverIdle = fs.duration(
    'server.idle-timeout',
    180_000,
    'Keep-alive connections of the HTTP server idle this long are closed.',
  );
  const serverMaxConnections = fs.int(
    'server.max-connections',
    512,
    'Most connections the HTTP server keeps open; further ones are closed on arrival (counted in stateward_http_connections_refused_total).',
  );
  const cvEnabled = fs.bool(
    'server.cluster-validation.http.enabled',
    false,
    "Check the X-Cluster header of requests to both servers against the cluster label: -kubernetes.namespace (and the namespaces of -kubernetes.watch-namespaces), as dskit's HTTP cluster validation in rollout-operator.",
  );
  const cvSoft = fs.bool(
    'server.cluster-validation.http.soft-validation',
    false,
    'Only log and count requests with a missing or wrong X-Cluster header instead of answering them 511. Needs -server.cluster-validation.http.enabled.',
  );
  const cvPaths = fs.string(
    'server.cluster-validation.http.excluded-paths',
    '',
    'Comma-separated URL paths left out of cluster validation, besides metrics, debug/pprof and ready (empty: admission/no-downscale,admission/prepare-downscale).',
  );
  const cvAgents = fs.string(
    'server.cluster-validation.http.excluded-user-agents',
    '',
    'Comma-separated regular expressions (Go syntax); requests whose User-Agent matches one are left out of cluster validation.',
  );
  const apiUrl = fs.string(
    'kubernetes.api-url',
    '',
    'The Kubernetes server API URL. If not specified, it will be auto-detected when running within a Kubernetes cluster.',
  );
  const configFile = fs.string(
    'kubernetes.config-file',
    '',
    'The Kubernetes config file path. If not specified, it will be auto-detected when running within a Kubernetes cluster.',
  );
  const clientTimeout = fs.duration(
    'kubernetes.client-timeout',
    5 * 60_000,
    'Timeout of each request to the Kubernetes API (watches excepted).',
  );
  const qps = fs.float(
    'kubernetes.client-qps',
    5,
    'Queries per second to the Kubernetes API, per API group. 0 disables client-side rate limiting.',
  );
  const burst = fs.int(
    'kubernetes.client-burst',
    10,
    'Burst of queries to the Kubernetes API, per API group. Must be at least 1 when -kubernetes.client-qps is above 0.',
  );
  const namespace = fs.string(
    'kubernetes.namespace',
    '',
    'The Kubernetes namespace the operator runs in and, unless -kubernetes.watch-namespaces says otherwise, the one it manages.',
    { env: 'POD_NAMESPACE' },
  );
  const watch = fs.stringList(
    'kubernetes.watch-namespaces',
    [],
    'Comma-separated namespaces to manage instead of -kubernetes.namespace alone; "*" manages the whole cluster (needs ClusterRole permissions).',
  );
  const leEnabled = fs.bool(
    'leader-election.enabled',
    false,
    'Run several replicas with one active leader elected through a coordination.k8s.io Lease. Standbys keep warm caches and serve webhooks.',
  );
  const leName = fs.string('leader-election.lease-name', 'stateward-leader', 'Name of the leader-election Lease.');
  const leNamespace = fs.string(
    'leader-election.lease-namespace',
    '',
    'Namespace of the leader-election Lease (default: -kubernetes.namespace).',
  );
  const leIdentity = fs.string(
    'leader-election.identity',
    '',
    "This replica's identity in the Lease (default: the pod name, from POD_NAME or the hostname).",
    { env: 'POD_NAME' },
  );
  const leDuration = fs.duration(
    'leader-election.lease-duration',
    15_000,
    "How long standbys wait after the leader's last renewal before taking over.",
  );
  const leRenew = fs.duration(
    'leader-election.renew-deadline',
    10_000,
    'How long the leader keeps retrying a renewal before it stops acting.',
  );
  const leRetry = fs.duration(
    'leader-election.retry-period',
    2_000,
    'Interval between attempts to acquire or renew the Lease.',
  );
  const grace = fs.duration(
    'server.shutdown-grace-period',
    10_000,
    'On SIGTERM, how long in-flight requests may take to finish.',
  );

  const clusterValidation = (): ClusterValidationConfig => {
    const paths = splitCsv(cvPaths.value);
    return {
      enabled: cvEnabled.value,
      softValidation: cvSoft.value,
      labels: clusterLabels(namespace.value, watch.value),
      // rollout-operator's default replaces an empty list only.
      excludedPaths: paths.length > 0 ? paths : DEFAULT_EXCLUDED_PATHS,
      excludedUserAgents: splitCsv(cvAgents.value),
    };
  };

  const read = (): RuntimeConfig => ({
    logFormat: logFormat.value,
    logLevel: logLevel.value,
    serverPort: serverPort.value,
    httpLimits: {
      requestTimeoutMs: serverTimeout.value,
      idleTimeoutMs: serverIdle.value,
      maxConnections: serverMaxConnections.value,
    },
    clusterValidation: clusterValidation(),
    kubeApiUrl: apiUrl.value,
    kubeConfigFile: configFile.value,
    clientTimeoutMs: clientTimeout.value,
    clientQps: qps.value,
    clientBurst: burst.value,
    namespace: namespace.value,
    watchNamespaces: watch.value.length > 0 ? watch.value : [namespace.value],
    leaderElection: {
      enabled: leEnabled.value,
      leaseName: leName.value,
      leaseNamespace: leNamespace.value || namespace.value,
      identity: leIdentity.value || hostname(),
      leaseDurationMs: leDuration.value,
      renewDeadlineMs: leRenew.value,
      retryPeriodMs: leRetry.value,
    },
    shutdownGraceMs: grace.value,
  });

  const validate = (): string | undefined => {
    if (!namespace.value) return 'the -kubernetes.namespace flag is required';
    if (serverPort.value < 0 || serverPort.value > 65535) return `-server.port=${serverPort.value}: not a port number`;
    if (serverTimeout.value <= 0) return '-server.request-timeout must be positive';
    if (serverIdle.value <= 0) return '-server.idle-timeout must be positive';
    if (serverMaxConnections.value < 1) return '-server.max-connections must be at least 1';
    if (qps.value < 0) return '-kubernetes.client-qps must not be negative';
    if (qps.value > 0 && burst.value < 1)
      return '-kubernetes.client-burst must be at least 1 when -kubernetes.client-qps is above 0';
    if (clientTimeout.value <= 0) return '-kubernetes.client-timeout must be positive';
    if (watch.value.includes('*') && watch.value.length > 1)
      return '-kubernetes.watch-namespaces: "*" (the whole cluster) cannot be combined with other namespaces';
    if (Boolean(apiUrl.value) !== Boolean(configFile.value))
      return '-kubernetes.api-url and -kubernetes.config-file must be set together, or neither (then the in-cluster configuration is used)';
    return clusterValidationProblem(clusterValidation());
  };
  return { read, validate };
}
