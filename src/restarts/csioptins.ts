// Which SecretProviderClasses a workload opts in to restarts for: Reloader's
// auto, typed auto, reload-list and search annotations for the kind
// `secretproviderclass`, its exclude list, and `ignore` on the class. Pure;
// the twin of optins.ts for the one kind that is not a ConfigMap or Secret,
// with the same rules and the same helpers (references.ts).
import type { GoRegexp } from '../runtime/go/regexp.ts';
import {
  RELOADER_AUTO_ANNOTATION,
  RELOADER_IGNORE_ANNOTATION,
  RELOADER_MATCH_ANNOTATION,
  RELOADER_SEARCH_ANNOTATION,
} from '../vocabulary/keys.ts';
import type { WatchedConfigs, WatchReason, WorkloadLike } from './optins.ts';
import { classKey, classReferences, type ClassReference } from './csireferences.ts';
import {
  MAX_RELOAD_ENTRIES,
  type PodTemplateSpec,
  asRecord,
  asString,
  compare,
  compileEntry,
  isDnsSubdomain,
  parseReloaderBool,
  safe,
  splitList,
  stringRecord,
} from './references.ts';

/** Reloader's annotation names for the kind (its flags cannot rename them). */
export const CLASS_AUTO_ANNOTATION = 'secretproviderclass.reloader.stakater.com/auto';
export const CLASS_RELOAD_ANNOTATION = 'secretproviderclass.reloader.stakater.com/reload';
export const CLASS_EXCLUDE_ANNOTATION = 'secretproviderclasses.exclude.reloader.stakater.com/reload';

export interface ClassWatchOptions {
  /** Metadata of a SecretProviderClass, or undefined when not known: for `ignore` and `match`. */
  classMeta?: (namespace: string, name: string) => { annotations?: Record<string, string> } | undefined;
  /** Names of the classes known in a namespace, to expand reload-list patterns. */
  classNames?: (namespace: string) => Iterable<string>;
  /** Reloader's --auto-reload-all. */
  autoReloadAll?: boolean;
  /**
   * Reloader's renames (--auto-annotation, --auto-search-annotation,
   * --search-match-annotation, --ignore-annotation), which apply to classes
   * as to ConfigMaps and Secrets; the class-only keys cannot be renamed.
   */
  keys?: Partial<Record<'auto' | 'search' | 'match' | 'ignore', string>>;
}

export interface WatchedClass {
  key: string;
  namespace: string;
  name: string;
  /** The template's use; undefined for a reload-list name the pods do not mount. */
  reference: ClassReference | undefined;
  /** Sorted. */
  reasons: WatchReason[];
}

export interface ClassPattern {
  namespace: string;
  source: string;
  regex: GoRegexp;
}

export interface WatchedClasses {
  /** Sorted keys ("secretproviderclass/<ns>/<name>"). */
  keys: string[];
  /** One per key, same order. */
  classes: WatchedClass[];
  /** Classes an opt-in selected but an exclusion removed, sorted by key. */
  excluded: { key: string; reason: 'ignore-annotation' | 'exclude-list' }[];
  /** Reload-list patterns: a class created later that matches is watched too (classPatternMatches). */
  patterns: ClassPattern[];
  /** Every opt-in in effect, sorted; empty when the workload has not opted in for classes. */
  optIns: WatchReason[];
  /** Malformed values, in a fixed order. */
  warnings: string[];
}

/**
 * The SecretProviderClasses a workload is restarted for. Never throws: bad
 * values become warnings. Reloader's rules (ShouldReload, for the type
 * SECRETPROVIDERCLASS), as optins.ts applies them to ConfigMaps and Secrets:
 *  1. reloader.stakater.com/ignore: "true" on the class excludes it;
 *  2. a name in secretproviderclasses.exclude.reloader.stakater.com/reload
 *     (exact names, workload metadata only) excludes it; both win over every
 *     opt-in;
 *  3. secretproviderclass.reloader.stakater.com/reload: entries are Go
 *     regexes matched against the whole name (optins.ts says how and why
 *     this anchoring differs from Reloader's), a class mounted or not;
 *  4. reloader.stakater.com/search: "true" watches mounted classes that
 *     carry reloader.stakater.com/match: "true";
 *  5. reloader.stakater.com/auto or secretproviderclass.reloader.stakater.com/auto
 *     (Go ParseBool) watches every mounted class; with autoReloadAll, a
 *     workload where neither is set is treated as auto.
 * The reload, auto, typed auto and search keys are read from the workload's
 * metadata unless none of them is there, then from the pod template's
 * annotations. xing's opt-in does not cover classes: xing never followed
 * them, and a xing user did not ask for CSI restarts.
 */
