// Leadership terms of one replica, one at a time. The elector wins the Lease
// back within a retry period after losing it (an API server that paused past
// the renew deadline is enough), and calls onStartedLeading again while the
// controllers of the lost term are still finishing the work they had in hand.
// Run side by side, the two terms of one controller race: the old term's
// cleanup clears the state the new term just set up (the config-restart
// controller then dropped every later config change: the chaos soak's
// "content change never applied"), and two reconciles of one rollout group
// could each delete a pod. So a term starts only once every task of the
// previous term has settled, and a term whose leadership ended before it
// could start never starts.

export class LeadershipTerms {
  private readonly startTerm: (signal: AbortSignal) => Promise<void>[];
  /** Settles when every term begun so far has settled. */
  private previous: Promise<void> = Promise.resolve();
  /** Terms begun and not settled yet. */
  private unsettled = 0;

  /** `startTerm` starts one term's tasks (each controller's lead()) and returns them. */
  constructor(startTerm: (signal: AbortSignal) => Promise<void>[]) {
    this.startTerm = startTerm;
  }

  /**
   * Begins a term for `signal`'s leadership; resolves when its tasks have
   * settled. `onWait` is told when it must first wait for the previous term.
   */
  begin(signal: AbortSignal, onWait?: () => void): Promise<void> {
    const before = this.previous;
    if (this.unsettled > 0) onWait?.();
    this.unsettled++;
    const term = (async () => {
      try {
        await before;
        if (!signal.aborted) await Promise.all(this.startTerm(signal));
      } finally {
        this.unsettled--;
      }
    })();
    this.previous = term.catch(() => undefined);
    return term;
  }
}
