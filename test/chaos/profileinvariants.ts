// The monitor's rules for drains under reschedule profiles (issue 38),
// written from docs/drain.md ("Reschedule-on-eviction", "Reschedule
// profiles") and docs/migrating-from-strimzi-drain-cleaner.md, not from
// src/drain/reschedule: a pure state machine fed with the pod watch events
// of the profiles' namespaces (profiledrains.ts puts the pods there).
//
// The soak's profiles, as documented:
//   couchbase  (-reschedule.* flags): pods labelled app=couchbase in its
//              namespace; annotation cao.couchbase.com/reschedule=true; deny.
//   strimzi    (STRIMZI_DRAIN_NAMESPACES): pods labelled strimzi.io/kind=Kafka
//              whose strimzi.io/name is all of .+-kafka or .+-zookeeper, in
//              its namespace; annotation strimzi.io/manual-rolling-update=true;
//              deny.
//
// What is checked:
// - A pod a deny profile selects is never evicted: the Eviction API stamps
//   the condition DisruptionTarget (reason EvictionByEvictionAPI) before it
//   deletes, and a deny profile refuses every eviction of its pods (429 while
//   the pod waits, 404 once it was replaced), so its operator moves it
//   instead. The report says whether the annotation had been written first.
// - A pod carries a profile's annotation only if that profile selects it: a
//   pod no profile selects (my-kafka-exporter: strimzi.io/name does not end
//   in -kafka) or another profile's pod is never annotated.
// - Every reschedule request is carried out: a selected pod still alive and
//   annotated is pending while the soak runs and a violation at the end (its
//   drain could not have completed).
// Counted: first annotations per profile, moves (an annotated pod deleted
// without an eviction: its operator's stand-in replacing it), evictions of
// unselected pods, and deletions seen only on a relist.
import type { V1Pod } from '@kubernetes/client-node';
import type { Pending, WatchType } from './invariants.ts';
import { iso } from './observed.ts';

export const COUCHBASE_ANNOTATION = 'cao.couchbase.com/reschedule=true';
export const STRIMZI_ANNOTATION = 'strimzi.io/manual-rolling-update=true';

export interface ProfileRule {
  name: 'couchbase' | 'strimzi';
  namespace: string;
  selects: (labels: Record<string, string>) => boolean;
  annotation: { key: string; value: string };
}

const annotation = (text: string) => {
  const [key, value] = text.split('=') as [string, string];
  return { key, value };
};

/** The soak's two profiles, in the namespaces they are scoped to. */
export function soakProfileRules(namespaces: { couchbase: string; kafka: string }): ProfileRule[] {
  return [
    {
      name: 'couchbase',
      namespace: namespaces.couchbase,
      selects: (labels) => labels['app'] === 'couchbase',
      annotation: annotation(COUCHBASE_ANNOTATION),
    },
    {
      name: 'strimzi',
      namespace: namespaces.kafka,
      selects: (labels) =>
        labels['strimzi.io/kind'] === 'Kafka' && /^(?:.+-kafka|.+-zookeeper)$/s.test(labels['strimzi.io/name'] ?? ''),
      annotation: annotation(STRIMZI_ANNOTATION),
    },
  ];
}

interface Tracked {
  where: string;
  rule: ProfileRule | undefined;
  annotatedAt: number | undefined;
  evicted: boolean;
  misannotated: boolean;
}

export interface ProfileHooks {
  violate: (now: number, kind: string, message: string, details?: Record<string, unknown>) => void;
  count: (name: string, by?: number) => void;
}

export class ProfileDrainRules {
  private readonly rules: ProfileRule[];
  private readonly hooks: ProfileHooks;
  private readonly namespaces: Set<string>;
  /** Every pod seen, by UID (live ones until their deletion). */
  private readonly pods = new Map<string, Tracked>();
  private readonly live = new Set<string>();

  constructor(rules: ProfileRule[], hooks: ProfileHooks) {
    this.rules = rules;
    this.hooks = hooks;
    this.namespaces = new Set(rules.map((r) => r.namespace));
  }

  onPod(pod: V1Pod, type: WatchType, now: number, relist: boolean): void {
    const namespace = pod.metadata?.namespace ?? '';
    const uid = pod.metadata?.uid ?? '';
    if (!this.namespaces.has(namespace) || uid === '') return;
    const labels = pod.metadata?.labels ?? {};
    const where = `${namespace}/${pod.metadata?.name ?? ''}`;
    let state = this.pods.get(uid);
    if (!state) {
      const rule = this.rules.find((r) => r.namespace === namespace && r.selects(labels));
      this.pods.set(uid, (state = { where, rule, annotatedAt: undefined, evicted: false, misannotated: false }));
    }
    this.annotations(pod, state, now);
    const evicted = (pod.status?.conditions ?? []).some(
      (c) => c.type === 'DisruptionTarget' && c.status === 'True' && c.reason === 'EvictionByEvictionAPI',
    );
    if (evicted && !state.evicted) {
      state.evicted = true;
      if (state.rule)
        this.hooks.violate(
          now,
          'reschedule-profile-pod-evicted',
          `${where}, selected by the ${state.rule.name} profile (deny), was evicted ${state.annotatedAt !== undefined ? `although its annotation ${state.rule.annotation.key} was written first (at ${iso(state.annotatedAt)})` : 'without its annotation ever being written'}: a deny profile lets no eviction of its pods through`,
          { pod: where, uid },
        );
      else this.hooks.count('rescheduleUnselectedEvictions');
    }
    if (type !== 'DELETED') {
      this.live.add(uid);
      return;
    }
    this.live.delete(uid);
    if (relist) this.hooks.count('rescheduleDeletionsSeenOnlyOnRelist');
    else if (state.rule && !state.evicted)
      this.hooks.count(
        state.annotatedAt !== undefined ? `rescheduleMoves.${state.rule.name}` : 'rescheduleUnannotatedDeletes',
      );
  }

  private annotations(pod: V1Pod, state: Tracked, now: number): void {
    const annotations = pod.metadata?.annotations ?? {};
    for (const rule of this.rules) {
      if (annotations[rule.annotation.key] !== rule.annotation.value) continue;
      if (rule === state.rule) {
        if (state.annotatedAt === undefined) {
          state.annotatedAt = now;
          this.hooks.count(`rescheduleAnnotations.${rule.name}`);
        }
        continue;
      }
      if (state.misannotated) continue;
      state.misannotated = true;
      this.hooks.violate(
        now,
        'reschedule-annotation-on-unselected-pod',
        `${state.where} carries the ${rule.name} profile's annotation ${rule.annotation.key}=${rule.annotation.value} although ${state.rule ? `the ${state.rule.name} profile selects it` : 'no profile selects it'}`,
        { pod: state.where, labels: pod.metadata?.labels ?? {} },
      );
    }
  }

  /** Selected pods asked to move and still there. */
  pending(): Pending[] {
    return [...this.live]
      .map((uid) => this.pods.get(uid)!)
      .filter((s) => s.rule && s.annotatedAt !== undefined)
      .map((s) => ({ workload: `pod/${s.where}`, config: '(reschedule request)', since: iso(s.annotatedAt!) }));
  }

  /** The end of the run: a request never carried out is a drain that could not complete. */
  finish(now: number): void {
    for (const p of this.pending())
      this.hooks.violate(
        now,
        'reschedule-request-not-carried-out',
        `${p.workload.slice('pod/'.length)} was annotated for its operator at ${p.since} and is still there at the end: a drain of its node could not complete`,
      );
  }
}
