// The replicas an admission request's object asks for, read the way
// rollout-operator's Go decoder reads them: used by the no-downscale and
// prepare-downscale webhooks alike.

type Decoded = { apiVersion: string; kind: string; object: Record<string, unknown> } | { error: string };

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What Go's universal deserializer checks before it can pick a type: an object with apiVersion and kind. */
export function decode(obj: unknown): Decoded {
  if (!isRecord(obj))
    return { error: obj === undefined || obj === null ? 'object is missing' : 'object is not a JSON object' };
  const { apiVersion, kind } = obj;
  if (typeof kind !== 'string' || kind === '') return { error: "Object 'Kind' is missing" };
  if (typeof apiVersion !== 'string' || apiVersion === '') return { error: "Object 'apiVersion' is missing" };
  return { apiVersion, kind, object: obj };
}

const WORKLOAD_KINDS: readonly string[] = ['Deployment', 'StatefulSet', 'ReplicaSet'];
const INT32_MAX = 2 ** 31 - 1;

function isInt32(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= -(INT32_MAX + 1) && value <= INT32_MAX;
}

/** A value for a message, its JSON cut to 64 characters; never throws (JSON.stringify does on deep nesting). */
function shortJson(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch {
    text = Array.isArray(value) ? '[…]' : '{…}';
  }
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

/**
 * The replicas of an apps/v1 Deployment, StatefulSet or ReplicaSet
 * (`spec.replicas`: undefined when absent, null when null) or of an
 * autoscaling/v1 Scale (`spec.replicas`, 0 when absent, as Go decodes it).
 * Anything else, or a malformed spec, is an error.
 */
export function replicasOf(obj: unknown): { kind: string; replicas: number | undefined | null } | { error: string } {
  const decoded = decode(obj);
  if ('error' in decoded) return decoded;
  const { apiVersion, kind, object } = decoded;
  const workload = apiVersion === 'apps/v1' && WORKLOAD_KINDS.includes(kind);
  const scale = apiVersion === 'autoscaling/v1' && kind === 'Scale';
  if (!workload && !scale) {
    return { error: `unsupported type ${apiVersion.includes('/') ? apiVersion : `/${apiVersion}`}, Kind=${kind}` };
  }
  const spec = object.spec;
  if (spec !== undefined && spec !== null && !isRecord(spec)) return { error: `${kind} spec is not an object` };
  const replicas = spec?.replicas;
  if (replicas === undefined || replicas === null) return { kind, replicas: scale ? 0 : replicas };
  if (!isInt32(replicas)) return { error: `${kind} spec.replicas is not a 32-bit integer: ${shortJson(replicas)}` };
  return { kind, replicas };
}
