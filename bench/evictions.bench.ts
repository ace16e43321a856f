// evictions: the pod-eviction webhook's decision path (ZpdbBudgets.handler,
// called in-process: TLS and the apiserver's own work are not measured)
// against real informer caches of a local cluster with 3 zones × 100 pods
// under one ZPDB.
//   deny path: every zone Ready but one pending eviction in zone a, then
//     evictions of random pods of zones b and c (all denied): decisions/s,
//     p50/p99, API calls per decision (target 0).
//   allow path: zone a's budget raised to 100, evictions of zone a's pods
//     one after another (all allowed, each committed to the ledger): p50/p99
//     and API calls per decision (target 1: the ledger write).
//   reschedule profiles (issue 38): the reschedule-on-eviction handler with
//     one profile, then three (the selecting one last, behind the Strimzi
//     profile and a regex profile that never match): p50/p99 and API calls
//     per decision for pods waiting for their operator (target 1: the
//     tracking records' read) and for unselected pods (target 0); three
//     profiles should cost what one does.
import { Registry } from 'prom-client';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { waitFor } from '../test/cluster/probe.ts';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { apiClientMetrics } from '../src/runtime/kube/apimetrics.ts';
import { resources, type Lease, type Pod, type StatefulSet } from '../src/runtime/kube/types.ts';
import { Informer } from '../src/runtime/informer/informer.ts';
import { indexByOwnerUid } from '../src/runtime/informer/store.ts';
import { systemClock } from '../src/runtime/clock.ts';
import { nopLogger } from '../src/runtime/log/logger.ts';
import { INDEX } from '../src/workloads/cache.ts';
import { zpdbResource, type ZoneAwarePodDisruptionBudget } from '../src/drain/zpdb/zpdbresource.ts';
import { ZpdbBudgets } from '../src/drain/zpdb/evictions.ts';
import { kubectl } from '../test/support/kubectl.ts';
import { createGroup, createGroupBudget, waitGroupSettled } from '../test/support/rollout-group.ts';
import type { AdmissionRequestV1 } from '../src/runtime/admission/admission.ts';
import { benchNamespace } from './namespace.ts';
import { percentile, report } from './report.ts';
import { LEDGER_LABEL } from '../src/vocabulary/keys.ts';
import { parseRescheduleConfig, type RescheduleConfig } from '../src/drain/reschedule/rescheduleconfig.ts';
import { rescheduleHandler } from '../src/drain/reschedule/webhook.ts';
import { profilesProblems, strimziProfileInput } from '../src/drain/reschedule/profiles.ts';

const PODS_PER_ZONE = 100;
const DENY_DECISIONS = 3000;
const RESCHEDULE_DECISIONS = 1000;

async function apiCalls(registry: Registry): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find(
    (m) => m.name === 'rollout_operator_kubernetes_api_client_request_duration_seconds',
  );
  return (metric?.values ?? [])
    .filter((v) => (v as { metricName?: string }).metricName?.endsWith('_count'))
    .reduce((sum, v) => sum + Number(v.value), 0);
}

const eviction = (namespace: string, name: string): AdmissionRequestV1 => ({
  uid: name,
  operation: 'CREATE',
  resource: { group: '', version: 'v1', resource: 'pods' },
  subResource: 'eviction',
  namespace,
  name,
  object: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace } },
});

