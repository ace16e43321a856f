// Where the prepare-downscale webhook records a zone's downscale before it
// allows it: on the group's lock Lease, not on the StatefulSet under review.
//
// Why not the StatefulSet (rollout-operator's place, grafana/rollout-operator
// #303): writing the object whose update is being admitted changes its
// resourceVersion, so a client that updates with optimistic concurrency —
// the HorizontalPodAutoscaler's read-then-update of /scale — gets "the object
// has been modified" every time, and never scales the zone down. The Lease is
// ours, already written under the same lock, and read by every replica that
// takes the lock next, so the record is durable before the allow without
// touching the object. grafana.com/last-downscale is still written on the
// StatefulSet, once the downscale has landed (handler.ts), for everything
// that reads it there (the replica coordinator, status, doctor, and
// rollout-operator itself after a move back).
//
// The annotation holds one JSON object: StatefulSet name → `{"at": <RFC 3339>,
// "over": <the StatefulSet's grafana.com/last-downscale when recorded, "" when
// none>}`. `at` has whole seconds, as the StatefulSet's annotation has them,
// so that the copy is the same stamp: a replica that saw two stamps for one
// downscale would take the second for a new one written by a clock running
// behind (src/runtime/sightings.ts) and count min-time again from then.
//
// Which record counts (lastDownscaleOf): the Lease's, while the annotation is
// still what it was when the record was made (the copy has not landed) or is
// the copy — even when it is *earlier* than the annotation it replaces: a
// replica whose clock runs behind writes a stamp older than the previous
// downscale's, and taking the later of the two would count min-time from that
// previous downscale, seconds or minutes too early (the clock-step soak,
// seed 7, found exactly that). Only when the annotation has changed otherwise
// since (rollout-operator running in between, or an edit) is it the later of
// the two.
import { formatRfc3339, parseRfc3339 } from '../../vocabulary/rfc3339.ts';
import { LAST_DOWNSCALE_ANNOTATION_KEY } from '../../vocabulary/keys.ts';
import type { StatefulSet } from '../../runtime/kube/types.ts';
import { lastDownscalesFromAnnotations, type LastDownscale } from '../mintime.ts';

/** The annotation of a group's lock Lease that holds its zones' last downscales. */
export const LEASE_LAST_DOWNSCALES_ANNOTATION = 'stateward.dev/last-downscales';

/** One StatefulSet's record on the Lease. */
export interface LeaseRecord {
  /** When its last downscale was allowed (whole seconds). */
  at: number;
  /** Its grafana.com/last-downscale when that was recorded ('' for none). */
  over: string;
}

/** The records in a Lease's annotation, or why they cannot be read (a deny: min-time cannot be judged). */
export function parseLeaseRecords(value: string | undefined): Map<string, LeaseRecord> | { error: string } {
  if (value === undefined || value === '') return new Map();
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (error) {
    return { error: `${LEASE_LAST_DOWNSCALES_ANNOTATION} is not JSON: ${(error as Error).message}` };
  }
  if (!isObject(parsed))
    return { error: `${LEASE_LAST_DOWNSCALES_ANNOTATION} is not a JSON object of StatefulSet names to records` };
  const out = new Map<string, LeaseRecord>();
  for (const [name, record] of Object.entries(parsed)) {
    const bad = (why: string) => ({ error: `${LEASE_LAST_DOWNSCALES_ANNOTATION}: the record of ${name} ${why}` });
    if (!isObject(record) || typeof record['at'] !== 'string' || typeof (record['over'] ?? '') !== 'string')
      return bad('is not {"at": "<RFC 3339>", "over": "<string>"}');
    const at = parseRfc3339(record['at']);
    if (typeof at !== 'number') return bad(`does not parse: ${at.error}`);
    out.set(name, { at, over: typeof record['over'] === 'string' ? record['over'] : '' });
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The annotation after recording `name` downscaled `at` over its current
 * grafana.com/last-downscale: records of StatefulSets no longer in the
 * group are dropped, so it stays as small as the group.
 */
export function recordInLease(
  records: ReadonlyMap<string, LeaseRecord>,
  name: string,
  record: LeaseRecord,
  group: Iterable<string>,
): string {
  const keep = new Set(group);
  const out: Record<string, { at: string; over: string }> = {};
  for (const [n, r] of [...records].sort(([a], [b]) => a.localeCompare(b)))
    if (keep.has(n) && n !== name) out[n] = { at: formatRfc3339(r.at), over: r.over };
  out[name] = { at: formatRfc3339(record.at), over: record.over };
  return JSON.stringify(out);
}

/** One StatefulSet's last downscale as min-time counts it, from its annotation (raw) and its Lease record. */
export function lastDownscaleOf(
  annotation: string | undefined,
  fromAnnotation: LastDownscale | undefined,
  record: LeaseRecord | undefined,
): LastDownscale | undefined {
  if (record === undefined) return fromAnnotation;
  const unchangedOrCopy = (annotation ?? '') === record.over || annotation === formatRfc3339(record.at);
  if (unchangedOrCopy) return record.at;
  // Changed by someone else since: the later, and an unreadable value wins (min-time cannot be judged).
  if (fromAnnotation === undefined || (typeof fromAnnotation === 'number' && fromAnnotation < record.at))
    return record.at;
  return fromAnnotation;
}

/** The group's last downscales as min-time counts them (lastDownscaleOf for each). */
export function lastDownscalesWithLease(
  sets: readonly StatefulSet[],
  lease: ReadonlyMap<string, LeaseRecord>,
): Map<string, LastDownscale> {
  const fromAnnotations = lastDownscalesFromAnnotations(sets);
  const out = new Map<string, LastDownscale>();
  for (const sts of sets) {
    const name = sts.metadata?.name ?? '';
    const last = lastDownscaleOf(
      sts.metadata?.annotations?.[LAST_DOWNSCALE_ANNOTATION_KEY],
      fromAnnotations.get(name),
      lease.get(name),
    );
    if (last !== undefined) out.set(name, last);
  }
  return out;
}
