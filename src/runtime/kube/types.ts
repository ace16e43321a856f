// Object shapes as they travel over the wire. Stateward talks JSON to the API
// server and keeps that JSON as-is (watch events and list items alike), so
// timestamps are RFC 3339 strings, not the Date objects of client-node's
// typed deserialiser. Wire<T> turns a client-node model type into that shape.
import type {
  V1Lease,
  EventsV1Event,
  V1ConfigMap,
  V1Namespace,
  V1Node,
  V1Pod,
  V1Secret,
  V1StatefulSet,
  V1Status,
} from '@kubernetes/client-node';

export type Wire<T> = T extends Date
  ? string
  : T extends (infer U)[]
    ? Wire<U>[]
    : T extends object
      ? { [K in keyof T]: Wire<T[K]> }
      : T;

export type Pod = Wire<V1Pod>;
export type StatefulSet = Wire<V1StatefulSet>;
export type ConfigMap = Wire<V1ConfigMap>;
export type Secret = Wire<V1Secret>;
export type Node = Wire<V1Node>;
export type Namespace = Wire<V1Namespace>;
export type Lease = Wire<V1Lease>;
export type Event = Wire<EventsV1Event>;
export type Status = Wire<V1Status>;

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
  deletionTimestamp?: string;
  creationTimestamp?: string;
  managedFields?: unknown[];
  [key: string]: unknown;
}

/** Any Kubernetes object: what informers and the generic client handle. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

export interface ObjectList<T extends KubeObject = KubeObject> {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  items: T[];
}

/** Where a kind of resource lives in the API. */
export interface ResourceType {
  /** "" for the core group. */
  group: string;
  version: string;
  /** Plural resource name, as in the URL. */
  resource: string;
  kind: string;
  namespaced: boolean;
}

export function apiVersionOf(type: ResourceType): string {
  return type.group ? `${type.group}/${type.version}` : type.version;
}

export const resources = {
  pods: { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true },
  configMaps: { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true },
  secrets: { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true },
  nodes: { group: '', version: 'v1', resource: 'nodes', kind: 'Node', namespaced: false },
  namespaces: { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false },
  serviceAccounts: { group: '', version: 'v1', resource: 'serviceaccounts', kind: 'ServiceAccount', namespaced: true },
  statefulSets: { group: 'apps', version: 'v1', resource: 'statefulsets', kind: 'StatefulSet', namespaced: true },
  deployments: { group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment', namespaced: true },
  daemonSets: { group: 'apps', version: 'v1', resource: 'daemonsets', kind: 'DaemonSet', namespaced: true },
  leases: { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease', namespaced: true },
  events: { group: 'events.k8s.io', version: 'v1', resource: 'events', kind: 'Event', namespaced: true },
  replicaSets: { group: 'apps', version: 'v1', resource: 'replicasets', kind: 'ReplicaSet', namespaced: true },
  validatingWebhookConfigurations: {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    resource: 'validatingwebhookconfigurations',
    kind: 'ValidatingWebhookConfiguration',
    namespaced: false,
  },
  mutatingWebhookConfigurations: {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    resource: 'mutatingwebhookconfigurations',
    kind: 'MutatingWebhookConfiguration',
    namespaced: false,
  },
} as const satisfies Record<string, ResourceType>;
