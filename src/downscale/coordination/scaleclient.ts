// Reads and writes the scale of any resource that has a scale subresource,
// found through API discovery (the kind named in an annotation → its plural
// resource), as client-go's RESTMapper + scale client do for rollout-operator.
import type { KubeClient } from '../../runtime/kube/client.ts';
import type { KubeObject, ResourceType } from '../../runtime/kube/types.ts';

export interface ScaleRef {
  /** "group/version", or "v1" for the core group. */
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

export interface Scale {
  spec?: { replicas?: number };
  status?: { replicas?: number; selector?: string };
}

interface ApiResourceList {
  resources?: { name: string; kind: string; namespaced: boolean }[];
}

export class ScaleClient {
  private readonly client: KubeClient;
  /** apiVersion/kind → resource type with a scale subresource, or an error text. */
  private readonly mapping = new Map<string, ResourceType | string>();

  constructor(client: KubeClient) {
    this.client = client;
  }

  /** The resource type for apiVersion+kind, if it exists and has a scale subresource. */
  async resolve(apiVersion: string, kind: string, signal?: AbortSignal): Promise<ResourceType> {
    const key = `${apiVersion}/${kind}`;
    const cached = this.mapping.get(key);
    if (typeof cached === 'object') return cached;
    const [group, version] = apiVersion.includes('/')
      ? (apiVersion.split('/', 2) as [string, string])
      : ['', apiVersion || 'v1'];
    const path = group ? `/apis/${group}/${version}` : `/api/${version}`;
    let list: ApiResourceList;
    try {
      list = await this.client.request<ApiResourceList>('GET', path, {
        ...(signal ? { signal } : {}),
        timeoutMs: 10_000,
      });
    } catch (error) {
      throw new Error(
        `API ${apiVersion || 'v1'} is not served (${error instanceof Error ? error.message : String(error)})`,
        { cause: error },
      );
    }
    const resource = list.resources?.find((r) => r.kind === kind && !r.name.includes('/'));
    if (!resource) throw new Error(`no resource of kind ${kind} in ${apiVersion || 'v1'}`);
    if (!list.resources?.some((r) => r.name === `${resource.name}/scale`))
      throw new Error(`${kind} (${resource.name}) has no scale subresource`);
    const type: ResourceType = { group, version, resource: resource.name, kind, namespaced: resource.namespaced };
    this.mapping.set(key, type);
    return type;
  }

  async getScale(ref: ScaleRef, signal?: AbortSignal): Promise<Scale> {
    const type = await this.resolve(ref.apiVersion, ref.kind, signal);
    return this.client.get<Scale & KubeObject>(
      type,
      { namespace: ref.namespace, name: ref.name, subresource: 'scale' },
      signal ? { signal } : {},
    );
  }

  /** Writes status.replicas of the reference resource (a merge patch of its status subresource). */
  async writeBackStatusReplicas(ref: ScaleRef, replicas: number, signal?: AbortSignal): Promise<void> {
    const type = await this.resolve(ref.apiVersion, ref.kind, signal);
    await this.client.patch(
      type,
      { namespace: ref.namespace, name: ref.name, subresource: 'status' },
      'merge',
      { status: { replicas } },
      signal ? { signal } : {},
    );
  }
}
