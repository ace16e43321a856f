// Which SecretProviderClasses (Secrets Store CSI driver) a pod template
// mounts, and the checksum keys they are recorded under. Pure.
//
// A pod uses a SecretProviderClass through an inline CSI volume of the
// driver secrets-store.csi.k8s.io whose volumeAttributes.secretProviderClass
// names it; the class lives in the pod's namespace. Reloader matches the
// attribute on any CSI volume; here the driver must be the Secrets Store one
// too, so another CSI driver's attribute of the same name is not taken for a
// class.
import type { PodTemplateSpec } from './references.ts';
import { asRecord, asString, compare } from './references.ts';

/** The Secrets Store CSI driver's name, as pods' CSI volumes spell it. */
export const SECRETS_STORE_DRIVER = 'secrets-store.csi.k8s.io';
/** The volume attribute naming the class. */
export const CLASS_ATTRIBUTE = 'secretProviderClass';

/** The kind part of a class's checksum key, beside xing's "configmap" and "secret". */
export const CLASS_KIND = 'secretproviderclass';

/** "secretproviderclass/<ns>/<name>": the key in the applied-checksums annotation. */
export function classKey(namespace: string, name: string): string {
  return `${CLASS_KIND}/${namespace}/${name}`;
}

/** The inverse of classKey; undefined for anything else (a ConfigMap's or Secret's key included). */
export function parseClassKey(key: string): { namespace: string; name: string } | undefined {
  const m = /^secretproviderclass\/([^/]+)\/([^/]+)$/.exec(key);
  if (!m) return undefined;
  return { namespace: m[1] ?? '', name: m[2] ?? '' };
}

/** One SecretProviderClass the template mounts. */
export interface ClassReference {
  key: string;
  namespace: string;
  name: string;
  /** The pod volumes that mount it, sorted. */
  volumes: string[];
}

/**
 * The SecretProviderClasses the pod template's CSI volumes of the Secrets
 * Store driver name, sorted by key. A volume counts whether or not a
 * container mounts it (the kubelet publishes every pod volume, and the
 * driver writes a SecretProviderClassPodStatus for each), as configReferences
 * counts ConfigMap and Secret volumes. Never throws, whatever the shape.
 */
export function classReferences(template: PodTemplateSpec | undefined, namespace: string): ClassReference[] {
  const found = new Map<string, Set<string>>();
  const volumes = asRecord(asRecord(template)?.spec)?.volumes;
  for (const v of Array.isArray(volumes) ? volumes : []) {
    const volume = asRecord(v);
    const csi = asRecord(volume?.csi);
    if (!csi || csi.driver !== SECRETS_STORE_DRIVER) continue;
    const name = asString(asRecord(csi.volumeAttributes)?.[CLASS_ATTRIBUTE]);
    if (name === '') continue;
    const set = found.get(name) ?? new Set<string>();
    set.add(asString(volume?.name));
    found.set(name, set);
  }
  return [...found.entries()]
    .map(([name, vols]) => ({ key: classKey(namespace, name), namespace, name, volumes: [...vols].sort(compare) }))
    .sort((a, b) => compare(a.key, b.key));
}
