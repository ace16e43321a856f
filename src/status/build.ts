// The status report, built by a pure function from the objects a client can
// list. Every judgement comes from the capability that acts on it: the
// rollout planner (on a snapshot made as the controller makes it) says what
// a group does and why it waits, the rolling delete is checked against the
// zone-aware disruption budgets with the controller's own decision, the
// scaling functions say what the replicas should be and why they are held,
// and the restart functions say which configs a workload follows. Nothing
// here re-decides any of it.
import type { KubeObject, Lease, Node, Pod, StatefulSet } from '../runtime/kube/types.ts';
import {
  hasNotReadyPods,
  planGroup,
  rollOrder,
  STATUS_PENDING_WAIT,
  type Deletion,
  type Plan,
} from '../rollout/planner.ts';
import { podsOf } from '../vocabulary/pods.ts';
import { groupSnapshot, type GroupSnapshot, type StatefulSetView } from '../rollout/snapshot.ts';
import type { GateReport } from '../rollout/healthcheck/healthgates.ts';
import type { RolloutTimeline } from '../rollout/rollouttimeline.ts';
import { checkGroupUpdateStrategy } from '../doctor/checks/groups.ts';
import { Scope } from '../doctor/checks/scope.ts';
import { publishedTimeline } from './publishedtimeline.ts';
import { groupStatus, statusKey, STATUS_CONFIGMAP, type GroupStatus } from '../rollout/status.ts';
import {
  desiredFollowerReplicas,
  leaderFor,
  minimumTimeHasElapsed,
  planGroupReplicas,
  type GroupReplicaPlan,
} from '../downscale/coordination/replicaplan.ts';
import { replicasOf } from '../downscale/coordination/scalingfields.ts';
import { mirrorReference } from '../downscale/coordination/mirror.ts';
import { delayedDownscaleConfig } from '../downscale/coordination/delay.ts';
import { validateScalingMetadata } from '../downscale/coordination/validate.ts';
import { minTimeSetting } from '../downscale/mintime.ts';
import { annotationsOf, nameOf, namespaceOf } from '../vocabulary/metadata.ts';
import { parseZpdb, zpdbSelects, type ZpdbConfig } from '../drain/zpdb/zpdbresource.ts';
import { decideRolloutDelete, evictionScope } from '../drain/zpdb/decide.ts';
import { decodeLedger, ledgerName, pendingFrom, pruneLedger } from '../drain/zpdb/ledger.ts';
import { type ConfigKind } from '../restarts/references.ts';
import { mayOptIn, watchedConfigs, type WorkloadLike } from '../restarts/optins.ts';
import { labelledConfigs } from '../restarts/selectedconfigs.ts';
import { restartTimestampOf } from '../restarts/checksums.ts';
import { outdatedPods as outdatedOf, restartMode, updateTarget, type RestartTarget } from '../restarts/ondelete.ts';
import {
  STATUS_API_VERSION,
  type BudgetView,
  type GroupStatusView,
  type NamespaceStatus,
  type PodCell,
  type RestartView,
  type ScalingView,
  type StatefulSetRow,
  type StatusInput,
  type StatusReport,
} from './model.ts';

/** Wait code used when the planner would delete a pod but its ZoneAwarePodDisruptionBudget says not now. */
import { ZPDB_WAIT_CODE } from '../rollout/status.ts';
import {
  DELAYED_DOWNSCALE_ANNOTATION_KEY,
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  LAST_DOWNSCALE_ANNOTATION_KEY,
  ROLLOUT_GROUP_LABEL,
  ZONE_LABEL,
} from '../vocabulary/keys.ts';

export { ZPDB_WAIT_CODE };

const LEGACY_ZONE_LABEL = 'failure-domain.beta.kubernetes.io/zone';

/** Plural resource names as StatusInput.unreadable lists them. */
export const RESOURCE = {
  statefulSets: 'statefulsets',
  pods: 'pods',
  zpdbs: 'zoneawarepoddisruptionbudgets',
  leases: 'leases',
  deployments: 'deployments',
  daemonSets: 'daemonsets',
  configMaps: 'configmaps',
  secrets: 'secrets',
  nodes: 'nodes',
} as const;

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

