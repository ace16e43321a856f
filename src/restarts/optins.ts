// Which configs a workload opts in to restarts for: xing's one annotation,
// or Reloader's auto, reload-list, search/match and exclude annotations, on
// the workload or its pod template.
import { type GoRegexp } from '../runtime/go/regexp.ts';
import {
  RELOADER_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_AUTO_ANNOTATION,
  RELOADER_CONFIGMAP_EXCLUDE_ANNOTATION,
  RELOADER_CONFIGMAP_RELOAD_ANNOTATION,
  RELOADER_IGNORE_ANNOTATION,
  RELOADER_MATCH_ANNOTATION,
  RELOADER_SEARCH_ANNOTATION,
  RELOADER_SECRET_AUTO_ANNOTATION,
  RELOADER_SECRET_EXCLUDE_ANNOTATION,
  RELOADER_SECRET_RELOAD_ANNOTATION,
  XING_ENABLED_ANNOTATION,
  XING_ENABLED_VALUE,
} from '../vocabulary/keys.ts';
import {
  type ConfigSelector,
  configSelectors,
  type LabelledConfig,
  SELECTOR_ANNOTATIONS,
  selectedNames,
  selectedSet,
  type SelectedSet,
} from './selectedconfigs.ts';
import {
  type ConfigKind,
  type ConfigReference,
  MAX_RELOAD_ENTRIES,
  type PodTemplateSpec,
  asRecord,
  asString,
  compare,
  compileEntry,
  configAnnotations,
  configKey,
  configReferences,
  isDnsSubdomain,
  parseReloaderBool,
  safe,
  splitList,
  stringRecord,
} from './references.ts';

/** Reloader opt-ins for CSI SecretProviderClasses, which Stateward does not follow. */
const RELOADER_UNSUPPORTED_ANNOTATIONS = [
  'secretproviderclass.reloader.stakater.com/auto',
  'secretproviderclass.reloader.stakater.com/reload',
] as const;

const PER_KIND = {
  configmap: {
    auto: RELOADER_CONFIGMAP_AUTO_ANNOTATION,
    reload: RELOADER_CONFIGMAP_RELOAD_ANNOTATION,
    exclude: RELOADER_CONFIGMAP_EXCLUDE_ANNOTATION,
  },
  secret: {
    auto: RELOADER_SECRET_AUTO_ANNOTATION,
    reload: RELOADER_SECRET_RELOAD_ANNOTATION,
    exclude: RELOADER_SECRET_EXCLUDE_ANNOTATION,
  },
} as const satisfies Record<ConfigKind, { auto: string; reload: string; exclude: string }>;

const KINDS: readonly ConfigKind[] = ['configmap', 'secret'];

// ---------------------------------------------------------------------------
// Opt-ins

/** Why a config is watched. */
export type WatchReason =
  | 'xing'
  | 'reloader-auto'
  | 'reloader-typed-auto'
  | 'reloader-auto-all'
  | 'reloader-reload-list'
  | 'reloader-search'
  /** stateward.dev/config-restart-configmap-selector / …-secret-selector (selectedconfigs.ts). */
  | 'stateward-selector';

/** The slice of a workload this module reads: its metadata and pod template (workloadkinds.ts `view`). */
export interface WorkloadLike {
  metadata?: { name?: string; namespace?: string; annotations?: Record<string, string> };
  spec?: { template?: PodTemplateSpec };
}

export interface WatchOptions {
  /**
   * Metadata of a ConfigMap or Secret, or undefined when it is not known (not
   * seen yet, or absent). Needed for reloader.stakater.com/ignore and
   * reloader.stakater.com/match; without it nothing is ignored and search
   * mode matches nothing.
   */
  configMeta?: (
    kind: ConfigKind,
    namespace: string,
    name: string,
  ) => { annotations?: Record<string, string> } | undefined;
  /**
   * Names of the existing ConfigMaps (or Secrets) in a namespace. Used to
   * expand reload-list entries that are regular expressions rather than
   * plain names.
   */
  configNames?: (kind: ConfigKind, namespace: string) => Iterable<string>;
  /**
   * The existing ConfigMaps (or Secrets) of a namespace with their labels:
   * what the selector annotations are matched against. Without it they
   * match nothing (their membership entry is then the empty set's).
   */
  configsOf?: (kind: ConfigKind, namespace: string) => Iterable<LabelledConfig>;
  /** Reloader's --auto-reload-all. */
  autoReloadAll?: boolean;
  /** --enable-csi-integration: the secretproviderclass opt-ins are read (csioptins.ts), not warned about. */
  csiIntegration?: boolean;
}

