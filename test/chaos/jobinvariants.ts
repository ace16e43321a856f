// The chaos monitor's rules for config restarts of CronJobs and Jobs, part
// of the InvariantChecker (invariants.ts): pure, fed with watch events in
// arrival order and a clock. Written from docs/restarts.md ("Workload
// kinds"), not from src/restarts: the annotation and finalizer names are
// spelled out here on purpose, so a renamed key in Stateward shows up as a
// broken promise instead of silently moving both sides.
//
// CronJob (opted in on its metadata): a restart is a new Job controlled by
// the CronJob, annotated cronjob.kubernetes.io/instantiate: manual (the
// soak's CronJobs are suspended, so no other Job may appear), and then the
// record plus stateward.dev/config-restart-last-job on the CronJob.
//   - every such Job follows a content change of a referenced config since
//     the CronJob's previous Job (or since it was first seen): no Job for a
//     metadata-only edit, never two Jobs for one change;
//   - a record naming a new last Job changes the applied checksums (two Jobs
//     for one applied record otherwise), and names a Job that was started;
//   - in the end the record holds every referenced config's content.
// Job (standalone, opted in): a restart deletes and creates it again under
// its name (a new uid), the new one carrying the record.
//   - every re-creation follows a content change since the previous one was
//     decided (the previous mark, i.e. the finalizer and intent annotation,
//     bounds that decision), carries a record, and not the record it had;
//   - in the end the Job exists, without the finalizer, and its record holds
//     every referenced config's content (a missing Job is a lost restart).
import type { V1CronJob, V1Job } from '@kubernetes/client-node';
import {
  APPLIED_ANNOTATION,
  configReferences,
  DEFER_MS,
  OPT_IN_ANNOTATION,
  type Pending,
  type WatchType,
} from './invariants.ts';
import { iso, rvOf } from './observed.ts';

export const INSTANTIATE_ANNOTATION = 'cronjob.kubernetes.io/instantiate';
export const LAST_JOB_ANNOTATION = 'stateward.dev/config-restart-last-job';
export const RECREATE_FINALIZER = 'stateward.dev/config-restart-recreate';
export const RECREATE_INTENT_ANNOTATION = 'stateward.dev/config-restart-recreate';

/** What the rules need from the checker: the configs' content history and a place to report. */
export interface JobRuleHost {
  /** The content hash of a config as of resourceVersion `rv` (undefined: not seen then). */
  hashAt(config: string, rv: bigint): string | undefined;
  /** Whether a config's content differs, somewhere in (from, to], from its content at `from`. */
  changedWithin(config: string, from: bigint, to: bigint): boolean;
  /** Referenced configs whose content moved on since the record was written. */
  pendingOf(w: RecordedWorkload): Pending[];
  violate(now: number, kind: string, message: string, details?: Record<string, unknown>): void;
  count(name: string, by?: number): void;
}

/** A workload's record as the monitor follows it: per config, the recorded value and when it last changed. */
export interface RecordedWorkload {
  key: string;
  firstSeenRv: bigint;
  refs: string[];
  applied: Map<string, { value: string; rv: bigint }>;
}

interface CronJobState extends RecordedWorkload {
  appliedRaw: string | undefined;
  lastJob: string | undefined;
  /** Each record that named a new last Job. */
  records: { lastJob: string; rv: bigint; at: number }[];
}

interface StartedJob {
  name: string;
  uid: string;
  /** Its resourceVersion when first seen: its creation's when `exact` (a live ADDED), later otherwise. */
  rv: bigint;
  exact: boolean;
}

interface JobState extends RecordedWorkload {
  uid: string;
  present: boolean;
  /** When it went missing or was marked for re-creation (for pending). */
  since: number;
  appliedRaw: string | undefined;
  finalizer: boolean;
  /** First resourceVersion at which this incarnation was seen marked for re-creation. */
  markRv: bigint | undefined;
  /** The previous re-creation's mark (its decision came before it). */
  lastMarkRv: bigint | undefined;
}

