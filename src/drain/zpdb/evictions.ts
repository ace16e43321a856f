// /admission/pod-eviction: the imperative shell around decide.ts. Every
// input comes from the shared informer caches (pods, StatefulSets, ZPDBs,
// ledgers); the only API calls are the ledger write an allowed eviction
// needs, a re-read after a conflict, and a pod GET when the cache does not
// know the pod yet. rollout-operator makes 4+ live calls per eviction (the
// rate-limit storms of its #391/#441).
//
// Failure answers are chosen for `kubectl drain`, which retries 429 and
// treats 404 as "already gone" but aborts on anything else: a missing pod
// is a 404, a transient failure a 429, never a 500 or 400 that would abort
// a drain for a reason a retry fixes.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Clock } from '../../runtime/clock.ts';
import { TimestampSightings, type Counted, type Seen } from '../../runtime/sightings.ts';
import { informerFor, type Informer } from '../../runtime/informer/informer.ts';
import type { KubeClient } from '../../runtime/kube/client.ts';
import { isEvictionDryRun } from '../dryrun.ts';
import { isAlreadyExists, isConflict, isForbidden, isNotFound } from '../../runtime/kube/errors.ts';
import { resources, type Lease, type Pod, type StatefulSet } from '../../runtime/kube/types.ts';
import type { Logger } from '../../runtime/log/logger.ts';
import { INDEX, workloadCache } from '../../workloads/cache.ts';
import type { Runtime } from '../../runtime/operator.ts';
import type { AdmissionDecision, AdmissionHandler, AdmissionRequestV1 } from '../../runtime/admission/admission.ts';
import {
  invalidZpdb,
  invalidZpdbEffect,
  parseZpdb,
  ZPDB_API_VERSION,
  ZPDB_KIND,
  zpdbResource,
  type InvalidZpdb,
  type ZoneAwarePodDisruptionBudget,
  type ZpdbConfig,
} from './zpdbresource.ts';
import type { EventRecorder } from '../../runtime/events/recorder.ts';
import {
  admitEviction,
  decideRolloutDelete,
  evictionScope,
  podCanIgnoreBudget,
  type EvictionDecision,
} from './decide.ts';
import { decodeLedger, encodeLedger, ledgerName, pendingFrom, pruneLedger, type Ledger } from './ledger.ts';
import { LEDGER_ANNOTATION, LEDGER_LABEL } from '../../vocabulary/keys.ts';

export interface ZpdbCaches {
  pods: Informer<Pod>[];
  statefulSets: Informer<StatefulSet>[];
  zpdbs: Informer<ZoneAwarePodDisruptionBudget>[];
  ledgers: Informer<Lease>[];
}

export interface ZpdbBudgetDeps {
  client: KubeClient;
  clock: Clock;
  log: Logger;
  registry: Registry;
  caches: ZpdbCaches;
  /** Where an invalid budget is reported to its owner (an Event on the ZPDB). */
  events?: Pick<EventRecorder, 'event'>;
  /** Where ledger stamps are tracked; the runtime's, shared with min-time (default: these budgets' own). */
  sightings?: TimestampSightings;
}

/** The resourceVersion of a ledger kept in this process (never sent to the API). */
const IN_PROCESS = 'in-process';

/** Ledger writes per eviction before answering "retry" (each conflict means another allow committed first). */
const MAX_LEDGER_ATTEMPTS = 5;

type Answer = { decision: AdmissionDecision; reason: string; status: number };

const allow = (reason: string, warning?: string): Answer => ({
  decision: { allowed: true, ...(warning ? { warnings: [warning] } : {}) },
  reason,
  status: 200,
});
const deny = (code: number, reason: string, message: string): Answer => ({
  decision: {
    allowed: false,
    status: {
      code,
      message,
      reason:
        code === 429
          ? 'TooManyRequests'
          : code === 404
            ? 'NotFound'
            : code === 403
              ? 'Forbidden'
              : code === 400
                ? 'BadRequest'
                : 'InternalError',
    },
  },
  reason,
  status: code,
});

function fromDecision(d: EvictionDecision): Answer {
  return d.allowed ? allow(d.reason, d.warning) : deny(d.code, d.reason, d.message);
}

