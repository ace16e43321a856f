// 4. Values the operator would refuse or ignore, judged by its own parsers.
import type { StatefulSet } from '../../runtime/kube/types.ts';
import { parseMaxUnavailable } from '../../rollout/annotations.ts';
import {
  SCALING_ANNOTATION_KEYS,
  SCALING_LABEL_KEYS,
  validateScalingMetadata,
} from '../../downscale/coordination/validate.ts';
import { parseRfc3339 } from '../../vocabulary/rfc3339.ts';
import { minTimeSetting } from '../../downscale/mintime.ts';
import {
  DELAYED_DOWNSCALE_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_URL_ANNOTATION_KEY,
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  FORCE_REPLICAS_ANNOTATION_KEY,
  LAST_DOWNSCALE_ANNOTATION_KEY,
  MAX_UNAVAILABLE_ANNOTATION,
  MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY,
  MIRROR_API_VERSION_ANNOTATION_KEY,
  MIRROR_KIND_ANNOTATION_KEY,
  MIRROR_NAME_ANNOTATION_KEY,
  MIRROR_WRITE_BACK_ANNOTATION_KEY,
  NO_DOWNSCALE_LABEL_KEY,
  PREPARE_DOWNSCALE_LABEL_KEY,
  PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY,
  PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY,
  UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY,
} from '../../vocabulary/keys.ts';
import {} from './placement.ts';
import { type Scope, type Finding, type Severity, kubectl, objectName, omit, pick } from './scope.ts';
import { annotationsOf, labelsOf, nameOf } from '../../vocabulary/metadata.ts';

// ------------------------------------------------------- 4. values that do not parse

interface Aspect {
  code: string;
  severity: Severity;
  labels: readonly string[];
  annotations: readonly string[];
  fix: (sts: StatefulSet) => string;
}

