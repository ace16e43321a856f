// Reloader's command line and environment, so Reloader's own Helm chart and
// manifests start Stateward with only the image swapped. Go's flag syntax
// (ours) accepts `--name=value` and `--name value`, so Reloader's cobra flags
// are registered under their exact names, with Reloader's types: its
// string-typed booleans (`--reload-on-create=true`) stay strings, its string
// slices append across repeats as pflag's do.
//
// Each flag is honoured (mapped onto a Stateward setting), accepted with a
// notice logged once at start saying what Stateward does instead, or refused
// with a startup error naming the flag. docs/reloader-command-line.md has the
// table. Any Reloader flag, or the environment Reloader's chart always sets
// (RELOADER_NAMESPACE, RELOADER_DEPLOYMENT_NAME), turns config restarts on,
// as the Reloader binary does nothing else.
//
// `--namespaces`, `--namespaces-to-ignore`, `--namespace-selector`,
// `--webhook-url` and `--enable-csi-integration` are registered by the
// modules that implement them; they still count as Reloader flags here.
import type { Environment, Flag, FlagCodec, FlagSet } from '../runtime/flags/flagset.ts';
import type { LogFormat, LogLevel } from '../runtime/log/logger.ts';
import {
  EVICT_ONDELETE_ANNOTATION,
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
  XING_CHECKSUMS_ANNOTATION,
  XING_ENABLED_ANNOTATION,
  XING_TIMESTAMP_ANNOTATION,
} from '../vocabulary/keys.ts';
import { parseLabelSelector, qualifiedNameProblem } from '../vocabulary/selectors.ts';
import { DEFAULT_SCOPE, restartScope, type RestartScope } from './reloaderscope.ts';

/** Reloader flags other modules register (namespaces, webhook mode, CSI); they still make Stateward Reloader's drop-in. */
export const RELOADER_FLAGS_REGISTERED_ELSEWHERE = [
  'namespaces',
  'namespaces-to-ignore',
  'namespace-selector',
  'webhook-url',
  'enable-csi-integration',
] as const;

/** Environment variables Reloader's chart and manifests always set: their presence means a Reloader install. */
export const RELOADER_INSTALL_ENV = ['RELOADER_NAMESPACE', 'RELOADER_DEPLOYMENT_NAME'] as const;

/** Reloader's HTTP port: its chart's probes (/live, /metrics) and PodMonitor use it. */
export const RELOADER_HTTP_PORT = 9090;

/** The annotation keys Reloader lets its command line rename, by flag, with Reloader's defaults. */
export const RELOADER_ANNOTATION_FLAGS = {
  'auto-annotation': RELOADER_AUTO_ANNOTATION,
  'configmap-auto-annotation': RELOADER_CONFIGMAP_AUTO_ANNOTATION,
  'secret-auto-annotation': RELOADER_SECRET_AUTO_ANNOTATION,
  'configmap-annotation': RELOADER_CONFIGMAP_RELOAD_ANNOTATION,
  'secret-annotation': RELOADER_SECRET_RELOAD_ANNOTATION,
  'auto-search-annotation': RELOADER_SEARCH_ANNOTATION,
  'search-match-annotation': RELOADER_MATCH_ANNOTATION,
  'ignore-annotation': RELOADER_IGNORE_ANNOTATION,
  'pause-deployment-annotation': 'deployment.reloader.stakater.com/pause-period',
  'pause-deployment-time-annotation': 'deployment.reloader.stakater.com/paused-at',
} as const;

export type ReloaderAnnotationFlag = keyof typeof RELOADER_ANNOTATION_FLAGS;
export type ReloaderAnnotationKeys = Readonly<Record<ReloaderAnnotationFlag, string>>;

/**
 * Keys no rename may take: Reloader's keys that cannot be renamed, xing's,
 * and Stateward's own. A rename onto one would make one annotation mean two
 * things.
 */
const RESERVED_KEYS: ReadonlySet<string> = new Set([
  RELOADER_CONFIGMAP_EXCLUDE_ANNOTATION,
  RELOADER_SECRET_EXCLUDE_ANNOTATION,
  'secretproviderclasses.exclude.reloader.stakater.com/reload',
  'secretproviderclass.reloader.stakater.com/auto',
  'secretproviderclass.reloader.stakater.com/reload',
  'reloader.stakater.com/rollout-strategy',
  XING_ENABLED_ANNOTATION,
  XING_CHECKSUMS_ANNOTATION,
  XING_TIMESTAMP_ANNOTATION,
  EVICT_ONDELETE_ANNOTATION,
]);

