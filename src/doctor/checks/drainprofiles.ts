// The reschedule profiles an operator Deployment serves, read from its flags
// and its container environment as the operator reads them
// (src/drain/reschedule/webhook.ts): the -reschedule.* flags' own profile,
// the Strimzi profile (-reschedule.strimzi.* or Strimzi Drain Cleaner's
// STRIMZI_* variables, which is how a Drain Cleaner user moves over) and a
// -reschedule.profiles-file. Used for the permissions the doctor asks about
// (access.ts) and for the check below: a reschedule webhook configuration
// (/admission/reschedule-on-eviction, or Drain Cleaner's /drainer) calling
// an operator that serves no such path.
import { DRAINER_PATH, RESCHEDULE_PATH } from '../../drain/reschedule/webhook.ts';
import { NAMESPACE_LABEL } from '../../vocabulary/keys.ts';
import { labelsOf, namespaceOf } from '../../vocabulary/metadata.ts';
import { argsOf, boolFlag, flagValue } from './operatorflags.ts';
import { type Deployment, type Finding, type Scope, type WebhookEntry, objectName } from './scope.ts';
import { pointsAtOperator, webhookPath } from './webhooks.ts';

/** Strimzi Drain Cleaner's variables; any of them set turns the Strimzi profile on. */
export const STRIMZI_VARIABLES = [
  'STRIMZI_DENY_EVICTION',
  'STRIMZI_DRAIN_KAFKA',
  'STRIMZI_DRAIN_ZOOKEEPER',
  'STRIMZI_DRAIN_NAMESPACES',
] as const;

/** The flags standing for those variables: given on the command line, they turn the profile on too. */
const STRIMZI_FLAGS = [
  'reschedule.strimzi.deny-eviction',
  'reschedule.strimzi.drain-kafka',
  'reschedule.strimzi.drain-zookeeper',
  'reschedule.strimzi.namespaces',
];

/** Names of the environment variables a Deployment's containers set (a valueFrom counts: it is set at run time). */
function envNames(d: Deployment): Set<string> {
  return new Set(
    (d.spec?.template?.spec?.containers ?? []).flatMap((c) => (c.env ?? []).map((e: { name: string }) => e.name)),
  );
}

/** Whether the operator adds the Strimzi profile (and so serves /drainer). */
export function strimziProfileOn(d: Deployment): boolean {
  const args = argsOf(d);
  if (boolFlag(args, 'reschedule.strimzi.enabled') === true) return true;
  if (STRIMZI_FLAGS.some((name) => flagValue(args, name) !== undefined)) return true;
  const env = envNames(d);
  return STRIMZI_VARIABLES.some((name) => env.has(name));
}

/** The reschedule paths the operator serves: none, the reschedule path, and /drainer with the Strimzi profile. */
export function reschedulePaths(d: Deployment): string[] {
  const args = argsOf(d);
  if (boolFlag(args, 'server-tls.enabled') !== true) return [];
  const strimzi = strimziProfileOn(d);
  const any =
    boolFlag(args, 'reschedule.enabled') === true ||
    strimzi ||
    (flagValue(args, 'reschedule.profiles-file') ?? '') !== '';
  return any ? [RESCHEDULE_PATH, ...(strimzi ? [DRAINER_PATH] : [])] : [];
}

/** What turns a path on, for the fix. */
const HOW_TO_SERVE: Record<string, string> = {
  [RESCHEDULE_PATH]:
    'add -reschedule.enabled (the Couchbase profile), -reschedule.profiles-file or the Strimzi profile to its container (--set reschedule.enabled=true, reschedule.profiles or reschedule.strimzi.enabled=true in the chart)',
  [DRAINER_PATH]:
    "turn the Strimzi profile on: -reschedule.strimzi.enabled, or Strimzi Drain Cleaner's STRIMZI_DRAIN_NAMESPACES (or another STRIMZI_* variable) in its container's env (--set reschedule.strimzi.enabled=true in the chart)",
};

/**
 * A reschedule webhook (either path) calling an operator whose Deployment is
 * in view and serves no such path: the operator answers 404, the API server
 * counts the call as failed, and the failure policy decides every eviction
 * the webhook covers (Fail: all refused, so drains stop; Ignore: all let
 * through, so the pods are evicted instead of moved by their operator).
 * Only operators running -server-tls.enabled: without it checkOperatorFlags
 * says so already.
 */
export function checkRescheduleServed(scope: Scope): Finding[] {
  const findings: Finding[] = [];
  const operators = scope.operatorDeployments().filter((d) => boolFlag(argsOf(d), 'server-tls.enabled') === true);
  if (operators.length === 0) return findings;
  for (const config of scope.input.validatingWebhookConfigurations.filter(pointsAtOperator)) {
    for (const w of config.webhooks ?? []) {
      const path = webhookPath(w);
      if (path !== RESCHEDULE_PATH && path !== DRAINER_PATH) continue;
      const namespace = labelsOf(config)[NAMESPACE_LABEL] ?? w.clientConfig?.service?.namespace;
      const called = operators.filter((d) => namespace === undefined || namespaceOf(d) === namespace);
      if (called.length === 0 || called.some((d) => reschedulePaths(d).includes(path))) continue;
      findings.push(notServed(config, w, path, called[0]!));
    }
  }
  return findings;
}

function notServed(config: { metadata?: { name?: string } }, w: WebhookEntry, path: string, d: Deployment): Finding {
  const fail = (w.failurePolicy ?? 'Fail') !== 'Ignore';
  return {
    severity: fail ? 'error' : 'warning',
    code: 'reschedule-webhook-not-served',
    object: objectName('ValidatingWebhookConfiguration', config),
    problem: `webhook ${w.name ?? ''} calls ${path} on the operator, but ${objectName('Deployment', d)} serves no ${path === DRAINER_PATH ? 'Strimzi profile there' : 'reschedule profile'}: every call gets 404, so ${fail ? 'with failurePolicy Fail every eviction it covers is refused and drains stop' : 'with failurePolicy Ignore every eviction it covers goes through, and the pods are evicted instead of moved by their operator'}`,
    fix: HOW_TO_SERVE[path]!,
  };
}
