// A rollout group's last rollout as a timeline: when each StatefulSet (zone)
// started, what it waited for and how long, and when it finished. The status
// report says what a group does now; this says how it got there, which is
// what people look at after the fact ("why did zone b start 40 s after zone a
// finished?").
//
// The recorder is a pure function of the timeline so far and the group's
// status as the controller publishes it after each reconcile: a state change
// is a timeline change, the counts and messages of a wait are not. It stays
// small whatever the rollout's size: one entry per StatefulSet that rolled
// (at most MAX_TIMELINE_ZONES), and per StatefulSet one entry per kind of
// wait (at most MAX_TIMELINE_WAITS), counting how often and how long, so a
// 100-pod zone rolled pod by pod is still a few lines. Only the last rollout
// is kept: the next one starts a new timeline (one that starts within
// ROLLOUT_CONTINUES_MS of the last's end continues it).
//
// It is published in the status ConfigMap beside the rest of the group's
// status (user-writable data, so the report validates it field by field
// before a renderer sees it: src/status/build.ts).
import type { GroupStatus } from './status.ts';
import { STATUS_PENDING_WAIT } from './planner.ts';

export const MAX_TIMELINE_ZONES = 32;
/**
 * A StatefulSet that starts rolling this soon after the group was complete
 * belongs to the same rollout: a release applied StatefulSet by StatefulSet
 * (a loop of kubectl set env, kubectl apply of one file per zone) lets a
 * quick zone finish before the next one's template changes, and is still one
 * rollout to whoever looks at it.
 */
export const ROLLOUT_CONTINUES_MS = 30_000;
export const MAX_TIMELINE_WAITS = 8;
/** Wait messages quote annotation values: longer ones are cut. */
export const MAX_TIMELINE_MESSAGE = 512;

export interface TimelineWait {
  /** The wait code (src/rollout/planner.ts WaitCode, or zpdb-denied). */
  code: string;
  /** Its message when the last of these waits began. */
  message: string;
  /** When the StatefulSet first waited for this (ISO 8601). */
  since: string;
  /** When the last of these waits began. */
  from: string;
  /** When the last of these waits ended; absent while it goes on. */
  until?: string;
  /** How many times it waited for this. */
  times: number;
  /** Milliseconds of the waits for this that ended, in all (the one going on counts from `from`). */
  waitedMs: number;
}

export interface ZoneTimeline {
  statefulSet: string;
  /** When it started: first rolled or waited with pods still to update. */
  startedAt: string;
  /** When every pod was updated and Ready; absent while it rolls. */
  finishedAt?: string;
  /** In the order first waited for. */
  waits: TimelineWait[];
}

export interface RolloutTimeline {
  startedAt: string;
  /** When the group was complete again. */
  finishedAt?: string;
  /** In the order they started. */
  zones: ZoneTimeline[];
}

/** The StatefulSets' part of a group's status the recorder reads. */
export type TimelineInput = Pick<GroupStatus, 'phase' | 'waitingFor' | 'statefulSets'>;

type Wait = NonNullable<GroupStatus['waitingFor']>;

const iso = (ms: number) => new Date(ms).toISOString();
const cut = (text: string) =>
  text.length > MAX_TIMELINE_MESSAGE ? `${text.slice(0, MAX_TIMELINE_MESSAGE - 1)}…` : text;

/** What the StatefulSet waits for now, if anything: the group's wait when it names this one, or names none and this one waits. */
function waitOf(set: TimelineInput['statefulSets'][number], waiting: Wait | undefined): Wait | undefined {
  if (!waiting) return undefined;
  if (waiting.statefulSet === set.name) return waiting;
  return waiting.statefulSet === undefined && set.state === 'waiting' ? waiting : undefined;
}

/** Ends the wait going on, if any, at `now`. */
function closeWaits(zone: ZoneTimeline, now: number): ZoneTimeline {
  if (!zone.waits.some((w) => w.until === undefined)) return zone;
  const close = (w: TimelineWait): TimelineWait =>
    w.until === undefined ? { ...w, until: iso(now), waitedMs: w.waitedMs + Math.max(0, now - Date.parse(w.from)) } : w;
  return { ...zone, waits: zone.waits.map(close) };
}

/**
 * The zone waiting for `wait` at `now`: the same wait goes on unchanged (its
 * counts are progress, not news), another one ends it, and a kind seen
 * before counts once more.
 */
function recordWait(zone: ZoneTimeline, wait: Wait, now: number): ZoneTimeline {
  if (zone.waits.some((w) => w.until === undefined && w.code === wait.code)) return zone;
  const closed = closeWaits(zone, now);
  const message = cut(wait.message);
  const earlier = closed.waits.find((w) => w.code === wait.code);
  if (earlier) {
    const { until: _until, ...rest } = earlier;
    const again: TimelineWait = { ...rest, message, from: iso(now), times: earlier.times + 1 };
    return { ...closed, waits: closed.waits.map((w) => (w === earlier ? again : w)) };
  }
  if (closed.waits.length >= MAX_TIMELINE_WAITS) return closed;
  const fresh: TimelineWait = { code: wait.code, message, since: iso(now), from: iso(now), times: 1, waitedMs: 0 };
  return { ...closed, waits: [...closed.waits, fresh] };
}