export type EventReasons = 'stateward' | 'reloader';

/** Everything Reloader's command line and environment ask of Stateward, resolved. */
export interface ReloaderSettings {
  /** A Reloader flag or Reloader's install environment was given: config restarts run as Reloader's drop-in. */
  active: boolean;
  /** What made it active: `--flag` names and environment variable names, sorted. */
  activatedBy: readonly string[];
  /**
   * Reloader's install environment is present (its chart or manifests): the
   * pod is Reloader's, so its port and its watch of the whole cluster apply.
   * Reloader flags alone, added to Stateward's own install, change neither.
   */
  install: boolean;
  scope: RestartScope;
  /** Reloader's annotation keys after the renaming flags. */
  annotationKeys: ReloaderAnnotationKeys;
  /** The renaming flags given with a key other than Reloader's default. */
  renamedAnnotations: readonly ReloaderAnnotationFlag[];
  /** --log-format=json; undefined keeps Stateward's format. */
  logFormat: LogFormat | undefined;
  /** --log-level mapped onto Stateward's levels; undefined keeps Stateward's level. */
  logLevel: LogLevel | undefined;
  /** --enable-ha. */
  leaderElection: boolean;
  /** --enable-pprof. */
  pprof: boolean;
  /** RELOADER_NAMESPACE: the namespace Reloader runs in (its chart sets no POD_NAMESPACE without HA). */
  operatorNamespace: string | undefined;
  /** KUBERNETES_NAMESPACE: Reloader's single-namespace mode. */
  singleNamespace: string | undefined;
  /** METRICS_COUNT_BY_NAMESPACE=enabled: reloader_reload_executed_total_by_namespace is exported. */
  countByNamespace: boolean;
  /** The reasons the restart Events carry (-config-restarts.event-reasons, `auto` resolved). */
  eventReasons: EventReasons;
  /** Accepted without effect, or mapped with a difference worth knowing: log each once at start (warn). */
  notices: readonly string[];
  /** Refused: print and exit 2, as Reloader exits on the same mistakes. */
  errors: readonly string[];
}

// ---------------------------------------------------------------- parsing

/**
 * pflag's StringSlice: each occurrence is read as one CSV record (double
 * quotes may hold commas) and appended; an empty value adds nothing.
 */
export function splitReloaderList(text: string): string[] {
  if (text === '') return [];
  const out: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"' && field === '') quoted = true;
    else if (c === ',') {
      out.push(field);
      field = '';
    } else field += c;
  }
  out.push(field);
  return out;
}

const listCodec: FlagCodec<readonly string[]> = {
  parse: (text, current) => [...current, ...splitReloaderList(text)],
  format: (value) => `[${value.join(',')}]`,
  zeroText: '[]',
  typeName: 'strings',
};

/**
 * Reloader's --resource-label-selector: its items joined with commas (so a
 * set-based `env in (a,b)` that the CSV split cut survives), after its legacy
 * forms: `key:value` is `key=value`, `key:*` and `key=*` are `key` (exists).
 */
export function reloaderLabelSelectorText(items: readonly string[]): string {
  return items
    .map((item) => {
      const colon = item.indexOf(':');
      const converted = colon >= 0 ? legacyPair(item.slice(0, colon), item.slice(colon + 1)) : item;
      const equals = converted.indexOf('=');
      if (equals >= 0 && converted.slice(equals + 1) === '*' && !'!='.includes(converted[equals - 1] ?? ''))
        return converted.slice(0, equals);
      return converted;
    })
    .join(',');
}

function legacyPair(key: string, value: string): string {
  return value === '*' ? key : `${key}=${value}`;
}

/** logrus.ParseLevel's names (case-insensitive) onto Stateward's four levels. */
export function mapReloaderLogLevel(text: string): LogLevel | undefined {
  switch (text.toLowerCase()) {
    case 'trace':
    case 'debug':
      return 'debug';
    case 'info':
      return 'info';
    case 'warn':
    case 'warning':
      return 'warn';
    case 'error':
    case 'fatal':
    case 'panic':
      return 'error';
    default:
      return undefined;
  }
}