export interface WatchedConfig {
  key: string;
  kind: ConfigKind;
  namespace: string;
  name: string;
  /** The template's reference; undefined for a reload-list name the pods do not use. */
  reference: ConfigReference | undefined;
  /** Sorted. */
  reasons: WatchReason[];
}

export interface ExcludedConfig {
  key: string;
  reason: 'ignore-annotation' | 'exclude-list';
}

/** A reload-list entry that is a pattern rather than a plain name. */
export interface ReloadPattern {
  kind: ConfigKind;
  namespace: string;
  /** The entry as written. */
  source: string;
  /** A Go regular expression (as Reloader's), matched against whole names. */
  regex: GoRegexp;
}

export interface WatchedConfigs {
  /** Sorted keys of the watched configs: what the applied-checksums annotation should hold. */
  keys: string[];
  /** One per key, same order. */
  configs: WatchedConfig[];
  /** Configs an opt-in would have selected but an exclusion removed, sorted by key. */
  excluded: ExcludedConfig[];
  /**
   * Reload-list patterns: a config of that kind in the workload's namespace
   * whose name matches is watched, referenced or not. Those that exist per
   * WatchOptions.configNames are already in `keys`; a config created later
   * needs patternMatches and a fresh watchedConfigs.
   */
  patterns: ReloadPattern[];
  /**
   * The selector annotations' results, configmap first: the matching configs
   * are in `keys` already; each set's membership entry (key → checksum) goes
   * into the applied record beside them. A config created or relabelled
   * later needs a fresh watchedConfigs, as for patterns.
   */
  selected: SelectedSet[];
  /** Every opt-in in effect, sorted; empty when the workload has not opted in. */
  optIns: WatchReason[];
  /** Malformed or unsupported annotation values, in a fixed order. */
  warnings: string[];
}

/**
 * A cheap first look, for callers that see every workload update: false
 * means watchedConfigs would find no opt-in (no xing or Reloader annotation
 * on the workload or its template), so its references need not be walked.
 */
export function mayOptIn(workload: WorkloadLike, options: Pick<WatchOptions, 'autoReloadAll'> = {}): boolean {
  if (options.autoReloadAll) return true;
  const relevant = (annotations: Record<string, string> | undefined) =>
    Object.keys(annotations ?? {}).some(
      (key) => key === XING_ENABLED_ANNOTATION || key.includes('reloader.stakater.com/'),
    );
  const metadata = workload.metadata?.annotations ?? {};
  const selects = Object.values(SELECTOR_ANNOTATIONS).some((key) => metadata[key] !== undefined);
  return selects || relevant(metadata) || relevant(workload.spec?.template?.metadata?.annotations);
}

/**
 * The configs a workload is restarted for, combining xing's and Reloader's
 * opt-ins as a union. Never throws: bad values become warnings.
 *
 * Semantics, in the precedence order Reloader's README documents, per config:
 *  1. reloader.stakater.com/ignore: "true" (exactly) on the ConfigMap/Secret
 *     excludes it, and
 *  2. a name in configmaps./secrets.exclude.reloader.stakater.com/reload
 *     (comma-separated exact names, trimmed; workload metadata only) excludes
 *     it. Both are explicit opt-outs, so they win over every opt-in here,
 *     xing's included (xing has no opt-out of its own).
 *  3. configmap./secret.reloader.stakater.com/reload: comma-separated
 *     entries, each trimmed and matched against the whole name. These add
 *     configs whether or not the template references them, as in Reloader, and do not
 *     restrict the auto modes: a referenced config not in the list is still
 *     watched under auto. Entries are Go regexes in Reloader, and are here
 *     too: compiled and matched with Go's RE2 semantics in linear time
 *     (src/runtime/go/regexp.ts), against the whole name (Reloader
 *     concatenates "^" + entry + "$", which leaves a|b anchored at one end
 *     only; we anchor the whole entry). Entries Go would refuse (lookaround,
 *     backreferences, unbalanced parentheses…) are skipped with a warning
 *     giving Go's error, as Reloader reports invalid regexes (PR #1193).
 *     Empty entries are skipped silently,
 *     as in Reloader. As there, the list is split on every comma, so an
 *     entry cannot contain one ({n,m} is not expressible). Only the first
 *     256 entries are read (with a warning): each costs a compile.
 *  4. reloader.stakater.com/search: "true" watches referenced configs that
 *     carry reloader.stakater.com/match: "true".
 *  5. reloader.stakater.com/auto or the typed configmap./secret. auto, parsed
 *     like Go's strconv.ParseBool, watches every referenced config of the
 *     kinds it covers. With autoReloadAll, a workload where neither is set
 *     (or both are empty) is treated as auto; "false" opts out of that.
 *  xing: com.xing.deployment-restart: enabled (exactly, metadata only)
 *     watches every referenced config.
 *
 * Like Reloader, the reload, auto, typed auto and search keys are read from
 * the workload's metadata, unless none of them (per kind) is present there,
 * in which case the pod template's annotations are read instead. Presence
 * decides, not value: an empty reload list on the metadata still stops the
 * fallback.
 */
