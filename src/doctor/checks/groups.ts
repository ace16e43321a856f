// 2. Rollout groups must be OnDelete; 3. leaders must exist and not form a
// cycle; 8. OnDelete StatefulSets nobody rolls.
import type {} from '../../runtime/kube/types.ts';
import { chainOrder, leaderFor } from '../../downscale/coordination/replicaplan.ts';
import {
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  EVICT_ONDELETE_ANNOTATION,
  ROLLOUT_GROUP_LABEL,
} from '../../vocabulary/keys.ts';
import { type Scope, type Finding, compare, has, kubectl, objectName, ownedBy, plural, shellQuote } from './scope.ts';
import { annotationsOf, labelsOf, nameOf, namespaceOf } from '../../vocabulary/metadata.ts';

// --------------------------------------------------- 2. rollout groups: OnDelete

/** A rollout group with a StatefulSet that is not OnDelete is skipped as a whole (src/rollout/planner.ts). */
export function checkGroupUpdateStrategy(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  for (const { group, sets } of scope.groups().values()) {
    for (const sts of sets) {
      const strategy = sts.spec?.updateStrategy?.type ?? 'RollingUpdate';
      if (strategy === 'OnDelete') continue;
      const others = sets
        .filter((s) => s !== sts)
        .map(nameOf)
        .sort(compare);
      findings.push({
        severity: 'error',
        code: 'group-not-ondelete',
        object: objectName('StatefulSet', sts),
        problem: `its update strategy is ${strategy}, but every StatefulSet of rollout group ${JSON.stringify(group)} must be OnDelete; the whole group is blocked: Stateward rolls none of its StatefulSets${others.length ? ` (${others.join(', ')} included)` : ''} and Kubernetes rolls this one on its own, without the zone coordination`,
        fix: `${kubectl(sts, 'StatefulSet', 'patch', '--type=merge', '-p', shellQuote('{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null}}}'))}, and set updateStrategy.type: OnDelete in its manifest`,
      });
    }
  }
  return findings;
}

// ------------------------------------------------------------- 3. leaders

