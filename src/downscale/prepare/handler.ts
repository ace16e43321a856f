// The prepare-downscale webhook's imperative shell: the API reads and
// writes, the calls to the pods going away, and a group lock that holds
// across requests and across operator replicas. Every decision is made by
// the pure steps in plan.ts.
//
// Fail-open on decoding and lookup errors (as rollout-operator); fail-closed
// (deny) on group-check errors, failed pod preparation and a failed record.
//
// Clocks: last-downscale records are wall clock, taken at their word by
// min-time unless this replica has evidence of a step or skew
// (src/downscale/clocksteps.ts, shared with the replica coordinator); the
// group lock's expiry (a LeaseLock) and the in-process repeat window are
// monotonic, so a replica whose clock runs ahead cannot take a live lock.
import { createHash } from 'node:crypto';
import type { KubeClient } from '../../runtime/kube/client.ts';
import { isAlreadyExists, isConflict, isForbidden, isNotFound } from '../../runtime/kube/errors.ts';
import { resources, type ConfigMap, type Pod, type StatefulSet } from '../../runtime/kube/types.ts';
import type { Clock, Timer } from '../../runtime/clock.ts';
import { LeaseLock } from '../../runtime/leaderelection/leaselock.ts';
import { TimestampSightings } from '../../runtime/sightings.ts';
import type { Logger } from '../../runtime/log/logger.ts';
import type { AdmissionDecision, AdmissionHandler, AdmissionRequestV1 } from '../../runtime/admission/admission.ts';
import {
  afterPrepare,
  afterRecord,
  endpoints,
  executorFailed,
  firstChecks,
  groupChecks,
  groupSelector,
  lastDownscaleAnnotationPatch,
  lastDownscalesFromZones,
  lookupFailed,
  parentUnreadable,
  stsInfo,
  toAdmissionDecision,
  type Allow,
  type CallResult,
  type Deny,
  type Downscale,
  type Endpoint,
  type PrepareInfo,
  type StatefulSetSource,
  type TrackerMode,
} from './plan.ts';
import { lastDownscalesFromAnnotations, type LastDownscale } from '../mintime.ts';
import { mapBounded, PodClient, podClient } from '../../workloads/podclient.ts';
import { workloadCache } from '../../workloads/cache.ts';
import { cached } from '../../runtime/informer/informer.ts';
import type { Runtime } from '../../runtime/operator.ts';
import { initialZoneTracker, parseZoneTracker, recordDownscale } from './zonetracker.ts';
import { observeLastDownscales } from '../clocksteps.ts';

/** Where the API server sends StatefulSet updates of labelled sets to prepare their leaving pods. */
export const PREPARE_DOWNSCALE_PATH = '/admission/prepare-downscale';

/** The prepare-downscale webhook of one operator, wired to its runtime: shared caches, sightings, pod client and identity. */
export function prepareDownscaleWebhook(
  runtime: Runtime,
  config: { useZoneTracker: boolean; zoneTrackerConfigMap: string; clusterDomain: string; podTimeoutMs: number },
): AdmissionHandler {
  return prepareDownscaleHandler({
    client: runtime.client,
    clock: runtime.clock,
    log: runtime.logger.child({ webhook: 'prepare-downscale' }),
    mode: config.useZoneTracker ? 'zone-tracker' : 'annotation',
    zoneTrackerConfigMap: config.zoneTrackerConfigMap,
    clusterDomain: config.clusterDomain,
    podTimeoutMs: config.podTimeoutMs,
    podClient: podClient(runtime),
    identity: runtime.identity,
    sightings: runtime.sightings,
    cachedStatefulSet: cached(workloadCache(runtime).statefulSets),
  });
}

export interface PrepareDownscaleDeps {
  client: KubeClient;
  clock: Clock;
  log: Logger;
  mode: TrackerMode;
  zoneTrackerConfigMap: string;
  clusterDomain: string;
  /** -pods.client-timeout */
  podTimeoutMs: number;
  /** The process's pod client (podClient(runtime)); default: one that sends X-Cluster but counts nothing. */
  podClient?: PodClient;
  /** This replica, as the holder of group locks. */
  identity: string;
  /** Where min-time stamps are tracked; the runtime's, shared with the replica coordinator (default: this handler's own). */
  sightings?: TimestampSightings;
  /** A StatefulSet from the informer cache, when cached: a /scale request's parent is read from here before the API. */
  cachedStatefulSet?: (namespace: string, name: string) => StatefulSet | undefined;
}

