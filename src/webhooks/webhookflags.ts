// rollout-operator's -server-tls.* and -webhooks.* flags, same names and
// defaults, plus -webhooks.ca-bundle-configurations (its issue #38).
import type { FlagSet } from '../runtime/flags/flagset.ts';
import { MAX_ADMISSION_BODY_BYTES } from '../runtime/admission/admission.ts';
import type { PodCallConfig } from '../workloads/podclient.ts';

export interface WebhookConfig extends PodCallConfig {
  tlsEnabled: boolean;
  port: number;
  requestTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnections: number;
  /** 0: half of maxConnections. */
  maxConnectionsPerPeer: number;
  bodyStallTimeoutMs: number;
  /** Bytes of request bodies held at once across every connection (read, parsed or being decided). */
  maxInflightBodyBytes: number;
  certFile: string;
  keyFile: string;
  selfSigned: boolean;
  secretName: string;
  dnsName: string;
  org: string;
  expirationMs: number;
  updateCaBundle: boolean;
  caBundleConfigurations: readonly string[];
  useZoneTracker: boolean;
  zoneTrackerConfigMap: string;
}

/** The HTTPS server's switch, port, timeouts, limits and certificate files. */
function registerServerTlsFlags(fs: FlagSet) {
  return {
    enabled: fs.bool('server-tls.enabled', false, 'Enable the HTTPS server for the admission webhooks.'),
    port: fs.int('server-tls.port', 8443, 'Port for the HTTPS server.'),
    timeout: fs.duration(
      'server-tls.request-timeout',
      10_000,
      'Read and write timeout of the HTTPS server; webhook handlers get 90% of it.',
    ),
    idle: fs.duration(
      'server-tls.idle-timeout',
      90_000,
      "Keep-alive connections of the HTTPS server idle this long are closed; longer than the API server's 90 s idle timeout for webhook clients, so it closes first.",
    ),
    maxConnections: fs.int(
      'server-tls.max-connections',
      1024,
      'Most connections the HTTPS server keeps open; at the cap a new one is let in and the longest-idle one closed (counted in stateward_http_connections_closed_total).',
    ),
    maxConnectionsPerPeer: fs.int(
      'server-tls.max-connections-per-peer',
      0,
      "Most connections one client address holds on the HTTPS server; beyond it, that address's longest-idle one is closed. 0: half of -server-tls.max-connections.",
    ),
    bodyStall: fs.duration(
      'server-tls.body-stall-timeout',
      2000,
      'An AdmissionReview body with no byte for this long ends its request (408) and frees what it held.',
    ),
    maxInflight: fs.int(
      'server-tls.max-inflight-body-bytes',
      12 * 1024 * 1024,
      'Bytes of AdmissionReview bodies held at once across all connections: 7 MiB for bodies over 1 MiB (one of the largest at a time), the rest for smaller ones; a request that would exceed its share gets 503 at once instead of being buffered.',
    ),
    certFile: fs.string(
      'server-tls.cert-file',
      '',
      'Certificate file for the HTTPS server, used when -server-tls.self-signed-cert.enabled=false; reloaded when it changes.',
    ),
    keyFile: fs.string(
      'server-tls.key-file',
      '',
      'Private key file for the HTTPS server, used when -server-tls.self-signed-cert.enabled=false; reloaded when it changes.',
    ),
  };
}

function registerSelfSignedCertFlags(fs: FlagSet) {
  return {
    enabled: fs.bool(
      'server-tls.self-signed-cert.enabled',
      true,
      'Generate a self-signed certificate, stored in a Secret, renewed before it expires.',
    ),
    secretName: fs.string(
      'server-tls.self-signed-cert.secret-name',
      'rollout-operator-self-signed-certificate',
      'Secret holding the self-signed certificate (data keys ca, cert, key).',
    ),
    dnsName: fs.string(
      'server-tls.self-signed-cert.dns-name',
      '',
      'DNS name of the webhook Service for the certificate (default rollout-operator.<namespace>.svc); its shorter and longer forms are added too.',
    ),
    org: fs.string('server-tls.self-signed-cert.org', 'Grafana Labs', 'Organization of the self-signed certificate.'),
    expiration: fs.promDuration(
      'server-tls.self-signed-cert.expiration',
      365 * 86_400_000,
      'Validity of the self-signed certificate (Prometheus duration, e.g. 1y).',
    ),
  };
}