type Deferred =
  | { kind: 'cronjob-job'; due: number; cronJob: string; uid: string }
  | {
      kind: 'job-recreated';
      due: number;
      job: string;
      refs: string[];
      from: bigint;
      to: bigint;
      rv: bigint;
      at: number;
    };

function parseApplied(raw: string | undefined, host: JobRuleHost): Record<string, string> {
  if (!raw) return {};
  try {
    return JSON.parse(raw) as Record<string, string>;
  } catch {
    host.count('unparsableAppliedAnnotations');
    return {};
  }
}

function updateApplied(w: RecordedWorkload, applied: Record<string, string>, rv: bigint, host: JobRuleHost): void {
  for (const [config, value] of Object.entries(applied)) {
    if (w.applied.get(config)?.value === value) continue;
    if (w.applied.has(config)) host.count('appliedChecksumUpdates');
    w.applied.set(config, { value, rv });
  }
}

export class JobRestartRules {
  private readonly host: JobRuleHost;
  private readonly cronJobs = new Map<string, CronJobState>();
  /** cronjob/<ns>/<name> → the Jobs it controls, as first seen (kept whatever the order of the two watches). */
  private readonly started = new Map<string, StartedJob[]>();
  private readonly seenUids = new Set<string>();
  private readonly jobs = new Map<string, JobState>();
  private readonly deferred: Deferred[] = [];

  constructor(host: JobRuleHost) {
    this.host = host;
  }

  /** Every config an opted-in CronJob or Job references (for the run's counters). */
  refs(): string[] {
    return [...this.cronJobs.values(), ...this.jobs.values()].flatMap((w) => w.refs);
  }

  onCronJob(cronJob: V1CronJob, type: WatchType, now: number): void {
    const namespace = cronJob.metadata?.namespace ?? '';
    const key = `cronjob/${namespace}/${cronJob.metadata?.name}`;
    const annotations = cronJob.metadata?.annotations ?? {};
    if (type === 'DELETED' || annotations[OPT_IN_ANNOTATION] !== 'enabled') {
      this.cronJobs.delete(key);
      return;
    }
    const rv = rvOf(cronJob.metadata);
    const raw = annotations[APPLIED_ANNOTATION];
    const lastJob = annotations[LAST_JOB_ANNOTATION];
    const refs = configReferences(namespace, cronJob.spec?.jobTemplate?.spec?.template?.spec);
    let state = this.cronJobs.get(key);
    if (!state) {
      state = { key, firstSeenRv: rv, refs, applied: new Map(), appliedRaw: raw, lastJob, records: [] };
      updateApplied(state, parseApplied(raw, this.host), rv, this.host);
      this.cronJobs.set(key, state);
      return;
    }
    if (lastJob !== undefined && lastJob !== state.lastJob) {
      this.host.count('cronJobRecords');
      state.records.push({ lastJob, rv, at: now });
      if (raw === state.appliedRaw)
        this.host.violate(
          now,
          'cronjob-two-jobs-one-record',
          `${key} recorded Job ${lastJob} (resourceVersion ${rv}) with the same applied checksums as before, when its last Job was ${state.lastJob ?? '(none)'}`,
        );
    }
    updateApplied(state, parseApplied(raw, this.host), rv, this.host);
    state.appliedRaw = raw;
    state.lastJob = lastJob;
    state.refs = refs;
  }

  onJob(job: V1Job, type: WatchType, now: number, relist: boolean): void {
    const owner = job.metadata?.ownerReferences?.find((o) => o.controller && o.kind === 'CronJob')?.name;
    if (owner !== undefined) this.onCronJobsJob(job, owner, type, now, relist);
    else this.onStandaloneJob(job, type, now);
  }

