// Several reschedule profiles in one process (issue 38): where they come from
// (the -reschedule.* flags' own profile, Strimzi Drain Cleaner's STRIMZI_*
// environment, a small YAML file), the checks across them, and which one
// judges a pod. Pure: the shell reads the file and the flags.
import { parse as parseYaml, YAMLParseError } from 'yaml';
import type { Pod } from '../../runtime/kube/types.ts';
import { STRIMZI_MESSAGE } from './decide.ts';
import { profilesOverlap } from './profileoverlap.ts';
import {
  namespaceInScope,
  parseRescheduleConfig,
  profileSelects,
  type RescheduleConfig,
  type RescheduleConfigInput,
} from './rescheduleconfig.ts';

export const STRIMZI_PROFILE = 'strimzi';
/** What the Strimzi Cluster Operator watches on a pod to roll it. */
export const STRIMZI_ANNOTATION = 'strimzi.io/manual-rolling-update=true';

/** How a profile is named in messages; the flags' profile has no name of its own. */
export const profileLabel = (p: RescheduleConfig): string =>
  p.name === undefined ? 'the -reschedule.* flags profile' : `profile ${JSON.stringify(p.name)}`;

// ------------------------------------------------------------------ Strimzi

/** Strimzi Drain Cleaner 1.6's settings, as its STRIMZI_* variables give them. */
export interface StrimziSettings {
  /** STRIMZI_DENY_EVICTION: refuse (true) or annotate and allow ("legacy mode"). */
  denyEviction: boolean;
  drainKafka: boolean;
  drainZooKeeper: boolean;
  /** STRIMZI_DRAIN_NAMESPACES: comma-separated; empty or `*` = all. */
  namespaces: string;
  /** The code of a refusal: 429 (Stateward's default, drains wait) or 500 (Drain Cleaner's, drains fail). */
  denyCode: 429 | 500;
}

/**
 * The Strimzi profile: pods labelled strimzi.io/kind=Kafka whose
 * strimzi.io/name ends in -kafka or -zookeeper (as enabled), the Cluster
 * Operator's manual-rolling-update annotation, Drain Cleaner's message.
 */
export function strimziProfileInput(
  s: StrimziSettings,
): { ok: true; input: RescheduleConfigInput } | { ok: false; error: string } {
  const names = [...(s.drainKafka ? ['.+-kafka'] : []), ...(s.drainZooKeeper ? ['.+-zookeeper'] : [])];
  if (names.length === 0)
    return {
      ok: false,
      error:
        'the Strimzi profile drains neither Kafka nor ZooKeeper pods (STRIMZI_DRAIN_KAFKA and STRIMZI_DRAIN_ZOOKEEPER are both false)',
    };
  return {
    ok: true,
    input: {
      name: STRIMZI_PROFILE,
      selectors: ['strimzi.io/kind=Kafka'],
      labelPatterns: { 'strimzi.io/name': names.join('|') },
      annotation: STRIMZI_ANNOTATION,
      namespaces: s.namespaces,
      answer: !s.denyEviction ? 'allow' : s.denyCode === 500 ? 'deny-500' : 'deny-429',
      message: STRIMZI_MESSAGE,
    },
  };
}

// --------------------------------------------------------------------- file

const PROFILE_KEYS = [
  'name',
  'podSelector',
  'labelPatterns',
  'ownerKinds',
  'annotation',
  'answer',
  'message',
  'namespaces',
  'track',
  'trackingConfigMap',
  'recordTtl',
  'drainTaints',
] as const;

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** One profile's entry of the file as RescheduleConfigInput; every problem, each naming its field. */
function profileInput(entry: unknown): { input: RescheduleConfigInput; errors: string[] } {
  const errors: string[] = [];
  const input: RescheduleConfigInput = {};
  if (!isMap(entry)) return { input, errors: ['expected a mapping of name, podSelector, annotation, …'] };
  for (const key of Object.keys(entry))
    if (!(PROFILE_KEYS as readonly string[]).includes(key))
      errors.push(`unknown field ${JSON.stringify(key)} (known: ${PROFILE_KEYS.join(', ')})`);
  const text = (key: string, required: boolean): string | undefined => {
    const v = entry[key];
    if (v === undefined && required) errors.push(`${key} is required`);
    else if (v !== undefined && typeof v !== 'string') errors.push(`${key}: expected a string`);
    return typeof v === 'string' ? v : undefined;
  };
  const textOrList = (key: string): string | string[] | undefined => {
    const v = entry[key];
    if (v === undefined || typeof v === 'string' || isStringList(v)) return v;
    errors.push(`${key}: expected a string or a list of strings`);
    return undefined;
  };
  const assign = <K extends keyof RescheduleConfigInput>(key: K, value: RescheduleConfigInput[K] | undefined) => {
    if (value !== undefined) input[key] = value;
  };
  assign('name', text('name', true));
  const selector = textOrList('podSelector');
  if (selector === undefined && entry.podSelector === undefined) errors.push('podSelector is required');
  // Each list entry is one selector (OR-ed), as for -reschedule.pod-selector.
  if (selector !== undefined) input.selectors = typeof selector === 'string' ? [selector] : selector;
  assign('annotation', text('annotation', true));
  assign('answer', text('answer', false));
  assign('message', text('message', false));
  assign('trackingConfigMap', text('trackingConfigMap', false));
  assign('recordTtl', text('recordTtl', false));
  assign('namespaces', textOrList('namespaces'));
  assign('drainTaints', textOrList('drainTaints'));
  assign('ownerKinds', textOrList('ownerKinds'));
  const patterns = entry.labelPatterns;
  if (patterns !== undefined) {
    if (isMap(patterns) && Object.values(patterns).every((v) => typeof v === 'string'))
      input.labelPatterns = patterns as Record<string, string>;
    else errors.push('labelPatterns: expected a mapping of label key to regex');
  }
  const track = entry.track;
  if (typeof track === 'boolean' || typeof track === 'string') input.track = track;
  else if (track !== undefined) errors.push('track: expected true or false');
  return { input, errors };
}