/**
 * A look for a missing ZPDB resource is fresh this long. For evictions: the
 * evictions of one drain share it. For rolling deletes, the operator's own
 * pace (one every few seconds through a whole rollout) would otherwise make
 * a look per delete in every cluster without the CRD; the rollout's own
 * max-unavailable holds meanwhile.
 */
const LOOK_FRESH_MS = { eviction: 1_000, rollingDelete: 30_000 };
/**
 * A decision waits at most this long for that look. An eviction whose look
 * has not ended by then is answered "retry" (429): deciding without the
 * budgets the look may be about to find would let a second zone go (found
 * by CI on a loaded machine, where the first look after a Role was granted
 * took longer). A rolling delete is decided on the cache as it is: the
 * rollout's own max-unavailable holds meanwhile.
 */
const LOOK_WAIT_MS = 2_000;

export class ZpdbBudgets {
  private readonly d: ZpdbBudgetDeps;
  private readonly sightings: TimestampSightings;
  private readonly requests: Counter;
  private readonly inflight: Gauge;
  private readonly observed: Counter;
  /** Parsed ZPDBs by uid, reparsed when the generation changes; an invalid one keeps what can be read of it. */
  private readonly parsed = new Map<string, { generation: number; config?: ZpdbConfig; invalid?: InvalidZpdb }>();
  /** One ledger write at a time per ZPDB in this process; other replicas meet at the resourceVersion. */
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Namespaces where Leases may not be written: ledgers live in `written` only. */
  private readonly inProcessLedgers = new Set<string>();
  /** Ledgers this process wrote last, until the cache catches up. */
  private readonly written = new Map<string, Lease>();

  constructor(deps: ZpdbBudgetDeps) {
    this.sightings = deps.sightings ?? new TimestampSightings(deps.clock);
    this.d = deps;
    this.requests = new Counter({
      name: 'rollout_operator_zpdb_eviction_requests_total',
      help: 'Pod eviction requests and rolling-update deletions judged against zone-aware pod disruption budgets.',
      labelNames: ['reason', 'status'],
      registers: [deps.registry],
    });
    this.inflight = new Gauge({
      name: 'rollout_operator_zpdb_inflight_eviction_requests',
      help: 'Pod eviction requests being judged against zone-aware pod disruption budgets.',
      registers: [deps.registry],
    });
    this.observed = new Counter({
      name: 'rollout_operator_zpdb_configurations_observed_total',
      help: 'Zone-aware pod disruption budgets seen, by result.',
      labelNames: ['result'],
      registers: [deps.registry],
    });
    for (const informer of deps.caches.ledgers) {
      informer.addHandlers({
        onAdd: (l, initial) => {
          this.caughtUp(l);
          this.seeLedger(l, initial ? 'read' : 'event');
        },
        onUpdate: (_old, l) => {
          this.caughtUp(l);
          this.seeLedger(l, 'event');
        },
      });
    }
    for (const informer of deps.caches.zpdbs) {
      informer.addHandlers({
        onAdd: (z) => this.observe(z),
        onUpdate: (_old, z) => this.observe(z),
        onDelete: (z) => {
          this.parsed.delete(z.metadata?.uid ?? '');
          this.observed.inc({ result: 'deleted' });
        },
      });
    }
  }

  /** The caches the budgets are judged on, for read-only views of the same state. */
  get caches(): ZpdbCaches {
    return this.d.caches;
  }

  readonly handler: AdmissionHandler = async (request, signal) => {
    this.inflight.inc();
    try {
      const answer = await this.judge(request, signal);
      this.requests.inc({ reason: answer.reason, status: String(answer.status) });
      return answer.decision;
    } finally {
      this.inflight.dec();
    }
  };

