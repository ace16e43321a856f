// 1. Labels and annotations on the wrong kind of metadata, or on the pod
// template instead of the StatefulSet.
import type {} from '../../runtime/kube/types.ts';
import { parseGoDuration } from '../../runtime/go/duration.ts';
import { SCALING_ANNOTATION_KEYS, SCALING_LABEL_KEYS } from '../../downscale/coordination/validate.ts';
import {
  EVICT_ONDELETE_ANNOTATION,
  MAX_UNAVAILABLE_ANNOTATION,
  MIN_TIME_BETWEEN_ZONES_DOWNSCALE_LABEL_KEY,
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

const KEYS_BY_KIND: Record<Kind, { labels: readonly string[]; annotations: readonly string[] }> = {
  StatefulSet: { labels: STATEFULSET_LABEL_KEYS, annotations: STATEFULSET_ANNOTATION_KEYS },
  Deployment: { labels: [NO_DOWNSCALE_LABEL_KEY], annotations: [XING_ENABLED_ANNOTATION, ...RELOADER_OPT_IN_KEYS] },
  DaemonSet: { labels: [], annotations: [XING_ENABLED_ANNOTATION, EVICT_ONDELETE_ANNOTATION, ...RELOADER_OPT_IN_KEYS] },
};

/** Keys read only from the workload's own metadata, never from its pod template (Reloader's keys do fall back to the template). */
function metadataOnlyKeys(kind: Kind): string[] {
  const { labels, annotations } = KEYS_BY_KIND[kind];
  return [...labels, ...annotations].filter((k) => !RELOADER_OPT_IN_KEYS.includes(k));
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
        const bad =
          key === MIN_TIME_BETWEEN_ZONES_DOWNSCALE_LABEL_KEY && read.noun === 'label'
            ? goDurationProblem(value)
            : undefined;
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
              (bad ? ` (and correct the value first: ${bad})` : '') +
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

function goDurationProblem(value: string): string | undefined {
  try {
    parseGoDuration(value);
    return undefined;
  } catch (error) {
    return `${JSON.stringify(value)} is not a Go duration such as 12h or 30m (${error instanceof Error ? error.message : String(error)})`;
  }
}