interface Context {
  now: number;
  unreadable: ReadonlySet<string>;
  nodeZones: ReadonlyMap<string, string>;
}

export function buildStatus(input: StatusInput): StatusReport {
  const unreadable = new Set(input.unreadable ?? []);
  const ctx: Context = { now: input.now, unreadable, nodeZones: nodeZones(input.nodes ?? []) };
  return {
    apiVersion: STATUS_API_VERSION,
    kind: 'Status',
    generatedAt: new Date(input.now).toISOString(),
    namespaces: input.namespaces.map((namespace) => namespaceStatus(namespace, input, ctx)),
    ...(unreadable.size > 0 ? { unreadable: [...unreadable].sort(compare) } : {}),
  };
}

function nodeZones(nodes: readonly Node[]): Map<string, string> {
  const zones = new Map<string, string>();
  for (const node of nodes) {
    const zone = node.metadata?.labels?.[ZONE_LABEL] ?? node.metadata?.labels?.[LEGACY_ZONE_LABEL];
    if (node.metadata?.name && zone) zones.set(node.metadata.name, zone);
  }
  return zones;
}

function namespaceStatus(namespace: string, input: StatusInput, ctx: Context): NamespaceStatus {
  const here = <T extends KubeObject>(list: readonly T[]) => list.filter((o) => namespaceOf(o) === namespace);
  const statefulSets = here(input.statefulSets);
  const pods = here(input.pods);
  const leases = here(input.leases);
  const zpdbs = here(input.zpdbs).sort((a, b) => compare(a.metadata?.name ?? '', b.metadata?.name ?? ''));
  const configs = zpdbs.map((z) => ({ object: z, parsed: parseZpdb(z) }));
  const valid = configs.flatMap((c) => ('config' in c.parsed ? [c.parsed.config] : []));
  const operatorStatus = here(input.operatorStatus ?? []).find((o) => o.metadata?.name === STATUS_CONFIGMAP) as
    { data?: Record<string, string> } | undefined;

  const groups = new Map<string, StatefulSet[]>();
  for (const set of statefulSets) {
    const group = set.metadata?.labels?.[ROLLOUT_GROUP_LABEL];
    if (group === undefined) continue;
    groups.set(group, [...(groups.get(group) ?? []), set]);
  }
  const env: Env = {
    namespace,
    pods,
    statefulSets,
    leases,
    budgets: valid,
    ctx,
    operatorStatus: operatorStatus?.data,
    ...(input.healthGates ? { healthGates: input.healthGates } : {}),
    ...(input.timelines ? { timelines: input.timelines } : {}),
  };
  return {
    namespace,
    groups: [...groups.keys()].sort(compare).map((group) => groupView(group, groups.get(group)!, env)),
    budgets: configs.map((c) => budgetView(c.object, c.parsed, env)),
    restarts: restartViews(namespace, input, ctx),
  };
}

interface Env {
  namespace: string;
  pods: Pod[];
  statefulSets: StatefulSet[];
  leases: Lease[];
  budgets: ZpdbConfig[];
  ctx: Context;
  operatorStatus: Record<string, string> | undefined;
  healthGates?: ReadonlyMap<string, GateReport>;
  timelines?: ReadonlyMap<string, RolloutTimeline>;
}

// ------------------------------------------------------------------ groups

