// 1. Labels and annotations on the wrong kind of metadata, or on the pod
// template instead of the StatefulSet.
import { parseGoDuration } from '../../runtime/go/duration.ts';
import { SCALING_ANNOTATION_KEYS, SCALING_LABEL_KEYS } from '../../downscale/coordination/validate.ts';
import { minTimeSetting } from '../../downscale/mintime.ts';
import {
  EVICT_ONDELETE_ANNOTATION,
  MAX_UNAVAILABLE_ANNOTATION,
  MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY,
  NO_DOWNSCALE_LABEL_KEY,
  PAUSED_ANNOTATION,
  RELOADER_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_EXCLUDE_ANNOTATION,
  RELOADER_CONFIGMAP_RELOAD_ANNOTATION,
  RELOADER_SEARCH_ANNOTATION,
  RELOADER_SECRET_AUTO_ANNOTATION,
  RELOADER_SECRET_EXCLUDE_ANNOTATION,
  RELOADER_SECRET_RELOAD_ANNOTATION,
  ROLLOUT_GROUP_LABEL,
  XING_ENABLED_ANNOTATION,
} from '../../vocabulary/keys.ts';
import { type Scope, type Finding, type Kind, has, kubectl, objectName, shellQuote } from './scope.ts';
import { annotationsOf, labelsOf } from '../../vocabulary/metadata.ts';

// ---------------------------------------------------- 1. labels vs annotations

const STATEFULSET_LABEL_KEYS: readonly string[] = SCALING_LABEL_KEYS;
const RELOADER_OPT_IN_KEYS: readonly string[] = [
  RELOADER_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_AUTO_ANNOTATION,
  RELOADER_SECRET_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_RELOAD_ANNOTATION,
  RELOADER_SECRET_RELOAD_ANNOTATION,
  RELOADER_SEARCH_ANNOTATION,
  RELOADER_CONFIGMAP_EXCLUDE_ANNOTATION,
  RELOADER_SECRET_EXCLUDE_ANNOTATION,
];
const STATEFULSET_ANNOTATION_KEYS: readonly string[] = [
  ...SCALING_ANNOTATION_KEYS,
  MAX_UNAVAILABLE_ANNOTATION,
  PAUSED_ANNOTATION,
  XING_ENABLED_ANNOTATION,
  EVICT_ONDELETE_ANNOTATION,
  ...RELOADER_OPT_IN_KEYS,
];

/**
 * Per kind: keys read only as labels, only as annotations, and as either
 * (the annotation first: min-time since rollout-operator v0.39, #463; the
 * label form is reported by checkMinTimeLabel, not as misplaced).
 */
const KEYS_BY_KIND: Record<
  Kind,
  { labels: readonly string[]; annotations: readonly string[]; either: readonly string[] }
> = {
  StatefulSet: {
    labels: STATEFULSET_LABEL_KEYS,
    annotations: STATEFULSET_ANNOTATION_KEYS,
    either: [MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY],
  },
  Deployment: {
    labels: [NO_DOWNSCALE_LABEL_KEY],
    annotations: [XING_ENABLED_ANNOTATION, ...RELOADER_OPT_IN_KEYS],
    either: [],
  },
  DaemonSet: {
    labels: [],
    annotations: [XING_ENABLED_ANNOTATION, EVICT_ONDELETE_ANNOTATION, ...RELOADER_OPT_IN_KEYS],
    either: [],
  },
};

/** Keys read only from the workload's own metadata, never from its pod template (Reloader's keys do fall back to the template). */
function metadataOnlyKeys(kind: Kind): string[] {
  const { labels, annotations, either } = KEYS_BY_KIND[kind];
  return [...labels, ...annotations, ...either].filter((k) => !RELOADER_OPT_IN_KEYS.includes(k));
}

/**
 * A key set as an annotation where Stateward (like rollout-operator) reads
 * only labels, or the reverse (rollout-operator #306: prepare-downscale and
 * min-time set as annotations, so prepare-shutdown was never called), or a
 * key on the pod template where only the workload's metadata is read.
 */
