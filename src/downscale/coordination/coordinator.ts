// Replica coordination's imperative shell, run inside a rollout group's
// reconcile before the rollout step, as in rollout-operator: followers follow
// their leader (a whole chain in one pass), StatefulSets mirror a reference
// resource's scale, status.replicas is written back. Replica changes are
// ordinary patches, so the admission webhooks see them. Errors are reported
// and the rollout goes on (rollout-operator's choice, which avoided an
// HPA/rollout live-lock).
//
// Clocks: the windows kept here (repeated reports, our own replica patches,
// scale reads) are monotonic; the planner's `now` is the wall clock, since it
// is compared with grafana.com/last-downscale and with the pods' prepared-at
// timestamps, with the forward steps of that clock this process noted.
import { Counter } from 'prom-client';
import type { Runtime } from '../../runtime/operator.ts';
import type { Logger } from '../../runtime/log/logger.ts';
import { resources, type StatefulSet } from '../../runtime/kube/types.ts';
import { formatGoDuration } from '../../runtime/go/duration.ts';
import { informerFor } from '../../runtime/informer/informer.ts';
import { INDEX, workloadCache } from '../../workloads/cache.ts';
import { observeLastDownscales } from '../clocksteps.ts';
import { lastDownscalesFromAnnotations } from '../mintime.ts';
import { type PodCallConfig, podClient } from '../../workloads/podclient.ts';
import { planGroupReplicas } from './replicaplan.ts';
import { type MirrorTarget, mirrorReference, mirrorTarget, writeBack } from './mirror.ts';
import { type DelayedDownscaleConfig, delayedDownscaleConfig, delayedDownscaleDecision } from './delay.ts';
import { annotationsOf, labelsOf, nameOf } from '../../vocabulary/metadata.ts';
import { validateScalingMetadata } from './validate.ts';
import { ScaleClient, type Scale, type ScaleRef } from './scaleclient.ts';
import { DelayedDownscaleCalls, type DelayTarget } from './delaycalls.ts';
import {
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  LAST_DOWNSCALE_ANNOTATION_KEY,
  MIRROR_WRITE_BACK_ANNOTATION_KEY,
  PREPARE_DOWNSCALE_LABEL_KEY,
  PREPARE_DOWNSCALE_LABEL_VALUE,
} from '../../vocabulary/keys.ts';
import { formatRfc3339 } from '../../vocabulary/rfc3339.ts';

export interface ReplicaCoordinatorOptions {
  podCalls: PodCallConfig;
  /** The answers a StatefulSet's delayed downscale waited for are in: reconcile its group. */
  requeue: (namespace: string, statefulSet: string) => void;
}

/** How long a reference resource's scale read is reused. */
const SCALE_READ_TTL_MS = 1000;
const scaleKey = (ref: ScaleRef) => `${ref.namespace}/${ref.apiVersion}/${ref.kind}/${ref.name}`;

/** How long an unrecorded downscale stands in for its record on the StatefulSet (the webhook's copy deadline). */
const UNRECORDED_KEPT_MS = 60_000;

/** A repeated warning is logged and recorded again after this long, not on every reconcile. */
const REPORT_AGAIN_MS = 10 * 60_000;

