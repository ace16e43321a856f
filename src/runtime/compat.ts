// Flags of grafana/rollout-operator that Stateward does not implement,
// accepted so a rollout-operator command line starts unchanged. Each one
// set to something other than its default is named in a warning at start,
// saying what Stateward does instead.
import type { FlagSet } from './flags/flagset.ts';

export function registerCompatFlags(fs: FlagSet): { warnings: () => string[] } {
  const readyPatchTimeout = fs.duration('zpdb.pod-ready-annotation-patch-timeout', 5_000, 'Accepted for rollout-operator compatibility (no effect): Stateward reads the Ready condition\'s transition time and writes no grafana.com/ready-time annotation.');
  const clusterValidation = fs.bool('server.cluster-validation.http.enabled', false, 'Accepted for rollout-operator compatibility: the X-Cluster header is not validated (a warning says so when set).');
  const softValidation = fs.bool('server.cluster-validation.http.soft-validation', false, 'Accepted for rollout-operator compatibility (no effect).');
  const excludedPaths = fs.string('server.cluster-validation.http.excluded-paths', '', 'Accepted for rollout-operator compatibility (no effect).');
  const excludedAgents = fs.string('server.cluster-validation.http.excluded-user-agents', '', 'Accepted for rollout-operator compatibility (no effect).');
  return {
    warnings: () => {
      const out: string[] = [];
      if (readyPatchTimeout.value !== 5_000) out.push('-zpdb.pod-ready-annotation-patch-timeout has no effect: Stateward reads the Ready condition\'s transition time and patches no pod');
      if (clusterValidation.value || softValidation.value || excludedPaths.value !== '' || excludedAgents.value !== '') {
        out.push('-server.cluster-validation.http.* is not implemented: the X-Cluster header of incoming requests is not validated, and outgoing requests do not carry it');
      }
      return out;
    },
  };
}
