// The prepare-downscale webhook's imperative shell: the API reads and
// writes, the calls to the pods going away, and a group lock that holds
// across requests and across operator replicas. Every decision is made by
// the pure steps in prepareplan.ts.
//
// Fail-open on decoding and lookup errors (as rollout-operator); fail-closed
// (deny) on group-check errors, failed pod preparation and a failed record.
//
// Where a downscale is recorded before it is allowed: the zone tracker
// ConfigMap (-use-zone-tracker), or the group's lock Lease
// (leaserecords.ts) — never the StatefulSet under review, whose update that
// write would make conflict (grafana/rollout-operator #303: the
// HorizontalPodAutoscaler's /scale updates failed). grafana.com/last-downscale
// is copied onto the StatefulSet once the downscale has landed. Only when
// Leases may not be written (rollout-operator's Role) is it written on the
// StatefulSet during admission, as rollout-operator does.
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
} from './prepareplan.ts';
import { lastDownscalesFromAnnotations, type CountedFrom, type LastDownscale } from '../mintime.ts';
import { mapBounded, PodClient, podClient } from '../../workloads/podclient.ts';
import { workloadCache } from '../../workloads/cache.ts';
import { cached } from '../../runtime/informer/informer.ts';
import type { Runtime } from '../../runtime/operator.ts';
import { initialZoneTracker, parseZoneTracker, recordDownscale } from './zonetracker.ts';
import { observeLastDownscales } from '../clocksteps.ts';
import {
  LEASE_LAST_DOWNSCALES_ANNOTATION,
  lastDownscalesWithLease,
  parseLeaseRecords,
  recordInLease,
  type LeaseRecord,
} from './leaserecords.ts';
import { LAST_DOWNSCALE_ANNOTATION_KEY } from '../../vocabulary/keys.ts';
import { formatRfc3339 } from '../../vocabulary/rfc3339.ts';

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
/** After a refused Lease request, how long downscales use the in-memory lock before Leases are tried again. */
const LEASES_REFUSED_ASK_AGAIN_MS = 10 * 60_000;

