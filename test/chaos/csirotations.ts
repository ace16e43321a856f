// Secrets Store CSI rotations in the soak (issue 37): the driver's two CRDs
// (minimal v1 copies, as test/restarts/csi.int.test.ts installs them), in
// each group namespace a SecretProviderClass and a Deployment opted in with
// secretproviderclass.reloader.stakater.com/auto whose pods mount it, and a
// stand-in for the driver. The stand-in keeps a "store" of versions per
// namespace and, every DRIVER_POLL_MS, does what the driver with rotation on
// does: a running pod without a SecretProviderClassPodStatus gets one (owned
// by the pod, status.objects with the store's versions), and a status whose
// versions differ from the store's is rewritten in place (old-generation
// pods included, as the driver rotates every mounted pod). At intervals
// drawn from their own seeded stream, a rotation bumps the store's versions
// of a drawn namespace, but only once the previous rotation there was
// restarted and rolled out (every pod of the restarted generation mounted
// with the store's versions): rotations never overlap, so each must give
// exactly one restart (csiinvariants.ts judges that, from the watch alone).
// The operator runs with Reloader's --enable-csi-integration.
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type KubeObject, type Pod } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import { CSI_AUTO_ANNOTATION, CSI_DRIVER, CSI_TRIGGER_ANNOTATION } from './csiinvariants.ts';
import type { Prng } from './prng.ts';

export const CSI_APP = 'vault-app';
export const CSI_CLASS = 'vault-db';
/** The store's objects; a rotation bumps one or both. */
const OBJECTS = ['secret/db-password', 'secret/api-key'] as const;
const DRIVER_POLL_MS = 500;
const GROUP = 'secrets-store.csi.x-k8s.io';

const statusType = {
  group: GROUP,
  version: 'v1',
  resource: 'secretproviderclasspodstatuses',
  kind: 'SecretProviderClassPodStatus',
  namespaced: true,
} as const;
const classType = {
  group: GROUP,
  version: 'v1',
  resource: 'secretproviderclasses',
  kind: 'SecretProviderClass',
  namespaced: true,
} as const;

type Status = KubeObject & { status?: { objects?: { id?: string; version?: string }[] } };
type Deployment = KubeObject & {
  spec?: { replicas?: number; template?: { metadata?: { annotations?: Record<string, string> } } };
  status?: { observedGeneration?: number; replicas?: number; updatedReplicas?: number; availableReplicas?: number };
};

/** The class and the opted-in Deployment (two pods mounting the class) of one namespace. */
export async function createCsiWorkload(kube: KubeClient, namespace: string): Promise<void> {
  await kube.create(classType, {
    metadata: { name: CSI_CLASS, namespace },
    spec: { provider: 'vault', parameters: { roleName: 'app' } },
  } as KubeObject);
  await kube.create(resources.deployments, {
    metadata: { name: CSI_APP, namespace, annotations: { [CSI_AUTO_ANNOTATION]: 'true' } },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: CSI_APP } },
      template: {
        metadata: { labels: { app: CSI_APP } },
        spec: {
          containers: [
            { name: 'app', image: 'example.invalid/app:1', volumeMounts: [{ name: 'secrets', mountPath: '/mnt' }] },
          ],
          volumes: [
            {
              name: 'secrets',
              csi: { driver: CSI_DRIVER, readOnly: true, volumeAttributes: { secretProviderClass: CSI_CLASS } },
            },
          ],
        },
      },
    },
  } as KubeObject);
}

export interface CsiRotationOptions {
  kube: KubeClient;
  prng: Prng;
  namespaces: string[];
  log: (line: string) => void;
  /** Pause before each rotation attempt, drawn uniformly (ms). */
  intervalMs: [number, number];
}

export class CsiRotations {
  /** Outcomes by `what outcome`. */
  readonly counts: Record<string, number> = {};
  private readonly o: CsiRotationOptions;
  /** The store: namespace → object id → version. */
  private readonly store = new Map<string, Record<string, string>>();
  /** namespace → the template's restart trigger when it was last rotated. */
  private readonly rotatedAt = new Map<string, string | undefined>();
  private running = true;
  private loop: Promise<void> | undefined;

  constructor(o: CsiRotationOptions) {
    this.o = o;
    for (const ns of o.namespaces) this.store.set(ns, Object.fromEntries(OBJECTS.map((id) => [id, '1'])));
  }

  private tally(key: string): void {
    this.counts[key] = (this.counts[key] ?? 0) + 1;
  }

