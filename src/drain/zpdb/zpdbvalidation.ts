// /admission/zpdb-validation: rejects a ZoneAwarePodDisruptionBudget the
// eviction webhook could not use, with rollout-operator's messages (code 400).
// No API calls. Fail-closed is safe here: a rejected budget is a clear
// error for whoever applies it, while an accepted broken one would be
// silently ignored at eviction time.
import type { AdmissionHandler } from '../../runtime/admission/admission.ts';
import { parseZpdb } from './zpdbresource.ts';

/** Where the API server sends ZoneAwarePodDisruptionBudget creates and updates to validate. */
export const ZPDB_VALIDATION_PATH = '/admission/zpdb-validation';

export const zpdbValidationHandler: AdmissionHandler = (request) => {
  const result = parseZpdb(request.object);
  if ('error' in result) return { allowed: false, status: { code: 400, message: result.error, reason: 'BadRequest' } };
  return { allowed: true };
};
