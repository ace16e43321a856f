// A machine-readable status of every rollout group, one ConfigMap per
// namespace (data key = group name, value = JSON), for the CLI, the web view
// and anyone with kubectl:
//   kubectl get configmap stateward-rollout-status -o jsonpath='{.data.ingester}'
// Written only when something other than the timestamp changed, and then
// at two speeds (issue 19: a 30-pod rollout wrote it 31 times, more API
// requests than its 30 deletes):
//   - at once (after BATCH_MS, which gathers the groups of one burst of
//     reconciles) when a group's state changes (stateOf): it completes, is
//     blocked or failing, starts rolling another StatefulSet, starts or
//     stops waiting on something other than its own pace (another
//     StatefulSet not Ready, a paused one, a zone-aware budget's refusal),
//     a StatefulSet's state changes, or a group appears or goes;
//   - at most every PROGRESS_MS when only progress changed: the counts of
//     Ready and updated pods, messages, and the waits of the rollout's own
//     pace (its deleted pods terminating and coming back). A zone's
//     pod-by-pod progress is a few writes, not one per pod.
// A state that lasts until its batch is written is written; one that is
// over within BATCH_MS was never written, as before.
//
// Under the Role an install already has (issue 34: grafana's Helm chart for
// rollout-operator grants nothing on ConfigMaps, its jsonnet get, update and
// create but no patch), a refused write is not retried in a loop: a refused
// patch switches the namespace to update (the object last read or written,
// guarded by its resourceVersion: still one request per write); a refused
// read, update or create keeps the namespace's status in memory only (the
// web view and /status serve it from there), said once (a warning and a
// Warning Event naming the permission), and tried once more every
// REFUSED_RETRY_MS, so a Role fixed meanwhile takes effect without a restart.
import type { GateReport } from './healthcheck/healthgates.ts';
import type { RolloutTimeline } from './rollouttimeline.ts';
import type { KubeClient } from '../runtime/kube/client.ts';
import { isAlreadyExists, isConflict, isForbidden, isNotFound } from '../runtime/kube/errors.ts';
import { resources, type ConfigMap } from '../runtime/kube/types.ts';
import type { Clock, Timer } from '../runtime/clock.ts';
import type { EventRecorder } from '../runtime/events/recorder.ts';
import type { Logger } from '../runtime/log/logger.ts';
import { PACE_WAITS, type Plan } from './planner.ts';

export const STATUS_CONFIGMAP = 'stateward-rollout-status';

/** The wait code when a ZoneAwarePodDisruptionBudget refuses the group's next delete (asked outside the planner). */
export const ZPDB_WAIT_CODE = 'zpdb-denied';

export interface GroupStatus {
  group: string;
  namespace: string;
  /** When this content was first seen (unchanged content keeps its time). */
  since: string;
  phase: 'complete' | 'rolling' | 'waiting' | 'blocked' | 'failing';
  rolling?: string;
  waitingFor?: { code: string; statefulSet?: string; message: string };
  blocked?: string;
  errors: string[];
  statefulSets: Plan['sets'];
  /** The health gate holding or letting through the next StatefulSet: each check's last values and the verdict. */
  healthGate?: GateReport;
  /** The group's last rollout, StatefulSet by StatefulSet (rollouttimeline.ts). */
  timeline?: RolloutTimeline;
}

/** ConfigMap data keys allow [-._a-zA-Z0-9]; an empty group name gets a stand-in. */
export function statusKey(group: string): string {
  return group === '' ? '_empty' : group;
}

export function groupStatus(plan: Plan, now: number): GroupStatus {
  const phase: GroupStatus['phase'] = plan.blocked
    ? 'blocked'
    : plan.errors.length > 0
      ? 'failing'
      : plan.complete
        ? 'complete'
        : plan.deletions.length > 0 || (plan.rolling && !plan.waiting)
          ? 'rolling'
          : plan.waiting
            ? 'waiting'
            : 'complete';
  return {
    group: plan.group,
    namespace: plan.namespace,
    since: new Date(now).toISOString(),
    phase,
    ...(plan.rolling ? { rolling: plan.rolling } : {}),
    ...(plan.waiting ? { waitingFor: plan.waiting } : {}),
    ...(plan.blocked ? { blocked: plan.blocked.message } : {}),
    errors: plan.errors.map((e) => e.message),
    statefulSets: plan.sets,
  };
}