/** The group lock's lease duration: another replica takes it over after seeing it unrenewed this long. */
const LOCK_DURATION_MS = 30_000;
/** The holder renews this often while its request runs. */
const LOCK_RENEW_EVERY_MS = 10_000;
/** The holder acts (prepares pods, records) only while its latest renewal is younger than this. */
const LOCK_RENEW_DEADLINE_MS = 20_000;
/** Each lock API call's deadline. */
const LOCK_CALL_TIMEOUT_MS = 10_000;
/** Locks of groups not downscaled for this long are forgotten (their observations with them). */
const FORGET_LOCK_AFTER_MS = 30 * 60_000;
const MAX_PARALLEL_CALLS = 32;

/** A group lock held for one request. */
interface HeldLock {
  /** True while this replica may act under the lock. */
  held(): boolean;
  release(): Promise<void>;
}

/** A Lease name for a group's downscale lock: a DNS label, unique per group value. */
export function lockName(group: string): string {
  const safe = group
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 30);
  return `stateward-downscale-${safe || 'group'}-${createHash('sha256').update(group).digest('hex').slice(0, 8)}`;
}

const ownerUid = (pod: Pod) => pod.metadata?.ownerReferences?.find((r) => r.controller)?.uid;

/**
 * How long a downscale this replica just allowed counts as done. The
 * apiserver retries a PATCH whose update conflicted — and our own
 * last-downscale write is such a conflict — running admission again for the
 * same change; within this window the repeat is allowed at once instead of
 * preparing the pods and recording a second time.
 */
const RECENTLY_ALLOWED_MS = 15_000;

/** The handler is one webhook's admit, so the locks and recent allows it keeps last as long as the handler. */
export function prepareDownscaleHandler(deps: PrepareDownscaleDeps): AdmissionHandler {
  const webhook = new PrepareDownscaleWebhook(deps);
  return (request, signal) => webhook.admit(request, signal);
}

/** What a step of a request goes on with, or the outcome that ends the request there. */
type Step<T> = { value: T } | { outcome: Allow | Deny };

/** A downscale past the first checks and the StatefulSet's own: what the steps under the group lock work on. */
interface Review {
  downscale: Downscale;
  /** The StatefulSet being downscaled (for a /scale request, its parent). */
  statefulSet: StatefulSet;
  info: PrepareInfo;
  signal: AbortSignal;
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

const downscaleKey = (d: Downscale) => `${d.namespace}/${d.name}:${d.from}->${d.to}`;

/**
 * The prepare-downscale webhook: the state kept across requests (group locks,
 * recent allows) and the steps of one request.
 */
class PrepareDownscaleWebhook {
  private readonly deps: PrepareDownscaleDeps;
  private readonly client: KubeClient;
  private readonly log: Logger;
  private readonly podCalls: PodClient;
  private readonly sightings: TimestampSightings;
  private readonly groupLocks: GroupLocks;
  /** Keyed by downscaleKey; `at` is monotonic. */
  private readonly recentlyAllowed = new Map<string, { at: number; message: string | undefined }>();

  constructor(deps: PrepareDownscaleDeps) {
    this.deps = deps;
    this.client = deps.client;
    this.log = deps.log;
    this.podCalls = deps.podClient ?? new PodClient();
    this.sightings = deps.sightings ?? new TimestampSightings(deps.clock);
    this.groupLocks = new GroupLocks(deps);
  }

  /**
   * One StatefulSet (or /scale) update: allowed at once, or once its leaving
   * pods are prepared and the downscale recorded; or denied.
   */
  async admit(request: AdmissionRequestV1, signal: AbortSignal): Promise<AdmissionDecision> {
    const first = firstChecks(request);
    if (first.kind === 'allow') return toAdmissionDecision(first);
    const { downscale } = first;
    const parent = await this.statefulSetOf(downscale, first.source, signal);
    if ('outcome' in parent) return toAdmissionDecision(parent.outcome);
    const statefulSet = parent.value;
    const info = stsInfo(statefulSet, downscale);
    if (info.kind !== 'proceed') return toAdmissionDecision(info);
    const repeat = this.recentlyAllowedRepeat(downscale);
    if (repeat) return toAdmissionDecision(repeat);
    const review: Review = { downscale, statefulSet, info: info.info, signal };
    return toAdmissionDecision(await this.checkPrepareAndRecord(review, info.next === 'group-checks'));
  }

