// What a restart writes: the restart timestamp in the pod template and the
// annotation patch that records the applied checksums.
import {
  XING_CHECKSUMS_ANNOTATION as APPLIED_CHECKSUMS_ANNOTATION_KEY,
  XING_TIMESTAMP_ANNOTATION as RESTART_TIMESTAMP_ANNOTATION_KEY,
} from '../vocabulary/keys.ts';
import { type ChecksumsInput, formatAppliedChecksums } from './checksums.ts';

// ------------------------------------------------------------ restart timestamp

/**
 * 'rfc3339': UTC with milliseconds (2024-01-02T12:00:00.000Z), the default.
 * 'go-stamp': xing's exact format, Go's time.Stamp ("Jan _2 15:04:05"), here
 * in UTC; it has whole seconds and no year.
 * Nothing reads the value (any change to the template rolls the pods), so the
 * format does not affect compatibility; it is for people and for tooling that
 * parses it.
 */
export type TimestampFormat = 'rfc3339' | 'go-stamp';

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'] as const;
const two = (n: number) => String(n).padStart(2, '0');

export function formatRestartTimestamp(now: number, format: TimestampFormat = 'rfc3339'): string {
  const d = new Date(now);
  if (format === 'rfc3339') return d.toISOString();
  return `${MONTHS[d.getUTCMonth()]} ${String(d.getUTCDate()).padStart(2, ' ')} ${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
}

/**
 * The trigger value for a restart at `now`, guaranteed to differ from the
 * template's current one: an unchanged value would change nothing and roll
 * nothing (xing's seconds-resolution stamp does exactly that for two restarts
 * within a second). It moves forward by the format's resolution until it
 * differs.
 */
export function nextRestartTimestamp(now: number, previous?: string, format: TimestampFormat = 'rfc3339'): string {
  const step = format === 'rfc3339' ? 1 : 1000;
  let t = now;
  let value = formatRestartTimestamp(t, format);
  while (value === previous) {
    t += step;
    value = formatRestartTimestamp(t, format);
  }
  return value;
}

// ------------------------------------------------------------ patches

/** A JSON merge patch (application/merge-patch+json) of a workload; restartwrites.ts adapts it per kind. */
export interface WorkloadPatch {
  metadata: { annotations: Record<string, string>; resourceVersion?: string };
  spec?: { template: { metadata: { annotations: Record<string, string> } } };
}

export interface PatchOptions {
  /**
   * The resourceVersion the decision was made from. In a merge patch it is a
   * precondition: the API server answers 409 if the workload changed since,
   * and the caller decides again instead of acting on a stale view (two
   * replicas briefly both leading cannot both restart).
   */
  resourceVersion?: string;
}

/** Records the applied checksums, no restart. */
export function annotationPatch(input: { applied: ChecksumsInput } & PatchOptions): WorkloadPatch {
  const metadata: WorkloadPatch['metadata'] = {
    annotations: { [APPLIED_CHECKSUMS_ANNOTATION_KEY]: formatAppliedChecksums(input.applied) },
  };
  if (input.resourceVersion !== undefined) metadata.resourceVersion = input.resourceVersion;
  return { metadata };
}

/**
 * Records the applied checksums AND restarts, in one patch: the template
 * trigger annotation gets a new value (nextRestartTimestamp). One patch means
 * a restart is never done without its checksums being recorded (which would
 * restart again after a failover) nor recorded without being done.
 */
export function restartPatch(
  input: { applied: ChecksumsInput; now: number; previousTimestamp?: string; format?: TimestampFormat } & PatchOptions,
): WorkloadPatch {
  return {
    ...annotationPatch(input),
    spec: {
      template: {
        metadata: {
          annotations: {
            [RESTART_TIMESTAMP_ANNOTATION_KEY]: nextRestartTimestamp(input.now, input.previousTimestamp, input.format),
          },
        },
      },
    },
  };
}
