// A rollout timeline as the operator published it in its status ConfigMap
// (src/rollout/rollouttimeline.ts), read back for the report. Anyone who may
// edit that ConfigMap can write anything into it, so it is taken field by
// field: what has the shape the renderers read is kept, within the
// recorder's own bounds, and anything else is dropped rather than shown.
import {
  MAX_TIMELINE_MESSAGE,
  MAX_TIMELINE_WAITS,
  MAX_TIMELINE_ZONES,
  type RolloutTimeline,
  type TimelineWait,
  type ZoneTimeline,
} from '../rollout/rollouttimeline.ts';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An ISO 8601 time as the recorder writes it (Date#toISOString), nothing else. */
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;
const isTime = (v: unknown): v is string => typeof v === 'string' && TIME.test(v) && !Number.isNaN(Date.parse(v));
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isText = (v: unknown, max: number): v is string => typeof v === 'string' && v.length <= max;

function waitOf(raw: unknown): TimelineWait[] {
  if (!isRecord(raw)) return [];
  const { code, message, since, from, until, times, waitedMs } = raw;
  if (!isText(code, 64) || !isText(message, MAX_TIMELINE_MESSAGE) || !isTime(since) || !isTime(from)) return [];
  if (!isCount(times) || !isCount(waitedMs) || (until !== undefined && !isTime(until))) return [];
  return [{ code, message, since, from, ...(until !== undefined ? { until } : {}), times, waitedMs }];
}

function zoneOf(raw: unknown): ZoneTimeline[] {
  if (!isRecord(raw)) return [];
  const { statefulSet, startedAt, finishedAt, waits } = raw;
  // A StatefulSet name is a DNS subdomain: at most 253 characters.
  if (!isText(statefulSet, 253) || !isTime(startedAt) || (finishedAt !== undefined && !isTime(finishedAt))) return [];
  if (!Array.isArray(waits)) return [];
  return [
    {
      statefulSet,
      startedAt,
      ...(finishedAt !== undefined ? { finishedAt } : {}),
      waits: waits.slice(0, MAX_TIMELINE_WAITS).flatMap(waitOf),
    },
  ];
}

/** The timeline in a group's published status (its JSON), if it has the recorder's shape. */
export function publishedTimeline(raw: string | undefined): RolloutTimeline | undefined {
  if (raw === undefined) return undefined;
  let timeline: unknown;
  try {
    timeline = (JSON.parse(raw) as { timeline?: unknown }).timeline;
  } catch {
    return undefined;
  }
  if (!isRecord(timeline) || !isTime(timeline['startedAt']) || !Array.isArray(timeline['zones'])) return undefined;
  const finishedAt = timeline['finishedAt'];
  if (finishedAt !== undefined && !isTime(finishedAt)) return undefined;
  const zones = timeline['zones'].slice(0, MAX_TIMELINE_ZONES).flatMap(zoneOf);
  if (zones.length === 0) return undefined;
  return { startedAt: timeline['startedAt'], ...(finishedAt !== undefined ? { finishedAt } : {}), zones };
}