  /**
   * The StatefulSet whose labels decide: the old object, or for a /scale
   * request its parent (from the cache when there, else the API).
   */
  private async statefulSetOf(
    downscale: Downscale,
    source: StatefulSetSource,
    signal: AbortSignal,
  ): Promise<Step<StatefulSet>> {
    if (source.kind === 'old-object') return { value: source.statefulSet };
    const { namespace, name } = source;
    const cached = this.deps.cachedStatefulSet?.(namespace, name);
    if (cached) return { value: cached };
    try {
      return { value: await this.client.get<StatefulSet>(resources.statefulSets, { namespace, name }, { signal }) };
    } catch (error) {
      const err = messageOf(error);
      // Gone, or never readable with these permissions: allow, as rollout-operator. A read a retry can cure: deny.
      return {
        outcome: isNotFound(error) || isForbidden(error) ? lookupFailed(err) : parentUnreadable(downscale, err),
      };
    }
  }

  /** The outcome of this same downscale when this replica allowed it within RECENTLY_ALLOWED_MS (see there). */
  private recentlyAllowedRepeat(downscale: Downscale): Allow | undefined {
    const now = this.deps.clock.monotonic();
    for (const [k, v] of this.recentlyAllowed) if (now - v.at > RECENTLY_ALLOWED_MS) this.recentlyAllowed.delete(k);
    const repeat = this.recentlyAllowed.get(downscaleKey(downscale));
    if (!repeat) return undefined;
    return { kind: 'allow', ...(repeat.message ? { message: repeat.message } : {}) };
  }

  /** The group checks (when the StatefulSet is in a rollout group), then preparing the leaving pods and recording. */
  private async checkPrepareAndRecord(review: Review, withGroupChecks: boolean): Promise<Allow | Deny> {
    let held: HeldLock | undefined;
    try {
      if (withGroupChecks) {
        // One downscale per group at a time, whichever replica serves it. The
        // group is read only once the lock is held: read before, it could miss
        // the downscale the previous holder recorded just before releasing.
        const locked = await this.lockGroup(review);
        if ('outcome' in locked) return locked.outcome;
        held = locked.value;
      }
      const pods = await this.listPods(review);
      if ('outcome' in pods) return pods.outcome;
      let tracker: ConfigMap | undefined;
      if (withGroupChecks) {
        const checked = await this.checkGroup(review, pods.value);
        if ('outcome' in checked) return checked.outcome;
        tracker = checked.value;
      }
      return await this.prepareAndRecord(review, pods.value, held, tracker);
    } finally {
      await held?.release();
    }
  }

  private async lockGroup({ downscale, info, signal }: Review): Promise<Step<HeldLock>> {
    let held: HeldLock | undefined;
    try {
      held = await this.groupLocks.lock(downscale.namespace, info.rolloutGroup, signal);
    } catch (error) {
      return { outcome: executorFailed(downscale, { kind: 'lock-failed', error: messageOf(error) }) };
    }
    if (!held) return { outcome: executorFailed(downscale, { kind: 'group-locked', statefulSet: downscale.name }) };
    return { value: held };
  }

  private async listPods({ downscale, signal }: Review): Promise<Step<Pod[]>> {
    try {
      return { value: (await this.client.list<Pod>(resources.pods, { namespace: downscale.namespace, signal })).items };
    } catch {
      return { outcome: executorFailed(downscale, { kind: 'list-pods' }) };
    }
  }

