// Stateward under the permissions rollout-operator's users already have
// (issue 34): grafana's own Helm chart for rollout-operator (grafana/helm-charts
// charts/rollout-operator 0.51.1, app v0.39.0), fetched through the Go module
// proxy into the cache (test/tools/grafana-chart.ts; never copied here),
// installed with the real helm on the real node with only the image and the
// node placement changed. Its Role grants nothing on ConfigMaps, Leases or
// Events and no watch on its certificate Secret. Asserted: Ready by the
// chart's own probe; a rollout group rolls zone by zone; each webhook the
// chart installs answers through its Service (no-downscale, prepare-downscale,
// pod-eviction under a ZoneAwarePodDisruptionBudget); a deleted certificate
// comes back without a restart; no refused request repeats (the apiserver's
// audit log); and `stateward doctor`, run as a user, names the missing
// permissions.
//
// Its own cluster with the real node (one machine has one); needs root.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type KubeObject, type Pod, type StatefulSet } from '../../src/runtime/kube/types.ts';
import { LocalCluster } from '../cluster/cluster.ts';
import { ensureStatewardImage, type BuiltImage } from '../cluster/image.ts';
import { waitFor } from '../cluster/probe.ts';
import { REAL_NODE } from '../cluster/realnode-host.ts';
import { evict } from '../support/evictions.ts';
import { AUDIT_POLICY, refusedFromAudit, repeated } from '../support/refusals.ts';
import {
  changeTemplate,
  createGroup,
  createGroupBudget,
  InvariantMonitor,
  isReady,
  waitGroupSettled,
  waitRolledOut,
  ZONES,
} from '../support/rollout-group.ts';
import { grafanaRolloutOperatorChart, GRAFANA_CHART } from '../tools/grafana-chart.ts';
import { helm } from '../tools/helm.ts';

const exec = promisify(execFile);
const NODE = fileURLToPath(new URL('../../node_modules/.bin/node', import.meta.url));
const STATEWARD = fileURLToPath(new URL('../../bin/stateward.ts', import.meta.url));
const log = (line: string) => process.stderr.write(`# [grafana chart] ${line}\n`);