// validateScalingMetadata judges one StatefulSet as a whole; run on copies
// holding only one aspect's keys, each message lands under its own code. A
// message already reported under an earlier aspect is not repeated.
const ASPECTS: readonly Aspect[] = [
  ...(
    [
      { key: PREPARE_DOWNSCALE_LABEL_KEY, verb: 'label' },
      { key: NO_DOWNSCALE_LABEL_KEY, verb: 'label' },
      { key: UPSCALE_ONLY_WHEN_LEADER_READY_ANNOTATION_KEY, verb: 'annotate' },
    ] as const
  ).map(({ key, verb }): Aspect => ({
    code: 'not-exactly-true',
    severity: 'error',
    labels: verb === 'label' ? [key] : [],
    annotations: verb === 'annotate' ? [key] : [],
    fix: (sts) =>
      `write exactly "true", in lower case: ${kubectl(sts, 'StatefulSet', verb, '--overwrite', `${key}=true`)}`,
  })),
  {
    code: 'invalid-min-time',
    severity: 'error',
    labels: [MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY],
    annotations: [MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY],
    // Fixed as an annotation, the form rollout-operator v0.39 reads first; a label goes with it.
    fix: (sts) =>
      `set a Go duration, as an annotation: ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY}=12h`)}` +
      (Object.hasOwn(labelsOf(sts), MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY)
        ? ` && ${kubectl(sts, 'StatefulSet', 'label', `${MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY}-`)}`
        : '') +
      ' (units ns, us, ms, s, m, h; no d or w)',
  },
  {
    code: 'invalid-last-downscale',
    severity: 'error',
    labels: [],
    annotations: [LAST_DOWNSCALE_ANNOTATION_KEY],
    fix: (sts) =>
      `Stateward writes it as RFC 3339 (e.g. 2026-01-02T15:04:05Z); remove the broken value and let the next prepared downscale write it: ${kubectl(sts, 'StatefulSet', 'annotate', `${LAST_DOWNSCALE_ANNOTATION_KEY}-`)}`,
  },
  {
    code: 'incomplete-mirror',
    severity: 'error',
    labels: [],
    annotations: [MIRROR_NAME_ANNOTATION_KEY, MIRROR_KIND_ANNOTATION_KEY, MIRROR_API_VERSION_ANNOTATION_KEY],
    fix: (sts) =>
      `set all of ${MIRROR_NAME_ANNOTATION_KEY}, ${MIRROR_KIND_ANNOTATION_KEY} and (for a custom resource) ${MIRROR_API_VERSION_ANNOTATION_KEY}, e.g. ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${MIRROR_NAME_ANNOTATION_KEY}=<name>`, `${MIRROR_KIND_ANNOTATION_KEY}=ReplicaTemplate`, `${MIRROR_API_VERSION_ANNOTATION_KEY}=rollout-operator.grafana.com/v1`)}, or remove them (see docs/scaling.md)`,
  },
  {
    code: 'invalid-mirror-write-back',
    severity: 'warning',
    labels: [],
    annotations: [MIRROR_WRITE_BACK_ANNOTATION_KEY],
    fix: (sts) =>
      `use true or false: ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${MIRROR_WRITE_BACK_ANNOTATION_KEY}=false`)}`,
  },
  {
    code: 'force-replicas-ignored',
    severity: 'warning',
    labels: [],
    annotations: [
      FORCE_REPLICAS_ANNOTATION_KEY,
      DOWNSCALE_LEADER_ANNOTATION_KEY,
      MIRROR_NAME_ANNOTATION_KEY,
      MIRROR_KIND_ANNOTATION_KEY,
      MIRROR_API_VERSION_ANNOTATION_KEY,
    ],
    fix: (sts) =>
      `use an integer ≥ 0 on a follower (${DOWNSCALE_LEADER_ANNOTATION_KEY}) or a mirror, or remove it: ${kubectl(sts, 'StatefulSet', 'annotate', `${FORCE_REPLICAS_ANNOTATION_KEY}-`)}`,
  },
  {
    code: 'invalid-delayed-downscale',
    severity: 'error',
    labels: [],
    annotations: [DELAYED_DOWNSCALE_ANNOTATION_KEY, DELAYED_DOWNSCALE_URL_ANNOTATION_KEY],
    fix: (sts) =>
      `set both, a Prometheus duration (1h, 2d, 1w) and a URL (http://host:port/path; the host is replaced by each pod's): ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${DELAYED_DOWNSCALE_ANNOTATION_KEY}=4h`, `${DELAYED_DOWNSCALE_URL_ANNOTATION_KEY}=http://pod:8080/prepare-delayed-downscale`)}, or remove both`,
  },
];

export function stripName(message: string, name: string): string {
  return message.startsWith(`${name}: `) ? message.slice(name.length + 2) : message;
}

/**
 * Values the operator cannot use, judged by validateScalingMetadata on the
 * keys in their right place (misplaced keys are checkKeyPlacement's).
 */
