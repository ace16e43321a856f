// The chaos monitor's health-gate rule, pure: when the gate's policy says
// pause, no StatefulSet of a gated group starts rolling. It never asks the
// operator (no start stamps, no status, no Events): the pause intervals come
// from what the soak itself did (the error ratios it published on the
// exporter, Prometheus stopped and started; a timeline the soak writes as it
// acts) and the starts from the pod and StatefulSet watch events.
//
// The policy is the check the soak installs (soak.ts) under the default
// Pause policy: Prometheus down (every gated group pauses), or a pod of a
// gated group published with an error ratio above THRESHOLD (the check's
// `current <= baseline + 0.05`; the soak never raises a not-yet-rolled pod, so
// the baseline is 0, and it raises only the pods of a zone that has rolled in
// the rollout in flight, so the raised pods are the check's current ones).
//
// A start is a StatefulSet's first rolling delete (a Ready pod on an old
// revision, below spec.replicas, not through the Eviction API) while none of
// its pods is on its update revision, and it counts as gated only when the
// StatefulSet is bound to a check and another StatefulSet of its rollout group
// began rolling to its present update revision after this one's update
// revision appeared (the first zone of a rollout is never gated). Where the
// monitor cannot be sure it errs towards judging nothing.
import type { V1Pod, V1StatefulSet } from '@kubernetes/client-node';

export const HEALTH_CHECK_ANNOTATION = 'grafana.com/rollout-health-check';
/** The check's tolerance above the baseline (0): `${current} <= bool (${baseline} + 0.05)`. */
export const THRESHOLD = 0.05;
/**
 * The evaluation in flight when a pause condition begins: a new error ratio
 * reaches Prometheus at its next scrape (scrape interval, 1 s), and a
 * passing verdict is reused until the next evaluation (evaluationInterval,
 * 1 s); the margin covers the three queries, the start stamp's write and the
 * delete request on a loaded machine. A start up to this long after a
 * condition began is the gate's legitimate lag, not a breach.
 */
export const GATE_SLACK_MS = 1000 + 1000 + 500;
/** How long a start waits before it is judged, so a lagging StatefulSet watch has caught up on spec.replicas. */
export const START_DEFER_MS = 3000;

/** One line of the soak's timeline: what it did, when (Unix ms). */
export type TimelineEntry =
  | { at: number; kind: 'prometheus'; up: boolean }
  | { at: number; kind: 'ratio'; namespace: string; pod: string; value: number };

export interface PauseInterval {
  from: number;
  /** Infinity while the condition still holds. */
  to: number;
  why: string;
}

export interface GateStart {
  namespace: string;
  statefulSet: string;
  pod: string;
  /** Bounds of the delete's time: deletionTimestamp − grace (whole seconds, so the true time is within 1 s after), and the watch's arrival. */
  earliest: number;
  latest: number;
  /** The StatefulSets of the group that had started rolling before it. */
  after: string[];
}

export interface GateViolation {
  at: string;
  kind: 'start-while-gate-paused';
  message: string;
  details: Record<string, unknown>;
}

/**
 * The intervals during which the policy says pause, per gated namespace:
 * every Prometheus outage, and each span during which any of the namespace's
 * pods is published above `threshold`. Conditions are kept apart (not
 * merged): each has its own start, after which the slack runs.
 */