export function watchedClasses(workload: WorkloadLike, options: ClassWatchOptions = {}): WatchedClasses {
  const meta = asRecord(asRecord(workload)?.metadata);
  const workloadName = asString(meta?.name) || '<unnamed>';
  const namespace = asString(meta?.namespace);
  const annotations = stringRecord(meta?.annotations);
  const template = asRecord(asRecord(workload)?.spec)?.template as PodTemplateSpec | undefined;
  const templateAnnotations = stringRecord(asRecord(asRecord(template)?.metadata)?.annotations);
  const keys = {
    auto: options.keys?.auto ?? RELOADER_AUTO_ANNOTATION,
    search: options.keys?.search ?? RELOADER_SEARCH_ANNOTATION,
    match: options.keys?.match ?? RELOADER_MATCH_ANNOTATION,
    ignore: options.keys?.ignore ?? RELOADER_IGNORE_ANNOTATION,
  };
  const onMetadata = [CLASS_RELOAD_ANNOTATION, keys.auto, CLASS_AUTO_ANNOTATION, keys.search].some(
    (k) => annotations[k] !== undefined,
  );
  const warned = new Set<string>();
  const s: ClassSelection = {
    namespace,
    options,
    keys,
    references: safe(() => classReferences(template, namespace), []),
    selected: new Map(),
    optIns: new Set(),
    patterns: [],
    source: onMetadata ? annotations : templateAnnotations,
    where: onMetadata ? '' : ' (pod template)',
    warnings: [],
    warn: (msg) => {
      if (warned.has(msg)) return;
      warned.add(msg);
      s.warnings.push(`${workloadName}: ${msg}`);
    },
  };
  selectByReloadList(s);
  selectBySearch(s);
  selectByAuto(s);
  return result(s, removeExcluded(s, annotations));
}

interface ClassSelection {
  namespace: string;
  options: ClassWatchOptions;
  keys: Record<'auto' | 'search' | 'match' | 'ignore', string>;
  references: ClassReference[];
  /** By name. */
  selected: Map<string, Set<WatchReason>>;
  optIns: Set<WatchReason>;
  patterns: ClassPattern[];
  /** The annotations the opt-ins are read from (metadata, or the template's). */
  source: Record<string, string>;
  where: string;
  warnings: string[];
  warn: (msg: string) => void;
}

function select(s: ClassSelection, name: string, reason: WatchReason): void {
  const reasons = s.selected.get(name) ?? new Set<WatchReason>();
  reasons.add(reason);
  s.selected.set(name, reasons);
}

function classAnnotations(s: ClassSelection, name: string): Record<string, string> {
  return stringRecord(asRecord(safe(() => s.options.classMeta?.(s.namespace, name), undefined))?.annotations);
}

function selectByReloadList(s: ClassSelection): void {
  const list = s.source[CLASS_RELOAD_ANNOTATION];
  if (list === undefined) return;
  let existing: string[] | undefined;
  const existingNames = (): string[] => (existing ??= safe(() => [...(s.options.classNames?.(s.namespace) ?? [])], []));
  const entries = splitList(list);
  if (entries.length > MAX_RELOAD_ENTRIES)
    s.warn(
      `${CLASS_RELOAD_ANNOTATION}${s.where} has ${entries.length} entries; only the first ${MAX_RELOAD_ENTRIES} are read`,
    );
  for (const entry of entries.slice(0, MAX_RELOAD_ENTRIES)) {
    const compiled = compileEntry(entry);
    if ('warning' in compiled) {
      s.warn(`${CLASS_RELOAD_ANNOTATION}${s.where}: entry ${JSON.stringify(entry)} ${compiled.warning}; ignored`);
      continue;
    }
    s.optIns.add('reloader-reload-list');
    if (isDnsSubdomain(entry)) select(s, entry, 'reloader-reload-list');
    if (/^[a-z0-9-]+$/.test(entry)) continue;
    s.patterns.push({ namespace: s.namespace, source: entry, regex: compiled.regex });
    for (const r of s.references) if (compiled.regex.matchWhole(r.name)) select(s, r.name, 'reloader-reload-list');
    for (const name of existingNames())
      if (typeof name === 'string' && compiled.regex.matchWhole(name)) select(s, name, 'reloader-reload-list');
  }
}