/** Injection of the self-signed CA into webhook configurations. */
function registerCaBundleFlags(fs: FlagSet) {
  return {
    update: fs.bool(
      'webhooks.update-ca-bundle',
      true,
      'Inject the self-signed CA into webhook configurations labelled grafana.com/inject-rollout-operator-ca=true and grafana.com/namespace=<namespace>.',
    ),
    configurations: fs.stringList(
      'webhooks.ca-bundle-configurations',
      [],
      'Comma-separated names of the webhook configurations to inject the CA into; empty means every labelled one. Lets a ClusterRole be restricted with resourceNames.',
    ),
  };
}

function registerZoneTrackerFlags(fs: FlagSet) {
  return {
    enabled: fs.bool(
      'use-zone-tracker',
      false,
      'Record prepared downscales in a ConfigMap (the zone tracker) instead of the grafana.com/last-downscale annotation.',
    ),
    configMap: fs.string(
      'zone-tracker.config-map-name',
      'rollout-operator-zone-tracker',
      'Name of the zone tracker ConfigMap.',
    ),
  };
}

type ServerTlsFlags = ReturnType<typeof registerServerTlsFlags>;
type SelfSignedCertFlags = ReturnType<typeof registerSelfSignedCertFlags>;
type CaBundleFlags = ReturnType<typeof registerCaBundleFlags>;

/** What is wrong with the HTTPS server's flags, given that it is enabled. */
function serverTlsProblem(tls: ServerTlsFlags, cert: SelfSignedCertFlags, ca: CaBundleFlags): string | undefined {
  if (tls.timeout.value <= 0) return '-server-tls.request-timeout must be greater than 0';
  if (tls.idle.value <= 0) return '-server-tls.idle-timeout must be greater than 0';
  if (tls.maxConnections.value < 1) return '-server-tls.max-connections must be at least 1';
  if (tls.maxConnectionsPerPeer.value < 0) return '-server-tls.max-connections-per-peer must not be negative';
  if (tls.bodyStall.value <= 0) return '-server-tls.body-stall-timeout must be positive';
  if (tls.maxInflight.value < MAX_ADMISSION_BODY_BYTES)
    return `-server-tls.max-inflight-body-bytes must be at least ${MAX_ADMISSION_BODY_BYTES}, the largest AdmissionReview accepted`;
  if (tls.port.value < 0 || tls.port.value > 65535) return `-server-tls.port=${tls.port.value}: not a port number`;
  if (!cert.enabled.value && ca.update.value)
    return '-webhooks.update-ca-bundle must be false when -server-tls.self-signed-cert.enabled=false (there is no CA to inject)';
  if (!cert.enabled.value && (!tls.certFile.value || !tls.keyFile.value))
    return '-server-tls.cert-file and -server-tls.key-file are required when -server-tls.self-signed-cert.enabled=false';
  if (cert.enabled.value && cert.expiration.value <= 0)
    return '-server-tls.self-signed-cert.expiration must be positive';
  return undefined;
}

export function registerWebhookFlags(
  fs: FlagSet,
  podCalls: () => PodCallConfig,
): { read: () => WebhookConfig; validate: () => string | undefined } {
  const tls = registerServerTlsFlags(fs);
  const cert = registerSelfSignedCertFlags(fs);
  const ca = registerCaBundleFlags(fs);
  const tracker = registerZoneTrackerFlags(fs);
  return {
    read: () => ({
      tlsEnabled: tls.enabled.value,
      port: tls.port.value,
      requestTimeoutMs: tls.timeout.value,
      idleTimeoutMs: tls.idle.value,
      maxConnections: tls.maxConnections.value,
      maxConnectionsPerPeer: tls.maxConnectionsPerPeer.value,
      bodyStallTimeoutMs: tls.bodyStall.value,
      maxInflightBodyBytes: tls.maxInflight.value,
      certFile: tls.certFile.value,
      keyFile: tls.keyFile.value,
      selfSigned: cert.enabled.value,
      secretName: cert.secretName.value,
      dnsName: cert.dnsName.value,
      org: cert.org.value,
      expirationMs: cert.expiration.value,
      updateCaBundle: ca.update.value,
      caBundleConfigurations: ca.configurations.value,
      useZoneTracker: tracker.enabled.value,
      zoneTrackerConfigMap: tracker.configMap.value,
      ...podCalls(),
    }),
    validate: () => {
      if (tracker.enabled.value && !tracker.configMap.value)
        return '-zone-tracker.config-map-name must not be empty when -use-zone-tracker is set';
      if (!tls.enabled.value) return undefined;
      return serverTlsProblem(tls, cert, ca);
    },
  };
}
