// The rollout capability: watches StatefulSets with a rollout-group label and
// their pods, reconciles a group within milliseconds of any change to it (and
// every -reconcile.interval regardless), plans with the pure planner and
// carries out the plan: deletes pods, advances currentRevision, reports.
import type { FlagSet } from '../runtime/flags/flagset.ts';
import { informerFor, type Informer } from '../runtime/informer/informer.ts';
import { isConflict, isNotFound } from '../runtime/kube/errors.ts';
import { resources, type Pod, type StatefulSet } from '../runtime/kube/types.ts';
import type { Logger } from '../runtime/log/logger.ts';
import type { Capability, Runtime } from '../runtime/operator.ts';
import { Controller, type Reconciler, type Term } from '../runtime/controller/runner.ts';
import type { HandlerResult } from '../runtime/workqueue/workqueue.ts';
import { tracer } from '../runtime/tracing/tracing.ts';
import { INDEX, workloadCache } from '../workloads/cache.ts';
import { RolloutMetrics } from './rolloutmetrics.ts';
import { PACE_WAITS, STATUS_PENDING_WAIT, statusPending, type Deletion, type Plan } from './planner.ts';
import { deletionNote, DeletionDigests, type DeletionReport } from './deletionevents.ts';
import { CurrentRevisionWriter, type AdvanceOutcome } from './revision.ts';
import { groupSnapshot, type GroupSnapshot } from './snapshot.ts';
import { RolloutGate } from './healthcheck/rolloutgate.ts';
import { groupStatus, type GroupStatus, StatusPublisher, ZPDB_WAIT_CODE } from './status.ts';
import { rolloutTimelines, type RolloutTimelines } from './rollouttimeline.ts';
import { planDecidesNothing, ResyncGate } from './resync.ts';
import { ROLLOUT_GROUP_LABEL } from '../vocabulary/keys.ts';

/** What the rollout controller needs of the zone-aware disruption budgets (drain/zpdb/): whether one more rolling delete fits. */
export interface RolloutBudget {
  allowRolloutDelete(
    pod: Pod,
    rolloutMaxUnavailable: number,
  ): Promise<{ allowed: true } | { allowed: false; message: string }>;
}

/** What the rollout controller needs of replica coordination (downscale/): a group's replicas set before it rolls, and when to look again. */
export interface RolloutScaling {
  adjust(group: StatefulSet[]): Promise<boolean>;
  /** Whether the group's replicas may change without an event of its own objects: then every resync reconciles it. */
  involves(group: StatefulSet[]): boolean;
  onRequeue(listener: (namespace: string, statefulSet: string) => void): void;
}

/** The services main.ts builds once per operator and shares with other capabilities. */
export interface RolloutServices {
  budget(runtime: Runtime): RolloutBudget;
  /** Absent: replicas are left as they are. */
  scaling?(runtime: Runtime): RolloutScaling;
  /** The health gates, shared with the web view (absent: the controller makes its own). */
  gate?(runtime: Runtime): RolloutGate;
}

export interface RolloutOptions {
  reconcileIntervalMs: number;
}

export function registerRolloutFlags(fs: FlagSet): () => RolloutOptions {
  const interval = fs.duration(
    'reconcile.interval',
    5_000,
    'Interval at which every rollout group is reconciled even without a change (changes are reconciled at once).',
  );
  return () => ({ reconcileIntervalMs: interval.value });
}

const groupKey = (namespace: string, group: string) => `${namespace}/${group}`;
function splitKey(key: string): { namespace: string; group: string } {
  const slash = key.indexOf('/');
  return { namespace: key.slice(0, slash), group: key.slice(slash + 1) };
}

/** How long a pod we deleted counts as going away even if the cache has not seen it yet. */
const DELETE_EXPECTATION_MS = 60_000;

/**
 * When a group waiting for the StatefulSet controller's status, or whose
 * status write met a conflict, is reconciled again at the latest. The
 * controller's status write is a watch event that queues the group at once;
 * this only covers a missed one, sooner than -reconcile.interval.
 */
const REQUEUE_MS = 1_000;

/**
 * How long a wait of the rollout's own pace (PACE_WAITS: its deleted pods
 * terminating and coming back) lasts before it is a RolloutWaiting Event: a
 * pod that takes longer than this to come back, or to go, is worth a look;
 * one Event per pod of a healthy rollout is not (issue 19).
 */