  private observe(z: ZoneAwarePodDisruptionBudget): void {
    const uid = z.metadata?.uid ?? '';
    const generation = z.metadata?.generation ?? 0;
    const known = this.parsed.get(uid);
    if (known && known.generation > generation) {
      this.observed.inc({ result: 'ignored' });
      return;
    }
    if (known && known.generation === generation) return;
    const result = parseZpdb(z);
    if ('error' in result) {
      // Fails closed: the pods it may cover are not evicted until it is fixed (decide.ts evictionScope).
      const invalid = invalidZpdb(z, result.error);
      this.d.log.warn(`invalid ZoneAwarePodDisruptionBudget: ${invalidZpdbEffect(invalid)}`, {
        namespace: z.metadata?.namespace,
        name: z.metadata?.name,
        err: result.error,
      });
      this.d.events?.event(
        {
          apiVersion: ZPDB_API_VERSION,
          kind: ZPDB_KIND,
          namespace: z.metadata?.namespace,
          name: z.metadata?.name ?? '',
          uid,
        },
        'Warning',
        'InvalidBudget',
        'Validate',
        `invalid, ${invalidZpdbEffect(invalid)}: ${result.error}`,
      );
      this.parsed.set(uid, { generation, invalid });
      this.observed.inc({ result: 'invalid' });
      return;
    }
    this.parsed.set(uid, { generation, config: result.config });
    this.observed.inc({ result: 'updated' });
  }

  /**
   * Without the ZPDB CRD (or permission to list ZPDBs) the cache is empty and the
   * informer looks again only every 5 minutes. A decision a budget could
   * change looks now, so a budget created right after its CRD is installed
   * counts from the first eviction after it (and rolling deletes within 30 s).
   */
  private async lookForBudgets(
    namespace: string,
    freshMs: number,
    signal?: AbortSignal,
  ): Promise<'known' | 'look-unfinished'> {
    const informer = informerFor(this.d.caches.zpdbs, namespace);
    if (informer?.unavailable === undefined) return 'known';
    const wait = AbortSignal.timeout(LOOK_WAIT_MS);
    await informer.lookAgain(freshMs, signal ? AbortSignal.any([signal, wait]) : wait);
    return informer.lookUnfinished(freshMs) ? 'look-unfinished' : 'known';
  }

  private configs(namespace: string): ZpdbConfig[] {
    return this.budgets(namespace).configs;
  }

  /** The namespace's budgets: the valid ones, and what can be read of the invalid ones. */
  private budgets(namespace: string): { configs: ZpdbConfig[]; invalid: InvalidZpdb[] } {
    const informer = informerFor(this.d.caches.zpdbs, namespace);
    const configs: ZpdbConfig[] = [];
    const invalid: InvalidZpdb[] = [];
    for (const z of informer?.list() ?? []) {
      if (z.metadata?.namespace !== namespace) continue;
      if (!this.parsed.has(z.metadata.uid ?? '')) this.observe(z);
      const known = this.parsed.get(z.metadata.uid ?? '');
      if (known?.config) configs.push(known.config);
      if (known?.invalid) invalid.push(known.invalid);
    }
    return { configs, invalid };
  }

  private synced(): boolean {
    const { pods, statefulSets, zpdbs, ledgers } = this.d.caches;
    return [...pods, ...statefulSets, ...zpdbs, ...ledgers].every((i) => i.hasSynced());
  }

