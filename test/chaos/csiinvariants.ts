// The chaos monitor's rules for restarts on Secrets Store CSI rotations, part
// of the InvariantChecker (invariants.ts): pure, fed with watch events in
// arrival order. Written from docs/csi-secrets.md, not from src/restarts/csi*:
// the annotation, driver and field names are spelled out here on purpose, so
// a renamed key in Stateward shows up as a broken promise.
//
// As documented: a Deployment opted in with
// secretproviderclass.reloader.stakater.com/auto: "true" (on its metadata or
// its pod template) follows the classes its pod template mounts through the
// secrets-store.csi.k8s.io driver. The versions a pod mounted are in a
// SecretProviderClassPodStatus owned by the pod (status.objects: id and
// version). A rotation of the store's secrets shows as a version set that
// none of the workload's pods mounted before; a restart is a change of the
// template's com.xing.deployment-restart.timestamp. "One rotation, one
// restart": the first pod rotated restarts the workload once; the other
// pods' rotations, the old pods going and the restart's new pods getting
// their statuses (with the versions just recorded) restart nothing.
//
// The soak's driver stand-in (csirotations.ts) rotates a workload only once
// its previous rotation's restart has rolled out, so rotations never overlap
// (docs: overlapping ones restart at least once and at most once each, a
// looser promise this rule does not judge). In resourceVersion order (etcd's
// revisions, ordered across resources), the rotations and restarts of a
// workload must then alternate, a rotation first:
//   - a rotation with no restart before the next rotation or the end is a
//     lost restart: csi-rotation-not-restarted (pending while the soak runs);
//   - a restart with no rotation since the previous restart is a doubled one,
//     or one for the restart's own new pods: csi-restart-without-rotation.
// The first version set a workload's pods show is the one they started with,
// not a rotation. Judged at the end, on everything seen (no time window: a
// status, its pod and the Deployment come on three watch streams).
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { Pending, WatchType } from './invariants.ts';
import { iso, rvOf } from './observed.ts';

export const CSI_AUTO_ANNOTATION = 'secretproviderclass.reloader.stakater.com/auto';
export const CSI_DRIVER = 'secrets-store.csi.k8s.io';
export const CSI_TRIGGER_ANNOTATION = 'com.xing.deployment-restart.timestamp';

/** A SecretProviderClassPodStatus as the monitor reads it (secrets-store.csi.x-k8s.io/v1). */
export interface ClassPodStatus {
  metadata?: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    ownerReferences?: { kind?: string; name?: string; uid?: string }[];
  };
  status?: {
    podName?: string;
    secretProviderClassName?: string;
    objects?: { id?: string; version?: string }[];
  };
}

export interface CsiHooks {
  violate: (now: number, kind: string, message: string, details?: Record<string, unknown>) => void;
  count: (name: string, by?: number) => void;
}

/** One point of a workload's history: a rotation (a new version set) or a restart, at a resourceVersion. */
export interface Step {
  rv: bigint;
  /** Seen only on a (re)list: an earlier write may have been missed, so the rv is an upper bound. */
  exact: boolean;
  at: number;
  label: string;
}

export interface Judgement {
  /** Rotations followed by their one restart. */
  matched: number;
  /** Rotations with no restart before the next rotation (or the end, when `final`). */
  lost: Step[];
  /** Restarts with no rotation since the previous restart. */
  unexplained: Step[];
  /** The rotation still waiting for its restart (when not `final`). */
  outstanding: Step | undefined;
}

/**
 * Pairs rotations with restarts in resourceVersion order (a rotation before
 * a restart at the same rv): each restart answers the one rotation before
 * it. A restart with none is unexplained, unless the next step is a rotation
 * seen only on a relist (its first write may have been earlier than the rv
 * seen, so it may be the restart's cause).
 */
