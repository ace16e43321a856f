// The EventSink over the real API client: events.k8s.io/v1 create and merge patch.
import type { KubeClient } from '../kube/client.ts';
import { resources } from '../kube/types.ts';
import type { EventSink } from './event.ts';

export function kubeEventSink(client: KubeClient): EventSink {
  return {
    create: (namespace, event) =>
      client.create(resources.events, { ...event, metadata: { ...event.metadata, namespace } }),
    patch: (namespace, name, mergePatch) => client.patch(resources.events, { namespace, name }, 'merge', mergePatch),
  };
}
