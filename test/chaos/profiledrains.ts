// Drains under reschedule profiles in the soak (issue 38): the operator runs
// with the Couchbase profile (-reschedule.* flags, scoped to one namespace,
// served at /admission/reschedule-on-eviction) and the Strimzi profile
// (Drain Cleaner's STRIMZI_DRAIN_NAMESPACES, served at /drainer for another
// namespace), both webhooks registered through the soak's round-robin proxy
// like every other webhook. At intervals drawn from their own seeded stream
// a real `kubectl drain` of a drawn node evicts the pods each profile
// selects (put there just before) and pods no profile selects (exporters);
// stand-ins for the Couchbase and Strimzi operators see their annotation and
// replace the pod on another schedulable node under the same name, as those
// operators do. A drain failing for a fault (a webhook call timing out on a
// paused replica, the API server down) is run again, as a person or a
// cluster autoscaler would, until it completes or its deadline passes. The
// monitor judges the pods independently (profileinvariants.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { isAlreadyExists, isNotFound, KubeApiError } from '../../src/runtime/kube/errors.ts';
import { resources, type Node, type Pod } from '../../src/runtime/kube/types.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { installLoopbackWebhook, loopbackWebhook } from '../support/webhooks.ts';
import { COUCHBASE_ANNOTATION, STRIMZI_ANNOTATION } from './profileinvariants.ts';
import type { Prng } from './prng.ts';
import { uncordon } from './workload.ts';

