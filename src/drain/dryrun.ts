// Whether an eviction is a dry run, as the API server decides it
// (dryrun.IsDryRun): `?dryRun=All` on the request, or a non-empty
// deleteOptions.dryRun in the Eviction body — what `kubectl drain
// --dry-run=server` sends. Both eviction webhooks judge dry runs but record
// and change nothing for them.
import type { AdmissionRequestV1 } from '../runtime/admission/admission.ts';

export interface EvictionDryRun {
  requestDryRun: boolean;
  deleteOptionsDryRun: string[];
}

export function evictionDryRun(request: Pick<AdmissionRequestV1, 'dryRun' | 'object'>): EvictionDryRun {
  const options = (request.object as { deleteOptions?: { dryRun?: unknown } } | null | undefined)?.deleteOptions;
  const list = Array.isArray(options?.dryRun) ? options.dryRun.filter((v): v is string => typeof v === 'string') : [];
  return { requestDryRun: request.dryRun === true, deleteOptionsDryRun: list };
}

export function isEvictionDryRun(request: Pick<AdmissionRequestV1, 'dryRun' | 'object'>): boolean {
  const d = evictionDryRun(request);
  return d.requestDryRun || d.deleteOptionsDryRun.length > 0;
}