/** A group lock held for one request. */
interface HeldLock {
  /** True while this replica may act under the lock. */
  held(): boolean;
  release(): Promise<void>;
  /** The group's Lease, where downscales are recorded; absent for an in-memory lock (Leases not permitted). */
  lease?: LeaseLock;
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
 * When the record was written on the StatefulSet during admission (Leases
 * not permitted), the apiserver retries a PATCH whose update that write made
 * conflict, running admission again for the same change: within this window
 * (a retry comes within milliseconds) the repeat is allowed at once instead
 * of preparing the pods and recording — and conflicting — again. Kept short:
 * a repeat allowed here keeps the earlier record, so the record can read
 * this much earlier than the downscale. No other record needs it: a retry
 * runs every step again and records its own time.
 */
const RECENTLY_ALLOWED_MS = 5_000;
/** How long the copy of a record onto the StatefulSet waits for the downscale to land. */
const COPY_DEADLINE_MS = 60_000;
/** How often it looks for the landed downscale in the cache (or the API). */
const COPY_POLL_MS = 250;

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

/** What the group checks read, for the record to update. */
interface GroupRead {
  /** The zone tracker (zone-tracker mode). */
  tracker?: ConfigMap;
  /** The records on the group's Lease (annotation mode, under a Lease lock). */
  leaseRecords?: ReadonlyMap<string, LeaseRecord>;
  /** The StatefulSet's grafana.com/last-downscale as listed ('' for none): what its record is made over. */
  over: string;
  /** The names of the group's StatefulSets. */
  group: string[];
}

/** How a downscale was recorded, or why it could not be. */
interface Recorded {
  error?: string;
  /** grafana.com/last-downscale to copy onto the StatefulSet once the downscale lands. */
  copyAt?: number;
  /** Written on the StatefulSet during admission (Leases not permitted): the apiserver's retry is a repeat. */
  onObject?: boolean;
}

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
      let read: GroupRead | undefined;
      if (withGroupChecks) {
        const checked = await this.checkGroup(review, pods.value, held);
        if ('outcome' in checked) return checked.outcome;
        read = checked.value;
      }
      return await this.prepareAndRecord(review, pods.value, held, read);
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
   * what it read of the records, for the record to update.
   */
  private async checkGroup(review: Review, pods: readonly Pod[], held: HeldLock | undefined): Promise<Step<GroupRead>> {
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
    const read = await this.readLastDownscales(review, sets, held);
    if ('outcome' in read) return read;
    const { lastDownscales, tracker, leaseRecords } = read.value;
    const othersPods = new Map(
      sets.map((s) => [s.metadata?.name ?? '', pods.filter((p) => ownerUid(p) === s.metadata?.uid)]),
    );
    const countedFrom = this.observeStamps(namespace, sets, lastDownscales, leaseRecords);
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
      const { block } = checks;
      this.log.info('downscale denied', {
        statefulSet: downscale.name,
        namespace,
        block: block.reason,
        // The refusal's text is rollout-operator's and says only that parsing failed: what and why is here.
        ...(block.reason === 'parse-error' ? { err: block.error } : {}),
      });
      return { outcome: checks };
    }
    return {
      value: {
        ...(tracker ? { tracker } : {}),
        ...(leaseRecords ? { leaseRecords } : {}),
        group: sets.map((s) => s.metadata?.name ?? ''),
        over:
          sets.find((s) => s.metadata?.name === downscale.name)?.metadata?.annotations?.[
            LAST_DOWNSCALE_ANNOTATION_KEY
          ] ?? '',
      },
    };
  }

  /**
   * The group's last downscales: from the zone tracker ConfigMap (returned
   * too), or the later of the StatefulSets' annotations and the records on
   * the group's Lease (returned too), as read when the lock was taken.
   */
  /**
   * Shows the stamps this admission reads to the min-time sightings: those
   * the annotations (or the zone tracker) hold, each in its source's scope,
   * and those only a group lock's record holds yet in the record's scope,
   * so neither scope sees its value come and go (clocksteps.ts).
   */
  private observeStamps(
    namespace: string,
    sets: readonly StatefulSet[],
    lastDownscales: ReadonlyMap<string, LastDownscale>,
    leaseRecords: ReadonlyMap<string, LeaseRecord> | undefined,
  ): Map<string, CountedFrom> {
    const names = sets.map((s) => s.metadata?.name ?? '');
    if (this.deps.mode === 'zone-tracker' || !leaseRecords)
      return observeLastDownscales(this.sightings, {
        namespace,
        statefulSets: names,
        lastDownscales,
        source: this.deps.mode,
        seen: 'read',
      });
    const fromAnnotations = lastDownscalesFromAnnotations(sets);
    const fromRecords = new Map(
      [...lastDownscales].filter(([name, value]) => value !== fromAnnotations.get(name) && typeof value === 'number'),
    );
    const counted = observeLastDownscales(this.sightings, {
      namespace,
      statefulSets: names,
      lastDownscales: fromAnnotations,
      source: 'annotation',
      seen: 'read',
    });
    const countedFromRecords = observeLastDownscales(this.sightings, {
      namespace,
      statefulSets: names,
      lastDownscales: fromRecords,
      source: 'lease-record',
      seen: 'read',
    });
    for (const [name, value] of countedFromRecords) counted.set(name, value);
    return counted;
  }

  private async readLastDownscales(
    { downscale, info, signal }: Review,
    sets: readonly StatefulSet[],
    held: HeldLock | undefined,
  ): Promise<
    Step<{ lastDownscales: Map<string, LastDownscale>; tracker?: ConfigMap; leaseRecords?: Map<string, LeaseRecord> }>
  > {
    if (this.deps.mode !== 'zone-tracker') {
      if (!held?.lease) return { value: { lastDownscales: lastDownscalesFromAnnotations(sets) } };
      const leaseRecords = parseLeaseRecords(held.lease.annotation(LEASE_LAST_DOWNSCALES_ANNOTATION));
      if ('error' in leaseRecords) {
        const error = `Lease ${downscale.namespace}/${lockName(info.rolloutGroup)}: ${leaseRecords.error}`;
        return { value: { lastDownscales: new Map(sets.map((s) => [s.metadata?.name ?? '', { error }])) } };
      }
      return { value: { lastDownscales: lastDownscalesWithLease(sets, leaseRecords), leaseRecords } };
    }
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
    read: GroupRead | undefined,
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
    const recorded = await this.record(downscale, held, read, signal);
    const outcome = afterRecord({
      downscale,
      mode: this.deps.mode,
      call,
      ...(recorded.error === undefined ? {} : { recordError: recorded.error }),
    });
    if (outcome.kind === 'deny') {
      await this.callPods('DELETE', outcome.undo, podsByName, signal);
      return outcome;
    }
    this.log.info(outcome.message ?? 'downscale allowed', {
      statefulSet: downscale.name,
      namespace: downscale.namespace,
    });
    if (recorded.onObject)
      this.recentlyAllowed.set(downscaleKey(downscale), { at: this.deps.clock.monotonic(), message: outcome.message });
    if (recorded.copyAt !== undefined)
      void this.copyWhenLanded(downscale, recorded.copyAt, statefulSet.metadata?.generation);
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

  /**
   * Records the downscale before it is allowed, where min-time reads it:
   * the zone tracker; the group's Lease (then copied onto the StatefulSet
   * once landed); for a StatefulSet in no group, only the copy (no other
   * zone's min-time reads it); with an in-memory lock, the StatefulSet
   * itself, during admission, as rollout-operator does.
   */
  private async record(
    downscale: Downscale,
    held: HeldLock | undefined,
    read: GroupRead | undefined,
    signal: AbortSignal,
  ): Promise<Recorded> {
    const now = this.deps.clock.now();
    try {
      if (this.deps.mode === 'zone-tracker') {
        const error = await this.recordInZoneTracker(downscale, read?.tracker, signal);
        return error === undefined ? {} : { error };
      }
      if (held?.lease) {
        const record = { at: now, over: read?.over ?? '' };
        const value = recordInLease(read?.leaseRecords ?? new Map(), downscale.name, record, read?.group ?? []);
        await held.lease.annotate(LEASE_LAST_DOWNSCALES_ANNOTATION, value, signal, LOCK_CALL_TIMEOUT_MS);
        return { copyAt: now };
      }
      if (!held) return { copyAt: now };
      await this.client.patch(
        resources.statefulSets,
        { namespace: downscale.namespace, name: downscale.name },
        'strategic',
        lastDownscaleAnnotationPatch(now),
        { signal },
      );
      return { onObject: true };
    } catch (error) {
      return { error: messageOf(error) };
    }
  }

  /**
   * Copies a record onto the StatefulSet's grafana.com/last-downscale once
   * the downscale has landed (the update we admitted is committed): written
   * before, it would be the conflicting write the record on the Lease
   * avoids. A downscale that does not land within the deadline is not
   * copied: nothing was downscaled, and its record on the Lease holds the
   * other zones back meanwhile, the safe side. Never throws.
   */
  private async copyWhenLanded(
    downscale: Downscale,
    at: number,
    reviewedGeneration: number | undefined,
  ): Promise<void> {
    const { clock } = this.deps;
    const where = { namespace: downscale.namespace, name: downscale.name };
    const deadline = clock.monotonic() + COPY_DEADLINE_MS;
    let lastError = 'it did not land';
    while (clock.monotonic() < deadline) {
      try {
        const current =
          this.deps.cachedStatefulSet?.(where.namespace, where.name) ??
          (await this.client.get<StatefulSet>(resources.statefulSets, where, { timeoutMs: LOCK_CALL_TIMEOUT_MS }));
        // Landed: a spec newer than the one reviewed, at or below the new count. The count alone is not
        // enough: a cache that has not yet seen an upscale before this downscale shows it already low.
        const newer = reviewedGeneration === undefined || (current.metadata?.generation ?? 0) > reviewedGeneration;
        if (newer && (current.spec?.replicas ?? 1) <= downscale.to) {
          // Written over whatever is there, even a later stamp: this downscale is the latest, whatever the
          // clocks of the replicas that stamped them said (leaserecords.ts).
          if (current.metadata?.annotations?.[LAST_DOWNSCALE_ANNOTATION_KEY] === formatRfc3339(at)) return;
          await this.client.patch(resources.statefulSets, where, 'strategic', lastDownscaleAnnotationPatch(at), {
            timeoutMs: LOCK_CALL_TIMEOUT_MS,
          });
          return;
        }
      } catch (error) {
        lastError = messageOf(error);
        // Refused: a retry is refused too. The record on the Lease still holds.
        if (isForbidden(error) || isNotFound(error)) break;
      }
      await clock.sleep(COPY_POLL_MS);
    }
    this.log.warn(
      `could not copy the downscale's record onto ${LAST_DOWNSCALE_ANNOTATION_KEY}; min-time still counts it from the group's Lease`,
      { statefulSet: downscale.name, namespace: downscale.namespace, err: lastError },
    );
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
  /**
   * Monotonic time until which Leases are taken as not permitted: a refusal
   * is not asked again on every downscale (a Role fixed later is found at
   * the next try after this).
   */
  private leasesRefusedUntil = -Infinity;

  constructor(deps: Pick<PrepareDownscaleDeps, 'client' | 'clock' | 'identity' | 'log'>) {
    this.deps = deps;
    this.client = deps.client;
    this.log = deps.log;
  }

  /** Holds the group's Lease for this request, renewing it meanwhile; undefined when another holder has it. */
  async lock(namespace: string, group: string, signal: AbortSignal): Promise<HeldLock | undefined> {
    if (this.deps.clock.monotonic() < this.leasesRefusedUntil) return this.localLock(namespace, group, undefined);
    const entry = this.leaseOf(namespace, group);
    // Another request of this replica holds it: our identity is on the Lease, but the group is busy.
    if (entry.busy) return undefined;
    entry.busy = true;
    let acquired: boolean;
    try {
      acquired = await entry.lock.tryAcquireOrRenew(signal, LOCK_CALL_TIMEOUT_MS);
    } catch (error) {
      entry.busy = false;
      if (!isForbidden(error)) throw error;
      this.leasesRefusedUntil = this.deps.clock.monotonic() + LEASES_REFUSED_ASK_AGAIN_MS;
      return this.localLock(namespace, group, error);
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
      lease: entry.lock,
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
        'not permitted to write the prepare-downscale lock Lease: downscales are serialised within this replica only, and recorded on the StatefulSet during admission, so an update of it with a resourceVersion (an HPA scaling it) conflicts (rollout-operator #303); grant coordination.k8s.io leases create,get,update (deploy/kustomize/rbac/PERMISSIONS.md). Leases are tried again in 10 minutes',
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
