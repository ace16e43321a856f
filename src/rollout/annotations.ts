// rollout-operator's StatefulSet annotations for rollouts, parsed exactly as
// it parses them, but reporting bad values instead of only logging them.
import { MAX_UNAVAILABLE_ANNOTATION, PAUSED_ANNOTATION } from '../vocabulary/keys.ts';

export interface MaxUnavailable {
  value: number;
  /** Set when the annotation was present but unusable (the value fell back to 1). */
  warning?: string;
}

/**
 * "N" (an integer > 0) or "P%" (1..100 percent of spec.replicas, floored,
 * at least 1). Absent → 1. Invalid, ≤ 0 or > 100 % → 1 with a warning.
 */
export function parseMaxUnavailable(raw: string | undefined, replicas: number): MaxUnavailable {
  if (raw === undefined) return { value: 1 };
  const text = raw.trim();
  const fallback = (why: string): MaxUnavailable => ({
    value: 1,
    warning: `annotation ${MAX_UNAVAILABLE_ANNOTATION}="${raw}" ${why}; using 1`,
  });
  const percent = /^(-?\d+)%$/.exec(text);
  if (percent) {
    const p = Number(percent[1]);
    if (p <= 0 || p > 100) return fallback('must be a percentage from 1% to 100%');
    return { value: Math.max(1, Math.floor((replicas * p) / 100)) };
  }
  if (!/^-?\d+$/.test(text)) return fallback('is not a number or a percentage');
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) return fallback('must be greater than 0');
  return { value: n };
}

/** Only the exact string "true" pauses, as in rollout-operator. */
export function isPaused(annotations: Record<string, string> | undefined): boolean {
  return annotations?.[PAUSED_ANNOTATION] === 'true';
}
