// Configs a workload's pods load without referencing them (Reloader #1196):
// an app that reads its configuration from the API, a sidecar that mounts
// every ConfigMap with a label. The workload names them by a label selector
// (stateward.dev/config-restart-configmap-selector, …-secret-selector) and
// every matching ConfigMap or Secret of its namespace is watched exactly like
// a referenced one: its own key and checksum in the applied record.
//
// The set is part of the configuration too: a matching config created, or
// deleted (or relabelled in or out), changes what the pods would load. So
// each selector also has a membership entry in the applied record,
// `<kind>-selector/<namespace>/<selector>` → a hash of the matching names,
// and a change of it restarts like any content change (R1), whatever
// --reload-on-create and --reload-on-delete say: those decide what the
// appearance of a config that pods *reference by name* does (pods waiting
// for a named config pick it up when they start), and there is no such name
// here. Recorded the first time without a restart (R2), as every opt-in.
// Pure: the caller passes the namespace's configs with their labels.
import { createHash } from 'node:crypto';
import {
  CONFIG_RESTART_CONFIGMAP_SELECTOR_ANNOTATION,
  CONFIG_RESTART_SECRET_SELECTOR_ANNOTATION,
} from '../vocabulary/keys.ts';
import { type LabelSelector, matchesLabelSelector, parseLabelSelector } from '../vocabulary/selectors.ts';
import { compare, configKey, type ConfigKind } from './references.ts';

/** The selector annotation of each config kind. */
export const SELECTOR_ANNOTATIONS: Record<ConfigKind, string> = {
  configmap: CONFIG_RESTART_CONFIGMAP_SELECTOR_ANNOTATION,
  secret: CONFIG_RESTART_SECRET_SELECTOR_ANNOTATION,
};

/** Longest selector read: the annotation may be 256 KiB, and it is parsed at every look at the workload. */
const MAX_SELECTOR_LENGTH = 4096;

/** One selector annotation, parsed. */
export interface ConfigSelector {
  kind: ConfigKind;
  namespace: string;
  /** As written, trimmed: part of the membership key, so the record names what selected. */
  text: string;
  selector: LabelSelector;
}

/** A config of the workload's namespace as the caches know it: name and labels only. */
export interface LabelledConfig {
  name: string;
  labels?: Readonly<Record<string, string>> | undefined;
}

/** ConfigMaps or Secrets as selectors read them (the controller's caches, status and doctor lists alike). */
export function labelledConfigs(
  objects: readonly { metadata?: { name?: string; labels?: Record<string, string> } }[],
): LabelledConfig[] {
  return objects.map((c) => ({ name: c.metadata?.name ?? '', labels: c.metadata?.labels }));
}

/**
 * The workload's selectors (metadata annotations only: like
 * stateward.dev/config-restart-ondelete, a Stateward key of the workload
 * itself). An empty or unparsable value, or one longer than 4,096
 * characters, is a warning and selects nothing; never throws.
 */
export function configSelectors(
  annotations: Readonly<Record<string, string>>,
  namespace: string,
): { selectors: ConfigSelector[]; warnings: string[] } {
  const selectors: ConfigSelector[] = [];
  const warnings: string[] = [];
  for (const kind of ['configmap', 'secret'] as const) {
    const key = SELECTOR_ANNOTATIONS[kind];
    const raw = annotations[key];
    if (raw === undefined) continue;
    const text = raw.trim();
    const what = kind === 'configmap' ? 'ConfigMap' : 'Secret';
    if (text === '') {
      warnings.push(`${key} is empty; ignored (an empty selector would match every ${what} of the namespace)`);
      continue;
    }
    if (text.length > MAX_SELECTOR_LENGTH) {
      warnings.push(`${key} is longer than ${MAX_SELECTOR_LENGTH} characters; ignored`);
      continue;
    }
    const parsed = parseLabelSelector(text);
    if (!parsed.ok) {
      warnings.push(`${key} is not a valid label selector (${parsed.error}); no ${what} is selected by it`);
      continue;
    }
    selectors.push({ kind, namespace, text, selector: parsed.value });
  }
  return { selectors, warnings };
}

/** The names of `configs` the selector matches, sorted. */
export function selectedNames(selector: ConfigSelector, configs: Iterable<LabelledConfig>): string[] {
  const names: string[] = [];
  for (const c of configs) {
    if (typeof c?.name === 'string' && c.name !== '' && matchesLabelSelector(selector.selector, c.labels))
      names.push(c.name);
  }
  return [...new Set(names)].sort(compare);
}

/** The applied record's membership key of a selector: `configmap-selector/<ns>/<selector>`. */
export function selectorKey(selector: Pick<ConfigSelector, 'kind' | 'namespace' | 'text'>): string {
  return `${selector.kind}-selector/${selector.namespace}/${selector.text}`;
}

/** Whether a key of the applied record is a selector's membership entry (else a config or class key). */
export function isSelectorKey(key: string): boolean {
  return key.startsWith('configmap-selector/') || key.startsWith('secret-selector/');
}

/**
 * The membership checksum: which names match, not their content (each
 * config's content has its own entry). Names are not secret; hashed only
 * to keep the annotation short whatever the set's size.
 */
export function membershipChecksum(names: readonly string[]): string {
  const sorted = [...new Set(names)].sort(compare);
  return `names:${createHash('sha256').update(JSON.stringify(sorted)).digest('hex').slice(0, 32)}`;
}

/** A selector's result for the applied record: its membership entry and the config keys it adds. */
export interface SelectedSet {
  /** selectorKey(). */
  key: string;
  kind: ConfigKind;
  /** The selector as written. */
  text: string;
  /** Matching names after exclusions (reloader.stakater.com/ignore, exclude lists), sorted. */
  names: string[];
  /** membershipChecksum(names). */
  checksum: string;
  /** configKey of each name. */
  configKeys: string[];
}

export function selectedSet(selector: ConfigSelector, names: readonly string[]): SelectedSet {
  const sorted = [...new Set(names)].sort(compare);
  return {
    key: selectorKey(selector),
    kind: selector.kind,
    text: selector.text,
    names: sorted,
    checksum: membershipChecksum(sorted),
    configKeys: sorted.map((name) => configKey(selector.kind, selector.namespace, name)),
  };
}

/**
 * The configs to name as a restart's cause: a membership entry stands for
 * the configs that came or went (the decision's added and removed keys of
 * that kind and namespace), or for itself when none is known.
 */
export function restartCauses(
  restartedBy: readonly string[],
  changes: readonly { key: string; change: string }[],
): string[] {
  const out: string[] = [];
  for (const key of restartedBy) {
    if (!isSelectorKey(key)) {
      out.push(key);
      continue;
    }
    const [head = '', namespace = ''] = key.split('/');
    const prefix = `${head.slice(0, -'-selector'.length)}/${namespace}/`;
    const moved = changes
      .filter((c) => (c.change === 'added' || c.change === 'removed') && c.key.startsWith(prefix))
      .map((c) => c.key);
    out.push(...(moved.length > 0 ? moved : [key]));
  }
  return [...new Set(out)].sort(compare);
}
