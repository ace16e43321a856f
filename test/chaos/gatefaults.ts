// The soak's health gates: the RolloutHealthCheck CRD, one real Prometheus
// scraping one MetricExporter that publishes an error ratio per pod of the
// gated groups, a check per gated group, and the two faults aimed at them:
// a bad release (a zone that has rolled in the rollout in flight gets a high
// error ratio for a while) and a Prometheus outage (stopped, killed or frozen
// for a while). Everything it does to the exporter and to Prometheus is
// appended to a timeline file, from which the independent monitor derives
// when the gate's policy says pause (healthgate.ts).
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type StatefulSet } from '../../src/runtime/kube/types.ts';
import { healthCheckResource, type RolloutHealthCheck } from '../../src/rollout/healthcheck/resource.ts';
import { waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { MetricExporter } from '../support/metricexporter.ts';
import { onlyValue, Prometheus, waitForQuery } from '../support/prometheus.ts';
import { THRESHOLD, type TimelineEntry } from './healthgate.ts';
import { errorRatioCheck } from '../support/healthchecks.ts';
import type { Prng } from './prng.ts';
import { REPLICA_RANGE, ZONES } from './workload.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
export const CHECK_NAME = 'ingester-errors';
const METRIC = 'soak_error_ratio';
const BAD_RATIO = 0.5;
/**
 * Template changes of a group wait this long after its bad release ends: a
 * rollout starting sooner would take its baseline (baselineRange 3 s, plus a
 * scrape) while the raised pods still count, and the monitor's policy
 * assumes a baseline of 0.
 */
const HOLD_AFTER_MS = 5000;
const STARTED_AT = 'grafana.com/rollout-health-check-started-at';
const STAMP_REVISION = 'stateward.dev/rollout-health-check-revision';

export type OutageKind = 'stop' | 'kill' | 'freeze';

/**
 * The shared error-ratio check with the soak's series and THRESHOLD.
 * `or vector(0)`: an operator replica's stepped clock (a fault of the soak)
 * can put the baseline time before the series existed, and no data would
 * pause the group for good.
 */
function healthCheck(namespace: string, prometheusURL: string): RolloutHealthCheck {
  return errorRatioCheck(CHECK_NAME, namespace, prometheusURL, {
    metric: METRIC,
    slack: THRESHOLD,
    zeroWhenAbsent: true,
  });
}

export class SoakGates {
  readonly namespaces: string[];
  readonly timelinePath: string;
  private readonly kube: KubeClient;
  private readonly exporter: MetricExporter;
  private readonly prometheus: Prometheus;
  private readonly log: (line: string) => void;
  /** Namespaces whose template changes wait, until when (Infinity while a bad release is on). */
  private readonly holds = new Map<string, number>();
  private readonly raised = new Set<string>();
  private down: OutageKind | undefined;

  private constructor(o: {
    namespaces: string[];
    timelinePath: string;
    kube: KubeClient;
    exporter: MetricExporter;
    prometheus: Prometheus;
    log: (line: string) => void;
  }) {
    this.namespaces = o.namespaces;
    this.timelinePath = o.timelinePath;
    this.kube = o.kube;
    this.exporter = o.exporter;
    this.prometheus = o.prometheus;
    this.log = o.log;
  }

  /** The CRD, the exporter (every pod name a group can have, at 0) and Prometheus; the checks come with checks(). */
  static async setup(o: {
    cluster: TestCluster;
    kube: KubeClient;
    namespaces: string[];
    runDir: string;
    log: (line: string) => void;
  }): Promise<SoakGates> {
    const applied = await kubectl(o.cluster, 'apply', '-f', join(root, 'deploy/crds/rollout-health-checks.yaml'));
    if (!applied.ok) throw new Error(`installing the RolloutHealthCheck CRD: ${applied.out}`);
    const timelinePath = join(o.runDir, 'gate-timeline.jsonl');
    writeFileSync(timelinePath, '');
    const exporter = await MetricExporter.start();
    for (const namespace of o.namespaces) for (const pod of podNames()) exporter.set(METRIC, { namespace, pod }, 0);
    const prometheus = await Prometheus.start({ targets: [exporter.target] }).catch(async (error: unknown) => {
      await exporter.close();
      throw error;
    });
    const gates = new SoakGates({ ...o, timelinePath, exporter, prometheus });
    const series = o.namespaces.length * podNames().length;
    await waitForQuery(prometheus, `count(${METRIC})`, (s) => onlyValue(s) === series, { timeoutMs: 60_000 });
    return gates;
  }

  /** Creates each gated group's check (the API serves a new CRD's kind a moment after it is established). */
  async checks(): Promise<void> {
    for (const namespace of this.namespaces)
      await waitFor(
        'the RolloutHealthCheck created',
        () => this.kube.create(healthCheckResource, healthCheck(namespace, this.prometheus.url)).catch(() => undefined),
        { timeoutMs: 30_000 },
      );
  }

  /** True while a group's template changes must wait (see HOLD_AFTER_MS). */
  held(namespace: string): boolean {
    return (this.holds.get(namespace) ?? 0) > Date.now();
  }

  private record(entry: TimelineEntry): void {
    appendFileSync(this.timelinePath, `${JSON.stringify(entry)}\n`);
  }

  /**
   * A gated group with a rollout in flight whose first zone is rolling or
   * has rolled (its start stamp current, a pod on its update revision) and
   * another zone not started: its namespace and that zone. Polls up to
   * `timeoutMs`. A group found is held (no template changes) and confirmed
   * a moment after, so the answer stays true until the raise; the others are
   * not held while it looks, or no rollout could begin meanwhile. (Waiting
   * for the zone to finish would leave a window of about one evaluation
   * interval: a healthy gate opens the next zone at once.)
   */
  async rolledZone(prng: Prng, timeoutMs: number): Promise<{ namespace: string; zone: string } | undefined> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      for (const namespace of [...this.namespaces].sort(() => prng.next() - 0.5)) {
        if (!(await this.rolledZoneOf(namespace))) continue;
        this.holds.set(namespace, Infinity);
        // A template change already under way finishes first.
        await sleep(300);
        const zone = await this.rolledZoneOf(namespace);
        if (zone) return { namespace, zone };
        this.holds.delete(namespace);
      }
      await sleep(250);
    }
    return undefined;
  }

  private async rolledZoneOf(namespace: string): Promise<string | undefined> {
    const sets = (await this.kube.list<StatefulSet>(resources.statefulSets, { namespace })).items.filter((s) =>
      s.metadata?.name?.startsWith('ingester-zone-'),
    );
    const rolled = sets.find(
      (s) =>
        s.metadata?.annotations?.[STARTED_AT] !== undefined &&
        s.metadata?.annotations?.[STAMP_REVISION] === s.status?.updateRevision &&
        (s.status?.updatedReplicas ?? 0) > 0,
    );
    const waiting = sets.some(
      (s) => s.status?.currentRevision !== s.status?.updateRevision && (s.status?.updatedReplicas ?? 0) === 0,
    );
    return rolled && waiting ? rolled.metadata!.name!.slice('ingester-zone-'.length) : undefined;
  }

  /** The bad release: the zone's pods (every ordinal it can have) publish a high error ratio. */
  raise(target: { namespace: string; zone: string }): void {
    this.raised.add(target.namespace);
    this.holds.set(target.namespace, Infinity);
    for (const pod of podNames([target.zone])) this.setRatio(target.namespace, pod, BAD_RATIO);
    this.log(`health gate: ${target.namespace} zone ${target.zone} error ratio ${BAD_RATIO}`);
  }

  /** The bad release is over: every pod of the group back at 0. */
  lower(namespace: string): void {
    for (const pod of podNames())
      if ((this.exporter.get(METRIC, { namespace, pod }) ?? 0) !== 0) this.setRatio(namespace, pod, 0);
    this.raised.delete(namespace);
    this.holds.set(namespace, Date.now() + HOLD_AFTER_MS);
    this.log(`health gate: ${namespace} error ratio back to 0`);
  }

  private setRatio(namespace: string, pod: string, value: number): void {
    this.exporter.set(METRIC, { namespace, pod }, value);
    this.record({ at: Date.now(), kind: 'ratio', namespace, pod, value });
  }

  /** Prometheus goes away; the timeline says so once it certainly is (stopped or every thread frozen). */
  async outage(how: OutageKind): Promise<void> {
    if (how === 'freeze') await this.prometheus.freeze();
    else await this.prometheus.stop(how === 'kill' ? { signal: 'SIGKILL' } : {});
    this.down = how;
    this.record({ at: Date.now(), kind: 'prometheus', up: false });
  }

  /** Prometheus comes back; the timeline says so before it can answer again. */
  async recover(): Promise<void> {
    const how = this.down;
    if (!how) return;
    this.record({ at: Date.now(), kind: 'prometheus', up: true });
    this.down = undefined;
    if (how === 'freeze') this.prometheus.thaw();
    else await this.prometheus.resume();
  }

  /** Everything healthy again (after the faults). */
  async restore(): Promise<void> {
    for (const ns of [...this.raised]) this.lower(ns);
    await this.recover();
  }

  async close(): Promise<void> {
    await this.prometheus.close().catch(() => undefined);
    await this.exporter.close().catch(() => undefined);
  }
}

/** Every pod name a group's zones can have (the workload scales between REPLICA_RANGE). */
function podNames(zones: readonly string[] = ZONES): string[] {
  return zones.flatMap((zone) => Array.from({ length: REPLICA_RANGE[1] }, (_, i) => `ingester-zone-${zone}-${i}`));
}