export const PACE_NEWS_MS = 30_000;

/** What carrying a plan out came to, beyond the plan itself. */
interface Execution {
  /** The zone-aware budget refused the group's next delete. */
  budgetWait?: { statefulSet: string; message: string };
  /** A write met a conflict (the object changed under us): reconcile again, not a failure. */
  requeue?: boolean;
}

export class RolloutController implements Reconciler {
  private readonly runtime: Runtime;
  private readonly options: RolloutOptions;
  private readonly log: Logger;
  private readonly sets: Informer<StatefulSet>[];
  private readonly pods: Informer<Pod>[];
  private readonly metrics: RolloutMetrics;
  private readonly status: StatusPublisher;
  /** The term-scoped loop: a queue of group keys, 4 workers while leading, the periodic resync beside them. */
  private readonly controller: Controller;
  /** Pods we deleted whose deletion the cache may not show yet: uid → when (monotonic). */
  private readonly expectedDeletions = new Map<string, number>();
  /** Last wait/blocked message per group, so repeats do not become new Events. */
  private readonly lastReported = new Map<string, string>();
  /** Per group, the wait of the rollout's own pace it is in and since when (monotonic): reported once it lasts. */
  private readonly paceWaits = new Map<string, { wait: string; since: number }>();
  private readonly deletionDigests = new DeletionDigests();
  private readonly knownGroups = new Set<string>();
  /** Per group: StatefulSet uid → the pending status already logged for it, so each is logged once. */
  private readonly pendingLogged = new Map<string, Map<string, string>>();
  private readonly revisions: CurrentRevisionWriter;
  private readonly scaling: RolloutScaling | undefined;
  private readonly budgets: RolloutBudget;
  /** Health-gated rollouts: the gate between StatefulSets and the start stamps (healthcheck/). */
  private readonly gate: RolloutGate;
  private readonly resyncGate = new ResyncGate();
  /** Each group's last rollout, StatefulSet by StatefulSet: published with its status, read by the web view. */
  private readonly timelines: RolloutTimelines;

  constructor(runtime: Runtime, options: RolloutOptions, services: RolloutServices) {
    this.runtime = runtime;
    this.options = options;
    this.log = runtime.logger.child({ controller: 'rollout' });
    this.controller = new Controller({
      runtime,
      reconciler: this,
      workers: 4,
      queueName: 'rollout',
      failures: { logger: this.log, message: 'reconcile failed; retrying', keyField: 'group' },
      enqueueAll: (term) => {
        this.resyncGate.clear();
        for (const key of this.allGroups()) term.add(key);
      },
      alongside: (term) => this.resync(term),
      afterTerm: () => this.forgetTerm(),
    });
    const cache = workloadCache(runtime);
    this.sets = cache.statefulSets;
    this.pods = cache.pods;
    this.metrics = new RolloutMetrics(runtime.registry, {
      intervalMs: options.reconcileIntervalMs,
      monotonic: () => runtime.clock.monotonic(),
      now: () => runtime.clock.now(),
    });
    this.status = new StatusPublisher({
      client: runtime.client,
      clock: runtime.clock,
      logger: this.log,
      events: runtime.events,
    });
    this.timelines = rolloutTimelines(runtime);
    this.budgets = services.budget(runtime);
    this.gate = services.gate?.(runtime) ?? new RolloutGate(runtime);
    this.revisions = new CurrentRevisionWriter({
      read: (namespace, name) =>
        runtime.client.get<StatefulSet>(resources.statefulSets, { namespace, name }, { timeoutMs: 30_000 }),
      writeStatus: (set) =>
        runtime.client.update<StatefulSet>(resources.statefulSets, set, { subresource: 'status', timeoutMs: 30_000 }),
    });
    this.scaling = services.scaling?.(runtime);
    this.scaling?.onRequeue((namespace, name) => {
      const set = this.setInformer(namespace)?.get(namespace, name);
      if (set) this.enqueueSet(set);
    });
    const multiNamespace = runtime.config.watchNamespaces.length > 1 || runtime.config.watchNamespaces.includes('*');
    this.metricGroup = (namespace, group) => (multiNamespace ? `${namespace}/${group}` : group);
    for (const informer of this.sets) {
      informer.addHandlers({
        onAdd: (s) => this.enqueueSet(s),
        onUpdate: (old, s) => {
          this.enqueueSet(s);
          if (old.metadata?.labels?.[ROLLOUT_GROUP_LABEL] !== s.metadata?.labels?.[ROLLOUT_GROUP_LABEL])
            this.enqueueSet(old);
        },
        onDelete: (s) => {
          this.revisions.forget(s.metadata?.uid ?? '');
          this.enqueueSet(s);
        },
      });
    }
    for (const informer of this.pods) {
      informer.addHandlers({
        onAdd: (p) => this.enqueuePod(p),
        onUpdate: (_old, p) => this.enqueuePod(p),
        onDelete: (p) => {
          this.expectedDeletions.delete(p.metadata?.uid ?? '');
          this.enqueuePod(p);
        },
      });
    }
  }

