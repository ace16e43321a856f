// Reading the StatefulSet fields and annotations that drive replica scaling
// (follow-leader, mirror-resource, delayed downscale, force-replicas). The keys
// themselves, with rollout-operator's exact names, are in vocabulary/keys.ts,
// and plain metadata accessors in vocabulary/metadata.ts.
import type { StatefulSet } from '../../runtime/kube/types.ts';

import { quoteValue } from '../../runtime/log/logger.ts';
import {
  DELAYED_DOWNSCALE_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_URL_ANNOTATION_KEY,
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  FORCE_REPLICAS_ANNOTATION_KEY,
  LAST_DOWNSCALE_ANNOTATION_KEY,
  MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY,
  MIRROR_API_VERSION_ANNOTATION_KEY,
  MIRROR_KIND_ANNOTATION_KEY,
  MIRROR_NAME_ANNOTATION_KEY,
  UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY,
} from '../../vocabulary/keys.ts';
import { annotationsOf, labelsOf, nameOf } from '../../vocabulary/metadata.ts';

/**
 * The keys (labels or annotations) that make replica coordination act on a
 * StatefulSet. Their values are judged by the coordinator (a bad one is a
 * warning there); here only their presence counts.
 */
const COORDINATION_KEYS = [
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY,
  FORCE_REPLICAS_ANNOTATION_KEY,
  MIRROR_NAME_ANNOTATION_KEY,
  MIRROR_KIND_ANNOTATION_KEY,
  MIRROR_API_VERSION_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_URL_ANNOTATION_KEY,
  LAST_DOWNSCALE_ANNOTATION_KEY,
  MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY,
];

/**
 * Whether replica coordination has anything to do with this StatefulSet:
 * its replicas may then follow a leader, a reference resource's scale (read,
 * not watched), a clock or pods' answers, none of which is an event of the
 * StatefulSet itself.
 */
export function coordinatesReplicas(sts: StatefulSet): boolean {
  const annotations = annotationsOf(sts);
  const labels = labelsOf(sts);
  return COORDINATION_KEYS.some((key) => Object.hasOwn(annotations, key) || Object.hasOwn(labels, key));
}

/** spec.replicas; the API server defaults a missing value to 1. */
export function replicasOf(sts: StatefulSet): number {
  return sts.spec?.replicas ?? 1;
}

const INT32_MAX = 2 ** 31 - 1;

/**
 * strconv.ParseInt(s, 10, 32): an optional sign and decimal digits, within
 * int32. Returns undefined when Go would return an error.
 */
export function parseInt32(s: string): number | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = Number(s);
  if (n > INT32_MAX || n < -INT32_MAX - 1) return undefined;
  return n === 0 ? 0 : n; // no -0
}

export type ForceReplicas = { replicas: number } | { warning: string } | undefined;

/**
 * grafana.com/rollout-force-replicas: an int32 ≥ 0. Absent → undefined;
 * invalid or negative → a warning (rollout-operator ignores it silently, and so do
 * we, but we say so).
 */
export function forceReplicasOverride(sts: StatefulSet): ForceReplicas {
  const raw = annotationsOf(sts)[FORCE_REPLICAS_ANNOTATION_KEY];
  if (raw === undefined) return undefined;
  const n = parseInt32(raw);
  if (n === undefined)
    return {
      warning: `ignoring ${FORCE_REPLICAS_ANNOTATION_KEY}=${quoteValue(raw)} on ${nameOf(sts)}: not a 32-bit integer`,
    };
  if (n < 0)
    return {
      warning: `ignoring ${FORCE_REPLICAS_ANNOTATION_KEY}=${quoteValue(raw)} on ${nameOf(sts)}: must not be negative`,
    };
  return { replicas: n };
}
