// The health gate's executor: for the StatefulSet the planner holds at its
// gate (plan.gate), finds its RolloutHealthCheck, runs the checks' queries
// against Prometheus when an evaluation is due, keeps the consecutive
// tallies, and hands the planner a verdict (verdict.ts decides it).
//
// Where rollout-operator's design is silent, decided here (docs/health-gates.md):
//   - an unknown check name, or a check whose selector does not select the
//     StatefulSet, lets the rollout proceed with RolloutHealthCheckMisconfigured
//     (rollout-operator's rule); a check that exists but does not validate
//     holds the rollout: someone meant to gate it, and its mistake is named
//     in the Event;
//   - a check edited mid-rollout (a new generation) starts its tallies over;
//   - Prometheus unreachable, or a query Prometheus rejects, is an `error`
//     result, mapped through onError (default: onFailure's policy, Pause);
//   - the tallies and the bake clock live in this replica's memory: after a
//     failover the new leader bakes and counts again, which can only delay.
import type { Informer } from '../../runtime/informer/informer.ts';
import { informerFor } from '../../runtime/informer/informer.ts';
import type { StatefulSet } from '../../runtime/kube/types.ts';
import type { Logger } from '../../runtime/log/logger.ts';
import type { Runtime } from '../../runtime/operator.ts';
import type { GateRequest } from '../planner.ts';
import { matchLabelsSelect } from '../../vocabulary/selectors.ts';
import { ROLLOUT_GROUP_LABEL } from '../../vocabulary/keys.ts';
import { HealthCheckMetrics } from './gatemetrics.ts';
import { instantQuery, resolveAccess, type ResolvedAccess } from './prometheus.ts';
import { renderQuery, renderSuccessQuery, type QueryValue } from './promql.ts';
import { parseHealthCheck, type CheckSpec, type HealthCheckConfig, type RolloutHealthCheck } from './resource.ts';
import {
  bypassActive,
  decideCheck,
  decideGate,
  tally,
  type CheckResult,
  type CheckTally,
  type GateVerdict,
} from './verdict.ts';

/** One gate: one StatefulSet's start to one update revision. */
interface GateMemory {
  /** The metrics' rollout_group label of the group (namespace/group with several namespaces). */
  group: string;
  /** `<namespace>/<rollout-group>`, as status reports key groups. */
  groupKey: string;
  statefulSet: string;
  check: string;
  generation: number;
  tallies: Map<string, CheckTally>;
  /** Monotonic ms when this replica first held the StatefulSet at the gate: the bake clock's start. */
  heldSince: number;
  /** Monotonic ms of the last evaluation. */
  evaluatedAt?: number;
  verdict?: GateVerdict;
  lastResults: CheckResult[];
  bypassReported?: boolean;
}

export interface GateOutcome {
  verdict: GateVerdict;
  /** When the group should be reconciled again to evaluate anew (ms from now); absent when the gate is open. */
  requeueAfterMs?: number;
}

/** A gate's state for status pages: the check, its last results and the verdict. */
export interface GateReport {
  statefulSet: string;
  check: string;
  verdict: GateVerdict;
  results: CheckResult[];
}

/** Gates not consulted for this long are forgotten (their group finished or went away). */
const FORGET_AFTER_MS = 3_600_000;

export class HealthGates {
  private readonly memory = new Map<string, GateMemory>();
  private readonly misconfigured = new Map<string, string>();
  readonly metrics: HealthCheckMetrics;
  private readonly runtime: Runtime;
  private readonly checks: Informer<RolloutHealthCheck>[];
  private readonly log: Logger;

  constructor(runtime: Runtime, checks: Informer<RolloutHealthCheck>[]) {
    this.runtime = runtime;
    this.checks = checks;
    this.log = runtime.logger.child({ component: 'health-gate' });
    this.metrics = new HealthCheckMetrics(runtime.registry);
    for (const informer of checks)
      informer.addHandlers({
        onAdd: () => this.metrics.observed.inc(),
        onUpdate: (old, next) => {
          if (old.metadata?.generation !== next.metadata?.generation) this.metrics.observed.inc();
        },
      });
  }