function groupView(group: string, sets: StatefulSet[], env: Env): GroupStatusView {
  const { namespace, pods, ctx } = env;
  const snapshot = groupSnapshot(namespace, group, sets, () => pods);
  const { plan, healthGate } = planWithGate(snapshot, env);
  let phase = groupStatus(plan, ctx.now).phase;
  let waitReason: GroupStatusView['waitReason'] = plan.waiting;
  const gate = gateDeletions(plan, env);
  const deletions = gate.allowed;
  const states = new Map(plan.sets.map((s) => [s.name, s.state]));
  if (gate.denied && deletions.length === 0) {
    // As the controller: the deletion waits for the next reconcile.
    phase = 'waiting';
    waitReason = { code: ZPDB_WAIT_CODE, statefulSet: gate.denied.statefulSet, message: gate.denied.message };
    states.set(gate.denied.statefulSet, 'waiting');
  }
  const replicaPlan = planGroupReplicas({ group: sets, now: ctx.now });
  const bySummary = new Map(plan.sets.map((s) => [s.name, s]));
  const byName = new Map(sets.map((s) => [nameOf(s), s]));
  const rows = rollOrder(snapshot.statefulSets).map((view) => {
    const summary = bySummary.get(view.name)!;
    const set = byName.get(view.name)!;
    const scaling = scalingView(set, sets, replicaPlan, ctx.now);
    const zone = zoneOf(set, podsOf(set, pods), ctx);
    const row: StatefulSetRow = {
      name: view.name,
      ...(zone !== undefined ? { zone } : {}),
      replicas: summary.replicas,
      pods: summary.pods,
      ready: summary.ready,
      updated: summary.updated,
      maxUnavailable: summary.maxUnavailable,
      paused: summary.paused,
      state: settledState(view, states.get(view.name) ?? summary.state),
      ...(view.currentRevision ? { currentRevision: view.currentRevision } : {}),
      ...(view.updateRevision ? { updateRevision: view.updateRevision } : {}),
      podGrid: podGrid(view),
      ...(scaling ? { scaling } : {}),
    };
    return row;
  });
  const operator = operatorView(env.operatorStatus, group);
  const timeline =
    env.timelines?.get(`${namespace}/${group}`) ?? publishedTimeline(env.operatorStatus?.[statusKey(group)]);
  const fixes = plan.blocked ? doctorFixes(namespace, sets, ctx.now) : [];
  return {
    name: group,
    phase,
    action: resizeFirst(replicaPlan) + actionOf(plan, deletions, waitReason, gate.held),
    ...(waitReason
      ? {
          waitReason: {
            code: waitReason.code,
            ...(waitReason.statefulSet !== undefined ? { statefulSet: waitReason.statefulSet } : {}),
            message: waitReason.message,
          },
        }
      : {}),
    ...(plan.blocked ? { blocked: plan.blocked.message } : {}),
    ...(plan.rolling ? { rolling: plan.rolling } : {}),
    ...(operator ? { operator } : {}),
    ...(healthGate ? { healthGate } : {}),
    ...(timeline ? { timeline } : {}),
    ...(fixes.length > 0 ? { fixes } : {}),
    warnings: [
      ...plan.errors.map((e) => e.message),
      ...plan.warnings.map((w) => `${w.statefulSet}: ${w.message}`),
      ...(ctx.unreadable.has(RESOURCE.pods)
        ? ['pods could not be read: pod counts, readiness and the plan are unknown']
        : []),
      ...(plan.deletions.length > 0 && ctx.unreadable.has(RESOURCE.zpdbs)
        ? ['ZoneAwarePodDisruptionBudgets could not be read: the deletions are not checked against them here']
        : []),
    ],
    statefulSets: rows,
  };
}

/**
 * What `stateward doctor` says to do about a blocked group: its check of
 * the group's update strategies (the only thing that blocks one), run on the
 * group's StatefulSets alone, so the page and the CLI show the same fix.
 */
function doctorFixes(namespace: string, sets: StatefulSet[], now: number): NonNullable<GroupStatusView['fixes']> {
  const scope = new Scope({
    now,
    namespaces: [namespace],
    statefulSets: sets,
    pods: [],
    zpdbs: [],
    deployments: [],
    daemonSets: [],
    configMaps: [],
    secrets: [],
    validatingWebhookConfigurations: [],
    mutatingWebhookConfigurations: [],
  });
  return checkGroupUpdateStrategy(scope).map((f) => ({ code: f.code, object: f.object, fix: f.fix }));
}

/**
 * The planner stops at the StatefulSet it acts on, so the ones after it keep
 * 'pending' even when they are already done; say so, by the planner's own
 * test of done (every pod on the update revision, none not Ready or missing).
 */
