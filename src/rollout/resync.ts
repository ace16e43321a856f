// Which rollout groups a periodic resync (-reconcile.interval) has to plan
// again. rollout-operator only polls, so it re-plans every group on every
// tick. Stateward reconciles a group on every watch event of its
// StatefulSets and pods, and the planner reads nothing else and no clock:
// a group whose last reconcile decided nothing, and that no event has
// touched since, would be planned to the same nothing. Such a group is
// "settled": it is not planned on resync, its resyncs are counted in the
// reconcile metrics as if they had run (rolloutmetrics.ts), and while every group
// is settled no resync timer runs at all. What depends on anything else — a
// wait, a budget refusal, replica coordination, a conflict, an error — is
// never settled, and is planned on every resync as before.
//
// It is most of what an idle operator does: the planning of one 30-pod
// group every 5 s was ~19 ms of CPU a minute (docs/performance.md).
import type { Plan } from './planner.ts';

/** The gate's state for the groups of one leadership term. */
export class ResyncGate {
  private readonly settled = new Set<string>();
  /** Groups with a change that the reconcile running now (if any) has not seen. */
  private readonly touched = new Set<string>();
  private readonly running = new Set<string>();
  private wake: (() => void) | undefined;

  /** Something the group's plan reads changed (an informer event, a requeue): plan it on the next resync. */
  changed(key: string): void {
    this.settled.delete(key);
    this.touched.add(key);
    this.wake?.();
  }

  /**
   * Resolves at the next change of any group (or when `signal` aborts): a
   * resync with every group settled has nothing to do until then.
   */
  untilChanged(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.wake = undefined;
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.wake?.();
      this.wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** A reconcile of the group begins: it sees every change made before this. */
  begin(key: string): void {
    this.touched.delete(key);
    this.running.add(key);
  }

  /**
   * The reconcile that began ended. `settled`: it decided nothing and waits
   * for nothing but the group's own events. A change made while it ran
   * keeps the group unsettled, since the reconcile may not have seen it.
   * Returns whether the group became settled just now.
   */
  end(key: string, settled: boolean): boolean {
    this.running.delete(key);
    if (!settled || this.touched.has(key)) {
      this.settled.delete(key);
      return false;
    }
    if (this.settled.has(key)) return false;
    this.settled.add(key);
    return true;
  }

  /** Whether a resync may record the group as reconciled without planning it. */
  isSettled(key: string): boolean {
    return this.settled.has(key);
  }

  /** The group is gone. */
  forget(key: string): void {
    this.settled.delete(key);
    if (!this.running.has(key)) this.touched.delete(key);
  }

  /** A term ends or begins: nothing is known to be settled, and a reconcile still running settles nothing. */
  clear(): void {
    this.settled.clear();
    this.touched.clear();
    for (const key of this.running) this.touched.add(key);
  }
}

/** The plan of a settled group: complete, nothing to delete or advance, no wait, no block, no error. */
export function planDecidesNothing(plan: Plan): boolean {
  return (
    plan.complete &&
    plan.deletions.length === 0 &&
    plan.revisionUpdates.length === 0 &&
    plan.waiting === undefined &&
    plan.blocked === undefined &&
    plan.errors.length === 0
  );
}
