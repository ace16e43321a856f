// `stateward doctor`, the pure part: the objects a client can list in, a
// list of misconfigurations out, each with what to do about it. One function
// per check, each with stable codes (scripts and alerts may match on them).
// Values are judged by the parsers the operator itself uses (scaling
// validation, rollout-max-unavailable, ZPDB parsing, config references), so
// what the doctor calls wrong is exactly what the operator would ignore,
// refuse or trip over.
//
// Codes (severity: e error, w warning, e/w depending on the case):
//   key-should-be-label e/w, key-should-be-annotation e/w, key-on-pod-template e/w,
//   min-time-label-deprecated w, min-time-label-ignored w
//   group-not-ondelete e, leader-not-found e, leader-cycle e
//   not-exactly-true e, invalid-min-time e, invalid-last-downscale e,
//   incomplete-mirror e, invalid-mirror-write-back w, force-replicas-ignored w,
//   invalid-delayed-downscale e, invalid-scaling-metadata w,
//   last-downscale-in-future w, invalid-max-unavailable w,
//   prepare-downscale-incomplete e
//   webhook-ca-labels-missing e/w, webhook-ca-bundle-empty e,
//   webhook-namespace-mismatch e, webhook-failure-policy-ignore e/w,
//   no-downscale-selects-operator e
//   zpdb-invalid e, zpdb-no-statefulsets e/w, zpdb-single-statefulset e, zpdb-overlap e
//   config-missing e/w, config-restart-annotation w
//   health-check-invalid e, health-check-selects-nothing w, health-check-unbound w,
//   health-check-unknown w, health-check-not-selecting w, health-check-unreachable w,
//   health-check-endpoint-error w
//   operator-unavailable e, operator-not-leading e/w, webhook-service-missing e, webhook-service-no-endpoints e
//   operator-requests-refused e/w
//   reschedule-webhook-not-served e/w
//   ondelete-unmanaged w, operator-flag-missing w, operator-permission-missing w, checks-skipped w,
//   check-failed w
import { checkGroupUpdateStrategy, checkLeaders, checkOnDeleteUnmanaged } from './checks/groups.ts';
import { checkHealthChecks } from './checks/healthchecks.ts';
import { checkRescheduleServed } from './checks/drainprofiles.ts';
import { checkOperatorFlags, checkUnreadable } from './checks/operatorflags.ts';
import { checkOperatorPermissions } from './checks/operatorpermissions.ts';
import { checkOperatorRefusals } from './checks/operatorrefusals.ts';
import {
  checkOperatorAvailable,
  checkOperatorLeading,
  checkWebhookEndpoints,
  checkWebhookServices,
} from './checks/operatorrunning.ts';
import { checkKeyPlacement, checkMinTimeLabel } from './checks/placement.ts';
import { checkConfigRestarts } from './checks/restarts.ts';
import { type DoctorInput, type Finding, Scope, type Severity, compare } from './checks/scope.ts';
import { checkMaxUnavailable, checkPrepareDownscale, checkScalingValues } from './checks/values.ts';
import { checkWebhooks } from './checks/webhooks.ts';
import { checkZpdbs } from './checks/zpdbs.ts';

// ------------------------------------------------------------------ diagnose

const CHECKS: readonly ((scope: Scope) => Finding[])[] = [
  checkKeyPlacement,
  checkMinTimeLabel,
  checkGroupUpdateStrategy,
  checkLeaders,
  checkScalingValues,
  checkMaxUnavailable,
  checkPrepareDownscale,
  checkWebhooks,
  checkZpdbs,
  checkConfigRestarts,
  checkHealthChecks,
  checkOnDeleteUnmanaged,
  checkOperatorFlags,
  checkRescheduleServed,
  checkOperatorPermissions,
  checkOperatorRefusals,
  checkOperatorAvailable,
  checkOperatorLeading,
  checkWebhookServices,
  checkWebhookEndpoints,
  checkUnreadable,
];

/** Every finding, errors first, then by object and code. */
export function diagnose(input: DoctorInput): Finding[] {
  const scope = new Scope(input);
  const seen = new Set<string>();
  const findings: Finding[] = [];
  for (const check of CHECKS) {
    let found: Finding[];
    try {
      found = check(scope);
    } catch (error) {
      // One check tripping over an odd object must not hide the others' findings.
      found = [
        {
          severity: 'warning',
          code: 'check-failed',
          object: check.name,
          problem: `the check failed: ${error instanceof Error ? error.message : String(error)}`,
          fix: 'report this as a bug in stateward doctor, with the objects it ran on',
        },
      ];
    }
    for (const f of found) {
      const key = `${f.code}\0${f.object}\0${f.problem}`;
      if (seen.has(key)) continue;
      seen.add(key);
      findings.push(f);
    }
  }
  const rank = (s: Severity) => (s === 'error' ? 0 : 1);
  return findings.sort(
    (a, b) =>
      rank(a.severity) - rank(b.severity) ||
      compare(a.object, b.object) ||
      compare(a.code, b.code) ||
      compare(a.problem, b.problem),
  );
}
