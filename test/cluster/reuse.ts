// For scripts that run against the local cluster (npm run soak, npm run
// fuzz): reuse the one named (or the test run's) when it is up, else start
// one of their own, and point testCluster() at whichever it is.
import { join } from 'node:path';
import { clustersRoot, LocalCluster, readState, type ClusterOptions } from './cluster.ts';
import { serveControl } from './control.ts';
import { processAlive } from './lock.ts';
import { TEST_CLUSTER_ENV } from './testing.ts';

/** The cluster started for this run (to tear down), or undefined when a running one is reused. */
export async function reuseOrStartCluster(
  name: string,
  options: ClusterOptions & { name: string },
): Promise<LocalCluster | undefined> {
  const stateDir = process.env[TEST_CLUSTER_ENV] ?? join(clustersRoot(), name);
  const state = readState(stateDir);
  if (state?.ready && processAlive(state.ownerPid)) {
    process.env[TEST_CLUSTER_ENV] = stateDir;
    return undefined;
  }
  console.error(`# starting local cluster "${options.name}" for this run`);
  const owned = await LocalCluster.start(options);
  await serveControl(owned, () => undefined);
  process.env[TEST_CLUSTER_ENV] = owned.stateDir;
  return owned;
}