  /**
   * Denies when the rollout group forbids the downscale now; otherwise gives
   * the zone tracker it read (zone-tracker mode), for the record to update.
   */
  private async checkGroup(review: Review, pods: readonly Pod[]): Promise<Step<ConfigMap | undefined>> {
    const { downscale, info, signal } = review;
    const { namespace } = downscale;
    let sets: StatefulSet[];
    try {
      sets = (
        await this.client.list<StatefulSet>(resources.statefulSets, {
          namespace,
          labelSelector: groupSelector(info.rolloutGroup),
          signal,
        })
      ).items;
    } catch {
      return { outcome: executorFailed(downscale, { kind: 'list-statefulsets' }) };
    }
    const read = await this.readLastDownscales(review, sets);
    if ('outcome' in read) return read;
    const { lastDownscales, tracker } = read.value;
    const othersPods = new Map(
      sets.map((s) => [s.metadata?.name ?? '', pods.filter((p) => ownerUid(p) === s.metadata?.uid)]),
    );
    const countedFrom = observeLastDownscales(this.sightings, {
      namespace,
      statefulSets: sets.map((s) => s.metadata?.name ?? ''),
      lastDownscales,
      source: this.deps.mode,
      seen: 'read',
    });
    const checks = groupChecks({
      downscale,
      mode: this.deps.mode,
      self: downscale.name,
      others: sets,
      othersPods,
      lastDownscales,
      now: this.deps.clock.now(),
      countedFrom,
    });
    if (checks.kind === 'deny') {
      this.log.info('downscale denied', { statefulSet: downscale.name, namespace, block: checks.block.reason });
      return { outcome: checks };
    }
    return { value: tracker };
  }

  /** The group's last downscales: from the zone tracker ConfigMap (returned too) or the StatefulSets' annotations. */
  private async readLastDownscales(
    { downscale, signal }: Review,
    sets: readonly StatefulSet[],
  ): Promise<Step<{ lastDownscales: Map<string, LastDownscale>; tracker?: ConfigMap }>> {
    if (this.deps.mode !== 'zone-tracker') return { value: { lastDownscales: lastDownscalesFromAnnotations(sets) } };
    let tracker: ConfigMap;
    try {
      tracker = await this.zoneTracker(
        downscale.namespace,
        sets.map((s) => s.metadata?.name ?? ''),
        signal,
      );
    } catch {
      return { outcome: executorFailed(downscale, { kind: 'load-zones' }) };
    }
    const zones = parseZoneTracker(tracker.data);
    const lastDownscales: Map<string, LastDownscale> =
      'error' in zones
        ? new Map(sets.map((s) => [s.metadata?.name ?? '', { error: String(zones.error) }]))
        : lastDownscalesFromZones(zones);
    return { value: { lastDownscales, tracker } };
  }

  /**
   * Prepares the leaving pods, then records the downscale; undoes the
   * preparation when either fails or the lock is lost.
   */
  private async prepareAndRecord(
    review: Review,
    pods: readonly Pod[],
    held: HeldLock | undefined,
    tracker: ConfigMap | undefined,
  ): Promise<Allow | Deny> {
    const { downscale, statefulSet, signal } = review;
    const mine = pods.filter((p) => ownerUid(p) === statefulSet.metadata?.uid);
    const podsByName = new Map(mine.map((p) => [p.metadata?.name ?? '', p]));
    const call = this.leavingEndpoints(review, podsByName);
    // Act only under a lock still ours (renewed within the deadline), before each irreversible step.
    if (held && !held.held()) return executorFailed(downscale, { kind: 'lock-lost' });
    const prepared = afterPrepare({ downscale, call, results: await this.callPods('POST', call, podsByName, signal) });
    if (prepared.kind !== 'record') {
      await this.callPods('DELETE', prepared.undo, podsByName, signal);
      return prepared;
    }
    if (held && !held.held()) {
      await this.callPods('DELETE', call, podsByName, signal);
      return executorFailed(downscale, { kind: 'lock-lost' });
    }
    const recordError = await this.record(downscale, tracker, signal);
    const outcome = afterRecord({
      downscale,
      mode: this.deps.mode,
      call,
      ...(recordError === undefined ? {} : { recordError }),
    });
    if (outcome.kind === 'deny') {
      await this.callPods('DELETE', outcome.undo, podsByName, signal);
      return outcome;
    }
    this.log.info(outcome.message ?? 'downscale allowed', {
      statefulSet: downscale.name,
      namespace: downscale.namespace,
    });
    this.recentlyAllowed.set(downscaleKey(downscale), { at: this.deps.clock.monotonic(), message: outcome.message });
    return outcome;
  }

