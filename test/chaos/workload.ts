// The soak's continuous workload, drawn from a seeded PRNG: pod-template
// changes of the rollout groups (rollouts), ReplicaTemplate changes that the
// groups mirror and follow (scaling, prepared downscales), real `kubectl
// drain`s of nodes (evictions under the ZPDBs) and uncordons, ConfigMap and
// Secret content edits of opted-in Deployments (config restarts), metadata-
// only edits (which must restart nothing), and downscale attempts of
// no-downscale objects (which must be denied).
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type KubeObject, type StatefulSet } from '../../src/runtime/kube/types.ts';
import { waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { REPLICA_TEMPLATE } from '../support/replica-templates.ts';
import type { Prng } from './prng.ts';

export const ACTION_KINDS = [
  'template-change',
  'scale',
  'drain',
  'config-edit',
  'secret-edit',
  'config-metadata-edit',
  'no-downscale-attempt',
] as const;
export type ActionKind = (typeof ACTION_KINDS)[number];

const WEIGHTS: Record<ActionKind, number> = {
  'template-change': 3,
  scale: 2,
  drain: 1,
  'config-edit': 3,
  'secret-edit': 2,
  'config-metadata-edit': 1,
  'no-downscale-attempt': 1,
};

export const ZONES = ['a', 'b', 'c'] as const;
export const APPS = 2;
export const REPLICA_RANGE = [2, 4] as const;
export const SECRET_PREFIX = 'soaksecret-';

export interface WorkloadOptions {
  cluster: TestCluster;
  kube: KubeClient;
  prng: Prng;
  namespaces: string[];
  /** Label value on the groups' pods, so drains move only the soak's pods. */
  podTag: string;
  secretsFile: string;
  log: (line: string) => void;
  intervalMs: [number, number];
  /** A group whose template must not change now (a health-gate fault aimed at its rollout in flight). */
  held?: (namespace: string) => boolean;
}

export class Workload {
  /** Outcomes by `kind outcome`. */
  readonly counts: Record<string, number> = {};
  private readonly o: WorkloadOptions;
  private version = 1;
  private touches = 0;
  private drain: Promise<void> | undefined;

  constructor(o: WorkloadOptions) {
    this.o = o;
  }

  private tally(kind: string, outcome: string): void {
    const key = `${kind} ${outcome}`;
    this.counts[key] = (this.counts[key] ?? 0) + 1;
  }

  /** A fresh secret value, written to the monitor's file before it reaches the cluster. */
  secretValue(): string {
    const value = `${SECRET_PREFIX}${this.o.prng.token(20)}`;
    appendFileSync(this.o.secretsFile, `${value}\n`);
    return value;
  }

  /** Runs actions until aborted; the first round covers every kind once (in a drawn order), then draws by weight. */
  async run(signal: AbortSignal): Promise<void> {
    const { prng } = this.o;
    const first = [...ACTION_KINDS].sort(() => prng.next() - 0.5);
    const entries = ACTION_KINDS.map((k) => [k, WEIGHTS[k]] as const);
    while (!signal.aborted) {
      const kind = first.shift() ?? prng.weighted(entries);
      try {
        await this.act(kind);
      } catch (error) {
        this.tally(kind, 'error');
        this.o.log(`action ${kind} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
      try {
        await sleep(prng.int(...this.o.intervalMs), undefined, { signal });
      } catch {
        break;
      }
    }
    await this.drain;
  }

  private async act(kind: ActionKind): Promise<void> {
    const { prng, kube, cluster } = this.o;
    const namespace = prng.pick(this.o.namespaces);
    switch (kind) {
      case 'template-change': {
        const zones = prng.chance(0.5) ? [...ZONES] : ZONES.filter(() => prng.chance(0.5));
        if (zones.length === 0) zones.push(prng.pick(ZONES));
        const version = `v${++this.version}`;
        for (const zone of zones) {
          if (this.o.held?.(namespace)) {
            this.tally(kind, 'skipped (a health-gate fault holds the group)');
            return;
          }
          await kube.patch(
            resources.statefulSets,
            { namespace, name: `ingester-zone-${zone}` },
            'merge',
            { spec: { template: { metadata: { annotations: { version } } } } },
            { timeoutMs: 15_000 },
          );
        }
        this.tally(kind, 'ok');
        this.o.log(`action ${kind} ${namespace} zones ${zones.join(',')} → ${version}`);
        return;
      }
      case 'scale': {
        const template = await kube.get<KubeObject & { spec?: { replicas?: number } }>(REPLICA_TEMPLATE, {
          namespace,
          name: 'ingester',
        });
        const current = template.spec?.replicas ?? 3;
        const choices = [];
        for (let r = REPLICA_RANGE[0]; r <= REPLICA_RANGE[1]; r++) if (r !== current) choices.push(r);
        const replicas = prng.pick(choices);
        await kube.patch(
          REPLICA_TEMPLATE,
          { namespace, name: 'ingester' },
          'merge',
          { spec: { replicas } },
          { timeoutMs: 15_000 },
        );
        this.tally(kind, replicas > current ? 'up' : 'down');
        this.o.log(`action ${kind} ${namespace} ReplicaTemplate ingester ${current} → ${replicas}`);
        return;
      }
      case 'drain': {
        if (this.drain) {
          this.tally(kind, 'skipped (a drain is running)');
          return;
        }
        const node = prng.pick(cluster.nodes).name;
        const hold = prng.int(3000, 15_000);
        this.o.log(`action ${kind} ${node}`);
        this.drain = this.drainNode(node, hold).finally(() => (this.drain = undefined));
        return;
      }
      case 'config-edit': {
        const app = prng.int(0, APPS - 1);
        await kube.patch(
          resources.configMaps,
          { namespace, name: `app-config-${app}` },
          'merge',
          { data: { value: prng.token(12) } },
          { timeoutMs: 15_000 },
        );
        this.tally(kind, 'ok');
        this.o.log(`action ${kind} ${namespace}/app-config-${app}`);
        return;
      }
      case 'secret-edit': {
        const app = prng.int(0, APPS - 1);
        const value = this.secretValue();
        await kube.patch(
          resources.secrets,
          { namespace, name: `app-secret-${app}` },
          'merge',
          { data: { password: Buffer.from(value).toString('base64') } },
          { timeoutMs: 15_000 },
        );
        this.tally(kind, 'ok');
        this.o.log(`action ${kind} ${namespace}/app-secret-${app}`);
        return;
      }
      case 'config-metadata-edit': {
        const app = prng.int(0, APPS - 1);
        await kube.patch(
          resources.configMaps,
          { namespace, name: `app-config-${app}` },
          'merge',
          { metadata: { labels: { 'soak.stateward.dev/touched': String(++this.touches) } } },
          { timeoutMs: 15_000 },
        );
        this.tally(kind, 'ok');
        this.o.log(`action ${kind} ${namespace}/app-config-${app}`);
        return;
      }
      case 'no-downscale-attempt': {
        const [type, kindName, name] = prng.chance(0.5)
          ? ([resources.deployments, 'deployment', 'frontend'] as const)
          : ([resources.statefulSets, 'statefulset', 'cache'] as const);
        const current = (await kube.get<StatefulSet>(type, { namespace, name })).spec?.replicas ?? 1;
        const down = current >= REPLICA_RANGE[1] || current <= 1 ? current > 1 : prng.chance(0.7);
        const replicas = down ? current - 1 : current + 1;
        const result = await kubectl(cluster, '-n', namespace, 'scale', kindName, name, `--replicas=${replicas}`);
        const outcome = down
          ? result.ok
            ? 'downscale ALLOWED'
            : /no-downscale/.test(result.out)
              ? 'downscale denied'
              : 'downscale failed otherwise'
          : result.ok
            ? 'upscale'
            : 'upscale failed';
        this.tally(kind, outcome);
        this.o.log(`action ${kind} ${namespace} ${kindName}/${name} ${current} → ${replicas}: ${outcome}`);
        return;
      }
    }
  }

  /** kubectl drain (evictions through the webhook, retried by kubectl on 429), a pause, then uncordon. */
  private async drainNode(node: string, holdMs: number): Promise<void> {
    const { cluster } = this.o;
    const result = await kubectl(
      cluster,
      'drain',
      node,
      `--pod-selector=stateward.dev/soak=${this.o.podTag}`,
      '--ignore-daemonsets',
      '--delete-emptydir-data',
      '--timeout=60s',
    );
    this.tally('drain', result.ok ? 'ok' : 'failed');
    this.o.log(`drain ${node}: ${result.ok ? 'ok' : `failed: ${result.out.trim().split('\n').slice(-2).join(' / ')}`}`);
    await sleep(holdMs);
    await uncordon(cluster, node);
  }

  /** Waits for a drain in progress and uncordons its node. */
  async settle(): Promise<void> {
    await this.drain;
  }
}

export async function uncordon(cluster: TestCluster, node: string): Promise<void> {
  await waitFor(
    `node ${node} uncordoned`,
    async () => {
      await cluster.uncordon(node);
      return true;
    },
    { timeoutMs: 120_000, intervalMs: 1000 },
  );
}