  private readonly metricGroup: (namespace: string, group: string) => string;

  private enqueueSet(set: StatefulSet): void {
    const group = set.metadata?.labels?.[ROLLOUT_GROUP_LABEL];
    if (group === undefined || !set.metadata?.namespace || !this.controller.running) return;
    const key = groupKey(set.metadata.namespace, group);
    this.unsettle(key);
    this.controller.add(key);
  }

  /** Something the group's plan reads changed: it is planned on its next resync, and its resyncs are counted as they run. */
  private unsettle(key: string): void {
    if (this.resyncGate.isSettled(key)) {
      const { namespace, group } = splitKey(key);
      this.metrics.unsettle(this.metricGroup(namespace, group));
    }
    this.resyncGate.changed(key);
  }

  private enqueuePod(pod: Pod): void {
    const owner = pod.metadata?.ownerReferences?.find((r) => r.controller && r.kind === 'StatefulSet');
    const namespace = pod.metadata?.namespace;
    if (!namespace) return;
    if (!owner) {
      // An orphan counts for any StatefulSet of its namespace that selects
      // it (podsOf); it is planned at the next resync, as it always was.
      if (!pod.metadata?.ownerReferences?.some((r) => r.controller)) this.unsettleNamespace(namespace);
      return;
    }
    const set = this.setInformer(namespace)?.get(namespace, owner.name);
    if (set) this.enqueueSet(set);
  }

  private unsettleNamespace(namespace: string): void {
    for (const set of this.setInformer(namespace)?.list() ?? []) {
      const group = set.metadata?.labels?.[ROLLOUT_GROUP_LABEL];
      if (group !== undefined && set.metadata?.namespace === namespace) this.unsettle(groupKey(namespace, group));
    }
  }

  private setInformer(namespace: string): Informer<StatefulSet> | undefined {
    return informerFor(this.sets, namespace);
  }

  private podInformer(namespace: string): Informer<Pod> | undefined {
    return informerFor(this.pods, namespace);
  }

  private allGroups(): string[] {
    const keys = new Set<string>();
    for (const informer of this.sets) {
      for (const set of informer.list()) {
        const group = set.metadata?.labels?.[ROLLOUT_GROUP_LABEL];
        if (group !== undefined && set.metadata?.namespace) keys.add(groupKey(set.metadata.namespace, group));
      }
    }
    return [...keys];
  }

  /** Runs while this replica leads: a fresh queue, workers, and the periodic resync. */
  lead(signal: AbortSignal): Promise<void> {
    return this.controller.run(signal);
  }

  /** Every -reconcile.interval, the groups that are not settled (resync.ts) are queued again. */
  private async resync(term: Term): Promise<void> {
    const { signal } = term;
    while (!signal.aborted) {
      try {
        await this.runtime.clock.sleep(this.options.reconcileIntervalMs, signal);
      } catch {
        return;
      }
      let planned = 0;
      for (const key of new Set([...this.allGroups(), ...this.knownGroups])) {
        // A settled group's resyncs are counted by its metrics, not run (resync.ts).
        if (this.resyncGate.isSettled(key)) continue;
        term.add(key);
        planned++;
      }
      // Nothing to plan until a group changes: no timer meanwhile.
      if (planned === 0) await this.resyncGate.untilChanged(signal);
    }
  }

