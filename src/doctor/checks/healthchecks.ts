// 12. Health gates: RolloutHealthChecks that do not validate, select no
// StatefulSet or are bound nowhere; StatefulSet annotations naming a check
// that does not exist or does not select them; query endpoints that did not
// answer the doctor. Judged by the parser and the selector rule the gate
// itself uses (rollout/healthcheck/resource.ts, healthgates.ts), so what is called
// misconfigured here is what the gate reports as RolloutHealthCheckMisconfigured.
import {
  HEALTH_CHECK_KIND,
  parseHealthCheck,
  type HealthCheckConfig,
  type RolloutHealthCheck,
} from '../../rollout/healthcheck/resource.ts';
import type { StatefulSet } from '../../runtime/kube/types.ts';
import { HEALTH_CHECK_ANNOTATION, ROLLOUT_GROUP_LABEL } from '../../vocabulary/keys.ts';
import { labelsOf, nameOf, namespaceOf } from '../../vocabulary/metadata.ts';
import { matchLabelsSelect } from '../../vocabulary/selectors.ts';
import { type Finding, type Scope, compare, kubectl, objectName, shellQuote } from './scope.ts';

/** What the doctor's probe of one prometheusURL found (doctor/endpoints.ts). */
export type EndpointProbe =
  | { url: string; outcome: 'answered'; status: number }
  | { url: string; outcome: 'unreachable' | 'untrusted'; reason: string };

const CRD = 'rollouthealthchecks.rollout-operator.grafana.com';
const RHC = 'rhc';

// ------------------------------------------------------------ 12. health gates

const pairs = (labels: Readonly<Record<string, string>>): string[] =>
  Object.entries(labels).map(([k, v]) => `${k}=${v}`);

const key = (namespace: string, name: string): string => `${namespace}/${name}`;

function namedCheck(sts: StatefulSet): string | undefined {
  const value = sts.metadata?.annotations?.[HEALTH_CHECK_ANNOTATION];
  return value === undefined || value === '' ? undefined : value;
}

function setNames(sets: readonly StatefulSet[]): string {
  return sets.map(nameOf).sort(compare).join(', ');
}

/** `kubectl -n ns annotate statefulset a b c key=value`. */
function annotateCommand(namespace: string, sets: readonly StatefulSet[], value: string, overwrite = false): string {
  return [
    'kubectl',
    '-n',
    shellQuote(namespace),
    'annotate',
    ...(overwrite ? ['--overwrite'] : []),
    'statefulset',
    ...(sets.length > 0 ? sets.map(nameOf).sort(compare) : ['<statefulset>']),
    shellQuote(`${HEALTH_CHECK_ANNOTATION}=${value}`),
  ].join(' ');
}

interface Parsed {
  object: RolloutHealthCheck;
  config?: HealthCheckConfig;
  errors?: string[];
}

