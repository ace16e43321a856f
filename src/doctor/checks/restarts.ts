// 7. Config-change restarts: missing configs and restart annotations.
import type { KubeObject } from '../../runtime/kube/types.ts';
import { configKey, type ConfigKind } from '../../restarts/references.ts';
import { mayOptIn, watchedConfigs } from '../../restarts/optins.ts';
import { labelledConfigs } from '../../restarts/selectedconfigs.ts';
import { XING_ENABLED_ANNOTATION } from '../../vocabulary/keys.ts';
import { type Scope, type Finding, objectName } from './scope.ts';
import { stripName } from './values.ts';
import { nameOf, namespaceOf } from '../../vocabulary/metadata.ts';

// ------------------------------------------------------- 7. config restarts

/** Workloads opted in to config-change restarts whose ConfigMaps or Secrets do not exist, and opt-in annotations that do not parse. */
export function checkConfigRestarts(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const configs: Record<ConfigKind, { list: KubeObject[]; readable: boolean; noun: string }> = {
    configmap: { list: scope.input.configMaps, readable: scope.readable('configmaps'), noun: 'ConfigMap' },
    secret: { list: scope.input.secrets, readable: scope.readable('secrets'), noun: 'Secret' },
  };
  const byKey = new Map<string, KubeObject>();
  for (const kind of ['configmap', 'secret'] as const) {
    for (const c of configs[kind].list) byKey.set(configKey(kind, namespaceOf(c), nameOf(c)), c);
  }
  const options = {
    configMeta: (kind: ConfigKind, namespace: string, name: string) =>
      byKey.get(configKey(kind, namespace, name))?.metadata,
    configNames: (kind: ConfigKind, namespace: string) =>
      configs[kind].list.filter((c) => namespaceOf(c) === namespace).map(nameOf),
    // stateward.dev/config-restart-*-selector: matched against the namespace's configs' labels, as the controller does.
    configsOf: (kind: ConfigKind, namespace: string) =>
      labelledConfigs(configs[kind].list.filter((c) => namespaceOf(c) === namespace)),
  };
  for (const { kind, workload } of scope.workloads) {
    if (!mayOptIn(workload)) continue;
    const watched = watchedConfigs(workload, options);
    const object = objectName(kind, workload);
    for (const warning of watched.warnings) {
      findings.push({
        severity: 'warning',
        code: 'config-restart-annotation',
        object,
        problem: stripName(warning, nameOf(workload)),
        fix: `correct or remove the annotation named above (docs/restarts.md lists the opt-ins and their values; xing's is ${XING_ENABLED_ANNOTATION}: enabled)`,
      });
    }
    for (const config of watched.configs) {
      const { readable, noun } = configs[config.kind];
      if (!readable || byKey.has(config.key)) continue;
      const reference = config.reference;
      if (reference?.optional) continue;
      findings.push({
        severity: reference ? 'error' : 'warning',
        code: 'config-missing',
        object,
        problem: reference
          ? `it is opted in to config restarts (${watched.optIns.join(', ')}) and its pods need ${noun} ${config.name}, which does not exist: new pods cannot start, and there is nothing to restart for`
          : `its reload list names ${noun} ${config.name}, which does not exist (nor is it referenced by the pod template): nothing restarts until it is created`,
        fix: reference
          ? `create ${noun} ${config.namespace}/${config.name}, or mark the reference optional: true, or fix the name in the pod template`
          : `create ${noun} ${config.namespace}/${config.name}, or fix the name in the reload annotation`,
      });
    }
  }
  return findings;
}