  /** What a term kept about its groups, once it has ended. */
  private async forgetTerm(): Promise<void> {
    // This term's gathered deletes happened: they are told (Events are recorded by the runtime, not the term).
    this.reportDeletions(this.deletionDigests.flush(this.runtime.clock.monotonic()));
    this.paceWaits.clear();
    await this.status.stop();
    // A standby reports no groups: its last values would go stale beside the new leader's.
    for (const key of this.knownGroups) {
      const { namespace, group } = splitKey(key);
      this.metrics.forget(this.metricGroup(namespace, group));
    }
    this.knownGroups.clear();
    this.timelines.clear();
    this.pendingLogged.clear();
    this.resyncGate.clear();
  }

  snapshot(namespace: string, group: string): GroupSnapshot {
    const sets =
      this.setInformer(namespace)
        ?.byIndex(INDEX.setsByGroup, group)
        .filter((s) => s.metadata?.namespace === namespace) ?? [];
    const podInformer = this.podInformer(namespace);
    // An in-process window: a wall clock stepping forward would forget our deletes at once.
    const now = this.runtime.clock.monotonic();
    for (const [uid, at] of this.expectedDeletions)
      if (now - at > DELETE_EXPECTATION_MS) this.expectedDeletions.delete(uid);
    const snapshot = groupSnapshot(namespace, group, sets, (set) => {
      // Indexed lookups only: a reconcile must not scan every pod of the namespace.
      const orphans =
        podInformer?.byIndex(INDEX.orphanPods, '').filter((p) => p.metadata?.namespace === namespace) ?? [];
      return [...(podInformer?.byIndex(INDEX.podsByOwner, set.metadata?.uid ?? '') ?? []), ...orphans];
    });
    for (const view of snapshot.statefulSets) {
      // A pod we just deleted is going away even if the cache does not show it yet:
      // counting it as Ready would let the next reconcile exceed the budget.
      view.pods = view.pods.map((p) =>
        this.expectedDeletions.has(p.uid) ? { ...p, ready: false, terminating: true } : p,
      );
    }
    return snapshot;
  }

  reconcile(key: string): Promise<HandlerResult> {
    this.resyncGate.begin(key);
    const outcome = { settled: false };
    const { namespace, group } = splitKey(key);
    const run = () =>
      this.reconcileGroup(key, outcome).finally(() => {
        if (!this.resyncGate.end(key, outcome.settled)) return;
        this.metrics.settle(this.metricGroup(namespace, group));
        this.log.debug(
          'group settled: resyncs count it as reconciled without planning it until one of its objects changes',
          {
            namespace,
            group,
          },
        );
      });
    const t = tracer();
    if (t === undefined) return run();
    // One span per reconcile of a group: the API calls it makes are its children.
    return t.span(
      'rollout.reconcile_group',
      { attributes: { 'rollout.group': group, 'k8s.namespace.name': namespace } },
      run,
    );
  }

