// The shape of an events.k8s.io/v1 Event, the pure helpers that build one, and
// the sink that writes them through the API client.
import type { KubeClient } from '../kube/client.ts';
import { microTime } from '../kube/time.ts';
import { resources } from '../kube/types.ts';

/** The object an Event is about (or related to). */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  /** Empty or absent for cluster-scoped objects. */
  namespace?: string;
  name: string;
  uid?: string;
  resourceVersion?: string;
}

export type EventType = 'Normal' | 'Warning';

export interface EventSeriesJson {
  /** Occurrences so far, the first one included (the API requires at least 2). */
  count: number;
  lastObservedTime: string;
}

export interface EventsV1EventJson {
  apiVersion: 'events.k8s.io/v1';
  kind: 'Event';
  metadata: { name: string; namespace: string };
  eventTime: string;
  type: EventType;
  reason: string;
  action: string;
  note: string;
  regarding: ObjectRef;
  related?: ObjectRef;
  reportingController: string;
  reportingInstance: string;
  series?: EventSeriesJson;
}

/**
 * Where Events are written. Errors carry the HTTP status as a numeric `code`;
 * an error without one is taken as a transport failure and retried.
 */
export interface EventSink {
  create(namespace: string, event: EventsV1EventJson): Promise<unknown>;
  /** Applies a JSON merge patch to the named Event. */
  patch(namespace: string, name: string, mergePatch: object): Promise<unknown>;
}

export function kubeEventSink(client: KubeClient): EventSink {
  return {
    create: (namespace, event) => client.create(resources.events, event),
    patch: (namespace, name, mergePatch) => client.patch(resources.events, { namespace, name }, 'merge', mergePatch),
  };
}

// Limits the API server enforces on events.k8s.io/v1 Events (bytes, as Go's len).
export const NOTE_LIMIT_BYTES = 1024;
export const REPORTING_INSTANCE_LIMIT_BYTES = 128;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Cuts s to at most limit UTF-8 bytes without splitting a character; marks a cut with '...'. */
export function truncateUtf8(s: string, limit: number): string {
  const bytes = encoder.encode(s);
  if (bytes.length <= limit) return s;
  let end = Math.max(0, limit - 3);
  // Back off continuation bytes (10xxxxxx) so the cut falls between characters.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return `${decoder.decode(bytes.subarray(0, end))}...`;
}

/**
 * `<object name>.<16 hex digits>`, within the 253 characters of a DNS
 * subdomain. Every object Stateward reports on has a DNS-subdomain name, so
 * only a long one needs cutting.
 */
export function eventName(objectName: string, hex16: string): string {
  const prefix = objectName.slice(0, 253 - 17).replace(/[-.]+$/, '') || 'event';
  return `${prefix}.${hex16}`;
}

/** The facts of one occurrence: everything that tells two events apart. */
export interface EventFacts {
  regarding: ObjectRef;
  related?: ObjectRef;
  type: EventType;
  reason: string;
  action: string;
  /** Already truncated. */
  note: string;
  reportingController: string;
  reportingInstance: string;
}

// Series identity ignores resourceVersion: every reconcile sees a new one, and
// a controller repeating itself against an object that keeps changing is
// exactly the loop aggregation is for.
function refIdentity(ref: ObjectRef | undefined): unknown[] {
  return ref ? [ref.apiVersion, ref.kind, ref.namespace ?? '', ref.name, ref.uid ?? ''] : [];
}

/** Occurrences with equal keys aggregate into one series. */
export function seriesKey(f: EventFacts): string {
  return JSON.stringify([refIdentity(f.regarding), refIdentity(f.related), f.reason, f.action, f.type, f.note]);
}

/** Occurrences with equal spam keys share one budget of new Events: one per regarding object. */
export function spamKey(regarding: ObjectRef): string {
  return regarding.uid
    ? `uid:${regarding.uid}`
    : `ref:${regarding.namespace ?? ''}/${regarding.kind}/${regarding.name}`;
}

/** The Event for one occurrence at wall time `now`, without a series; cluster-scoped objects' Events live in `default`. */
export function buildEvent(f: EventFacts, name: string, now: number): EventsV1EventJson {
  const event: EventsV1EventJson = {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name, namespace: f.regarding.namespace || 'default' },
    eventTime: microTime(now),
    type: f.type,
    reason: f.reason,
    action: f.action,
    note: f.note,
    regarding: { ...f.regarding },
    reportingController: f.reportingController,
    reportingInstance: f.reportingInstance,
  };
  if (f.related) event.related = { ...f.related };
  return event;
}
