import { Counter, type Registry } from 'prom-client';
import type { ResourceType } from '../kube/types.ts';
import { typeLabel } from '../kube/paths.ts';

export interface InformerMetrics {
  relist(type: ResourceType): void;
  watchRestart(type: ResourceType, reason: 'gone' | 'error' | 'idle'): void;
  event(type: ResourceType, eventType: string): void;
}

export function informerMetrics(registry: Registry): InformerMetrics {
  const relists = new Counter({
    name: 'stateward_informer_relists_total',
    help: 'Full lists an informer made (start, 410 Gone, errors).',
    labelNames: ['resource'],
    registers: [registry],
  });
  const restarts = new Counter({
    name: 'stateward_informer_watch_restarts_total',
    help: 'Watches restarted, by cause.',
    labelNames: ['resource', 'reason'],
    registers: [registry],
  });
  const events = new Counter({
    name: 'stateward_informer_events_total',
    help: 'Watch events applied to informer caches.',
    labelNames: ['resource', 'type'],
    registers: [registry],
  });
  return {
    relist: (type) => relists.inc({ resource: typeLabel(type) }),
    watchRestart: (type, reason) => restarts.inc({ resource: typeLabel(type), reason }),
    event: (type, eventType) => events.inc({ resource: typeLabel(type), type: eventType }),
  };
}
