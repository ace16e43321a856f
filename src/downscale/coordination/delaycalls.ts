// Delayed downscale's pod calls, off the reconcile path. rollout-operator
// makes them inline, so one slow or hanging pod stalls every group behind it
// for up to the client timeout per batch. Here a reconcile never waits: it
// asks for a round of calls, returns, and is requeued when the round is done;
// the next reconcile decides with the answers (delay.ts) and consumes them.
//
// Per StatefulSet, one round at a time, in the order asked: a cancel asked
// while a prepare is in flight is sent after it, so a pod never ends up
// prepared by a POST that overtook the DELETE meant to withdraw it.
//
// DELETE (cancel) is idempotent and pods are its source of truth, so it is
// not re-sent on every reconcile as rollout-operator does: it is sent when a
// prepare may have happened since the last cancel (a downscale withdrawn,
// an upscale, the first sight of a StatefulSet after a start) and otherwise
// at most every `cancelRepeatMs`.
//
// Only pods that exist are called (spec.replicas may be any int32, e.g.
// 2^31-1 with 3 pods): the work follows the pods the cache shows, never
// the length of an ordinal range. A leaving pod that does not exist cannot
// answer: the first such ordinal gets an error answer (no downscale this time).
//
// Freshness and the cancel repeat are durations in this process: monotonic
// clock. (The pods' answers carry wall-clock timestamps; delay.ts compares
// those with the wall clock.)
import type { Counter } from 'prom-client';
import type { Clock } from '../../runtime/clock.ts';
import type { Pod } from '../../runtime/kube/types.ts';
import type { Logger } from '../../runtime/log/logger.ts';
import { mapBounded, PodClient, type PodCallResult } from '../../workloads/podclient.ts';
import {
  cancelSucceeded,
  delayedDownscaleCalls,
  ordinalsOf,
  parsePrepareResponse,
  podUrl,
  type DelayedDownscaleCallPlan,
  type PrepareResults,
} from './delay.ts';

export interface DelayTarget {
  namespace: string;
  statefulSet: string;
  serviceName: string;
  /** grafana.com/rollout-prepare-delayed-downscale-url */
  urlTemplate: string;
}

export interface DelayCallsOptions {
  clock: Clock;
  log: Logger;
  clusterDomain: string;
  timeoutMs: number;
  /** The process's pod client (podClient(runtime)); default: one that sends X-Cluster but counts nothing. */
  podClient?: PodClient;
  /** The pod named `name` as the cache shows it (for its IP). */
  lookupPod: (namespace: string, name: string) => Pod | undefined;
  /** The names of the StatefulSet's pods as the cache shows them, when a round runs. */
  existingPods: (namespace: string, statefulSet: string) => Iterable<string>;
  /** A prepare round for this StatefulSet finished: reconcile its group to act on it. */
  onSettled: (namespace: string, statefulSet: string) => void;
  calls?: Counter;
  /** Calls in flight per StatefulSet (rollout-operator: 32). */
  concurrency?: number;
  /** Answers older than this are not acted on; a new round is asked for. */
  freshMs?: number;
  cancelRepeatMs?: number;
}

interface PrepareOutcome {
  current: number;
  desired: number;
  /** Monotonic. */
  at: number;
  results: PrepareResults;
}

interface SetState {
  /** The tail of the round queue; rounds of one StatefulSet never overlap. */
  tail: Promise<void>;
  /** Rounds asked for and not finished. */
  queued: number;
  /** A prepare round for current→desired asked for and not yet finished. */
  preparing?: { current: number; desired: number };
  prepared?: PrepareOutcome;
  /** A POST may have reached a pod since the last cancel round started. */
  dirty: boolean;
  /** Replicas of a cancel round asked for and not yet finished. */
  cancelling?: number;
  /** Monotonic. */
  lastCancelAt?: number;
  lastCancelReplicas?: number;
}

export class DelayedDownscaleCalls {
  private readonly o: Required<Omit<DelayCallsOptions, 'calls' | 'podClient'>> & Pick<DelayCallsOptions, 'calls'>;
  private readonly pods: PodClient;
  private readonly sets = new Map<string, SetState>();
  private readonly abort = new AbortController();

  constructor(options: DelayCallsOptions) {
    this.o = { concurrency: 32, freshMs: 30_000, cancelRepeatMs: 60_000, ...options };
    this.pods = options.podClient ?? new PodClient();
  }

  private state(target: DelayTarget): SetState {
    const key = `${target.namespace}/${target.statefulSet}`;
    let state = this.sets.get(key);
    // A StatefulSet seen for the first time may have been prepared by an earlier run: dirty.
    if (!state) this.sets.set(key, (state = { tail: Promise.resolve(), queued: 0, dirty: true }));
    return state;
  }

  /**
   * For a downscale current→desired: the POST answers of a round for exactly
   * this change that finished within freshMs with nothing queued after it
   * (handed out once), or 'pending' after making sure such a round is on its
   * way.
   */
  prepare(target: DelayTarget, current: number, desired: number): { results: PrepareResults } | 'pending' {
    const state = this.state(target);
    const outcome = state.prepared;
    if (
      outcome &&
      state.queued === 0 &&
      outcome.current === current &&
      outcome.desired === desired &&
      this.o.clock.monotonic() - outcome.at <= this.o.freshMs
    ) {
      state.prepared = undefined;
      return { results: outcome.results };
    }
    state.prepared = undefined;
    if (state.preparing?.current === current && state.preparing.desired === desired) return 'pending';
    state.preparing = { current, desired };
    this.enqueue(
      target,
      state,
      async () => {
        state.dirty = true;
        const plan = this.plan(target, current, desired);
        const [cancels, posts] = await Promise.all([
          this.callOrdinals(target, 'DELETE', plan.cancel),
          this.callOrdinals(target, 'POST', plan.prepare),
        ]);
        this.logCancelFailures(target, state, cancels);
        const results = new Map<number, number | { error: string }>();
        for (const [ordinal, result] of posts)
          results.set(ordinal, 'error' in result ? { error: result.error } : parsePrepareResponse(result));
        if (plan.missing !== undefined)
          results.set(plan.missing, { error: `pod ${target.statefulSet}-${plan.missing} does not exist` });
        if (state.preparing?.current === current && state.preparing.desired === desired) state.preparing = undefined;
        state.prepared = { current, desired, at: this.o.clock.monotonic(), results };
      },
      true,
    );
    return 'pending';
  }