  /** The prepare-shutdown endpoints of the pods going away that exist. */
  private leavingEndpoints({ downscale, info }: Review, podsByName: ReadonlyMap<string, Pod>): Endpoint[] {
    const { call, skipped } = endpoints({
      sts: downscale.name,
      namespace: downscale.namespace,
      serviceName: info.serviceName,
      port: info.port,
      path: info.path,
      clusterDomain: this.deps.clusterDomain,
      from: downscale.from,
      to: downscale.to,
      existingPods: new Set(podsByName.keys()),
    });
    if (skipped.length > 0)
      this.log.info('pods that do not exist have nothing to prepare', { skipped: skipped.join(',') });
    return call;
  }

  /** POST or DELETE to each endpoint through its pod's own IP (never another address), at most 32 at once. */
  private async callPods(
    method: 'POST' | 'DELETE',
    call: readonly Endpoint[],
    pods: ReadonlyMap<string, Pod>,
    signal: AbortSignal,
  ): Promise<CallResult[]> {
    return mapBounded(call, MAX_PARALLEL_CALLS, async (endpoint) => {
      const result = await this.podCalls.call({
        method,
        url: endpoint.url,
        pod: pods.get(endpoint.pod),
        podName: endpoint.pod,
        timeoutMs: this.deps.podTimeoutMs,
        signal,
      });
      return 'error' in result ? result : { url: result.url, status: result.status };
    });
  }

  private async zoneTracker(namespace: string, names: string[], signal: AbortSignal): Promise<ConfigMap> {
    const where = { namespace, name: this.deps.zoneTrackerConfigMap };
    try {
      return await this.client.get<ConfigMap>(resources.configMaps, where, { signal });
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    try {
      return await this.client.create<ConfigMap>(
        resources.configMaps,
        { metadata: { ...where }, data: initialZoneTracker(names, this.deps.clock.now()) },
        { signal },
      );
    } catch (error) {
      if (!isAlreadyExists(error)) throw error;
      return this.client.get<ConfigMap>(resources.configMaps, where, { signal });
    }
  }

  /** Records the downscale (annotation or zone tracker); the error message when that failed. */
  private async record(
    downscale: Downscale,
    tracker: ConfigMap | undefined,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    try {
      if (this.deps.mode === 'annotation') {
        await this.client.patch(
          resources.statefulSets,
          { namespace: downscale.namespace, name: downscale.name },
          'strategic',
          lastDownscaleAnnotationPatch(this.deps.clock.now()),
          { signal },
        );
        return undefined;
      }
      return await this.recordInZoneTracker(downscale, tracker, signal);
    } catch (error) {
      return messageOf(error);
    }
  }

  private async recordInZoneTracker(
    downscale: Downscale,
    tracker: ConfigMap | undefined,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    // Optimistic concurrency: we hold the group lock, so a conflict means an outside edit; retry from fresh.
    let current = tracker;
    for (let attempt = 0; attempt < 3; attempt++) {
      current ??= await this.client.get<ConfigMap>(
        resources.configMaps,
        { namespace: downscale.namespace, name: this.deps.zoneTrackerConfigMap },
        { signal },
      );
      try {
        await this.client.update<ConfigMap>(
          resources.configMaps,
          { ...current, data: recordDownscale(current.data, downscale.name, this.deps.clock.now()) },
          { signal },
        );
        return undefined;
      } catch (error) {
        if (!isConflict(error)) throw error;
        current = undefined;
      }
    }
    return 'the zone ConfigMap kept changing';
  }
}

/** A group's Lease lock and whether a request of this replica holds it. */
interface GroupLockEntry {
  lock: LeaseLock;
  busy: boolean;
  /** Monotonic. */
  lastUsed: number;
}

/** The group locks of one webhook: a Lease per group, or an in-memory lock when Leases may not be written. */
class GroupLocks {
  private readonly deps: Pick<PrepareDownscaleDeps, 'client' | 'clock' | 'identity' | 'log'>;
  private readonly client: KubeClient;
  private readonly log: Logger;
  /**
   * One LeaseLock per group, kept across requests: its observations of the
   * Lease are what let this replica judge another holder's lock expired
   * (unchanged for the lease duration on this replica's monotonic clock),
   * never a comparison of our wall clock with the holder's renewTime.
   */
  private readonly leases = new Map<string, GroupLockEntry>();
  /** Groups locked in this process, when Leases may not be written (see lock()). */
  private readonly localLocks = new Set<string>();
  private warnedLocal = false;