  /** `outcome.settled` is set when the reconcile decided nothing that a resync could decide differently (resync.ts). */
  private async reconcileGroup(key: string, outcome: { settled: boolean }): Promise<HandlerResult> {
    const { namespace, group } = splitKey(key);
    let snapshot = this.snapshot(namespace, group);
    const metricGroup = this.metricGroup(namespace, group);
    if (snapshot.statefulSets.length === 0) {
      this.resyncGate.forget(key);
      this.knownGroups.delete(key);
      this.metrics.forget(metricGroup);
      this.status.remove(namespace, group);
      this.timelines.forget(namespace, group);
      this.lastReported.delete(key);
      this.paceWaits.delete(key);
      this.pendingLogged.delete(key);
      this.reportDeletions(this.deletionDigests.flush(this.runtime.clock.monotonic(), key));
      return;
    }
    this.knownGroups.add(key);
    const done = this.metrics.begin(metricGroup);
    // Replicas first, as rollout-operator: a group whose replicas just changed
    // is rolled on the next reconcile, which the change itself triggers.
    const sets =
      this.setInformer(namespace)
        ?.byIndex(INDEX.setsByGroup, group)
        .filter((s) => s.metadata?.namespace === namespace) ?? [];
    if (this.scaling) {
      if (
        await this.scaling.adjust(sets).catch((error: unknown) => {
          this.log.warn('replica adjustment failed; rolling out anyway', {
            group: key,
            err: error instanceof Error ? error.message : String(error),
          });
          return false;
        })
      ) {
        done('success');
        return;
      }
      // Adjusting may have waited on the API and webhooks for seconds: plan on what the caches say now.
      snapshot = this.snapshot(namespace, group);
      if (snapshot.statefulSets.length === 0) {
        done('success');
        return;
      }
    }
    const { plan, requeueAfterMs: gateRequeueMs } = await this.gate.plan(metricGroup, snapshot, (name) =>
      this.setInformer(namespace)?.get(namespace, name),
    );
    this.logPendingStatus(key, plan, snapshot);
    let execution: Execution = {};
    try {
      execution = await this.execute(key, plan, snapshot);
      // A group waiting for its StatefulSets' first status, or a write that
      // met a conflict, is a success that is reconciled again, not a failure.
      done(plan.blocked || plan.errors.length > 0 ? 'failure' : 'success');
    } catch (error) {
      done('failure');
      throw error;
    } finally {
      // Wall clock: `since` is a timestamp in the published status.
      const report = this.gate.report(metricGroup, plan);
      const status = { ...groupStatus(plan, this.runtime.clock.now()), ...(report ? { healthGate: report } : {}) };
      // The budget is asked outside the plan: its refusal is why the group waits.
      const budgetWait = execution.budgetWait;
      const published: GroupStatus = budgetWait
        ? { ...status, phase: 'waiting', waitingFor: { code: ZPDB_WAIT_CODE, ...budgetWait } }
        : status;
      this.status.publish(this.withTimeline(published));
    }
    if (plan.errors.length > 0) throw new Error(plan.errors.map((e) => e.message).join('; '));
    if (execution.requeue || plan.waiting?.code === STATUS_PENDING_WAIT) return { requeueAfterMs: REQUEUE_MS };
    // A shut health gate is asked again when its next evaluation is due.
    if (gateRequeueMs !== undefined) return { requeueAfterMs: gateRequeueMs };
    outcome.settled =
      planDecidesNothing(plan) && execution.budgetWait === undefined && !(this.scaling?.involves(sets) ?? false);
    // A settled group is not planned again until it changes: nothing of it may stay gathered.
    if (outcome.settled) this.reportDeletions(this.deletionDigests.flush(this.runtime.clock.monotonic(), key));
    return undefined;
  }

  /** The status with the group's rollout timeline, recorded from it (rollouttimeline.ts). */
  private withTimeline(status: GroupStatus): GroupStatus {
    const timeline = this.timelines.record(status.namespace, status.group, status, this.runtime.clock.now());
    return timeline ? { ...status, timeline } : status;
  }

  /**
   * Waiting for the StatefulSet controller's status is logged once per
   * StatefulSet and episode (its first status; each spec generation it has
   * not caught up with), not on every reconcile: a new group is reconciled on
   * every event of its pods meanwhile.
   */
  private logPendingStatus(key: string, plan: Plan, snapshot: GroupSnapshot): void {
    let logged = this.pendingLogged.get(key);
    for (const set of snapshot.statefulSets) {
      if (statusPending(set) === undefined) logged?.delete(set.uid);
    }
    if (plan.waiting?.code !== STATUS_PENDING_WAIT) {
      if (logged?.size === 0) this.pendingLogged.delete(key);
      return;
    }
    const set = snapshot.statefulSets.find((s) => s.name === plan.waiting?.statefulSet);
    if (!set) return;
    const episode = set.currentRevision && set.updateRevision ? `generation ${set.generation ?? ''}` : 'first';
    if (!logged) this.pendingLogged.set(key, (logged = new Map<string, string>()));
    if (logged.get(set.uid) === episode) return;
    logged.set(set.uid, episode);
    const log = this.log.child({ namespace: plan.namespace, group: plan.group });
    // A new StatefulSet is worth a line; the lag after each template change is routine.
    if (episode === 'first') log.info(plan.waiting.message, { statefulSet: set.name, code: plan.waiting.code });
    else log.debug(plan.waiting.message, { statefulSet: set.name, code: plan.waiting.code });
  }

