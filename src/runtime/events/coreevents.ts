// Events written as core/v1 Events, for an install whose RBAC grants "" events
// create/patch but nothing on events.k8s.io (Reloader's chart, image
// swapped). The recorder plans events.k8s.io/v1 Events as always; this sink
// translates each write to the legacy form client-go's old recorder writes
// (firstTimestamp, lastTimestamp, count, source), which every tool that reads
// Events (kubectl describe, event exporters, Reloader users' alerts) shows.
import type { KubeClient } from '../kube/client.ts';
import type { EventSink, EventSeriesJson, EventsV1EventJson, ObjectRef } from './event.ts';

/** core/v1 events: the group Reloader's ClusterRole grants create and patch in. */
export const CORE_EVENTS = { group: '', version: 'v1', resource: 'events', kind: 'Event', namespaced: true } as const;

export interface CoreEventJson {
  apiVersion: 'v1';
  kind: 'Event';
  metadata: { name: string; namespace: string };
  involvedObject: ObjectRef;
  related?: ObjectRef;
  type: string;
  reason: string;
  message: string;
  action: string;
  source: { component: string };
  reportingComponent: string;
  reportingInstance: string;
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
}

/** A metav1.Time: RFC 3339 in whole seconds (a MicroTime's fraction dropped). */
function seconds(microTime: string): string {
  return microTime.replace(/\.\d+Z$/, 'Z');
}

/**
 * The core/v1 form of an events.k8s.io/v1 Event: without eventTime, so the
 * API server validates it as a legacy Event (no series; count and
 * lastTimestamp carry the repeats).
 */
export function toCoreEvent(event: EventsV1EventJson): CoreEventJson {
  const at = seconds(event.eventTime);
  const core: CoreEventJson = {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { ...event.metadata },
    involvedObject: { ...event.regarding },
    type: event.type,
    reason: event.reason,
    message: event.note,
    action: event.action,
    source: { component: event.reportingController },
    reportingComponent: event.reportingController,
    reportingInstance: event.reportingInstance,
    firstTimestamp: at,
    lastTimestamp: event.series ? seconds(event.series.lastObservedTime) : at,
    count: event.series?.count ?? 1,
  };
  if (event.related) core.related = { ...event.related };
  return core;
}

/** The recorder's series patch ({ series }) as the legacy fields it stands for. */
export function toCorePatch(mergePatch: object): object {
  const series = (mergePatch as { series?: EventSeriesJson }).series;
  if (!series) return mergePatch;
  return { count: series.count, lastTimestamp: seconds(series.lastObservedTime) };
}

export function coreEventSink(client: KubeClient): EventSink {
  return {
    create: (_namespace, event) => client.create(CORE_EVENTS, toCoreEvent(event)),
    patch: (namespace, name, mergePatch) =>
      client.patch(CORE_EVENTS, { namespace, name }, 'merge', toCorePatch(mergePatch)),
  };
}
