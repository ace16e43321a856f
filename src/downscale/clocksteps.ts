// Min-time between zone downscales compares a wall-clock stamp shared by
// every replica (grafana.com/last-downscale, or the zone tracker's record)
// with this process's clock. The stamp is taken at its word unless this
// process has evidence that a clock stepped or disagrees
// (src/runtime/sightings.ts); then it is counted so that neither shortens
// the wait.
import type { Seen, TimestampSightings } from '../runtime/sightings.ts';
import type { CountedFrom, LastDownscale } from './mintime.ts';

/**
 * Where the stamps come from; they may disagree for the same StatefulSet.
 * Each is looked at in a scope of its own: a scope that alternated between
 * two values (a group lock's record and the annotation it has not been
 * copied onto yet) would take each return of a value for a stamp new since
 * the last look, and count the wait from now on every look, for good.
 */
export type LastDownscaleSource = 'annotation' | 'zone-tracker' | 'lease-record';

/**
 * Notes what one read showed of the last downscales of StatefulSets of
 * `namespace` and returns when to count each from: the input of
 * checkMinTimeBetweenZoneDownscales' `countedFrom`. `statefulSets` names
 * every StatefulSet the read covered, stamped or not: a look that saw no
 * stamp is what dates one that appears later. Call it with every read (the
 * StatefulSet informer does), so a change is seen as early as possible.
 */
export function observeLastDownscales(
  sightings: TimestampSightings,
  read: {
    namespace: string;
    statefulSets: Iterable<string>;
    lastDownscales: ReadonlyMap<string, LastDownscale>;
    source: LastDownscaleSource;
    seen: Seen;
  },
): Map<string, CountedFrom> {
  const out = new Map<string, CountedFrom>();
  const names = new Set([...read.statefulSets, ...read.lastDownscales.keys()]);
  for (const name of names) {
    const at = read.lastDownscales.get(name);
    // One scope per StatefulSet and source.
    const stamps = typeof at === 'number' ? new Map([['', at]]) : new Map<string, number>();
    const counted = sightings
      .look(`last-downscale/${read.source}/${read.namespace}/${name}`, stamps, read.seen)
      .get('');
    if (counted && typeof at === 'number') out.set(name, { at, ...counted });
  }
  return out;
}