export class ReplicaCoordinator {
  private readonly runtime: Runtime;
  private readonly options: ReplicaCoordinatorOptions;
  private readonly log: Logger;
  private readonly scales: ScaleClient;
  private readonly podCalls: Counter;
  private delays: DelayedDownscaleCalls;
  /** Messages reported per object, and when (monotonic), so a repeat is not a new Event every reconcile. */
  private readonly reported = new Map<string, number>();
  /**
   * Replicas we just set, until the cache shows them: a reconcile that runs
   * before the watch delivers our own patch must not act on the old count.
   */
  private readonly expected = new Map<string, { replicas: number; at: number }>();
  /**
   * Prepared downscales (ours, or seen in the cache) whose
   * grafana.com/last-downscale has not reached the cache yet: when (`wall`;
   * `at` monotonic) and the annotation then (`before`). The
   * prepare-downscale webhook records a downscale on the group's Lease and
   * copies it onto the StatefulSet only once it has landed, so a reconcile
   * in between must not plan the next zone as if none had happened (the
   * webhook would deny it).
   */
  private readonly unrecorded = new Map<string, { wall: number; at: number; before: string | undefined }>();
  /** Each StatefulSet's spec.replicas at the last reconcile of its group, to see a downscale land. */
  private readonly seenReplicas = new Map<string, number>();
  /** `at`s are monotonic here too. */
  private readonly scaleReads = new Map<string, { at: number; scale: Scale }>();

  constructor(runtime: Runtime, options: ReplicaCoordinatorOptions) {
    this.runtime = runtime;
    this.options = options;
    this.log = runtime.logger.child({ controller: 'scaling' });
    this.scales = new ScaleClient(runtime.client);
    this.podCalls = new Counter({
      name: 'stateward_delayed_downscale_pod_calls_total',
      help: 'HTTP calls to pods for delayed downscale, by method (POST prepares, DELETE cancels) and result.',
      labelNames: ['method', 'result'],
      registers: [runtime.registry],
    });
    this.delays = this.newDelayCalls();
  }

  private newDelayCalls(): DelayedDownscaleCalls {
    const { pods, statefulSets } = workloadCache(this.runtime);
    return new DelayedDownscaleCalls({
      clock: this.runtime.clock,
      log: this.log,
      clusterDomain: this.options.podCalls.clusterDomain,
      timeoutMs: this.options.podCalls.podTimeoutMs,
      lookupPod: (namespace, name) => informerFor(pods, namespace)?.get(namespace, name),
      // Indexed lookups only: the StatefulSet's own pods and pods no controller owns (being adopted).
      existingPods: (namespace, name) => {
        const informer = informerFor(pods, namespace);
        const uid = informerFor(statefulSets, namespace)?.get(namespace, name)?.metadata?.uid;
        const owned = uid ? (informer?.byIndex(INDEX.podsByOwner, uid) ?? []) : [];
        const orphans = informer?.byIndex(INDEX.orphanPods, '') ?? [];
        return [...owned, ...orphans]
          .filter((p) => p.metadata?.namespace === namespace)
          .map((p) => p.metadata?.name ?? '');
      },
      onSettled: this.options.requeue,
      calls: this.podCalls,
      podClient: podClient(this.runtime),
    });
  }

  /** Leadership ended: abandon pod calls in flight; the next leader starts from what the pods say. */
  stop(): void {
    this.delays.stop();
    this.delays = this.newDelayCalls();
  }

  private report(set: StatefulSet, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const key = `${set.metadata?.namespace}/${nameOf(set)}:${reason}:${message}`;
    const now = this.runtime.clock.monotonic();
    const last = this.reported.get(key);
    if (last !== undefined && now - last < REPORT_AGAIN_MS) return;
    for (const [k, at] of this.reported) if (now - at >= REPORT_AGAIN_MS) this.reported.delete(k);
    this.reported.set(key, now);
    const fields = { statefulSet: nameOf(set), namespace: set.metadata?.namespace };
    if (type === 'Warning') this.log.warn(message, fields);
    else this.log.info(message, fields);
    this.runtime.events.event(
      {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        namespace: set.metadata?.namespace,
        name: nameOf(set),
        uid: set.metadata?.uid ?? '',
      },
      type,
      reason,
      'Scale',
      message,
    );
  }

  private warn(set: StatefulSet, reason: string, message: string): void {
    this.report(set, 'Warning', reason, message);
  }