// ---------------------------------------------------------------- the flags

/** The values of Reloader's flags as parsed; `given` names those on the command line. */
export interface ReloaderFlagValues {
  autoReloadAll: boolean;
  reloadStrategy: string;
  reloadOnCreate: string;
  reloadOnDelete: string;
  syncAfterRestart: boolean;
  resourcesToIgnore: readonly string[];
  ignoredWorkloadTypes: readonly string[];
  resourceLabelSelector: readonly string[];
  isArgoRollouts: string;
  logFormat: string;
  logLevel: string;
  enableHA: boolean;
  enablePprof: boolean;
  pprofAddr: string;
  annotations: ReloaderAnnotationKeys;
  /** -config-restarts.event-reasons. */
  eventReasons: 'auto' | EventReasons;
  given: ReadonlySet<string>;
}

export const RELOADER_DEFAULTS: Omit<ReloaderFlagValues, 'given'> = {
  autoReloadAll: false,
  reloadStrategy: 'env-vars',
  reloadOnCreate: 'false',
  reloadOnDelete: 'false',
  syncAfterRestart: false,
  resourcesToIgnore: [],
  ignoredWorkloadTypes: [],
  resourceLabelSelector: [],
  isArgoRollouts: 'false',
  logFormat: '',
  logLevel: 'info',
  enableHA: false,
  enablePprof: false,
  pprofAddr: ':6060',
  annotations: RELOADER_ANNOTATION_FLAGS,
  eventReasons: 'auto',
};

const NOTE = 'Reloader flag;';

/** Reloader's behaviour flags (what is restarted, and when). */
function registerBehaviourFlags(fs: FlagSet) {
  const d = RELOADER_DEFAULTS;
  return {
    autoReloadAll: fs.bool(
      'auto-reload-all',
      d.autoReloadAll,
      `${NOTE} treat every workload without an auto annotation as reloader.stakater.com/auto: "true".`,
    ),
    reloadStrategy: fs.string(
      'reload-strategy',
      d.reloadStrategy,
      `${NOTE} env-vars or annotations; both restart through Stateward's one applied record (no STAKATER_* variables, no last-reloaded-from).`,
    ),
    reloadOnCreate: fs.string(
      'reload-on-create',
      d.reloadOnCreate,
      `${NOTE} "true": a watched ConfigMap or Secret that appears after a workload was recorded without it restarts the workload.`,
    ),
    reloadOnDelete: fs.string(
      'reload-on-delete',
      d.reloadOnDelete,
      `${NOTE} "true": a watched ConfigMap or Secret that is deleted restarts the workloads that had it applied.`,
    ),
    syncAfterRestart: fs.bool(
      'sync-after-restart',
      d.syncAfterRestart,
      `${NOTE} no effect: the applied record on each workload already catches, once, every change made while Stateward was not running.`,
    ),
    resourcesToIgnore: fs.value(
      'resources-to-ignore',
      d.resourcesToIgnore,
      `${NOTE} configmaps or secrets (not both): that kind of config is not watched.`,
      listCodec,
    ),
    ignoredWorkloadTypes: fs.value(
      'ignored-workload-types',
      d.ignoredWorkloadTypes,
      `${NOTE} jobs and/or cronjobs: those workloads are not restarted.`,
      listCodec,
    ),
    resourceLabelSelector: fs.value(
      'resource-label-selector',
      d.resourceLabelSelector,
      `${NOTE} label selector: only the ConfigMaps and Secrets it selects are watched.`,
      listCodec,
    ),
    isArgoRollouts: fs.string('is-Argo-Rollouts', d.isArgoRollouts, `${NOTE} "true": Argo Rollouts are restarted too.`),
  };
}