/** Pods of one profile at most: each drain adds one, and its operator's stand-in keeps it alive elsewhere. */
const MAX_PODS = 6;
const KAFKA_LABELS = { 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-cluster-kafka' };

/** Label of every pod the profile drains create (value: the soak id), and the drains' pod selector. */
export const DRAIN_LABEL = 'stateward.dev/soak-drain';

const EVICTIONS = [
  { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods/eviction'], scope: 'Namespaced' },
];

/** The operator's flags and environment for both profiles. */
export function profileOperatorConfig(namespaces: { couchbase: string; kafka: string }): {
  flags: string[];
  env: Record<string, string>;
} {
  return {
    flags: [
      '-reschedule.enabled',
      '-reschedule.pod-selector=app=couchbase',
      `-reschedule.namespaces=${namespaces.couchbase}`,
    ],
    // Strimzi Drain Cleaner's own variable turns the Strimzi profile on, as in a migrated install.
    env: { STRIMZI_DRAIN_NAMESPACES: namespaces.kafka },
  };
}

/** The webhooks, through the soak's proxy: the reschedule path for the Couchbase namespace, /drainer for the Kafka one. */
export async function installProfileWebhooks(
  t: { after: (fn: () => Promise<unknown>) => void },
  kube: KubeClient,
  o: { id: string; operatorNamespace: string; port: number; couchbase: string; kafka: string },
): Promise<void> {
  const entry = (namespace: string, path: string, name: string) =>
    loopbackWebhook({ name, namespace, port: o.port, path, sideEffects: 'NoneOnDryRun', rules: EVICTIONS });
  await installLoopbackWebhook(t, kube, {
    name: `${o.id}-reschedule`,
    namespace: o.operatorNamespace,
    validating: true,
    webhooks: [
      entry(o.couchbase, '/admission/reschedule-on-eviction', `reschedule-on-eviction-${o.couchbase}.stateward.dev`),
      entry(o.kafka, '/drainer', `strimzi-drain-cleaner-${o.kafka}.stateward.dev`),
    ],
  });
}

export interface DrainRecord {
  at: string;
  node: string;
  /** kubectl drain runs until one completed (or the deadline passed). */
  runs: number;
  completed: boolean;
  ms: number;
  /** The last failed run's last lines. */
  lastError?: string;
}

/** The Couchbase and Strimzi operators' stand-in: a pod carrying its operator's annotation comes back elsewhere under its name. */
class StandIns {
  readonly moves = { couchbase: 0, strimzi: 0 };
  failures = 0;
  private readonly kube: KubeClient;
  private readonly namespaces: string[];
  private readonly inFlight = new Map<string, Promise<void>>();
  private running = true;
  private loop: Promise<void> | undefined;
  private turn = 0;

  constructor(kube: KubeClient, namespaces: string[]) {
    this.kube = kube;
    this.namespaces = namespaces;
  }

  start(): void {
    this.loop = (async () => {
      while (this.running) {
        for (const namespace of this.namespaces) {
          const pods = await this.kube
            .list<Pod>(resources.pods, { namespace, timeoutMs: 5000 })
            .then((l) => l.items)
            .catch(() => [] as Pod[]);
          for (const pod of pods) {
            const uid = pod.metadata?.uid ?? '';
            const asked = this.asked(pod);
            if (!asked || pod.metadata?.deletionTimestamp || this.inFlight.has(uid)) continue;
            this.inFlight.set(
              uid,
              this.move(pod, asked).finally(() => this.inFlight.delete(uid)),
            );
          }
        }
        await sleep(300);
      }
    })();
  }

  private asked(pod: Pod): 'couchbase' | 'strimzi' | undefined {
    const annotations = pod.metadata?.annotations ?? {};
    const [cbKey, cbValue] = COUCHBASE_ANNOTATION.split('=') as [string, string];
    const [szKey, szValue] = STRIMZI_ANNOTATION.split('=') as [string, string];
    if (annotations[cbKey] === cbValue) return 'couchbase';
    if (annotations[szKey] === szValue) return 'strimzi';
    return undefined;
  }

  /** Deletes the pod (its UID as precondition), waits until it is gone, creates it again on another schedulable node. */
  private async move(pod: Pod, operator: 'couchbase' | 'strimzi'): Promise<void> {
    const namespace = pod.metadata!.namespace!;
    const name = pod.metadata!.name!;
    const uid = pod.metadata!.uid!;
    const deadline = Date.now() + 120_000;
    // Every call retried through faults; a write whose answer was lost is recognised by its outcome when retried.
    const retry = async <T>(what: () => Promise<T>): Promise<T | undefined> => {
      while (this.running && Date.now() < deadline) {
        try {
          return await what();
        } catch {
          await sleep(500);
        }
      }
      return undefined;
    };
    const deleted = await retry(() =>
      this.kube.delete(resources.pods, { namespace, name }, { uid, gracePeriodSeconds: 0, timeoutMs: 5000 }).then(
        () => 'deleted' as const,
        (error: unknown) => {
          if (isNotFound(error)) return 'deleted' as const;
          // The UID precondition failed: the name holds another pod already.
          if (error instanceof KubeApiError && error.code === 409) return 'replaced' as const;
          throw error;
        },
      ),
    );
    if (deleted === 'replaced') return;
    const gone =
      deleted &&
      (await retry(async () => {
        const current = await this.kube
          .get<Pod>(resources.pods, { namespace, name }, { timeoutMs: 5000 })
          .catch((error: unknown) => {
            if (isNotFound(error)) return undefined;
            throw error;
          });
        if (current?.metadata?.uid === uid) throw new Error('still there');
        return true;
      }));
    const target = gone ? await retry(() => this.target(pod.spec?.nodeName)) : undefined;
    const created =
      target &&
      (await retry(() =>
        this.kube
          .create(
            resources.pods,
            {
              metadata: { name, namespace, labels: { ...pod.metadata?.labels } },
              spec: { nodeName: target, containers: [{ name: 'c', image: 'example.invalid/app:1' }] },
            },
            { timeoutMs: 5000 },
          )
          .then(
            () => true,
            (error: unknown) => {
              if (isAlreadyExists(error)) return true;
              throw error;
            },
          ),
      ));
    if (created) this.moves[operator]++;
    else this.failures++;
  }

  /** A schedulable node other than `from`, in turn. */
  private async target(from: string | undefined): Promise<string> {
    const nodes = (await this.kube.list<Node>(resources.nodes, { timeoutMs: 5000 })).items.filter(
      (n) => !n.spec?.unschedulable && n.metadata?.name !== from,
    );
    if (nodes.length === 0) throw new Error('no schedulable node');
    return nodes[this.turn++ % nodes.length]!.metadata!.name!;
  }

  /** Nothing being moved and no pod waiting for its operator. */
  async idle(): Promise<boolean> {
    if (this.inFlight.size > 0) return false;
    for (const namespace of this.namespaces) {
      const pods = (await this.kube.list<Pod>(resources.pods, { namespace, timeoutMs: 5000 })).items;
      if (pods.some((p) => this.asked(p))) return false;
    }
    return true;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await Promise.all(this.inFlight.values());
  }
}

export interface ProfileDrainsOptions {
  cluster: TestCluster;
  kube: KubeClient;
  prng: Prng;
  id: string;
  couchbase: string;
  kafka: string;
  log: (line: string) => void;
  /** Pause before each drain, drawn uniformly (ms). */
  intervalMs: [number, number];
}

export class ProfileDrains {
  readonly records: DrainRecord[] = [];
  podsCreated = 0;
  private readonly o: ProfileDrainsOptions;
  private readonly standIns: StandIns;
  private current: Promise<void> | undefined;
  private count = 0;

  constructor(o: ProfileDrainsOptions) {
    this.o = o;
    this.standIns = new StandIns(o.kube, [o.couchbase, o.kafka]);
    this.standIns.start();
  }

  get moves(): { couchbase: number; strimzi: number } {
    return this.standIns.moves;
  }

  get moveFailures(): number {
    return this.standIns.failures;
  }

  /** Drains until aborted, one at a time; a drain in progress goes on (settle() waits for it). */
  async run(signal: AbortSignal): Promise<void> {
    const { prng } = this.o;
    while (!signal.aborted) {
      try {
        await sleep(prng.int(...this.o.intervalMs), undefined, { signal });
      } catch {
        return;
      }
      const node = prng.pick(this.o.cluster.nodes).name;
      const holdMs = prng.int(2000, 6000);
      this.current = this.drain(node, holdMs).catch((error: unknown) =>
        this.o.log(`profile drain ${node}: ${error instanceof Error ? error.message : String(error)}`),
      );
      await this.current;
    }
  }

  /**
   * The pods of one drain on `node`: one beside each profile's that no profile
   * selects, and one per profile unless the node holds one already or the
   * profile has MAX_PODS (moved pods stay, so a long soak would pile them up).
   * Each create is retried through faults for up to 30 s.
   */
  private async place(node: string): Promise<void> {
    const k = ++this.count;
    const { couchbase, kafka, id, kube } = this.o;
    const existing = async (namespace: string) =>
      (await kube.list<Pod>(resources.pods, { namespace, labelSelector: `${DRAIN_LABEL}=${id}`, timeoutMs: 5000 }))
        .items;
    // A list lost to a fault places the pod anyway: one more is harmless.
    const wanted = (namespace: string, selected: (p: Pod) => boolean) =>
      existing(namespace).then(
        (all) => {
          const pods = all.filter(selected);
          return pods.length < MAX_PODS && !pods.some((p) => p.spec?.nodeName === node);
        },
        () => true,
      );
    const isCouchbase = (p: Pod) => p.metadata?.labels?.['app'] === 'couchbase';
    const isKafka = (p: Pod) => p.metadata?.labels?.['strimzi.io/name'] === 'my-cluster-kafka';
    type Placed = readonly [string, string, Readonly<Record<string, string>>];
    const pods: Placed[] = [
      ...((await wanted(couchbase, isCouchbase)) ? [[couchbase, `cb-${k}`, { app: 'couchbase' }] as const] : []),
      [couchbase, `cb-exporter-${k}`, { app: 'couchbase-exporter' }],
      ...((await wanted(kafka, isKafka)) ? [[kafka, `my-cluster-kafka-${k}`, KAFKA_LABELS] as const] : []),
      [kafka, `my-kafka-exporter-${k}`, { 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-kafka-exporter' }],
    ];
    const deadline = Date.now() + 30_000;
    for (const [namespace, name, labels] of pods) {
      for (;;) {
        try {
          await kube.create(
            resources.pods,
            {
              metadata: { name, namespace, labels: { ...labels, [DRAIN_LABEL]: id } },
              spec: { nodeName: node, containers: [{ name: 'c', image: 'example.invalid/app:1' }] },
            },
            { timeoutMs: 5000 },
          );
          this.podsCreated++;
          break;
        } catch (error) {
          // Created, its answer lost: the retry finds it.
          if (isAlreadyExists(error)) break;
          if (Date.now() > deadline) throw error;
          await sleep(500);
        }
      }
    }
  }

  /** Places the pods, drains the node until a kubectl drain completes (deadline 120 s), holds, uncordons. */
  private async drain(node: string, holdMs: number): Promise<void> {
    const { cluster, log, id } = this.o;
    const started = Date.now();
    const record: DrainRecord = { at: new Date(started).toISOString(), node, runs: 0, completed: false, ms: 0 };
    this.records.push(record);
    try {
      await this.place(node);
    } catch (error) {
      // A fault in the way of the pods' creation: the drain still runs, over what is there.
      log(`profile drain ${node}: placing pods: ${error instanceof Error ? error.message : String(error)}`);
    }
    while (!record.completed && Date.now() - started < 120_000) {
      record.runs++;
      const result = await kubectl(
        cluster,
        'drain',
        node,
        `--pod-selector=${DRAIN_LABEL}=${id}`,
        '--force',
        '--ignore-daemonsets',
        '--delete-emptydir-data',
        '--timeout=45s',
      );
      record.completed = result.ok;
      if (!result.ok) {
        record.lastError = result.out.trim().split('\n').slice(-2).join(' / ');
        await sleep(1000);
      }
    }
    record.ms = Date.now() - started;
    log(
      `profile drain ${node}: ${record.completed ? 'completed' : 'NOT completed'} after ${record.runs} kubectl drain run(s), ${(record.ms / 1000).toFixed(1)} s${record.lastError ? `; last failure: ${record.lastError}` : ''}`,
    );
    await sleep(holdMs);
    await uncordon(cluster, node);
  }

  /** The drain in progress done, and every pod asked to move moved. */
  async settled(): Promise<boolean> {
    await this.current;
    return this.standIns.idle().catch(() => false);
  }

  async stop(): Promise<void> {
    await this.current?.catch(() => undefined);
    await this.standIns.stop();
  }
}