function settledState(view: StatefulSetView, state: StatefulSetRow['state']): StatefulSetRow['state'] {
  if (state !== 'pending' || view.paused || view.updateRevision === '') return state;
  return view.pods.every((p) => p.revision === view.updateRevision) && !hasNotReadyPods(view) ? 'up-to-date' : state;
}

function podGrid(view: StatefulSetView): PodCell[] {
  return view.pods.map((p) => ({
    name: p.name,
    ordinal: p.ordinal,
    // The planner's own test, so the grid adds up to the row's `updated`.
    updated: p.revision === view.updateRevision,
    ready: p.ready,
    terminating: p.terminating,
    ...(p.stuckReason ? { stuckReason: p.stuckReason } : {}),
  }));
}

/** The zones of the nodes the pods run on; else the StatefulSet's (or its template's) zone label. */
function zoneOf(set: StatefulSet, pods: Pod[], ctx: Context): string | undefined {
  const zones = new Set(
    pods.map((p) => ctx.nodeZones.get(p.spec?.nodeName ?? '')).filter((z): z is string => z !== undefined),
  );
  if (zones.size > 0) return [...zones].sort(compare).join(',');
  const labels = [set.metadata?.labels, set.spec?.template?.metadata?.labels];
  for (const l of labels) {
    const zone = l?.['zone'] ?? l?.[ZONE_LABEL];
    if (zone) return zone;
  }
  return undefined;
}

/**
 * The planner's deletions as the controller carries them out: each is first
 * put to the pod's ZoneAwarePodDisruptionBudget (decideRolloutDelete, with
 * the budget's ledger as pending evictions); the first denial stops the rest.
 */
function gateDeletions(
  plan: Plan,
  env: Env,
): { allowed: Deletion[]; held: number; denied?: { statefulSet: string; message: string } } {
  if (plan.deletions.length === 0 || env.budgets.length === 0) return { allowed: plan.deletions, held: 0 };
  const { ctx, pods, statefulSets, budgets } = env;
  const podNamed = (name: string) => pods.find((p) => p.metadata?.name === name);
  const pending = new Map<string, Map<string, number>>();
  const pendingFor = (config: ZpdbConfig): Map<string, number> => {
    let found = pending.get(config.name);
    if (!found) {
      found = pendingFrom(
        pruneLedger(
          decodeLedger(env.leases.find((l) => l.metadata?.name === ledgerName(config.name))).ledger,
          ctx.now,
          podNamed,
        ),
      );
      pending.set(config.name, found);
    }
    return found;
  };
  const allowed: Deletion[] = [];
  for (const [index, deletion] of plan.deletions.entries()) {
    const pod = pods.find((p) => p.metadata?.uid === deletion.uid) ?? podNamed(deletion.pod);
    if (!pod) {
      allowed.push(deletion);
      continue;
    }
    const scope = evictionScope(pod, budgets);
    const pendingEvictions = scope.kind === 'in-scope' ? pendingFor(scope.config) : new Map<string, number>();
    const rolloutMaxUnavailable = plan.sets.find((s) => s.name === deletion.statefulSet)?.maxUnavailable ?? 1;
    const verdict = decideRolloutDelete({
      pod,
      statefulSets,
      pods,
      now: ctx.now,
      pendingEvictions,
      configs: budgets,
      rolloutMaxUnavailable,
    });
    if (!verdict.allowed) {
      return {
        allowed,
        held: plan.deletions.length - index,
        denied: {
          statefulSet: deletion.statefulSet,
          message: `waiting: deleting pod ${deletion.pod} would break its ZoneAwarePodDisruptionBudget: ${verdict.message}`,
        },
      };
    }
    // The controller records the allow in the ledger before deleting: the next decision sees it.
    if (scope.kind === 'in-scope' && verdict.record) pendingEvictions.set(verdict.record.uid, ctx.now);
    allowed.push(deletion);
  }
  return { allowed, held: 0 };
}

/**
 * The controller adjusts a group's replicas before rolling it and rolls on
 * the next reconcile (which the change itself triggers); say so when
 * follow-leader has a change to make. (Mirrors need the reference's /scale,
 * which the report does not read.)
 */