export function judgeRotations(rotations: readonly Step[], restarts: readonly Step[], final: boolean): Judgement {
  const steps = [
    ...rotations.map((s) => ({ ...s, rotation: true })),
    ...restarts.map((s) => ({ ...s, rotation: false })),
  ].sort((a, b) => (a.rv < b.rv ? -1 : a.rv > b.rv ? 1 : a.rotation === b.rotation ? 0 : a.rotation ? -1 : 1));
  const out: Judgement = { matched: 0, lost: [], unexplained: [], outstanding: undefined };
  let dangling: Step | undefined;
  for (const { rotation, ...step } of steps) {
    if (rotation) {
      if (dangling && !step.exact) {
        out.matched++;
        dangling = undefined;
        continue;
      }
      if (dangling) out.unexplained.push(dangling);
      dangling = undefined;
      if (out.outstanding) out.lost.push(out.outstanding);
      out.outstanding = step;
    } else if (out.outstanding) {
      out.matched++;
      out.outstanding = undefined;
    } else {
      if (dangling) out.unexplained.push(dangling);
      dangling = step;
    }
  }
  if (dangling) out.unexplained.push(dangling);
  if (final && out.outstanding) {
    out.lost.push(out.outstanding);
    out.outstanding = undefined;
  }
  return out;
}

/** The version set of a status: sorted `id=version` pairs. */
export function versionSet(objects: readonly { id?: string; version?: string }[] | undefined): string {
  return (objects ?? [])
    .map((o) => `${o.id ?? ''}=${o.version ?? ''}`)
    .sort()
    .join(',');
}

/** The classes a pod template mounts through the Secrets Store CSI driver. */
export function mountedClasses(deployment: V1Deployment): string[] {
  const names = new Set<string>();
  for (const v of deployment.spec?.template?.spec?.volumes ?? [])
    if (v.csi?.driver === CSI_DRIVER && v.csi.volumeAttributes?.['secretProviderClass'])
      names.add(v.csi.volumeAttributes['secretProviderClass']);
  return [...names].sort();
}

interface CsiWorkload {
  key: string;
  namespace: string;
  name: string;
  classes: string[];
  trigger: string | undefined;
  restarts: Step[];
  /** class → version set → its first write among the workload's pods. */
  sets: Map<string, Map<string, Step>>;
}

interface SeenStatus {
  namespace: string;
  className: string;
  podUid: string;
  set: string;
  rv: bigint;
  exact: boolean;
  at: number;
}

export class CsiRotationRules {
  private readonly hooks: CsiHooks;
  private readonly workloads = new Map<string, CsiWorkload>();
  /** Pod uid → the Deployment it belongs to (`<ns>/<name>`), kept after the pod goes: its statuses may come later. */
  private readonly podOwners = new Map<string, string>();
  /** Status writes whose pod is not known yet. */
  private unresolved: SeenStatus[] = [];
  private readonly writes = new Set<string>();
  /** The values last reported for the counters this class sets (the host's count() adds). */
  private readonly reported = new Map<string, number>();

  constructor(hooks: CsiHooks) {
    this.hooks = hooks;
  }

  onDeployment(deployment: V1Deployment, type: WatchType, now: number, relist: boolean): void {
    const namespace = deployment.metadata?.namespace ?? '';
    const name = deployment.metadata?.name ?? '';
    const key = `${namespace}/${name}`;
    // On the metadata, or on the pod template when the metadata says nothing.
    const optedIn =
      (deployment.metadata?.annotations?.[CSI_AUTO_ANNOTATION] ??
        deployment.spec?.template?.metadata?.annotations?.[CSI_AUTO_ANNOTATION]) === 'true';
    if (type === 'DELETED' || !optedIn) {
      this.workloads.delete(key);
      return;
    }
    const trigger = deployment.spec?.template?.metadata?.annotations?.[CSI_TRIGGER_ANNOTATION];
    const classes = mountedClasses(deployment);
    const state = this.workloads.get(key);
    if (!state) {
      this.workloads.set(key, { key, namespace, name, classes, trigger, restarts: [], sets: new Map() });
      return;
    }
    state.classes = classes;
    if (trigger === state.trigger) return;
    state.trigger = trigger;
    state.restarts.push({ rv: rvOf(deployment.metadata), exact: !relist, at: now, label: trigger ?? '(none)' });
    this.hooks.count('csiRestarts');
    if (relist) this.hooks.count('csiRestartsSeenOnlyOnRelist');
  }

  onPod(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? '';
    if (uid === '' || this.podOwners.has(uid)) return;
    const rs = pod.metadata?.ownerReferences?.find((o) => o.controller && o.kind === 'ReplicaSet')?.name;
    const hash = pod.metadata?.labels?.['pod-template-hash'];
    if (!rs || !hash || !rs.endsWith(`-${hash}`)) return;
    this.podOwners.set(uid, `${pod.metadata?.namespace ?? ''}/${rs.slice(0, -hash.length - 1)}`);
  }