  private async judge(request: AdmissionRequestV1, signal: AbortSignal): Promise<Answer> {
    // Judging on half-filled caches could allow what a full picture denies.
    if (!this.synced()) return deny(429, 'denied', 'the eviction webhook is starting (caches not synced yet), retry');
    if (request.operation !== 'CREATE')
      return deny(400, 'invalid-request', `request operation is not create, got: ${request.operation}`);
    if (request.subResource !== 'eviction')
      return deny(400, 'invalid-request', `request SubResource is not eviction, got: ${request.subResource ?? ''}`);
    const { namespace, name } = request;
    if (!namespace || !name) return deny(400, 'invalid-request', 'request did not include both a namespace and a name');

    let pod = informerFor(this.d.caches.pods, namespace)?.get(namespace, name);
    // A pod the cache shows going, not started or finished is evicted without
    // a budget. But the API server evicts whatever pod has the name now: a
    // cache behind a replacement that is already Running and Ready would let
    // that one go unjudged. So this one path, rare in a drain, reads the pod.
    if (!pod || podCanIgnoreBudget(pod)) {
      try {
        pod = await this.d.client.get<Pod>(resources.pods, { namespace, name }, { signal });
      } catch (error) {
        // Gone: kubectl drain counts the pod as evicted. Anything else: retry.
        if (isNotFound(error)) return deny(404, 'pod-not-found', `pods "${name}" not found`);
        return deny(
          429,
          'pod-not-found',
          `unable to read pod ${name}, retry: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }
    const wanted: unknown = (request.object as { deleteOptions?: { preconditions?: { uid?: unknown } } } | undefined)
      ?.deleteOptions?.preconditions?.uid;
    // The eviction is for another incarnation: the API server answers 409 itself.
    // Only a uid says so; anything else in its place is judged as no precondition.
    if (typeof wanted === 'string' && wanted !== '' && wanted !== pod.metadata?.uid) return allow('pod-not-in-scope');

    if ((await this.lookForBudgets(namespace, LOOK_FRESH_MS.eviction, signal)) === 'look-unfinished')
      return deny(
        429,
        'denied',
        'still looking for ZoneAwarePodDisruptionBudgets (the resource was not served or not permitted until now), retry',
      );
    const { configs, invalid } = this.budgets(namespace);
    const scope = evictionScope(pod, configs, invalid);
    if (scope.kind === 'decided') return fromDecision(scope.decision);
    const { config } = scope;
    const { pending } = this.judgeLedger(
      namespace,
      ledgerName(config.name),
      decodeLedger(this.cachedLedger(namespace, ledgerName(config.name))).ledger,
    );
    // A dry run, or a denial, is answered from the caches and writes nothing.
    const first = this.decide(pod, configs, invalid, pending, isEvictionDryRun(request));
    if (!first.allowed || !first.record) return fromDecision(first);
    const fresh = pod;
    return this.withLock(`${namespace}/${config.name}`, () =>
      this.commit(fresh, config, (p) => this.decide(fresh, configs, invalid, p, false), signal),
    );
  }

  /**
   * The rollout controller asks before deleting a pod for a rolling update
   * (rollout-operator's MarkPodAsDeleted): the same budget as evictions, with the
   * StatefulSet's rollout-max-unavailable standing in for a ZPDB budget of 0.
   * An allow is recorded in the ledger like an eviction, so an eviction
   * racing the rollout sees it. Invalid budgets are left out: they deny
   * evictions, not rolling deletes (decideRolloutDelete says why).
   */
  async allowRolloutDelete(
    pod: Pod,
    rolloutMaxUnavailable: number,
    signal?: AbortSignal,
  ): Promise<{ allowed: true } | { allowed: false; message: string }> {
    const namespace = pod.metadata?.namespace ?? '';
    await this.lookForBudgets(namespace, LOOK_FRESH_MS.rollingDelete, signal);
    const configs = this.configs(namespace);
    const decideWith = (pending: Map<string, number>) =>
      decideRolloutDelete({ ...this.snapshot(pod), pendingEvictions: pending, configs, rolloutMaxUnavailable });
    const scope = evictionScope(pod, configs);
    let answer: Answer;
    if (scope.kind === 'decided') answer = fromDecision(decideWith(new Map()));
    else
      answer = await this.withLock(`${namespace}/${scope.config.name}`, () =>
        this.commit(pod, scope.config, decideWith, signal ?? AbortSignal.timeout(30_000)),
      );
    this.requests.inc({ reason: answer.reason, status: String(answer.status) });
    return answer.decision.allowed
      ? { allowed: true }
      : { allowed: false, message: answer.decision.status?.message ?? 'denied' };
  }

  /**
   * The entries of a budget's ledger that still hold something back. Entries
   * are wall-clock stamps shared with the other replicas, taken at their
   * word unless this process has evidence of a clock step or skew
   * (src/runtime/sightings.ts): so a replica whose clock runs behind cannot
   * write an allow that others take as expired, nor can a step of this
   * process's clock expire one.
   * `pending` (counted times) is for decisions; `kept` (the stamps as
   * written) is what to write back.
   */
  private judgeLedger(namespace: string, name: string, ledger: Ledger): { kept: Ledger; pending: Map<string, number> } {
    const podInformer = informerFor(this.d.caches.pods, namespace);
    // A read: the informer's earlier looks at this ledger date an entry they did not show.
    const from = this.seeEntries(namespace, name, ledger, 'read');
    const counted: Ledger = new Map(
      [...ledger].map(([uid, entry]) => [uid, { ...entry, at: from.get(uid)?.from ?? entry.at }]),
    );
    const judged = pruneLedger(counted, this.d.clock.now(), (podName) => podInformer?.get(namespace, podName));
    return { kept: new Map([...judged.keys()].map((uid) => [uid, ledger.get(uid)!])), pending: pendingFrom(judged) };
  }

  /** Shows a ledger's entries to the sightings as the watch delivers them, on every replica. */
  private seeLedger(lease: Lease, seen: Seen): void {
    const { ledger } = decodeLedger(lease);
    this.seeEntries(lease.metadata?.namespace ?? '', lease.metadata?.name ?? '', ledger, seen);
  }

  private seeEntries(namespace: string, name: string, ledger: Ledger, seen: Seen): Map<string, Counted> {
    return this.sightings.look(
      `zpdb-ledger/${namespace}/${name}`,
      new Map([...ledger].map(([uid, entry]) => [uid, entry.at])),
      seen,
    );
  }

  /** The decision on the caches, with these pending evictions. */
  private decide(
    pod: Pod,
    configs: ZpdbConfig[],
    invalid: InvalidZpdb[],
    pending: Map<string, number>,
    dryRun: boolean,
  ): EvictionDecision {
    return admitEviction({ ...this.snapshot(pod), pendingEvictions: pending, dryRun, configs, invalid });
  }

  /** The pod's namespace as the caches have it. */
  private snapshot(pod: Pod): { pod: Pod; statefulSets: StatefulSet[]; pods: Pod[]; now: number } {
    const namespace = pod.metadata?.namespace ?? '';
    const statefulSets = (informerFor(this.d.caches.statefulSets, namespace)?.list() ?? []).filter(
      (s) => s.metadata?.namespace === namespace,
    );
    const podInformer = informerFor(this.d.caches.pods, namespace);
    // Indexed: the pods of the namespace's StatefulSets and the orphans, never a scan of every pod.
    const pods = [
      ...statefulSets.flatMap((s) => podInformer?.byIndex(INDEX.podsByOwner, s.metadata?.uid ?? '') ?? []),
      ...(podInformer?.byIndex(INDEX.orphanPods, '') ?? []),
    ].filter((p) => p.metadata?.namespace === namespace);
    return { pod, statefulSets, pods, now: this.d.clock.now() };
  }

  /** Decide again on the budget's ledger and commit the allow to it; a conflict means decide again. */
  private async commit(
    pod: Pod,
    config: ZpdbConfig,
    decideWith: (pending: Map<string, number>) => EvictionDecision,
    signal: AbortSignal,
  ): Promise<Answer> {
    const namespace = config.namespace;
    const name = ledgerName(config.name);
    let lease: Lease | undefined = this.cachedLedger(namespace, name);
    for (let attempt = 0; attempt < MAX_LEDGER_ATTEMPTS; attempt++) {
      const decoded = decodeLedger(lease);
      if (decoded.warning) this.d.log.warn(decoded.warning, { namespace });
      const { kept: ledger, pending } = this.judgeLedger(namespace, name, decoded.ledger);
      const decision = decideWith(pending);
      if (!decision.allowed || !decision.record) return fromDecision(decision);
      ledger.set(decision.record.uid, { pod: decision.record.name, at: decision.record.allowedAt });
      const annotations = { ...(lease?.metadata?.annotations ?? {}), [LEDGER_ANNOTATION]: encodeLedger(ledger) };
      try {
        const saved = this.inProcessLedgers.has(namespace)
          ? { metadata: { name, namespace, annotations, resourceVersion: IN_PROCESS }, spec: {} }
          : lease
            ? await this.d.client.update<Lease>(
                resources.leases,
                { ...lease, metadata: { ...lease.metadata, annotations } },
                { signal },
              )
            : await this.d.client.create<Lease>(
                resources.leases,
                {
                  metadata: {
                    name,
                    namespace,
                    labels: { [LEDGER_LABEL]: 'true', 'app.kubernetes.io/managed-by': 'stateward' },
                    annotations,
                  },
                  spec: {},
                },
                { signal },
              );
        this.written.set(`${namespace}/${name}`, saved);
        this.d.log.info('eviction allowed', {
          namespace,
          pod: pod.metadata?.name,
          zpdb: config.name,
          why: decision.message,
        });
        return fromDecision(decision);
      } catch (error) {
        if (isForbidden(error)) {
          // Not permitted to keep ledgers in Leases: keep them in this process,
          // which is what a single replica needs (and what rollout-operator does).
          this.keepLedgersInProcess(namespace, error);
          continue;
        }
        if (!isConflict(error) && !isAlreadyExists(error) && !isNotFound(error)) {
          return deny(
            429,
            'denied',
            `unable to record the eviction in the budget's ledger, retry: ${error instanceof Error ? error.message : String(error)}`,
          );
        }
        // Someone else committed first (or the Lease vanished): read it fresh and decide again.
        this.written.delete(`${namespace}/${name}`);
        lease = await this.d.client
          .get<Lease>(resources.leases, { namespace, name }, { signal })
          .catch((e: unknown) => {
            if (isNotFound(e)) return undefined;
            throw e;
          });
      }
    }
    return deny(
      429,
      'denied',
      `too many concurrent evictions against ZoneAwarePodDisruptionBudget ${config.name}, retry`,
    );
  }

  private keepLedgersInProcess(namespace: string, error: unknown): void {
    if (this.inProcessLedgers.has(namespace)) return;
    this.inProcessLedgers.add(namespace);
    this.d.log.warn(
      'not permitted to write zone-aware budget ledgers (Leases): ledgers are kept in this process, so evictions are coordinated within this replica only; grant coordination.k8s.io leases get,list,watch,create,update (deploy/kustomize/rbac/PERMISSIONS.md) before running several replicas',
      { namespace, err: error instanceof Error ? error.message : String(error) },
    );
  }

  /**
   * The ledger as this process last wrote it until the cache has delivered
   * that very write, then as the cache has it. If another replica wrote in
   * between, the stale pick costs one conflict and a re-read, never a wrong
   * allow.
   */
  private cachedLedger(namespace: string, name: string): Lease | undefined {
    return (
      this.written.get(`${namespace}/${name}`) ?? informerFor(this.d.caches.ledgers, namespace)?.get(namespace, name)
    );
  }

  private caughtUp(lease: Lease): void {
    const key = `${lease.metadata?.namespace}/${lease.metadata?.name}`;
    if (this.written.get(key)?.metadata?.resourceVersion === lease.metadata?.resourceVersion) this.written.delete(key);
  }

  private withLock<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(key) ?? Promise.resolve();
    const next = previous.then(work, work);
    const tail = next.catch(() => undefined);
    this.locks.set(key, tail);
    void tail.then(() => {
      if (this.locks.get(key) === tail) this.locks.delete(key);
    });
    return next;
  }
}

/** Where the API server sends evictions of pods to judge. */
export const POD_EVICTION_PATH = '/admission/pod-eviction';

/**
 * The budgets of a runtime. Build one per operator (main.ts does, and hands
 * it to the eviction webhook, the rollout controller and the status page),
 * so they share caches, ledgers and metrics. The ZPDB informer is optional:
 * without the CRD installed, start-up does not wait and no budget applies
 * (rollout-operator #476).
 */
export function createZpdbBudgets(runtime: Runtime): ZpdbBudgets {
  const workloads = workloadCache(runtime);
  return new ZpdbBudgets({
    client: runtime.client,
    clock: runtime.clock,
    log: runtime.logger.child({ component: 'zpdb' }),
    registry: runtime.registry,
    events: runtime.events,
    sightings: runtime.sightings,
    caches: {
      pods: workloads.pods,
      statefulSets: workloads.statefulSets,
      zpdbs: runtime.informers<ZoneAwarePodDisruptionBudget>(zpdbResource, { optional: true }),
      // Optional: an install that kept rollout-operator's Role (no Leases) still starts, with in-process ledgers.
      ledgers: runtime.informers<Lease>(resources.leases, { labelSelector: `${LEDGER_LABEL}=true`, optional: true }),
    },
  });
}