export function checkScalingValues(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const sts of scope.statefulSets) {
    const name = nameOf(sts);
    const annotations = omit(annotationsOf(sts), SCALING_LABEL_KEYS);
    // A min-time label beside an annotation is ignored, whatever its value (checkMinTimeLabel reports it).
    const ignored = minTimeSetting(sts)?.ignoredLabel !== undefined ? [MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY] : [];
    const labels = omit(labelsOf(sts), [...SCALING_ANNOTATION_KEYS, ...ignored]);
    const seen = new Set<string>();
    const report = (message: string, aspect: Pick<Aspect, 'code' | 'severity'> & { fix: string }) => {
      if (seen.has(message)) return;
      seen.add(message);
      findings.push({
        severity: aspect.severity,
        code: aspect.code,
        object: objectName('StatefulSet', sts),
        problem: stripName(message, name),
        fix: aspect.fix,
      });
    };
    for (const aspect of ASPECTS) {
      const copy: StatefulSet = {
        ...sts,
        metadata: {
          ...sts.metadata,
          labels: pick(labels, aspect.labels),
          annotations: pick(annotations, aspect.annotations),
        },
      };
      for (const message of validateScalingMetadata(copy)) report(message, { ...aspect, fix: aspect.fix(sts) });
    }
    // Anything validateScalingMetadata learns later still surfaces.
    const whole: StatefulSet = { ...sts, metadata: { ...sts.metadata, labels, annotations } };
    for (const message of validateScalingMetadata(whole)) {
      report(message, {
        code: 'invalid-scaling-metadata',
        severity: 'warning',
        fix: 'correct the value as the problem describes (docs/scaling.md lists every key and its format)',
      });
    }

    const last = annotations[LAST_DOWNSCALE_ANNOTATION_KEY];
    const lastTime = last === undefined ? undefined : parseRfc3339(last);
    if (typeof lastTime === 'number' && lastTime > scope.input.now + 5 * 60_000) {
      findings.push({
        severity: 'warning',
        code: 'last-downscale-in-future',
        object: objectName('StatefulSet', sts),
        problem: `${LAST_DOWNSCALE_ANNOTATION_KEY}=${last} is in the future, so the other zones of its group wait their min-time from then, not from the real downscale`,
        fix: `check the clocks, then remove it: ${kubectl(sts, 'StatefulSet', 'annotate', `${LAST_DOWNSCALE_ANNOTATION_KEY}-`)}`,
      });
    }
  }
  return findings;
}

/** rollout-max-unavailable: "N" or "P%"; anything else falls back to 1 (src/rollout/annotations.ts). */
export function checkMaxUnavailable(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const sts of scope.statefulSets) {
    const raw = annotationsOf(sts)[MAX_UNAVAILABLE_ANNOTATION];
    const parsed = parseMaxUnavailable(raw, sts.spec?.replicas ?? 1);
    if (parsed.warning === undefined) continue;
    findings.push({
      severity: 'warning',
      code: 'invalid-max-unavailable',
      object: objectName('StatefulSet', sts),
      problem: `${parsed.warning} (one pod at a time during rollouts)`,
      fix: `use a whole number > 0 or a percentage from 1% to 100%: ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${MAX_UNAVAILABLE_ANNOTATION}=2`)} (or 25%)`,
    });
  }
  return findings;
}

/** grafana.com/prepare-downscale=true without the port, path or serviceName the webhook needs: every downscale is denied. */
export function checkPrepareDownscale(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const sts of scope.statefulSets) {
    if (labelsOf(sts)[PREPARE_DOWNSCALE_LABEL_KEY] !== 'true') continue;
    const annotations = annotationsOf(sts);
    const port = annotations[PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY] ? [] : [PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY];
    const path = annotations[PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY] ? [] : [PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY];
    const service = sts.spec?.serviceName ? [] : ['spec.serviceName'];
    const missing = [...port.map((k) => `annotation ${k}`), ...path.map((k) => `annotation ${k}`), ...service];
    if (missing.length === 0) continue;
    const examples: Record<string, string> = {
      [PREPARE_DOWNSCALE_PORT_ANNOTATION_KEY]: '80',
      [PREPARE_DOWNSCALE_PATH_ANNOTATION_KEY]: 'ingester/prepare-shutdown',
    };
    const annotate = [...port, ...path];
    findings.push({
      severity: 'error',
      code: 'prepare-downscale-incomplete',
      object: objectName('StatefulSet', sts),
      problem: `it is labelled ${PREPARE_DOWNSCALE_LABEL_KEY}=true but has no ${missing.join(', ')}: the prepare-downscale webhook denies every downscale of it`,
      fix: [
        ...(annotate.length
          ? [
              `set the pod endpoint to call before a downscale: ${kubectl(sts, 'StatefulSet', 'annotate', ...annotate.map((k) => `${k}=${examples[k]!}`))}`,
            ]
          : []),
        ...(service.length
          ? [
              'set spec.serviceName to its headless Service (the pods are called at <pod>.<serviceName>.<namespace>.svc; the field is immutable, so the StatefulSet must be recreated, e.g. with kubectl delete --cascade=orphan and apply)',
            ]
          : []),
      ].join('; '),
    });
  }
  return findings;
}