  /** The last reports of a group's gates (`group` as the metrics label it), for `stateward status` and the web view. */
  reports(group: string): GateReport[] {
    const out: GateReport[] = [];
    for (const memory of this.memory.values()) {
      if (memory.group !== group || !memory.verdict) continue;
      out.push({
        statefulSet: memory.statefulSet,
        check: memory.check,
        verdict: memory.verdict,
        results: memory.lastResults,
      });
    }
    return out;
  }

  /** The latest report of each group of `namespace` with a gate, by `<namespace>/<group>` (the web view). */
  latestReports(namespace: string): Map<string, GateReport> {
    const latest = new Map<string, GateMemory>();
    for (const memory of this.memory.values()) {
      if (!memory.groupKey.startsWith(`${namespace}/`) || !memory.verdict) continue;
      const seen = latest.get(memory.groupKey);
      if (!seen || (memory.evaluatedAt ?? 0) > (seen.evaluatedAt ?? 0)) latest.set(memory.groupKey, memory);
    }
    return new Map(
      [...latest].map(([key, m]) => [
        key,
        { statefulSet: m.statefulSet, check: m.check, verdict: m.verdict!, results: m.lastResults },
      ]),
    );
  }

  /**
   * The verdict for `request`: a cached one while the evaluation interval
   * has not passed, else a new evaluation. Never throws: every failure is a
   * check result or a misconfiguration.
   */
  async evaluate(group: string, request: GateRequest, set: StatefulSet, signal?: AbortSignal): Promise<GateOutcome> {
    const namespace = set.metadata?.namespace ?? '';
    const groupKey = `${namespace}/${group}`;
    const found = this.lookup(namespace, request.check);
    if (
      found.kind === 'missing' ||
      (found.kind === 'ok' && !matchLabelsSelect(found.config.matchLabels, set.metadata?.labels ?? {}))
    ) {
      const why =
        found.kind === 'missing'
          ? `RolloutHealthCheck ${namespace}/${request.check} named by StatefulSet ${request.statefulSet} does not exist`
          : `RolloutHealthCheck ${namespace}/${request.check} does not select StatefulSet ${request.statefulSet} (spec.selector.matchLabels)`;
      this.reportMisconfigured(groupKey, set, `${why}; the rollout proceeds without this gate`);
      return { verdict: { state: 'open', message: why, warnings: [why], bypassed: false } };
    }
    if (found.kind === 'invalid') {
      const why = `RolloutHealthCheck ${namespace}/${request.check} is invalid (${found.errors.join('; ')}); StatefulSet ${request.statefulSet} is held until it is fixed or the annotation removed`;
      this.reportMisconfigured(groupKey, set, why);
      this.metrics.setBlocked(group, true);
      return { verdict: { state: 'pause', message: why, warnings: [], bypassed: false }, requeueAfterMs: 30_000 };
    }
    this.clearMisconfigured(groupKey, group);
    return this.evaluateConfig(group, request, set, found.config, signal);
  }

  private lookup(
    namespace: string,
    name: string,
  ): { kind: 'ok'; config: HealthCheckConfig } | { kind: 'missing' } | { kind: 'invalid'; errors: string[] } {
    const object = informerFor(this.checks, namespace)?.get(namespace, name);
    if (!object) return { kind: 'missing' };
    const parsed = parseHealthCheck(object);
    return 'config' in parsed ? { kind: 'ok', config: parsed.config } : { kind: 'invalid', errors: parsed.errors };
  }

  private reportMisconfigured(groupKey: string, set: StatefulSet, why: string): void {
    const first = this.misconfigured.get(groupKey) !== why;
    this.misconfigured.set(groupKey, why);
    this.metrics.setMisconfigured(groupKey.slice(groupKey.indexOf('/') + 1), true, first);
    if (!first) return;
    this.log.warn(why, { namespace: set.metadata?.namespace, statefulSet: set.metadata?.name });
    this.runtime.events.event(statefulSetRef(set), 'Warning', 'RolloutHealthCheckMisconfigured', 'Rollout', why);
  }

  private clearMisconfigured(groupKey: string, group: string): void {
    if (this.misconfigured.delete(groupKey)) this.metrics.setMisconfigured(group, false, false);
  }

