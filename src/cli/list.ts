// Listing for the command-line tools, with the caller's own credentials: a
// list the caller may not read (403) is not a failure but a part of the
// report left out, named in the result; an optional resource (a CRD that may
// not be installed) that is not found (404) has no objects. Anything else
// throws a CliError worded for the person at the terminal.
import type { KubeClient } from '../runtime/kube/client.ts';
import { isForbidden, isNotFound, KubeApiError } from '../runtime/kube/errors.ts';
import type { KubeObject, ResourceType } from '../runtime/kube/types.ts';
import { CliError } from './clikubeconfig.ts';

/** The objects, or why there are none to show: the list is forbidden. */
export type Listed<T> = { items: T[] } | { forbidden: true; message: string };

export interface CliListOptions {
  /** For a namespaced resource, the namespace to list (none: every namespace); ignored for a cluster-scoped one. */
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  /** Ask for metadata only (PartialObjectMetadataList): Secret values, for one, never leave the API server. */
  metadataOnly?: boolean | undefined;
  /** A 404 means none: the resource's CRD is not installed. */
  optional?: boolean | undefined;
  /** What the caller leaves out when the list is forbidden, for the message. */
  without?: string | undefined;
  signal?: AbortSignal | undefined;
}

const PAGE = 500;

/** `statefulsets.apps`, as RBAC rules and kubectl name it. */
export function resourceName(type: ResourceType): string {
  return type.group ? `${type.resource}.${type.group}` : type.resource;
}

function scope(namespace: string | undefined): string {
  return namespace === undefined ? 'cluster-wide' : `in namespace ${namespace}`;
}

/**
 * A failed API request as one line: an unreachable API server or refused
 * credentials say so whatever the request was; anything else names `action`
 * ("list pods in namespace x", "get namespaces/x").
 */
export function requestFailure(client: KubeClient, action: string, error: unknown): CliError {
  if (!(error instanceof KubeApiError))
    return new CliError(`cannot ${action}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  if (error.code === 0)
    return new CliError(
      `cannot reach the Kubernetes API at ${client.serverUrl}: ${error.reason}: ${error.statusMessage}`,
      { cause: error },
    );
  if (error.code === 401)
    return new CliError(
      `the Kubernetes API at ${client.serverUrl} refused the credentials (401 Unauthorized): check the kubeconfig's user`,
      { cause: error },
    );
  return new CliError(`cannot ${action}: ${error.code} ${error.reason}: ${error.statusMessage}`, { cause: error });
}

/** Every object of `type`, page by page (a metadata-only list with nothing in it has "items": null). */
export async function listAll<T extends KubeObject>(
  client: KubeClient,
  type: ResourceType,
  options: CliListOptions = {},
): Promise<Listed<T>> {
  const namespace = type.namespaced ? options.namespace : undefined;
  const items: T[] = [];
  let token: string | undefined;
  try {
    do {
      const page = await client.list<T>(type, {
        namespace,
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
        metadataOnly: options.metadataOnly,
        signal: options.signal,
        limit: PAGE,
        continue: token,
      });
      items.push(...(page.items ?? []));
      token = page.metadata?.continue || undefined;
    } while (token);
  } catch (error) {
    const name = resourceName(type);
    if (isForbidden(error)) {
      return {
        forbidden: true,
        message: `forbidden to list ${name} ${scope(namespace)} (missing permission: list ${name})${options.without ? `; ${options.without}` : ''}`,
      };
    }
    if (options.optional && isNotFound(error)) return { items: [] };
    throw requestFailure(client, `list ${name} ${scope(namespace)}`, error);
  }
  return { items };
}
