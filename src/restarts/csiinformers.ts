// The Secrets Store CSI integration's shell: Reloader's flag, the optional
// caches of SecretProviderClassPodStatuses (versions hashed as they are
// decoded, nothing else kept) and of SecretProviderClasses (metadata only, for
// `ignore` and `match`), and the view that turns those caches and the pod
// cache into what the restart controller asks: the classes a workload
// watches (csioptins.ts) and their checksums as it sees them (csichecksum.ts).
import { createSecretKey } from 'node:crypto';
import type { FlagSet } from '../runtime/flags/flagset.ts';
import { informerFor, type Informer } from '../runtime/informer/informer.ts';
import type { KubeObject, Pod, ResourceType } from '../runtime/kube/types.ts';
import type { Runtime } from '../runtime/operator.ts';
import { classChecksum, isCurrentGeneration, podWorkload, versionsChecksum, type ClassMount } from './csichecksum.ts';
import { watchedClasses, type WatchedClasses } from './csioptins.ts';
import type { WorkloadLike } from './optins.ts';
import { asRecord, asString } from './references.ts';

const GROUP = 'secrets-store.csi.x-k8s.io';

export const classPodStatusResource = {
  group: GROUP,
  version: 'v1',
  resource: 'secretproviderclasspodstatuses',
  kind: 'SecretProviderClassPodStatus',
  namespaced: true,
} as const satisfies ResourceType;

export const classResource = {
  group: GROUP,
  version: 'v1',
  resource: 'secretproviderclasses',
  kind: 'SecretProviderClass',
  namespaced: true,
} as const satisfies ResourceType;

export interface CsiOptions {
  /** Reloader's --enable-csi-integration. */
  enabled: boolean;
}

/** Reloader's flag, under its own name (Go's flag syntax takes --name too). */
export function registerCsiFlags(fs: FlagSet): () => CsiOptions {
  const enabled = fs.bool(
    'enable-csi-integration',
    false,
    'Restart opted-in workloads when the versions of the secrets a Secrets Store CSI SecretProviderClass mounts change (Reloader; needs -config-restarts.enabled and list/watch on secretproviderclasspodstatuses; docs/csi-secrets.md).',
  );
  return () => ({ enabled: enabled.value });
}

/** A SecretProviderClassPodStatus as cached: its identity, owner and the checksum of its versions. */
export interface ClassPodStatusDigest extends KubeObject {
  mount: {
    podName: string;
    /** The owning pod's uid (ownerReferences), "" when the object names none. */
    podUid: string;
    className: string;
    checksum: string;
  };
}

/**
 * The informer transform: keeps the name, namespace, resourceVersion, the
 * pod it belongs to and the checksum of status.objects; drops the rest
 * (target paths, node labels, managedFields). Never throws.
 */
export function classPodStatusDigester(key: Buffer): (object: KubeObject) => ClassPodStatusDigest {
  const secretKey = createSecretKey(key);
  return (object) => {
    const status = asRecord(asRecord(object)?.status);
    const meta = object.metadata ?? {};
    const podRef = (meta.ownerReferences ?? []).find((r) => r.kind === 'Pod');
    let checksum: string;
    try {
      checksum = versionsChecksum(secretKey, status?.objects);
    } catch {
      checksum = `unhashable:${meta.resourceVersion ?? ''}`;
    }
    return {
      apiVersion: object.apiVersion,
      kind: object.kind,
      metadata: {
        name: meta.name,
        namespace: meta.namespace,
        resourceVersion: meta.resourceVersion,
      },
      mount: {
        podName: asString(status?.podName) || (podRef?.name ?? ''),
        podUid: podRef?.uid ?? '',
        className: asString(status?.secretProviderClassName),
        checksum,
      },
    };
  };
}

/** Index of the status cache: "<namespace>/<class>". */
export const BY_CLASS = 'csi-class';
export const indexByClass = (o: ClassPodStatusDigest): string[] =>
  o.mount.className ? [`${o.metadata?.namespace ?? ''}/${o.mount.className}`] : [];

export interface CsiCaches {
  statuses: Informer<ClassPodStatusDigest>[];
  classes: Informer<KubeObject>[];
}

