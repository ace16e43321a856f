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
// The annotation holds one JSON object: StatefulSet name → RFC 3339 time,
// in whole seconds as the StatefulSet's annotation has it, so that the copy
// is the same stamp: a replica that saw two stamps for one downscale would
// take the second for a new one written by a clock running behind
// (src/runtime/sightings.ts) and count min-time again from when it saw it.
import { formatRfc3339, parseRfc3339 } from '../../vocabulary/rfc3339.ts';
import type { LastDownscale } from '../mintime.ts';

/** The annotation of a group's lock Lease that holds its zones' last downscales. */
export const LEASE_LAST_DOWNSCALES_ANNOTATION = 'stateward.dev/last-downscales';

/** The records in a Lease's annotation, or why they cannot be read (a deny: min-time cannot be judged). */
export function parseLeaseRecords(value: string | undefined): Map<string, number> | { error: string } {
  if (value === undefined || value === '') return new Map();
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (error) {
    return { error: `${LEASE_LAST_DOWNSCALES_ANNOTATION} is not JSON: ${(error as Error).message}` };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    return { error: `${LEASE_LAST_DOWNSCALES_ANNOTATION} is not a JSON object of StatefulSet names to times` };
  const out = new Map<string, number>();
  for (const [name, at] of Object.entries(parsed)) {
    const time = typeof at === 'string' ? parseRfc3339(at) : { error: 'not a string' };
    if (typeof time !== 'number')
      return { error: `${LEASE_LAST_DOWNSCALES_ANNOTATION}: the time of ${name} does not parse: ${time.error}` };
    out.set(name, time);
  }
  return out;
}

/**
 * The annotation after recording `name` downscaled `at`: records of
 * StatefulSets no longer in the group are dropped, so it stays as small as
 * the group.
 */
export function recordInLease(
  records: ReadonlyMap<string, number>,
  name: string,
  at: number,
  group: Iterable<string>,
): string {
  const keep = new Set(group);
  const out: Record<string, string> = {};
  for (const [n, t] of [...records].sort(([a], [b]) => a.localeCompare(b)))
    if (keep.has(n) && n !== name) out[n] = formatRfc3339(t);
  out[name] = formatRfc3339(at);
  return JSON.stringify(out);
}

/**
 * Each StatefulSet's last downscale as min-time must count it: the later of
 * the two records. An unreadable record wins over a time (min-time cannot be
 * judged: deny, as rollout-operator does for a broken annotation).
 */
export function latestLastDownscales(
  annotations: ReadonlyMap<string, LastDownscale>,
  lease: ReadonlyMap<string, number>,
): Map<string, LastDownscale> {
  const out = new Map<string, LastDownscale>(annotations);
  for (const [name, at] of lease) {
    const other = out.get(name);
    if (other === undefined || (typeof other === 'number' && other < at)) out.set(name, at);
  }
  return out;
}
