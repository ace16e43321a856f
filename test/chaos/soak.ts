// The chaos soak: several 3-zone rollout groups (each in its own namespace,
// with a ZoneAwarePodDisruptionBudget, mirrored and followed replicas and
// prepared downscales), opted-in Deployments, a CronJob and a Job with
// ConfigMaps and Secrets, no-downscale objects; two Stateward replicas
// with leader election serving
// the webhooks; a continuous workload and faults, both drawn from one seed;
// an independent monitor process (monitor.ts) judging everything. After the
// workload phase everything is restored and left to settle (with a
// deadline), and the report says what the monitor saw, what work was done
// and what it cost. Used by `npm run soak` (scripts/soak.ts) and by
// test/chaos/soak.int.test.ts. With health gates, every other group is
// gated by a RolloutHealthCheck against a real Prometheus (gatefaults.ts),
// with its two faults among the others. With profile drains (the default),
// the operator also runs the Couchbase and Strimzi reschedule profiles and
// drains, drawn from their own seeded stream, evict their pods while stand-in
// operators move them (profiledrains.ts). With CSI rotations (the default),
// each group namespace also has a Deployment mounting a Secrets Store CSI
// SecretProviderClass, a stand-in for the driver writes its pods'
// SecretProviderClassPodStatuses, and rotations of the mounted versions,
// drawn from a stream of their own, must each restart it once; the operator
// runs with --enable-csi-integration (csirotations.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { zpdbResource } from '../../src/drain/zpdb/zpdbresource.ts';
import { CRONJOBS, JOBS } from '../../src/restarts/workloadkinds.ts';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import {
  resources,
  type ConfigMap,
  type KubeObject,
  type Pod,
  type Secret,
  type StatefulSet,
} from '../../src/runtime/kube/types.ts';
import { freePorts } from '../cluster/ports.ts';
import { DeadlineError, waitFor } from '../cluster/probe.ts';
import type { TestCluster } from '../cluster/testing.ts';
import { kubectl } from '../support/kubectl.ts';
import { RoundRobinProxy } from '../support/round-robin-proxy.ts';
import { createReplicaTemplate, mirrorAnnotations, REPLICA_TEMPLATE } from '../support/replica-templates.ts';
import { testClient, zoneStatefulSet } from '../support/rollout-group.ts';
import { evictionWebhook, installLoopbackWebhook, loopbackWebhook } from '../support/webhooks.ts';
import { AllPodEndpoints } from './endpoints.ts';
import { CHECK_NAME, SoakGates } from './gatefaults.ts';
import { HEALTH_CHECK_ANNOTATION } from './healthgate.ts';
import { createCsiWorkload, CsiRotations } from './csirotations.ts';
import { installCsiCrds } from '../support/csi-crds.ts';
import { CompetingWriter, FaultInjector, type CompetitorTarget, type FaultKind, type FaultRecord } from './faults.ts';
import { OperatorPool } from './operators.ts';
import { installProfileWebhooks, ProfileDrains, profileOperatorConfig, type DrainRecord } from './profiledrains.ts';
import { Prng } from './prng.ts';
import { APPS, uncordon, Workload, ZONES } from './workload.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const monitorScript = fileURLToPath(new URL('./monitor.ts', import.meta.url));

export interface SoakOptions {
  cluster: TestCluster;
  /** Length of the workload phase. */
  minutes: number;
  seed: number;
  /** Rollout groups, one namespace each. */
  namespaces: number;
  /** Logs, the monitor's report, the secret values file, report.json. */
  runDir: string;
  log: (line: string) => void;
  faults?: boolean;
  faultIntervalMs?: [number, number];
  actionIntervalMs?: [number, number];
  faultWeights?: Partial<Record<FaultKind, number>>;
  /** How long everything may take to settle once faults and workload stop. */
  quiesceTimeoutMs?: number;
  /** grafana.com/min-time-between-zones-downscale of the groups. */
  minTimeBetweenZonesDownscale?: string;
  /** Leave the namespaces behind for inspection. */
  keep?: boolean;
  /** Gate the even-numbered groups by a health check against a real Prometheus, with a bad release and Prometheus outages among the faults. */
  healthGates?: boolean;
  /** Run the Couchbase and Strimzi reschedule profiles and drain their pods (default true). */
  profileDrains?: boolean;
  /** Pause before each profile drain, drawn uniformly (ms). */
  profileDrainIntervalMs?: [number, number];
  /** A Deployment per group mounting a Secrets Store CSI class, its statuses written and rotated (default true). */
  csiRotations?: boolean;
  /** Pause before each CSI rotation attempt, drawn uniformly (ms). */
  csiRotationIntervalMs?: [number, number];
}

