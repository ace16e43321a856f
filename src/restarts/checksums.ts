// The xing annotations a workload carries (opt-in, applied checksums) and the
// checksum maps they hold: read, compared and written byte for byte as xing does.
import type { KubeObject } from '../runtime/kube/types.ts';
import {
  XING_CHECKSUMS_ANNOTATION as APPLIED_CHECKSUMS_ANNOTATION_KEY,
  XING_ENABLED_ANNOTATION as RESTART_ENABLED_ANNOTATION_KEY,
  XING_ENABLED_VALUE as RESTART_ENABLED_VALUE,
  XING_TIMESTAMP_ANNOTATION as RESTART_TIMESTAMP_ANNOTATION_KEY,
} from '../vocabulary/keys.ts';

// ------------------------------------------------------------ annotations

// xing's keys, defined once in references.ts: the opt-in (metadata
// annotation, only the exact value `enabled`), the applied checksums (JSON,
// config key → checksum the running pods started with) and the restart
// trigger in spec.template.metadata.annotations.
/** A current checksum for a referenced config that does not exist. */
export const MISSING = 'missing';

/** Every kind config restarts handle; what differs per kind is in workloadkinds.ts. */
export type WorkloadKind = 'Deployment' | 'StatefulSet' | 'DaemonSet' | 'CronJob' | 'Job' | 'Rollout';

export interface WorkloadRef {
  kind: WorkloadKind;
  namespace: string;
  name: string;
}

/** xing's full name of a workload: `deployment/<ns>/<name>` (lower-case kind). */
export function workloadKey(ref: WorkloadRef): string {
  return `${ref.kind.toLowerCase()}/${ref.namespace}/${ref.name}`;
}

/** Whether the workload's annotations opt it in (exactly `enabled`). */
export function isOptedIn(annotations: Readonly<Record<string, string>> | undefined): boolean {
  return annotations?.[RESTART_ENABLED_ANNOTATION_KEY] === RESTART_ENABLED_VALUE;
}

// ------------------------------------------------------------ checksum maps

/** Config key → checksum. A plain object or a Map. */
export type ChecksumsInput = ReadonlyMap<string, string> | Readonly<Record<string, string>>;
/** Config key → current checksum, or 'missing'. A plain object or a Map. */
export type CurrentChecksumsInput = ChecksumsInput;

export function toMap(input: ChecksumsInput | undefined): Map<string, string> {
  if (input === undefined) return new Map();
  if (input instanceof Map) return new Map(input as ReadonlyMap<string, string>);
  return new Map(Object.entries(input as Readonly<Record<string, string>>));
}

export const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export interface ParsedChecksums {
  checksums: Map<string, string>;
  /** Set when the annotation was not a JSON object of strings; what was usable is in `checksums`. */
  warning?: string;
}

/**
 * The applied-checksums annotation as a map. Never throws. An absent or empty
 * annotation is an empty map. Malformed JSON, or JSON that is not an object,
 * is an empty map plus a warning (as xing, which logs and assumes an empty
 * map); entries whose value is not a string are dropped with a warning and
 * the rest kept.
 *
 * Why an empty map is the SAFE reading: every reference then looks newly
 * added (R2), so the next decision rewrites a well-formed annotation and
 * restarts nothing. The cost is at most one missed restart for a change made
 * while the annotation was unreadable; the alternative, treating every config
 * as changed, would restart every workload with a hand-edited annotation.
 */
export function parseAppliedChecksums(annotation?: string): ParsedChecksums {
  const checksums = new Map<string, string>();
  if (annotation === undefined || annotation.trim() === '') return { checksums };
  let parsed: unknown;
  try {
    parsed = JSON.parse(annotation);
  } catch (e) {
    return {
      checksums,
      warning: `${APPLIED_CHECKSUMS_ANNOTATION_KEY} is not valid JSON (${(e as Error).message}); treating it as empty`,
    };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { checksums, warning: `${APPLIED_CHECKSUMS_ANNOTATION_KEY} is not a JSON object; treating it as empty` };
  }
  const dropped: string[] = [];
  for (const [key, value] of Object.entries(parsed)) {
    if (typeof value === 'string') checksums.set(key, value);
    else dropped.push(key);
  }
  if (dropped.length > 0) {
    return {
      checksums,
      warning: `${APPLIED_CHECKSUMS_ANNOTATION_KEY} has non-string checksums for ${dropped.sort(byKey).join(', ')}; ignoring them`,
    };
  }
  return { checksums };
}

/** The annotation value: compact JSON with keys sorted (what Go's json.Marshal of xing's map writes). */
export function formatAppliedChecksums(checksums: ChecksumsInput): string {
  const entries = [...toMap(checksums)].sort(([a], [b]) => byKey(a, b));
  return JSON.stringify(Object.fromEntries(entries));
}

export function sameChecksums(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}

/** The applied checksums of a workload object (see parseAppliedChecksums). */
export function appliedChecksumsOf(workload: KubeObject): ParsedChecksums {
  return parseAppliedChecksums(workload.metadata?.annotations?.[APPLIED_CHECKSUMS_ANNOTATION_KEY]);
}

/** The current restart trigger value in the workload's pod template, if any. */
export function restartTimestampOf(workload: {
  spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
}): string | undefined {
  return workload.spec?.template?.metadata?.annotations?.[RESTART_TIMESTAMP_ANNOTATION_KEY];
}