/**
 * The profiles of a -reschedule.profiles-file:
 *   profiles:
 *   - name: kafka
 *     podSelector: strimzi.io/kind=Kafka
 *     labelPatterns: {strimzi.io/name: .+-kafka}
 *     annotation: strimzi.io/manual-rolling-update=true
 *     answer: deny-429
 * Unknown fields are errors: a misspelt field would silently change which pods are held.
 */
export function parseProfilesFile(
  text: string,
): { ok: true; profiles: RescheduleConfig[] } | { ok: false; errors: string[] } {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    const why = error instanceof YAMLParseError ? error.message.split('\n')[0] : String(error);
    return { ok: false, errors: [`not YAML: ${why}`] };
  }
  if (!isMap(doc) || !Array.isArray(doc.profiles) || doc.profiles.length === 0)
    return { ok: false, errors: ['expected a mapping with a non-empty list `profiles`'] };
  const extra = Object.keys(doc).filter((k) => k !== 'profiles');
  const errors = extra.map((k) => `unknown top-level field ${JSON.stringify(k)} (only profiles)`);
  const profiles: RescheduleConfig[] = [];
  doc.profiles.forEach((entry: unknown, i: number) => {
    const { input, errors: fieldErrors } = profileInput(entry);
    const where = `profile ${i + 1}${input.name !== undefined ? ` (${JSON.stringify(input.name)})` : ''}`;
    const parsed = fieldErrors.length === 0 ? parseRescheduleConfig(input) : undefined;
    for (const e of [...fieldErrors, ...(parsed && !parsed.ok ? parsed.errors : [])]) errors.push(`${where}: ${e}`);
    if (parsed?.ok) profiles.push(parsed.config);
  });
  return errors.length > 0 ? { ok: false, errors } : { ok: true, profiles };
}

// ------------------------------------------------------------ across profiles

const scope = (p: RescheduleConfig) => (p.namespaces === undefined ? 'every namespace' : [...p.namespaces].join(','));

/**
 * Problems of a set of profiles together: duplicate names, overlaps
 * (profileoverlap.ts), and two profiles keeping records in one ConfigMap with
 * different TTLs (each would expire the other's records early).
 */
export function profilesProblems(profiles: readonly RescheduleConfig[]): string[] {
  const problems: string[] = [];
  const names = new Set<string>();
  for (const p of profiles) {
    if (p.name !== undefined && names.has(p.name)) problems.push(`two profiles are named ${JSON.stringify(p.name)}`);
    if (p.name !== undefined) names.add(p.name);
  }
  profiles.forEach((a, i) => {
    for (const b of profiles.slice(i + 1)) {
      const keys = profilesOverlap(a, b);
      if (keys !== undefined)
        problems.push(
          `${profileLabel(a)} (namespaces: ${scope(a)}) and ${profileLabel(b)} (namespaces: ${scope(b)}) overlap: both can select one pod through label ${keys.map((k) => JSON.stringify(k)).join(', ')}; narrow a selector, a label pattern, the owner kinds or the namespaces so that no pod is both's`,
        );
      if (a.track && b.track && a.trackingConfigMap === b.trackingConfigMap && a.recordTtlMs !== b.recordTtlMs)
        problems.push(
          `${profileLabel(a)} and ${profileLabel(b)} keep records in ConfigMap ${a.trackingConfigMap} with different record TTLs; give them one TTL (or, with RBAC for it, another ConfigMap)`,
        );
    }
  });
  return problems;
}

/** The profiles whose namespaces include this one, in order (before any API call). */
export function profilesInScope(profiles: readonly RescheduleConfig[], namespace: string): RescheduleConfig[] {
  return profiles.filter((p) => namespaceInScope(p, namespace));
}

/**
 * The profile that judges this pod: the first that selects it. More than one
 * can only happen on label keys the startup check could not relate (see
 * profileoverlap.ts); `others` names them for a warning.
 */
export function chooseProfile(
  profiles: readonly RescheduleConfig[],
  pod: Pod,
): { profile: RescheduleConfig; others: RescheduleConfig[] } | undefined {
  const [profile, ...others] = profiles.filter((p) => profileSelects(p, pod));
  return profile === undefined ? undefined : { profile, others };
}
