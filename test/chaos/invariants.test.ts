// The chaos monitor's rules on hand-made event sequences: each rule fires on
// the breach it is for and stays quiet on the legitimate sequence next to it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type {
  EventsV1Event,
  V1ConfigMap,
  V1CronJob,
  V1Deployment,
  V1Job,
  V1Pod,
  V1StatefulSet,
} from '@kubernetes/client-node';
import {
  configReferences,
  DEFER_MS,
  InvariantChecker,
  maxUnavailableOf,
  parseGoDuration,
  type Watched,
  type WatchType,
} from './invariants.ts';

const NS = 'ns';
let rv = 100;

function set(
  zone: string,
  replicas: number,
  o: { labels?: Record<string, string>; annotations?: Record<string, string>; rv?: number } = {},
): V1StatefulSet {
  return {
    metadata: {
      name: `ingester-zone-${zone}`,
      namespace: NS,
      uid: `sts-${zone}`,
      resourceVersion: String(o.rv ?? ++rv),
      labels: { 'rollout-group': 'ingester', ...o.labels },
      annotations: o.annotations ?? {},
    },
    spec: { replicas, selector: {}, serviceName: '', template: {} },
  };
}

function pod(
  zone: string,
  ordinal: number,
  o: { ready?: boolean; deleting?: boolean; evicted?: boolean; uid?: string; rv?: number } = {},
): V1Pod {
  const { ready = true, deleting = false, evicted = false } = o;
  return {
    metadata: {
      name: `ingester-zone-${zone}-${ordinal}`,
      namespace: NS,
      uid: o.uid ?? `uid-${zone}-${ordinal}`,
      resourceVersion: String(o.rv ?? ++rv),
      labels: { 'rollout-group': 'ingester' },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'StatefulSet',
          name: `ingester-zone-${zone}`,
          uid: `sts-${zone}`,
          controller: true,
        },
      ],
      ...(deleting ? { deletionTimestamp: new Date() } : {}),
    },
    status: {
      conditions: [
        { type: 'Ready', status: ready ? 'True' : 'False' },
        ...(evicted ? [{ type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI' }] : []),
      ],
    },
  };
}

/** A checker that has seen a settled 3-zone group (3 pods each) through its initial list. */
function settledGroup(o: { zpdbMax?: number; annotations?: Record<string, Record<string, string>> } = {}): {
  c: InvariantChecker;
  feed: (e: Watched, type?: WatchType, relist?: boolean) => void;
  now: () => number;
} {
  const c = new InvariantChecker();
  let clock = 1_000_000;
  const feed = (e: Watched, type: WatchType = 'MODIFIED', relist = false) => c.apply(e, type, (clock += 10), relist);
  for (const zone of ['a', 'b', 'c']) {
    feed({ kind: 'StatefulSet', object: set(zone, 3, { annotations: o.annotations?.[zone] ?? {} }) }, 'ADDED', true);
    for (let i = 0; i < 3; i++) feed({ kind: 'Pod', object: pod(zone, i) }, 'ADDED', true);
  }
  if (o.zpdbMax !== undefined)
    feed(
      {
        kind: 'ZoneAwarePodDisruptionBudget',
        object: {
          metadata: { name: 'ingester', namespace: NS },
          spec: { maxUnavailable: o.zpdbMax, selector: { matchLabels: { 'rollout-group': 'ingester' } } },
        },
      },
      'ADDED',
      true,
    );
  return { c, feed, now: () => clock };
}

const kinds = (c: InvariantChecker) => c.violations.map((v) => v.kind);

describe('chaos monitor rules', () => {
  it('a rolling delete while every other zone is Ready and within budget is fine; the same while another zone is down is a violation', () => {
    const { c, feed, now } = settledGroup();
    feed({ kind: 'Pod', object: pod('a', 0, { deleting: true }) });
    c.tick(now() + DEFER_MS);
    assert.deepEqual(kinds(c), []);
    assert.equal(c.counters['operatorDeletesOfReadyPods'], 1);
    feed({ kind: 'Pod', object: pod('a', 0) }, 'DELETED');
    // zone a's pod is still missing when zone b's goes.
    feed({ kind: 'Pod', object: pod('b', 1, { deleting: true }) });
    c.tick(now() + DEFER_MS);
    assert.deepEqual(kinds(c), ['rollout-two-statefulsets-disrupted']);
    assert.match(c.violations[0]!.message, /ingester-zone-b-1 .* while ingester-zone-a/);
  });

  it('confirms a rolling delete by a DeletingPod Event naming it: by uid for one pod, by name in a gathered one', () => {
    const { c, feed, now } = settledGroup();
    const deleting = (note: string, related?: V1Pod): EventsV1Event => ({
      metadata: { name: `e-${++rv}`, namespace: NS, uid: `e-${rv}` },
      eventTime: new Date(now() + 1_000),
      reason: 'DeletingPod',
      note,
      reportingController: 'stateward.dev/operator',
      regarding: { kind: 'StatefulSet', namespace: NS, name: 'ingester-zone-a' },
      ...(related ? { related: { kind: 'Pod', uid: related.metadata!.uid!, name: related.metadata!.name! } } : {}),
    });
    for (const i of [0, 1, 2]) {
      feed({ kind: 'Pod', object: pod('a', i, { deleting: true }) });
      c.tick(now() + DEFER_MS);
      feed({ kind: 'Pod', object: pod('a', i, { uid: `new-a-${i}` }) }, 'ADDED');
    }
    feed({ kind: 'Event', object: deleting('deleting pod ingester-zone-a-0 for revision r2', pod('a', 0)) }, 'ADDED');
    feed(
      {
        kind: 'Event',
        object: deleting(
          'deleting pods ingester-zone-a-1 (already unavailable: Error), ingester-zone-b-2 for revision r2',
        ),
      },
      'ADDED',
    );
    c.finish(now() + DEFER_MS);
    assert.deepEqual(kinds(c), []);
    assert.equal(c.counters['operatorDeletesOfReadyPods'], 3);
    assert.equal(c.counters['operatorDeletesConfirmedByEvent'], 2);
    assert.deepEqual(
      c.unconfirmedDeletes().map((d) => d.pod),
      [`${NS}/ingester-zone-a-2`],
    );
  });

  it("counts a StatefulSet's unavailable pods against rollout-max-unavailable (N and P%)", () => {
    const { c, feed, now } = settledGroup({ annotations: { b: { 'rollout-max-unavailable': '67%' } } });
    feed({ kind: 'Pod', object: pod('a', 0, { deleting: true }) });
    feed({ kind: 'Pod', object: pod('a', 1, { deleting: true }) });
    c.tick(now() + DEFER_MS);
    assert.deepEqual(kinds(c), ['rollout-max-unavailable']);
    assert.equal(maxUnavailableOf('67%', 3), 2);
    assert.equal(maxUnavailableOf('0', 3), 1);
    assert.equal(maxUnavailableOf('x', 3), 1);
  });

  it('an eviction that breaks a ZPDB is a violation; one that respects it is not; a not-Ready pod is evicted freely', () => {
    const { c, feed, now } = settledGroup({ zpdbMax: 1 });
    feed({ kind: 'Pod', object: pod('c', 2, { ready: false }) });
    feed({ kind: 'Pod', object: pod('c', 2, { ready: false, evicted: true }) });
    feed({ kind: 'Pod', object: pod('c', 2, { ready: false, evicted: true, deleting: true }) });
    feed({ kind: 'Pod', object: pod('c', 2, { ready: false }) }, 'DELETED');
    feed({ kind: 'Pod', object: pod('c', 2, { uid: 'new', ready: true }) }, 'ADDED');
    feed({ kind: 'Pod', object: pod('a', 0, { evicted: true }) });
    feed({ kind: 'Pod', object: pod('a', 0, { evicted: true, deleting: true }) });
    c.tick(now() + DEFER_MS);
    assert.deepEqual(c.violations, []);
    assert.equal(c.counters['evictionsOfReadyPods'], 1);
    // Zone a is still down: an eviction in zone b breaks the budget.
    feed({ kind: 'Pod', object: pod('b', 0, { evicted: true }) });
    feed({ kind: 'Pod', object: pod('b', 0, { evicted: true, deleting: true }) });
    c.tick(now() + DEFER_MS);
    assert.deepEqual(kinds(c), ['zpdb-eviction']);
  });

  it("judges replicas as of the deletion's resourceVersion, whichever watch delivers first", () => {
    const { c, feed, now } = settledGroup();
    // Zone b was scaled up (rv 500) before zone a's pod was deleted (rv 501); the StatefulSet event arrives second.
    feed({ kind: 'Pod', object: pod('a', 0, { deleting: true, rv: 501 }) });
    feed({ kind: 'StatefulSet', object: set('b', 4, { rv: 500 }) });
    c.tick(now() + DEFER_MS);
    assert.deepEqual(kinds(c), ['rollout-two-statefulsets-disrupted']);
    assert.match(JSON.stringify(c.violations[0]!.details), /ingester-zone-b-3 missing/);

    // Scaled up after the delete (rv 601 > 600): the delete was fine.
    const later = settledGroup();
    later.feed({ kind: 'Pod', object: pod('a', 0, { deleting: true, rv: 600 }) });
    later.feed({ kind: 'StatefulSet', object: set('b', 4, { rv: 601 }) });
    later.c.tick(later.now() + DEFER_MS);
    assert.deepEqual(later.c.violations, []);
  });

  it("a downscale's deletions, and deletions seen only through a relist, are not judged", () => {
    const { c, feed, now } = settledGroup();
    feed({ kind: 'StatefulSet', object: set('a', 2) });
    feed({ kind: 'Pod', object: pod('a', 2, { deleting: true }) });
    feed({ kind: 'Pod', object: pod('b', 0, { deleting: true }) }, 'MODIFIED', true);
    c.tick(now() + DEFER_MS);
    assert.deepEqual(c.violations, []);
    assert.equal(c.counters['deletionsBeyondReplicas'], 1);
    assert.equal(c.counters['deletionsSeenOnlyOnRelist'], 1);
  });

  it('no-downscale: a labelled object losing replicas is a violation', () => {
    const { c, feed } = settledGroup();
    feed({ kind: 'StatefulSet', object: set('c', 3, { labels: { 'grafana.com/no-downscale': 'true' } }) });
    feed({ kind: 'StatefulSet', object: set('c', 4, { labels: { 'grafana.com/no-downscale': 'true' } }) });
    assert.deepEqual(c.violations, []);
    feed({ kind: 'StatefulSet', object: set('c', 3, { labels: { 'grafana.com/no-downscale': 'true' } }) });
    assert.deepEqual(kinds(c), ['no-downscale']);
  });

  it("prepared downscales: a zone may not go down within another zone's min-time", () => {
    const c = new InvariantChecker();
    const labels = { 'grafana.com/prepare-downscale': 'true', 'grafana.com/min-time-between-zones-downscale': '10s' };
    c.apply({ kind: 'StatefulSet', object: set('a', 3, { labels }) }, 'ADDED', 0, true);
    c.apply({ kind: 'StatefulSet', object: set('b', 3, { labels }) }, 'ADDED', 0, true);
    c.apply({ kind: 'StatefulSet', object: set('a', 2, { labels }) }, 'MODIFIED', 1000, false);
    c.apply({ kind: 'StatefulSet', object: set('b', 2, { labels }) }, 'MODIFIED', 12_000, false);
    assert.deepEqual(c.violations, []);
    c.apply({ kind: 'StatefulSet', object: set('a', 1, { labels }) }, 'MODIFIED', 15_000, false);
    assert.deepEqual(kinds(c), ['min-time-between-zones-downscale']);
    assert.equal(parseGoDuration('1m30s'), 90_000);
    assert.equal(parseGoDuration('500ms'), 500);
    assert.equal(parseGoDuration('10'), undefined);
  });

  it('config restarts: only after a content change, and every change applied in the end', () => {
    const c = new InvariantChecker();
    let t = 0;
    const feed = (e: Watched) => c.apply(e, 'MODIFIED', (t += 100), false);
    const cm = (value: string, labels: Record<string, string> = {}): V1ConfigMap => ({
      metadata: { name: 'cfg', namespace: NS, resourceVersion: String(++rv), labels },
      data: { value },
    });
    const deployment = (trigger: string | undefined, applied: string | undefined): V1Deployment => ({
      metadata: {
        name: 'app',
        namespace: NS,
        resourceVersion: String(++rv),
        annotations: {
          'com.xing.deployment-restart': 'enabled',
          ...(applied
            ? {
                'com.xing.deployment-restart.applied-config-checksums': JSON.stringify({
                  [`configmap/${NS}/cfg`]: applied,
                }),
              }
            : {}),
        },
      },
      spec: {
        selector: {},
        template: {
          metadata: { annotations: trigger ? { 'com.xing.deployment-restart.timestamp': trigger } : {} },
          spec: { containers: [{ name: 'x', envFrom: [{ configMapRef: { name: 'cfg' } }] }] },
        },
      },
    });
    feed({ kind: 'ConfigMap', object: cm('1') });
    feed({ kind: 'Deployment', object: deployment(undefined, undefined) });
    feed({ kind: 'Deployment', object: deployment(undefined, 'sum1') });
    // A metadata-only change, then a restart: no content changed.
    feed({ kind: 'ConfigMap', object: cm('1', { touched: 'yes' }) });
    feed({ kind: 'Deployment', object: deployment('t1', 'sum1') });
    c.tick(t + DEFER_MS);
    assert.deepEqual(kinds(c), ['restart-without-content-change']);
    // A real change, restarted and applied.
    feed({ kind: 'ConfigMap', object: cm('2') });
    assert.equal(c.pending().length, 1);
    feed({ kind: 'Deployment', object: deployment('t2', 'sum2') });
    c.tick(t + DEFER_MS);
    assert.equal(c.violations.length, 1);
    assert.deepEqual(c.pending(), []);
    // A change never applied is a violation at the end.
    feed({ kind: 'ConfigMap', object: cm('3') });
    c.finish(t + DEFER_MS);
    assert.deepEqual(kinds(c), ['restart-without-content-change', 'content-change-not-applied']);
  });

  it('finds every way a pod spec uses a config', () => {
    assert.deepEqual(
      configReferences('n', {
        containers: [
          {
            name: 'a',
            env: [{ name: 'E', valueFrom: { secretKeyRef: { name: 's1', key: 'k' } } }],
            envFrom: [{ configMapRef: { name: 'c1' } }],
          },
        ],
        initContainers: [{ name: 'i', env: [{ name: 'F', valueFrom: { configMapKeyRef: { name: 'c2', key: 'k' } } }] }],
        volumes: [
          { name: 'v', secret: { secretName: 's2' } },
          { name: 'p', projected: { sources: [{ configMap: { name: 'c3' } }, { secret: { name: 's3' } }] } },
        ],
      }),
      ['configmap/n/c1', 'configmap/n/c2', 'configmap/n/c3', 'secret/n/s1', 'secret/n/s2', 'secret/n/s3'],
    );
  });
});

// ------------------------------------------------- CronJobs and Jobs (jobinvariants.ts)

type Step = (h: JobHarness) => void;

/** A checker that has seen two ConfigMaps, an opted-in CronJob (using cfg) and an opted-in Job (using jcfg) through its initial list. */
class JobHarness {
  readonly c = new InvariantChecker();
  t = 0;
  private rv = 1000;
  private content: Record<string, string> = { cfg: '1', jcfg: '1' };
  private jobUid = 0;
  private jobApplied: string | undefined = 'sum1';
  private jobState: { finalizer: boolean; intent?: string; deleting: boolean } = { finalizer: false, deleting: false };
  private cronApplied = 'sum1';
  private cronLastJob: string | undefined;

  constructor() {
    this.feed({ kind: 'ConfigMap', object: this.cm('cfg') }, 'ADDED', true);
    this.feed({ kind: 'ConfigMap', object: this.cm('jcfg') }, 'ADDED', true);
    this.feed({ kind: 'CronJob', object: this.cronJob() }, 'ADDED', true);
    this.feed({ kind: 'Job', object: this.job() }, 'ADDED', true);
  }

  feed(e: Watched, type: WatchType = 'MODIFIED', relist = false): void {
    this.c.apply(e, type, (this.t += 100), relist);
  }

  private cm(name: string, labels: Record<string, string> = {}): V1ConfigMap {
    return {
      metadata: { name, namespace: NS, resourceVersion: String(++this.rv), labels },
      data: { value: this.content[name]! },
    };
  }

  private applied(config: string, sum: string | undefined): Record<string, string> {
    const record = JSON.stringify({ [`configmap/${NS}/${config}`]: sum });
    return sum === undefined ? {} : { 'com.xing.deployment-restart.applied-config-checksums': record };
  }

  private podSpec(config: string) {
    return { containers: [{ name: 'x', envFrom: [{ configMapRef: { name: config } }] }] };
  }

  cronJob(): V1CronJob {
    return {
      metadata: {
        name: 'nightly',
        namespace: NS,
        uid: 'cj-uid',
        resourceVersion: String(++this.rv),
        annotations: {
          'com.xing.deployment-restart': 'enabled',
          ...this.applied('cfg', this.cronApplied),
          ...(this.cronLastJob ? { 'stateward.dev/config-restart-last-job': this.cronLastJob } : {}),
        },
      },
      spec: {
        schedule: '0 0 1 1 *',
        suspend: true,
        jobTemplate: { spec: { template: { spec: this.podSpec('cfg') } } },
      },
    };
  }

  job(): V1Job {
    const s = this.jobState;
    return {
      metadata: {
        name: 'batch',
        namespace: NS,
        uid: `job-uid-${this.jobUid}`,
        resourceVersion: String(++this.rv),
        annotations: {
          'com.xing.deployment-restart': 'enabled',
          ...this.applied('jcfg', this.jobApplied),
          ...(s.intent ? { 'stateward.dev/config-restart-recreate': s.intent } : {}),
        },
        ...(s.finalizer ? { finalizers: ['stateward.dev/config-restart-recreate'] } : {}),
        ...(s.deleting ? { deletionTimestamp: new Date() } : {}),
      },
      spec: { template: { spec: this.podSpec('jcfg') } },
    };
  }

  // What the soak's workload does.
  edit(value: string, config = 'cfg'): void {
    this.content[config] = value;
    this.feed({ kind: 'ConfigMap', object: this.cm(config) });
  }
  touch(config = 'cfg'): void {
    this.feed({ kind: 'ConfigMap', object: this.cm(config, { touched: String(this.t) }) });
  }

  // What Stateward does for the CronJob: a Job, then the record.
  startJob(name: string, o: { manual?: boolean; relist?: boolean } = {}): void {
    const job: V1Job = {
      metadata: {
        name,
        namespace: NS,
        uid: `uid-${name}`,
        resourceVersion: String(++this.rv),
        annotations: o.manual === false ? {} : { 'cronjob.kubernetes.io/instantiate': 'manual' },
        ownerReferences: [
          { apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: 'cj-uid', controller: true },
        ],
      },
    };
    this.feed({ kind: 'Job', object: job }, 'ADDED', o.relist ?? false);
  }
  recordCronJob(sum: string, lastJob: string): void {
    this.cronApplied = sum;
    this.cronLastJob = lastJob;
    this.feed({ kind: 'CronJob', object: this.cronJob() });
  }

  // What Stateward does for the Job: mark, delete, release, create.
  mark(sum: string): void {
    this.jobState = { finalizer: true, intent: sum, deleting: false };
    this.feed({ kind: 'Job', object: this.job() });
  }
  deleteHeld(): void {
    this.jobState.deleting = true;
    this.feed({ kind: 'Job', object: this.job() });
  }
  release(): void {
    this.jobState.finalizer = false;
    this.feed({ kind: 'Job', object: this.job() }, 'DELETED');
  }
  create(sum: string | undefined): void {
    this.jobUid++;
    this.jobApplied = sum;
    this.jobState = { finalizer: false, deleting: false };
    this.feed({ kind: 'Job', object: this.job() }, 'ADDED');
  }
  recreate(sum: string | undefined): void {
    this.mark(sum ?? 'x');
    this.deleteHeld();
    this.release();
    this.create(sum);
  }
  recordJob(sum: string): void {
    this.jobApplied = sum;
    this.feed({ kind: 'Job', object: this.job() });
  }
}

const JOB_CASES: { name: string; steps: Step[]; expect: string[]; pending?: number }[] = [
  {
    name: 'CronJob: a content change, one manual Job, then its record',
    steps: [(h) => h.edit('2'), (h) => h.startJob('nightly-a'), (h) => h.recordCronJob('sum2', 'nightly-a')],
    expect: [],
  },
  {
    name: 'CronJob: the record seen before its Job (another watch)',
    steps: [(h) => h.edit('2'), (h) => h.recordCronJob('sum2', 'nightly-a'), (h) => h.startJob('nightly-a')],
    expect: [],
  },
  {
    name: 'CronJob: changes A→B→A→B start a Job each',
    steps: [
      (h) => h.edit('2'),
      (h) => h.startJob('nightly-a'),
      (h) => h.recordCronJob('sum2', 'nightly-a'),
      (h) => h.edit('1'),
      (h) => h.startJob('nightly-b'),
      (h) => h.recordCronJob('sum1', 'nightly-b'),
      (h) => h.edit('2'),
      (h) => h.startJob('nightly-c'),
      (h) => h.recordCronJob('sum2', 'nightly-c'),
    ],
    expect: [],
  },
  {
    // Two changes, the first one's Job seen only on a relist (a later resourceVersion than its creation's):
    // the second Job is judged from before it, not from that resourceVersion.
    name: "CronJob: a Job first seen on a relist does not bound the next Job's change",
    steps: [
      (h) => h.edit('2'),
      (h) => h.edit('3'),
      (h) => h.startJob('nightly-a', { relist: true }),
      (h) => h.recordCronJob('sum2', 'nightly-a'),
      (h) => h.startJob('nightly-b'),
      (h) => h.recordCronJob('sum3', 'nightly-b'),
    ],
    expect: [],
  },
  {
    name: 'CronJob: the same, its first Job seen live: the second follows no change',
    steps: [
      (h) => h.edit('2'),
      (h) => h.edit('3'),
      (h) => h.startJob('nightly-a'),
      (h) => h.recordCronJob('sum2', 'nightly-a'),
      (h) => h.startJob('nightly-b'),
      (h) => h.recordCronJob('sum3', 'nightly-b'),
    ],
    expect: ['cronjob-job-without-content-change'],
  },
  {
    name: 'CronJob: a Job after a metadata-only edit',
    steps: [(h) => h.touch(), (h) => h.startJob('nightly-a'), (h) => h.recordCronJob('sum2', 'nightly-a')],
    expect: ['cronjob-job-without-content-change'],
  },
  {
    name: 'CronJob: two Jobs for one change',
    steps: [
      (h) => h.edit('2'),
      (h) => h.startJob('nightly-a'),
      (h) => h.startJob('nightly-b'),
      (h) => h.recordCronJob('sum2', 'nightly-b'),
    ],
    expect: ['cronjob-job-without-content-change'],
  },
  {
    name: 'CronJob: a new last Job recorded with the same checksums',
    steps: [
      (h) => h.edit('2'),
      (h) => h.startJob('nightly-a'),
      (h) => h.recordCronJob('sum2', 'nightly-a'),
      (h) => h.recordCronJob('sum2', 'nightly-b'),
    ],
    expect: ['cronjob-two-jobs-one-record', 'cronjob-record-without-job'],
  },
  {
    name: 'CronJob: a Job the CronJob made on its schedule',
    steps: [
      (h) => h.edit('2'),
      (h) => h.startJob('nightly-a', { manual: false }),
      (h) => h.recordCronJob('sum2', 'nightly-a'),
    ],
    expect: ['cronjob-job-not-manual'],
  },
  {
    name: 'CronJob: a content change never started nor recorded',
    steps: [(h) => h.edit('2')],
    expect: ['content-change-not-applied'],
    pending: 1,
  },
  {
    name: 'Job: a content change re-creates it once, carrying the new record',
    steps: [(h) => h.edit('2', 'jcfg'), (h) => h.recreate('sum2')],
    expect: [],
  },
  {
    name: 'Job: a re-creation after a metadata-only edit',
    steps: [(h) => h.touch('jcfg'), (h) => h.recreate('sum9')],
    expect: ['job-recreated-without-content-change'],
  },
  {
    name: 'Job: re-created twice for one change',
    steps: [(h) => h.edit('2', 'jcfg'), (h) => h.recreate('sum2'), (h) => h.recreate('sum2')],
    expect: ['job-recreated-for-one-record-twice', 'job-recreated-without-content-change'],
  },
  {
    name: 'Job: re-created without a record',
    steps: [(h) => h.edit('2', 'jcfg'), (h) => h.recreate(undefined)],
    // Its record is gone, so the change is not applied either.
    expect: ['job-recreated-without-record', 'content-change-not-applied'],
    pending: 1,
  },
  {
    name: 'Job: deleted for a re-creation and never created again (lost)',
    steps: [(h) => h.edit('2', 'jcfg'), (h) => h.mark('sum2'), (h) => h.deleteHeld(), (h) => h.release()],
    expect: ['job-lost'],
    pending: 1,
  },
  {
    name: 'Job: held by its finalizer at the end',
    steps: [(h) => h.edit('2', 'jcfg'), (h) => h.mark('sum2'), (h) => h.deleteHeld()],
    expect: ['job-recreate-finalizer-left'],
    pending: 1,
  },
  {
    name: 'Job: a first sighting records without a re-creation',
    steps: [(h) => h.recordJob('sum1')],
    expect: [],
  },
];

describe('chaos monitor rules: config restarts of CronJobs and Jobs', () => {
  for (const { name, steps, expect, pending = 0 } of JOB_CASES) {
    it(name, () => {
      const h = new JobHarness();
      for (const step of steps) step(h);
      h.c.tick(h.t + DEFER_MS);
      assert.equal(h.c.pending().length, pending, JSON.stringify(h.c.pending()));
      h.c.finish(h.t + DEFER_MS);
      assert.deepEqual(kinds(h.c).sort(), [...expect].sort(), JSON.stringify(h.c.violations, null, 1));
    });
  }

  it('counts the Jobs started and the re-creations', () => {
    const h = new JobHarness();
    h.edit('2');
    h.startJob('nightly-a');
    h.recordCronJob('sum2', 'nightly-a');
    h.edit('2', 'jcfg');
    h.recreate('sum2');
    h.c.finish(h.t);
    assert.equal(h.c.counters['cronJobJobsStarted'], 1);
    assert.equal(h.c.counters['cronJobRecords'], 1);
    assert.equal(h.c.counters['jobRecreations'], 1);
    assert.equal(h.c.counters['configContentChanges'], 2);
  });
});
