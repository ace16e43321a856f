// Flags of grafana/rollout-operator that Stateward does not implement,
// accepted so a rollout-operator command line starts unchanged. Each one
// set to something other than its default is named in a warning at start,
// saying what Stateward does instead.
import type { FlagSet } from './flags/flagset.ts';

export function registerCompatFlags(fs: FlagSet): { warnings: () => string[] } {
  const readyPatchTimeout = fs.duration(
    'zpdb.pod-ready-annotation-patch-timeout',
    5_000,
    "Accepted for rollout-operator compatibility (no effect): Stateward reads the Ready condition's transition time and writes no grafana.com/ready-time annotation.",
  );
  return {
    warnings: () => {
      const out: string[] = [];
      if (readyPatchTimeout.value !== 5_000)
        out.push(
          "-zpdb.pod-ready-annotation-patch-timeout has no effect: Stateward reads the Ready condition's transition time and patches no pod",
        );
      return out;
    },
  };
}
