// Min-time between zone downscales compares a wall-clock stamp shared by
// every replica (grafana.com/last-downscale, or the zone tracker's record)
// with this process's clock. It counts from when this process saw the stamp
// (src/runtime/sightings.ts), so neither a step of this process's clock nor
// a writer whose clock disagrees shortens the wait.
import type { Clock } from '../runtime/clock.ts';
import { timestampSightings } from '../runtime/sightings.ts';
import type { CountedFrom, LastDownscale } from './downscale.ts';

/** Where the stamps come from; the two may disagree for the same StatefulSet. */
export type LastDownscaleSource = 'annotation' | 'zone-tracker';

/**
 * Notes the last downscales of StatefulSets of `namespace` (name → stamp, as
 * lastDownscalesFromAnnotations or lastDownscalesFromZones read them) and
 * returns when to count each from: the input of
 * checkMinTimeBetweenZoneDownscales' `countedFrom`. Call it with every read
 * (the StatefulSet informer does), so a change is seen as early as possible.
 */
export function observeLastDownscales(clock: Clock, namespace: string, lastDownscales: ReadonlyMap<string, LastDownscale>, source: LastDownscaleSource = 'annotation', seen: 'initial' | 'live' = 'initial'): Map<string, CountedFrom> {
  const sightings = timestampSightings(clock);
  const out = new Map<string, CountedFrom>();
  for (const [name, at] of lastDownscales) {
    if (typeof at !== 'number') continue;
    // One scope per StatefulSet: a new stamp there was written after the previous look at it.
    const from = sightings.look(`last-downscale/${source}/${namespace}/${name}`, new Map([['', at]]), seen).get('')!;
    out.set(name, { at, from });
  }
  return out;
}