export async function evictionsBench(): Promise<boolean> {
  const cluster = await LocalCluster.start({
    name: `bench-evictions-${process.pid}`,
    nodesPerZone: 1,
    maxPodsPerNode: 200,
    log: () => {},
  });
  try {
    const admin = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
    const namespace = await benchNamespace(admin);
    await createGroup(admin, namespace, { all: { replicas: PODS_PER_ZONE, readyDelay: '0s' } });
    await waitGroupSettled(admin, namespace, 600_000);
    const crd = new URL('../deploy/crds/zone-aware-pod-disruption-budgets.yaml', import.meta.url).pathname;
    if (!(await kubectl({ kubeconfigPath: cluster.kubeconfigPath } as never, 'apply', '-f', crd)).ok)
      throw new Error('cannot install the ZPDB CRD');
    await createGroupBudget(admin, namespace);

    const registry = new Registry();
    const client = new KubeClient({
      kubeConfig: cluster.kubeConfig(),
      timeoutMs: 15_000,
      metrics: apiClientMetrics(registry),
    });
    const base = { client, namespace, clock: systemClock, logger: nopLogger };
    const caches = {
      pods: [
        new Informer<Pod>({
          ...base,
          type: resources.pods,
          indexers: {
            [INDEX.podsByOwner]: indexByOwnerUid,
            [INDEX.orphanPods]: (p) => (p.metadata?.ownerReferences?.some((r) => r.controller) ? [] : ['']),
          },
        }),
      ],
      statefulSets: [new Informer<StatefulSet>({ ...base, type: resources.statefulSets })],
      zpdbs: [new Informer<ZoneAwarePodDisruptionBudget>({ ...base, type: zpdbResource, optional: true })],
      ledgers: [new Informer<Lease>({ ...base, type: resources.leases, labelSelector: `${LEDGER_LABEL}=true` })],
    };
    const all = [...caches.pods, ...caches.statefulSets, ...caches.zpdbs, ...caches.ledgers];
    for (const informer of all) informer.start();
    await Promise.all(all.map((i) => i.waitForSync()));
    await waitFor('the ZPDB cached', () => caches.zpdbs[0]!.size === 1, { timeoutMs: 10_000 });
    const budgets = new ZpdbBudgets({ client, clock: systemClock, log: nopLogger, registry, caches });
    const signal = AbortSignal.timeout(600_000);
    const judge = async (name: string) => {
      const started = performance.now();
      const answer = await budgets.handler(eviction(namespace, name), signal);
      return { ms: performance.now() - started, allowed: answer.allowed };
    };

    // Deny path: one pending eviction in zone a holds zones b and c.
    const first = await judge('ingester-zone-a-0');
    if (!first.allowed) throw new Error('the first eviction should be allowed');
    const denyCallsBefore = await apiCalls(registry);
    const denyLatencies: number[] = [];
    const denyStarted = performance.now();
    for (let i = 0; i < DENY_DECISIONS; i++) {
      const zone = i % 2 === 0 ? 'b' : 'c';
      const result = await judge(`ingester-zone-${zone}-${Math.floor(Math.random() * PODS_PER_ZONE)}`);
      if (result.allowed) throw new Error('an eviction in another zone was allowed while zone a is disrupted');
      denyLatencies.push(result.ms);
    }
    const denyElapsed = performance.now() - denyStarted;
    const denyCalls = (await apiCalls(registry)) - denyCallsBefore;
    report(
      'evictions-deny',
      `${DENY_DECISIONS} decisions, ${(DENY_DECISIONS / (denyElapsed / 1000)).toFixed(0)} decisions/s (one at a time), p50 ${percentile(denyLatencies, 50).toFixed(2)} ms, p99 ${percentile(denyLatencies, 99).toFixed(2)} ms, ${(denyCalls / DENY_DECISIONS).toFixed(3)} API calls per decision (target 0)`,
    );

    // Allow path: zone a may lose up to 100 pods; each allow is one ledger write.
    await admin.patch(zpdbResource, { namespace, name: 'ingester' }, 'merge', { spec: { maxUnavailable: 100 } });
    await waitFor(
      'the new budget cached',
      () => caches.zpdbs[0]!.get(namespace, 'ingester')?.spec?.maxUnavailable === 100,
      { timeoutMs: 10_000 },
    );
    const allowCallsBefore = await apiCalls(registry);
    const allowLatencies: number[] = [];
    for (let i = 1; i < 60; i++) {
      const result = await judge(`ingester-zone-a-${i}`);
      if (!result.allowed) throw new Error(`eviction ${i} of zone a was denied`);
      allowLatencies.push(result.ms);
    }
    const allowCalls = (await apiCalls(registry)) - allowCallsBefore;
    report(
      'evictions-allow',
      `${allowLatencies.length} allowed evictions committed to the ledger, p50 ${percentile(allowLatencies, 50).toFixed(2)} ms, p99 ${percentile(allowLatencies, 99).toFixed(2)} ms, ${(allowCalls / allowLatencies.length).toFixed(2)} API calls per decision (target 1: the ledger write; a conflict with a lagging cache adds a re-read and a retry)`,
    );
    const profilesOk = await rescheduleProfilesBench({ client, registry, namespace, pods: caches.pods });
    await Promise.all(all.map((i) => i.stop()));
    return percentile(denyLatencies, 99) < 5 && denyCalls === 0 && profilesOk;
  } finally {
    await cluster.teardown();
  }
}