  private async evaluateConfig(
    group: string,
    request: GateRequest,
    set: StatefulSet,
    config: HealthCheckConfig,
    signal?: AbortSignal,
  ): Promise<GateOutcome> {
    const now = this.runtime.clock.monotonic();
    this.forgetIdle(now);
    const key = `${config.namespace}/${group}/${request.statefulSet}/${request.revision}/${config.name}`;
    let memory = this.memory.get(key);
    if (!memory || memory.generation !== config.generation) {
      memory = {
        group,
        groupKey: `${config.namespace}/${set.metadata?.labels?.[ROLLOUT_GROUP_LABEL] ?? ''}`,
        statefulSet: request.statefulSet,
        check: config.name,
        generation: config.generation,
        tallies: new Map(),
        heldSince: memory?.heldSince ?? now,
        lastResults: [],
      };
      this.memory.set(key, memory);
    }
    const bypass = bypassActive(request.bypassUntil, this.runtime.clock.now());
    if (bypass.active) return this.bypassed(memory, group, request, set);
    if (bypass.problem)
      this.log.warn(`bypass annotation not honoured: ${bypass.problem}`, { statefulSet: request.statefulSet });
    const bakeLeft = Math.max(0, config.bakeTimeMs - (now - memory.heldSince));
    const due = memory.evaluatedAt === undefined || now - memory.evaluatedAt >= config.evaluationIntervalMs;
    if (due) {
      memory.evaluatedAt = now;
      await this.runChecks(memory, group, request, config, bakeLeft === 0, signal);
    }
    const verdict = decideGate(config.checks, memory.tallies, bakeLeft, false);
    this.announce(memory, verdict, group, set, request);
    if (verdict.state === 'open') return { verdict };
    const sinceEvaluation = now - (memory.evaluatedAt ?? now);
    return { verdict, requeueAfterMs: Math.max(1, config.evaluationIntervalMs - sinceEvaluation) };
  }

  private bypassed(memory: GateMemory, group: string, request: GateRequest, set: StatefulSet): GateOutcome {
    const verdict = decideGate([], memory.tallies, 0, true);
    if (!memory.bypassReported) {
      memory.bypassReported = true;
      const note = `StatefulSet ${request.statefulSet} starts rolling past health check ${request.check}: bypassed by annotation until ${request.bypassUntil}`;
      this.log.warn(note, { namespace: set.metadata?.namespace, group });
      this.runtime.events.event(statefulSetRef(set), 'Warning', 'RolloutHealthCheckBypassed', 'Rollout', note);
    }
    memory.verdict = verdict;
    this.metrics.setBlocked(group, false);
    return { verdict };
  }

  /** Evaluates the checks in order; the first that pauses ends the evaluation (rollout-operator's rule). */
  private async runChecks(
    memory: GateMemory,
    group: string,
    request: GateRequest,
    config: HealthCheckConfig,
    baked: boolean,
    signal?: AbortSignal,
  ): Promise<void> {
    let access: ResolvedAccess | { error: string };
    try {
      access = await resolveAccess(this.runtime.client, config.namespace, config.access, signal);
    } catch (error) {
      access = { error: `cannot read the query credentials: ${(error as Error).message}` };
    }
    const results: CheckResult[] = [];
    for (const check of config.checks) {
      if (check.disabled) continue;
      const result =
        'error' in access
          ? { check: check.name, outcome: 'error' as const, message: access.error, at: this.runtime.clock.now() }
          : await this.runCheck(access, group, request, config.namespace, check, signal);
      results.push(result);
      memory.tallies.set(check.name, tally(memory.tallies.get(check.name), result, baked));
      this.metrics.evaluated(group, check.name, result.outcome, result.current, result.baseline);
      if (decideCheck(check, memory.tallies.get(check.name), 0).kind === 'pause') break;
    }
    memory.lastResults = results;
  }

  private async timed(group: string, check: string, run: () => Promise<QueryValue>): Promise<QueryValue> {
    const start = this.runtime.clock.monotonic();
    try {
      return await run();
    } finally {
      this.metrics.queried(group, check, (this.runtime.clock.monotonic() - start) / 1000);
    }
  }