/** Invalid checks, checks selecting no StatefulSet, checks no StatefulSet names. */
function checkResources(scope: Scope, checks: readonly Parsed[]): Finding[] {
  const findings: Finding[] = [];
  const setsReadable = scope.readable('statefulsets');
  for (const { object, config, errors } of checks) {
    const namespace = namespaceOf(object);
    const name = nameOf(object);
    const where = objectName(HEALTH_CHECK_KIND, object);
    const namers = scope.statefulSets.filter((s) => namespaceOf(s) === namespace && namedCheck(s) === name);
    if (errors) {
      findings.push({
        severity: 'error',
        code: 'health-check-invalid',
        object: where,
        problem:
          `it does not validate: ${errors.join('; ')}` +
          (namers.length > 0
            ? `; the StatefulSets that name it (${setNames(namers)}) are held at their gate until it is fixed or the annotation removed (RolloutHealthCheckMisconfigured)`
            : '; the validating webhook refuses it, so it was created before the webhook was installed or while the webhook was not called'),
        fix: `correct the fields named (query needs \${targetMatchers} and \${range}, successQuery needs \${current}; durations like 5m; policies Pause, Warn or Disabled; see docs/health-gates.md): ${kubectl(object, RHC, 'edit')}`,
      });
      continue;
    }
    if (!config || !setsReadable) continue;
    const selected = scope.statefulSets.filter(
      (s) => namespaceOf(s) === namespace && matchLabelsSelect(config.matchLabels, labelsOf(s)),
    );
    if (selected.length === 0) {
      const groups = [...new Set(namers.map((s) => labelsOf(s)[ROLLOUT_GROUP_LABEL]).filter(Boolean))];
      findings.push({
        severity: 'warning',
        code: 'health-check-selects-nothing',
        object: where,
        problem: `its selector ${pairs(config.matchLabels).join(',')} matches no StatefulSet in ${namespace}: a StatefulSet that names it is not gated, and the rollout proceeds without it (RolloutHealthCheckMisconfigured: "does not select")`,
        fix: `point spec.selector.matchLabels at labels the gated StatefulSets carry (${groups.length === 1 ? `here ${ROLLOUT_GROUP_LABEL}: ${groups[0]!}` : `usually ${ROLLOUT_GROUP_LABEL}: <group>`}): ${kubectl(object, RHC, 'edit')}`,
      });
    }
    if (namers.length === 0) {
      findings.push({
        severity: 'warning',
        code: 'health-check-unbound',
        object: where,
        problem: `no StatefulSet's ${HEALTH_CHECK_ANNOTATION} annotation names it (bound nowhere): it gates no rollout`,
        fix:
          selected.length > 0
            ? `annotate the StatefulSets it selects: ${annotateCommand(namespace, selected, name)}; or delete it: ${kubectl(object, RHC, 'delete')}`
            : `annotate each StatefulSet it should gate: ${annotateCommand(namespace, [], name)}; or delete it: ${kubectl(object, RHC, 'delete')}`,
      });
    }
  }
  return findings;
}

/** StatefulSet annotations naming a check that does not exist, or one whose selector leaves them out. */
function checkBindings(scope: Scope, checks: readonly Parsed[]): Finding[] {
  if (!scope.readable('rollouthealthchecks')) return [];
  const findings: Finding[] = [];
  const byName = new Map(checks.map((c) => [key(namespaceOf(c.object), nameOf(c.object)), c]));
  for (const sts of scope.statefulSets) {
    const name = namedCheck(sts);
    if (name === undefined) continue;
    const namespace = namespaceOf(sts);
    const found = byName.get(key(namespace, name));
    const where = objectName('StatefulSet', sts);
    const remove = `kubectl -n ${shellQuote(namespace)} annotate statefulset/${nameOf(sts)} ${HEALTH_CHECK_ANNOTATION}-`;
    if (!found) {
      const selecting = checks.filter(
        (c) =>
          c.config && namespaceOf(c.object) === namespace && matchLabelsSelect(c.config.matchLabels, labelsOf(sts)),
      );
      findings.push({
        severity: 'warning',
        code: 'health-check-unknown',
        object: where,
        problem: `its ${HEALTH_CHECK_ANNOTATION} annotation names RolloutHealthCheck ${namespace}/${name}, which does not exist: the rollout proceeds without this gate (RolloutHealthCheckMisconfigured)`,
        fix:
          selecting.length === 1
            ? `name the check that selects it: ${annotateCommand(namespace, [sts], nameOf(selecting[0]!.object), true)}; or remove the annotation: ${remove}`
            : `create RolloutHealthCheck ${name} in ${namespace} (install its CRD first, deploy/crds/rollout-health-checks.yaml, if kubectl get crd ${CRD} finds none), or remove the annotation: ${remove}`,
      });
      continue;
    }
    const config = found.config;
    if (!config || matchLabelsSelect(config.matchLabels, labelsOf(sts))) continue;
    const labels = labelsOf(sts);
    const missing = Object.entries(config.matchLabels).filter(([k]) => labels[k] === undefined);
    const conflicting = Object.entries(config.matchLabels).some(([k, v]) => labels[k] !== undefined && labels[k] !== v);
    findings.push({
      severity: 'warning',
      code: 'health-check-not-selecting',
      object: where,
      problem: `RolloutHealthCheck ${namespace}/${name}, named by its ${HEALTH_CHECK_ANNOTATION} annotation, does not select StatefulSet ${nameOf(sts)} (spec.selector.matchLabels ${pairs(config.matchLabels).join(',')}): the rollout proceeds without this gate (RolloutHealthCheckMisconfigured)`,
      fix: conflicting
        ? `widen the check's selector to this StatefulSet's labels: ${kubectl(found.object, RHC, 'edit')}; or remove the annotation: ${remove}`
        : `label the StatefulSet (its pods do not restart): kubectl -n ${shellQuote(namespace)} label statefulset/${nameOf(sts)} ${missing.map(([k, v]) => shellQuote(`${k}=${v}`)).join(' ')}; or remove the annotation: ${remove}`,
    });
  }
  return findings;
}

