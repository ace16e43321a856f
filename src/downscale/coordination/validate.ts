// Warnings about scaling metadata rollout-operator would silently ignore or only
// log: a label key set as an annotation (or the reverse), and values that do
// not parse. Issue #306: prepare-shutdown was never called because the user
// set grafana.com/prepare-downscale and min-time-between-zones-downscale as
// annotations, and nothing said so. (rollout-operator v0.39 reads min-time
// from the annotation first, #463, and so does Stateward now.)
import type { StatefulSet } from '../../runtime/kube/types.ts';
import { parseGoDuration, parsePromDuration } from '../../runtime/go/duration.ts';
import { parseRfc3339 } from '../../vocabulary/rfc3339.ts';
import { parseGoBool } from '../../runtime/go/strconv.ts';
import { quoteValue } from '../../runtime/log/logger.ts';
import { forceReplicasOverride } from './scalingfields.ts';
import { annotationsOf, labelsOf, nameOf } from '../../vocabulary/metadata.ts';
import { delayedDownscaleConfig } from './delay.ts';
import { mirrorReference } from './mirror.ts';
import { minTimeSetting } from '../mintime.ts';
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
  MIRROR_WRITE_BACK_ANNOTATION_KEY,
  NO_DOWNSCALE_LABEL_KEY,
  PREPARE_DOWNSCALE_LABEL_KEY,
  PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY,
  PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY,
  ROLLOUT_GROUP_LABEL,
  UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY,
} from '../../vocabulary/keys.ts';

/**
 * Keys rollout-operator reads only from metadata.labels. Not
 * grafana.com/min-time-between-zones-downscale: since v0.39 it is read from
 * either, the annotation first (minTimeSetting).
 */
export const SCALING_LABEL_KEYS: readonly string[] = [
  ROLLOUT_GROUP_LABEL,
  PREPARE_DOWNSCALE_LABEL_KEY,
  NO_DOWNSCALE_LABEL_KEY,
];

/** Keys rollout-operator reads only from metadata.annotations. */
export const SCALING_ANNOTATION_KEYS: readonly string[] = [
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY,
  LAST_DOWNSCALE_ANNOTATION_KEY,
  FORCE_REPLICAS_ANNOTATION_KEY,
  MIRROR_NAME_ANNOTATION_KEY,
  MIRROR_KIND_ANNOTATION_KEY,
  MIRROR_API_VERSION_ANNOTATION_KEY,
  MIRROR_WRITE_BACK_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_URL_ANNOTATION_KEY,
  PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY,
  PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY,
];

// Keys whose only effective value is exactly "true" (anything else is off).
const EXACTLY_TRUE: readonly { key: string; where: 'label' | 'annotation' }[] = [
  { key: PREPARE_DOWNSCALE_LABEL_KEY, where: 'label' },
  { key: NO_DOWNSCALE_LABEL_KEY, where: 'label' },
  { key: UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY, where: 'annotation' },
];

