// Rollout groups on the test cluster, and an invariant monitor that watches
// them independently of the operator and records every breach of the
// guarantees it sees over a whole run.
import { KubeClient } from '../../src/runtime/kube/client.ts';
import { zpdbResource } from '../../src/drain/zpdb/zpdbresource.ts';
import { resources, type KubeObject, type Pod, type StatefulSet } from '../../src/runtime/kube/types.ts';
import { Informer } from '../../src/runtime/informer/informer.ts';
import { waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';

export const ZONES = ['a', 'b', 'c'];

export interface ZoneSetOptions {
  replicas?: number;
  maxUnavailable?: string;
  paused?: boolean;
  strategy?: 'OnDelete' | 'RollingUpdate';
  /** kwok readiness delay of each pod, e.g. "1s". */
  readyDelay?: string;
  group?: string;
  /** Pod template labels, e.g. { 'stateward.dev/simulate': 'crash-loop' }. */
  podLabels?: Record<string, string>;
}

export function zoneStatefulSet(namespace: string, zone: string, o: ZoneSetOptions = {}): StatefulSet {
  const name = `ingester-zone-${zone}`;
  const group = o.group ?? 'ingester';
  return {
    metadata: {
      name,
      namespace,
      labels: { 'rollout-group': group },
      annotations: {
        ...(o.maxUnavailable ? { 'rollout-max-unavailable': o.maxUnavailable } : {}),
        ...(o.paused ? { 'grafana.com/rollout-paused': 'true' } : {}),
      },
    },
    spec: {
      replicas: o.replicas ?? 3,
      serviceName: name,
      podManagementPolicy: 'Parallel',
      updateStrategy: { type: o.strategy ?? 'OnDelete' },
      // No `name` label anywhere: Stateward finds pods by ownerReferences.
      selector: { matchLabels: { app: name } },
      template: {
        metadata: {
          labels: { app: name, 'rollout-group': group, ...(o.podLabels ?? {}) },
          annotations: { 'pod-ready.stage.kwok.x-k8s.io/delay': o.readyDelay ?? '1s', version: '1' },
        },
        spec: {
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [
                  {
                    matchExpressions: [
                      { key: 'topology.kubernetes.io/zone', operator: 'In', values: [`zone-${zone}`] },
                    ],
                  },
                ],
              },
            },
          },
          containers: [{ name: 'ingester', image: 'example.invalid/ingester:1' }],
        },
      },
    },
  };
}

export function testClient(cluster: TestCluster): KubeClient {
  return new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
}

export async function createGroup(
  kube: KubeClient,
  namespace: string,
  options: Partial<Record<string, ZoneSetOptions>> & { all?: ZoneSetOptions } = {},
  zones = ZONES,
): Promise<void> {
  for (const zone of zones)
    await kube.create(resources.statefulSets, zoneStatefulSet(namespace, zone, { ...options.all, ...options[zone] }));
}

/**
 * The group's ZoneAwarePodDisruptionBudget "ingester": at most one pod of
 * the rollout group unavailable. Created as soon as the API server accepts
 * it (its CRD may just have been installed).
 */
export async function createGroupBudget(kube: KubeClient, namespace: string): Promise<void> {
  const zpdb = {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'ZoneAwarePodDisruptionBudget',
    metadata: { name: 'ingester', namespace },
    spec: { maxUnavailable: 1, selector: { matchLabels: { 'rollout-group': 'ingester' } } },
  } as KubeObject;
  await waitFor(
    `the ZPDB ${namespace}/ingester created`,
    () => kube.create(zpdbResource, zpdb).catch(() => undefined),
    {
      timeoutMs: 30_000,
    },
  );
}

/** Ready and not terminating. */
export const isReady = (p: Pod) =>
  !p.metadata?.deletionTimestamp &&
  p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

