// The one rule for the minimum time between zone downscales, used by both the
// replica coordinator (before it scales a follower down) and the
// prepare-downscale webhook (before it admits a downscale): a zone may be
// downscaled only when, for every OTHER StatefulSet of the group that was
// downscaled (grafana.com/last-downscale, or the zone tracker) and carries
// grafana.com/min-time-between-zones-downscale (its annotation, else its
// label: minTimeSetting), that much time has passed since. rollout-operator's
// controller read the follower's own setting while its webhook read the other
// zone's: the controller could attempt a downscale the webhook then denied,
// again and again.
//
// `now` is the wall clock (the timestamps are shared by every replica);
// `countedFrom` (clocksteps.ts) keeps a clock step, or a writer whose clock
// disagrees, from shortening the wait — only when this replica has evidence
// of one; otherwise a stamp counts from itself, as in rollout-operator.
import { formatGoDuration, parseGoDuration } from '../runtime/go/duration.ts';
import type { StatefulSet } from '../runtime/kube/types.ts';
import type { ClockEvidence, Counted } from '../runtime/sightings.ts';
import { parseRfc3339 } from '../vocabulary/rfc3339.ts';
import { LAST_DOWNSCALE_ANNOTATION_KEY, MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY } from '../vocabulary/keys.ts';

/** Where a StatefulSet's min-time between zone downscales is read from, and its text. */
export interface MinTimeSetting {
  value: string;
  from: 'annotation' | 'label';
  /** The label's value when an annotation is set as well: ignored, the annotation wins. */
  ignoredLabel?: string;
}

/**
 * grafana.com/min-time-between-zones-downscale as rollout-operator v0.39
 * reads it (#463): the annotation when set, else the label (deprecated; the
 * replica-coordination capability logs that once). An empty value counts as
 * not set, as v0.39 reads the label; undefined when neither is set.
 */
export function minTimeSetting(sts: StatefulSet): MinTimeSetting | undefined {
  const annotation = sts.metadata?.annotations?.[MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY];
  const label = sts.metadata?.labels?.[MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY];
  if (annotation !== undefined && annotation !== '') {
    return label !== undefined
      ? { value: annotation, from: 'annotation', ignoredLabel: label }
      : { value: annotation, from: 'annotation' };
  }
  if (label !== undefined && label !== '') return { value: label, from: 'label' };
  return undefined;
}

/** When a StatefulSet was last downscaled (epoch ms), or why that cannot be read. */
export type LastDownscale = number | { error: string };

/** Go's time.Time.String() for a UTC instant: "2006-01-02 15:04:05 +0000 UTC" (fraction only when non-zero). */
export function goTimeString(ms: number): string {
  const iso = new Date(ms).toISOString(); // 2006-01-02T15:04:05.000Z
  const fraction = iso.slice(20, 23).replace(/0+$/, '');
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${fraction ? `.${fraction}` : ''} +0000 UTC`;
}

/** Annotation mode: each StatefulSet's grafana.com/last-downscale. */
export function lastDownscalesFromAnnotations(statefulSets: readonly StatefulSet[]): Map<string, LastDownscale> {
  const out = new Map<string, LastDownscale>();
  for (const sts of statefulSets) {
    const value = sts.metadata?.annotations?.[LAST_DOWNSCALE_ANNOTATION_KEY];
    if (value === undefined) continue;
    const parsed = parseRfc3339(value);
    const name = sts.metadata?.name ?? '';
    out.set(
      name,
      typeof parsed === 'number'
        ? parsed
        : { error: `can't parse ${LAST_DOWNSCALE_ANNOTATION_KEY} annotation of ${name}: ${parsed.error}` },
    );
  }
  return out;
}

/**
 * When this process counts a StatefulSet's last downscale `at` from: `at`
 * itself, unless `evidence` says why not (src/runtime/sightings.ts).
 */
export interface CountedFrom extends Counted {
  at: number;
}

/** The denial's explanation of a wait not counted from the stamp. */
function countedNote(from: number, evidence: ClockEvidence | undefined): string {
  const when = goTimeString(from);
  switch (evidence) {
    case 'ahead':
      return ` (counted from ${when}, when this replica first saw it: the stamp is ahead of this replica's clock)`;
    case 'before-look':
      return ` (counted from ${when}, when this replica saw it: it is older than a look of this replica's that did not show it, so the writer's clock is behind)`;
    case 'stepped':
      return ` (counted from ${when}: this replica's clock stepped)`;
    default:
      return '';
  }
}

/** Per StatefulSet name (observeLastDownscales). */
export type CountedFromByName = ReadonlyMap<string, CountedFrom>;

export type MinTimeCheck =
  | { elapsed: true }
  | { elapsed: false; blockedBy: string; lastDownscale: number; minTime: number; reason: string }
  | { error: string; statefulSet: string };

export function checkMinTimeBetweenZoneDownscales(input: {
  self: string;
  group: readonly StatefulSet[];
  lastDownscales: ReadonlyMap<string, LastDownscale>;
  now: number;
  countedFrom?: CountedFromByName;
}): MinTimeCheck {
  for (const sts of input.group) {
    const name = sts.metadata?.name ?? '';
    if (name === input.self) continue;
    const last = input.lastDownscales.get(name);
    if (last === undefined) continue;
    if (typeof last !== 'number') return { error: last.error, statefulSet: name };
    const setting = minTimeSetting(sts);
    if (setting === undefined) continue;
    let minTime: number;
    try {
      minTime = parseGoDuration(setting.value);
    } catch (error) {
      return {
        error: `can't parse ${MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY} ${setting.from} of ${name}: ${error instanceof Error ? error.message : String(error)}`,
        statefulSet: name,
      };
    }
    // Counted for another stamp (it changed since): does not apply.
    const counted = input.countedFrom?.get(name);
    const from = counted?.at === last ? counted.from : last;
    if (input.now - from < minTime) {
      const note = counted?.at === last && from !== last ? countedNote(from, counted.evidence) : '';
      return {
        elapsed: false,
        blockedBy: name,
        lastDownscale: last,
        minTime,
        // Go's time format in the message, and v0.39's wording ("configured",
        // since the setting may be an annotation), as rollout-operator prints it.
        reason: `statefulset ${name} was downscaled at ${goTimeString(last)} and is configured to wait ${formatGoDuration(minTime)} between zone downscales${note}`,
      };
    }
  }
  return { elapsed: true };
}