  private async setReplicas(set: StatefulSet, replicas: number, why: string): Promise<boolean> {
    if (!this.runtime.isLeader()) return false;
    try {
      await this.runtime.client.patch(
        resources.statefulSets,
        { namespace: set.metadata?.namespace ?? '', name: nameOf(set) },
        'strategic',
        { spec: { replicas } },
        { timeoutMs: 15_000 },
      );
    } catch (error) {
      // A webhook may deny it (prepare-downscale's min-time, no-downscale): reported, retried later.
      this.warn(
        set,
        'ScaleFailed',
        `could not scale ${nameOf(set)} to ${replicas}: ${error instanceof Error ? error.message : String(error)}`,
      );
      return false;
    }
    const key = `${set.metadata?.namespace}/${nameOf(set)}`;
    this.expected.set(key, { replicas, at: this.runtime.clock.monotonic() });
    if (replicas < (set.spec?.replicas ?? 1)) this.noteUnrecorded(key, set);
    this.log.info(`scaled ${nameOf(set)} from ${set.spec?.replicas ?? 1} to ${replicas} replicas: ${why}`, {
      statefulSet: nameOf(set),
    });
    this.runtime.events.event(
      {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        namespace: set.metadata?.namespace,
        name: nameOf(set),
        uid: set.metadata?.uid ?? '',
      },
      'Normal',
      'ScaledReplicas',
      'Scale',
      `scaled from ${set.spec?.replicas ?? 1} to ${replicas} replicas: ${why}`,
    );
    return true;
  }

  private withExpectedReplicas(cached: StatefulSet): StatefulSet {
    const key = `${cached.metadata?.namespace}/${nameOf(cached)}`;
    const replicas = cached.spec?.replicas ?? 1;
    const seen = this.seenReplicas.get(key);
    this.seenReplicas.set(key, replicas);
    if (seen !== undefined && replicas < seen) this.noteUnrecorded(key, cached);
    const set = this.withUnrecordedDownscale(key, cached);
    const expected = this.expected.get(key);
    if (!expected) return set;
    if (set.spec?.replicas === expected.replicas || this.runtime.clock.monotonic() - expected.at > 30_000) {
      this.expected.delete(key);
      return set;
    }
    // A copy: the cache's objects are shared and never mutated.
    return { ...set, spec: { ...set.spec!, replicas: expected.replicas } };
  }

  /** A prepared downscale of `set` just made or seen: counted from now until its record arrives. */
  private noteUnrecorded(key: string, set: StatefulSet): void {
    // Only a prepared downscale is recorded (by the prepare-downscale webhook).
    if (labelsOf(set)[PREPARE_DOWNSCALE_LABEL_KEY] !== PREPARE_DOWNSCALE_LABEL_VALUE) return;
    const before = this.unrecorded.get(key)?.before ?? annotationsOf(set)[LAST_DOWNSCALE_ANNOTATION_KEY];
    this.unrecorded.set(key, { wall: this.runtime.clock.now(), at: this.runtime.clock.monotonic(), before });
  }

  /**
   * The StatefulSet with an unrecorded downscale's time as its
   * last-downscale (a little later than the webhook's record: the safe
   * side), until the annotation changes — the webhook's copy — or the
   * copy's deadline passes.
   */
  private withUnrecordedDownscale(key: string, set: StatefulSet): StatefulSet {
    const pending = this.unrecorded.get(key);
    if (!pending) return set;
    const arrived = annotationsOf(set)[LAST_DOWNSCALE_ANNOTATION_KEY] !== pending.before;
    if (arrived || this.runtime.clock.monotonic() - pending.at > UNRECORDED_KEPT_MS) {
      this.unrecorded.delete(key);
      return set;
    }
    const annotations = { ...annotationsOf(set), [LAST_DOWNSCALE_ANNOTATION_KEY]: formatRfc3339(pending.wall) };
    return { ...set, metadata: { ...set.metadata, annotations } };
  }