export async function waitGroupSettled(
  kube: KubeClient,
  namespace: string,
  timeoutMs = 120_000,
  zones = ZONES,
): Promise<StatefulSet[]> {
  return waitFor(
    'every StatefulSet of the group Ready',
    async () => {
      const sets = (
        await kube.list<StatefulSet>(resources.statefulSets, { namespace, labelSelector: 'rollout-group' })
      ).items.filter((s) => zones.some((z) => s.metadata?.name === `ingester-zone-${z}`));
      return sets.length === zones.length &&
        sets.every(
          (s) =>
            s.status?.readyReplicas === s.spec?.replicas && s.status?.observedGeneration === s.metadata?.generation,
        )
        ? sets
        : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** Changes the pod template (a new revision); extra labels can break or fix it. */
export async function changeTemplate(
  kube: KubeClient,
  namespace: string,
  zone: string,
  version: string,
  podLabels: Record<string, string | null> = {},
): Promise<void> {
  await kube.patch(resources.statefulSets, { namespace, name: `ingester-zone-${zone}` }, 'merge', {
    spec: { template: { metadata: { annotations: { version }, labels: podLabels } } },
  });
}

/**
 * Waits until the StatefulSet controller has published a new update revision
 * for every zone. The controller handles sets in no fixed order, so a test
 * asserting the order zones roll in must let all revisions land before the
 * operator looks; otherwise the first set to get its revision rolls first.
 */
export async function waitRevisionsPending(kube: KubeClient, namespace: string, zones = ZONES): Promise<void> {
  await waitFor(
    'every zone to have a pending update revision',
    async () => {
      const sets = (
        await kube.list<StatefulSet>(resources.statefulSets, { namespace, labelSelector: 'rollout-group' })
      ).items.filter((s) => zones.some((z) => s.metadata?.name === `ingester-zone-${z}`));
      return (
        sets.length === zones.length &&
        sets.every(
          (s) =>
            s.status?.observedGeneration === s.metadata?.generation &&
            s.status?.updateRevision !== s.status?.currentRevision,
        )
      );
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
}

/** Waits until every StatefulSet runs its update revision everywhere and currentRevision caught up. */
export async function waitRolledOut(
  kube: KubeClient,
  namespace: string,
  timeoutMs = 180_000,
  zones = ZONES,
): Promise<StatefulSet[]> {
  return waitFor(
    'the rollout to complete',
    async () => {
      const sets = await waitGroupSettled(kube, namespace, timeoutMs, zones);
      const pods = (await kube.list<Pod>(resources.pods, { namespace })).items;
      const done = sets.every(
        (s) =>
          s.status?.currentRevision === s.status?.updateRevision &&
          pods
            .filter((p) => p.metadata?.labels?.['app'] === s.metadata?.name)
            .every((p) => p.metadata?.labels?.['controller-revision-hash'] === s.status?.updateRevision && isReady(p)),
      );
      return done ? sets : undefined;
    },
    { timeoutMs, intervalMs: 500 },
  );
}

export interface Transition {
  at: number;
  pod: string;
  from: string;
  to: string;
}

/**
 * Watches pods and StatefulSets of a namespace with its own informers and,
 * after every event, checks: at most one StatefulSet of the group is
 * disrupted (a pod not Ready, terminating or missing), and no StatefulSet has
 * more unavailable pods than its budget allows.
 */
export class InvariantMonitor {
  readonly violations: string[] = [];
  readonly transitions: Transition[] = [];
  maxDisruptedAtOnce = 0;
  private readonly pods: Informer<Pod>;
  private readonly sets: Informer<StatefulSet>;
  private readonly budgets: Record<string, number>;
  private readonly states = new Map<string, string>();
  /** Checks start once both caches hold a complete picture. */
  private synced = false;

  constructor(kube: KubeClient, namespace: string, budgets: Record<string, number>) {
    this.budgets = budgets;
    this.pods = new Informer<Pod>({ client: kube, type: resources.pods, namespace });
    this.sets = new Informer<StatefulSet>({ client: kube, type: resources.statefulSets, namespace });
    const check = () => this.check();
    this.pods.addHandlers({ onAdd: check, onUpdate: check, onDelete: check });
    this.sets.addHandlers({ onAdd: check, onUpdate: check, onDelete: check });
  }

  async start(): Promise<void> {
    this.pods.start();
    this.sets.start();
    await Promise.all([this.pods.waitForSync(), this.sets.waitForSync()]);
    // What existed before the monitor started is the baseline, not a transition.
    this.synced = true;
    this.check();
    this.transitions.length = 0;
  }

  async stop(): Promise<void> {
    await Promise.all([this.pods.stop(), this.sets.stop()]);
  }

  /**
   * For an assertion's message: the violations, and every pod transition
   * from 10 s before the first of them, with each pod's Ready condition and
   * node, so a failure says which pods were down and why.
   */
  report(): string {
    if (this.violations.length === 0) return 'no violations';
    const first = Date.parse(this.violations[0]!.slice(0, 24));
    const since = Number.isFinite(first) ? first - 10_000 : 0;
    const lines = this.transitions
      .filter((t) => t.at >= since)
      .map((t) => `${new Date(t.at).toISOString()} ${t.pod} ${t.from} → ${t.to}`);
    const pods = this.pods.list().map((p) => {
      const ready = p.status?.conditions?.find((c) => c.type === 'Ready');
      return `${p.metadata?.name} uid=${p.metadata?.uid?.slice(0, 8)} node=${p.spec?.nodeName ?? '-'} phase=${p.status?.phase ?? '-'} Ready=${ready?.status ?? '-'}(${ready?.reason ?? ''} ${ready?.lastTransitionTime ?? ''})`;
    });
    return ['violations:', ...this.violations, 'transitions:', ...lines, 'pods now:', ...pods].join('\n');
  }

  private check(): void {
    if (!this.synced) return;
    const now = Date.now();
    for (const pod of this.pods.list()) {
      const name = pod.metadata!.name!;
      const state = `${pod.metadata?.labels?.['controller-revision-hash'] ?? '?'}/${pod.metadata?.deletionTimestamp ? 'terminating' : isReady(pod) ? 'ready' : 'not-ready'}`;
      const previous = this.states.get(name) ?? 'absent';
      if (previous !== state) this.transitions.push({ at: now, pod: name, from: previous, to: state });
      this.states.set(name, state);
    }
    const disrupted: string[] = [];
    for (const set of this.sets.list()) {
      const name = set.metadata!.name!;
      const pods = this.pods.list().filter((p) => p.metadata?.labels?.['app'] === name);
      const unavailable = pods.filter((p) => !isReady(p)).length + Math.max(0, (set.spec?.replicas ?? 1) - pods.length);
      if (unavailable > 0) disrupted.push(`${name}(${unavailable})`);
      const budget = this.budgets[name] ?? 1;
      if (unavailable > budget)
        this.violations.push(
          `${new Date(now).toISOString()} ${name} has ${unavailable} unavailable pods, budget ${budget}`,
        );
    }
    this.maxDisruptedAtOnce = Math.max(this.maxDisruptedAtOnce, disrupted.length);
    if (disrupted.length > 1)
      this.violations.push(
        `${new Date(now).toISOString()} ${disrupted.length} StatefulSets disrupted at once: ${disrupted.join(', ')}`,
      );
  }
}

/**
 * An InvariantMonitor over the group's zones, started and stopped with the
 * test: `budgets` by zone letter (1 where not given).
 */
export async function monitorGroup(
  t: { after(fn: () => unknown): void },
  kube: KubeClient,
  namespace: string,
  budgets: Record<string, number> = {},
): Promise<InvariantMonitor> {
  const monitor = new InvariantMonitor(
    kube,
    namespace,
    Object.fromEntries(ZONES.map((z) => [`ingester-zone-${z}`, budgets[z] ?? 1])),
  );
  await monitor.start();
  t.after(() => monitor.stop());
  return monitor;
}
