// A lock on a coordination.k8s.io Lease, shared by every replica, with
// client-go's resource-lock semantics: acquire it when it is free or its
// holder stopped renewing, renew it while holding it, release it by clearing
// the holder. Used by leader election (elector.ts) and by the
// prepare-downscale webhook's per-group lock — one way to hold a Lease.
//
// Expiry is judged by local monotonic time since this process last saw the
// Lease change (its resourceVersion), never by comparing our wall clock
// with the holder's renewTime: a replica whose clock runs 45 s ahead would
// otherwise take a lock another replica renewed a moment ago. The price is
// client-go's: a lock this process has just started watching is taken over
// only after it has seen it unchanged for the lease duration. The wall clock
// only stamps acquireTime and renewTime, which are informational.
//
// Writes are PUTs with the resourceVersion read: two takers race to exactly
// one winner (the other gets a 409), and a release clears only our own
// hold, never a taker's after ours expired.
import type { KubeClient } from '../kube/client.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../kube/errors.ts';
import { resources, type Lease } from '../kube/types.ts';
import { microTime } from '../kube/time.ts';
import type { Clock } from '../clock.ts';

export interface LeaseLockOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  /** Unique per process: a restarted process is a new holder. */
  identity: string;
  leaseDurationMs: number;
  clock: Clock;
  /** Labels of a Lease this lock creates. */
  labels?: Record<string, string>;
  /** Called with every Lease read or written (leader election follows its holder). */
  onObserve?: (lease: Lease) => void;
}

export class LeaseLock {
  private readonly o: LeaseLockOptions;
  /** The lease as last read or written, and when (monotonic) it last changed. */
  private observed: { lease: Lease; at: number } | undefined;
  /** Monotonic time of the start of our latest successful acquire or renew. */
  private lastRenewAt: number | undefined;

  constructor(options: LeaseLockOptions) {
    this.o = options;
  }

  /** The holder as last seen ('' when free or never read). */
  get holder(): string {
    return this.observed?.lease.spec?.holderIdentity ?? '';
  }

  /** Monotonic ms since our latest successful acquire or renew started; Infinity when never. */
  sinceRenewed(): number {
    return this.lastRenewAt === undefined ? Infinity : this.o.clock.monotonic() - this.lastRenewAt;
  }

  /**
   * One attempt to acquire the lock, or renew it when we hold it; true when
   * we hold it afterwards. False when another holder has it and has renewed
   * it within the lease duration as this process observed it, or when we
   * lost a race for it. API errors other than those races are thrown.
   */
  async tryAcquireOrRenew(signal: AbortSignal, timeoutMs: number): Promise<boolean> {
    const { client, namespace, name, identity, clock } = this.o;
    // Taken before the request: a renewal counts from when it was sent, as in client-go.
    const now = clock.monotonic();
    const wallNow = clock.now();
    const leaseDurationSeconds = Math.max(1, Math.round(this.o.leaseDurationMs / 1000));
    let current: Lease | undefined;
    try {
      current = await client.get<Lease>(resources.leases, { namespace, name }, { signal, timeoutMs });
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    if (!current) {
      try {
        const created = await client.create<Lease>(
          resources.leases,
          {
            metadata: { name, namespace, ...(this.o.labels ? { labels: this.o.labels } : {}) },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds,
              acquireTime: microTime(wallNow),
              renewTime: microTime(wallNow),
              leaseTransitions: 0,
            },
          },
          { signal, timeoutMs },
        );
        this.observe(created, now);
        this.lastRenewAt = now;
        return true;
      } catch (error) {
        if (isAlreadyExists(error)) return false;
        throw error;
      }
    }
    this.observe(current, now);
    const holder = current.spec?.holderIdentity ?? '';
    const heldByUs = holder === identity;
    // An empty holder is a released lock: free whatever its times say.
    const expired =
      !holder || now - this.observed!.at >= (current.spec?.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
    if (!heldByUs && !expired) return false;
    const spec = {
      ...current.spec,
      holderIdentity: identity,
      leaseDurationSeconds,
      renewTime: microTime(wallNow),
      acquireTime: heldByUs ? current.spec?.acquireTime : microTime(wallNow),
      leaseTransitions: (current.spec?.leaseTransitions ?? 0) + (heldByUs ? 0 : 1),
    };
    try {
      const updated = await client.update<Lease>(
        resources.leases,
        { metadata: current.metadata, spec },
        { signal, timeoutMs },
      );
      this.observe(updated, now);
      this.lastRenewAt = now;
      return true;
    } catch (error) {
      if (isConflict(error)) return false;
      // Deleted between our read and our write: a free lock again, for the next attempt.
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  /** An annotation of the Lease as last read or written by this lock. */
  annotation(key: string): string | undefined {
    return this.observed?.lease.metadata?.annotations?.[key];
  }

  /**
   * Sets one annotation of the Lease while we hold it, so whoever takes the
   * lock next reads it (the prepare-downscale webhook's records). A PUT with
   * the resourceVersion read: a renewal of ours in between makes it re-read
   * and try again; a Lease no longer ours is an error, not overwritten.
   */
  async annotate(key: string, value: string, signal: AbortSignal, timeoutMs: number): Promise<void> {
    const { client, namespace, name, identity } = this.o;
    let lease = this.observed?.lease;
    for (let attempt = 0; attempt < 3; attempt++) {
      if (lease?.spec?.holderIdentity !== identity) throw new Error(`Lease ${namespace}/${name} is not held by us`);
      const metadata = { ...lease.metadata, annotations: { ...lease.metadata?.annotations, [key]: value } };
      try {
        const updated = await client.update<Lease>(resources.leases, { ...lease, metadata }, { signal, timeoutMs });
        this.observe(updated, this.o.clock.monotonic());
        return;
      } catch (error) {
        if (!isConflict(error)) throw error;
      }
      lease = await client.get<Lease>(resources.leases, { namespace, name }, { signal, timeoutMs });
      this.observe(lease, this.o.clock.monotonic());
    }
    throw new Error(`Lease ${namespace}/${name} kept changing`);
  }

  /**
   * Hands the lock back so another replica takes it at once: clears the
   * holder (no Lease delete is needed, so none is granted). Only our own
   * hold is cleared. Throws what the API threw, other than a lost race.
   */
  async release(timeoutMs: number): Promise<void> {
    const lease = this.observed?.lease;
    this.lastRenewAt = undefined;
    if (!lease || lease.spec?.holderIdentity !== this.o.identity) return;
    try {
      const released = await this.o.client.update<Lease>(
        resources.leases,
        {
          metadata: lease.metadata,
          spec: {
            ...lease.spec,
            holderIdentity: '',
            leaseDurationSeconds: 1,
            renewTime: microTime(this.o.clock.now()),
          },
        },
        { timeoutMs },
      );
      this.observe(released, this.o.clock.monotonic());
    } catch (error) {
      // Someone else holds it now, or it is gone: nothing of ours to release.
      if (!isConflict(error) && !isNotFound(error)) throw error;
    }
  }

  private observe(lease: Lease, now: number): void {
    const previous = this.observed?.lease;
    const changed = !previous || previous.metadata?.resourceVersion !== lease.metadata?.resourceVersion;
    if (changed) this.observed = { lease, at: now };
    this.o.onObserve?.(lease);
  }
}