/** One StatefulSet's entry after this status, or undefined while it has not started. */
function recordZone(
  zone: ZoneTimeline | undefined,
  set: TimelineInput['statefulSets'][number],
  waiting: Wait | undefined,
  now: number,
): ZoneTimeline | undefined {
  const wait = waitOf(set, waiting);
  const active = set.state === 'rolling' || set.state === 'waiting' || wait !== undefined;
  if (!zone) {
    // Waiting for the StatefulSet controller to catch up with a template change is not yet rolling.
    const starts = active && set.updated < set.replicas && wait?.code !== STATUS_PENDING_WAIT;
    if (!starts) return undefined;
    zone = { statefulSet: set.name, startedAt: iso(now), waits: [] };
  }
  if (set.state === 'up-to-date') {
    return zone.finishedAt === undefined ? { ...closeWaits(zone, now), finishedAt: iso(now) } : zone;
  }
  if (!active) return closeWaits(zone, now);
  // Rolling again after it was done (a pod of it went away meanwhile): it is not finished any more.
  const { finishedAt: _finished, ...reopened } = zone;
  return wait ? recordWait(reopened, wait, now) : closeWaits(reopened, now);
}

/**
 * The group's timeline after one more status, at `now` (ms since the epoch,
 * the wall clock the status's timestamps use). Undefined while no rollout
 * was seen; a finished one is kept until the next starts.
 */
export function recordTimeline(
  previous: RolloutTimeline | undefined,
  status: TimelineInput,
  now: number,
): RolloutTimeline | undefined {
  const fresh =
    previous === undefined ||
    (previous.finishedAt !== undefined && now - Date.parse(previous.finishedAt) > ROLLOUT_CONTINUES_MS);
  const byName = new Map((fresh ? [] : previous.zones).map((z) => [z.statefulSet, z]));
  const zones: ZoneTimeline[] = [];
  for (const set of status.statefulSets) {
    const zone = recordZone(byName.get(set.name), set, status.waitingFor, now);
    if (zone) zones.push(zone);
  }
  // StatefulSets that left the group keep their entry as it was.
  const kept = new Set(zones.map((z) => z.statefulSet));
  for (const zone of byName.values()) if (!kept.has(zone.statefulSet)) zones.push(zone);
  if (zones.length === 0 || (fresh && zones.every((z) => z.finishedAt !== undefined))) return previous;
  const ordered = zones
    .sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt) || (a.statefulSet < b.statefulSet ? -1 : 1))
    .slice(0, MAX_TIMELINE_ZONES);
  const startedAt = fresh ? ordered[0]!.startedAt : previous.startedAt;
  // Complete: the rollout is over, whatever a StatefulSet passed over (paused) still lacks.
  if (status.phase === 'complete')
    return { startedAt, finishedAt: iso(now), zones: ordered.map((z) => closeWaits(z, now)) };
  return { startedAt, zones: ordered };
}

/**
 * The timelines of the groups this replica rolls, shared with the web view
 * of the same operator (which caches no ConfigMap to read them from). One
 * per runtime, as the informers are.
 */
export class RolloutTimelines {
  private readonly byGroup = new Map<string, RolloutTimeline>();
  private readonly listeners = new Set<(namespace: string) => void>();

  /** Records one more status of the group; returns its timeline. */
  record(namespace: string, group: string, status: TimelineInput, now: number): RolloutTimeline | undefined {
    const key = `${namespace}/${group}`;
    const previous = this.byGroup.get(key);
    const timeline = recordTimeline(previous, status, now);
    if (!timeline || timeline === previous) return timeline;
    this.byGroup.set(key, timeline);
    if (JSON.stringify(timeline) !== JSON.stringify(previous))
      for (const listener of this.listeners) listener(namespace);
    return timeline;
  }

  /** Calls listener with the namespace of each timeline that changed; returns the unsubscribe function. */
  onChange(listener: (namespace: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  forget(namespace: string, group: string): void {
    this.byGroup.delete(`${namespace}/${group}`);
  }

  /** By `<namespace>/<group>`, as StatusInput.timelines takes them. */
  latest(namespace: string): Map<string, RolloutTimeline> {
    return new Map([...this.byGroup].filter(([key]) => key.startsWith(`${namespace}/`)));
  }

  clear(): void {
    this.byGroup.clear();
  }
}

const perRuntime = new WeakMap<object, RolloutTimelines>();

/** The runtime's timelines: the rollout controller records them, the web view reads them. */
export function rolloutTimelines(runtime: object): RolloutTimelines {
  let timelines = perRuntime.get(runtime);
  if (!timelines) perRuntime.set(runtime, (timelines = new RolloutTimelines()));
  return timelines;
}
