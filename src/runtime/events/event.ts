// The shape of an events.k8s.io/v1 Event and the pure helpers that build one:
// names, namespaces, truncation, timestamps, the keys that decide which
// occurrences aggregate into one series and which share a spam budget, and the
// same field checks the API server applies, so that a malformed event is
// refused here instead of failing at the API server.

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
 * Where Events are written. Errors carry the HTTP status as a numeric `code`
 * (or `statusCode`/`status`); an error without one is taken as a transport
 * failure and retried.
 */
export interface EventSink {
  create(
    namespace: string,
    event: EventsV1EventJson,
  ): Promise<{ metadata?: { name?: string; resourceVersion?: string } }>;
  /** Applies a JSON merge patch to the named Event. */
  patch(namespace: string, name: string, mergePatch: object): Promise<unknown>;
}

// Limits the API server enforces on events.k8s.io/v1 Events (bytes, as Go's len).
export const NOTE_LIMIT_BYTES = 1024;
export const REASON_LIMIT_BYTES = 128;
export const ACTION_LIMIT_BYTES = 128;
export const REPORTING_INSTANCE_LIMIT_BYTES = 128;
const NAME_LIMIT = 253;
const NAME_SUFFIX_LENGTH = 17; // '.' + 16 hex digits

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function byteLength(s: string): number {
  return encoder.encode(s).length;
}

/** Cuts s to at most limit UTF-8 bytes without splitting a character; marks a cut with '...'. */
export function truncateUtf8(s: string, limit: number): string {
  const bytes = encoder.encode(s);
  if (bytes.length <= limit) return s;
  const marker = '...';
  let end = Math.max(0, limit - marker.length);
  // Back off continuation bytes (10xxxxxx) so the cut falls between characters.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return decoder.decode(bytes.subarray(0, end)) + marker;
}

import { microTime } from '../kube/time.ts';

export { microTime };

/** Events of cluster-scoped objects live in `default`, as the API server requires. */
export function eventNamespace(regarding: ObjectRef): string {
  return regarding.namespace ? regarding.namespace : 'default';
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * `<object name>.<16 hex digits>`. Event names must be DNS subdomains, so an
 * object name that is not one (uppercase, ':' as in RBAC names) or too long is
 * folded into one first.
 */
export function eventName(objectName: string, hex16: string): string {
  const room = NAME_LIMIT - NAME_SUFFIX_LENGTH;
  let prefix = objectName;
  if (prefix.length > room || !DNS_SUBDOMAIN.test(prefix)) {
    prefix = prefix
      .toLowerCase()
      .split('.')
      .map((label) => label.replace(/[^a-z0-9-]/g, '-').replace(/^-+|-+$/g, ''))
      .filter((label) => label !== '')
      .join('.')
      .slice(0, room)
      .replace(/[-.]+$/, '');
    if (prefix === '') prefix = 'event';
  }
  return `${prefix}.${hex16}`;
}

// Series identity ignores resourceVersion: every reconcile sees a new one, and
// a controller repeating itself against an object that keeps changing is
// exactly the loop aggregation is for.
function refIdentity(ref: ObjectRef | undefined): unknown[] {
  if (!ref) return [];
  return [ref.apiVersion, ref.kind, ref.namespace ?? '', ref.name, ref.uid ?? ''];
}

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

/** Occurrences with equal keys are isomorphic: they aggregate into one series. */
export function isomorphicKey(f: EventFacts): string {
  return JSON.stringify([
    refIdentity(f.regarding),
    refIdentity(f.related),
    f.reason,
    f.action,
    f.type,
    f.note,
    f.reportingController,
    f.reportingInstance,
  ]);
}

/** Occurrences with equal spam keys share one token bucket: one per regarding object. */
export function spamKey(regarding: ObjectRef): string {
  if (regarding.uid) return `uid:${regarding.uid}`;
  return `ref:${regarding.namespace ?? ''}/${regarding.kind}/${regarding.name}`;
}

function checkRef(field: string, ref: ObjectRef | undefined, problems: string[]): void {
  if (ref === undefined) return;
  if (typeof ref !== 'object' || ref === null) {
    problems.push(`${field} must be an object reference`);
    return;
  }
  if (typeof ref.name !== 'string' || ref.name === '') problems.push(`${field}.name is required`);
  if (typeof ref.kind !== 'string' || ref.kind === '') problems.push(`${field}.kind is required`);
}

/** Problems the API server would reject the Event for; empty when it is fine. */
export function validateFacts(
  f: Pick<EventFacts, 'regarding' | 'related' | 'type' | 'reason' | 'action'> & { note: unknown },
): string[] {
  const problems: string[] = [];
  checkRef('regarding', f.regarding, problems);
  if (f.regarding === undefined) problems.push('regarding is required');
  checkRef('related', f.related, problems);
  if (f.type !== 'Normal' && f.type !== 'Warning')
    problems.push(`type must be Normal or Warning, not ${String(f.type)}`);
  if (typeof f.reason !== 'string' || f.reason === '') problems.push('reason is required');
  else if (byteLength(f.reason) > REASON_LIMIT_BYTES)
    problems.push(`reason is longer than ${REASON_LIMIT_BYTES} bytes`);
  if (typeof f.action !== 'string' || f.action === '') problems.push('action is required');
  else if (byteLength(f.action) > ACTION_LIMIT_BYTES)
    problems.push(`action is longer than ${ACTION_LIMIT_BYTES} bytes`);
  if (typeof f.note !== 'string') problems.push('note must be a string');
  return problems;
}

// IsQualifiedName: an optional DNS-subdomain prefix and '/', then a name of at
// most 63 characters, alphanumeric at both ends with '-', '_', '.' inside.
const QUALIFIED_NAME = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$/;

/** Problems with the recorder's identity (reportingController, reportingInstance). */
export function validateReporter(reportingController: string, reportingInstance: string): string[] {
  const problems: string[] = [];
  const slash = reportingController.lastIndexOf('/');
  const prefix = slash >= 0 ? reportingController.slice(0, slash) : undefined;
  const name = slash >= 0 ? reportingController.slice(slash + 1) : reportingController;
  if (reportingController === '') problems.push('reportingController is required');
  else if (
    (prefix !== undefined && (prefix.length > NAME_LIMIT || !DNS_SUBDOMAIN.test(prefix))) ||
    name.length > 63 ||
    !QUALIFIED_NAME.test(name)
  ) {
    problems.push(
      `reportingController ${JSON.stringify(reportingController)} is not a qualified name (e.g. stateward.dev/rollout)`,
    );
  }
  if (reportingInstance === '') problems.push('reportingInstance is required');
  return problems;
}

/** The Event for one occurrence at time `now`, without a series. */
export function buildEvent(f: EventFacts, name: string, now: number): EventsV1EventJson {
  const event: EventsV1EventJson = {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name, namespace: eventNamespace(f.regarding) },
    eventTime: microTime(now),
    type: f.type,
    reason: f.reason,
    action: f.action,
    note: f.note,
    regarding: copyRef(f.regarding),
    reportingController: f.reportingController,
    reportingInstance: f.reportingInstance,
  };
  if (f.related) event.related = copyRef(f.related);
  return event;
}

function copyRef(ref: ObjectRef): ObjectRef {
  const out: ObjectRef = { apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name };
  if (ref.namespace) out.namespace = ref.namespace;
  if (ref.uid) out.uid = ref.uid;
  if (ref.resourceVersion) out.resourceVersion = ref.resourceVersion;
  return out;
}
