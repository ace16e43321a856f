// One private Prometheus registry per operator process (never prom-client's
// global one), with process and Node.js runtime metrics, which rollout-operator
// (rollout-operator) does not expose.
import { collectDefaultMetrics, Registry } from 'prom-client';

export function createRegistry(options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  return registry;
}