  private onCronJobsJob(job: V1Job, owner: string, type: WatchType, now: number, relist: boolean): void {
    const uid = job.metadata?.uid ?? '';
    if (this.seenUids.has(uid)) return;
    this.seenUids.add(uid);
    const cronJob = `cronjob/${job.metadata?.namespace}/${owner}`;
    const name = job.metadata?.name ?? '';
    const list = this.started.get(cronJob) ?? [];
    list.push({ name, uid, rv: rvOf(job.metadata), exact: type === 'ADDED' && !relist });
    list.sort((a, b) => (a.rv < b.rv ? -1 : a.rv > b.rv ? 1 : 0));
    this.started.set(cronJob, list);
    this.host.count('cronJobJobsStarted');
    if (job.metadata?.annotations?.[INSTANTIATE_ANNOTATION] !== 'manual')
      this.host.violate(
        now,
        'cronjob-job-not-manual',
        `Job ${name} of ${cronJob} is not marked ${INSTANTIATE_ANNOTATION}: manual (the soak's CronJobs are suspended; only a restart starts Jobs)`,
      );
    this.deferred.push({ kind: 'cronjob-job', due: now + DEFER_MS, cronJob, uid });
  }

  private onStandaloneJob(job: V1Job, type: WatchType, now: number): void {
    const namespace = job.metadata?.namespace ?? '';
    const key = `job/${namespace}/${job.metadata?.name}`;
    const annotations = job.metadata?.annotations ?? {};
    const uid = job.metadata?.uid ?? '';
    let state = this.jobs.get(key);
    if (type === 'DELETED') {
      if (state && state.uid === uid) {
        state.present = false;
        state.since = now;
      }
      return;
    }
    if (annotations[OPT_IN_ANNOTATION] !== 'enabled') {
      this.jobs.delete(key);
      return;
    }
    const rv = rvOf(job.metadata);
    const raw = annotations[APPLIED_ANNOTATION];
    const refs = configReferences(namespace, job.spec?.template?.spec);
    if (!state) {
      state = {
        key,
        firstSeenRv: rv,
        refs,
        applied: new Map(),
        uid,
        present: true,
        since: now,
        appliedRaw: raw,
        finalizer: false,
        markRv: undefined,
        lastMarkRv: undefined,
      };
      this.jobs.set(key, state);
    } else if (uid !== state.uid) this.onRecreated(state, uid, raw, refs, rv, now);
    state.present = true;
    const finalizer = (job.metadata?.finalizers ?? []).includes(RECREATE_FINALIZER);
    if ((finalizer || annotations[RECREATE_INTENT_ANNOTATION] !== undefined) && state.markRv === undefined) {
      state.markRv = rv;
      state.since = now;
    }
    state.finalizer = finalizer;
    updateApplied(state, parseApplied(raw, this.host), rv, this.host);
    state.appliedRaw = raw;
    state.refs = refs;
  }

  private onRecreated(
    state: JobState,
    uid: string,
    raw: string | undefined,
    refs: string[],
    rv: bigint,
    now: number,
  ): void {
    this.host.count('jobRecreations');
    const from = state.lastMarkRv ?? state.firstSeenRv;
    const to = state.markRv ?? rv;
    this.deferred.push({ kind: 'job-recreated', due: now + DEFER_MS, job: state.key, refs, from, to, rv, at: now });
    if (raw === undefined)
      this.host.violate(
        now,
        'job-recreated-without-record',
        `${state.key} was re-created (uid ${uid}) without a record`,
      );
    else if (raw === state.appliedRaw)
      this.host.violate(
        now,
        'job-recreated-for-one-record-twice',
        `${state.key} was re-created (uid ${uid}, resourceVersion ${rv}) carrying the record its previous incarnation already had`,
      );
    // The record is the new incarnation's alone: what it does not carry is not applied.
    const applied = parseApplied(raw, this.host);
    for (const config of [...state.applied.keys()]) if (!(config in applied)) state.applied.delete(config);
    state.lastMarkRv = to;
    state.markRv = undefined;
    state.uid = uid;
    state.since = now;
  }