/** Reloader's process flags (logging, HA, profiling) and Stateward's choice of Event reasons. */
function registerProcessFlags(fs: FlagSet) {
  const d = RELOADER_DEFAULTS;
  return {
    logFormat: fs.string(
      'log-format',
      d.logFormat,
      `${NOTE} json: JSON logs (as -log.format=json); empty keeps -log.format.`,
    ),
    logLevel: fs.string(
      'log-level',
      d.logLevel,
      `${NOTE} trace, debug, info, warning, error, fatal or panic, mapped onto -log.level.`,
    ),
    enableHA: fs.bool(
      'enable-ha',
      d.enableHA,
      `${NOTE} several replicas with leader election (-leader-election.enabled).`,
    ),
    enablePprof: fs.bool(
      'enable-pprof',
      d.enablePprof,
      `${NOTE} serve pprof profiles (-server.pprof.enabled: on the HTTP server, under /debug/pprof/).`,
    ),
    pprofAddr: fs.string(
      'pprof-addr',
      d.pprofAddr,
      `${NOTE} no effect: profiles are served on the HTTP server's port.`,
    ),
    eventReasons: fs.enumString(
      'config-restarts.event-reasons',
      d.eventReasons,
      ['auto', 'stateward', 'reloader'],
      "Reasons of the restart Events: stateward (ConfigChanged), reloader (Reloaded and ReloadFail, with Reloader's messages), or auto: reloader when a Reloader flag or Reloader's install environment is given.",
    ),
  };
}

/** Registers Reloader's flags on fs; after fs.parse(), read(env) resolves them. */
export function registerReloaderFlags(fs: FlagSet): { read: (env: Environment) => ReloaderSettings } {
  const b = registerBehaviourFlags(fs);
  const p = registerProcessFlags(fs);
  const annotations = registerAnnotationFlags(fs);
  return {
    read: (env) =>
      resolveReloaderSettings(
        {
          autoReloadAll: b.autoReloadAll.value,
          reloadStrategy: b.reloadStrategy.value,
          reloadOnCreate: b.reloadOnCreate.value,
          reloadOnDelete: b.reloadOnDelete.value,
          syncAfterRestart: b.syncAfterRestart.value,
          resourcesToIgnore: b.resourcesToIgnore.value,
          ignoredWorkloadTypes: b.ignoredWorkloadTypes.value,
          resourceLabelSelector: b.resourceLabelSelector.value,
          isArgoRollouts: b.isArgoRollouts.value,
          logFormat: p.logFormat.value,
          logLevel: p.logLevel.value,
          enableHA: p.enableHA.value,
          enablePprof: p.enablePprof.value,
          pprofAddr: p.pprofAddr.value,
          annotations: readAnnotationFlags(annotations),
          eventReasons: p.eventReasons.value,
          given: givenReloaderFlags(fs),
        },
        env,
      ),
  };
}

function registerAnnotationFlags(fs: FlagSet): Record<ReloaderAnnotationFlag, Flag<string>> {
  const out = {} as Record<ReloaderAnnotationFlag, Flag<string>>;
  for (const [name, key] of Object.entries(RELOADER_ANNOTATION_FLAGS) as [ReloaderAnnotationFlag, string][]) {
    out[name] = fs.string(name, key, `${NOTE} renames the annotation ${key}.`);
  }
  return out;
}

function readAnnotationFlags(flags: Record<ReloaderAnnotationFlag, Flag<string>>): ReloaderAnnotationKeys {
  return Object.fromEntries(Object.entries(flags).map(([name, flag]) => [name, flag.value])) as ReloaderAnnotationKeys;
}

/** Every Reloader flag name, this module's and the other modules'. */
export const RELOADER_FLAG_NAMES: readonly string[] = [
  'auto-reload-all',
  'reload-strategy',
  'reload-on-create',
  'reload-on-delete',
  'sync-after-restart',
  'resources-to-ignore',
  'ignored-workload-types',
  'resource-label-selector',
  'is-Argo-Rollouts',
  'log-format',
  'log-level',
  'enable-ha',
  'enable-pprof',
  'pprof-addr',
  ...Object.keys(RELOADER_ANNOTATION_FLAGS),
  ...RELOADER_FLAGS_REGISTERED_ELSEWHERE,
];

/** The Reloader flags on the command line (a flag another module has not registered counts as absent). */
function givenReloaderFlags(fs: FlagSet): Set<string> {
  const given = new Set<string>();
  for (const name of RELOADER_FLAG_NAMES) {
    try {
      if (fs.isSet(name)) given.add(name);
    } catch {
      // Not defined in this flag set: its module is not wired in.
    }
  }
  return given;
}

// ---------------------------------------------------------------- resolving

