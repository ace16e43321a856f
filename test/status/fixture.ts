// A hand-built cluster state for the status report tests: a three-zone
// ingester group in the middle of a rollout (zone a done, zone b waiting for
// its new pod to become Ready, zone c not started), a leader with a recent
// downscale holding a follower back, a budget with a pending eviction, and
// workloads restarted on config changes. A second namespace holds what the
// first cannot at the same time (a blocked group, mirrors, a stuck pod, an
// unreadable ledger, an invalid budget), so a full report has every field.
import type { KubeObject, Lease, Node, Pod, StatefulSet } from '../../src/runtime/kube/types.ts';
import type { StatusInput } from '../../src/status/model.ts';
import { ledgerName } from '../../src/drain/zpdb/ledger.ts';
import { STATUS_CONFIGMAP } from '../../src/rollout/status.ts';
import { LEDGER_ANNOTATION, LEDGER_LABEL } from '../../src/vocabulary/keys.ts';

export const NOW = Date.parse('2026-01-10T12:00:00Z');
export const NS = 'mimir';
export const OTHER = 'other';

export interface PodOptions {
  ready?: boolean;
  terminating?: boolean;
  stuck?: string;
  node?: string;
  phase?: string;
}

export function pod(namespace: string, set: string, ordinal: number, revision: string, o: PodOptions = {}): Pod {
  const name = `${set}-${ordinal}`;
  const ready = o.ready ?? true;
  return {
    metadata: {
      name,
      namespace,
      uid: `${name}-uid`,
      labels: { app: set, 'controller-revision-hash': revision },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: set, uid: `${set}-uid`, controller: true }],
      ...(o.terminating ? { deletionTimestamp: '2026-01-10T11:59:50Z' } : {}),
    },
    spec: { nodeName: o.node ?? '', containers: [{ name: 'main', image: 'x' }] },
    status: {
      phase: o.phase ?? 'Running',
      containerStatuses: [
        {
          name: 'main',
          image: 'x',
          imageID: '',
          restartCount: 0,
          ready,
          state: o.stuck ? { waiting: { reason: o.stuck } } : { running: { startedAt: '2026-01-10T11:00:00Z' } },
        },
      ],
    },
  };
}

export interface SetOptions {
  replicas?: number;
  current?: string;
  update?: string;
  ready?: number;
  strategy?: string;
  group?: string;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
}

export function statefulSet(namespace: string, name: string, o: SetOptions = {}): StatefulSet {
  const replicas = o.replicas ?? 3;
  return {
    metadata: {
      name,
      namespace,
      uid: `${name}-uid`,
      generation: 1,
      labels: { ...(o.group !== undefined ? { 'rollout-group': o.group } : {}), ...o.labels },
      annotations: { ...o.annotations },
    },
    spec: {
      replicas,
      serviceName: name,
      selector: { matchLabels: { app: name } },
      updateStrategy: { type: o.strategy ?? 'OnDelete' },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'main', image: 'x' }] } },
    },
    status: {
      replicas,
      readyReplicas: o.ready ?? replicas,
      currentRevision: o.current ?? 'r1',
      updateRevision: o.update ?? 'r2',
      observedGeneration: 1,
    },
  };
}

const node = (name: string, zone: string): Node => ({
  metadata: { name, labels: { 'topology.kubernetes.io/zone': zone } },
});

const zpdb = (namespace: string, name: string, spec: Record<string, unknown>): KubeObject =>
  ({
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'ZoneAwarePodDisruptionBudget',
    metadata: { name, namespace, uid: `${name}-uid`, generation: 1 },
    spec,
  }) as KubeObject;

const ledger = (namespace: string, budget: string, annotation: string): Lease => ({
  metadata: {
    name: ledgerName(budget),
    namespace,
    labels: { [LEDGER_LABEL]: 'true' },
    annotations: { [LEDGER_ANNOTATION]: annotation },
  },
  spec: {},
});

export const MIN = 60_000;