  private regarding(namespace: string, name: string, snapshot: GroupSnapshot) {
    return {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      namespace,
      name,
      uid: snapshot.statefulSets.find((s) => s.name === name)?.uid ?? '',
    };
  }

  /** Carries the plan out; says whether the zone-aware budget stopped a delete, and whether a write met a conflict. */
  private async execute(key: string, plan: Plan, snapshot: GroupSnapshot): Promise<Execution> {
    const { namespace, group } = plan;
    const log = this.log.child({ namespace, group });
    // Deletes gathered a window ago are told on any reconcile, a blocked group's too.
    this.reportDeletions(this.deletionDigests.due(this.runtime.clock.monotonic()));
    this.reportWarnings(key, plan, snapshot, log);
    this.metrics.setBlocked(this.metricGroup(namespace, group), plan.blocked !== undefined);
    if (plan.blocked) {
      this.reportBlocked(key, plan.blocked, plan, snapshot, log);
      return {};
    }
    // The start stamp goes before the first delete of a gated group's StatefulSet (healthcheck/stamps.ts).
    if (!(await this.gate.beforeDeletes(plan, snapshot, log))) return { requeue: true };
    const deletions = await this.deletePods(key, plan, snapshot, log);
    if (deletions.requeue) return deletions;
    const { budgetWait } = deletions;
    const revisions = await this.advanceRevisions(plan, snapshot, log);
    if (revisions.lostLead) return { ...(budgetWait ? { budgetWait } : {}), requeue: true };
    await this.gate.afterComplete(plan, snapshot, log);
    this.reportWaiting(key, plan, snapshot, log, budgetWait);
    return { ...(budgetWait ? { budgetWait } : {}), requeue: revisions.conflict };
  }

  /** Each invalid-annotation warning of the plan, once while it lasts: a log line and an Event. */
  private reportWarnings(key: string, plan: Plan, snapshot: GroupSnapshot, log: Logger): void {
    for (const warning of plan.warnings) {
      this.reportOnce(`${key}#warn#${warning.statefulSet}`, warning.message, () => {
        log.warn(warning.message, { statefulSet: warning.statefulSet });
        this.runtime.events.event(
          this.regarding(plan.namespace, warning.statefulSet, snapshot),
          'Warning',
          'InvalidAnnotation',
          'Validate',
          warning.message,
        );
      });
    }
  }

  /** Why the group cannot roll, once while it lasts: an error line and a RolloutBlocked Event. */
  private reportBlocked(
    key: string,
    blocked: NonNullable<Plan['blocked']>,
    plan: Plan,
    snapshot: GroupSnapshot,
    log: Logger,
  ): void {
    this.reportOnce(key, blocked.message, () => {
      log.error(blocked.message, { statefulSet: blocked.statefulSet });
      this.runtime.events.event(
        this.regarding(plan.namespace, blocked.statefulSet, snapshot),
        'Warning',
        'RolloutBlocked',
        'Rollout',
        `rollout group ${plan.group}: ${blocked.message}`,
      );
    });
  }

  /**
   * Deletes the plan's pods, each only while this replica leads and once the
   * zone-aware budget allows it; the first refusal ends the round
   * (`budgetWait`), and a lost lease ends it with a requeue.
   */
  private async deletePods(key: string, plan: Plan, snapshot: GroupSnapshot, log: Logger): Promise<Execution> {
    const { namespace } = plan;
    for (const deletion of plan.deletions) {
      // Re-check right before every write: a replica that lost its lease must
      // not act; one whose renewal is only late acts on the retry.
      if (!this.runtime.isLeader()) return { requeue: true };
      // A zone-aware disruption budget covers rolling deletes as it covers
      // evictions; a denial waits for the next reconcile.
      const pod = this.podInformer(namespace)?.get(namespace, deletion.pod);
      // The planned pod is gone or was replaced under its name since the
      // snapshot: nothing of the plan's to delete, and the replacement must
      // not be judged (and recorded in a budget's ledger) in its place.
      if (pod?.metadata?.uid !== deletion.uid) continue;
      const verdict = await this.budgets.allowRolloutDelete(
        pod,
        plan.sets.find((s) => s.name === deletion.statefulSet)?.maxUnavailable ?? 1,
      );
      if (!verdict.allowed)
        return { budgetWait: this.reportBudgetWait(key, plan, deletion, verdict.message, snapshot, log) };
      await this.deletePod(key, plan, deletion, snapshot, log);
    }
    return {};
  }