/**
 * The caches, both optional: without the driver's CRDs (or without the
 * permission) start-up does not wait, the caches are empty and looked for
 * again every 5 minutes, and nothing restarts for a class. Call once per
 * runtime (the transform made here is what the shared informer is keyed on).
 */
export function csiInformers(runtime: Runtime, key: Buffer): CsiCaches {
  return {
    statuses: runtime.informers<ClassPodStatusDigest>(classPodStatusResource, {
      transform: classPodStatusDigester(key),
      indexers: { [BY_CLASS]: indexByClass },
      optional: true,
    }),
    classes: runtime.informers<KubeObject>(classResource, { metadataOnly: true, optional: true }),
  };
}

/** The workload a decision is about: its kind as podWorkload names it, and its object. */
export interface CsiWorkload {
  kind: string;
  /** Its metadata and pod template (workloadkinds.ts view). */
  object: KubeObject & WorkloadLike;
  /** An Argo Rollout's spec.restartAt: pods created before it are of the previous generation. */
  restartAt?: string;
}

/** What the restart controller asks of the CSI caches. */
export class CsiClassView {
  private readonly caches: CsiCaches;
  private readonly pods: Informer<Pod>[];

  constructor(caches: CsiCaches, pods: Informer<Pod>[]) {
    this.caches = caches;
    this.pods = pods;
  }

  /** watchedClasses with the class metadata and names these caches know. */
  watched(workload: WorkloadLike, autoReloadAll = false): WatchedClasses {
    return watchedClasses(workload, {
      autoReloadAll,
      classMeta: (namespace, name) => informerFor(this.caches.classes, namespace)?.get(namespace, name)?.metadata,
      classNames: (namespace) => {
        const names = new Set<string>();
        for (const c of informerFor(this.caches.classes, namespace)?.list() ?? [])
          if (c.metadata?.namespace === namespace && c.metadata.name) names.add(c.metadata.name);
        for (const s of informerFor(this.caches.statuses, namespace)?.list() ?? [])
          if (s.metadata?.namespace === namespace && s.mount.className) names.add(s.mount.className);
        return names;
      },
    });
  }

  /**
   * Key → checksum of each watched class as `workload` sees it
   * (classChecksum), given the applied record: what goes into decideRestart's
   * `current` beside the ConfigMaps' and Secrets'.
   */
  checksums(workload: CsiWorkload, watched: WatchedClasses, applied: ReadonlyMap<string, string>): Map<string, string> {
    const out = new Map<string, string>();
    for (const c of watched.classes)
      out.set(c.key, classChecksum(this.mounts(workload, c.name, c.reference !== undefined), applied.get(c.key)));
    return out;
  }

  /**
   * The SPCPS of `className` whose pods are the workload's, or — for a class
   * the template does not mount (a reload-list name) — of every live pod in
   * the namespace, all counted as current.
   */
  mounts(workload: CsiWorkload, className: string, mounted: boolean): ClassMount[] {
    const namespace = workload.object.metadata?.namespace ?? '';
    const name = workload.object.metadata?.name ?? '';
    const template = workload.object.spec?.template?.metadata?.annotations;
    const out: ClassMount[] = [];
    for (const status of informerFor(this.caches.statuses, namespace)?.byIndex(BY_CLASS, `${namespace}/${className}`) ??
      []) {
      const pod = this.podOf(namespace, status);
      if (!pod) continue;
      const owner = podWorkload(pod);
      const own = owner?.kind === workload.kind && owner.name === name;
      if (mounted && !own) continue;
      out.push({
        checksum: status.mount.checksum,
        resourceVersion: status.metadata?.resourceVersion ?? '',
        current: !mounted || isCurrentGeneration(pod.metadata, template, workload.restartAt),
        terminating: Boolean(pod.metadata?.deletionTimestamp),
      });
    }
    return out;
  }

  /** The pod an SPCPS belongs to: same name and, when the SPCPS names one, same uid (a StatefulSet's next pod reuses the name). */
  private podOf(namespace: string, status: ClassPodStatusDigest): Pod | undefined {
    const pod = informerFor(this.pods, namespace)?.get(namespace, status.mount.podName);
    if (!pod) return undefined;
    if (status.mount.podUid !== '' && pod.metadata?.uid !== status.mount.podUid) return undefined;
    return pod;
  }
}