export function watchedConfigs(workload: WorkloadLike, options: WatchOptions = {}): WatchedConfigs {
  const warnings: string[] = [];
  const meta = asRecord(asRecord(workload)?.metadata);
  const workloadName = asString(meta?.name) || '<unnamed>';
  const namespace = asString(meta?.namespace);
  const warn = (msg: string): void => {
    warnings.push(`${workloadName}: ${msg}`);
  };
  if (namespace === '') warn('has no namespace; config keys will have an empty namespace');

  const spec = asRecord(asRecord(workload)?.spec);
  const annotations = stringRecord(meta?.annotations);
  const templateAnnotations = stringRecord(asRecord(asRecord(spec?.template)?.metadata)?.annotations);
  const template = spec?.template as PodTemplateSpec | undefined;
  const selection: Selection = {
    namespace,
    options,
    references: safe(() => configReferences(template, namespace), []),
    selected: new Map(),
    optIns: new Set(),
    patterns: [],
    selectors: [],
    warn,
  };

  selectForXing(selection, annotations);
  if (!options.csiIntegration) warnUnsupported(selection, annotations, templateAnnotations);
  selectForReloader(selection, annotations, templateAnnotations);
  selectBySelectors(selection, annotations);
  const excluded = removeExcluded(selection, annotations);
  return watchResult(selection, excluded, warnings);
}

/** What watchedConfigs' steps share: the workload's facts, and the selection they add to. */
interface Selection {
  namespace: string;
  options: WatchOptions;
  /** The pod template's references. */
  references: ConfigReference[];
  /** By key. */
  selected: Map<string, { kind: ConfigKind; name: string; reasons: Set<WatchReason> }>;
  optIns: Set<WatchReason>;
  patterns: ReloadPattern[];
  /** The selector annotations and the names each matched (before exclusions). */
  selectors: { selector: ConfigSelector; names: string[] }[];
  warn: (msg: string) => void;
}

function select(selection: Selection, kind: ConfigKind, name: string, reason: WatchReason): void {
  const key = configKey(kind, selection.namespace, name);
  const entry = selection.selected.get(key) ?? { kind, name, reasons: new Set<WatchReason>() };
  entry.reasons.add(reason);
  selection.selected.set(key, entry);
}

function selectForXing(selection: Selection, annotations: Record<string, string>): void {
  const xing = annotations[XING_ENABLED_ANNOTATION];
  if (xing === XING_ENABLED_VALUE) {
    selection.optIns.add('xing');
    for (const r of selection.references) select(selection, r.kind, r.name, 'xing');
  } else if (xing !== undefined && xing !== 'disabled') {
    selection.warn(`${XING_ENABLED_ANNOTATION}=${JSON.stringify(xing)} is not "${XING_ENABLED_VALUE}"; not opted in`);
  }
}

function warnUnsupported(
  selection: Selection,
  annotations: Record<string, string>,
  templateAnnotations: Record<string, string>,
): void {
  for (const ann of RELOADER_UNSUPPORTED_ANNOTATIONS) {
    if (annotations[ann] !== undefined || templateAnnotations[ann] !== undefined)
      selection.warn(`${ann} is not supported (CSI SecretProviderClasses are not followed); ignored`);
  }
}