export interface MonitorReport {
  final: boolean;
  synced: boolean;
  writtenAt: string;
  violations: { at: string; kind: string; message: string; details?: Record<string, unknown> }[];
  pending: { workload: string; config: string; since: string }[];
  unconfirmedOperatorDeletes?: { pod: string; uid: string; at: string }[];
  counters: Record<string, number>;
}

export interface SoakReport {
  id: string;
  seed: number;
  namespaces: string[];
  startedAt: string;
  workloadMs: number;
  quiesceMs: number;
  totalMs: number;
  settled: boolean;
  violations: MonitorReport['violations'];
  monitor: Record<string, number>;
  faults: {
    injected: number;
    failed: number;
    byKind: Record<string, number>;
    records: FaultRecord[];
    componentsRestartedBySupervisor: string[];
  };
  unconfirmedOperatorDeletes: NonNullable<MonitorReport['unconfirmedOperatorDeletes']>;
  actions: Record<string, number>;
  rolloutsCompleted: number;
  restartsApplied: number;
  evictionsDecided: { allowed: number; denied: number; total: number };
  operator: {
    peakRssBytes: number;
    peakRssBySlot: number[];
    rssMiBByMinute: number[];
    replicaStarts: number;
    conflicts409: number;
    podsDeleted: number;
  };
  competitor: { patches: number; failures: number };
  endpoints: { total: number; failed: number; hung: number };
  profileDrains: {
    drains: number;
    completed: number;
    kubectlRuns: number;
    podsCreated: number;
    /** The stand-in operators' replacements. */
    moves: { couchbase: number; strimzi: number };
    moveFailures: number;
    /** stateward_reschedule_profile_evictions_total increases by `profile outcome code`. */
    decisions: Record<string, number>;
    records: DrainRecord[];
  };
  /** The CSI driver stand-in's rotations and status writes, by `what outcome` (empty without CSI rotations). */
  csiRotations: Record<string, number>;
}

type Cleanup = () => Promise<unknown>;

