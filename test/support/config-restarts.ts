// What the config-restart int tests share: a Deployment to restart, an
// operator with config restarts on (1 s grace), and "settled": the operator
// saw a config change and has nothing left waiting.
import type { TestContext } from 'node:test';
import type { KubeObject } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { OperatorProcess } from './operator-process.ts';

export const TRIGGER = 'com.xing.deployment-restart.timestamp';
export const APPLIED = 'com.xing.deployment-restart.applied-config-checksums';
export const CONFIG_RESTART_FLAGS = ['-config-restarts.enabled', '-restart-grace-period=1'];
/** Config versions the operator has seen, and changes waiting out their grace (xing's metric names). */
export const VERSIONS = 'deployment_restart_controller_resource_versions_total';
export const WAITING = 'deployment_restart_controller_changes_waiting_total';

export type Deployment = KubeObject & {
  spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
};

/** A one-replica Deployment of `name` with `annotations` on it and `podSpec` over a one-container pod. */
export function deployment(
  namespace: string,
  name: string,
  annotations: Record<string, string>,
  podSpec: Record<string, unknown> = {},
): Deployment {
  return {
    metadata: { name, namespace, annotations },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'app', image: 'example.invalid/app:1' }], ...podSpec },
      },
    },
  } as Deployment;
}

/** The operator in `namespace` with config restarts on and `flags`, stopped after the test; returns once ready. */
export async function startConfigRestarts(
  t: TestContext,
  cluster: TestCluster,
  namespace: string,
  flags: string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<OperatorProcess> {
  const op = await OperatorProcess.start(cluster, namespace, [...CONFIG_RESTART_FLAGS, ...flags], { env });
  t.after(() => op.stop());
  await op.waitReady();
  return op;
}

export const metricOf = async (op: OperatorProcess, name: string) => (await op.metric(name)) ?? 0;

/** Waits until the operator saw more config versions than `versions` and has nothing waiting. */
export async function settled(op: OperatorProcess, versions: number): Promise<void> {
  await waitFor(
    'the change observed and processed',
    async () => (await metricOf(op, VERSIONS)) > versions && (await metricOf(op, WAITING)) === 0,
    { timeoutMs: 20_000, intervalMs: 100 },
  );
}