function resizeFirst(replicaPlan: GroupReplicaPlan): string {
  if (replicaPlan.changes.length === 0) return '';
  return `resizing first (${replicaPlan.changes.map((c) => `${c.statefulSet} ${c.from} → ${c.to}`).join(', ')}), then `;
}

const WAITING_FOR: Record<string, (statefulSet: string | undefined) => string> = {
  'several-statefulsets-not-ready': () => 'waiting until at most one StatefulSet has not-Ready pods',
  'paused-statefulset-not-ready': (s) => `waiting for paused ${s ?? 'StatefulSet'} to be Ready again`,
  'max-unavailable-reached': () => 'waiting for pods to become Ready',
  'pods-terminating': () => 'waiting for pods to terminate',
  'updated-pods-not-ready': () => 'waiting for updated pods to become Ready',
  [ZPDB_WAIT_CODE]: () => 'waiting for its ZoneAwarePodDisruptionBudget',
  'health-check-waiting': (s) => `waiting for the health check before ${s ?? 'the next StatefulSet'}`,
  'health-check-paused': (s) => `held by a failing health check before ${s ?? 'the next StatefulSet'}`,
  [STATUS_PENDING_WAIT]: (s) => `waiting for the StatefulSet controller to report ${s ?? 'a StatefulSet'}'s status`,
};

/** What happens now, in a few words (the wait reason itself is reported beside it). */
function actionOf(plan: Plan, deletions: Deletion[], waiting: GroupStatusView['waitReason'], held: number): string {
  if (plan.blocked) return `blocked: ${plan.blocked.statefulSet} does not use the OnDelete update strategy`;
  if (plan.errors.length > 0) return `failing: ${plan.errors.map((e) => e.message).join('; ')}`;
  if (deletions.length > 0) {
    const pods = deletions.map((d) =>
      d.reason === 'update' ? d.pod : `${d.pod} (already unavailable${d.detail ? `: ${d.detail}` : ''})`,
    );
    return `rolling ${plan.rolling ?? deletions[0]!.statefulSet}: deleting ${pods.join(', ')}${held > 0 ? `; ${held} more held by a ZoneAwarePodDisruptionBudget` : ''}`;
  }
  if (waiting) {
    const what = (WAITING_FOR[waiting.code] ?? (() => 'waiting'))(waiting.statefulSet);
    return plan.rolling ? `rolling ${plan.rolling}: ${what}` : what;
  }
  if (plan.revisionUpdates.length > 0)
    return `recording ${plan.revisionUpdates.map((u) => `${u.statefulSet} at revision ${u.revision}`).join(', ')} as current`;
  const pausedBehind = plan.sets.filter((s) => s.paused && s.updated < s.pods);
  if (pausedBehind.length > 0)
    return `idle: ${pausedBehind.map((s) => `${s.name} is paused with ${s.pods - s.updated} pod(s) to update`).join(', ')}`;
  return 'idle';
}

/**
 * The plan, with the health gate decided as the operator last decided it:
 * only the operator queries Prometheus, so a client takes its verdict from
 * the report it published (or, in the operator, from the gate itself). With
 * no report for the StatefulSet the plan holds, the gate counts as not
 * evaluated yet.
 */
function planWithGate(snapshot: GroupSnapshot, env: Env): { plan: Plan; healthGate?: GateReport } {
  const plan = planGroup(snapshot);
  if (!plan.gate) return { plan };
  const report =
    env.healthGates?.get(`${snapshot.namespace}/${snapshot.group}`) ??
    publishedGate(env.operatorStatus, snapshot.group);
  if (report?.statefulSet !== plan.gate.statefulSet) return { plan };
  return {
    plan: planGroup({ ...snapshot, gates: new Map([[report.statefulSet, report.verdict]]) }),
    healthGate: report,
  };
}

