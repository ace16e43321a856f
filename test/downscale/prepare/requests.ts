// StatefulSets and admission requests for driving the prepare-downscale
// handler in this process against the real apiserver (the lock and clock
// tests), without an apiserver-to-webhook round trip.
import type { StatefulSet } from '../../../src/runtime/kube/types.ts';
import type { AdmissionRequestV1 } from '../../../src/runtime/admission/admission.ts';
import type { Clock } from '../../../src/runtime/clock.ts';
import type { KubeClient } from '../../../src/runtime/kube/client.ts';
import { nopLogger, type Logger } from '../../../src/runtime/log/logger.ts';
import { prepareDownscaleHandler } from '../../../src/downscale/prepare/handler.ts';

/**
 * The prepare-downscale webhook in this process, annotation mode, as replica
 * `identity`; `ask(set, from, to)` sends it the UPDATE of `set` from `from` to `to`.
 */
export function inProcessWebhook(
  kube: KubeClient,
  namespace: string,
  o: { clock: Clock; identity?: string; log?: Logger },
): (set: StatefulSet, from: number, to: number) => Promise<ReturnType<ReturnType<typeof prepareDownscaleHandler>>> {
  const handle = prepareDownscaleHandler({
    client: kube,
    clock: o.clock,
    log: o.log ?? nopLogger,
    mode: 'annotation',
    zoneTrackerConfigMap: 'unused',
    clusterDomain: 'cluster.local.',
    podTimeoutMs: 1000,
    identity: o.identity ?? 'test',
  });
  return (set, from, to) =>
    Promise.resolve(handle(downscaleRequest(namespace, set, from, to), AbortSignal.timeout(15_000)));
}

/** A zone of the group `ingester`, labelled for prepare-downscale; no pods (replicas 0 in the cluster), so no pod is called. */
export function zone(
  namespace: string,
  name: string,
  extra: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
): StatefulSet {
  return {
    metadata: {
      name,
      namespace,
      labels: { 'rollout-group': 'ingester', 'grafana.com/prepare-downscale': 'true', ...extra.labels },
      annotations: {
        'grafana.com/prepare-downscale-http-path': 'prepare-shutdown',
        'grafana.com/prepare-downscale-http-port': '8080',
        ...extra.annotations,
      },
    },
    spec: {
      replicas: 0,
      serviceName: name,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'c', image: 'example.invalid/c:1' }] },
      },
    },
  };
}

/** The UPDATE of `set` from `from` to `to` replicas, as the apiserver sends it. */
export function downscaleRequest(namespace: string, set: StatefulSet, from: number, to: number): AdmissionRequestV1 {
  const at = (replicas: number) => ({
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    ...set,
    spec: { ...set.spec, replicas },
  });
  return {
    uid: `uid-${from}-${to}`,
    resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
    name: set.metadata!.name!,
    namespace,
    operation: 'UPDATE',
    oldObject: at(from),
    object: at(to),
    dryRun: false,
  };
}
