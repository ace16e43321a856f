// Leader election on a coordination.k8s.io Lease, with client-go's
// semantics: acquire when the lease is free or its holder stopped renewing,
// renew every retry period, and give up leadership the moment a renewal has
// not succeeded within the renew deadline or the lease shows another holder.
//
// The Lease itself is a LeaseLock (leaselock.ts), shared with the
// prepare-downscale group lock: expiry is judged by local monotonic time
// since we last saw the lease change, never by comparing our clock with the
// holder's renewTime, so clock skew between nodes cannot cause two leaders. Every duration here (lease
// expiry, the renew deadline, isLeader) is on clock.monotonic(): a wall clock
// stepped back would otherwise keep a cut-off leader believing it leads for
// the size of the step after the standby took over, and one stepped forward
// would make a standby judge a live lease expired. The wall clock only
// stamps the Lease's acquireTime and renewTime, which are informational.
import type { KubeClient } from '../kube/client.ts';
import type { Lease } from '../kube/types.ts';
import { type Clock, systemClock } from '../clock.ts';
import { LeaseLock } from './leaselock.ts';
import { type Logger, nopLogger } from '../log/logger.ts';

export interface ElectorOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  clock?: Clock;
  logger?: Logger;
  onStartedLeading?: (signal: AbortSignal) => void;
  onStoppedLeading?: () => void;
  onNewLeader?: (identity: string) => void;
}

export function validateElectionTimings(
  o: Pick<ElectorOptions, 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'>,
): string | undefined {
  if (o.leaseDurationMs <= o.renewDeadlineMs)
    return '-leader-election.lease-duration must be greater than -leader-election.renew-deadline';
  if (o.renewDeadlineMs <= o.retryPeriodMs * 1.2)
    return '-leader-election.renew-deadline must be greater than 1.2 × -leader-election.retry-period';
  if (o.retryPeriodMs <= 0) return '-leader-election.retry-period must be positive';
  return undefined;
}

export class LeaderElector {
  private readonly o: ElectorOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly lock: LeaseLock;
  private leading: AbortController | undefined;
  private knownLeader = '';

  constructor(options: ElectorOptions) {
    const invalid = validateElectionTimings(options);
    if (invalid) throw new Error(invalid);
    this.o = options;
    this.clock = options.clock ?? systemClock;
    this.log = (options.logger ?? nopLogger).child({
      component: 'leader-election',
      lease: `${options.namespace}/${options.name}`,
      identity: options.identity,
    });
    this.lock = new LeaseLock({
      client: options.client,
      namespace: options.namespace,
      name: options.name,
      identity: options.identity,
      leaseDurationMs: options.leaseDurationMs,
      clock: this.clock,
      onObserve: (lease) => this.follow(lease),
    });
  }

  /**
   * True only while our latest successful renewal is younger than the renew
   * deadline: executors check this right before every write, so even a
   * process paused for a while (GC, SIGSTOP) never acts on a stale belief.
   */
  isLeader(): boolean {
    return this.leading !== undefined && this.lock.sinceRenewed() < this.o.renewDeadlineMs;
  }

  get leaderIdentity(): string {
    return this.knownLeader;
  }

  /** Campaigns and leads until the signal aborts; then releases the lease if held. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const acquired = await this.tryAcquireOrRenew(signal).catch((error: unknown) => {
        this.log.warn('failed to acquire lease', { err: error instanceof Error ? error.message : String(error) });
        return false;
      });
      if (acquired) {
        await this.lead(signal);
        continue;
      }
      try {
        await this.clock.sleep(this.o.retryPeriodMs * (1 + Math.random() * 0.2), signal);
      } catch {
        break;
      }
    }
    await this.release();
  }

  private async lead(signal: AbortSignal): Promise<void> {
    this.leading = new AbortController();
    this.log.info('became leader');
    try {
      this.o.onStartedLeading?.(this.leading.signal);
    } catch (error) {
      this.log.error('onStartedLeading threw', { err: String(error) });
    }
    while (!signal.aborted) {
      try {
        await this.clock.sleep(this.o.retryPeriodMs, signal);
      } catch {
        return; // shutting down: run() releases the lease
      }
      // Keep trying until the renew deadline passes, as client-go does.
      let renewed = false;
      while (!signal.aborted && this.lock.sinceRenewed() < this.o.renewDeadlineMs) {
        try {
          renewed = await this.tryAcquireOrRenew(signal);
        } catch (error) {
          this.log.warn('failed to renew lease', { err: error instanceof Error ? error.message : String(error) });
        }
        if (renewed) break;
        if (this.lock.holder && this.lock.holder !== this.o.identity) break; // someone else holds it now
        try {
          await this.clock.sleep(Math.min(this.o.retryPeriodMs / 4, 500), signal);
        } catch {
          return;
        }
      }
      if (!renewed && !signal.aborted) {
        this.stopLeading('lost the lease');
        return;
      }
    }
  }

  private stopLeading(why: string): void {
    if (!this.leading) return;
    this.log.warn(`stopped leading: ${why}`);
    this.leading.abort(new Error(why));
    this.leading = undefined;
    try {
      this.o.onStoppedLeading?.();
    } catch (error) {
      this.log.error('onStoppedLeading threw', { err: String(error) });
    }
  }

  /** One attempt; true when we hold the lease afterwards. */
  private async tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const held = await this.lock.tryAcquireOrRenew(signal, this.o.renewDeadlineMs);
    if (!held && this.leading && this.lock.holder && this.lock.holder !== this.o.identity)
      this.stopLeading(`lease now held by ${this.lock.holder}`);
    return held;
  }

  private follow(lease: Lease): void {
    const holder = lease.spec?.holderIdentity ?? '';
    if (holder && holder !== this.knownLeader) {
      this.knownLeader = holder;
      if (holder !== this.o.identity) this.log.info('new leader observed', { leader: holder });
      this.o.onNewLeader?.(holder);
    }
  }

  /** Hands the lease back on shutdown so a standby takes over at once. */
  private async release(): Promise<void> {
    const wasLeading = this.leading !== undefined;
    if (wasLeading) this.stopLeading('shutting down');
    if (!wasLeading) return;
    try {
      await this.lock.release(this.o.renewDeadlineMs);
      this.log.info('released the lease');
    } catch (error) {
      this.log.warn('could not release the lease; a standby takes over when it expires', {
        err: error instanceof Error ? error.message : String(error),
      });
    }
  }
}
