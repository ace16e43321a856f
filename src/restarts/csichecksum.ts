// The checksum of a SecretProviderClass as one workload sees it: what the
// restart decision (restartplan.ts) compares with the applied record, under
// the key "secretproviderclass/<ns>/<name>". Pure.
//
// Why not one checksum per class, as for a ConfigMap: the versions of a
// class's objects are not stored on the class. The CSI driver writes them per
// pod, into one SecretProviderClassPodStatus (SPCPS) per (pod, class), named
// <pod>-<namespace>-<class> and owned by the pod. A rotation rewrites the
// SPCPS of running pods one node at a time (minutes apart), a restart's new
// pods get fresh SPCPS, the old pods' ones go with them, and pods of other
// workloads may mount the same class. A namespace-wide version set would
// change at each of those steps. Reloader restarts on every SPCPS update
// whose version set differs from that same SPCPS's previous one, and relies
// on the env var / annotation it wrote to skip the pods' later updates; it
// ignores creations, so after its own restart (or downtime) it has no
// memory of which versions the workload runs.
//
// The rule here. For workload W and class s, the "mounts" are the SPCPS of
// s whose owning pod (ownerReferences uid, as the pod cache has it) is a pod
// of W, each with:
//   checksum         HMAC of its sorted (id, version) pairs (versionsChecksum)
//   resourceVersion  of the SPCPS: when its versions were last written
//   current          the pod belongs to W's current restart generation: its
//                    restart trigger annotation equals the template's
//                    (isCurrentGeneration). A restart changes the trigger,
//                    so every pod running before it stops counting at once.
//   terminating      the pod has a deletionTimestamp
// and C = the mounts of current, not terminating pods. Then:
//
//   | C          | applied recorded | checksum                                   | so                                  |
//   |------------|------------------|--------------------------------------------|-------------------------------------|
//   | empty      | yes              | the applied one                            | nothing to compare yet: no restart, |
//   |            |                  |                                            | no "missing" (mid-rollout, scaled 0)|
//   | empty      | no               | MISSING                                    | nothing recorded (R5)               |
//   | not empty  | either           | the checksum of the mount of C written     | R1 restarts when it differs from    |
//   |            |                  | last (greatest resourceVersion)            | the applied one, R2 records it      |
//
// Why that meets what a restart record promises:
//  - One rotation, one restart: the first SPCPS of W's current pods the driver
//    rewrites with new versions is the newest write, so the checksum moves
//    once to the new set; the restart writes it as applied and a new
//    trigger. The other pods' rewrites that follow are of the old generation
//    (ignored), and so are the old pods' deletions.
//  - The new pods' SPCPS restart nothing: they mount what the store serves,
//    the versions just applied, so the newest write equals the record. (If
//    the store rotated again in between, they show the newer set: that is
//    the next rotation, and its one restart.)
//  - Stateless: the checksum is a function of the cluster (the SPCPS, the
//    pods, the workload's trigger) and the record on the workload, so an
//    operator rebuilt from LISTs decides what one that never stopped would:
//    a rotation made while it was down differs from the record (a restart),
//    one already applied does not (and its old pods are of another
//    generation).
//  - Pods of other workloads mounting the same class never count for W.
// Limits, stated in docs/csi-secrets.md: resourceVersion is ordered as the
// API server's etcd revisions are (integers; anything else is ordered as
// text, deterministically); a rewrite of an unrotated pod's SPCPS that
// changes no version (a node label) is a newer write of the older set, so it
// can hold a pending restart back until that pod is rotated too, never add
// one — except right after an opt-in made mid-rotation, which recorded the
// newer set.
import type { KeyObject } from 'node:crypto';
import { XING_TIMESTAMP_ANNOTATION } from '../vocabulary/keys.ts';
import { MISSING } from './checksums.ts';
import { configChecksum } from './hash.ts';
import { asRecord, asString, compare } from './references.ts';

/** One SPCPS of a pod of the workload, as the checksum rule needs it. */
export interface ClassMount {
  checksum: string;
  resourceVersion: string;
  /** The pod is of the workload's current restart generation. */
  current: boolean;
  terminating: boolean;
}