async function run(file: string, args: string[]): Promise<{ ok: boolean; out: string; stdout: string }> {
  try {
    const { stdout, stderr } = await exec(file, args, { maxBuffer: 16 * 1024 * 1024 });
    return { ok: true, out: stdout + stderr, stdout };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}`, stdout: e.stdout ?? '' };
  }
}

describe(
  `grafana's rollout-operator chart ${GRAFANA_CHART.chartVersion} with Stateward's image, on a real node`,
  { timeout: 60 * 60_000 },
  () => {
    const namespace = `grafana-chart-${process.pid}`;
    let cluster: LocalCluster | undefined;
    let image: BuiltImage;
    let chart: string;
    let scratch: string;

    before(
      async () => {
        // Fetched first: when no registry serves the chart, say so before building anything.
        chart = await grafanaRolloutOperatorChart(log);
        image = await ensureStatewardImage({ log });
        scratch = await mkdtemp(join(tmpdir(), 'stateward-grafana-chart-'));
        await writeFile(join(scratch, 'audit-policy.yaml'), AUDIT_POLICY);
        cluster = await LocalCluster.start({
          name: `grafana-chart-${process.pid}`,
          nodesPerZone: 1,
          realNode: true,
          realNodeImages: [image.archive],
          log,
          extraArgs: {
            apiserver: [
              `--audit-policy-file=${join(scratch, 'audit-policy.yaml')}`,
              `--audit-log-path=${join(scratch, 'audit.log')}`,
              '--audit-log-format=json',
              '--audit-log-maxsize=0',
            ],
          },
        });
      },
      { timeout: 40 * 60_000 },
    );

    after(async () => {
      await cluster?.teardown();
      if (scratch) await rm(scratch, { recursive: true, force: true });
    });

    it('rolls zone by zone, answers every webhook, repeats no refused request, and doctor names the missing permissions', async () => {
      assert.ok(cluster);
      const kubeconfig = cluster.kubeconfigPath;
      const kubectl = (...args: string[]) => run('kubectl', ['--kubeconfig', kubeconfig, ...args]);
      const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 15_000 });
      const [registry, ...rest] = image.name.split('/');
      const [repository, tag] = rest.join('/').split(/:(?=[^:]+$)/) as [string, string];
      // The operator's first request comes after this: the window refusals are counted over.
      const started = Date.now();
      const installed = await helm(
        '--kubeconfig',
        kubeconfig,
        'install',
        'rollout-operator',
        chart,
        '-n',
        namespace,
        '--create-namespace',
        // Only the image and the node placement.
        '--set',
        `image.registry=${registry}`,
        '--set',
        `image.repository=${repository}`,
        '--set',
        `image.tag=${tag}`,
        '--set',
        'image.pullPolicy=Never',
        '--set-json',
        `nodeSelector=${JSON.stringify(REAL_NODE.labels)}`,
        '--set-json',
        `tolerations=${JSON.stringify([{ key: REAL_NODE.taint.key, operator: 'Exists', effect: REAL_NODE.taint.effect }])}`,
        '--wait',
        '--timeout=3m',
      );
      assert.ok(installed.ok, installed.out);
      const operators = await kube.list<Pod>(resources.pods, {
        namespace,
        labelSelector: 'app.kubernetes.io/name=rollout-operator',
      });
      const pod = operators.items.find(isReady);
      assert.ok(pod, 'the operator pod Ready by the chart’s readiness probe');
      assert.equal(pod.spec?.nodeName, REAL_NODE.name);

      // The chart's webhooks get their CA once the certificate is made and injected.
      await waitFor(
        'the CA injected into every webhook configuration of the chart',
        async () => {
          const got = await kubectl(
            'get',
            'validatingwebhookconfigurations,mutatingwebhookconfigurations',
            '-l',
            `grafana.com/namespace=${namespace}`,
            '-o',
            'jsonpath={range .items[*]}{.webhooks[0].clientConfig.caBundle}{"\\n"}{end}',
          );
          const bundles = got.stdout.split('\n').filter((l) => l !== '');
          return got.ok && bundles.length >= 3 && bundles.every((b) => b.length > 100);
        },
        { timeoutMs: 90_000, intervalMs: 500 },
      );

      // A rollout group, zone by zone, under a zone-aware budget.
      await createGroup(kube, namespace, { all: { replicas: 2, readyDelay: '2s' } });
      await createGroupBudget(kube, namespace);
      await waitGroupSettled(kube, namespace);
      const monitor = new InvariantMonitor(
        kube,
        namespace,
        Object.fromEntries(ZONES.map((z) => [`ingester-zone-${z}`, 1])),
      );
      await monitor.start();
      try {
        for (const zone of ZONES) await changeTemplate(kube, namespace, zone, 'grafana-chart');
        await waitRolledOut(kube, namespace, 240_000);
        assert.deepEqual(monitor.violations, [], monitor.report());
        assert.equal(monitor.maxDisruptedAtOnce, 1, 'one zone disrupted at a time');
      } finally {
        await monitor.stop();
      }

      // pod-eviction: one eviction allowed, a second in another zone refused by the budget, through the Service.
      const pods = (await kube.list<Pod>(resources.pods, { namespace, labelSelector: 'rollout-group=ingester' })).items;
      const inZone = (zone: string) => pods.find((p) => p.metadata?.name?.startsWith(`ingester-zone-${zone}-`))!;
      const first = await waitFor(
        'an eviction answered by the pod-eviction webhook',
        async () => {
          const answer = await evict(kube, namespace, inZone('a').metadata!.name!);
          return answer.message.includes('failed calling webhook') ? undefined : answer;
        },
        { timeoutMs: 30_000, intervalMs: 500 },
      );
      assert.equal(first.code, 201, first.message);
      const second = await evict(kube, namespace, inZone('b').metadata!.name!);
      assert.equal(second.code, 429, second.message);
      assert.match(second.message, /admission webhook "pod-eviction[^"]*" denied the request/);

      // no-downscale: a labelled StatefulSet's scale-down denied through the Service.
      await kube.patch<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-c' }, 'merge', {
        metadata: { labels: { 'grafana.com/no-downscale': 'true' } },
      });
      const denied = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-c', '--replicas=1');
      assert.equal(denied.ok, false, denied.out);
      assert.match(
        denied.out,
        /admission webhook "no-downscale[^"]*" denied the request: downscale of statefulsets\/ingester-zone-c/,
      );

      // prepare-downscale: its pods answer no HTTP (kwok), so the webhook denies, naming the failed call.
      await kube.patch<StatefulSet>(resources.statefulSets, { namespace, name: 'ingester-zone-b' }, 'merge', {
        metadata: {
          labels: { 'grafana.com/prepare-downscale': 'true' },
          annotations: {
            'grafana.com/prepare-downscale-http-path': 'prepare',
            'grafana.com/prepare-downscale-http-port': '8080',
          },
        },
      });
      const prepared = await kubectl('-n', namespace, 'scale', 'statefulset', 'ingester-zone-b', '--replicas=1');
      assert.equal(prepared.ok, false, prepared.out);
      assert.match(prepared.out, /admission webhook "prepare-downscale[^"]*" denied the request/);

      // The certificate Secret deleted: back without a restart (its watch is refused; a get every minute).
      const secret = { namespace, name: 'certificate' };
      const before = await kube.get<KubeObject>(resources.secrets, secret);
      await kube.delete(resources.secrets, secret);
      const back = await waitFor(
        'the certificate Secret issued anew',
        () => kube.get<KubeObject>(resources.secrets, secret).catch(() => undefined),
        { timeoutMs: 150_000, intervalMs: 1_000 },
      );
      assert.notEqual(back.metadata?.uid, before.metadata?.uid);
      const restarted = await kube.get<Pod>(resources.pods, { namespace, name: pod.metadata!.name! });
      assert.equal(restarted.status?.containerStatuses?.[0]?.restartCount, 0, 'no restart');

      // No refused request repeats (the apiserver's own record of the ServiceAccount's requests).
      const refused = await refusedFromAudit(
        join(scratch, 'audit.log'),
        `system:serviceaccount:${namespace}:rollout-operator`,
      );
      log(`refused requests: ${[...refused].map(([k, n]) => `${k} ×${n}`).join(', ')}`);
      assert.ok(refused.size > 0, 'the chart’s Role refused something (else this test proves nothing)');
      assert.deepEqual(repeated(refused, Date.now() - started), [], [...refused].join('\n'));

      // stateward doctor, as a user (the admin kubeconfig), names the missing permissions.
      const doctor = await run(NODE, [STATEWARD, 'doctor', '-n', namespace, '-o', 'json', '-kubeconfig', kubeconfig]);
      const report = JSON.parse(doctor.stdout) as { findings: { code: string; problem: string }[] };
      const missing = report.findings.filter((f) => f.code === 'operator-permission-missing').map((f) => f.problem);
      assert.ok(
        missing.some((p) => /configmaps named stateward-rollout-status/.test(p)),
        missing.join('\n'),
      );
      assert.ok(
        missing.some((p) => /list, watch secrets named certificate/.test(p)),
        missing.join('\n'),
      );
    });
  },
);