  /**
   * The reference's scale, read at most once per SCALE_READ_TTL_MS:
   * reconciles are event-driven, and a rollout's pod events must not each
   * cost a GET (rollout-operator reads it once per 5 s tick).
   */
  private async readScale(ref: ScaleRef): Promise<Scale> {
    const key = scaleKey(ref);
    const now = this.runtime.clock.monotonic();
    const cached = this.scaleReads.get(key);
    if (cached && now - cached.at < SCALE_READ_TTL_MS) return cached.scale;
    const scale = await this.scales.getScale(ref);
    for (const [k, v] of this.scaleReads) if (now - v.at >= SCALE_READ_TTL_MS) this.scaleReads.delete(k);
    this.scaleReads.set(key, { at: now, scale });
    return scale;
  }

  /** Adjusts the group's replicas; true when a StatefulSet was changed (the rollout step then waits for the next reconcile). */
  async adjust(cached: StatefulSet[]): Promise<boolean> {
    const sets = cached.map((set) => this.withExpectedReplicas(set));
    for (const set of sets)
      for (const warning of validateScalingMetadata(set)) this.warn(set, 'InvalidScalingMetadata', warning);
    // Every pass notes the group's last downscales, so a later step of the wall clock cannot shorten min-time.
    // Only stamps read from the API: our own downscale's stand-in is not one (withOwnDownscale).
    const countedFrom = observeLastDownscales(this.runtime.sightings, {
      namespace: sets[0]?.metadata?.namespace ?? '',
      statefulSets: sets.map((s) => s.metadata?.name ?? ''),
      lastDownscales: lastDownscalesFromAnnotations(cached),
      source: 'annotation',
      seen: 'read',
    });
    const plan = planGroupReplicas({ group: sets, now: this.runtime.clock.now(), countedFrom });
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
      if (await this.mirror(set)) return true;
    }
    return changed;
  }

  /**
   * Mirror mode for one StatefulSet: follow the reference's scale (through
   * delayed downscale when configured) and write status.replicas back.
   * True when spec.replicas was changed.
   */
  private async mirror(set: StatefulSet): Promise<boolean> {
    const reference = mirrorReference(set);
    if (!reference) return false;
    if ('error' in reference) {
      this.warn(set, 'InvalidScalingMetadata', reference.error);
      return false;
    }
    const ref: ScaleRef = {
      apiVersion: reference.apiVersion,
      kind: reference.kind,
      namespace: set.metadata?.namespace ?? '',
      name: reference.name,
    };
    const scale = await this.readReferenceScale(set, ref);
    if (!scale) return false;
    const current = set.spec?.replicas ?? 1;
    const backTo = (replicas: number) => this.reportReplicasToReference(set, ref, scale, replicas);
    // A follower's replicas come from its leader; its reference resource only
    // hears about them (status.replicas), so an HPA on it sees the truth
    // (rollout-operator #255: never written back there).
    if ((annotationsOf(set)[DOWNSCALE_LEADER_ANNOTATION_KEY] ?? '') !== '') {
      await backTo(current);
      return false;
    }
    const delay = delayedDownscaleConfig(set);
    if (delay && 'error' in delay) {
      // As rollout-operator: a broken delay configuration stops this StatefulSet's scaling both ways.
      this.warn(set, 'InvalidScalingMetadata', `not scaling ${nameOf(set)}: ${delay.error}`);
      await backTo(current);
      return false;
    }
    const target = mirrorTarget({ sts: set, referenceReplicas: scale.spec?.replicas ?? 0 });
    if (target.warning) this.warn(set, 'InvalidScalingMetadata', target.warning);
    const mirrored = this.mirroredReplicas(set, current, target, delay);
    let replicas = mirrored.replicas;
    if (replicas !== current) {
      if (!(await this.setReplicas(set, replicas, mirrored.why))) replicas = current;
    }
    await backTo(replicas);
    return replicas !== current;
  }

  /** The reference resource's scale, or undefined (warned) when it cannot be read: this StatefulSet is left alone. */
  private async readReferenceScale(set: StatefulSet, ref: ScaleRef): Promise<Scale | undefined> {
    try {
      return await this.readScale(ref);
    } catch (error) {
      this.warn(
        set,
        'ScalingError',
        `cannot read the scale of ${ref.kind} ${ref.name}: ${error instanceof Error ? error.message : String(error)}`,
      );
      return undefined;
    }
  }

  /**
   * Write `replicas` to the reference's status.replicas when the StatefulSet
   * asks for write-back and the reference does not say so already. A failure
   * is logged only: the next reconcile tries again.
   */
  private async reportReplicasToReference(
    set: StatefulSet,
    ref: ScaleRef,
    scale: Scale,
    replicas: number,
  ): Promise<void> {
    if (scale.status?.replicas === replicas || !writeBack(annotationsOf(set)[MIRROR_WRITE_BACK_ANNOTATION_KEY])) return;
    try {
      await this.scales.writeBackStatusReplicas(ref, replicas);
      this.scaleReads.delete(scaleKey(ref));
    } catch (error) {
      this.log.warn('could not write status.replicas back to the reference resource', {
        statefulSet: nameOf(set),
        err: error instanceof Error ? error.message : String(error),
      });
    }
  }

  /**
   * The replicas to set now, and why: the mirror target, except that a
   * downscale under delayed downscale goes only as far as the leaving pods
   * have been prepared for long enough.
   */
  private mirroredReplicas(
    set: StatefulSet,
    current: number,
    target: MirrorTarget,
    delay: DelayedDownscaleConfig | undefined,
  ): { replicas: number; why: string } {
    const pods: DelayTarget | undefined = delay && {
      namespace: set.metadata?.namespace ?? '',
      statefulSet: nameOf(set),
      serviceName: set.spec?.serviceName ?? '',
      urlTemplate: delay.url,
    };
    if (target.action === 'in-sync' || target.action === 'scale-up') {
      // Pods [0, current) stay: withdraw any downscale they were prepared for.
      if (pods) this.delays.cancel(pods, current);
      return { replicas: target.target, why: target.reason };
    }
    if (!pods || !delay) return { replicas: target.target, why: target.reason };
    return this.delayedDownscale(set, pods, delay, current, target);
  }

  /**
   * A downscale under delayed downscale: ask the leaving pods to prepare
   * (their answers come later and requeue the group), then remove only the
   * pods at the end that have been prepared for at least the delay. Still
   * waiting is a Normal event; any other refusal a Warning.
   */
  private delayedDownscale(
    set: StatefulSet,
    pods: DelayTarget,
    delay: DelayedDownscaleConfig,
    current: number,
    target: MirrorTarget,
  ): { replicas: number; why: string } {
    const unchanged = { replicas: current, why: target.reason };
    const answer = this.delays.prepare(pods, current, target.target);
    if (answer === 'pending') {
      this.log.debug('asked the leaving pods when they were prepared for a delayed downscale', {
        statefulSet: nameOf(set),
        from: current,
        to: target.target,
      });
      return unchanged;
    }
    // Wall clock: compared with the timestamps the pods answered.
    const decision = delayedDownscaleDecision({
      current,
      desired: target.target,
      timestamps: answer.results,
      delayMs: delay.delayMs,
      now: this.runtime.clock.now(),
    });
    if ('error' in decision) {
      const waiting = decision.error.startsWith('configured downscale delay');
      this.report(
        set,
        waiting ? 'Normal' : 'Warning',
        waiting ? 'DelayedDownscaleWaiting' : 'DelayedDownscaleFailed',
        `not scaling ${nameOf(set)} from ${current} to ${target.target} yet: ${decision.error}`,
      );
      return unchanged;
    }
    const replicas = decision.allowed;
    return {
      replicas,
      why: `${target.reason}; ${current - replicas} pod(s) at the end prepared for at least ${formatGoDuration(delay.delayMs)}`,
    };
  }
}