/** Where and how one kind's Reloader opt-ins are read. */
interface KindScope {
  kind: ConfigKind;
  keys: (typeof PER_KIND)[ConfigKind];
  /** The metadata's annotations, or the pod template's when none of this kind's keys is on the metadata. */
  source: Record<string, string>;
  /** Appended to annotation names in warnings: which annotations were read. */
  where: string;
  /** The template's references of this kind. */
  ofKind: ConfigReference[];
  warnOnce: (msg: string) => void;
}

function selectForReloader(
  selection: Selection,
  annotations: Record<string, string>,
  templateAnnotations: Record<string, string>,
): void {
  // One warning per message: the kind-neutral keys (auto, search) are read
  // for each kind, and a reload list may repeat a bad entry.
  const warned = new Set<string>();
  const warnOnce = (msg: string): void => {
    if (warned.has(msg)) return;
    warned.add(msg);
    selection.warn(msg);
  };
  for (const kind of KINDS) {
    const keys = PER_KIND[kind];
    const onMetadata = [keys.reload, RELOADER_AUTO_ANNOTATION, keys.auto, RELOADER_SEARCH_ANNOTATION].some(
      (k) => annotations[k] !== undefined,
    );
    const scope: KindScope = {
      kind,
      keys,
      source: onMetadata ? annotations : templateAnnotations,
      where: onMetadata ? '' : ' (pod template)',
      ofKind: selection.references.filter((r) => r.kind === kind),
      warnOnce,
    };
    selectByReloadList(selection, scope);
    selectBySearch(selection, scope);
    selectByAuto(selection, scope);
  }
}

function selectByReloadList(selection: Selection, scope: KindScope): void {
  const { kind, keys, source, where, warnOnce } = scope;
  const list = source[keys.reload];
  if (list === undefined) return;
  // Listed only when some entry is a pattern, and then once per kind.
  let existing: string[] | undefined;
  const existingNames = (): string[] =>
    (existing ??= safe(() => [...(selection.options.configNames?.(kind, selection.namespace) ?? [])], []));
  const entries = splitList(list);
  if (entries.length > MAX_RELOAD_ENTRIES)
    warnOnce(`${keys.reload}${where} has ${entries.length} entries; only the first ${MAX_RELOAD_ENTRIES} are read`);
  for (const entry of entries.slice(0, MAX_RELOAD_ENTRIES)) {
    const compiled = compileEntry(entry);
    if ('warning' in compiled) {
      warnOnce(`${keys.reload}${where}: entry ${JSON.stringify(entry)} ${compiled.warning}; ignored`);
      continue;
    }
    selection.optIns.add('reloader-reload-list');
    if (isDnsSubdomain(entry)) select(selection, kind, entry, 'reloader-reload-list');
    if (!/^[a-z0-9-]+$/.test(entry)) {
      selection.patterns.push({ kind, namespace: selection.namespace, source: entry, regex: compiled.regex });
      selectByPattern(selection, scope, compiled.regex, existingNames);
    }
  }
}

/** Referenced and existing configs of this kind whose whole name matches a reload-list pattern. */
function selectByPattern(
  selection: Selection,
  { kind, ofKind }: KindScope,
  regex: GoRegexp,
  existingNames: () => string[],
): void {
  for (const r of ofKind) if (regex.matchWhole(r.name)) select(selection, kind, r.name, 'reloader-reload-list');
  for (const name of existingNames()) {
    if (typeof name === 'string' && regex.matchWhole(name)) select(selection, kind, name, 'reloader-reload-list');
  }
}

function selectBySearch(selection: Selection, { kind, source, where, ofKind, warnOnce }: KindScope): void {
  const search = source[RELOADER_SEARCH_ANNOTATION];
  if (search === 'true') {
    selection.optIns.add('reloader-search');
    for (const r of ofKind) {
      if (configAnnotations(selection.options, kind, selection.namespace, r.name)[RELOADER_MATCH_ANNOTATION] === 'true')
        select(selection, kind, r.name, 'reloader-search');
    }
  } else if (search !== undefined && search !== 'false' && search !== '') {
    warnOnce(`${RELOADER_SEARCH_ANNOTATION}${where}=${JSON.stringify(search)} is not "true"; search mode off`);
  }
}