/** grafana.com/rollout-downscale-leader naming no StatefulSet of the group, and leader cycles. */
export function checkLeaders(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const groups = scope.groups();
  const all = scope.statefulSets;
  for (const sts of all) {
    const annotations = annotationsOf(sts);
    if (!has(annotations, DOWNSCALE_LEADER_ANNOTATION_KEY)) continue;
    const leaderName = annotations[DOWNSCALE_LEADER_ANNOTATION_KEY]!;
    const labels = labelsOf(sts);
    const inGroup = has(labels, ROLLOUT_GROUP_LABEL);
    const group = inGroup ? labels[ROLLOUT_GROUP_LABEL]! : undefined;
    const members = group === undefined ? [] : (groups.get(`${namespaceOf(sts)}/${group}`)?.sets ?? []);
    const leader = leaderFor(sts, members);
    if (leader === undefined || !('error' in leader)) continue;
    const sameNamespace = all.find((s) => namespaceOf(s) === namespaceOf(sts) && nameOf(s) === leaderName);
    const object = objectName('StatefulSet', sts);
    let problem: string;
    let fix: string;
    if (!inGroup) {
      problem = `${DOWNSCALE_LEADER_ANNOTATION_KEY}=${JSON.stringify(leaderName)}, but this StatefulSet has no ${ROLLOUT_GROUP_LABEL} label, and a leader is looked up only within the follower's rollout group: its replicas never follow`;
      fix = `label it and its leader with the same group: ${kubectl(sts, 'StatefulSet', 'label', `${ROLLOUT_GROUP_LABEL}=<group>`)}`;
    } else if (sameNamespace) {
      const theirs = labelsOf(sameNamespace)[ROLLOUT_GROUP_LABEL];
      problem = `${DOWNSCALE_LEADER_ANNOTATION_KEY} names ${leaderName}, which exists but is ${theirs === undefined ? 'in no rollout group' : `in rollout group ${JSON.stringify(theirs)}`}, not in ${JSON.stringify(group)}: its replicas never follow (${leader.error})`;
      fix = `put the leader in the follower's group: ${kubectl(sameNamespace, 'StatefulSet', 'label', '--overwrite', `${ROLLOUT_GROUP_LABEL}=${shellQuote(group!)}`)}`;
    } else {
      const candidates = members
        .filter((s) => s !== sts)
        .map(nameOf)
        .sort(compare);
      problem = `${DOWNSCALE_LEADER_ANNOTATION_KEY} names ${JSON.stringify(leaderName)}, but there is no such StatefulSet in namespace ${namespaceOf(sts)}: its replicas never follow (${leader.error})`;
      fix = `name an existing StatefulSet of group ${JSON.stringify(group)}${candidates.length ? ` (${candidates.join(', ')})` : ''}: ${kubectl(sts, 'StatefulSet', 'annotate', '--overwrite', `${DOWNSCALE_LEADER_ANNOTATION_KEY}=<leader>`)}, or remove the annotation`;
    }
    findings.push({ severity: 'error', code: 'leader-not-found', object, problem, fix });
  }
  for (const { namespace, sets } of groups.values()) {
    const order = chainOrder(sets);
    if (Array.isArray(order)) continue;
    const first = order.cycle[0] ?? '';
    const sts = sets.find((s) => nameOf(s) === first) ?? sets[0]!;
    findings.push({
      severity: 'error',
      code: 'leader-cycle',
      object: objectName('StatefulSet', sts),
      problem: `${order.error}; no StatefulSet of the group has its replicas adjusted while the cycle lasts`,
      fix: `pick one leader (usually zone a) and remove the annotation from it: kubectl -n ${shellQuote(namespace)} annotate statefulset/<leader> ${DOWNSCALE_LEADER_ANNOTATION_KEY}-`,
    });
  }
  return findings;
}

// ------------------------------------------------------ 8. OnDelete, unmanaged

/** An OnDelete StatefulSet outside any rollout group, not opted in to evictions: template changes never reach its pods. */
export function checkOnDeleteUnmanaged(scope: Scope): Finding[] {
  if (!scope.readable('pods')) return [];
  const findings: Finding[] = [];
  const pods = scope.pods;
  for (const sts of scope.statefulSets) {
    if ((sts.spec?.updateStrategy?.type ?? 'RollingUpdate') !== 'OnDelete') continue;
    if (has(labelsOf(sts), ROLLOUT_GROUP_LABEL) || annotationsOf(sts)[EVICT_ONDELETE_ANNOTATION] === 'evict') continue;
    const own = pods.filter((p) => ownedBy(p, sts));
    if (own.length === 0) continue;
    const revision = sts.status?.updateRevision;
    const outdated = revision ? own.filter((p) => labelsOf(p)['controller-revision-hash'] !== revision).length : 0;
    findings.push({
      severity: 'warning',
      code: 'ondelete-unmanaged',
      object: objectName('StatefulSet', sts),
      problem:
        `it is OnDelete with ${plural(own.length, 'pod')} but in no rollout group and not opted in to evictions: template (and config) changes reach its pods only when someone deletes them` +
        (outdated > 0 ? `; ${plural(outdated, 'pod')} already ${outdated === 1 ? 'runs' : 'run'} an old revision` : ''),
      fix: `let Stateward roll it: ${kubectl(sts, 'StatefulSet', 'label', `${ROLLOUT_GROUP_LABEL}=${shellQuote(nameOf(sts))}`)} (a group of one), or, for config restarts only, ${kubectl(sts, 'StatefulSet', 'annotate', `${EVICT_ONDELETE_ANNOTATION}=evict`)}, or switch it to RollingUpdate; ignore this if pods are replaced by hand on purpose`,
    });
  }
  return findings;
}