export function pauseIntervals(
  timeline: readonly TimelineEntry[],
  namespaces: readonly string[],
  threshold = THRESHOLD,
): Map<string, PauseInterval[]> {
  const sorted = [...timeline].sort((a, b) => a.at - b.at);
  const outages: PauseInterval[] = [];
  const out = new Map<string, PauseInterval[]>(namespaces.map((ns) => [ns, []]));
  const ratios = new Map<string, Map<string, number>>();
  const raisedSince = new Map<string, number>();
  for (const e of sorted) {
    if (e.kind === 'prometheus') {
      const open = outages.at(-1);
      if (!e.up && (!open || open.to !== Infinity)) outages.push({ from: e.at, to: Infinity, why: 'Prometheus down' });
      if (e.up && open && open.to === Infinity) open.to = e.at;
      continue;
    }
    const pods = ratios.get(e.namespace) ?? new Map<string, number>();
    ratios.set(e.namespace, pods);
    pods.set(e.pod, e.value);
    const bad = [...pods.values()].some((v) => v > threshold);
    const since = raisedSince.get(e.namespace);
    if (bad && since === undefined) raisedSince.set(e.namespace, e.at);
    if (!bad && since !== undefined) {
      raisedSince.delete(e.namespace);
      out.get(e.namespace)?.push({ from: since, to: e.at, why: `error ratio above ${threshold}` });
    }
  }
  for (const [ns, since] of raisedSince)
    out.get(ns)?.push({ from: since, to: Infinity, why: `error ratio above ${threshold}` });
  for (const list of out.values()) list.push(...outages.map((o) => ({ ...o })));
  return out;
}

/** Starts made certainly inside a pause interval, past its slack: the delete's earliest time ≥ from + slack, its latest < to. */
export function gateViolations(
  pauses: ReadonlyMap<string, readonly PauseInterval[]>,
  starts: readonly GateStart[],
  slackMs = GATE_SLACK_MS,
): GateViolation[] {
  const found: GateViolation[] = [];
  for (const start of starts) {
    const hit = (pauses.get(start.namespace) ?? []).find(
      (p) => start.earliest >= p.from + slackMs && start.latest < p.to,
    );
    if (!hit) continue;
    found.push({
      at: new Date(start.earliest).toISOString(),
      kind: 'start-while-gate-paused',
      message: `${start.namespace}/${start.statefulSet} started rolling (deleted ${start.pod}) ${start.earliest - hit.from} ms after the gate's policy said pause (${hit.why}), after ${start.after.join(', ')} had started`,
      details: {
        pod: start.pod,
        earliest: new Date(start.earliest).toISOString(),
        latest: new Date(start.latest).toISOString(),
        pausedFrom: new Date(hit.from).toISOString(),
        pausedTo: hit.to === Infinity ? 'still' : new Date(hit.to).toISOString(),
        slackMs,
      },
    });
  }
  return found;
}

interface SetState {
  group: string | undefined;
  gated: boolean;
  updateRevision: string | undefined;
  /** When this update revision was first seen. */
  revisionSince: number;
  /** spec.replicas as seen, with times, for telling a downscale's deletes apart. */
  replicas: { at: number; value: number }[];
  /** The first rolling delete seen for an update revision. */
  rolled?: { revision: string; at: number };
}

interface PodSeen {
  owner: string | undefined;
  revision: string | undefined;
  ready: boolean;
  terminating: boolean;
}

interface Candidate {
  due: number;
  start: GateStart;
  ordinal: number;
}

/** Pod and StatefulSet watch events in, gated starts out (see the header). No I/O. */
export class GateStartTracker {
  private readonly sets = new Map<string, SetState>();
  private readonly pods = new Map<string, PodSeen>();
  private readonly candidates: Candidate[] = [];
  readonly starts: GateStart[] = [];
  /** Starts of a StatefulSet seen, gated or not. */
  startsSeen = 0;

  applyStatefulSet(object: V1StatefulSet, type: 'ADDED' | 'MODIFIED' | 'DELETED', now: number): void {
    const key = `${object.metadata?.namespace}/${object.metadata?.name}`;
    if (type === 'DELETED') {
      this.sets.delete(key);
      return;
    }
    const revision = object.status?.updateRevision;
    const prior = this.sets.get(key);
    const state: SetState = prior ?? {
      group: undefined,
      gated: false,
      updateRevision: revision,
      revisionSince: now,
      replicas: [],
    };
    state.group = object.metadata?.labels?.['rollout-group'];
    state.gated = (object.metadata?.annotations?.[HEALTH_CHECK_ANNOTATION] ?? '') !== '';
    if (revision !== state.updateRevision) {
      state.updateRevision = revision;
      state.revisionSince = now;
    }
    const replicas = object.spec?.replicas ?? 1;
    if (state.replicas.at(-1)?.value !== replicas) state.replicas.push({ at: now, value: replicas });
    if (state.replicas.length > 50) state.replicas.splice(0, state.replicas.length - 50);
    this.sets.set(key, state);
  }

