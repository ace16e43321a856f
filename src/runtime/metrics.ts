// One private Prometheus registry per operator process (never prom-client's
// global one), with process and Node.js runtime metrics: what Go's
// client_golang gives rollout-operator as process_* and go_*, in Node's terms.
import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * How often the event-loop delay histogram (nodejs_eventloop_lag_{min,max,
 * mean,stddev,p50,p90,p99}_seconds) samples. prom-client's default, 10 ms,
 * wakes an idle operator 100 times a second: 436 ms of CPU per idle minute.
 * At 1 s it was still ~3 ms a minute, as much as rollout-operator uses at
 * idle in all (docs/performance.md). Every 10 s, a stall of 10 s or more
 * always shows and a shorter one is sampled (a 1 s stall one time in ten);
 * nodejs_eventloop_lag_seconds is measured afresh at each scrape.
 */
export const EVENT_LOOP_SAMPLE_MS = 10_000;

export function createRegistry(options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true)
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  return registry;
}

/**
 * A metric made once per registry: `perRegistry(make)(registry)` returns the
 * same metric each time for one registry (registering it twice would throw),
 * and a new one for another, so that two operators in one process share
 * nothing.
 */
export function perRegistry<M>(make: (registry: Registry) => M): (registry: Registry) => M {
  const made = new WeakMap<Registry, M>();
  return (registry) => {
    let metric = made.get(registry);
    if (metric === undefined) {
      metric = make(registry);
      made.set(registry, metric);
    }
    return metric;
  };
}
