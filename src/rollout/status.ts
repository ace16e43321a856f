// A machine-readable status of every rollout group, one ConfigMap per
// namespace (data key = group name, value = JSON), for the CLI, the web view
// and anyone with kubectl:
//   kubectl get configmap stateward-rollout-status -o jsonpath='{.data.ingester}'
// Written only when something other than the timestamp changed, batched.
import type { KubeClient } from '../runtime/kube/client.ts';
import { isAlreadyExists, isNotFound } from '../runtime/kube/errors.ts';
import { resources, type ConfigMap } from '../runtime/kube/types.ts';
import type { Clock, Timer } from '../runtime/clock.ts';
import type { Logger } from '../runtime/log/logger.ts';
import type { Plan } from './planner.ts';

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

export class StatusPublisher {
  private readonly client: KubeClient;
  private readonly clock: Clock;
  private readonly log: Logger;
  /** Latest status per namespace and key; undefined marks a group to remove. */
  private readonly latest = new Map<string, Map<string, GroupStatus | undefined>>();
  private readonly dirty = new Set<string>();
  private timer: Timer | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private readonly delayMs: number;

  constructor(options: { client: KubeClient; clock: Clock; logger: Logger; delayMs?: number }) {
    this.client = options.client;
    this.clock = options.clock;
    this.log = options.logger;
    this.delayMs = options.delayMs ?? 500;
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

  private markDirty(namespace: string): void {
    this.dirty.add(namespace);
    this.timer ??= this.clock.setTimer(this.delayMs, () => {
      this.timer = undefined;
      this.flushing = this.flushing.then(() => this.flush());
    });
  }

  /** Writes every dirty namespace's ConfigMap now. */
  async flush(): Promise<void> {
    const namespaces = [...this.dirty];
    this.dirty.clear();
    for (const namespace of namespaces) {
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

  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    await this.flushing;
  }

  private async write(namespace: string): Promise<void> {
    const groups = this.groups(namespace);
    const data: Record<string, string> = {};
    for (const [key, status] of groups) if (status) data[key] = JSON.stringify(status);
    for (const [key, status] of [...groups]) if (!status) groups.delete(key);
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