/** reloader.stakater.com/auto, the typed auto, and --auto-reload-all. */
function selectByAuto(selection: Selection, { kind, keys, source, where, ofKind, warnOnce }: KindScope): void {
  const autoRaw = source[RELOADER_AUTO_ANNOTATION] ?? '';
  const typedRaw = source[keys.auto] ?? '';
  const auto = parseReloaderBool(autoRaw);
  const typed = parseReloaderBool(typedRaw);
  if (auto === undefined)
    warnOnce(`${RELOADER_AUTO_ANNOTATION}${where}=${JSON.stringify(autoRaw)} is not a boolean; treated as false`);
  if (typed === undefined)
    warnOnce(`${keys.auto}${where}=${JSON.stringify(typedRaw)} is not a boolean; treated as false`);
  const reason: WatchReason | undefined =
    auto === true
      ? 'reloader-auto'
      : typed === true
        ? 'reloader-typed-auto'
        : autoRaw === '' && typedRaw === '' && selection.options.autoReloadAll === true
          ? 'reloader-auto-all'
          : undefined;
  if (reason) {
    selection.optIns.add(reason);
    for (const r of ofKind) select(selection, kind, r.name, reason);
  }
}

/**
 * stateward.dev/config-restart-configmap-selector / …-secret-selector: the
 * matching configs of the namespace, referenced or not (selectedconfigs.ts).
 * A valid selector opts in even while it matches nothing, so the first
 * matching config created restarts (its membership entry was recorded).
 */
function selectBySelectors(selection: Selection, annotations: Record<string, string>): void {
  const { selectors, warnings } = configSelectors(annotations, selection.namespace);
  for (const w of warnings) selection.warn(w);
  for (const selector of selectors) {
    const configs = safe(() => [...(selection.options.configsOf?.(selector.kind, selection.namespace) ?? [])], []);
    const names = selectedNames(selector, configs);
    selection.optIns.add('stateward-selector');
    selection.selectors.push({ selector, names });
    for (const name of names) select(selection, selector.kind, name, 'stateward-selector');
  }
}

/** Drops the selected configs an exclusion applies to, and says which and why. */
function removeExcluded(selection: Selection, annotations: Record<string, string>): ExcludedConfig[] {
  const excluded: ExcludedConfig[] = [];
  const excludeLists: Record<ConfigKind, Set<string>> = {
    configmap: new Set(splitList(annotations[PER_KIND.configmap.exclude] ?? '')),
    secret: new Set(splitList(annotations[PER_KIND.secret.exclude] ?? '')),
  };
  for (const [key, { kind, name }] of selection.selected) {
    if (configAnnotations(selection.options, kind, selection.namespace, name)[RELOADER_IGNORE_ANNOTATION] === 'true') {
      excluded.push({ key, reason: 'ignore-annotation' });
      selection.selected.delete(key);
    } else if (excludeLists[kind].has(name)) {
      excluded.push({ key, reason: 'exclude-list' });
      selection.selected.delete(key);
    }
  }
  return excluded;
}

/** The selection in watchedConfigs' fixed order. */
function watchResult(selection: Selection, excluded: ExcludedConfig[], warnings: string[]): WatchedConfigs {
  const { namespace, references, selected, optIns, patterns } = selection;
  // Excluded configs are not members either: their coming and going restarts nothing.
  const sets = selection.selectors.map(({ selector, names }) =>
    selectedSet(
      selector,
      names.filter((name) => selected.has(configKey(selector.kind, namespace, name))),
    ),
  );
  const byKey = new Map(references.map((r) => [r.key, r]));
  const configs: WatchedConfig[] = [...selected.entries()]
    .sort(([a], [b]) => compare(a, b))
    .map(([key, { kind, name, reasons }]) => ({
      key,
      kind,
      namespace,
      name,
      reference: byKey.get(key),
      reasons: [...reasons].sort(compare),
    }));
  return {
    keys: configs.map((c) => c.key),
    configs,
    excluded: excluded.sort((a, b) => compare(a.key, b.key)),
    patterns: patterns.sort((a, b) => compare(a.kind, b.kind) || compare(a.source, b.source)),
    selected: sets,
    optIns: [...optIns].sort(compare),
    warnings,
  };
}

/**
 * Whether a config of this kind and name, in the workload's namespace,
 * matches one of its reload-list patterns: when such a config appears, the
 * workload's watchedConfigs must be recomputed.
 */
export function patternMatches(
  watched: Pick<WatchedConfigs, 'patterns'>,
  kind: ConfigKind,
  namespace: string,
  name: string,
): boolean {
  return watched.patterns.some((p) => p.kind === kind && p.namespace === namespace && p.regex.matchWhole(name));
}