  /** Starts the driver stand-in; resolves once every namespace's pods have mounted the store's versions. */
  async startDriver(): Promise<void> {
    this.loop = (async () => {
      while (this.running) {
        for (const namespace of this.o.namespaces) await this.sync(namespace).catch(() => this.tally('driver error'));
        await sleep(DRIVER_POLL_MS);
      }
    })();
    await waitFor(
      'every CSI pod mounted',
      async () => {
        for (const namespace of this.o.namespaces) if ((await this.quiet(namespace)) !== undefined) return false;
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
  }

  private async podsAndStatuses(namespace: string): Promise<{ pods: Pod[]; statuses: Map<string, Status> }> {
    const { kube } = this.o;
    const pods = (await kube.list<Pod>(resources.pods, { namespace, labelSelector: `app=${CSI_APP}`, timeoutMs: 5000 }))
      .items;
    const statuses = (await kube.list<Status>(statusType, { namespace, timeoutMs: 5000 })).items;
    return { pods, statuses: new Map(statuses.map((s) => [s.metadata?.name ?? '', s])) };
  }

  private objects(namespace: string): { id: string; version: string }[] {
    return Object.entries(this.store.get(namespace)!).map(([id, version]) => ({ id, version }));
  }

  private differs(namespace: string, status: Status): boolean {
    const want = this.store.get(namespace)!;
    const have = status.status?.objects ?? [];
    return have.length !== OBJECTS.length || have.some((o) => want[o.id ?? ''] !== o.version);
  }

  /** One pass of the driver over a namespace: mounts new running pods, rotates the others in place. */
  private async sync(namespace: string): Promise<void> {
    const { kube } = this.o;
    const { pods, statuses } = await this.podsAndStatuses(namespace);
    for (const pod of pods) {
      const name = `${pod.metadata?.name}-${namespace}-${CSI_CLASS}`;
      if (pod.metadata?.deletionTimestamp || !pod.spec?.nodeName || pod.status?.phase !== 'Running') continue;
      const current = statuses.get(name);
      const status = {
        podName: pod.metadata?.name,
        secretProviderClassName: CSI_CLASS,
        mounted: true,
        targetPath: `/var/lib/kubelet/pods/${pod.metadata?.uid}/volumes/kubernetes.io~csi/secrets/mount`,
        objects: this.objects(namespace),
      };
      try {
        if (!current) {
          await kube.create(
            statusType,
            {
              metadata: {
                name,
                namespace,
                labels: { 'internal.secrets-store.csi.k8s.io/node-name': pod.spec.nodeName },
                ownerReferences: [
                  { apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid! },
                ],
              },
              status,
            } as KubeObject,
            { timeoutMs: 5000 },
          );
          this.tally('status mounted');
        } else if (this.differs(namespace, current)) {
          await kube.update(statusType, { ...current, status } as KubeObject, { timeoutMs: 5000 });
          this.tally('status rotated');
        }
      } catch {
        this.tally('status write failed (retried)');
      }
    }
  }

  /**
   * Why `namespace` may not rotate now (undefined: it may): the Deployment
   * rolled out, every pod of its current generation, none terminating, every
   * pod mounted with the store's versions, and the previous rotation restarted.
   */
  private async quiet(namespace: string): Promise<string | undefined> {
    const d = await this.o.kube.get<Deployment>(
      resources.deployments,
      { namespace, name: CSI_APP },
      { timeoutMs: 5000 },
    );
    const want = d.spec?.replicas ?? 1;
    const s = d.status ?? {};
    if (s.observedGeneration !== d.metadata?.generation || s.updatedReplicas !== want || s.availableReplicas !== want)
      return 'rollout in progress';
    const trigger = d.spec?.template?.metadata?.annotations?.[CSI_TRIGGER_ANNOTATION];
    if (this.rotatedAt.has(namespace) && this.rotatedAt.get(namespace) === trigger)
      return 'previous rotation not restarted yet';
    const { pods, statuses } = await this.podsAndStatuses(namespace);
    if (pods.length !== want) return 'pods coming or going';
    for (const pod of pods) {
      if (pod.metadata?.deletionTimestamp) return 'pods coming or going';
      if (pod.metadata?.annotations?.[CSI_TRIGGER_ANNOTATION] !== trigger) return 'rollout in progress';
      const status = statuses.get(`${pod.metadata?.name}-${namespace}-${CSI_CLASS}`);
      if (!status || this.differs(namespace, status)) return 'pods not mounted yet';
    }
    return undefined;
  }

  /** Rotation attempts until aborted, each after a drawn pause, in a drawn namespace, of drawn objects. */
  async run(signal: AbortSignal): Promise<void> {
    const { prng } = this.o;
    while (!signal.aborted) {
      try {
        await sleep(prng.int(...this.o.intervalMs), undefined, { signal });
      } catch {
        break;
      }
      const namespace = prng.pick(this.o.namespaces);
      const ids = OBJECTS.filter(() => prng.chance(0.6));
      if (ids.length === 0) ids.push(prng.pick(OBJECTS));
      try {
        const why = await this.quiet(namespace);
        if (why !== undefined) {
          this.tally(`rotation skipped (${why})`);
          continue;
        }
        const d = await this.o.kube.get<Deployment>(resources.deployments, { namespace, name: CSI_APP });
        this.rotatedAt.set(namespace, d.spec?.template?.metadata?.annotations?.[CSI_TRIGGER_ANNOTATION]);
        const store = this.store.get(namespace)!;
        for (const id of ids) store[id] = String(Number(store[id]) + 1);
        this.tally('rotation');
        this.o.log(`csi rotation ${namespace}/${CSI_CLASS}: ${ids.map((id) => `${id} → ${store[id]}`).join(', ')}`);
      } catch (error) {
        this.tally('rotation failed');
        this.o.log(`csi rotation ${namespace} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }

  /** Whether every namespace is quiet: its last rotation restarted, rolled out and mounted. */
  async settled(): Promise<boolean> {
    for (const namespace of this.o.namespaces)
      if ((await this.quiet(namespace).catch(() => 'unknown')) !== undefined) return false;
    return true;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}
