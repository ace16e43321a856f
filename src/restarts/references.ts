// Which ConfigMaps and Secrets a workload's pods use, and which of them the
// workload has opted in to be restarted for. Pure: callers pass in whatever
// they know about existing configs through WatchOptions.
//
// Opt-ins understood (names exactly as xing's and Reloader's READMEs spell them):
//   - xing: com.xing.deployment-restart: enabled, on the workload's metadata.
//     Every referenced ConfigMap and Secret is watched. Unlike xing (which reads
//     envFrom and plain configMap volumes only), every reference path counts, Secret volumes, valueFrom, projected
//     volumes and init containers included.
//   - Reloader: reloader.stakater.com/auto, configmap./secret.reloader.
//     stakater.com/auto, configmap./secret.reloader.stakater.com/reload,
//     reloader.stakater.com/search (+ reloader.stakater.com/match on the
//     config), configmaps./secrets.exclude.reloader.stakater.com/reload on
//     the workload, reloader.stakater.com/ignore on the ConfigMap/Secret, and
//     Reloader's --auto-reload-all as an option.
// The keys are xing's checksum keys, configmap/<ns>/<name> and
// secret/<ns>/<name>, so an existing applied-checksums annotation keeps its
// meaning.
import type { V1PodTemplateSpec } from '@kubernetes/client-node';
import type { Wire } from '../runtime/kube/types.ts';
import { compileGoRegexp, type GoRegexp } from '../runtime/go/regexp.ts';
import { parseGoBool } from '../runtime/go/strconv.ts';
import type { WatchOptions } from './optins.ts';
import { compareCodeUnits } from '../runtime/order.ts';

export type ConfigKind = 'configmap' | 'secret';
export type PodTemplateSpec = Wire<V1PodTemplateSpec>;

// ---------------------------------------------------------------------------
// Keys