/** The gate report in the operator's published status, if it has the shape the renderers read (it is user-writable data). */
function publishedGate(data: Record<string, string> | undefined, group: string): GateReport | undefined {
  const raw = data?.[statusKey(group)];
  if (raw === undefined) return undefined;
  let gate: unknown;
  try {
    gate = (JSON.parse(raw) as { healthGate?: unknown }).healthGate;
  } catch {
    return undefined;
  }
  if (!isRecord(gate) || !isRecord(gate['verdict']) || !Array.isArray(gate['results'])) return undefined;
  const { statefulSet, check, verdict, results } = gate as {
    statefulSet: unknown;
    check: unknown;
    verdict: Record<string, unknown>;
    results: unknown[];
  };
  const state = verdict['state'];
  if (typeof statefulSet !== 'string' || typeof check !== 'string' || typeof verdict['message'] !== 'string')
    return undefined;
  if (state !== 'open' && state !== 'wait' && state !== 'pause') return undefined;
  const number = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const outcomes = ['pass', 'fail', 'no_data', 'error'];
  return {
    statefulSet,
    check,
    verdict: {
      state,
      message: verdict['message'],
      warnings: Array.isArray(verdict['warnings']) ? verdict['warnings'].filter((w) => typeof w === 'string') : [],
      bypassed: verdict['bypassed'] === true,
    },
    results: results.flatMap((r) => {
      if (!isRecord(r) || typeof r['check'] !== 'string' || typeof r['message'] !== 'string') return [];
      if (typeof r['outcome'] !== 'string' || !outcomes.includes(r['outcome'])) return [];
      const current = number(r['current']);
      const baseline = number(r['baseline']);
      return [
        {
          check: r['check'],
          outcome: r['outcome'] as GateReport['results'][number]['outcome'],
          message: r['message'],
          at: number(r['at']) ?? 0,
          ...(current !== undefined ? { current } : {}),
          ...(baseline !== undefined ? { baseline } : {}),
        },
      ];
    }),
  };
}

function operatorView(data: Record<string, string> | undefined, group: string): GroupStatusView['operator'] {
  const raw = data?.[statusKey(group)];
  if (raw === undefined) return undefined;
  try {
    const status = JSON.parse(raw) as Partial<GroupStatus>;
    if (typeof status.phase !== 'string' || typeof status.since !== 'string') return undefined;
    return {
      phase: status.phase,
      since: status.since,
      ...(typeof status.waitingFor?.code === 'string' ? { waitCode: status.waitingFor.code } : {}),
    };
  } catch {
    return undefined;
  }
}

// ----------------------------------------------------------------- scaling

function scalingView(
  set: StatefulSet,
  group: readonly StatefulSet[],
  replicaPlan: GroupReplicaPlan,
  now: number,
): ScalingView | undefined {
  const name = nameOf(set);
  const annotations = annotationsOf(set);
  const errors = new Set<string>(validateScalingMetadata(set));
  for (const e of replicaPlan.errors) if (e.statefulSet === name) errors.add(e.error);
  for (const w of replicaPlan.warnings) if (w.statefulSet === name) errors.add(w.warning);

  const view: ScalingView = { errors: [] };
  const leader = annotations[DOWNSCALE_LEADER_ANNOTATION_KEY];
  if (leader !== undefined) view.leader = leader;
  const mirror = mirrorReference(set);
  if (mirror !== undefined && !('error' in mirror)) view.mirrorOf = `${mirror.kind}/${mirror.name}`;

  const change = replicaPlan.changes.find((c) => c.statefulSet === name);
  if (change) {
    view.desiredReplicas = change.to;
  } else if (leader !== undefined) {
    const decision = desiredFollowerReplicas({ follower: set, group, now });
    const leaderSet = leaderFor(set, group);
    if ('error' in decision) errors.add(decision.error);
    else if (
      decision.cause === 'none' &&
      leaderSet !== undefined &&
      !('error' in leaderSet) &&
      replicasOf(leaderSet) !== replicasOf(set)
    ) {
      view.desiredReplicas = replicasOf(leaderSet);
      view.holdReason = decision.reason;
    }
  }

  const last = annotations[LAST_DOWNSCALE_ANNOTATION_KEY];
  if (last !== undefined) view.lastDownscale = last;
  const minTime = minTimeSetting(set);
  if (minTime !== undefined) view.minTimeBetweenZonesDownscale = minTime.value;
  const elapsed = minimumTimeHasElapsed({ zone: name, group, now });
  if ('error' in elapsed) errors.add(elapsed.error);
  else if (!elapsed.elapsed) view.minTimeRemainingMs = Math.max(0, elapsed.lastDownscale + elapsed.minTime - now);

  const delayed = delayedDownscaleConfig(set);
  if (delayed !== undefined && !('error' in delayed))
    view.delayedDownscale = { delay: annotations[DELAYED_DOWNSCALE_ANNOTATION_KEY] ?? '', prepareUrl: delayed.url };

  view.errors = [...errors];
  const interesting = Object.keys(view).length > 1 || view.errors.length > 0;
  return interesting ? orderScaling(view) : undefined;
}