  /** `relist`: a list's replay, whose times say nothing about when things happened. */
  applyPod(object: V1Pod, type: 'ADDED' | 'MODIFIED' | 'DELETED', now: number, relist: boolean): void {
    const namespace = object.metadata?.namespace ?? '';
    const name = object.metadata?.name ?? '';
    const key = `${namespace}/${name}`;
    const before = this.pods.get(key);
    const seen: PodSeen = {
      owner: object.metadata?.ownerReferences?.find((o) => o.kind === 'StatefulSet' && o.controller)?.name,
      revision: object.metadata?.labels?.['controller-revision-hash'],
      ready:
        !object.metadata?.deletionTimestamp &&
        (object.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
      terminating: type === 'DELETED' || object.metadata?.deletionTimestamp != null,
    };
    if (type === 'DELETED') this.pods.delete(key);
    else this.pods.set(key, seen);
    if (!before || before.terminating || !seen.terminating || relist) return;
    this.deleted(namespace, name, object, before, now);
  }

  private deleted(namespace: string, name: string, object: V1Pod, before: PodSeen, now: number): void {
    if (!before.ready || !before.owner) return;
    const set = this.sets.get(`${namespace}/${before.owner}`);
    const revision = set?.updateRevision;
    if (!set || !revision || before.revision === revision) return;
    const evicted = (object.status?.conditions ?? []).some(
      (c) => c.type === 'DisruptionTarget' && c.status === 'True' && c.reason === 'EvictionByEvictionAPI',
    );
    const ordinal = Number(/-(\d+)$/.exec(name)?.[1] ?? NaN);
    if (evicted || !Number.isInteger(ordinal)) return;
    // Already started: an earlier rolling delete for this revision, or a pod on it (an upscale's new pod counts, as for the gate).
    if (set.rolled?.revision === revision) return;
    const onRevision = [...this.pods.entries()].some(
      ([k, p]) =>
        k.startsWith(`${namespace}/`) && p.owner === before.owner && !p.terminating && p.revision === revision,
    );
    set.rolled = { revision, at: now };
    if (onRevision) return;
    this.startsSeen++;
    if (!set.gated || set.group === undefined) return;
    const after = [...this.sets.entries()]
      .filter(
        ([k, s]) =>
          k.startsWith(`${namespace}/`) &&
          k !== `${namespace}/${before.owner}` &&
          s.group === set.group &&
          s.rolled !== undefined &&
          s.rolled.revision === s.updateRevision &&
          s.rolled.at > set.revisionSince,
      )
      .map(([k]) => k.slice(namespace.length + 1));
    if (after.length === 0) return;
    const stamped = Date.parse(object.metadata?.deletionTimestamp as unknown as string);
    const grace = (object.metadata?.deletionGracePeriodSeconds ?? 0) * 1000;
    const earliest = Number.isFinite(stamped) ? Math.min(stamped - grace, now) : now;
    this.candidates.push({
      due: now + START_DEFER_MS,
      ordinal,
      start: {
        namespace,
        statefulSet: before.owner,
        pod: name,
        earliest,
        latest: Math.min(now, earliest + 1000),
        after,
      },
    });
  }

  /** Judges the candidates whose time has come: a delete at an ordinal a recent spec.replicas excludes is a downscale's. */
  tick(now: number): GateStart[] {
    const done: GateStart[] = [];
    for (let i = this.candidates.length - 1; i >= 0; i--) {
      const c = this.candidates[i]!;
      if (c.due > now) continue;
      this.candidates.splice(i, 1);
      const set = this.sets.get(`${c.start.namespace}/${c.start.statefulSet}`);
      const near = (set?.replicas ?? []).filter((r, j, all) => {
        const until = all[j + 1]?.at ?? Infinity;
        return until >= c.start.earliest - 10_000 && r.at <= c.due;
      });
      if (near.some((r) => c.ordinal >= r.value)) continue;
      done.push(c.start);
    }
    this.starts.push(...done);
    return done;
  }
}