/** xing's checksum key: "configmap/<ns>/<name>" or "secret/<ns>/<name>". */
export function configKey(kind: ConfigKind, namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

/** The inverse of configKey; undefined for anything else. */
export function parseConfigKey(key: string): { kind: ConfigKind; namespace: string; name: string } | undefined {
  const m = /^(configmap|secret)\/([^/]+)\/([^/]+)$/.exec(key);
  if (!m) return undefined;
  return { kind: m[1] as ConfigKind, namespace: m[2] ?? '', name: m[3] ?? '' };
}

// ---------------------------------------------------------------------------
// References

export type ContainerType = 'container' | 'initContainer' | 'ephemeralContainer';

export interface ContainerRef {
  type: ContainerType;
  name: string;
}

/** One place in the pod template that uses a ConfigMap or Secret. */
export type ConfigUse =
  | { via: 'env'; container: ContainerRef; env: string; key: string; optional: boolean }
  | { via: 'envFrom'; container: ContainerRef; optional: boolean }
  | { via: 'volume'; volume: string; items: string[] | undefined; mountedBy: ContainerRef[]; optional: boolean }
  | {
      via: 'projected';
      volume: string;
      source: number;
      items: string[] | undefined;
      mountedBy: ContainerRef[];
      optional: boolean;
    };

export interface ConfigReference {
  /** configKey(kind, namespace, name). */
  key: string;
  kind: ConfigKind;
  namespace: string;
  name: string;
  /**
   * True only when every use is optional. One required use means pods cannot
   * start (CreateContainerConfigError, or a volume that never mounts) while
   * the config is missing, so the reference as a whole is required.
   */
  optional: boolean;
  /** The data keys the pods read, sorted; 'all' when some use takes the whole object (envFrom, a volume without items). */
  dataKeys: string[] | 'all';
  /** Every use, deduplicated, in a fixed order. */
  uses: ConfigUse[];
}

const CONTAINER_FIELDS = [
  ['containers', 'container'],
  ['initContainers', 'initContainer'],
  ['ephemeralContainers', 'ephemeralContainer'],
] as const;

/**
 * Every ConfigMap and Secret the pod template references, through
 * env[].valueFrom.{configMapKeyRef,secretKeyRef}, envFrom[].{configMapRef,
 * secretRef}, volumes[].{configMap,secret} and volumes[].projected.sources[].
 * {configMap,secret}, across containers, initContainers and
 * ephemeralContainers. Pods can only reference configs in their own
 * namespace, hence the single `namespace`.
 *
 * Volumes count whether or not a container mounts them: the kubelet sets up
 * every pod volume, and a missing required one keeps the pod from starting.
 * (Reloader only counts mounted volumes; `mountedBy` says which.)
 * References without a name are skipped: the API server rejects them.
 *
 * Sorted by key; each reference's uses are deduplicated and sorted, so the
 * result does not depend on the order of containers, env vars or volumes.
 * Never throws, whatever the shape of `template`.
 */
export function configReferences(template: PodTemplateSpec | undefined, namespace: string): ConfigReference[] {
  const found = new Map<string, { kind: ConfigKind; name: string; uses: Map<string, ConfigUse> }>();
  const add: AddReference = (kind, name, use) => {
    if (typeof name !== 'string' || name === '') return;
    const key = configKey(kind, namespace, name);
    let entry = found.get(key);
    if (!entry) {
      entry = { kind, name, uses: new Map() };
      found.set(key, entry);
    }
    entry.uses.set(canonicalUse(use), use);
  };

  const spec = asRecord(asRecord(template)?.spec);
  const mounts = new Map<string, ContainerRef[]>();

  for (const [field, type] of CONTAINER_FIELDS) {
    for (const c of asArray(spec?.[field])) {
      const container = asRecord(c);
      if (!container) continue;
      const ref: ContainerRef = { type, name: asString(container.name) };
      for (const m of asArray(container.volumeMounts)) {
        const volume = asRecord(m)?.name;
        if (typeof volume !== 'string') continue;
        const list = mounts.get(volume) ?? [];
        list.push(ref);
        mounts.set(volume, list);
      }
      addEnvReferences(container, ref, add);
    }
  }

  for (const v of asArray(spec?.volumes)) {
    const volume = asRecord(v);
    if (!volume) continue;
    addVolumeReferences(volume, sortedContainers(mounts.get(asString(volume.name)) ?? []), add);
  }

  const out: ConfigReference[] = [];
  for (const [key, { kind, name, uses }] of found) {
    const ordered = [...uses.entries()].sort(([a], [b]) => compare(a, b)).map(([, u]) => u);
    out.push({
      key,
      kind,
      namespace,
      name,
      optional: ordered.every((u) => u.optional),
      dataKeys: dataKeysOf(ordered),
      uses: ordered,
    });
  }
  return out.sort((a, b) => compare(a.key, b.key));
}

/** Records one use of the ConfigMap or Secret `name` (skipped unless a non-empty string). */
type AddReference = (kind: ConfigKind, name: unknown, use: ConfigUse) => void;

/** A container's env vars (valueFrom a key) and envFrom sources. */
function addEnvReferences(container: Record<string, unknown>, ref: ContainerRef, add: AddReference): void {
  for (const e of asArray(container.env)) {
    const env = asRecord(e);
    const from = asRecord(env?.valueFrom);
    if (!env || !from) continue;
    for (const [kind, field] of [
      ['configmap', 'configMapKeyRef'],
      ['secret', 'secretKeyRef'],
    ] as const) {
      const sel = asRecord(from[field]);
      if (sel)
        add(kind, sel.name, {
          via: 'env',
          container: ref,
          env: asString(env.name),
          key: asString(sel.key),
          optional: sel.optional === true,
        });
    }
  }
  for (const f of asArray(container.envFrom)) {
    const from = asRecord(f);
    if (!from) continue;
    for (const [kind, field] of [
      ['configmap', 'configMapRef'],
      ['secret', 'secretRef'],
    ] as const) {
      const sel = asRecord(from[field]);
      if (sel) add(kind, sel.name, { via: 'envFrom', container: ref, optional: sel.optional === true });
    }
  }
}

/** A pod volume: a configMap or secret volume, or a projected volume's sources. */
function addVolumeReferences(volume: Record<string, unknown>, mountedBy: ContainerRef[], add: AddReference): void {
  const name = asString(volume.name);
  const cm = asRecord(volume.configMap);
  if (cm)
    add('configmap', cm.name, {
      via: 'volume',
      volume: name,
      items: itemKeys(cm.items),
      mountedBy,
      optional: cm.optional === true,
    });
  const secret = asRecord(volume.secret);
  if (secret)
    add('secret', secret.secretName, {
      via: 'volume',
      volume: name,
      items: itemKeys(secret.items),
      mountedBy,
      optional: secret.optional === true,
    });
  asArray(asRecord(volume.projected)?.sources).forEach((s, source) => {
    const src = asRecord(s);
    for (const [kind, field] of [
      ['configmap', 'configMap'],
      ['secret', 'secret'],
    ] as const) {
      const proj = asRecord(src?.[field]);
      if (proj)
        add(kind, proj.name, {
          via: 'projected',
          volume: name,
          source,
          items: itemKeys(proj.items),
          mountedBy,
          optional: proj.optional === true,
        });
    }
  });
}

function dataKeysOf(uses: ConfigUse[]): string[] | 'all' {
  const keys = new Set<string>();
  for (const u of uses) {
    if (u.via === 'envFrom') return 'all';
    if (u.via === 'env') keys.add(u.key);
    else if (u.items === undefined) return 'all';
    else for (const k of u.items) keys.add(k);
  }
  return [...keys].sort(compare);
}

function itemKeys(items: unknown): string[] | undefined {
  const list = asArray(items);
  if (list.length === 0) return undefined; // no items: every key is projected
  return [...new Set(list.map((i) => asString(asRecord(i)?.key)))].sort(compare);
}

const CONTAINER_RANK: Record<ContainerType, number> = { container: 0, initContainer: 1, ephemeralContainer: 2 };

function sortedContainers(list: ContainerRef[]): ContainerRef[] {
  const unique = new Map(list.map((c) => [`${c.type}/${c.name}`, c]));
  return [...unique.values()].sort(
    (a, b) => CONTAINER_RANK[a.type] - CONTAINER_RANK[b.type] || compare(a.name, b.name),
  );
}

/** Field order is fixed here, so equal uses give equal strings. */
function canonicalUse(u: ConfigUse): string {
  switch (u.via) {
    case 'env':
      return JSON.stringify(['a-env', CONTAINER_RANK[u.container.type], u.container.name, u.env, u.key, u.optional]);
    case 'envFrom':
      return JSON.stringify(['b-envFrom', CONTAINER_RANK[u.container.type], u.container.name, u.optional]);
    case 'volume':
      return JSON.stringify(['c-volume', u.volume, u.items ?? null, u.optional]);
    case 'projected':
      return JSON.stringify(['d-projected', u.volume, String(u.source).padStart(10, '0'), u.items ?? null, u.optional]);
  }
}

// ---------------------------------------------------------------------------
// Parsing helpers

/** Go's strconv.ParseBool as Reloader reads an annotation: "" counts as unset (false); undefined = invalid. */
export function parseReloaderBool(raw: string): boolean | undefined {
  if (raw === '') return false;
  try {
    return parseGoBool(raw);
  } catch {
    return undefined;
  }
}

/** strings.Split(v, ",") with TrimSpace, dropping empty entries. */
export function splitList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

const MAX_ENTRY_LENGTH = 1024;
/** Reload-list entries read; each costs a regex compile. */
export const MAX_RELOAD_ENTRIES = 256;

export function compileEntry(entry: string): { regex: GoRegexp } | { warning: string } {
  if (entry.length > MAX_ENTRY_LENGTH) return { warning: `is longer than ${MAX_ENTRY_LENGTH} characters` };
  const compiled = compileGoRegexp(entry);
  if ('error' in compiled) return { warning: `is not a valid Go regular expression (${compiled.error})` };
  return { regex: compiled.regexp };
}

export function isDnsSubdomain(name: string): boolean {
  return name.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name);
}

export function configAnnotations(
  options: WatchOptions,
  kind: ConfigKind,
  namespace: string,
  name: string,
): Record<string, string> {
  return stringRecord(asRecord(safe(() => options.configMeta?.(kind, namespace, name), undefined))?.annotations);
}

/** Code-unit order: the same everywhere, unlike localeCompare. */
export const compare = compareCodeUnits;

export function safe<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}

export function asRecord(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

function asArray(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

export function asString(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** Only own string-valued entries; anything else in an annotations map is ignored. */
export function stringRecord(v: unknown): Record<string, string> {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  const rec = asRecord(v);
  if (!rec) return out;
  for (const [k, val] of Object.entries(rec)) if (typeof val === 'string') out[k] = val;
  return out;
}