  /** One check: the candidates now, the stable pods at the baseline time, then the success query on the two values. */
  private async runCheck(
    access: ResolvedAccess,
    group: string,
    request: GateRequest,
    namespace: string,
    check: CheckSpec,
    signal?: AbortSignal,
  ): Promise<CheckResult> {
    const now = this.runtime.clock.now();
    const base = { timeoutMs: check.queryTimeoutMs, retries: check.queryRetries };
    // The current and success queries run at Prometheus's own now: an operator
    // whose clock is off must not read a window that is not the present one.
    const query = (promql: string, at?: number) =>
      this.timed(group, check.name, () =>
        instantQuery(access, { ...base, promql, ...(at !== undefined ? { at } : {}) }, signal),
      );
    const [current, baseline] = await Promise.all([
      query(renderQuery(check.query, namespace, request.candidates, check.currentRangeMs)),
      query(renderQuery(check.query, namespace, request.stable, check.baselineRangeMs), request.baselineAt),
    ]);
    const values = {
      ...(current.kind === 'value' ? { current: current.value } : {}),
      ...(baseline.kind === 'value' ? { baseline: baseline.value } : {}),
    };
    const result = (outcome: CheckResult['outcome'], message: string): CheckResult => ({
      check: check.name,
      outcome,
      message,
      at: now,
      ...values,
    });
    if (current.kind === 'error') return result('error', `current query: ${current.message}`);
    if (baseline.kind === 'error') return result('error', `baseline query: ${baseline.message}`);
    if (current.kind === 'no_data')
      return result('no_data', 'the current query returned no sample for the updated pods');
    if (baseline.kind === 'no_data')
      return result('no_data', 'the baseline query returned no sample for the stable pods');
    const verdict = await query(renderSuccessQuery(check.successQuery, current.value, baseline.value));
    if (verdict.kind === 'error') return result('error', `success query: ${verdict.message}`);
    if (verdict.kind === 'no_data')
      return result('fail', 'the success query returned no sample (compare with `bool` so it returns 0 or 1)');
    if (verdict.value === 1) return result('pass', 'success query returned 1');
    return result('fail', `success query returned ${verdict.value}`);
  }

  /** Logs and records a change of verdict once: RolloutBlockedByHealthCheck, RolloutHealthCheckWarn. */
  private announce(
    memory: GateMemory,
    verdict: GateVerdict,
    group: string,
    set: StatefulSet,
    request: GateRequest,
  ): void {
    const previous = memory.verdict;
    memory.verdict = verdict;
    this.metrics.setBlocked(group, verdict.state === 'pause');
    if (previous?.state === verdict.state && previous.message === verdict.message) return;
    const where = { namespace: set.metadata?.namespace, group, statefulSet: request.statefulSet, check: request.check };
    if (verdict.state === 'pause') {
      const note = `rollout group ${group}: StatefulSet ${request.statefulSet} is not started: ${verdict.message}`;
      this.log.warn(note, where);
      this.runtime.events.event(statefulSetRef(set), 'Warning', 'RolloutBlockedByHealthCheck', 'Rollout', note);
    } else if (verdict.state === 'open') {
      for (const warning of verdict.warnings) {
        this.log.warn(`health check warns, the rollout proceeds: ${warning}`, where);
        this.runtime.events.event(statefulSetRef(set), 'Warning', 'RolloutHealthCheckWarn', 'Rollout', warning);
      }
      if (previous?.state === 'pause') this.log.info('health gate open again: every check passed', where);
    } else {
      this.log.info(`health gate waits: ${verdict.message}`, where);
    }
  }

  private forgetIdle(now: number): void {
    for (const [key, memory] of this.memory) {
      if (now - (memory.evaluatedAt ?? memory.heldSince) > FORGET_AFTER_MS) this.memory.delete(key);
    }
  }
}

function statefulSetRef(set: StatefulSet) {
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    namespace: set.metadata?.namespace ?? '',
    name: set.metadata?.name ?? '',
    uid: set.metadata?.uid ?? '',
  };
}