  /** The budget refused a delete: logged, told as a RolloutWaiting Event once per refusal message, and the group's wait. */
  private reportBudgetWait(
    key: string,
    plan: Plan,
    deletion: Deletion,
    refusal: string,
    snapshot: GroupSnapshot,
    log: Logger,
  ): { statefulSet: string; message: string } {
    const { namespace } = plan;
    const message = `waiting: deleting pod ${deletion.pod} would break its ZoneAwarePodDisruptionBudget: ${refusal}`;
    log.debug(message, { statefulSet: deletion.statefulSet });
    this.reportOnce(key, `zpdb:${refusal}`, () =>
      this.runtime.events.event(
        this.regarding(namespace, deletion.statefulSet, snapshot),
        'Normal',
        'RolloutWaiting',
        'Rollout',
        message,
      ),
    );
    return { statefulSet: deletion.statefulSet, message };
  }

  /** Deletes one pod (uid precondition; gone or replaced meanwhile is nothing to do), expects it gone, counts and gathers it. */
  private async deletePod(
    key: string,
    plan: Plan,
    deletion: Deletion,
    snapshot: GroupSnapshot,
    log: Logger,
  ): Promise<void> {
    const { namespace, group } = plan;
    const set = snapshot.statefulSets.find((s) => s.name === deletion.statefulSet)!;
    const why =
      deletion.reason === 'update' ? '' : ` (already unavailable${deletion.detail ? `: ${deletion.detail}` : ''})`;
    const note = `deleting pod ${deletion.pod} for revision ${set.updateRevision}${why}`;
    try {
      // The uid precondition: never delete a newer pod that took the name meanwhile.
      await this.runtime.client.delete(
        resources.pods,
        { namespace, name: deletion.pod },
        { uid: deletion.uid, timeoutMs: 30_000 },
      );
    } catch (error) {
      if (isNotFound(error) || isConflict(error)) return;
      throw error;
    }
    this.expectedDeletions.set(deletion.uid, this.runtime.clock.monotonic());
    this.metrics.podDeleted(this.metricGroup(namespace, group), deletion.reason);
    log.info(note, { statefulSet: deletion.statefulSet, pod: deletion.pod, reason: deletion.reason });
    const { pod: name, uid, reason, detail } = deletion;
    this.reportDeletions(
      this.deletionDigests.deleted(
        { group: key, namespace, statefulSet: deletion.statefulSet, revision: set.updateRevision ?? '' },
        { pod: name, uid, reason, ...(detail ? { detail } : {}) },
        this.runtime.clock.monotonic(),
      ),
    );
  }

  /**
   * Advances currentRevision of each StatefulSet the plan found complete and
   * tells its completion (its gathered deletes first); `conflict` when a
   * write met one, `lostLead` when this replica stopped leading before one.
   */
  private async advanceRevisions(
    plan: Plan,
    snapshot: GroupSnapshot,
    log: Logger,
  ): Promise<{ conflict: boolean; lostLead?: true }> {
    const { namespace } = plan;
    let conflict = false;
    for (const update of plan.revisionUpdates) {
      if (!this.runtime.isLeader()) return { conflict, lostLead: true };
      const outcome = await this.advanceCurrentRevision(namespace, update.statefulSet, update.revision, log);
      if (outcome === 'conflict') conflict = true;
      if (outcome !== 'advanced') continue;
      // Its deletes are told before its completion.
      this.reportDeletions(
        this.deletionDigests.flushStatefulSet(namespace, update.statefulSet, this.runtime.clock.monotonic()),
      );
      this.runtime.events.event(
        this.regarding(namespace, update.statefulSet, snapshot),
        'Normal',
        'RolloutComplete',
        'Rollout',
        `all pods of ${update.statefulSet} run revision ${update.revision} and are Ready`,
      );
    }
    return { conflict };
  }

