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
import type { AdmissionHandler } from '../../runtime/admission/admission.ts';
import {
  afterPrepare,
  afterRecord,
  endpoints,
  executorFailed,
  firstChecks,
  groupChecks,
  groupSelector,
  lastDownscaleAnnotationPatch,
  lastDownscalesFromAnnotations,
  lastDownscalesFromZones,
  lookupFailed,
  parentUnreadable,
  stsInfo,
  toAdmissionDecision,
  type CallResult,
  type Downscale,
  type Endpoint,
  type TrackerMode,
} from './plan.ts';
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

export function prepareDownscaleHandler(deps: PrepareDownscaleDeps): AdmissionHandler {
  const { client, log } = deps;
  const podCalls = deps.podClient ?? new PodClient();
  const sightings = deps.sightings ?? new TimestampSightings(deps.clock);
  /** `at` is monotonic. */
  const recentlyAllowed = new Map<string, { at: number; message: string | undefined }>();
  const key = (d: Downscale) => `${d.namespace}/${d.name}:${d.from}->${d.to}`;

  /** Groups locked in this process, when Leases may not be written (see lock()). */
  const localLocks = new Set<string>();
  let warnedLocal = false;

  /**
   * Not permitted to read or write Leases (an install that kept
   * rollout-operator's Role): serialise this process's downscales of the
   * group in memory, which is what one replica needs and what
   * rollout-operator does.
   */
  function localLock(namespace: string, group: string, error: unknown): HeldLock | undefined {
    if (!warnedLocal) {
      warnedLocal = true;
      log.warn(
        'not permitted to write the prepare-downscale lock Lease: downscales are serialised within this replica only; grant coordination.k8s.io leases create,get,update (deploy/kustomize/rbac/PERMISSIONS.md) before running several replicas',
        { namespace, err: String(error) },
      );
    }
    const key = `${namespace}/${group}`;
    if (localLocks.has(key)) return undefined;
    localLocks.add(key);
    return {
      held: () => true,
      release: () => {
        localLocks.delete(key);
        return Promise.resolve();
      },
    };
  }

  /**
   * One LeaseLock per group, kept across requests: its observations of the
   * Lease are what let this replica judge another holder's lock expired
   * (unchanged for the lease duration on this replica's monotonic clock),
   * never a comparison of our wall clock with the holder's renewTime.
   */
  const groupLocks = new Map<string, { lock: LeaseLock; busy: boolean; lastUsed: number }>();

  function groupLock(namespace: string, group: string): { lock: LeaseLock; busy: boolean; lastUsed: number } {
    const now = deps.clock.monotonic();
    for (const [k, v] of groupLocks) if (!v.busy && now - v.lastUsed > FORGET_LOCK_AFTER_MS) groupLocks.delete(k);
    const key = `${namespace}/${group}`;
    let entry = groupLocks.get(key);
    if (!entry) {
      const lock = new LeaseLock({
        client,
        namespace,
        name: lockName(group),
        identity: deps.identity,
        leaseDurationMs: LOCK_DURATION_MS,
        clock: deps.clock,
        labels: { 'app.kubernetes.io/managed-by': 'stateward' },
      });
      groupLocks.set(key, (entry = { lock, busy: false, lastUsed: now }));
    }
    entry.lastUsed = now;
    return entry;
  }

  /** Holds the group's Lease for this request, renewing it meanwhile; undefined when another holder has it. */
  async function lock(namespace: string, group: string, signal: AbortSignal): Promise<HeldLock | undefined> {
    const entry = groupLock(namespace, group);
    // Another request of this replica holds it: our identity is on the Lease, but the group is busy.
    if (entry.busy) return undefined;
    entry.busy = true;
    let acquired: boolean;
    try {
      acquired = await entry.lock.tryAcquireOrRenew(signal, LOCK_CALL_TIMEOUT_MS);
    } catch (error) {
      entry.busy = false;
      if (isForbidden(error)) return localLock(namespace, group, error);
      throw error;
    }
    if (!acquired) {
      entry.busy = false;
      return undefined;
    }
    // Renew while the request runs (pod calls can take a while): another
    // replica takes over only a lock it has seen unchanged for the lease duration.
    let renewing: Promise<unknown> = Promise.resolve();
    let timer: Timer | undefined;
    const renewLater = () => {
      timer = deps.clock.setTimer(LOCK_RENEW_EVERY_MS, () => {
        renewing = entry.lock
          .tryAcquireOrRenew(AbortSignal.timeout(LOCK_CALL_TIMEOUT_MS), LOCK_CALL_TIMEOUT_MS)
          .catch((error: unknown) =>
            log.warn('could not renew the downscale lock', { lease: lockName(group), err: String(error) }),
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
          log.warn('could not release the downscale lock; it expires by itself', {
            lease: lockName(group),
            err: String(error),
          }),
        );
        entry.busy = false;
      },
    };
  }

  /** POST or DELETE to each endpoint through its pod's own IP (never another address), at most 32 at once. */
  async function callPods(
    method: 'POST' | 'DELETE',
    call: readonly Endpoint[],
    pods: ReadonlyMap<string, Pod>,
    signal: AbortSignal,
  ): Promise<CallResult[]> {
    return mapBounded(call, MAX_PARALLEL_CALLS, async (endpoint) => {
      const result = await podCalls.call({
        method,
        url: endpoint.url,
        pod: pods.get(endpoint.pod),
        podName: endpoint.pod,
        timeoutMs: deps.podTimeoutMs,
        signal,
      });
      return 'error' in result ? result : { url: result.url, status: result.status };
    });
  }

  async function zoneTracker(namespace: string, names: string[], signal: AbortSignal): Promise<ConfigMap> {
    const where = { namespace, name: deps.zoneTrackerConfigMap };
    try {
      return await client.get<ConfigMap>(resources.configMaps, where, { signal });
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    try {
      return await client.create<ConfigMap>(
        resources.configMaps,
        { metadata: { ...where }, data: initialZoneTracker(names, deps.clock.now()) },
        { signal },
      );
    } catch (error) {
      if (!isAlreadyExists(error)) throw error;
      return client.get<ConfigMap>(resources.configMaps, where, { signal });
    }
  }

  async function record(
    downscale: Downscale,
    tracker: ConfigMap | undefined,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    try {
      if (deps.mode === 'annotation') {
        await client.patch(
          resources.statefulSets,
          { namespace: downscale.namespace, name: downscale.name },
          'strategic',
          lastDownscaleAnnotationPatch(deps.clock.now()),
          { signal },
        );
        return undefined;
      }
      // Optimistic concurrency: we hold the group lock, so a conflict means an outside edit; retry from fresh.
      let current = tracker;
      for (let attempt = 0; attempt < 3; attempt++) {
        current ??= await client.get<ConfigMap>(
          resources.configMaps,
          { namespace: downscale.namespace, name: deps.zoneTrackerConfigMap },
          { signal },
        );
        try {
          await client.update<ConfigMap>(
            resources.configMaps,
            { ...current, data: recordDownscale(current.data, downscale.name, deps.clock.now()) },
            { signal },
          );
          return undefined;
        } catch (error) {
          if (!isConflict(error)) throw error;
          current = undefined;
        }
      }
      return 'the zone ConfigMap kept changing';
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
  }

  return async (request, signal) => {
    const first = firstChecks(request);
    if (first.kind === 'allow') return toAdmissionDecision(first);
    const { downscale } = first;
    let statefulSet: StatefulSet;
    if (first.source.kind === 'old-object') {
      statefulSet = first.source.statefulSet;
    } else {
      const { namespace, name } = first.source;
      const cached = deps.cachedStatefulSet?.(namespace, name);
      if (cached) statefulSet = cached;
      else {
        try {
          statefulSet = await client.get<StatefulSet>(resources.statefulSets, { namespace, name }, { signal });
        } catch (error) {
          const err = error instanceof Error ? error.message : String(error);
          // Gone, or never readable with these permissions: allow, as rollout-operator. A read a retry can cure: deny.
          return toAdmissionDecision(
            isNotFound(error) || isForbidden(error) ? lookupFailed(err) : parentUnreadable(downscale, err),
          );
        }
      }
    }
    const info = stsInfo(statefulSet, downscale);
    if (info.kind !== 'proceed') return toAdmissionDecision(info);
    const now = deps.clock.monotonic();
    for (const [k, v] of recentlyAllowed) if (now - v.at > RECENTLY_ALLOWED_MS) recentlyAllowed.delete(k);
    const repeat = recentlyAllowed.get(key(downscale));
    if (repeat) return toAdmissionDecision({ kind: 'allow', ...(repeat.message ? { message: repeat.message } : {}) });
    const { namespace } = downscale;
    const group = info.info.rolloutGroup;

    let held: HeldLock | undefined;
    try {
      if (info.next === 'group-checks') {
        // One downscale per group at a time, whichever replica serves it. The
        // group is read only once the lock is held: read before, it could miss
        // the downscale the previous holder recorded just before releasing.
        try {
          held = await lock(namespace, group, signal);
        } catch (error) {
          return toAdmissionDecision(
            executorFailed(downscale, {
              kind: 'lock-failed',
              error: error instanceof Error ? error.message : String(error),
            }),
          );
        }
        if (!held)
          return toAdmissionDecision(executorFailed(downscale, { kind: 'group-locked', statefulSet: downscale.name }));
      }
      let pods: Pod[];
      try {
        pods = (await client.list<Pod>(resources.pods, { namespace, signal })).items;
      } catch {
        return toAdmissionDecision(executorFailed(downscale, { kind: 'list-pods' }));
      }
      let tracker: ConfigMap | undefined;
      if (info.next === 'group-checks') {
        let sets: StatefulSet[];
        try {
          sets = (
            await client.list<StatefulSet>(resources.statefulSets, {
              namespace,
              labelSelector: groupSelector(group),
              signal,
            })
          ).items;
        } catch {
          return toAdmissionDecision(executorFailed(downscale, { kind: 'list-statefulsets' }));
        }
        let lastDownscales;
        if (deps.mode === 'zone-tracker') {
          try {
            tracker = await zoneTracker(
              namespace,
              sets.map((s) => s.metadata?.name ?? ''),
              signal,
            );
          } catch {
            return toAdmissionDecision(executorFailed(downscale, { kind: 'load-zones' }));
          }
          const zones = parseZoneTracker(tracker.data);
          lastDownscales =
            'error' in zones
              ? new Map(sets.map((s) => [s.metadata?.name ?? '', { error: String(zones.error) }]))
              : lastDownscalesFromZones(zones);
        } else {
          lastDownscales = lastDownscalesFromAnnotations(sets);
        }
        const othersPods = new Map(
          sets.map((s) => [s.metadata?.name ?? '', pods.filter((p) => ownerUid(p) === s.metadata?.uid)]),
        );
        const countedFrom = observeLastDownscales(sightings, {
          namespace,
          statefulSets: sets.map((s) => s.metadata?.name ?? ''),
          lastDownscales,
          source: deps.mode,
          seen: 'read',
        });
        const checks = groupChecks({
          downscale,
          mode: deps.mode,
          self: downscale.name,
          others: sets,
          othersPods,
          lastDownscales,
          now: deps.clock.now(),
          countedFrom,
        });
        if (checks.kind === 'deny') {
          log.info('downscale denied', { statefulSet: downscale.name, namespace, block: checks.block.reason });
          return toAdmissionDecision(checks);
        }
      }
      const mine = pods.filter((p) => ownerUid(p) === statefulSet.metadata?.uid);
      const podsByName = new Map(mine.map((p) => [p.metadata?.name ?? '', p]));
      const { call, skipped } = endpoints({
        sts: downscale.name,
        namespace,
        serviceName: info.info.serviceName,
        port: info.info.port,
        path: info.info.path,
        clusterDomain: deps.clusterDomain,
        from: downscale.from,
        to: downscale.to,
        existingPods: new Set(podsByName.keys()),
      });
      if (skipped.length > 0)
        log.info('pods that do not exist have nothing to prepare', { skipped: skipped.join(',') });
      // Act only under a lock still ours (renewed within the deadline), before each irreversible step.
      if (held && !held.held()) return toAdmissionDecision(executorFailed(downscale, { kind: 'lock-lost' }));
      const prepared = afterPrepare({ downscale, call, results: await callPods('POST', call, podsByName, signal) });
      if (prepared.kind !== 'record') {
        await callPods('DELETE', prepared.undo, podsByName, signal);
        return toAdmissionDecision(prepared);
      }
      if (held && !held.held()) {
        await callPods('DELETE', call, podsByName, signal);
        return toAdmissionDecision(executorFailed(downscale, { kind: 'lock-lost' }));
      }
      const outcome = afterRecord({
        downscale,
        mode: deps.mode,
        call,
        ...(await record(downscale, tracker, signal).then((e) => (e === undefined ? {} : { recordError: e }))),
      });
      if (outcome.kind === 'deny') {
        await callPods('DELETE', outcome.undo, podsByName, signal);
        return toAdmissionDecision(outcome);
      }
      log.info(outcome.message ?? 'downscale allowed', { statefulSet: downscale.name, namespace });
      recentlyAllowed.set(key(downscale), { at: deps.clock.monotonic(), message: outcome.message });
      return toAdmissionDecision(outcome);
    } finally {
      await held?.release();
    }
  };
}
