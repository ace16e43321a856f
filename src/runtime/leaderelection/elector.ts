// Leader election on a coordination.k8s.io Lease, with client-go's
// semantics: acquire when the lease is free or its holder stopped renewing,
// renew every retry period, and give up leadership the moment a renewal has
// not succeeded within the renew deadline or the lease shows another holder.
//
// Expiry is judged by local monotonic time since we last saw the lease
// change, never by comparing our clock with the holder's renewTime, so clock
// skew between nodes cannot cause two leaders. Every duration here (lease
// expiry, the renew deadline, isLeader) is on clock.monotonic(): a wall clock
// stepped back would otherwise keep a cut-off leader believing it leads for
// the size of the step after the standby took over, and one stepped forward
// would make a standby judge a live lease expired. The wall clock only
// stamps the Lease's acquireTime and renewTime, which are informational.
import type { KubeClient } from '../kube/client.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../kube/errors.ts';
import { resources, type Lease } from '../kube/types.ts';
import { microTime } from '../kube/time.ts';
import { type Clock, systemClock } from '../clock.ts';
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

export function validateElectionTimings(o: Pick<ElectorOptions, 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'>): string | undefined {
  if (o.leaseDurationMs <= o.renewDeadlineMs) return '-leader-election.lease-duration must be greater than -leader-election.renew-deadline';
  if (o.renewDeadlineMs <= o.retryPeriodMs * 1.2) return '-leader-election.renew-deadline must be greater than 1.2 × -leader-election.retry-period';
  if (o.retryPeriodMs <= 0) return '-leader-election.retry-period must be positive';
  return undefined;
}

export class LeaderElector {
  private readonly o: ElectorOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  /** The lease as last read or written, and when (monotonic) it last changed. */
  private observed: { lease: Lease; at: number } | undefined;
  private leading: AbortController | undefined;
  /** Monotonic time of the start of our latest successful acquire or renew. */
  private lastRenewAt = 0;
  private knownLeader = '';

  constructor(options: ElectorOptions) {
    const invalid = validateElectionTimings(options);
    if (invalid) throw new Error(invalid);
    this.o = options;
    this.clock = options.clock ?? systemClock;
    this.log = (options.logger ?? nopLogger).child({ component: 'leader-election', lease: `${options.namespace}/${options.name}`, identity: options.identity });
  }

  /**
   * True only while our latest successful renewal is younger than the renew
   * deadline: executors check this right before every write, so even a
   * process paused for a while (GC, SIGSTOP) never acts on a stale belief.
   */
  isLeader(): boolean {
    return this.leading !== undefined && this.clock.monotonic() - this.lastRenewAt < this.o.renewDeadlineMs;
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
      while (!signal.aborted && this.clock.monotonic() - this.lastRenewAt < this.o.renewDeadlineMs) {
        try {
          renewed = await this.tryAcquireOrRenew(signal);
        } catch (error) {
          this.log.warn('failed to renew lease', { err: error instanceof Error ? error.message : String(error) });
        }
        if (renewed) break;
        if (this.observed && this.holder(this.observed.lease) !== this.o.identity) break; // someone else holds it now
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

  private holder(lease: Lease): string {
    return lease.spec?.holderIdentity ?? '';
  }

  /** One attempt; true when we hold the lease afterwards. */
  private async tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const { client, namespace, name, identity } = this.o;
    // Taken before the request: a renewal counts from when it was sent, as in client-go.
    const now = this.clock.monotonic();
    // Only for the Lease's timestamps.
    const wallNow = this.clock.now();
    const timeoutMs = this.o.renewDeadlineMs;
    let current: Lease | undefined;
    try {
      current = await client.get<Lease>(resources.leases, { namespace, name }, { signal, timeoutMs });
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    const leaseDurationSeconds = Math.round(this.o.leaseDurationMs / 1000);
    if (!current) {
      try {
        const created = await client.create<Lease>(resources.leases, {
          metadata: { name, namespace },
          spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: microTime(wallNow), renewTime: microTime(wallNow), leaseTransitions: 0 },
        }, { signal, timeoutMs });
        this.observe(created, now);
        this.lastRenewAt = now;
        return true;
      } catch (error) {
        if (isAlreadyExists(error)) return false;
        throw error;
      }
    }
    this.observe(current, now);
    const holder = this.holder(current);
    const heldByUs = holder === identity;
    const expired = !holder || now - this.observed!.at >= (current.spec?.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
    if (!heldByUs && !expired) {
      if (this.leading) this.stopLeading(`lease now held by ${holder}`);
      return false;
    }
    const spec = {
      ...current.spec,
      holderIdentity: identity,
      leaseDurationSeconds,
      renewTime: microTime(wallNow),
      acquireTime: heldByUs ? current.spec?.acquireTime : microTime(wallNow),
      leaseTransitions: (current.spec?.leaseTransitions ?? 0) + (heldByUs ? 0 : 1),
    };
    try {
      // PUT with the resourceVersion we read: a concurrent writer makes this a 409, never a double leader.
      const updated = await client.update<Lease>(resources.leases, { metadata: current.metadata, spec }, { signal, timeoutMs });
      this.observe(updated, now);
      this.lastRenewAt = now;
      return true;
    } catch (error) {
      if (isConflict(error)) return false;
      throw error;
    }
  }

  private observe(lease: Lease, now: number): void {
    const previous = this.observed?.lease;
    const changed = !previous || previous.metadata?.resourceVersion !== lease.metadata?.resourceVersion;
    if (changed) this.observed = { lease, at: now };
    const holder = this.holder(lease);
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
    if (!wasLeading || !this.observed) return;
    const lease = this.observed.lease;
    if (this.holder(lease) !== this.o.identity) return;
    try {
      await this.o.client.update<Lease>(resources.leases, {
        metadata: lease.metadata,
        spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime(this.clock.now()) },
      }, { timeoutMs: this.o.renewDeadlineMs });
      this.log.info('released the lease');
    } catch (error) {
      this.log.warn('could not release the lease; a standby takes over when it expires', { err: error instanceof Error ? error.message : String(error) });
    }
  }
}
