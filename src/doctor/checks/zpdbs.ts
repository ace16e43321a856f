// 6. Zone-aware disruption budgets: invalid, selecting nothing or one
// StatefulSet, overlapping.
import type { KubeObject } from '../../runtime/kube/types.ts';
import { ZPDB_KIND, findZpdbForPod, parseZpdb, zpdbSelects, type ZpdbConfig } from '../../drain/zpdb/zpdbresource.ts';
import { type Scope, type Finding, compare, kubectl, objectName, plural, shellQuote } from './scope.ts';
import { labelsOf, nameOf, namespaceOf } from '../../vocabulary/metadata.ts';

// ----------------------------------------------------------------- 6. ZPDBs

/** ZoneAwarePodDisruptionBudgets that do not parse, select no or one StatefulSet, or overlap. */
export function checkZpdbs(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const valid: { object: KubeObject; config: ZpdbConfig }[] = [];
  const budgets = scope.input.zpdbs.filter(scope.inScope);
  for (const zpdb of budgets) {
    const parsed = parseZpdb({ ...zpdb, kind: zpdb.kind ?? ZPDB_KIND });
    if ('error' in parsed) {
      findings.push({
        severity: 'error',
        code: 'zpdb-invalid',
        object: objectName(ZPDB_KIND, zpdb),
        problem: `${parsed.error}; the operator denies every eviction of the pods it may cover until it is fixed (docs/drain.md#an-invalid-budget-fails-closed)`,
        fix: `correct its spec (one of maxUnavailable or maxUnavailablePercentage, selector.matchLabels, a podNamePartitionRegex with a capture group before crossZoneEvictionDelay, unhealthyPodEvictionPolicy IfHealthyBudget or AlwaysAllow; see docs/drain.md): ${kubectl(zpdb, 'zpdb', 'edit')}`,
      });
      continue;
    }
    valid.push({ object: zpdb, config: parsed.config });
    const selection = selectionFinding(scope, zpdb, parsed.config);
    if (selection) findings.push(selection);
  }
  findings.push(...overlapFindings(scope, valid));
  return findings;
}

/**
 * A valid budget that selects no StatefulSet (an error when it selects
 * pods: their evictions are all denied) or only one (a zone-aware budget
 * needs two zones).
 */
function selectionFinding(scope: Scope, zpdb: KubeObject, config: ZpdbConfig): Finding | undefined {
  const object = objectName(ZPDB_KIND, zpdb);
  const namespace = namespaceOf(zpdb);
  const sets = scope.statefulSets.filter((s) => namespaceOf(s) === namespace && zpdbSelects(config, labelsOf(s)));
  const pods = scope.readable('pods')
    ? scope.pods.filter((p) => namespaceOf(p) === namespace && zpdbSelects(config, labelsOf(p)))
    : [];
  const selector =
    Object.entries(config.matchLabels)
      .map(([k, v]) => `${k}=${v}`)
      .join(',') || '(everything)';
  if (sets.length === 0) {
    return {
      severity: pods.length > 0 ? 'error' : 'warning',
      code: 'zpdb-no-statefulsets',
      object,
      problem:
        `its selector ${selector} matches no StatefulSet in ${namespace}` +
        (pods.length > 0
          ? `, only ${plural(pods.length, 'pod')}: the selector must match the StatefulSets (one per zone) as well as their pods, so every eviction of those pods is denied ("minimum number of StatefulSets not found")`
          : ' and no pod: it protects nothing'),
      fix:
        pods.length > 0
          ? `label each zone's StatefulSet itself (metadata.labels, not only the pod template) with ${selector}, e.g. kubectl -n ${shellQuote(namespace)} label statefulset/<zone> ${shellQuote(selector.split(',')[0] ?? '')}`
          : `point spec.selector.matchLabels at the labels the StatefulSets and their pods carry (usually rollout-group: <group>), or delete it: ${kubectl(zpdb, 'zpdb', 'edit')}`,
    };
  }
  if (sets.length === 1) {
    return {
      severity: 'error',
      code: 'zpdb-single-statefulset',
      object,
      problem: `its selector ${selector} matches only StatefulSet ${nameOf(sets[0]!)}: a zone-aware budget needs at least two zones, so every eviction of its pods is denied ("minimum number of StatefulSets not found") and drains hang`,
      fix: `label the other zones' StatefulSets with ${selector} too, or use a plain PodDisruptionBudget for a single StatefulSet and delete this one: ${kubectl(zpdb, 'zpdb', 'delete')}`,
    };
  }
  return undefined;
}

/** Two budgets over one pod: every eviction of it is denied. One finding per set of overlapping budgets. */
function overlapFindings(scope: Scope, valid: { object: KubeObject; config: ZpdbConfig }[]): Finding[] {
  const findings: Finding[] = [];
  const overlaps = new Map<string, { names: string[]; namespace: string; pods: number; sets: number }>();
  const configs = valid.map((v) => v.config);
  const note = (namespace: string, names: string[], what: 'pods' | 'sets') => {
    const key = `${namespace}/${names.join(',')}`;
    const entry = overlaps.get(key) ?? { names, namespace, pods: 0, sets: 0 };
    entry[what]++;
    overlaps.set(key, entry);
  };
  for (const pod of scope.readable('pods') ? scope.pods : []) {
    const lookup = findZpdbForPod(configs, pod);
    if (lookup.kind === 'multiple') note(namespaceOf(pod), lookup.names, 'pods');
  }
  for (const sts of scope.statefulSets) {
    const matching = configs
      .filter((c) => c.namespace === namespaceOf(sts) && zpdbSelects(c, labelsOf(sts)))
      .map((c) => c.name)
      .sort(compare);
    if (matching.length > 1) note(namespaceOf(sts), matching, 'sets');
  }
  for (const { names, namespace, pods, sets } of overlaps.values()) {
    const first = valid.find((v) => namespaceOf(v.object) === namespace && nameOf(v.object) === names[0]);
    findings.push({
      severity: 'error',
      code: 'zpdb-overlap',
      object: first ? objectName(ZPDB_KIND, first.object) : `${ZPDB_KIND} ${namespace}/${names[0]}`,
      problem: `budgets ${names.join(', ')} select the same ${[pods ? plural(pods, 'pod') : '', sets ? plural(sets, 'StatefulSet') : ''].filter(Boolean).join(' and ')}: every eviction of a pod under two budgets is denied ("multiple zoned pod disruption budgets found for pod")`,
      fix: 'make the selectors disjoint (one budget per rollout group) or delete all but one',
    });
  }
  return findings;
}