const withoutTime = (s: GroupStatus) => JSON.stringify({ ...s, since: '' });

/** Gathers the groups of one burst of reconciles into one write. */
export const BATCH_MS = 500;
/** The least time between two writes of a namespace's ConfigMap that only carry progress. */
export const PROGRESS_MS = 5000;
/** After a refused (403) read or write, a namespace's status stays in memory this long before one more try. */
export const REFUSED_RETRY_MS = 10 * 60_000;

/** What to grant, for the messages: the verbs a write may use, by way of writing. */
const STATUS_GRANT = `grant get, update, create (or patch, create) on configmaps named ${STATUS_CONFIGMAP} (deploy/kustomize/rbac/PERMISSIONS.md)`;

/**
 * What a status says about the group's state, without its progress: a
 * change here is written at once. Rolling and waiting at the rollout's own
 * pace are one state, and so are a StatefulSet's rolling and waiting between
 * its batches; the counts of Ready and updated pods and the messages are
 * progress.
 */
export function stateOf(s: GroupStatus | undefined): string {
  if (!s) return '';
  const paced =
    (s.phase === 'rolling' || s.phase === 'waiting') && (!s.waitingFor || PACE_WAITS.has(s.waitingFor.code));
  const wait = paced ? [] : [s.waitingFor?.code, s.waitingFor?.statefulSet];
  const sets = s.statefulSets.map((set) => [set.name, set.state === 'waiting' ? 'rolling' : set.state]);
  return JSON.stringify([paced ? 'progress' : s.phase, s.rolling, ...wait, s.blocked, s.errors, sets]);
}

/**
 * From when (monotonic ms) a namespace's ConfigMap may be written, given the
 * state of each group as last written and the statuses to write: at any time
 * when a group's state changed (or nothing was written yet), else
 * PROGRESS_MS after the last write.
 */
export function writableAt(
  written: ReadonlyMap<string, string>,
  pending: ReadonlyMap<string, GroupStatus | undefined>,
  lastWriteAt: number | undefined,
): number {
  if (lastWriteAt === undefined) return Number.NEGATIVE_INFINITY;
  for (const [key, status] of pending)
    if ((written.get(key) ?? '') !== stateOf(status)) return Number.NEGATIVE_INFINITY;
  return lastWriteAt + PROGRESS_MS;
}

export class StatusPublisher {
  private readonly client: KubeClient;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly events: Pick<EventRecorder, 'event'> | undefined;
  /** Namespaces where patch was refused: written with update instead. */
  private readonly viaUpdate = new Set<string>();
  /** Per namespace written with update, the ConfigMap as last read or written (its resourceVersion guards the next). */
  private readonly stored = new Map<string, ConfigMap>();
  /** Per namespace whose read or write was refused, until when (monotonic) it is not tried again. */
  private readonly refusedUntil = new Map<string, number>();
  /** Namespaces whose refusal was already said (log and Event): said once per process. */
  private readonly told = new Set<string>();
  /** Latest status per namespace and key; undefined marks a group to remove. */
  private readonly latest = new Map<string, Map<string, GroupStatus | undefined>>();
  /** Per namespace, the state (stateOf) of each group as last written. */
  private readonly written = new Map<string, Map<string, string>>();
  /** Per namespace, when (monotonic) its ConfigMap was last written. */
  private readonly lastWriteAt = new Map<string, number>();
  /** Per namespace to write, when (monotonic). */
  private readonly due = new Map<string, number>();
  private timer: Timer | undefined;
  private timerAt: number | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(options: { client: KubeClient; clock: Clock; logger: Logger; events?: Pick<EventRecorder, 'event'> }) {
    this.client = options.client;
    this.clock = options.clock;
    this.log = options.logger;
    this.events = options.events;
  }

  /** Namespaces whose status is kept in memory only for now, because writing it was refused. */
  refused(): string[] {
    const now = this.clock.monotonic();
    return [...this.refusedUntil].filter(([, until]) => until > now).map(([namespace]) => namespace);
  }

