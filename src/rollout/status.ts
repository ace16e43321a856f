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
import type { KubeClient } from '../runtime/kube/client.ts';
import { isAlreadyExists, isNotFound } from '../runtime/kube/errors.ts';
import { resources, type ConfigMap } from '../runtime/kube/types.ts';
import type { Clock, Timer } from '../runtime/clock.ts';
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

  constructor(options: { client: KubeClient; clock: Clock; logger: Logger }) {
    this.client = options.client;
    this.clock = options.clock;
    this.log = options.logger;
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
    return writableAt(
      this.written.get(namespace) ?? new Map(),
      this.groups(namespace),
      this.lastWriteAt.get(namespace),
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
      } catch (error) {
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
    // One request per write: a JSON Patch that replaces the whole data map
    // needs no read first and no resourceVersion (only the leader writes
    // here), and drops the keys of groups that are gone.
    const replaceData = [{ op: 'add', path: '/data', value: data }];
    const where = { namespace, name: STATUS_CONFIGMAP };
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await this.client.patch<ConfigMap>(resources.configMaps, where, 'json', replaceData, { timeoutMs: 10_000 });
        return;
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      try {
        await this.client.create<ConfigMap>(
          resources.configMaps,
          {
            metadata: { name: STATUS_CONFIGMAP, namespace, labels: { 'app.kubernetes.io/managed-by': 'stateward' } },
            data,
          },
          { timeoutMs: 10_000 },
        );
        return;
      } catch (error) {
        if (!isAlreadyExists(error)) throw error;
      }
    }
    throw new Error(`ConfigMap ${namespace}/${STATUS_CONFIGMAP} kept appearing and disappearing under us`);
  }
}
