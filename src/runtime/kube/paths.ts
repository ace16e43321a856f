// URL paths of the Kubernetes API, and the two ways Stateward names a path
// for rate limiting and for metrics.
import { apiVersionOf, type ResourceType } from './types.ts';

export interface ObjectPath {
  namespace?: string;
  name?: string;
  subresource?: string;
}

export function resourcePath(type: ResourceType, where: ObjectPath = {}): string {
  const base = type.group ? `/apis/${type.group}/${type.version}` : `/api/${type.version}`;
  if (type.namespaced && where.name !== undefined && !where.namespace) {
    throw new Error(`${type.kind} ${where.name}: a namespaced object needs a namespace`);
  }
  const ns = type.namespaced && where.namespace ? `/namespaces/${encodeURIComponent(where.namespace)}` : '';
  const name = where.name !== undefined ? `/${encodeURIComponent(where.name)}` : '';
  const sub = where.subresource && where.name !== undefined ? `/${where.subresource}` : '';
  return `${base}${ns}/${type.resource}${name}${sub}`;
}

/**
 * The API group a request path belongs to, for per-group rate limiting as
 * rollout-operator does it: /api/… is "core", /apis/<group>/… is the group,
 * anything else is "/<first segment>".
 */
export function apiGroupOfPath(path: string): string {
  const segments = path.split('?')[0]!.split('/').filter(Boolean);
  if (segments[0] === 'api') return 'core';
  if (segments[0] === 'apis') return segments[1] ?? 'apis';
  return `/${segments[0] ?? ''}`;
}

/**
 * A low-cardinality description of a request path for metric labels, in
 * rollout-operator's style: "apps/v1/statefulsets object status subresource",
 * "core/v1/pods collection". Names and namespaces never appear.
 */
export function describePath(path: string): string {
  const segments = path.split('?')[0]!.split('/').filter(Boolean);
  let group: string;
  let rest: string[];
  if (segments[0] === 'api' && segments[1]) {
    group = `core/${segments[1]}`;
    rest = segments.slice(2);
  } else if (segments[0] === 'apis' && segments[1] && segments[2]) {
    group = `${segments[1]}/${segments[2]}`;
    rest = segments.slice(3);
  } else {
    return `/${segments[0] ?? ''}`;
  }
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  const [resource, name, subresource] = rest;
  if (!resource) return group;
  if (name === undefined) return `${group}/${resource} collection`;
  return subresource ? `${group}/${resource} object ${subresource} subresource` : `${group}/${resource} object`;
}

export function typeLabel(type: ResourceType): string {
  return `${apiVersionOf(type)}/${type.resource}`;
}

/** What RBAC would have to grant for a request: a rule's verb, API group and resource, and where. */
export interface RequestPermission {
  verb: string;
  /** "" for the core group, as RBAC rules write it. */
  apiGroup: string;
  /** With its subresource: "statefulsets/status", "pods/eviction". */
  resource: string;
  /** "" for a cluster-scoped resource or a request across namespaces. */
  namespace: string;
}

const VERBS: Record<string, [object: string, collection: string]> = {
  GET: ['get', 'list'],
  POST: ['create', 'create'],
  PUT: ['update', 'update'],
  PATCH: ['patch', 'patch'],
  DELETE: ['delete', 'deletecollection'],
};

/**
 * The permission a resource request needs (a refused one: the rule to add),
 * from its method and path as the authorizer reads them; undefined for a
 * path that names no resource (/version, /openapi, …). Names never appear:
 * a rule restricted to resourceNames is still named by its verb and resource.
 */
export function permissionOf(method: string, path: string, watch = false): RequestPermission | undefined {
  const segments = path.split('?')[0]!.split('/').filter(Boolean).map(decodeURIComponent);
  let apiGroup: string;
  let rest: string[];
  if (segments[0] === 'api' && segments[1]) [apiGroup, rest] = ['', segments.slice(2)];
  else if (segments[0] === 'apis' && segments[1] && segments[2]) [apiGroup, rest] = [segments[1], segments.slice(3)];
  else return undefined;
  let namespace = '';
  if (rest[0] === 'namespaces' && rest.length >= 3) [namespace, rest] = [rest[1]!, rest.slice(2)];
  const [resource, name, subresource] = rest;
  const verbs = VERBS[method.toUpperCase()];
  if (!resource || !verbs) return undefined;
  const verb = name === undefined ? (watch ? 'watch' : verbs[1]) : verbs[0];
  return { verb, apiGroup, resource: subresource ? `${resource}/${subresource}` : resource, namespace };
}
