// The machine's real kubectl against the test cluster, for client behaviour
// (scale, patch, drain) exactly as users run it.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { TestCluster } from '../cluster/testing.ts';

const exec = promisify(execFile);

/** Runs kubectl; never throws: ok is false on a non-zero exit, out has stdout and stderr. */
export async function kubectl(cluster: TestCluster, ...args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const { stdout, stderr } = await exec('kubectl', ['--kubeconfig', cluster.kubeconfigPath, ...args]);
    return { ok: true, out: stdout + stderr };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}