/** The fields in the model's order, whatever order they were found in. */
function orderScaling(v: ScalingView): ScalingView {
  return {
    ...(v.leader !== undefined ? { leader: v.leader } : {}),
    ...(v.mirrorOf !== undefined ? { mirrorOf: v.mirrorOf } : {}),
    ...(v.desiredReplicas !== undefined ? { desiredReplicas: v.desiredReplicas } : {}),
    ...(v.holdReason !== undefined ? { holdReason: v.holdReason } : {}),
    ...(v.lastDownscale !== undefined ? { lastDownscale: v.lastDownscale } : {}),
    ...(v.minTimeBetweenZonesDownscale !== undefined
      ? { minTimeBetweenZonesDownscale: v.minTimeBetweenZonesDownscale }
      : {}),
    ...(v.minTimeRemainingMs !== undefined ? { minTimeRemainingMs: v.minTimeRemainingMs } : {}),
    ...(v.delayedDownscale !== undefined ? { delayedDownscale: v.delayedDownscale } : {}),
    errors: v.errors,
  };
}

// ----------------------------------------------------------------- budgets

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function budgetView(object: KubeObject, parsed: ReturnType<typeof parseZpdb>, env: Env): BudgetView {
  const name = object.metadata?.name ?? '';
  const setNames = (selects: (labels: Record<string, string> | undefined) => boolean) =>
    env.statefulSets
      .filter((s) => selects(s.metadata?.labels))
      .map(nameOf)
      .sort(compare);
  if ('error' in parsed) {
    // Described from the raw spec, as far as it reads.
    const spec = isRecord((object as { spec?: unknown }).spec)
      ? (object as { spec: Record<string, unknown> }).spec
      : {};
    const selector =
      isRecord(spec['selector']) && isRecord(spec['selector']['matchLabels'])
        ? spec['selector']['matchLabels']
        : undefined;
    const text = (v: unknown) => (typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v));
    const maxUnavailable =
      spec['maxUnavailable'] !== undefined
        ? text(spec['maxUnavailable'])
        : spec['maxUnavailablePercentage'] !== undefined
          ? `${text(spec['maxUnavailablePercentage'])}%`
          : '1';
    return {
      name,
      maxUnavailable,
      mode:
        typeof spec['podNamePartitionRegex'] === 'string' && spec['podNamePartitionRegex'] !== ''
          ? 'partition'
          : 'zone',
      matchedStatefulSets: selector
        ? setNames((labels) => Object.entries(selector).every(([k, v]) => labels?.[k] === v))
        : [],
      pendingEvictions: [],
      error: parsed.error,
    };
  }
  const config = parsed.config;
  const warnings: string[] = [];
  let pendingEvictions: BudgetView['pendingEvictions'] = [];
  if (env.ctx.unreadable.has(RESOURCE.leases)) {
    warnings.push('pending evictions unknown: Leases (the budget ledger) could not be read');
  } else {
    const lease = env.leases.find((l) => l.metadata?.name === ledgerName(config.name));
    const decoded = decodeLedger(lease);
    if (decoded.warning) warnings.push(decoded.warning);
    const ledger = pruneLedger(decoded.ledger, env.ctx.now, (pod) => env.pods.find((p) => p.metadata?.name === pod));
    pendingEvictions = [...ledger.values()]
      .sort((a, b) => a.at - b.at || compare(a.pod, b.pod))
      .map((e) => ({ pod: e.pod, allowedAt: new Date(e.at).toISOString() }));
  }
  return {
    name,
    maxUnavailable:
      config.maxUnavailable.kind === 'count' ? String(config.maxUnavailable.value) : `${config.maxUnavailable.value}%`,
    mode: config.partition ? 'partition' : 'zone',
    matchedStatefulSets: setNames((labels) => zpdbSelects(config, labels)),
    pendingEvictions,
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

// ---------------------------------------------------------------- restarts

const CONFIG_KIND_NAME: Record<ConfigKind, string> = { configmap: 'ConfigMap', secret: 'Secret' };

function restartViews(namespace: string, input: StatusInput, ctx: Context): RestartView[] {
  const configLists: Record<ConfigKind, KubeObject[]> = {
    configmap: input.configMaps.filter((c) => namespaceOf(c) === namespace),
    secret: input.secrets.filter((c) => namespaceOf(c) === namespace),
  };
  const readable: Record<ConfigKind, boolean> = {
    configmap: !ctx.unreadable.has(RESOURCE.configMaps),
    secret: !ctx.unreadable.has(RESOURCE.secrets),
  };
  const byName: Record<ConfigKind, Map<string, KubeObject>> = {
    configmap: new Map(configLists.configmap.map((c) => [c.metadata?.name ?? '', c])),
    secret: new Map(configLists.secret.map((c) => [c.metadata?.name ?? '', c])),
  };
  const pods = input.pods.filter((p) => namespaceOf(p) === namespace);
  const workloads: [RestartView['kind'], KubeObject[]][] = [
    ['Deployment', input.deployments],
    ['StatefulSet', input.statefulSets],
    ['DaemonSet', input.daemonSets],
  ];
  const views: RestartView[] = [];
  for (const [kind, list] of workloads) {
    for (const object of list) {
      if (namespaceOf(object) !== namespace) continue;
      const workload = object as WorkloadLike & RestartTarget;
      if (!mayOptIn(workload)) continue;
      const watched = watchedConfigs(workload, {
        configMeta: (k, _ns, name) => byName[k].get(name)?.metadata,
        configNames: (k) => byName[k].keys(),
        // stateward.dev/config-restart-*-selector: the namespace's configs by their labels, as the controller matches them.
        configsOf: (k) => labelledConfigs(configLists[k]),
      });
      if (watched.optIns.length === 0) continue;
      const mode = restartMode(kind, workload).mode;
      const lastRestart = restartTimestampOf(workload);
      let outdatedPods: number | undefined;
      if (mode !== 'rolling' && kind !== 'Deployment' && !ctx.unreadable.has(RESOURCE.pods)) {
        const target = updateTarget(kind, object);
        const uid = object.metadata?.uid;
        if (target.revision !== '' && uid) {
          const own = pods.filter((p) => p.metadata?.ownerReferences?.some((r) => r.controller && r.uid === uid));
          outdatedPods = outdatedOf(own, target.revision, target.revisionLabel).length;
        }
      }
      views.push({
        kind,
        name: object.metadata?.name ?? '',
        optIns: [...watched.optIns],
        configs: watched.configs.map((c) => `${CONFIG_KIND_NAME[c.kind]}/${c.name}`),
        missingConfigs: watched.configs
          .filter((c) => readable[c.kind] && !byName[c.kind].has(c.name))
          .map((c) => `${CONFIG_KIND_NAME[c.kind]}/${c.name}`),
        ...(lastRestart !== undefined ? { lastRestart } : {}),
        ...(outdatedPods !== undefined ? { outdatedPods } : {}),
        mode,
        ...(watched.warnings.length > 0 ? { warnings: [...watched.warnings] } : {}),
      });
    }
  }
  return views.sort((a, b) => compare(a.name, b.name) || compare(a.kind, b.kind));
}