/** The rule in the table above. */
export function classChecksum(mounts: readonly ClassMount[], applied: string | undefined): string {
  let latest: ClassMount | undefined;
  for (const m of mounts) {
    if (!m.current || m.terminating) continue;
    if (!latest || compareResourceVersions(m.resourceVersion, latest.resourceVersion) > 0) latest = m;
    else if (compareResourceVersions(m.resourceVersion, latest.resourceVersion) === 0 && m.checksum > latest.checksum)
      latest = m; // not from an API server; still one answer whatever the order
  }
  if (latest) return latest.checksum;
  return applied ?? MISSING;
}

/**
 * Integers (what every etcd-backed API server issues) by value; anything
 * else after every integer, as text. Deterministic for any input.
 */
export function compareResourceVersions(a: string, b: string): number {
  const intA = /^[0-9]+$/.test(a);
  const intB = /^[0-9]+$/.test(b);
  if (intA && intB) {
    const x = a.replace(/^0+(?=.)/, '');
    const y = b.replace(/^0+(?=.)/, '');
    return x.length - y.length || compare(x, y);
  }
  if (intA !== intB) return intA ? -1 : 1;
  return compare(a, b);
}

/**
 * HMAC of a version set, in hash.ts's v1 scheme and key: the objects' ids
 * and versions framed as a ConfigMap's data (id → version), so the same
 * "v1:<hex>" format, key and code as every other checksum. The order of
 * `objects` does not matter. Versions are not secret, but one scheme keeps
 * one key and one format in the annotation. An id listed twice (the driver
 * never does) keeps all its versions, sorted.
 */
export function versionsChecksum(key: Buffer | KeyObject, objects: unknown): string {
  const versions = new Map<string, string[]>();
  for (const o of Array.isArray(objects) ? objects : []) {
    const rec = asRecord(o);
    if (!rec) continue;
    const id = asString(rec.id);
    versions.set(id, [...(versions.get(id) ?? []), asString(rec.version)]);
  }
  const data: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [id, list] of versions) data[id] = list.sort(compare).join('\n');
  return configChecksum(key, { data }, 'configmap');
}

/**
 * Whether a pod belongs to its workload's current restart generation: its
 * restart trigger (com.xing.deployment-restart.timestamp, copied from the
 * template when the pod was created) equals the template's now (both absent,
 * never restarted, is equal), and — for a kind restarted without a template
 * change (an Argo Rollout's spec.restartAt) — it was created at or after
 * `restartAt` (Argo replaces the pods created before it). An unparsable
 * time does not count against the pod.
 */
export function isCurrentGeneration(
  pod: { annotations?: Record<string, string>; creationTimestamp?: string | Date } | undefined,
  templateAnnotations: Record<string, string> | undefined,
  restartAt?: string,
): boolean {
  if (pod?.annotations?.[XING_TIMESTAMP_ANNOTATION] !== templateAnnotations?.[XING_TIMESTAMP_ANNOTATION]) return false;
  if (restartAt === undefined || pod?.creationTimestamp === undefined) return true;
  const created = new Date(pod.creationTimestamp).getTime();
  const restarted = Date.parse(restartAt);
  return Number.isNaN(created) || Number.isNaN(restarted) || created >= restarted;
}

/** A pod's owner, as far as its own metadata tells. */
export interface PodOwnerLike {
  metadata?: {
    labels?: Record<string, string>;
    ownerReferences?: { kind?: string; name?: string; controller?: boolean }[];
  };
}

/**
 * The workload a pod belongs to, from its controller reference alone: a
 * StatefulSet, DaemonSet or Job directly; a ReplicaSet named
 * <workload>-<template hash> (the pod's pod-template-hash label, or
 * rollouts-pod-template-hash for an Argo Rollout's) is its Deployment's or
 * Rollout's. Undefined for a bare pod or another owner.
 */
export function podWorkload(pod: PodOwnerLike): { kind: string; name: string } | undefined {
  const owner = pod.metadata?.ownerReferences?.find((r) => r.controller === true);
  const name = owner?.name ?? '';
  if (!owner || name === '') return undefined;
  if (owner.kind === 'StatefulSet' || owner.kind === 'DaemonSet' || owner.kind === 'Job')
    return { kind: owner.kind, name };
  if (owner.kind !== 'ReplicaSet') return undefined;
  const labels = pod.metadata?.labels ?? {};
  for (const [label, kind] of [
    ['pod-template-hash', 'Deployment'],
    ['rollouts-pod-template-hash', 'Rollout'],
  ] as const) {
    const hash = labels[label];
    if (hash && name.endsWith(`-${hash}`) && name.length > hash.length + 1)
      return { kind, name: name.slice(0, -hash.length - 1) };
  }
  return undefined;
}