function selectBySearch(s: ClassSelection): void {
  const search = s.source[s.keys.search];
  if (search === 'true') {
    s.optIns.add('reloader-search');
    for (const r of s.references)
      if (classAnnotations(s, r.name)[s.keys.match] === 'true') select(s, r.name, 'reloader-search');
  } else if (search !== undefined && search !== 'false' && search !== '') {
    s.warn(`${s.keys.search}${s.where}=${JSON.stringify(search)} is not "true"; search mode off`);
  }
}

function selectByAuto(s: ClassSelection): void {
  const autoRaw = s.source[s.keys.auto] ?? '';
  const typedRaw = s.source[CLASS_AUTO_ANNOTATION] ?? '';
  const auto = parseReloaderBool(autoRaw);
  const typed = parseReloaderBool(typedRaw);
  if (auto === undefined)
    s.warn(`${s.keys.auto}${s.where}=${JSON.stringify(autoRaw)} is not a boolean; treated as false`);
  if (typed === undefined)
    s.warn(`${CLASS_AUTO_ANNOTATION}${s.where}=${JSON.stringify(typedRaw)} is not a boolean; treated as false`);
  const reason: WatchReason | undefined =
    auto === true
      ? 'reloader-auto'
      : typed === true
        ? 'reloader-typed-auto'
        : autoRaw === '' && typedRaw === '' && s.options.autoReloadAll === true
          ? 'reloader-auto-all'
          : undefined;
  if (!reason) return;
  s.optIns.add(reason);
  for (const r of s.references) select(s, r.name, reason);
}

function removeExcluded(s: ClassSelection, annotations: Record<string, string>): WatchedClasses['excluded'] {
  const excluded: WatchedClasses['excluded'] = [];
  const excludeList = new Set(splitList(annotations[CLASS_EXCLUDE_ANNOTATION] ?? ''));
  for (const name of [...s.selected.keys()]) {
    const key = classKey(s.namespace, name);
    if (classAnnotations(s, name)[s.keys.ignore] === 'true') {
      excluded.push({ key, reason: 'ignore-annotation' });
      s.selected.delete(name);
    } else if (excludeList.has(name)) {
      excluded.push({ key, reason: 'exclude-list' });
      s.selected.delete(name);
    }
  }
  return excluded.sort((a, b) => compare(a.key, b.key));
}

function result(s: ClassSelection, excluded: WatchedClasses['excluded']): WatchedClasses {
  const byName = new Map(s.references.map((r) => [r.name, r]));
  const classes: WatchedClass[] = [...s.selected.entries()]
    .map(([name, reasons]) => ({
      key: classKey(s.namespace, name),
      namespace: s.namespace,
      name,
      reference: byName.get(name),
      reasons: [...reasons].sort(compare),
    }))
    .sort((a, b) => compare(a.key, b.key));
  return {
    keys: classes.map((c) => c.key),
    classes,
    excluded,
    patterns: s.patterns.sort((a, b) => compare(a.source, b.source)),
    optIns: [...s.optIns].sort(compare),
    warnings: s.warnings,
  };
}

/** Whether a class of this name in `namespace` matches one of the workload's reload-list patterns. */
export function classPatternMatches(
  watched: Pick<WatchedClasses, 'patterns'>,
  namespace: string,
  name: string,
): boolean {
  return watched.patterns.some((p) => p.namespace === namespace && p.regex.matchWhole(name));
}

/** A workload's watched ConfigMaps and Secrets together with its watched classes. */
export type WatchedWithClasses = WatchedConfigs & { classes: WatchedClasses };

/**
 * The two selections as one, for the restart decision: every key (sorted as
 * restartplan.ts sorts them), every opt-in, exclusion and warning; `configs`
 * and `patterns` stay the ConfigMaps' and Secrets' (the classes' are in
 * `classes`). A workload opted in to either kind is opted in. Without
 * `classes` (the CSI integration off), the configs' selection as it is.
 */
export function withClasses(configs: WatchedConfigs, classes: WatchedClasses = noClasses()): WatchedWithClasses {
  return {
    ...configs,
    keys: [...configs.keys, ...classes.keys].sort(compare),
    excluded: [...configs.excluded, ...classes.excluded].sort((a, b) => compare(a.key, b.key)),
    optIns: [...new Set([...configs.optIns, ...classes.optIns])].sort(compare),
    warnings: [...configs.warnings, ...classes.warnings],
    classes,
  };
}

/** No class watched: what a workload has with the CSI integration off. */
export function noClasses(): WatchedClasses {
  return { keys: [], classes: [], excluded: [], patterns: [], optIns: [], warnings: [] };
}