/** Endpoints that did not answer the doctor's probe, or answered unlike a Prometheus API. */
function checkEndpoints(scope: Scope, checks: readonly Parsed[]): Finding[] {
  const probes = new Map((scope.input.healthCheckEndpoints ?? []).map((p) => [p.url, p]));
  const findings: Finding[] = [];
  for (const { object, config } of checks) {
    if (!config) continue;
    const url = config.access.url.href;
    const probe = probes.get(url);
    if (!probe) continue;
    const where = objectName(HEALTH_CHECK_KIND, object);
    const edit = kubectl(object, RHC, 'edit');
    const buildinfo = `${url.replace(/\/+$/, '')}/api/v1/status/buildinfo`;
    if (probe.outcome === 'unreachable') {
      findings.push({
        severity: 'warning',
        code: 'health-check-unreachable',
        object: where,
        problem: `its prometheusURL ${url} could not be reached from where doctor runs (${probe.reason}). This is not necessarily a problem: the operator queries from inside the cluster, where names such as *.svc resolve that may not resolve from a workstation; if the operator cannot reach it either, every evaluation is an error and onError applies (default Pause)`,
        fix: `try it from inside the cluster: kubectl -n ${shellQuote(namespaceOf(object))} run rhc-probe --rm -i --restart=Never --image=curlimages/curl -- curl -sS -m 2 ${shellQuote(buildinfo)}; if that answers, nothing is wrong; else correct spec.prometheusURL: ${edit}`,
      });
    } else if (probe.outcome === 'untrusted' && !config.access.ca) {
      findings.push({
        severity: 'warning',
        code: 'health-check-unreachable',
        object: where,
        problem: `its prometheusURL ${url} answered, but its TLS certificate is not trusted from where doctor runs (${probe.reason}); the operator checks it against its own system CAs unless the check names a CA, so its queries may fail the same way`,
        fix: `name the CA that signed it in spec.tlsConfig.ca (secret or configMap, a key holding the PEM bundle): ${edit}`,
      });
    } else if (probe.outcome === 'answered' && (probe.status === 404 || probe.status >= 500)) {
      findings.push({
        severity: 'warning',
        code: 'health-check-endpoint-error',
        object: where,
        problem:
          probe.status === 404
            ? `its prometheusURL ${url} answered 404 Not Found for /api/v1/status/buildinfo and /api/v1/query: it does not look like the base of a Prometheus HTTP API`
            : `its prometheusURL ${url} answered ${probe.status} from where doctor runs: queries sent now would be errors (onError, default Pause)`,
        fix:
          probe.status === 404
            ? `set spec.prometheusURL to the base the API lives under (Mimir: http://<query-frontend>:8080/prometheus; Thanos or Prometheus: http://<host>:9090): ${edit}`
            : `check the query endpoint's health (curl -sS ${shellQuote(buildinfo)}), then run the doctor again`,
      });
    }
  }
  return findings;
}

/** RolloutHealthChecks and the StatefulSet annotations that bind them. */
export function checkHealthChecks(scope: Scope): Finding[] {
  const checks: Parsed[] = (scope.input.rolloutHealthChecks ?? []).filter(scope.inScope).map((object) => {
    const parsed = parseHealthCheck(object);
    return 'errors' in parsed ? { object, errors: parsed.errors } : { object, config: parsed.config };
  });
  return [...checkResources(scope, checks), ...checkBindings(scope, checks), ...checkEndpoints(scope, checks)];
}

/** The query endpoints worth probing: those of the valid checks in scope, once each. */
export function endpointsToProbe(checks: readonly RolloutHealthCheck[]): URL[] {
  const urls = new Map<string, URL>();
  for (const object of checks) {
    const parsed = parseHealthCheck(object);
    if ('config' in parsed) urls.set(parsed.config.access.url.href, parsed.config.access.url);
  }
  return [...urls.values()];
}
