// What the rollout controller does for health gates, in three calls:
//   plan()           plans the group, and when the plan holds a StatefulSet
//                    at its gate, asks the gate (HealthGates) and plans
//                    again with its verdict;
//   beforeDeletes()  writes the start stamp before a StatefulSet's first
//                    delete of a rollout (false: the deletes must wait);
//   afterComplete()  removes the stamps of a finished rollout.
// A group with no StatefulSet bound to a check costs one planGroup call and
// no API request.
import type { StatefulSet } from '../../runtime/kube/types.ts';
import type { Logger } from '../../runtime/log/logger.ts';
import type { Runtime } from '../../runtime/operator.ts';
import { planGroup, type Plan } from '../planner.ts';
import type { GroupSnapshot } from '../snapshot.ts';
import { HealthGates, type GateReport } from './healthgates.ts';
import { healthCheckResource, type RolloutHealthCheck } from './resource.ts';
import { clearStamp, stampNeeded, stampsToClear, writeStamp } from './stamps.ts';

export class RolloutGate {
  private readonly gates: HealthGates;
  private readonly runtime: Runtime;

  constructor(runtime: Runtime) {
    this.runtime = runtime;
    // Optional: without the CRD (or permission to read it) every binding is an unknown check.
    this.gates = new HealthGates(
      runtime,
      runtime.informers<RolloutHealthCheck>(healthCheckResource, { optional: true }),
    );
  }

  /**
   * The group's plan with its health gate decided. `metricGroup` is the
   * rollout_group label; `setOf` finds a StatefulSet of the snapshot in the
   * cache. `requeueAfterMs`: when to evaluate again while the gate is shut.
   */
  async plan(
    metricGroup: string,
    snapshot: GroupSnapshot,
    setOf: (name: string) => StatefulSet | undefined,
  ): Promise<{ plan: Plan; requeueAfterMs?: number }> {
    const plan = planGroup(snapshot);
    const request = plan.gate;
    const set = request && setOf(request.statefulSet);
    if (!request || !set) return { plan };
    const outcome = await this.gates.evaluate(metricGroup, request, set, this.runtime.stopping);
    const gated = planGroup({ ...snapshot, gates: new Map([[request.statefulSet, outcome.verdict]]) });
    return { plan: gated, ...(outcome.requeueAfterMs !== undefined ? { requeueAfterMs: outcome.requeueAfterMs } : {}) };
  }

  /** Stamps the StatefulSet the plan starts rolling, if the group is gated. False when the stamp could not be written. */
  async beforeDeletes(plan: Plan, snapshot: GroupSnapshot, log: Logger): Promise<boolean> {
    const stamp = stampNeeded(plan, snapshot);
    if (!stamp) return true;
    if (!this.runtime.isLeader()) return false;
    try {
      await writeStamp(this.runtime.client, plan.namespace, stamp, this.runtime.clock.now());
      log.debug('health gate start stamp written', { statefulSet: stamp.statefulSet, revision: stamp.revision });
      return true;
    } catch (error) {
      log.warn('cannot write the health gate start stamp; the deletes wait', {
        statefulSet: stamp.statefulSet,
        err: error instanceof Error ? error.message : String(error),
      });
      return false;
    }
  }

  /** Removes a complete rollout's stamps; a failure is retried by the next reconcile (the stamps are still there). */
  async afterComplete(plan: Plan, snapshot: GroupSnapshot, log: Logger): Promise<void> {
    for (const name of stampsToClear(plan, snapshot)) {
      if (!this.runtime.isLeader()) return;
      await clearStamp(this.runtime.client, plan.namespace, name).catch((error: unknown) =>
        log.warn('cannot remove the health gate start stamp', {
          statefulSet: name,
          err: error instanceof Error ? error.message : String(error),
        }),
      );
    }
  }

  /** The report of the gate `plan` holds (or just let through), for the status ConfigMap and the web view. */
  report(metricGroup: string, plan: Plan): GateReport | undefined {
    const gated = plan.gate?.statefulSet;
    return gated === undefined ? undefined : this.gates.reports(metricGroup).find((r) => r.statefulSet === gated);
  }

  /** The latest gate report of each group of `namespace`, by `<namespace>/<group>` (the web view). */
  latestReports(namespace: string): Map<string, GateReport> {
    return this.gates.latestReports(namespace);
  }
}