export function fullInput(): StatusInput {
  const a = 'ingester-zone-a';
  const b = 'ingester-zone-b';
  const c = 'ingester-zone-c';
  const statefulSets: StatefulSet[] = [
    // Listed out of order on purpose: the report orders them.
    statefulSet(NS, c, { group: 'ingester', replicas: 4, annotations: { 'grafana.com/rollout-downscale-leader': a } }),
    statefulSet(NS, a, {
      group: 'ingester',
      labels: { 'grafana.com/min-time-between-zones-downscale': '30m' },
      annotations: { 'grafana.com/last-downscale': '2026-01-10T11:50:00Z' },
    }),
    statefulSet(NS, b, { group: 'ingester', ready: 2, annotations: { 'grafana.com/rollout-downscale-leader': a } }),
    // Outside any group, OnDelete, restarted on config changes (Reloader).
    {
      ...statefulSet(NS, 'store-gateway', { current: 'sg1', update: 'sg2' }),
      metadata: {
        name: 'store-gateway',
        namespace: NS,
        uid: 'store-gateway-uid',
        generation: 2,
        annotations: { 'reloader.stakater.com/auto': 'true', 'secretproviderclass.reloader.stakater.com/auto': 'true' },
      },
      spec: {
        replicas: 2,
        serviceName: 'store-gateway',
        selector: { matchLabels: { app: 'store-gateway' } },
        updateStrategy: { type: 'OnDelete' },
        template: {
          metadata: {
            labels: { app: 'store-gateway' },
            annotations: { 'com.xing.deployment-restart.timestamp': '2026-01-10T11:30:00.000Z' },
          },
          spec: {
            containers: [{ name: 'main', image: 'x' }],
            volumes: [{ name: 'config', configMap: { name: 'sg-config' } }],
          },
        },
      },
      status: { replicas: 2, readyReplicas: 2, currentRevision: 'sg1', updateRevision: 'sg2', observedGeneration: 2 },
    },
    // OTHER: a group blocked by a RollingUpdate member, with mirroring and delayed downscale.
    statefulSet(OTHER, 'store-zone-a', {
      group: 'store',
      annotations: {
        'grafana.com/rollout-mirror-replicas-from-resource-name': 'store',
        'grafana.com/rollout-mirror-replicas-from-resource-kind': 'ReplicaTemplate',
        'grafana.com/rollout-mirror-replicas-from-resource-api-version': 'rollout-operator.grafana.com/v1',
        'grafana.com/rollout-delayed-downscale': '2h',
        'grafana.com/rollout-prepare-delayed-downscale-url': 'http://pod/prepare',
        // A bad value: reported as a scaling problem.
        'grafana.com/rollout-force-replicas': 'lots',
      },
    }),
    statefulSet(OTHER, 'store-zone-b', { group: 'store', strategy: 'RollingUpdate', ready: 2 }),
  ];
  const pods: Pod[] = [
    ...[0, 1, 2].map((i) => pod(NS, a, i, 'r2', { node: 'node-a' })),
    pod(NS, b, 0, 'r1', { node: 'node-b' }),
    pod(NS, b, 1, 'r1', { node: 'node-b' }),
    pod(NS, b, 2, 'r2', { node: 'node-b', ready: false }),
    ...[0, 1, 2, 3].map((i) => pod(NS, c, i, 'r1', { node: 'node-c' })),
    pod(NS, 'store-gateway', 0, 'sg1'),
    pod(NS, 'store-gateway', 1, 'sg2'),
    ...[0, 1, 2].map((i) => pod(OTHER, 'store-zone-a', i, 'r1')),
    pod(OTHER, 'store-zone-b', 0, 'r1'),
    pod(OTHER, 'store-zone-b', 1, 'r1'),
    pod(OTHER, 'store-zone-b', 2, 'r2', { ready: false, stuck: 'CrashLoopBackOff' }),
  ];
  const querier: KubeObject = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: 'querier',
      namespace: NS,
      uid: 'querier-uid',
      annotations: { 'com.xing.deployment-restart': 'enabled' },
    },
    spec: {
      template: {
        metadata: { annotations: { 'com.xing.deployment-restart.timestamp': '2026-01-09T08:00:00.000Z' } },
        spec: {
          containers: [
            {
              name: 'q',
              image: 'x',
              envFrom: [{ configMapRef: { name: 'querier-config' } }, { secretRef: { name: 'querier-secret' } }],
            },
          ],
        },
      },
    },
  } as KubeObject;
  const plain: KubeObject = {
    metadata: { name: 'distributor', namespace: NS, uid: 'd-uid' },
    spec: {
      template: {
        spec: { containers: [{ name: 'd', image: 'x', envFrom: [{ configMapRef: { name: 'querier-config' } }] }] },
      },
    },
  } as KubeObject;
  return {
    now: NOW,
    namespaces: [NS, OTHER],
    statefulSets,
    pods,
    zpdbs: [
      zpdb(NS, 'ingester', { maxUnavailable: 1, selector: { matchLabels: { 'rollout-group': 'ingester' } } }),
      zpdb(OTHER, 'store', { maxUnavailablePercentage: 50, selector: { matchLabels: { 'rollout-group': 'store' } } }),
      zpdb(OTHER, 'broken', {
        maxUnavailable: 1,
        maxUnavailablePercentage: 10,
        selector: { matchLabels: { 'rollout-group': 'store' } },
      }),
    ],
    leases: [
      ledger(
        NS,
        'ingester',
        JSON.stringify({
          [`${c}-3-uid`]: { pod: `${c}-3`, at: NOW - 30_000 },
          'gone-uid': { pod: 'ingester-zone-c-9', at: NOW - 10_000 },
        }),
      ),
      ledger(OTHER, 'store', 'not json'),
    ],
    deployments: [querier, plain],
    daemonSets: [],
    configMaps: [
      { metadata: { name: 'querier-config', namespace: NS } },
      { metadata: { name: 'sg-config', namespace: NS } },
    ],
    secrets: [],
    nodes: [node('node-a', 'zone-a'), node('node-b', 'zone-b'), node('node-c', 'zone-c')],
    operatorStatus: [
      {
        metadata: { name: STATUS_CONFIGMAP, namespace: NS },
        data: {
          ingester: JSON.stringify({
            group: 'ingester',
            namespace: NS,
            since: '2026-01-10T11:58:00.000Z',
            phase: 'waiting',
            rolling: b,
            waitingFor: {
              code: 'pods-terminating',
              statefulSet: b,
              message: 'waiting: 1 pod of ingester-zone-b terminating',
            },
            errors: [],
            statefulSets: [],
            timeline: {
              startedAt: '2026-01-10T11:50:00.000Z',
              zones: [
                {
                  statefulSet: 'ingester-zone-a',
                  startedAt: '2026-01-10T11:50:00.000Z',
                  finishedAt: '2026-01-10T11:55:00.000Z',
                  waits: [
                    {
                      code: 'updated-pods-not-ready',
                      message: 'waiting: all pods of ingester-zone-a are updated but 1 is not Ready',
                      since: '2026-01-10T11:51:00.000Z',
                      from: '2026-01-10T11:54:00.000Z',
                      until: '2026-01-10T11:55:00.000Z',
                      times: 3,
                      waitedMs: 90_000,
                    },
                  ],
                },
                { statefulSet: b, startedAt: '2026-01-10T11:55:00.000Z', waits: [] },
              ],
            },
          }),
        },
      } as KubeObject,
    ],
    unreadable: ['daemonsets'],
  };
}
