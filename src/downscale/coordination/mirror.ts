// Mirror-resource mode, pure parts (rollout-operator's
// pkg/controller/custom_resource_replicas.go): which resource a StatefulSet
// mirrors, the replicas it should have, and whether to write them back to
// the resource's status.replicas. The executor resolves the reference
// (RESTMapper + /scale) and applies the result.
import type { StatefulSet } from '../../runtime/kube/types.ts';
import { parseGoBool } from '../../runtime/go/strconv.ts';
import { forceReplicasOverride, replicasOf } from './scalingfields.ts';
import { annotationsOf, nameOf } from '../../vocabulary/metadata.ts';
import {
  MIRROR_API_VERSION_ANNOTATION_KEY,
  MIRROR_KIND_ANNOTATION_KEY,
  MIRROR_NAME_ANNOTATION_KEY,
} from '../../vocabulary/keys.ts';

export interface MirrorReference {
  name: string;
  kind: string;
  /** The annotation as written ("" when absent). */
  apiVersion: string;
  /** "" is the core group, as schema.ParseGroupVersion gives for "" or "v1". */
  group: string;
  version: string;
}

/**
 * schema.ParseGroupVersion: "" → core/"", "v1" → core/v1, "g/v" → g/v;
 * more than one slash is an error.
 */
export function parseGroupVersion(apiVersion: string): { group: string; version: string } | { error: string } {
  if (apiVersion === '' || apiVersion === '/') return { group: '', version: '' };
  const parts = apiVersion.split('/');
  if (parts.length === 1) return { group: '', version: apiVersion };
  if (parts.length === 2) return { group: parts[0]!, version: parts[1]! };
  return { error: `unexpected GroupVersion string: ${apiVersion}` };
}

/**
 * The resource a StatefulSet mirrors. Undefined when neither the name nor
 * the kind annotation is set (not in mirror mode). Name and kind are both
 * needed: where rollout-operator silently skips a StatefulSet with only one of
 * them, this reports it. The group comes only from the api-version
 * annotation, so for a custom resource it is effectively required.
 */
export function mirrorReference(sts: StatefulSet): MirrorReference | undefined | { error: string } {
  const annotations = annotationsOf(sts);
  const name = annotations[MIRROR_NAME_ANNOTATION_KEY] ?? '';
  const kind = annotations[MIRROR_KIND_ANNOTATION_KEY] ?? '';
  const apiVersion = annotations[MIRROR_API_VERSION_ANNOTATION_KEY] ?? '';
  if (name === '' && kind === '') return undefined;
  if (name === '')
    return {
      error: `${nameOf(sts)} has ${MIRROR_KIND_ANNOTATION_KEY} but no ${MIRROR_NAME_ANNOTATION_KEY}; both are needed to mirror replicas`,
    };
  if (kind === '')
    return {
      error: `${nameOf(sts)} has ${MIRROR_NAME_ANNOTATION_KEY} but no ${MIRROR_KIND_ANNOTATION_KEY}; both are needed to mirror replicas`,
    };
  const gv = parseGroupVersion(apiVersion);
  if ('error' in gv) return { error: `${MIRROR_API_VERSION_ANNOTATION_KEY} of ${nameOf(sts)}: ${gv.error}` };
  return { name, kind, apiVersion, ...gv };
}

/**
 * grafana.com/rollout-mirror-replicas-from-resource-write-back, read with
 * strconv.ParseBool: absent or true → write back; "false" or anything
 * unparsable → do not.
 */
export function writeBack(annotation: string | undefined): boolean {
  if (annotation === undefined) return true;
  try {
    return parseGoBool(annotation);
  } catch {
    return false;
  }
}

export interface MirrorTarget {
  current: number;
  /** What the StatefulSet should have; a downscale still goes through delayed downscale (delay.ts). */
  target: number;
  action: 'in-sync' | 'scale-up' | 'scale-down';
  reason: string;
  warning?: string;
}

/**
 * The replicas a mirroring StatefulSet should have: the reference's
 * scale.spec.replicas, replaced by force-replicas when valid. `forceReplicas`
 * overrides reading the annotation (e.g. when the caller already parsed it).
 */
export function mirrorTarget(input: {
  sts: StatefulSet;
  referenceReplicas: number;
  forceReplicas?: number;
}): MirrorTarget {
  const { sts, referenceReplicas } = input;
  const current = replicasOf(sts);
  const force = input.forceReplicas !== undefined ? { replicas: input.forceReplicas } : forceReplicasOverride(sts);
  const warning = force !== undefined && 'warning' in force ? { warning: force.warning } : {};
  const forced = force !== undefined && 'replicas' in force;
  const target = forced ? force.replicas : referenceReplicas;
  const source = forced ? `force-replicas ${target}` : `reference resource replicas ${referenceReplicas}`;
  const action = target === current ? 'in-sync' : target > current ? 'scale-up' : 'scale-down';
  const reason =
    action === 'in-sync' ? `${nameOf(sts)} matches ${source}` : `${nameOf(sts)} has ${current} replicas, ${source}`;
  return { current, target, action, reason, ...warning };
}
