// Webhook configuration entries that make the test apiserver call an
// operator's HTTPS server on loopback. Labelled for CA injection, so the
// caBundle is the one the operator itself injects.
import { X509Certificate } from 'node:crypto';
import { connect as connectTls } from 'node:tls';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources } from '../../src/runtime/kube/types.ts';
import type { WebhookConfiguration } from '../../src/webhooks/cainjection.ts';
import { waitFor } from '../cluster/probe.ts';

export const CA_INJECTION_LABELS = (namespace: string) => ({
  'grafana.com/inject-rollout-operator-ca': 'true',
  'grafana.com/namespace': namespace,
});

/** One webhook entry for UPDATEs of StatefulSets (and their /scale) in `namespace`. */
export function loopbackWebhook(o: {
  name: string;
  namespace: string;
  port: number;
  path: string;
  sideEffects: 'None' | 'NoneOnDryRun';
  objectSelector?: object;
  rules?: object[];
}): { name: string; clientConfig: { url: string } } & Record<string, unknown> {
  return {
    name: o.name,
    ...(o.objectSelector ? { objectSelector: o.objectSelector } : {}),
    admissionReviewVersions: ['v1'],
    clientConfig: { url: `https://localhost:${o.port}${o.path}` },
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': o.namespace } },
    rules: o.rules ?? [
      {
        apiGroups: ['apps'],
        apiVersions: ['v1'],
        operations: ['UPDATE'],
        resources: ['statefulsets', 'statefulsets/scale'],
        scope: 'Namespaced',
      },
    ],
    sideEffects: o.sideEffects,
    timeoutSeconds: 10,
  };
}

/** The pod-eviction webhook entry, as rollout-operator's manifests register it, calling the operator on loopback. */
export function evictionWebhook(namespace: string, port: number): ReturnType<typeof loopbackWebhook> {
  return loopbackWebhook({
    name: `pod-eviction-${namespace}.grafana.com`,
    namespace,
    port,
    path: '/admission/pod-eviction',
    sideEffects: 'NoneOnDryRun',
    rules: [
      {
        apiGroups: [''],
        apiVersions: ['v1'],
        operations: ['CREATE'],
        resources: ['pods/eviction'],
        scope: 'Namespaced',
      },
    ],
  });
}

/**
 * Creates a mutating (or validating) webhook configuration calling the operator on loopback
 * (labelled for CA injection), deletes it when the test ends, and waits until
 * the operator injected its CA, so admission works from then on.
 */
export async function installLoopbackWebhook(
  t: { after: (fn: () => Promise<unknown>) => void },
  kube: KubeClient,
  o: { name: string; namespace: string; webhooks: ReturnType<typeof loopbackWebhook>[]; validating?: boolean },
): Promise<void> {
  const type = o.validating ? resources.validatingWebhookConfigurations : resources.mutatingWebhookConfigurations;
  await kube.create<WebhookConfiguration>(type, {
    metadata: { name: o.name, labels: CA_INJECTION_LABELS(o.namespace) },
    webhooks: o.webhooks,
  });
  t.after(() => kube.delete(type, { name: o.name }).catch(() => undefined));
  await waitFor(
    'the CA injected',
    async () => {
      const config = await kube.get<WebhookConfiguration>(type, { name: o.name });
      return config.webhooks?.every((w) => w.clientConfig?.caBundle);
    },
    { timeoutMs: 20_000 },
  );
}

/** The SHA-256 fingerprint of the certificate a TLS server (a webhook server) presents. */
export async function servedFingerprint(host: string, port: number): Promise<string> {
  const raw = await new Promise<Buffer>((resolve, reject) => {
    const socket = connectTls({ host, port, servername: 'localhost', rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate().raw);
      socket.destroy();
    });
    socket.once('error', reject);
    socket.setTimeout(5000, () => socket.destroy(new Error('TLS handshake timed out')));
  });
  return new X509Certificate(raw).fingerprint256;
}

/** The SHA-256 fingerprint of a certificate stored base64 PEM in a Secret's data. */
export const storedFingerprint = (base64: string) => new X509Certificate(Buffer.from(base64, 'base64')).fingerprint256;