  /** What the group waits for: a debug line, and a RolloutWaiting Event once per distinct wait that is news. */
  private reportWaiting(
    key: string,
    plan: Plan,
    snapshot: GroupSnapshot,
    log: Logger,
    budgetWait: Execution['budgetWait'],
  ): void {
    // Waiting for the StatefulSet controller's status is logged once per
    // StatefulSet (logPendingStatus) and is no Event: it is over in
    // milliseconds, and the status ConfigMap shows it while it lasts.
    const waiting = plan.deletions.length === 0 ? plan.waiting : undefined;
    if (!waiting || !PACE_WAITS.has(waiting.code)) this.paceWaits.delete(key);
    if (waiting && waiting.code !== STATUS_PENDING_WAIT) {
      log.debug(waiting.message, { code: waiting.code });
      // One Event per distinct wait (reason and StatefulSet), not per count
      // change. The rollout's own pace (its deleted pods terminating and
      // coming back) is news only once it lasts: a waiting group is planned
      // on every resync, so it is told within a resync of PACE_NEWS_MS.
      if (this.isNews(key, waiting)) {
        this.reportOnce(key, `${waiting.code}:${waiting.statefulSet ?? ''}`, () => {
          if (waiting.statefulSet)
            this.runtime.events.event(
              this.regarding(plan.namespace, waiting.statefulSet, snapshot),
              'Normal',
              'RolloutWaiting',
              'Rollout',
              waiting.message,
            );
        });
      }
    } else if (!plan.waiting && !budgetWait) {
      this.lastReported.delete(key);
    }
  }

  /**
   * With OnDelete the StatefulSet controller never advances currentRevision
   * (kubernetes#73492), so we do, as rollout-operator does: a PUT of the
   * status subresource (needs only statefulsets/status update). It is
   * written so as not to fight the StatefulSet controller, and a conflict is
   * a requeue, never a failed reconcile: see CurrentRevisionWriter.
   */
  private async advanceCurrentRevision(
    namespace: string,
    name: string,
    revision: string,
    log: Logger,
  ): Promise<AdvanceOutcome> {
    const cached = this.setInformer(namespace)?.get(namespace, name);
    if (!cached) return 'not-needed';
    const outcome = await this.revisions.advance(cached, revision);
    if (outcome === 'advanced')
      log.info(`StatefulSet ${name} fully updated to revision ${revision}`, { statefulSet: name });
    else if (outcome === 'conflict')
      log.debug(
        `StatefulSet ${name} kept changing while its currentRevision was advanced to ${revision}; reconciling again`,
        { statefulSet: name },
      );
    return outcome;
  }

  /** Whether a wait is worth an Event: any wait but the rollout's own pace, and that once it lasted PACE_NEWS_MS. */
  private isNews(key: string, waiting: { code: string; statefulSet?: string }): boolean {
    if (!PACE_WAITS.has(waiting.code)) return true;
    const now = this.runtime.clock.monotonic();
    const wait = `${waiting.code}:${waiting.statefulSet ?? ''}`;
    const since = this.paceWaits.get(key);
    if (since?.wait !== wait) {
      this.paceWaits.set(key, { wait, since: now });
      return false;
    }
    return now - since.since >= PACE_NEWS_MS;
  }

  /** Records the DeletingPod Events the digests decided on. */
  private reportDeletions(reports: DeletionReport[]): void {
    for (const report of reports) {
      const { namespace, statefulSet, pods } = report;
      const [only] = pods;
      const uid = this.setInformer(namespace)?.get(namespace, statefulSet)?.metadata?.uid ?? '';
      this.runtime.events.event(
        { apiVersion: 'apps/v1', kind: 'StatefulSet', namespace, name: statefulSet, uid },
        'Normal',
        'DeletingPod',
        'Rollout',
        deletionNote(report),
        ...(pods.length === 1 && only
          ? [{ apiVersion: 'v1', kind: 'Pod', namespace, name: only.pod, uid: only.uid }]
          : []),
      );
    }
  }

  private reportOnce(key: string, message: string, report: () => void): void {
    if (this.lastReported.get(key) === message) return;
    this.lastReported.set(key, message);
    report();
  }
}

export function rolloutCapability(options: () => RolloutOptions, services: RolloutServices): Capability {
  return {
    name: 'rollout',
    setup(runtime) {
      const controller = new RolloutController(runtime, options(), services);
      return { lead: (signal) => controller.lead(signal) };
    },
  };
}