  publish(status: GroupStatus): void {
    const groups = this.groups(status.namespace);
    const key = statusKey(status.group);
    const previous = groups.get(key);
    if (previous && withoutTime(previous) === withoutTime(status)) return;
    groups.set(key, status);
    this.markDirty(status.namespace);
  }

  remove(namespace: string, group: string): void {
    const groups = this.groups(namespace);
    groups.set(statusKey(group), undefined);
    this.markDirty(namespace);
  }

  get(namespace: string, group: string): GroupStatus | undefined {
    return this.latest.get(namespace)?.get(statusKey(group));
  }

  private groups(namespace: string): Map<string, GroupStatus | undefined> {
    let groups = this.latest.get(namespace);
    if (!groups) this.latest.set(namespace, (groups = new Map<string, GroupStatus | undefined>()));
    return groups;
  }

  private writableAt(namespace: string): number {
    return Math.max(
      writableAt(this.written.get(namespace) ?? new Map(), this.groups(namespace), this.lastWriteAt.get(namespace)),
      this.refusedUntil.get(namespace) ?? Number.NEGATIVE_INFINITY,
    );
  }

  private markDirty(namespace: string): void {
    const at = Math.max(this.clock.monotonic() + BATCH_MS, this.writableAt(namespace));
    const due = this.due.get(namespace);
    if (due === undefined || at < due) this.due.set(namespace, at);
    this.arm();
  }

  /** Keeps one timer armed for the namespace due first. */
  private arm(): void {
    let next: number | undefined;
    for (const at of this.due.values()) if (next === undefined || at < next) next = at;
    if (next === this.timerAt) return;
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = next;
    if (next === undefined) return;
    this.timer = this.clock.setTimer(Math.max(0, next - this.clock.monotonic()), () => {
      this.timer = undefined;
      this.timerAt = undefined;
      this.flushing = this.flushing.then(() => this.flushDue());
    });
  }

  /**
   * Writes the namespaces due. One whose state went back to what was written
   * while it waited for the batch (a delete's plan says "rolling" for a
   * moment) has only progress to write, and waits for PROGRESS_MS.
   */
  private async flushDue(): Promise<void> {
    const now = this.clock.monotonic();
    const namespaces: string[] = [];
    for (const [namespace, at] of this.due) {
      if (at > now) continue;
      const writable = this.writableAt(namespace);
      if (writable > now) this.due.set(namespace, writable);
      else namespaces.push(namespace);
    }
    await this.writeAll(namespaces);
    this.arm();
  }

  private async writeAll(namespaces: string[]): Promise<void> {
    for (const namespace of namespaces) {
      this.due.delete(namespace);
      try {
        await this.write(namespace);
        this.refusedUntil.delete(namespace);
      } catch (error) {
        if (isForbidden(error)) {
          this.refusedWrite(namespace, error);
          continue;
        }
        this.log.warn('could not write rollout status; retrying', {
          namespace,
          err: error instanceof Error ? error.message : String(error),
        });
        this.markDirty(namespace);
      }
    }
  }

