// Delayed downscale (rollout-operator's pkg/controller/delay.go), pure parts.
// A mirroring StatefulSet with both annotations set asks each pod about to
// go (POST) when it was first asked, and scales down only the tail of pods
// whose delay has passed; pods staying get a DELETE (cancel). The executor
// makes the HTTP calls (≤32 at a time) and feeds the results back here.
import type { StatefulSet } from '../../runtime/kube/types.ts';
import { formatGoDuration, parsePromDuration } from '../../runtime/go/duration.ts';
import { DEFAULT_CLUSTER_DOMAIN } from '../prepare/prepareplan.ts';
import { annotationsOf } from '../../vocabulary/metadata.ts';
import { quoteValue } from '../../runtime/log/logger.ts';
import { DELAYED_DOWNSCALE_ANNOTATION_KEY, DELAYED_DOWNSCALE_URL_ANNOTATION_KEY } from '../../vocabulary/keys.ts';

export interface DelayedDownscaleConfig {
  delayMs: number;
  /** The URL template; its host is replaced per pod by podUrl. */
  url: string;
}

// scheme://[userinfo@]host[:port][/path][?query][#fragment]
const URL_PARTS = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)(?:([^/?#@]*)@)?([^/?#]*)(.*)$/s;

function splitUrl(
  url: string,
): { scheme: string; userinfo: string | undefined; host: string; port: string; rest: string } | undefined {
  const m = URL_PARTS.exec(url);
  if (!m) return undefined;
  const hostPort = m[3]!;
  // Go's url.Port(): the digits after the last colon (after "]" for IPv6).
  const colon = hostPort.lastIndexOf(':');
  const afterBracket = hostPort.startsWith('[') ? hostPort.indexOf(']') < colon : true;
  const portText = colon >= 0 && afterBracket ? hostPort.slice(colon + 1) : '';
  const hasPort = colon >= 0 && afterBracket && /^[0-9]*$/.test(portText);
  if (colon >= 0 && afterBracket && !hasPort) return undefined;
  return {
    scheme: m[1]!,
    userinfo: m[2],
    host: hasPort ? hostPort.slice(0, colon) : hostPort,
    port: hasPort ? portText : '',
    rest: m[4]!,
  };
}

/**
 * Both annotations non-empty and a delay > 0 → the config; otherwise
 * undefined (delayed downscale off). The delay is a Prometheus duration
 * (`1h`, `2d`, `1w`); an unparsable or negative one, or a URL without
 * scheme and host, is an error.
 */
export function delayedDownscaleConfig(sts: StatefulSet): DelayedDownscaleConfig | undefined | { error: string } {
  const annotations = annotationsOf(sts);
  const delayText = annotations[DELAYED_DOWNSCALE_ANNOTATION_KEY] ?? '';
  const url = annotations[DELAYED_DOWNSCALE_URL_ANNOTATION_KEY] ?? '';
  if (delayText === '' || url === '') return undefined;
  if (delayText.startsWith('-'))
    return { error: `negative value of ${DELAYED_DOWNSCALE_ANNOTATION_KEY} annotation: ${delayText}` };
  let delayMs: number;
  try {
    delayMs = parsePromDuration(delayText);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { error: `failed to parse ${DELAYED_DOWNSCALE_ANNOTATION_KEY} annotation value as duration: ${why}` };
  }
  if (splitUrl(url) === undefined) {
    return {
      error: `failed to parse ${DELAYED_DOWNSCALE_URL_ANNOTATION_KEY} annotation value as URL: ${quoteValue(url)} is not scheme://host[:port]/path`,
    };
  }
  if (delayMs <= 0) return undefined;
  return { delayMs, url };
}

export interface PodAddress {
  /** The pod name, `<sts>-<ordinal>`. */
  pod: string;
  /** spec.serviceName of the StatefulSet. */
  serviceName: string;
  namespace: string;
  /** Default 'cluster.local.' (trailing dot kept: an absolute FQDN). */
  clusterDomain?: string;
}

/**
 * The template with its host replaced by `<pod>.<serviceName>.<ns>.svc.<domain>`;
 * scheme, userinfo, port, path, query and fragment are kept verbatim.
 */
export function podUrl(template: string, address: PodAddress): string | { error: string } {
  const parts = splitUrl(template);
  if (parts === undefined) return { error: `${quoteValue(template)} is not scheme://host[:port]/path` };
  const { pod, serviceName, namespace, clusterDomain = DEFAULT_CLUSTER_DOMAIN } = address;
  const host = `${pod}.${serviceName}.${namespace}.svc.${clusterDomain}`;
  const userinfo = parts.userinfo === undefined ? '' : `${parts.userinfo}@`;
  return `${parts.scheme}${userinfo}${host}${parts.port === '' ? '' : `:${parts.port}`}${parts.rest}`;
}

/** The largest ordinal a StatefulSet can have (spec.replicas is an int32). */
const MAX_ORDINAL = 2 ** 31 - 1;

/**
 * The ordinals of `statefulSet`'s pods among `podNames`: names
 * `<statefulSet>-<ordinal>` with a canonical decimal int32 ordinal; other
 * names are ignored.
 */
export function ordinalsOf(statefulSet: string, podNames: Iterable<string>): number[] {
  const prefix = `${statefulSet}-`;
  const ordinals: number[] = [];
  for (const name of podNames) {
    if (!name.startsWith(prefix)) continue;
    const text = name.slice(prefix.length);
    if (!/^(0|[1-9][0-9]{0,9})$/.test(text)) continue;
    const ordinal = Number(text);
    if (ordinal <= MAX_ORDINAL) ordinals.push(ordinal);
  }
  return ordinals;
}

export interface DelayedDownscaleCallPlan {
  /** Ordinals to send DELETE, ascending. */
  cancel: number[];
  /** Ordinals to send POST, ascending. */
  prepare: number[];
  /** The lowest ordinal of [desired, current) without a pod: it cannot answer, so no downscale this time. */
  missing?: number;
}

/**
 * The pod calls for a replica change: DELETE (cancel) to the pods that stay,
 * POST (prepare) to the pods that would go. Upscale or no change: cancel
 * [0, current), prepare nothing.
 *
 * Only pods in `existing` (their ordinals) are called: spec.replicas may be
 * any int32, so the work follows the pods that exist, never the length of
 * the ranges (as the prepare-downscale webhook's endpoints()). Without
 * `existing`, every pod of [0, current) is taken to exist (small counts
 * only, as in tests: the executor always passes the pods its cache shows).
 */
export function delayedDownscaleCalls(input: {
  current: number;
  desired: number;
  existing?: Iterable<number>;
}): DelayedDownscaleCallPlan {
  const { current, desired } = input;
  if (input.existing === undefined) {
    const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i);
    if (desired >= current) return { cancel: range(0, current), prepare: [] };
    return { cancel: range(0, desired), prepare: range(desired, current) };
  }
  const ordinals = [...new Set(input.existing)].filter((o) => Number.isSafeInteger(o) && o >= 0).sort((a, b) => a - b);
  const staying = Math.min(current, desired);
  const cancel = ordinals.filter((o) => o < staying);
  if (desired >= current) return { cancel, prepare: [] };
  const prepare = ordinals.filter((o) => o >= desired && o < current);
  // The first gap in the ascending ordinals from `desired`: found in at most prepare.length steps.
  let next = desired;
  for (const ordinal of prepare) {
    if (ordinal !== next) break;
    next++;
  }
  return next < current ? { cancel, prepare, missing: next } : { cancel, prepare };
}

/** A DELETE (cancel) succeeded: any 2xx, or 409 Conflict ("partition state locked"). Failures are only logged. */
export function cancelSucceeded(status: number): boolean {
  return (status >= 200 && status < 300) || status === 409;
}

/**
 * A pod's POST answer: 2xx with JSON `{"timestamp": <unix seconds ≠ 0>}`
 * → the timestamp; anything else → an error.
 */
export function parsePrepareResponse(response: { status: number; body: string }): number | { error: string } {
  if (response.status < 200 || response.status >= 300)
    return { error: `HTTP POST request returned non-2xx status code: ${response.status}` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(response.body);
  } catch (error) {
    return { error: `cannot decode response: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (parsed !== null && (typeof parsed !== 'object' || Array.isArray(parsed)))
    return { error: 'cannot decode response: not a JSON object' };
  const timestamp = parsed === null ? undefined : (parsed as Record<string, unknown>)['timestamp'];
  if (timestamp === undefined || timestamp === null || timestamp === 0) return { error: 'no timestamp in response' };
  if (typeof timestamp !== 'number' || !Number.isSafeInteger(timestamp))
    return { error: `cannot decode response: timestamp ${JSON.stringify(timestamp)} is not an integer` };
  return timestamp;
}

/** Per pod ordinal: its POST timestamp (unix seconds) or why the call failed. */
export type PrepareResults = ReadonlyMap<number, number | { error: string }>;

/**
 * How far a downscale from `current` to `desired` may go at `now`: walking
 * from ordinal current−1 down to desired, the consecutive pods whose
 * now − timestamp ≥ delay may go. Any failed POST in [desired, current)
 * → error (no scaling this time); none may go → rollout-operator's error.
 *
 * Time proportional to the answers, whatever current − desired (any int32):
 * the first loop stops at the first ordinal without an answer, so it runs
 * at most timestamps.size + 1 times, and the second only runs when every
 * ordinal of the range has one.
 */
export function delayedDownscaleDecision(input: {
  current: number;
  desired: number;
  timestamps: PrepareResults;
  delayMs: number;
  now: number;
}): { allowed: number } | { error: string } {
  const { current, desired, timestamps, delayMs, now } = input;
  if (desired >= current || delayMs <= 0) return { allowed: desired };
  for (let ordinal = desired; ordinal < current; ordinal++) {
    const result = timestamps.get(ordinal);
    const failure =
      result === undefined
        ? `no response from pod ordinal ${ordinal}`
        : typeof result !== 'number'
          ? `pod ordinal ${ordinal}: ${result.error}`
          : result === 0
            ? `pod ordinal ${ordinal}: no timestamp in response`
            : undefined;
    if (failure !== undefined) return { error: `failed prepare pods for delayed downscale: ${failure}` };
  }
  let allowed = current;
  for (let ordinal = current - 1; ordinal >= desired; ordinal--) {
    const seconds = timestamps.get(ordinal) as number;
    if (now - seconds * 1000 < delayMs) break;
    allowed--;
  }
  if (allowed === current) {
    return {
      error: `configured downscale delay ${formatGoDuration(delayMs)} has not been reached for any pods at the end of statefulset replicas range`,
    };
  }
  return { allowed };
}