/** Pure: Reloader's flag values and environment to Stateward's settings, notices and errors. */
export function resolveReloaderSettings(v: ReloaderFlagValues, env: Environment): ReloaderSettings {
  const notices: string[] = [];
  const errors: string[] = [];
  const activatedBy = [
    ...[...v.given].sort().map((name) => `--${name}`),
    ...RELOADER_INSTALL_ENV.filter((name) => (env[name] ?? '') !== ''),
  ];
  const active = activatedBy.length > 0;
  const install = RELOADER_INSTALL_ENV.some((name) => (env[name] ?? '') !== '');
  const scope = active ? resolveScope(v, install, notices, errors) : DEFAULT_SCOPE;
  const keys = resolveAnnotationKeys(v.annotations, errors);
  if (v.reloadStrategy !== 'env-vars' && v.reloadStrategy !== 'annotations')
    errors.push(`--reload-strategy=${v.reloadStrategy}: must be one of env-vars, annotations (as in Reloader)`);
  notices.push(...strategyNotices(v), ...environmentNotices(env, v));
  return {
    active,
    activatedBy,
    install,
    scope,
    annotationKeys: keys.keys,
    renamedAnnotations: keys.renamed,
    logFormat: resolveLogFormat(v.logFormat, notices),
    logLevel: resolveLogLevel(v, notices),
    leaderElection: v.enableHA,
    pprof: v.enablePprof,
    operatorNamespace: nonEmpty(env['RELOADER_NAMESPACE']),
    singleNamespace: nonEmpty(env['KUBERNETES_NAMESPACE']),
    countByNamespace: env['METRICS_COUNT_BY_NAMESPACE'] === 'enabled',
    eventReasons: v.eventReasons === 'auto' ? (active ? 'reloader' : 'stateward') : v.eventReasons,
    notices,
    errors,
  };
}

const nonEmpty = (s: string | undefined) => (s === undefined || s === '' ? undefined : s);

/** Reloader reads its string booleans as `== "true"`; anything else is false there, and here, with a notice. */
function stringBool(flag: string, text: string, notices: string[]): boolean {
  if (text === 'true') return true;
  if (text !== 'false' && text !== '') {
    notices.push(`--${flag}=${text} is read as false, as Reloader reads every value but "true"`);
  }
  return false;
}

function resolveScope(v: ReloaderFlagValues, install: boolean, notices: string[], errors: string[]): RestartScope {
  const ignored = v.resourcesToIgnore.map((r) => r.toLowerCase());
  for (const r of v.resourcesToIgnore) {
    if (r.toLowerCase() !== 'configmaps' && r.toLowerCase() !== 'secrets')
      errors.push(`--resources-to-ignore=${r}: only configmaps or secrets can be ignored`);
  }
  if (new Set(ignored).size > 1)
    errors.push('--resources-to-ignore: configmaps or secrets can be ignored, not both (Reloader refuses it too)');
  for (const t of v.ignoredWorkloadTypes) {
    if (t !== 'jobs' && t !== 'cronjobs')
      errors.push(`--ignored-workload-types=${t}: only jobs and cronjobs can be ignored`);
  }
  const selectorText = reloaderLabelSelectorText(v.resourceLabelSelector);
  const selector = parseLabelSelector(selectorText);
  if (!selector.ok) errors.push(`--resource-label-selector: ${selector.error}`);
  return restartScope({
    autoReloadAll: v.autoReloadAll,
    reloadOnCreate: stringBool('reload-on-create', v.reloadOnCreate, notices),
    reloadOnDelete: stringBool('reload-on-delete', v.reloadOnDelete, notices),
    ignoredConfigKind: ignored[0] === 'configmaps' ? 'configmap' : ignored[0] === 'secrets' ? 'secret' : undefined,
    configSelector: selector.ok && selector.value.requirements.length > 0 ? selector.value : undefined,
    configSelectorText: selector.ok ? selectorText : '',
    // Reloader's install: its RBAC grants no patch on CronJobs or Jobs, which
    // their restarts write (reloaderinstall.ts); its notice says they are off.
    ignoreJobs: install || v.ignoredWorkloadTypes.includes('jobs'),
    ignoreCronJobs: install || v.ignoredWorkloadTypes.includes('cronjobs'),
    // Reloader's install restarts Rollouts only when asked; Stateward's own keeps its default unless told.
    argoRollouts: v.given.has('is-Argo-Rollouts')
      ? stringBool('is-Argo-Rollouts', v.isArgoRollouts, notices)
      : !install,
  });
}