  /**
   * The StatefulSet keeps (or grows to) `replicas`: tells the pods of
   * [0, replicas) that exist to cancel any prepared downscale when one may
   * be pending, else at most every cancelRepeatMs. Never waits.
   */
  cancel(target: DelayTarget, replicas: number): void {
    const state = this.state(target);
    state.prepared = undefined;
    const now = this.o.clock.monotonic();
    const due =
      state.dirty ||
      state.preparing !== undefined ||
      state.lastCancelReplicas !== replicas ||
      state.lastCancelAt === undefined ||
      now - state.lastCancelAt >= this.o.cancelRepeatMs;
    if (!due || state.cancelling === replicas) return;
    state.cancelling = replicas;
    this.enqueue(
      target,
      state,
      async () => {
        // Rounds run in order: every POST asked for before this cancel has been sent.
        state.dirty = false;
        state.prepared = undefined;
        const results = await this.callOrdinals(target, 'DELETE', this.plan(target, replicas, replicas).cancel);
        this.logCancelFailures(target, state, results);
        if (state.cancelling === replicas) state.cancelling = undefined;
        state.lastCancelAt = this.o.clock.monotonic();
        state.lastCancelReplicas = replicas;
        // Nothing waits on a cancel: no reconcile is asked for (a failing pod must not spin one).
      },
      false,
    );
  }

  /** Forgets a StatefulSet that left every group. */
  forget(namespace: string, statefulSet: string): void {
    this.sets.delete(`${namespace}/${statefulSet}`);
  }

  /** Aborts calls in flight (leadership lost, shutdown); rounds end with errors. */
  stop(): void {
    this.abort.abort(new Error('stopping'));
  }

  private enqueue(target: DelayTarget, state: SetState, round: () => Promise<void>, notify: boolean): void {
    state.queued++;
    state.tail = state.tail.then(async () => {
      try {
        await round();
      } catch (error) {
        this.o.log.warn('delayed downscale pod calls failed', {
          statefulSet: target.statefulSet,
          namespace: target.namespace,
          err: error instanceof Error ? error.message : String(error),
        });
      }
      state.queued--;
      if (notify && !this.abort.signal.aborted) this.o.onSettled(target.namespace, target.statefulSet);
    });
  }

  /** Resolves when every round asked for so far has finished (tests, shutdown). */
  async idle(): Promise<void> {
    await Promise.all([...this.sets.values()].map((s) => s.tail));
  }

  /** The calls for current→desired to the StatefulSet's pods that exist now. */
  private plan(target: DelayTarget, current: number, desired: number): DelayedDownscaleCallPlan {
    const existing = ordinalsOf(target.statefulSet, this.o.existingPods(target.namespace, target.statefulSet));
    return delayedDownscaleCalls({ current, desired, existing });
  }

  private async callOrdinals(
    target: DelayTarget,
    method: 'POST' | 'DELETE',
    ordinals: number[],
  ): Promise<Map<number, PodCallResult>> {
    const answers = await mapBounded(
      ordinals,
      this.o.concurrency,
      async (ordinal): Promise<[number, PodCallResult]> => {
        const podName = `${target.statefulSet}-${ordinal}`;
        const url = podUrl(target.urlTemplate, {
          pod: podName,
          serviceName: target.serviceName,
          namespace: target.namespace,
          clusterDomain: this.o.clusterDomain,
        });
        if (typeof url !== 'string') return [ordinal, { url: target.urlTemplate, error: url.error }];
        const result = await this.pods.call({
          method,
          url,
          pod: this.o.lookupPod(target.namespace, podName),
          podName,
          timeoutMs: this.o.timeoutMs,
          signal: this.abort.signal,
        });
        const ok =
          'error' in result
            ? false
            : method === 'DELETE'
              ? cancelSucceeded(result.status)
              : result.status >= 200 && result.status < 300;
        this.o.calls?.inc({ method, result: ok ? 'success' : 'failure' });
        this.o.log.debug(
          `delayed downscale ${method} ${url}`,
          'error' in result ? { err: result.error } : { status: result.status },
        );
        return [ordinal, result];
      },
    );
    return new Map(answers);
  }

  private logCancelFailures(target: DelayTarget, state: SetState, results: Map<number, PodCallResult>): void {
    const failed = [...results].filter(([, r]) => 'error' in r || !cancelSucceeded(r.status));
    if (failed.length === 0) return;
    // As rollout-operator: a failed cancel is only logged; it is sent again later.
    const [ordinal, first] = failed[0]!;
    this.o.log.warn(`could not cancel the delayed downscale of ${failed.length} pod(s)`, {
      statefulSet: target.statefulSet,
      namespace: target.namespace,
      firstPod: `${target.statefulSet}-${ordinal}`,
      err: 'error' in first ? first.error : `HTTP ${first.status}`,
    });
    // Not clean: try again at the next reconcile rather than in cancelRepeatMs.
    state.dirty = true;
  }
}