  onStatus(status: ClassPodStatus, type: WatchType, now: number, relist: boolean): void {
    if (type === 'DELETED') return;
    const podUid = status.metadata?.ownerReferences?.find((o) => o.kind === 'Pod')?.uid ?? '';
    const rv = rvOf(status.metadata);
    const id = `${status.metadata?.namespace}/${status.metadata?.name}@${rv}`;
    if (podUid === '' || this.writes.has(id)) return;
    this.writes.add(id);
    this.hooks.count('csiStatusWritesSeen');
    this.unresolved.push({
      namespace: status.metadata?.namespace ?? '',
      className: status.status?.secretProviderClassName ?? '',
      podUid,
      set: versionSet(status.status?.objects),
      rv,
      exact: !relist,
      at: now,
    });
  }

  /** Attributes the status writes whose pod is known now to its workload's version sets. */
  private resolve(): void {
    const left: SeenStatus[] = [];
    for (const s of this.unresolved) {
      const owner = this.podOwners.get(s.podUid);
      if (owner === undefined) {
        left.push(s);
        continue;
      }
      const w = this.workloads.get(owner);
      if (!w || owner !== `${s.namespace}/${w.name}` || !w.classes.includes(s.className)) continue;
      const sets = w.sets.get(s.className) ?? new Map<string, Step>();
      w.sets.set(s.className, sets);
      const first = sets.get(s.set);
      if (!first || s.rv < first.rv)
        sets.set(s.set, { rv: s.rv, exact: s.exact && (first?.exact ?? true), at: s.at, label: s.set });
    }
    this.unresolved = left;
  }

  /** Each class's rotations: every version set but the first the workload's pods showed. */
  private rotations(w: CsiWorkload): Step[] {
    const out: Step[] = [];
    for (const [className, sets] of w.sets) {
      const ordered = [...sets.values()].sort((a, b) => (a.rv < b.rv ? -1 : a.rv > b.rv ? 1 : 0));
      out.push(...ordered.slice(1).map((s) => ({ ...s, label: `${className} → ${s.label}` })));
    }
    return out;
  }

  private judge(final: boolean): { w: CsiWorkload; rotations: Step[]; j: Judgement }[] {
    this.resolve();
    return [...this.workloads.values()].map((w) => {
      const rotations = this.rotations(w);
      return { w, rotations, j: judgeRotations(rotations, w.restarts, final) };
    });
  }

  /** Counters for the live report. */
  tick(): void {
    let rotations = 0;
    for (const { rotations: r } of this.judge(false)) rotations += r.length;
    this.set('csiRotations', rotations);
  }

  private set(name: string, value: number): void {
    this.hooks.count(name, value - (this.reported.get(name) ?? 0));
    this.reported.set(name, value);
  }

  /** A rotation not restarted yet: the soak is not settled while there is one. */
  pending(): Pending[] {
    const out: Pending[] = [];
    for (const { w, j } of this.judge(false))
      if (j.outstanding)
        out.push({
          workload: `deployment/${w.key}`,
          config: `(rotation of ${j.outstanding.label}, not restarted yet)`,
          since: iso(j.outstanding.at),
        });
    return out;
  }

  /** The end of the run: every rotation restarted exactly once. */
  finish(now: number): void {
    let rotations = 0;
    let matched = 0;
    for (const { w, rotations: r, j } of this.judge(true)) {
      rotations += r.length;
      matched += j.matched;
      for (const s of r) if (!s.exact) this.hooks.count('csiRotationsSeenOnlyOnRelist');
      for (const lost of j.lost)
        this.hooks.violate(
          now,
          'csi-rotation-not-restarted',
          `deployment ${w.key}: the rotation to ${lost.label} (first written at resourceVersion ${lost.rv}, seen ${iso(lost.at)}) was followed by no restart`,
        );
      for (const s of j.unexplained)
        this.hooks.violate(
          now,
          'csi-restart-without-rotation',
          `deployment ${w.key} restarted (${CSI_TRIGGER_ANNOTATION} ${s.label}, resourceVersion ${s.rv}, seen ${iso(s.at)}) with no rotation of its mounted versions since its previous restart`,
          { rotations: r.map((x) => `${x.label}@${x.rv}`), restarts: w.restarts.map((x) => `${x.label}@${x.rv}`) },
        );
    }
    this.set('csiRotations', rotations);
    this.set('csiRotationsRestarted', matched);
    this.set('csiStatusWritesOfUnknownPods', this.unresolved.length);
  }
}