/**
 * Each renamed key must be a valid annotation key, taken by no other role and
 * by none of the keys that cannot be renamed (Reloader's fixed ones, xing's,
 * Stateward's).
 */
function resolveAnnotationKeys(
  keys: ReloaderAnnotationKeys,
  errors: string[],
): { keys: ReloaderAnnotationKeys; renamed: ReloaderAnnotationFlag[] } {
  const renamed: ReloaderAnnotationFlag[] = [];
  const owners = new Map<string, ReloaderAnnotationFlag>();
  for (const flag of Object.keys(RELOADER_ANNOTATION_FLAGS) as ReloaderAnnotationFlag[]) {
    const key = keys[flag];
    if (key !== RELOADER_ANNOTATION_FLAGS[flag]) renamed.push(flag);
    const problem = qualifiedNameProblem(key);
    if (problem !== undefined) errors.push(`--${flag}=${key}: not an annotation key: ${problem}`);
    else if (RESERVED_KEYS.has(key)) errors.push(`--${flag}=${key}: that key already has a meaning of its own`);
    const other = owners.get(key);
    if (other !== undefined)
      errors.push(`--${flag}=${key}: the same key as --${other}; one annotation cannot mean both`);
    else owners.set(key, flag);
  }
  return { keys, renamed };
}

function resolveLogFormat(text: string, notices: string[]): LogFormat | undefined {
  if (text === 'json') return 'json';
  if (text !== '')
    notices.push(`--log-format=${text} is not a format; logs stay in the default format (Reloader also only warns)`);
  return undefined;
}

function resolveLogLevel(v: ReloaderFlagValues, notices: string[]): LogLevel | undefined {
  if (!v.given.has('log-level')) return undefined;
  const level = mapReloaderLogLevel(v.logLevel);
  if (level === undefined)
    notices.push(`--log-level=${v.logLevel} is not a level; the log level stays as it is (Reloader also only warns)`);
  else if (level !== v.logLevel.toLowerCase())
    notices.push(`--log-level=${v.logLevel} logs at Stateward's level ${level} (levels: debug, info, warn, error)`);
  return level;
}

function strategyNotices(v: ReloaderFlagValues): string[] {
  const out: string[] = [];
  if (v.given.has('reload-strategy')) {
    out.push(
      `--reload-strategy=${v.reloadStrategy} has no effect: a restart sets ${XING_TIMESTAMP_ANNOTATION} in the pod template and records what was applied in ${XING_CHECKSUMS_ANNOTATION} on the workload (no STAKATER_* variables, no last-reloaded-from)`,
    );
  }
  if (v.syncAfterRestart)
    out.push(
      '--sync-after-restart has no effect: the applied record on each workload catches, once, changes made while Stateward was not running',
    );
  if (v.given.has('pprof-addr'))
    out.push(
      `--pprof-addr=${v.pprofAddr} has no effect: profiles are served on the HTTP server's port under /debug/pprof/`,
    );
  return out;
}

function environmentNotices(env: Environment, v: ReloaderFlagValues): string[] {
  const out: string[] = [];
  if ((env['RELOADER_DEPLOYMENT_NAME'] ?? '') !== '')
    out.push(
      'RELOADER_DEPLOYMENT_NAME: no reloader-meta-info ConfigMap is published; `kubectl stateward status` describes the running operator',
    );
  if (v.enableHA && (env['POD_NAME'] ?? '') === '')
    out.push('--enable-ha without POD_NAME: the leader-election identity is the hostname');
  return out;
}

/**
 * Startup errors for renamed annotation keys the restart controller does not
 * read yet (`honoured`: the renaming flags it does read). Refusing beats
 * starting with a rename that silently matches nothing.
 */
export function unhonouredRenameErrors(
  settings: Pick<ReloaderSettings, 'renamedAnnotations' | 'annotationKeys'>,
  honoured: readonly ReloaderAnnotationFlag[],
): string[] {
  return settings.renamedAnnotations
    .filter((flag) => !honoured.includes(flag))
    .map(
      (flag) =>
        `--${flag}=${settings.annotationKeys[flag]}: Stateward does not read a renamed key for ${RELOADER_ANNOTATION_FLAGS[flag]} yet; keep Reloader's key, or leave the flag out`,
    );
}
