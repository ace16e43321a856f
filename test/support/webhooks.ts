// Webhook configuration entries that make the test apiserver call an
// operator's HTTPS server on loopback. Labelled for CA injection, so the
// caBundle is the one the operator itself injects.

export const CA_INJECTION_LABELS = (namespace: string) => ({ 'grafana.com/inject-rollout-operator-ca': 'true', 'grafana.com/namespace': namespace });

/** One webhook entry for UPDATEs of StatefulSets (and their /scale) in `namespace`. */
export function loopbackWebhook(o: { name: string; namespace: string; port: number; path: string; sideEffects: 'None' | 'NoneOnDryRun'; objectSelector?: object }): { name: string; clientConfig: { url: string } } & Record<string, unknown> {
  return {
    name: o.name,
    ...(o.objectSelector ? { objectSelector: o.objectSelector } : {}),
    admissionReviewVersions: ['v1'],
    clientConfig: { url: `https://localhost:${o.port}${o.path}` },
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': o.namespace } },
    rules: [{ apiGroups: ['apps'], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['statefulsets', 'statefulsets/scale'], scope: 'Namespaced' }],
    sideEffects: o.sideEffects,
    timeoutSeconds: 10,
  };
}
