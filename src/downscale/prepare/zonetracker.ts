// The zone tracker ConfigMap's data, the alternative to the
// grafana.com/last-downscale annotation (rollout-operator's
// `-use-zone-tracker`): key = StatefulSet name, value = JSON
// `{"lastDownscaled":"<RFC3339 UTC>"}`. Pure data transformations only; the
// executor does the GET / CREATE / UPDATE of the ConfigMap.
import { formatRfc3339 } from '../../vocabulary/rfc3339.ts';

export interface ZoneInfo {
  /** The raw value; parsed as RFC3339 only when a min-time check needs it. */
  lastDownscaled: string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * One value as encoding/json decodes it into rollout-operator's zoneInfo struct:
 * any key equal to `lastDownscaled` ignoring case sets the field (the last
 * such key wins), a null leaves it empty, unknown keys are ignored,
 * and anything else than a JSON object (or null) is an error.
 */
function decodeZoneInfo(raw: string): ZoneInfo | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
  if (value === null) return { lastDownscaled: '' };
  if (!isRecord(value))
    return { error: `cannot unmarshal ${Array.isArray(value) ? 'array' : typeof value} into a zone info object` };
  let lastDownscaled = '';
  for (const [key, field] of Object.entries(value)) {
    if (key.toLowerCase() !== 'lastdownscaled') continue;
    if (field === null) continue;
    if (typeof field !== 'string')
      return { error: `cannot unmarshal ${typeof field} into field lastDownscaled of type string` };
    lastDownscaled = field;
  }
  return { lastDownscaled };
}

/**
 * The ConfigMap's data as zones. A ConfigMap without data is an empty
 * tracker (no StatefulSet has a last downscale). Any undecodable value is an
 * error: rollout-operator then denies with "…because loading zones failed."
 */
export function parseZoneTracker(
  data: Record<string, string> | undefined | null,
): Map<string, ZoneInfo> | { error: string } {
  const zones = new Map<string, ZoneInfo>();
  for (const [name, raw] of Object.entries(data ?? {})) {
    const info = decodeZoneInfo(raw);
    if ('error' in info) return { error: `zone ${name}: ${info.error}` };
    zones.set(name, info);
  }
  return zones;
}

function encodeZoneInfo(info: ZoneInfo): string {
  return JSON.stringify({ lastDownscaled: info.lastDownscaled });
}

/**
 * The data of a newly created tracker: every StatefulSet of the group set to
 * `now`, as rollout-operator does on first creation. So the first downscale after
 * the ConfigMap is created waits out min-time-between-zones-downscale.
 */
export function initialZoneTracker(statefulSetNames: Iterable<string>, now: number): Record<string, string> {
  const value = encodeZoneInfo({ lastDownscaled: formatRfc3339(now) });
  const data: Record<string, string> = {};
  for (const name of statefulSetNames) data[name] = value;
  return data;
}

/**
 * New data with `statefulSet` downscaled at `now` (added when missing); the
 * input is not modified. Other entries are kept verbatim (rollout-operator
 * re-marshals them, which only drops unknown JSON keys).
 */
export function recordDownscale(
  data: Record<string, string> | undefined | null,
  statefulSet: string,
  now: number,
): Record<string, string> {
  return { ...(data ?? {}), [statefulSet]: encodeZoneInfo({ lastDownscaled: formatRfc3339(now) }) };
}