function profile(input: Parameters<typeof parseRescheduleConfig>[0]): RescheduleConfig {
  const parsed = parseRescheduleConfig(input);
  if (!parsed.ok) throw new Error(parsed.errors.join('; '));
  return parsed.config;
}

/** The reschedule handler with one profile and with three, over the same pods: see the header. */
async function rescheduleProfilesBench(o: {
  client: KubeClient;
  registry: Registry;
  namespace: string;
  pods: Informer<Pod>[];
}): Promise<boolean> {
  const selecting = profile({
    name: 'ingesters',
    selectors: ['app=ingester-zone-a'],
    annotation: 'example.com/move=true',
  });
  const strimzi = strimziProfileInput({
    denyEviction: true,
    drainKafka: true,
    drainZooKeeper: true,
    namespaces: '',
    denyCode: 429,
  });
  if (!strimzi.ok) throw new Error(strimzi.error);
  const regex = profile({
    name: 'search',
    selectors: ['app.kubernetes.io/name=elasticsearch'],
    labelPatterns: { 'elasticsearch.k8s.elastic.co/statefulset-name': '.+-(master|data)' },
    annotation: 'example.com/move=true',
  });
  const three = [profile(strimzi.input), regex, selecting];
  const problems = profilesProblems(three);
  if (problems.length > 0) throw new Error(problems.join('; '));
  const signal = AbortSignal.timeout(600_000);
  const perKind: Record<string, { p99: number; calls: number }> = {};
  for (const [label, profiles] of [
    ['1 profile', [selecting]],
    ['3 profiles', three],
  ] as const) {
    const handler = rescheduleHandler({
      client: o.client,
      clock: systemClock,
      log: nopLogger,
      registry: new Registry(),
      config: profiles,
      pods: o.pods,
    });
    // The first eviction of each zone-a pod annotates it and writes its record; later ones find it waiting.
    for (let i = 0; i < PODS_PER_ZONE; i++) await handler(eviction(o.namespace, `ingester-zone-a-${i}`), signal);
    for (const [kind, zone] of [
      ['waiting', 'a'],
      ['unselected', 'b'],
    ] as const) {
      const before = await apiCalls(o.registry);
      const latencies: number[] = [];
      for (let i = 0; i < RESCHEDULE_DECISIONS; i++) {
        const started = performance.now();
        const answer = await handler(eviction(o.namespace, `ingester-zone-${zone}-${i % PODS_PER_ZONE}`), signal);
        latencies.push(performance.now() - started);
        if (answer.allowed !== (kind === 'unselected'))
          throw new Error(`a ${kind} pod was answered ${JSON.stringify(answer)}`);
      }
      const calls = ((await apiCalls(o.registry)) - before) / RESCHEDULE_DECISIONS;
      perKind[`${label} ${kind}`] = { p99: percentile(latencies, 99), calls };
      report(
        `reschedule-${label.replace(' ', '-')}-${kind}`,
        `${RESCHEDULE_DECISIONS} decisions, p50 ${percentile(latencies, 50).toFixed(2)} ms, p99 ${percentile(latencies, 99).toFixed(2)} ms, ${calls.toFixed(3)} API calls per decision (target ${kind === 'waiting' ? 1 : 0})`,
      );
    }
  }
  return (['waiting', 'unselected'] as const).every(
    (kind) => perKind[`3 profiles ${kind}`]!.calls === perKind[`1 profile ${kind}`]!.calls,
  );
}