  constructor(deps: Pick<PrepareDownscaleDeps, 'client' | 'clock' | 'identity' | 'log'>) {
    this.deps = deps;
    this.client = deps.client;
    this.log = deps.log;
  }

  /** Holds the group's Lease for this request, renewing it meanwhile; undefined when another holder has it. */
  async lock(namespace: string, group: string, signal: AbortSignal): Promise<HeldLock | undefined> {
    const entry = this.leaseOf(namespace, group);
    // Another request of this replica holds it: our identity is on the Lease, but the group is busy.
    if (entry.busy) return undefined;
    entry.busy = true;
    let acquired: boolean;
    try {
      acquired = await entry.lock.tryAcquireOrRenew(signal, LOCK_CALL_TIMEOUT_MS);
    } catch (error) {
      entry.busy = false;
      if (isForbidden(error)) return this.localLock(namespace, group, error);
      throw error;
    }
    if (!acquired) {
      entry.busy = false;
      return undefined;
    }
    return this.keepRenewed(entry, group);
  }

  private leaseOf(namespace: string, group: string): GroupLockEntry {
    const now = this.deps.clock.monotonic();
    for (const [k, v] of this.leases) if (!v.busy && now - v.lastUsed > FORGET_LOCK_AFTER_MS) this.leases.delete(k);
    const key = `${namespace}/${group}`;
    let entry = this.leases.get(key);
    if (!entry) {
      const lock = new LeaseLock({
        client: this.client,
        namespace,
        name: lockName(group),
        identity: this.deps.identity,
        leaseDurationMs: LOCK_DURATION_MS,
        clock: this.deps.clock,
        labels: { 'app.kubernetes.io/managed-by': 'stateward' },
      });
      this.leases.set(key, (entry = { lock, busy: false, lastUsed: now }));
    }
    entry.lastUsed = now;
    return entry;
  }

  /**
   * Renew while the request runs (pod calls can take a while): another
   * replica takes over only a lock it has seen unchanged for the lease duration.
   */
  private keepRenewed(entry: GroupLockEntry, group: string): HeldLock {
    let renewing: Promise<unknown> = Promise.resolve();
    let timer: Timer | undefined;
    const renewLater = () => {
      timer = this.deps.clock.setTimer(LOCK_RENEW_EVERY_MS, () => {
        renewing = entry.lock
          .tryAcquireOrRenew(AbortSignal.timeout(LOCK_CALL_TIMEOUT_MS), LOCK_CALL_TIMEOUT_MS)
          .catch((error: unknown) =>
            this.log.warn('could not renew the downscale lock', { lease: lockName(group), err: String(error) }),
          )
          .finally(() => {
            if (timer) renewLater();
          });
      });
    };
    renewLater();
    return {
      held: () => entry.lock.sinceRenewed() < LOCK_RENEW_DEADLINE_MS,
      release: async () => {
        timer?.cancel();
        timer = undefined;
        // A renewal in flight would otherwise write after the release and keep the lock.
        await renewing;
        await entry.lock.release(5000).catch((error: unknown) =>
          this.log.warn('could not release the downscale lock; it expires by itself', {
            lease: lockName(group),
            err: String(error),
          }),
        );
        entry.busy = false;
      },
    };
  }

  /**
   * Not permitted to read or write Leases (an install that kept
   * rollout-operator's Role): serialise this process's downscales of the
   * group in memory, which is what one replica needs and what
   * rollout-operator does.
   */
  private localLock(namespace: string, group: string, error: unknown): HeldLock | undefined {
    if (!this.warnedLocal) {
      this.warnedLocal = true;
      this.log.warn(
        'not permitted to write the prepare-downscale lock Lease: downscales are serialised within this replica only; grant coordination.k8s.io leases create,get,update (deploy/kustomize/rbac/PERMISSIONS.md) before running several replicas',
        { namespace, err: String(error) },
      );
    }
    const key = `${namespace}/${group}`;
    if (this.localLocks.has(key)) return undefined;
    this.localLocks.add(key);
    return {
      held: () => true,
      release: () => {
        this.localLocks.delete(key);
        return Promise.resolve();
      },
    };
  }
}