export async function runSoak(o: SoakOptions): Promise<SoakReport> {
  const started = Date.now();
  const prng = new Prng(o.seed);
  const workloadPrng = prng.fork();
  const faultPrng = prng.fork();
  const setupPrng = prng.fork();
  // Forked last, so the other streams draw what they drew before profile drains existed.
  const drainPrng = prng.fork();
  // Forked after it, so neither the drains nor the others draw differently for the CSI rotations.
  const csiPrng = prng.fork();
  const id = `soak-${o.seed}-${randomBytes(2).toString('hex')}`;
  const { cluster, log } = o;
  const kube = testClient(cluster);
  const cleanups: Cleanup[] = [];
  const t = { name: id, after: (fn: Cleanup) => void cleanups.push(fn) };
  mkdirSync(join(o.runDir, 'logs'), { recursive: true });
  const secretsFile = join(o.runDir, 'secret-values.txt');
  writeFileSync(secretsFile, '');
  const monitorOut = join(o.runDir, 'monitor-report.json');
  const minTime = o.minTimeBetweenZonesDownscale ?? '15s';
  let monitor: ChildProcess | undefined;
  let pool: OperatorPool | undefined;
  let proxy: RoundRobinProxy | undefined;
  let endpoints: AllPodEndpoints | undefined;
  let injector: FaultInjector | undefined;
  let workload: Workload | undefined;
  let gates: SoakGates | undefined;
  let drains: ProfileDrains | undefined;
  let csi: CsiRotations | undefined;

  try {
    // ---------------------------------------------------------------- setup
    const nsT = { name: id, after: (fn: Cleanup) => (o.keep ? undefined : void cleanups.push(fn)) };
    const operatorNamespace = await cluster.namespace(nsT, `${id}-op`);
    const namespaces: string[] = [];
    for (let i = 0; i < o.namespaces; i++) namespaces.push(await cluster.namespace(nsT, `${id}-g${i}`));
    const profileNamespaces =
      o.profileDrains === false
        ? undefined
        : { couchbase: await cluster.namespace(nsT, `${id}-cb`), kafka: await cluster.namespace(nsT, `${id}-kafka`) };
    log(
      `soak ${id}: seed ${o.seed}, ${o.minutes} min, namespaces ${namespaces.join(', ')}, operator namespace ${operatorNamespace}, run dir ${o.runDir}`,
    );
    for (const crd of ['replica-templates.yaml', 'zone-aware-pod-disruption-budgets.yaml']) {
      const applied = await kubectl(cluster, 'apply', '-f', join(root, 'deploy/crds', crd));
      if (!applied.ok) throw new Error(`installing ${crd}: ${applied.out}`);
    }
    const withCsi = o.csiRotations !== false;
    if (withCsi) await installCsiCrds(cluster, kube, o.runDir);
    const [podPort] = (await freePorts(1)) as [number];
    endpoints = new AllPodEndpoints();
    await endpoints.listen(podPort);
    const gatedNamespaces = o.healthGates ? namespaces.filter((_, i) => i % 2 === 0) : [];
    if (gatedNamespaces.length > 0)
      gates = await SoakGates.setup({ cluster, kube, namespaces: gatedNamespaces, runDir: o.runDir, log });
    const soakGates = gates;
    workload = new Workload({
      held: (namespace) => soakGates?.held(namespace) ?? false,
      cluster,
      kube,
      prng: workloadPrng,
      namespaces,
      podTag: id,
      secretsFile,
      log,
      intervalMs: o.actionIntervalMs ?? [1000, 4000],
    });

    for (const [i, namespace] of namespaces.entries()) {
      // The last group (with two or more) has no ZPDB: the rollout guarantees on their own, without the
      // budget's ledger behind them. Its pods are not drained (evictions without a budget are not judged).
      const budgeted = namespaces.length === 1 || i < namespaces.length - 1;
      await createReplicaTemplate(cluster, kube, namespace, 'ingester', 3);
      const maxUnavailable: Record<string, string | undefined> = { a: '2', b: '50%', c: undefined };
      for (const zone of ZONES) {
        const set = zoneStatefulSet(namespace, zone, {
          replicas: 3,
          readyDelay: '1s',
          group: 'ingester',
          ...(budgeted ? { podLabels: { 'stateward.dev/soak': id } } : {}),
          ...(maxUnavailable[zone] ? { maxUnavailable: maxUnavailable[zone] } : {}),
        });
        set.metadata!.labels = {
          ...set.metadata!.labels,
          'grafana.com/prepare-downscale': 'true',
          'grafana.com/min-time-between-zones-downscale': minTime,
        };
        set.metadata!.annotations = {
          ...set.metadata!.annotations,
          'grafana.com/prepare-downscale-http-path': 'ingester/prepare-shutdown',
          'grafana.com/prepare-downscale-http-port': String(podPort),
          ...(zone === 'a'
            ? mirrorAnnotations('ingester')
            : { 'grafana.com/rollout-downscale-leader': `ingester-zone-${zone === 'b' ? 'a' : 'b'}` }),
          ...(gatedNamespaces.includes(namespace) ? { [HEALTH_CHECK_ANNOTATION]: CHECK_NAME } : {}),
        };
        await kube.create(resources.statefulSets, set);
      }
      if (budgeted) {
        const zpdb = {
          apiVersion: 'rollout-operator.grafana.com/v1',
          kind: 'ZoneAwarePodDisruptionBudget',
          metadata: { name: 'ingester', namespace },
          spec: { maxUnavailable: i % 2 === 0 ? 1 : 2, selector: { matchLabels: { 'rollout-group': 'ingester' } } },
        } as KubeObject;
        await waitFor('the ZPDB created', () => kube.create(zpdbResource, zpdb).catch(() => undefined), {
          timeoutMs: 30_000,
        });
      }
      for (let app = 0; app < APPS; app++) {
        await kube.create<ConfigMap>(resources.configMaps, {
          metadata: { name: `app-config-${app}`, namespace },
          data: { value: setupPrng.token(12) },
        });
        await kube.create<Secret>(resources.secrets, {
          metadata: { name: `app-secret-${app}`, namespace },
          data: { password: Buffer.from(workload.secretValue()).toString('base64') },
        });
        await kube.create(resources.deployments, {
          metadata: { name: `app-${app}`, namespace, annotations: { 'com.xing.deployment-restart': 'enabled' } },
          spec: {
            replicas: 1,
            selector: { matchLabels: { app: `app-${app}` } },
            template: {
              metadata: { labels: { app: `app-${app}` } },
              spec: {
                containers: [
                  {
                    name: 'app',
                    image: 'example.invalid/app:1',
                    envFrom: [{ configMapRef: { name: `app-config-${app}` } }],
                    volumeMounts: [{ name: 'secret', mountPath: '/etc/secret' }],
                  },
                ],
                volumes: [{ name: 'secret', secret: { secretName: `app-secret-${app}` } }],
              },
            },
          },
        } as KubeObject);
      }
      await createBatchWorkloads(kube, namespace);
      if (withCsi) await createCsiWorkload(kube, namespace);
      await kube.create(resources.deployments, {
        metadata: { name: 'frontend', namespace, labels: { 'grafana.com/no-downscale': 'true' } },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: 'frontend' } },
          template: {
            metadata: { labels: { app: 'frontend' } },
            spec: { containers: [{ name: 'web', image: 'example.invalid/web:1' }] },
          },
        },
      } as KubeObject);
      await kube.create(resources.statefulSets, {
        metadata: { name: 'cache', namespace, labels: { 'grafana.com/no-downscale': 'true' } },
        spec: {
          replicas: 2,
          serviceName: 'cache',
          selector: { matchLabels: { app: 'cache' } },
          template: {
            metadata: { labels: { app: 'cache' } },
            spec: { containers: [{ name: 'cache', image: 'example.invalid/cache:1' }] },
          },
        },
      });
    }
    await gates?.checks();
    await waitFor(
      'every workload Ready before the operator starts',
      async () => (await unsettled(kube, namespaces)).length === 0,
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    if (withCsi) {
      // Mounted before the operator starts: its first look records the versions and restarts nothing.
      csi = new CsiRotations({
        kube,
        prng: csiPrng,
        namespaces,
        log,
        intervalMs: o.csiRotationIntervalMs ?? [8000, 20_000],
      });
      await csi.startDriver();
    }

    // The monitor watches from before the operator's first action.
    const monitorLog = openSync(join(o.runDir, 'monitor.log'), 'a');
    monitor = spawn(
      process.execPath,
      [
        monitorScript,
        '--kubeconfig',
        cluster.kubeconfigPath,
        '--namespaces',
        namespaces.join(','),
        '--events-namespaces',
        operatorNamespace,
        '--out',
        monitorOut,
        '--secrets',
        secretsFile,
        '--logs-dir',
        join(o.runDir, 'logs'),
        ...(gates ? ['--gate-timeline', gates.timelinePath, '--gated-namespaces', gates.namespaces.join(',')] : []),
        ...(profileNamespaces
          ? ['--profile-namespaces', `couchbase=${profileNamespaces.couchbase},kafka=${profileNamespaces.kafka}`]
          : []),
        ...(withCsi ? ['--csi'] : []),
      ],
      { stdio: ['ignore', monitorLog, monitorLog] },
    );
    closeSync(monitorLog);
    await waitFor('the monitor synced', () => readMonitor(monitorOut)?.synced === true, {
      timeoutMs: 60_000,
      intervalMs: 250,
      fail: () =>
        monitor!.exitCode !== null
          ? `the monitor exited (${monitor!.exitCode}); see ${join(o.runDir, 'monitor.log')}`
          : undefined,
    });

    pool = await OperatorPool.create({
      cluster,
      namespace: operatorNamespace,
      watchNamespaces: namespaces,
      logsDir: join(o.runDir, 'logs'),
      replicas: 2,
      clockSteps: true,
      flags: [
        '-config-restarts.enabled',
        '-restart-grace-period=1',
        '-reconcile.interval=2s',
        ...(withCsi ? ['--enable-csi-integration'] : []),
        ...(profileNamespaces ? profileOperatorConfig(profileNamespaces).flags : []),
      ],
      ...(profileNamespaces ? { env: profileOperatorConfig(profileNamespaces).env } : {}),
    });
    await pool.startAll();
    const operators = pool;
    await waitFor('a leader elected', async () => (await operators.leader()) !== undefined, {
      timeoutMs: 30_000,
      intervalMs: 250,
    });
    proxy = new RoundRobinProxy(() => operators.ports.map((p) => p.https));
    const webhookPort = await proxy.listen();
    const sideEffectsNone = 'None' as const;
    await installLoopbackWebhook(t, kube, {
      name: `${id}-validating`,
      namespace: operatorNamespace,
      validating: true,
      webhooks: namespaces.flatMap((namespace) => [
        { ...evictionWebhook(namespace, webhookPort) },
        {
          ...loopbackWebhook({
            name: `zpdb-validation-${namespace}.grafana.com`,
            namespace,
            port: webhookPort,
            path: '/admission/zpdb-validation',
            sideEffects: sideEffectsNone,
            rules: [
              {
                apiGroups: ['rollout-operator.grafana.com'],
                apiVersions: ['v1'],
                operations: ['CREATE', 'UPDATE'],
                resources: ['zoneawarepoddisruptionbudgets'],
                scope: 'Namespaced',
              },
            ],
          }),
        },
        {
          ...loopbackWebhook({
            name: `no-downscale-${namespace}.grafana.com`,
            namespace,
            port: webhookPort,
            path: '/admission/no-downscale',
            sideEffects: sideEffectsNone,
            rules: [
              {
                apiGroups: ['apps'],
                apiVersions: ['v1'],
                operations: ['UPDATE'],
                resources: [
                  'statefulsets',
                  'statefulsets/scale',
                  'deployments',
                  'deployments/scale',
                  'replicasets',
                  'replicasets/scale',
                ],
                scope: 'Namespaced',
              },
            ],
          }),
        },
      ]),
    });
    await installLoopbackWebhook(t, kube, {
      name: `${id}-prepare-downscale`,
      namespace: operatorNamespace,
      webhooks: namespaces.map((namespace) =>
        loopbackWebhook({
          name: `prepare-downscale-${namespace}.grafana.com`,
          namespace,
          port: webhookPort,
          path: '/admission/prepare-downscale',
          sideEffects: 'NoneOnDryRun',
        }),
      ),
    });
    if (profileNamespaces)
      await installProfileWebhooks(t, kube, {
        id,
        operatorNamespace,
        port: webhookPort,
        ...profileNamespaces,
      });
    log(
      `soak ${id}: operators ready (ports ${pool.ports.map((p) => `${p.http}/${p.https}`).join(', ')}), webhooks on ${webhookPort}, pod endpoints on ${podPort}; setup took ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );

    // ----------------------------------------------------------- workload
    const competitor = new CompetingWriter(kube, () =>
      namespaces.flatMap((namespace): CompetitorTarget[] => [
        ...ZONES.map((z) => ({ type: resources.statefulSets, namespace, name: `ingester-zone-${z}` })),
        ...Array.from({ length: APPS }, (_, app) => [
          { type: resources.configMaps, namespace, name: `app-config-${app}` },
          { type: resources.deployments, namespace, name: `app-${app}` },
        ]).flat(),
        { type: CRONJOBS, namespace, name: BATCH_CRONJOB },
        { type: JOBS, namespace, name: BATCH_JOB },
      ]),
    );
    injector = new FaultInjector({
      cluster,
      pool,
      endpoints,
      competitor,
      ...(gates ? { gates } : {}),
      prng: faultPrng,
      log,
      intervalMs: o.faultIntervalMs ?? [8000, 25_000],
      ...(o.faultWeights ? { weights: o.faultWeights } : {}),
    });
    const stop = new AbortController();
    const sampler = (async () => {
      while (!stop.signal.aborted) {
        await operators.sample();
        await sleep(3000, undefined, { signal: stop.signal }).catch(() => undefined);
      }
    })();
    if (profileNamespaces)
      drains = new ProfileDrains({
        cluster,
        kube,
        prng: drainPrng,
        id,
        ...profileNamespaces,
        log,
        intervalMs: o.profileDrainIntervalMs ?? [8000, 20_000],
      });
    const workloadStart = Date.now();
    const running = [
      workload.run(stop.signal),
      o.faults === false ? Promise.resolve() : injector.run(stop.signal),
      drains?.run(stop.signal) ?? Promise.resolve(),
      csi?.run(stop.signal) ?? Promise.resolve(),
    ];
    await sleep(o.minutes * 60_000);
    stop.abort();
    await Promise.all(running);
    await sampler;
    const workloadMs = Date.now() - workloadStart;

    // ------------------------------------------------------------ quiesce
    const quiesceStart = Date.now();
    log(
      `soak ${id}: workload over after ${(workloadMs / 1000).toFixed(0)} s; restoring and waiting for everything to settle`,
    );
    await injector.restoreAll();
    for (const node of cluster.nodes) await uncordon(cluster, node.name);
    let settled = true;
    const extra: MonitorReport['violations'] = [];
    const supervisor = injector;
    try {
      await waitFor(
        'everything settled',
        async () => {
          // A component may still exit by itself after the restore (kube-scheduler does, a while after an
          // apiserver outage): restarted here too, as a kubelet would, or no pod is scheduled while this waits.
          await supervisor.supervise();
          await operators.sample();
          const left = await unsettled(kube, namespaces);
          if (drains && !(await drains.settled())) return false;
          if (csi && !(await csi.settled())) return false;
          // The monitor writes its report every 2 s: only one written well after the last action counts.
          const report = readMonitor(monitorOut);
          const fresh = report !== undefined && Date.parse(report.writtenAt) >= quiesceStart + 3000;
          return left.length === 0 && fresh && report.pending.length === 0;
        },
        { timeoutMs: o.quiesceTimeoutMs ?? 180_000, intervalMs: 1000 },
      );
    } catch (error) {
      if (!(error instanceof DeadlineError)) throw error;
      settled = false;
      const left = await unsettled(kube, namespaces).catch((e: unknown) => [String(e)]);
      extra.push({
        at: new Date().toISOString(),
        kind: 'not-settled-after-quiesce',
        message: `not settled ${((o.quiesceTimeoutMs ?? 180_000) / 1000).toFixed(0)} s after the faults and the workload stopped: ${left.join('; ') || 'config changes pending (see the monitor)'}`,
      });
    }
    const quiesceMs = Date.now() - quiesceStart;
    for (const d of drains?.records.filter((r) => !r.completed) ?? [])
      extra.push({
        at: new Date().toISOString(),
        kind: 'profile-drain-not-completed',
        message: `kubectl drain of ${d.node} (started ${d.at}) did not complete in ${(d.ms / 1000).toFixed(0)} s over ${d.runs} run(s): ${d.lastError ?? 'no output'}`,
      });
    await operators.sample();
    monitor.kill('SIGTERM');
    const child = monitor;
    await waitFor(
      'the monitor to write its final report',
      () => readMonitor(monitorOut)?.final === true || child.exitCode !== null,
      { timeoutMs: 180_000, intervalMs: 250 },
    );
    const report = readMonitor(monitorOut);
    if (!report?.final) throw new Error(`the monitor wrote no final report; see ${join(o.runDir, 'monitor.log')}`);

    const records = injector.records;
    const byKind: Record<string, number> = {};
    for (const r of records) byKind[r.kind] = (byKind[r.kind] ?? 0) + 1;
    const evictions = (reason: (key: string) => boolean) =>
      operators.total((k) => k.startsWith('rollout_operator_zpdb_eviction_requests_total{') && reason(k));
    const result: SoakReport = {
      id,
      seed: o.seed,
      namespaces,
      startedAt: new Date(started).toISOString(),
      workloadMs,
      quiesceMs,
      totalMs: Date.now() - started,
      settled,
      violations: [...report.violations, ...extra],
      monitor: report.counters,
      faults: {
        injected: records.length,
        failed: records.filter((r) => !r.ok).length,
        byKind,
        records,
        componentsRestartedBySupervisor: injector.restartedComponents,
      },
      unconfirmedOperatorDeletes: report.unconfirmedOperatorDeletes ?? [],
      actions: workload.counts,
      rolloutsCompleted: report.counters['rolloutsCompleted'] ?? 0,
      restartsApplied: report.counters['restarts'] ?? 0,
      evictionsDecided: {
        allowed: evictions((k) => k.includes('reason="allowed"')),
        denied: evictions((k) => !k.includes('reason="allowed"')),
        total: evictions(() => true),
      },
      operator: {
        peakRssBytes: operators.peakRssBytes,
        peakRssBySlot: operators.peakRssBySlot,
        rssMiBByMinute: operators.rssByMinute,
        replicaStarts: operators.starts,
        conflicts409: operators.total(
          (k) =>
            k.startsWith('rollout_operator_kubernetes_api_client_request_duration_seconds_count{') &&
            k.includes('status_code="409"'),
        ),
        podsDeleted: operators.total((k) => k.startsWith('stateward_rollout_pods_deleted_total{')),
      },
      competitor: { patches: competitor.patches, failures: competitor.failures },
      endpoints: { ...endpoints.calls },
      profileDrains: {
        drains: drains?.records.length ?? 0,
        completed: drains?.records.filter((r) => r.completed).length ?? 0,
        kubectlRuns: drains?.records.reduce((n, r) => n + r.runs, 0) ?? 0,
        podsCreated: drains?.podsCreated ?? 0,
        moves: { ...(drains?.moves ?? { couchbase: 0, strimzi: 0 }) },
        moveFailures: drains?.moveFailures ?? 0,
        decisions: rescheduleDecisions(operators),
        records: drains?.records ?? [],
      },
      csiRotations: { ...csi?.counts },
    };
    writeFileSync(join(o.runDir, 'report.json'), JSON.stringify(result, null, 2));
    return result;
  } finally {
    if (monitor && monitor.exitCode === null) monitor.kill('SIGKILL');
    await injector?.restoreAll().catch(() => undefined);
    await workload?.settle().catch(() => undefined);
    await drains?.stop().catch(() => undefined);
    await csi?.stop().catch(() => undefined);
    await pool?.stopAll().catch(() => undefined);
    await proxy?.close().catch(() => undefined);
    await endpoints?.close().catch(() => undefined);
    await gates?.close();
    for (const node of cluster.nodes) await cluster.uncordon(node.name).catch(() => undefined);
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  }
}

/** The reschedule webhooks' decisions on selected pods, summed over every replica, by `profile outcome code`. */
function rescheduleDecisions(operators: OperatorPool): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, n] of Object.entries(
    operators.increasesOf((k) => k.startsWith('stateward_reschedule_profile_evictions_total{')),
  )) {
    const label = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(key)?.[1] ?? '?';
    const id = `${label('profile')} ${label('outcome')} ${label('code')}`;
    out[id] = (out[id] ?? 0) + n;
  }
  return out;
}

/** The CronJob and the Job of each namespace: opted in, using every app's ConfigMap and one app's Secret each. */
export const BATCH_CRONJOB = 'nightly';
export const BATCH_JOB = 'batch';

/**
 * The CronJob is suspended, so only Stateward starts its Jobs (a suspended
 * CronJob still gets them, docs/restarts.md). Its Jobs have parallelism 0
 * and never finish: kwok completes Ready pods of restartPolicy Never, and
 * a CronJob deletes its finished Jobs beyond its history limits, so a Job
 * started and cleaned up while the monitor's watch is down would go
 * unseen; what is judged is the Job objects. The standalone Job's one pod completes (kwok's pod-complete
 * stage), so each re-creation replaces a finished Job and its pod, the
 * usual case of a Job re-created on a config change.
 */
async function createBatchWorkloads(kube: KubeClient, namespace: string): Promise<void> {
  const optIn = { 'com.xing.deployment-restart': 'enabled' };
  const podSpec = (secretApp: number) => ({
    restartPolicy: 'Never',
    containers: [
      {
        name: 'batch',
        image: 'example.invalid/batch:1',
        envFrom: Array.from({ length: APPS }, (_, app) => ({ configMapRef: { name: `app-config-${app}` } })),
        volumeMounts: [{ name: 'secret', mountPath: '/etc/secret' }],
      },
    ],
    volumes: [{ name: 'secret', secret: { secretName: `app-secret-${secretApp}` } }],
  });
  await kube.create(CRONJOBS, {
    metadata: { name: BATCH_CRONJOB, namespace, annotations: optIn },
    spec: {
      schedule: '0 3 * * *',
      suspend: true,
      jobTemplate: { spec: { parallelism: 0, template: { spec: podSpec(0) } } },
    },
  } as KubeObject);
  await kube.create(JOBS, {
    metadata: { name: BATCH_JOB, namespace, annotations: optIn },
    spec: { backoffLimit: 0, template: { metadata: { labels: { app: BATCH_JOB } }, spec: podSpec(APPS - 1) } },
  } as KubeObject);
}

export function readMonitor(path: string): MonitorReport | undefined {
  if (!existsSync(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as MonitorReport;
  } catch {
    return undefined;
  }
}

type Workloadish = KubeObject & {
  spec?: { replicas?: number };
  status?: {
    replicas?: number;
    readyReplicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
    observedGeneration?: number;
    currentRevision?: string;
    updateRevision?: string;
  };
};

/** What is not settled yet: groups at their ReplicaTemplate's replicas, rolled out and Ready; Deployments rolled out; no-downscale objects Ready. */
export async function unsettled(kube: KubeClient, namespaces: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const namespace of namespaces) {
    const template = await kube
      .get<KubeObject & { spec?: { replicas?: number } }>(REPLICA_TEMPLATE, { namespace, name: 'ingester' })
      .catch(() => undefined);
    const sets = (await kube.list<StatefulSet>(resources.statefulSets, { namespace })).items;
    const pods = (await kube.list<Pod>(resources.pods, { namespace })).items;
    for (const set of sets as Workloadish[]) {
      const name = set.metadata?.name ?? '';
      const want = name.startsWith('ingester-zone-')
        ? (template?.spec?.replicas ?? set.spec?.replicas)
        : set.spec?.replicas;
      const s = set.status ?? {};
      const own = pods.filter((p) => p.metadata?.ownerReferences?.some((r) => r.uid === set.metadata?.uid));
      const ready = own.filter(
        (p) =>
          !p.metadata?.deletionTimestamp &&
          p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      );
      const problems: string[] = [];
      if (set.spec?.replicas !== want) problems.push(`replicas ${set.spec?.replicas}, want ${want}`);
      if (s.observedGeneration !== set.metadata?.generation) problems.push('generation not observed');
      if (ready.length !== want || own.length !== want) problems.push(`${ready.length}/${own.length} pods Ready`);
      if (name.startsWith('ingester-zone-')) {
        if (s.currentRevision !== s.updateRevision) problems.push('currentRevision behind');
        if (own.some((p) => p.metadata?.labels?.['controller-revision-hash'] !== s.updateRevision))
          problems.push('pods on an old revision');
      }
      if (problems.length > 0) out.push(`${namespace}/${name}: ${problems.join(', ')}`);
    }
    for (const d of (await kube.list<Workloadish>(resources.deployments, { namespace })).items) {
      const s = d.status ?? {};
      const want = d.spec?.replicas ?? 1;
      if (
        s.observedGeneration !== d.metadata?.generation ||
        s.updatedReplicas !== want ||
        s.availableReplicas !== want ||
        s.replicas !== want
      )
        out.push(
          `${namespace}/deployment ${d.metadata?.name}: ${s.updatedReplicas ?? 0}/${want} updated, ${s.availableReplicas ?? 0} available, ${s.replicas ?? 0} pods`,
        );
    }
  }
  return out;
}

/** The report in a few lines, for a terminal. */
export function summarize(r: SoakReport): string {
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  const lines = [
    `soak ${r.id}: seed ${r.seed}, ${r.namespaces.length} groups, workload ${(r.workloadMs / 60_000).toFixed(1)} min, settled ${r.settled ? `in ${(r.quiesceMs / 1000).toFixed(0)} s` : 'NOT within the deadline'}, total ${(r.totalMs / 60_000).toFixed(1)} min`,
    `violations: ${r.violations.length}`,
    ...r.violations.slice(0, 50).map((v) => `  - [${v.kind}] ${v.at} ${v.message}`),
    `rollouts completed: ${r.rolloutsCompleted} (operator rolling deletes of Ready pods: ${r.monitor['operatorDeletesOfReadyPods'] ?? 0}, ${r.monitor['operatorDeletesConfirmedByEvent'] ?? 0} confirmed by a DeletingPod Event)`,
    `config restarts applied: ${r.restartsApplied} (content changes seen: ${r.monitor['configContentChanges'] ?? 0}, checksum updates: ${r.monitor['appliedChecksumUpdates'] ?? 0})`,
    `CronJob and Job restarts: ${r.monitor['cronJobJobsStarted'] ?? 0} Jobs started from CronJobs (${r.monitor['cronJobRecords'] ?? 0} recorded, ${r.monitor['cronJobJobsNeverRecorded'] ?? 0} never recorded), ${r.monitor['jobRecreations'] ?? 0} Jobs re-created`,
    ...(Object.keys(r.csiRotations).length > 0
      ? [
          `CSI rotations: ${r.csiRotations['rotation'] ?? 0} made by the driver stand-in (${Object.entries(
            r.csiRotations,
          )
            .filter(([k]) => k !== 'rotation')
            .sort()
            .map(([k, n]) => `${k} ×${n}`)
            .join(
              ', ',
            )}); seen by the monitor: ${r.monitor['csiRotations'] ?? 0} rotations, ${r.monitor['csiRestarts'] ?? 0} restarts, ${r.monitor['csiRotationsRestarted'] ?? 0} rotations restarted once (${r.monitor['csiStatusWritesSeen'] ?? 0} status writes seen)`,
        ]
      : []),
    `evictions decided (operator metrics, evictions and rolling deletes): ${r.evictionsDecided.total} (${r.evictionsDecided.allowed} allowed, ${r.evictionsDecided.denied} refused); evictions of Ready pods seen: ${r.monitor['evictionsOfReadyPods'] ?? 0}`,
    `downscales seen: ${r.monitor['downscales'] ?? 0} (prepared: ${r.monitor['preparedDownscales'] ?? 0}), upscales: ${r.monitor['upscales'] ?? 0}`,
    `faults injected: ${r.faults.injected} (${r.faults.failed} failed to inject): ${Object.entries(r.faults.byKind)
      .map(([k, n]) => `${k} ×${n}`)
      .join(
        ', ',
      )}${r.faults.componentsRestartedBySupervisor.length ? `; components that exited by themselves, restarted: ${r.faults.componentsRestartedBySupervisor.join(', ')}` : ''}`,
    `actions: ${Object.entries(r.actions)
      .sort()
      .map(([k, n]) => `${k} ×${n}`)
      .join(', ')}`,
    `operator: peak RSS ${mib(r.operator.peakRssBytes)} (per slot ${r.operator.peakRssBySlot.map(mib).join(', ')}; highest per minute, MiB: ${r.operator.rssMiBByMinute.join(' ')}), ${r.operator.replicaStarts} replica starts, ${r.operator.conflicts409} API 409 Conflicts, ${r.operator.podsDeleted} pods deleted`,
    `health gates: ${r.monitor['gatedStarts'] ?? 0} gated zone starts judged against ${r.monitor['gatePauseIntervals'] ?? 0} pause intervals (${r.monitor['rolloutStartsSeen'] ?? 0} zone starts seen)`,
    ...(r.profileDrains.drains > 0
      ? [
          `profile drains: ${r.profileDrains.completed}/${r.profileDrains.drains} completed (${r.profileDrains.kubectlRuns} kubectl drain runs, ${r.profileDrains.podsCreated} pods placed); annotations written: Couchbase ${r.monitor['rescheduleAnnotations.couchbase'] ?? 0}, Strimzi ${r.monitor['rescheduleAnnotations.strimzi'] ?? 0}; stand-in replacements: Couchbase ${r.profileDrains.moves.couchbase}, Strimzi ${r.profileDrains.moves.strimzi} (seen by the monitor: ${r.monitor['rescheduleMoves.couchbase'] ?? 0}, ${r.monitor['rescheduleMoves.strimzi'] ?? 0}; ${r.profileDrains.moveFailures} failed); unselected pods evicted: ${r.monitor['rescheduleUnselectedEvictions'] ?? 0}; webhook decisions: ${
            Object.entries(r.profileDrains.decisions)
              .sort()
              .map(([k, n]) => `${k} ×${n}`)
              .join(', ') || 'none'
          }`,
        ]
      : []),
    `monitor: ${r.monitor['checksRun'] ?? 0} checks, ${r.monitor['relists'] ?? 0} relists, ${r.monitor['watchErrors'] ?? 0} watch errors, ${r.monitor['deletionsSeenOnlyOnRelist'] ?? 0} deletions seen only on a relist, ${r.monitor['secretValuesWatched'] ?? 0} secret values searched in ${r.monitor['eventVersionsScanned'] ?? 0} Event versions and ${((r.monitor['logBytesScanned'] ?? 0) / 1024).toFixed(0)} KiB of operator logs`,
  ];
  return lines.join('\n');
}
