// Replica coordination's imperative shell, run inside a rollout group's
// reconcile before the rollout step, as in rollout-operator: followers follow
// their leader (a whole chain in one pass), StatefulSets mirror a reference
// resource's scale, status.replicas is written back. Replica changes are
// ordinary patches, so the admission webhooks see them. Errors are reported
// and the rollout goes on (rollout-operator's choice, which avoided an
// HPA/rollout live-lock).
import type { Runtime } from '../runtime/operator.ts';
import type { Logger } from '../runtime/log/logger.ts';
import { resources, type StatefulSet } from '../runtime/kube/types.ts';
import { delayedDownscaleConfig, mirrorReference, mirrorTarget, nameOf, planGroupReplicas, writeBack, MIRROR_WRITE_BACK_ANNOTATION_KEY } from './plan.ts';
import { validateScalingMetadata } from './validate.ts';
import { ScaleClient } from './scaleclient.ts';

export class ReplicaCoordinator {
  private readonly runtime: Runtime;
  private readonly log: Logger;
  private readonly scales: ScaleClient;
  /** Warnings already reported, so a repeat is not a new Event every reconcile. */
  private readonly reported = new Set<string>();
  /**
   * Replicas we just set, until the cache shows them: a reconcile that runs
   * before the watch delivers our own patch must not act on the old count.
   */
  private readonly expected = new Map<string, { replicas: number; at: number }>();

  constructor(runtime: Runtime) {
    this.runtime = runtime;
    this.log = runtime.logger.child({ controller: 'scaling' });
    this.scales = new ScaleClient(runtime.client);
  }

  private warn(set: StatefulSet, reason: string, message: string): void {
    const key = `${set.metadata?.namespace}/${nameOf(set)}:${message}`;
    if (this.reported.has(key)) return;
    this.reported.add(key);
    this.log.warn(message, { statefulSet: nameOf(set), namespace: set.metadata?.namespace });
    this.runtime.events.event({ apiVersion: 'apps/v1', kind: 'StatefulSet', namespace: set.metadata?.namespace, name: nameOf(set), uid: set.metadata?.uid ?? '' }, 'Warning', reason, 'Scale', message);
  }

  private async setReplicas(set: StatefulSet, replicas: number, why: string): Promise<boolean> {
    if (!this.runtime.isLeader()) return false;
    try {
      await this.runtime.client.patch(resources.statefulSets, { namespace: set.metadata?.namespace ?? '', name: nameOf(set) }, 'strategic', { spec: { replicas } }, { timeoutMs: 15_000 });
    } catch (error) {
      // A webhook may deny it (prepare-downscale's min-time, no-downscale): reported, retried later.
      this.warn(set, 'ScaleFailed', `could not scale ${nameOf(set)} to ${replicas}: ${error instanceof Error ? error.message : String(error)}`);
      return false;
    }
    this.expected.set(`${set.metadata?.namespace}/${nameOf(set)}`, { replicas, at: this.runtime.clock.now() });
    this.log.info(`scaled ${nameOf(set)} from ${set.spec?.replicas ?? 1} to ${replicas} replicas: ${why}`, { statefulSet: nameOf(set) });
    this.runtime.events.event({ apiVersion: 'apps/v1', kind: 'StatefulSet', namespace: set.metadata?.namespace, name: nameOf(set), uid: set.metadata?.uid ?? '' }, 'Normal', 'ScaledReplicas', 'Scale', `scaled from ${set.spec?.replicas ?? 1} to ${replicas} replicas: ${why}`);
    return true;
  }

  private withExpectedReplicas(set: StatefulSet): StatefulSet {
    const key = `${set.metadata?.namespace}/${nameOf(set)}`;
    const expected = this.expected.get(key);
    if (!expected) return set;
    if (set.spec?.replicas === expected.replicas || this.runtime.clock.now() - expected.at > 30_000) {
      this.expected.delete(key);
      return set;
    }
    // A copy: the cache's objects are shared and never mutated.
    return { ...set, spec: { ...set.spec!, replicas: expected.replicas } };
  }

  /** Adjusts the group's replicas; true when a StatefulSet was changed (the rollout step then waits for the next reconcile). */
  async adjust(cached: StatefulSet[]): Promise<boolean> {
    const sets = cached.map((set) => this.withExpectedReplicas(set));
    for (const set of sets) for (const warning of validateScalingMetadata(set)) this.warn(set, 'InvalidScalingMetadata', warning);
    const plan = planGroupReplicas({ group: sets, now: this.runtime.clock.now() });
    for (const error of plan.errors) {
      const set = sets.find((s) => nameOf(s) === error.statefulSet) ?? sets[0]!;
      this.warn(set, 'ScalingError', error.error);
    }
    for (const warning of plan.warnings) {
      const set = sets.find((s) => nameOf(s) === warning.statefulSet) ?? sets[0]!;
      this.warn(set, 'InvalidScalingMetadata', warning.warning);
    }
    let changed = false;
    // The whole chain in one pass: a leader's change is applied before its followers'.
    for (const change of plan.changes) {
      const set = sets.find((s) => nameOf(s) === change.statefulSet);
      if (set && (await this.setReplicas(set, change.to, change.reason))) changed = true;
    }
    if (changed) return true;
    for (const set of sets) {
      const reference = mirrorReference(set);
      if (!reference) continue;
      if ('error' in reference) {
        this.warn(set, 'InvalidScalingMetadata', reference.error);
        continue;
      }
      const ref = { apiVersion: reference.apiVersion, kind: reference.kind, namespace: set.metadata?.namespace ?? '', name: reference.name };
      let scale;
      try {
        scale = await this.scales.getScale(ref);
      } catch (error) {
        this.warn(set, 'ScalingError', `cannot read the scale of ${reference.kind} ${reference.name}: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      const target = mirrorTarget({ sts: set, referenceReplicas: scale.spec?.replicas ?? 0 });
      if (target.warning) this.warn(set, 'InvalidScalingMetadata', target.warning);
      let replicas = target.current;
      if (target.action === 'scale-up' || (target.action === 'scale-down' && delayedDownscaleConfig(set) === undefined)) {
        if (await this.setReplicas(set, target.target, target.reason)) {
          replicas = target.target;
          changed = true;
        }
      } else if (target.action === 'scale-down') {
        this.warn(set, 'DelayedDownscaleNotSupported', `${set.metadata?.name} asks for a delayed downscale, which Stateward does not carry out yet; staying at ${target.current} replicas`);
      }
      if (scale.status?.replicas !== replicas && writeBack(set.metadata?.annotations?.[MIRROR_WRITE_BACK_ANNOTATION_KEY])) {
        try {
          await this.scales.writeBackStatusReplicas(ref, replicas);
        } catch (error) {
          this.log.warn('could not write status.replicas back to the reference resource', { statefulSet: nameOf(set), err: error instanceof Error ? error.message : String(error) });
        }
      }
      if (changed) return true;
    }
    return changed;
  }
}