  private changedSince(refs: string[], from: bigint, to: bigint): boolean {
    return refs.some(
      (config) => this.host.hashAt(config, from) !== undefined && this.host.changedWithin(config, from, to),
    );
  }

  private checkCronJobsJob(d: Extract<Deferred, { kind: 'cronjob-job' }>, now: number): void {
    const state = this.cronJobs.get(d.cronJob);
    const list = this.started.get(d.cronJob) ?? [];
    const at = list.findIndex((j) => j.uid === d.uid);
    const job = list[at];
    if (!state || !job) {
      this.host.count('cronJobJobsNotJudged');
      return;
    }
    // From the previous Job whose creation was seen live (a relist shows a later resourceVersion).
    const previous = list
      .slice(0, at)
      .reverse()
      .find((j) => j.exact);
    const from = previous?.rv ?? state.firstSeenRv;
    if (this.changedSince(state.refs, from, job.rv)) return;
    this.host.violate(
      now,
      'cronjob-job-without-content-change',
      `${d.cronJob} started Job ${job.name} (resourceVersion ${job.rv}) although no config it references changed content since ${previous ? `Job ${previous.name} (resourceVersion ${from})` : `resourceVersion ${from}`}`,
      { refs: state.refs },
    );
  }

  private checkRecreated(d: Extract<Deferred, { kind: 'job-recreated' }>, now: number): void {
    if (this.changedSince(d.refs, d.from, d.to)) return;
    this.host.violate(
      now,
      'job-recreated-without-content-change',
      `${d.job} was re-created (resourceVersion ${d.rv}) although no config it references changed content between resourceVersions ${d.from} and ${d.to}`,
      { refs: d.refs, observedAt: iso(d.at) },
    );
  }

  /** Runs the checks that are due. */
  tick(now: number): number {
    let ran = 0;
    for (let i = 0; i < this.deferred.length;) {
      const d = this.deferred[i]!;
      if (d.due > now) {
        i++;
        continue;
      }
      this.deferred.splice(i, 1);
      ran++;
      if (d.kind === 'cronjob-job') this.checkCronJobsJob(d, now);
      else this.checkRecreated(d, now);
    }
    return ran;
  }

  pending(): Pending[] {
    const out: Pending[] = [];
    for (const w of this.cronJobs.values()) out.push(...this.host.pendingOf(w));
    for (const w of this.jobs.values()) {
      if (!w.present) out.push({ workload: w.key, config: '(deleted, not created again yet)', since: iso(w.since) });
      else if (w.markRv !== undefined || w.finalizer)
        out.push({ workload: w.key, config: '(re-creation in flight)', since: iso(w.since) });
      else out.push(...this.host.pendingOf(w));
    }
    return out;
  }

  /** The end of the run (after the checker's own deferred checks): what must hold once everything settled. */
  finish(now: number): void {
    this.tick(Number.POSITIVE_INFINITY);
    for (const state of this.cronJobs.values()) {
      const started = this.started.get(state.key) ?? [];
      for (const record of state.records) {
        if (started.some((j) => j.name === record.lastJob)) continue;
        this.host.violate(
          now,
          'cronjob-record-without-job',
          `${state.key} recorded Job ${record.lastJob} (resourceVersion ${record.rv}) as started, and no such Job was seen`,
        );
      }
      const named = new Set(state.records.map((r) => r.lastJob));
      this.host.count('cronJobJobsNeverRecorded', started.filter((j) => !named.has(j.name)).length);
    }
    for (const state of this.jobs.values()) {
      if (!state.present)
        this.host.violate(
          now,
          'job-lost',
          `${state.key} was deleted for a re-creation (at ${iso(state.since)}) and never created again`,
        );
      else if (state.finalizer)
        this.host.violate(
          now,
          'job-recreate-finalizer-left',
          `${state.key} still carries the finalizer ${RECREATE_FINALIZER} after everything settled`,
        );
    }
  }
}