/** One StatefulSet's name and metadata, as the checks below read them. */
interface ScalingMetadata {
  sts: StatefulSet;
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** Human-readable warnings about one StatefulSet's scaling labels and annotations; [] when all is well. */
export function validateScalingMetadata(sts: StatefulSet): string[] {
  const metadata: ScalingMetadata = { sts, name: nameOf(sts), labels: labelsOf(sts), annotations: annotationsOf(sts) };
  return [
    ...misplacedKeyWarnings(metadata),
    ...exactlyTrueWarnings(metadata),
    ...minTimeWarnings(metadata),
    ...lastDownscaleWarnings(metadata),
    ...forceReplicasWarnings(metadata),
    ...mirrorWarnings(metadata),
    ...delayedDownscaleWarnings(metadata),
  ];
}

/** Label keys set as annotations, and annotation keys set as labels. */
function misplacedKeyWarnings({ name, labels, annotations }: ScalingMetadata): string[] {
  const warnings: string[] = [];
  const misplaced = (
    key: string,
    is: 'label' | 'annotation',
    mustBe: 'label' | 'annotation',
    other: Record<string, string>,
  ) =>
    `${name}: ${key} is set as ${is === 'label' ? 'a' : 'an'} ${is} but is only read as ${mustBe === 'label' ? 'a' : 'an'} ${mustBe}; ` +
    (key in other ? `the ${is} is ignored` : `it has no effect until it is moved to metadata.${mustBe}s`);

  for (const key of SCALING_LABEL_KEYS) {
    if (key in annotations) warnings.push(misplaced(key, 'annotation', 'label', labels));
  }
  for (const key of SCALING_ANNOTATION_KEYS) {
    if (key in labels) warnings.push(misplaced(key, 'label', 'annotation', annotations));
  }
  return warnings;
}

/** "True" or "TRUE" where only "true" switches the feature on. */
function exactlyTrueWarnings({ name, labels, annotations }: ScalingMetadata): string[] {
  const warnings: string[] = [];
  for (const { key, where } of EXACTLY_TRUE) {
    const value = (where === 'label' ? labels : annotations)[key];
    if (value !== undefined && value !== 'true' && value.toLowerCase() === 'true') {
      warnings.push(
        `${name}: ${where} ${key}=${quoteValue(value)} is treated as false; only "true" (lower case) enables it`,
      );
    }
  }
  return warnings;
}

/**
 * The min-time between zone downscales as minTimeSetting reads it: a value
 * that is not a Go duration (the group's downscales are then refused), an
 * empty one (not read), and a label that an annotation overrides. The label
 * form alone is deprecated but valid: logged once by the capability and
 * reported by the doctor, not warned about on every pass here.
 */
function minTimeWarnings({ sts, name, labels, annotations }: ScalingMetadata): string[] {
  const warnings: string[] = [];
  const key = MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY;
  const setting = minTimeSetting(sts);
  if (setting !== undefined) {
    try {
      parseGoDuration(setting.value);
    } catch (error) {
      warnings.push(
        `${name}: ${setting.from} ${key}=${quoteValue(setting.value)} is not a Go duration (e.g. 12h, 30m): ${String(error instanceof Error ? error.message : error)}`,
      );
    }
  }
  if (setting?.ignoredLabel !== undefined) {
    warnings.push(
      `${name}: ${key} is set both as an annotation (${quoteValue(setting.value)}) and as a label (${quoteValue(setting.ignoredLabel)}); the annotation is read and the label is ignored`,
    );
  }
  if (annotations[key] === '') {
    warnings.push(
      `${name}: annotation ${key} is empty, so it is not read; ${setting === undefined ? 'no minimum time between zone downscales applies' : `the label (${quoteValue(setting.value)}) is read instead`}`,
    );
  }
  if (labels[key] === '' && setting === undefined) {
    warnings.push(`${name}: label ${key} is empty, so no minimum time between zone downscales applies`);
  }
  return warnings;
}

/** A last-downscale annotation that does not parse. */
function lastDownscaleWarnings({ name, annotations }: ScalingMetadata): string[] {
  const last = annotations[LAST_DOWNSCALE_ANNOTATION_KEY];
  if (last === undefined) return [];
  const parsed = parseRfc3339(last);
  if (typeof parsed === 'number') return [];
  return [
    `${name}: annotation ${LAST_DOWNSCALE_ANNOTATION_KEY} does not parse, so downscales in its group fail: ${parsed.error}`,
  ];
}

/** A force-replicas value that does not parse, or that is set where it does not apply. */
function forceReplicasWarnings({ sts, name, annotations }: ScalingMetadata): string[] {
  const warnings: string[] = [];
  const force = forceReplicasOverride(sts);
  if (force !== undefined && 'warning' in force) warnings.push(force.warning);
  if (
    force !== undefined &&
    'replicas' in force &&
    annotations[DOWNSCALE_LEADER_ANNOTATION_KEY] === undefined &&
    mirrorReference(sts) === undefined
  ) {
    warnings.push(
      `${name}: ${FORCE_REPLICAS_ANNOTATION_KEY} has no effect: it applies only to followers (${DOWNSCALE_LEADER_ANNOTATION_KEY}) and mirrors`,
    );
  }
  return warnings;
}

/** A mirror reference that does not parse, and a write-back value that is not a boolean. */
function mirrorWarnings({ sts, name, annotations }: ScalingMetadata): string[] {
  const warnings: string[] = [];
  const mirror = mirrorReference(sts);
  if (mirror !== undefined && 'error' in mirror) warnings.push(`${name}: ${mirror.error}`);
  const writeBackValue = annotations[MIRROR_WRITE_BACK_ANNOTATION_KEY];
  if (writeBackValue !== undefined) {
    try {
      parseGoBool(writeBackValue);
    } catch {
      warnings.push(
        `${name}: annotation ${MIRROR_WRITE_BACK_ANNOTATION_KEY}=${quoteValue(writeBackValue)} is not a boolean, so write-back is off`,
      );
    }
  }
  return warnings;
}

/** Delayed-downscale annotations that turn it off: unparsable, only one of the two set, or a delay of 0. */
function delayedDownscaleWarnings({ sts, name, annotations }: ScalingMetadata): string[] {
  const warnings: string[] = [];
  const delayed = delayedDownscaleConfig(sts);
  if (delayed !== undefined && 'error' in delayed) warnings.push(`${name}: ${delayed.error}`);
  const delayText = annotations[DELAYED_DOWNSCALE_ANNOTATION_KEY] ?? '';
  const urlText = annotations[DELAYED_DOWNSCALE_URL_ANNOTATION_KEY] ?? '';
  if ((delayText === '') !== (urlText === '')) {
    const [set, missing] =
      delayText === ''
        ? [DELAYED_DOWNSCALE_URL_ANNOTATION_KEY, DELAYED_DOWNSCALE_ANNOTATION_KEY]
        : [DELAYED_DOWNSCALE_ANNOTATION_KEY, DELAYED_DOWNSCALE_URL_ANNOTATION_KEY];
    warnings.push(`${name}: ${set} is set without ${missing}, so delayed downscale is off`);
  } else if (delayText !== '' && delayed === undefined) {
    try {
      if (parsePromDuration(delayText) === 0)
        warnings.push(`${name}: ${DELAYED_DOWNSCALE_ANNOTATION_KEY} is 0, so delayed downscale is off`);
    } catch {
      // reported above
    }
  }
  return warnings;
}