export function checkKeyPlacement(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const { kind, workload } of scope.workloads) {
    const labels = labelsOf(workload);
    const annotations = annotationsOf(workload);
    const object = objectName(kind, workload);
    const { labels: labelKeys, annotations: annotationKeys } = KEYS_BY_KIND[kind];

    // Each direction: keys read only as `read` (label or annotation) but found as the other.
    const directions = [
      {
        keys: labelKeys,
        read: { noun: 'label', map: labels, verb: 'label', field: 'metadata.labels' },
        found: { noun: 'annotation', map: annotations, verb: 'annotate' },
      },
      {
        keys: annotationKeys,
        read: { noun: 'annotation', map: annotations, verb: 'annotate', field: 'metadata.annotations' },
        found: { noun: 'label', map: labels, verb: 'label' },
      },
    ] as const;
    for (const { keys, read, found } of directions) {
      const article = (noun: string) => (noun === 'annotation' ? 'an annotation' : 'a label');
      for (const key of keys) {
        if (!has(found.map, key)) continue;
        const value = found.map[key]!;
        const both = has(read.map, key);
        findings.push({
          severity: both ? 'warning' : 'error',
          code: `key-should-be-${read.noun}`,
          object,
          problem: both
            ? `${key} is set both as ${article(read.noun)} and as ${article(found.noun)} (${JSON.stringify(value)}); only the ${read.noun} (${JSON.stringify(read.map[key])}) is read`
            : `${key}=${JSON.stringify(value)} is set as ${article(found.noun)}, but it is read only as ${article(read.noun)}, so it has no effect`,
          fix: both
            ? `remove the ${found.noun}: ${kubectl(workload, kind, found.verb, `${key}-`)}`
            : `move it to ${read.field}: ${kubectl(workload, kind, read.verb, `${key}=${shellQuote(value)}`)} && ${kubectl(workload, kind, found.verb, `${key}-`)}` +
              '; change the manifest too, or the next apply brings it back',
        });
      }
    }

    const template = workload.spec?.template?.metadata;
    const templateLabels = template?.labels ?? {};
    const templateAnnotations = template?.annotations ?? {};
    for (const key of metadataOnlyKeys(kind)) {
      const onTemplate = has(templateLabels, key) ? 'label' : has(templateAnnotations, key) ? 'annotation' : undefined;
      if (!onTemplate || has(labels, key) || has(annotations, key)) continue;
      const value = (onTemplate === 'label' ? templateLabels : templateAnnotations)[key]!;
      // Keys read from either place are suggested as annotations, the form not deprecated.
      const asLabel = labelKeys.includes(key);
      const fixVerb = asLabel ? 'label' : 'annotate';
      findings.push({
        // A rollout-group label on pods alone may be meant for a ZPDB selector only.
        severity: key === ROLLOUT_GROUP_LABEL ? 'warning' : 'error',
        code: 'key-on-pod-template',
        object,
        problem: `${key}=${JSON.stringify(value)} is set on the pod template (spec.template.metadata.${onTemplate}s) but not on the ${kind} itself, where it is read; it has no effect there`,
        fix:
          `set it on the ${kind}'s metadata.${asLabel ? 'labels' : 'annotations'}: ${kubectl(workload, kind, fixVerb, `${key}=${shellQuote(value)}`)}` +
          (key === ROLLOUT_GROUP_LABEL
            ? ' (if it is only there for a ZoneAwarePodDisruptionBudget selector, the budget needs it on the StatefulSet too)'
            : ''),
      });
    }
  }
  return findings;
}

/**
 * grafana.com/min-time-between-zones-downscale as a label: still read when no
 * annotation is set, but deprecated since rollout-operator v0.39 (#463), so a
 * warning (not an error: nothing is wrong yet) with the commands that move it;
 * beside an annotation, the label is ignored and the warning says so.
 */
export function checkMinTimeLabel(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const key = MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY;
  for (const sts of scope.statefulSets) {
    const label = labelsOf(sts)[key];
    const setting = minTimeSetting(sts);
    if (label === undefined || label === '' || setting === undefined) continue;
    const object = objectName('StatefulSet', sts);
    // rollout-operator before v0.39 reads only the label: a rollback to it would lose min-time.
    const before039 = 'rollout-operator before v0.39, which reads only the label';
    if (setting.from === 'annotation') {
      findings.push({
        severity: 'warning',
        code: 'min-time-label-ignored',
        object,
        problem: `${key} is set both as an annotation (${JSON.stringify(setting.value)}) and as a label (${JSON.stringify(label)}); the annotation is read and the label is ignored`,
        fix: `remove the label: ${kubectl(sts, 'StatefulSet', 'label', `${key}-`)} (or, while a rollback to ${before039} is possible, give it the annotation's value)`,
      });
      continue;
    }
    // An invalid label is an error of its own (invalid-min-time), whose fix moves it too.
    if (!isGoDuration(label)) continue;
    findings.push({
      severity: 'warning',
      code: 'min-time-label-deprecated',
      object,
      problem: `${key}=${JSON.stringify(label)} is set as a label: it is read (no annotation of that key is set), but the label form is deprecated since rollout-operator v0.39, which reads the annotation first`,
      fix: `move it to an annotation: ${kubectl(sts, 'StatefulSet', 'annotate', `${key}=${shellQuote(label)}`)} && ${kubectl(sts, 'StatefulSet', 'label', `${key}-`)}; change the manifest too, or the next apply brings the label back (while a rollback to ${before039} is possible, keep the label beside the annotation: the annotation wins)`,
    });
  }
  return findings;
}

function isGoDuration(value: string): boolean {
  try {
    parseGoDuration(value);
    return true;
  } catch {
    return false;
  }
}
