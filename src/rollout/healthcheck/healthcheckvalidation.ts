// /admission/rollout-health-check-validation: rejects a RolloutHealthCheck
// the gate could not use (a missing placeholder, a bad duration or policy,
// credentials in the URL), every problem in one message with its field
// path (code 400). No API calls. Fail-closed: a refused check is a clear
// error for whoever applies it, while an accepted broken one would hold a
// rollout at its gate (see healthgates.ts) until someone reads the Event.
import type { AdmissionHandler } from '../../runtime/admission/admission.ts';
import { parseHealthCheck } from './resource.ts';

export const HEALTH_CHECK_VALIDATION_PATH = '/admission/rollout-health-check-validation';

export const healthCheckValidationHandler: AdmissionHandler = (request) => {
  const result = parseHealthCheck(request.object ?? {});
  if ('errors' in result)
    return {
      allowed: false,
      status: { code: 400, message: `invalid RolloutHealthCheck: ${result.errors.join('; ')}`, reason: 'BadRequest' },
    };
  return { allowed: true };
};