  /**
   * Stepping down: unwritten progress is dropped (a replica that no longer
   * leads must not write; the next leader writes its own), and what this
   * term wrote is forgotten, since another leader may write meanwhile.
   */
  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = undefined;
    await this.flushing;
    this.due.clear();
    this.written.clear();
    this.lastWriteAt.clear();
    this.stored.clear();
  }

  /**
   * Not permitted: keep the namespace's status in memory, say so once (a
   * warning, and a Warning Event on one of its StatefulSets), and try once
   * more after REFUSED_RETRY_MS.
   */
  private refusedWrite(namespace: string, error: unknown): void {
    this.refusedUntil.set(namespace, this.clock.monotonic() + REFUSED_RETRY_MS);
    this.markDirty(namespace);
    const err = error instanceof Error ? error.message : String(error);
    if (this.told.has(namespace)) {
      this.log.debug('rollout status still not permitted; kept in memory', { namespace, err });
      return;
    }
    this.told.add(namespace);
    const note = `not permitted to write ConfigMap ${STATUS_CONFIGMAP}: the rollout status is kept in memory (the operator's /status and web view serve it) and written again only once permitted (tried every ${REFUSED_RETRY_MS / 60_000}m); ${STATUS_GRANT}`;
    this.log.warn(note, { namespace, err });
    const set = [...this.groups(namespace).values()].find((s) => s?.statefulSets[0])?.statefulSets[0];
    if (set)
      this.events?.event(
        { apiVersion: 'apps/v1', kind: 'StatefulSet', namespace, name: set.name },
        'Warning',
        'RolloutStatusNotWritten',
        'WriteStatus',
        note,
      );
  }

  private async write(namespace: string): Promise<void> {
    const groups = this.groups(namespace);
    const data: Record<string, string> = {};
    const states = new Map<string, string>();
    for (const [key, status] of groups) if (status) data[key] = JSON.stringify(status);
    for (const [key, status] of [...groups]) {
      if (status) states.set(key, stateOf(status));
      else groups.delete(key);
    }
    await this.send(namespace, data);
    this.written.set(namespace, states);
    this.lastWriteAt.set(namespace, this.clock.monotonic());
  }

  private async send(namespace: string, data: Record<string, string>): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const replaced = this.viaUpdate.has(namespace)
        ? await this.update(namespace, data)
        : await this.patch(namespace, data);
      if (replaced === 'done') return;
      if (replaced === 'again') continue;
      if (await this.create(namespace, data)) return;
    }
    throw new Error(`ConfigMap ${namespace}/${STATUS_CONFIGMAP} kept changing, appearing and disappearing under us`);
  }

  /**
   * One request per write: a JSON Patch that replaces the whole data map
   * needs no read first and no resourceVersion (only the leader writes
   * here), and drops the keys of groups that are gone. Refused: update from
   * now on (rollout-operator's jsonnet Role grants update, not patch).
   */
  private async patch(namespace: string, data: Record<string, string>): Promise<'done' | 'again' | 'missing'> {
    const replaceData = [{ op: 'add', path: '/data', value: data }];
    try {
      await this.client.patch<ConfigMap>(
        resources.configMaps,
        { namespace, name: STATUS_CONFIGMAP },
        'json',
        replaceData,
        { timeoutMs: 10_000 },
      );
      return 'done';
    } catch (error) {
      if (isNotFound(error)) return 'missing';
      if (!isForbidden(error)) throw error;
      this.viaUpdate.add(namespace);
      this.log.info(`not permitted to patch ConfigMap ${STATUS_CONFIGMAP}; writing it with update instead`, {
        namespace,
      });
      return this.update(namespace, data);
    }
  }

  /** The whole ConfigMap, guarded by the resourceVersion last seen: read only when none is known or it conflicted. */
  private async update(namespace: string, data: Record<string, string>): Promise<'done' | 'again' | 'missing'> {
    let current = this.stored.get(namespace);
    try {
      current ??= await this.client.get<ConfigMap>(
        resources.configMaps,
        { namespace, name: STATUS_CONFIGMAP },
        { timeoutMs: 10_000 },
      );
      this.stored.set(
        namespace,
        await this.client.update<ConfigMap>(resources.configMaps, { ...current, data }, { timeoutMs: 10_000 }),
      );
      return 'done';
    } catch (error) {
      this.stored.delete(namespace);
      if (isNotFound(error)) return 'missing';
      if (isConflict(error)) return 'again';
      throw error;
    }
  }

  /** False when someone else created it meanwhile. */
  private async create(namespace: string, data: Record<string, string>): Promise<boolean> {
    try {
      const created = await this.client.create<ConfigMap>(
        resources.configMaps,
        {
          metadata: { name: STATUS_CONFIGMAP, namespace, labels: { 'app.kubernetes.io/managed-by': 'stateward' } },
          data,
        },
        { timeoutMs: 10_000 },
      );
      if (this.viaUpdate.has(namespace)) this.stored.set(namespace, created);
      return true;
    } catch (error) {
      if (!isAlreadyExists(error)) throw error;
      return false;
    }
  }
}
