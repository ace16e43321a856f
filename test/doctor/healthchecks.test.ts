// `stateward doctor` on health gates (issue 36): RolloutHealthChecks that do
// not validate, select nothing or are bound nowhere, StatefulSet annotations
// naming a missing or non-selecting check, query endpoints that did not
// answer; and the command's listing of the checks against a fake API server
// (the CRD missing, the list forbidden) with the endpoint probe injected.
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { diagnose } from '../../src/doctor/checks.ts';
import type { EndpointProbe } from '../../src/doctor/checks/healthchecks.ts';
import type { DoctorInput, Finding } from '../../src/doctor/checks/scope.ts';
import { runDoctor } from '../../src/doctor/cli.ts';
import type { RolloutHealthCheck } from '../../src/rollout/healthcheck/resource.ts';
import type { StatefulSet } from '../../src/runtime/kube/types.ts';

const NS = 'mimir';
const ANNOTATION = 'grafana.com/rollout-health-check';
const URL_ = 'http://mimir-query-frontend.monitoring.svc:8080/prometheus';

function zone(z: string, o: { check?: string | null; labels?: Record<string, string> } = {}): StatefulSet {
  const name = `ingester-zone-${z}`;
  return {
    metadata: {
      name,
      namespace: NS,
      labels: o.labels ?? { 'rollout-group': 'ingester' },
      annotations: o.check === null ? {} : { [ANNOTATION]: o.check ?? 'ingester-health' },
    },
    spec: {
      replicas: 0,
      serviceName: name,
      selector: { matchLabels: { name } },
      updateStrategy: { type: 'OnDelete' },
      template: { metadata: { labels: { name } }, spec: { containers: [{ name: 'i', image: 'grafana/mimir:2' }] } },
    },
  };
}

function healthCheck(spec: Record<string, unknown> = {}, name = 'ingester-health', namespace = NS): RolloutHealthCheck {
  return {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'RolloutHealthCheck',
    metadata: { name, namespace, generation: 1 },
    spec: {
      selector: { matchLabels: { 'rollout-group': 'ingester' } },
      prometheusURL: URL_,
      checks: [
        {
          name: 'write-errors',
          query: 'sum(rate(errors_total{${targetMatchers}}[${range}]))',
          successQuery: '${current} <= bool ${baseline}',
        },
      ],
      ...spec,
    },
  };
}

function input(o: Partial<DoctorInput> = {}): DoctorInput {
  return {
    now: Date.parse('2026-11-29T12:00:00Z'),
    namespaces: [NS],
    statefulSets: ['a', 'b', 'c'].map((z) => zone(z)),
    pods: [],
    zpdbs: [],
    rolloutHealthChecks: [healthCheck()],
    deployments: [],
    daemonSets: [],
    configMaps: [],
    secrets: [],
    validatingWebhookConfigurations: [],
    mutatingWebhookConfigurations: [],
    ...o,
  };
}

/** The health-gate findings only (the minimal input draws others, e.g. about OnDelete sets nothing rolls). */
function gates(i: DoctorInput): Finding[] {
  return diagnose(i).filter((f) => f.code.startsWith('health-check') || f.object.includes('rollouthealthchecks'));
}

function one(findings: Finding[], code: string, object?: string): Finding {
  const matching = findings.filter((f) => f.code === code && (object === undefined || f.object === object));
  assert.equal(matching.length, 1, `one ${code} expected, got ${JSON.stringify(findings, null, 2)}`);
  return matching[0]!;
}

describe('stateward doctor: health gates', () => {
  it('finds nothing wrong with a valid check that selects and is named by every zone, its endpoint answering', () => {
    const probes: EndpointProbe[] = [{ url: `${URL_}`, outcome: 'answered', status: 200 }];
    assert.deepEqual(gates(input({ healthCheckEndpoints: probes })), []);
    assert.deepEqual(gates(input()), [], 'not probed: nothing said about the endpoint');
  });

  it('reports a check that does not validate as an error, every field problem in one finding', () => {
    const broken = healthCheck({
      checks: [{ name: 'write-errors', query: 'sum(rate(errors_total{${targetMatchers}}[5m]))', successQuery: '1' }],
    });
    const findings = gates(input({ rolloutHealthChecks: [broken] }));
    const f = one(findings, 'health-check-invalid');
    assert.equal(f.severity, 'error');
    assert.equal(f.object, `RolloutHealthCheck ${NS}/ingester-health`);
    assert.match(f.problem, /spec\.checks\[0\]\.query: must contain \$\{range\}/);
    assert.match(f.problem, /spec\.checks\[0\]\.successQuery: must contain \$\{current\}/);
    assert.match(f.problem, /\(ingester-zone-a, ingester-zone-b, ingester-zone-c\) are held at their gate/);
    assert.match(f.fix, /kubectl -n mimir edit rhc\/ingester-health$/);
    assert.deepEqual(
      findings.map((x) => x.code),
      ['health-check-invalid'],
      'the zones name an existing check: not "unknown"',
    );

    const unnamed = gates(input({ rolloutHealthChecks: [broken], statefulSets: [zone('a', { check: null })] }));
    assert.match(one(unnamed, 'health-check-invalid').problem, /the validating webhook refuses it/);
  });

  it('warns about a selector matching no StatefulSet, and about each zone it leaves ungated', () => {
    const findings = gates(
      input({ rolloutHealthChecks: [healthCheck({ selector: { matchLabels: { 'rollout-group': 'ingestr' } } })] }),
    );
    const f = one(findings, 'health-check-selects-nothing');
    assert.equal(f.severity, 'warning');
    assert.match(f.problem, /its selector rollout-group=ingestr matches no StatefulSet in mimir/);
    assert.match(f.fix, /here rollout-group: ingester\): kubectl -n mimir edit rhc\/ingester-health$/);
    const a = one(findings, 'health-check-not-selecting', `StatefulSet ${NS}/ingester-zone-a`);
    assert.equal(a.severity, 'warning');
    assert.match(
      a.problem,
      /RolloutHealthCheck mimir\/ingester-health, named by its grafana\.com\/rollout-health-check annotation, does not select StatefulSet ingester-zone-a .*the rollout proceeds without this gate \(RolloutHealthCheckMisconfigured\)/,
    );
    assert.match(a.fix, /widen the check's selector/);
    assert.equal(findings.filter((x) => x.code === 'health-check-not-selecting').length, 3);
  });

  it('gives the label command when the StatefulSet only lacks a label of the selector', () => {
    const check = healthCheck({ selector: { matchLabels: { 'rollout-group': 'ingester', tier: 'storage' } } });
    const sets = [zone('a', { labels: { 'rollout-group': 'ingester', tier: 'storage' } }), zone('b')];
    const findings = gates(input({ rolloutHealthChecks: [check], statefulSets: sets }));
    const b = one(findings, 'health-check-not-selecting', `StatefulSet ${NS}/ingester-zone-b`);
    assert.match(
      b.fix,
      /^label the StatefulSet \(its pods do not restart\): kubectl -n mimir label statefulset\/ingester-zone-b tier=storage;/,
    );
    assert.match(b.fix, /kubectl -n mimir annotate statefulset\/ingester-zone-b grafana\.com\/rollout-health-check-$/);
    assert.equal(findings.length, 1, JSON.stringify(findings));
  });

  it('warns about a check bound nowhere, with the annotate command for the StatefulSets it selects', () => {
    const sets = ['a', 'b', 'c'].map((z) => zone(z, { check: null }));
    const f = one(gates(input({ statefulSets: sets })), 'health-check-unbound');
    assert.equal(f.severity, 'warning');
    assert.match(
      f.problem,
      /no StatefulSet's grafana\.com\/rollout-health-check annotation names it \(bound nowhere\)/,
    );
    assert.match(
      f.fix,
      /^annotate the StatefulSets it selects: kubectl -n mimir annotate statefulset ingester-zone-a ingester-zone-b ingester-zone-c grafana\.com\/rollout-health-check=ingester-health; or delete it: kubectl -n mimir delete rhc\/ingester-health$/,
    );
    const elsewhere = gates(input({ statefulSets: sets, rolloutHealthChecks: [healthCheck({}, 'other', 'loki')] }));
    assert.deepEqual(elsewhere, [], 'a check outside the diagnosed namespaces is not looked at');
  });

  it('warns about an annotation naming a check that does not exist, suggesting the one that selects it', () => {
    const sets = [zone('a', { check: 'ingester-healht' }), zone('b'), zone('c')];
    const f = one(gates(input({ statefulSets: sets })), 'health-check-unknown');
    assert.equal(f.object, `StatefulSet ${NS}/ingester-zone-a`);
    assert.equal(f.severity, 'warning');
    assert.match(
      f.problem,
      /names RolloutHealthCheck mimir\/ingester-healht, which does not exist: the rollout proceeds without this gate \(RolloutHealthCheckMisconfigured\)$/,
    );
    assert.match(
      f.fix,
      /^name the check that selects it: kubectl -n mimir annotate --overwrite statefulset ingester-zone-a grafana\.com\/rollout-health-check=ingester-health;/,
    );

    const none = gates(input({ rolloutHealthChecks: [] }));
    assert.equal(none.filter((x) => x.code === 'health-check-unknown').length, 3);
    assert.match(
      one(none, 'health-check-unknown', `StatefulSet ${NS}/ingester-zone-b`).fix,
      /^create RolloutHealthCheck ingester-health in mimir \(install its CRD first, .* if kubectl get crd rollouthealthchecks\.rollout-operator\.grafana\.com finds none\), or remove the annotation: kubectl -n mimir annotate statefulset\/ingester-zone-b grafana\.com\/rollout-health-check-$/,
    );
  });

  it('says the checks were skipped when RolloutHealthChecks may not be listed, and calls no annotation unknown', () => {
    const findings = gates(input({ rolloutHealthChecks: [], unreadable: ['rollouthealthchecks'] }));
    assert.deepEqual(
      findings.map((f) => [f.severity, f.code, f.object]),
      [['warning', 'checks-skipped', 'resource rollouthealthchecks']],
    );
    assert.match(findings[0]!.problem, /^cannot list rollouthealthchecks \(forbidden\): RolloutHealthCheck checks/);
  });

  it('warns about an endpoint the doctor could not reach, saying it may resolve only in the cluster', () => {
    const unreachable: EndpointProbe = {
      url: URL_,
      outcome: 'unreachable',
      reason: 'the name x does not resolve (ENOTFOUND)',
    };
    const f = one(gates(input({ healthCheckEndpoints: [unreachable] })), 'health-check-unreachable');
    assert.equal(f.severity, 'warning');
    assert.match(
      f.problem,
      /could not be reached from where doctor runs \(the name x does not resolve \(ENOTFOUND\)\)/,
    );
    assert.match(f.problem, /names such as \*\.svc resolve that may not resolve from a workstation/);
    assert.match(
      f.fix,
      /kubectl -n mimir run rhc-probe --rm -i --restart=Never --image=curlimages\/curl -- curl -sS -m 2 http:\/\/mimir-query-frontend\.monitoring\.svc:8080\/prometheus\/api\/v1\/status\/buildinfo;/,
    );
  });

  it('judges the endpoint answer: untrusted TLS unless the check names a CA, 404 and 5xx; a 401 is fine', () => {
    const httpsUrl = 'https://prometheus.example:9090/';
    const check = healthCheck({ prometheusURL: httpsUrl });
    const untrusted: EndpointProbe = {
      url: httpsUrl,
      outcome: 'untrusted',
      reason: 'its TLS certificate is not trusted (SELF_SIGNED_CERT_IN_CHAIN)',
    };
    const tls = one(
      gates(input({ rolloutHealthChecks: [check], healthCheckEndpoints: [untrusted] })),
      'health-check-unreachable',
    );
    assert.match(tls.fix, /spec\.tlsConfig\.ca/);
    const withCa = healthCheck({
      prometheusURL: httpsUrl,
      tlsConfig: { ca: { configMap: { name: 'ca', key: 'ca.crt' } } },
    });
    assert.deepEqual(gates(input({ rolloutHealthChecks: [withCa], healthCheckEndpoints: [untrusted] })), []);

    const answered = (status: number) =>
      gates(input({ healthCheckEndpoints: [{ url: URL_, outcome: 'answered', status }] }));
    assert.match(one(answered(404), 'health-check-endpoint-error').problem, /answered 404 Not Found/);
    assert.match(one(answered(503), 'health-check-endpoint-error').problem, /answered 503 from where doctor runs/);
    assert.deepEqual(answered(401), []);
  });
});

// ------------------------------------------------------------ the command

type Mode = 'items' | 'no-crd' | 'forbidden';

/** Lists StatefulSets and RolloutHealthChecks; every other list is empty. */
async function fakeApi(mode: () => Mode, checks: RolloutHealthCheck[]) {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const segments = url.pathname.split('/').filter(Boolean);
    const resource = segments.at(-1) ?? '';
    const send = (code: number, body: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (url.pathname === `/api/v1/namespaces/${NS}`) return send(200, { kind: 'Namespace', metadata: { name: NS } });
    if (resource === 'rollouthealthchecks' && mode() === 'no-crd')
      return send(404, {
        kind: 'Status',
        reason: 'NotFound',
        code: 404,
        message: 'the server could not find the requested resource',
      });
    if (resource === 'rollouthealthchecks' && mode() === 'forbidden')
      return send(403, { kind: 'Status', reason: 'Forbidden', code: 403, message: 'rollouthealthchecks is forbidden' });
    const items =
      resource === 'statefulsets'
        ? ['a', 'b', 'c'].map((z) => zone(z))
        : resource === 'rollouthealthchecks'
          ? checks
          : [];
    send(200, { kind: 'List', metadata: {}, items });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const dir = await mkdtemp(join(tmpdir(), 'doctor-rhc-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(
    kubeconfig,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'fake', cluster: { server: `http://127.0.0.1:${(server.address() as AddressInfo).port}` } }],
      users: [{ name: 'me', user: { token: 'x' } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'me', namespace: NS } }],
      'current-context': 'fake',
    }),
  );
  return {
    kubeconfig,
    stop: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('stateward doctor: listing RolloutHealthChecks', () => {
  let mode: Mode = 'items';
  const second = healthCheck({ prometheusURL: URL_ }, 'ingester-latency');
  let api: Awaited<ReturnType<typeof fakeApi>>;
  before(async () => (api = await fakeApi(() => mode, [healthCheck(), second])));
  after(() => api.stop());

  async function doctor(...argv: string[]) {
    const probed: string[] = [];
    let out = '';
    let err = '';
    const code = await runDoctor(['--kubeconfig', api.kubeconfig, '-o', 'json', ...argv], {
      out: (s) => (out += s),
      err: (s) => (err += s),
      env: {},
      probeEndpoint: (url) => {
        probed.push(url.href);
        return Promise.resolve({ url: url.href, outcome: 'unreachable', reason: 'connection refused by x:1' });
      },
    });
    assert.equal(err, '');
    const findings = (JSON.parse(out) as { findings: Finding[] }).findings.filter((f) =>
      /health-check|rollouthealthchecks/.test(`${f.code} ${f.object}`),
    );
    return { code, probed, findings };
  }

  it('probes each endpoint once and reports it, and not at all with -probe-endpoints=false', async () => {
    mode = 'items';
    const probing = await doctor();
    assert.deepEqual(probing.probed, [`${URL_}`]);
    assert.deepEqual(
      probing.findings.map((f) => [f.code, f.object]),
      [
        ['health-check-unreachable', `RolloutHealthCheck ${NS}/ingester-health`],
        ['health-check-unbound', `RolloutHealthCheck ${NS}/ingester-latency`],
        ['health-check-unreachable', `RolloutHealthCheck ${NS}/ingester-latency`],
      ],
    );
    assert.equal(probing.code, 0, 'warnings only');
    const skipped = await doctor('-probe-endpoints=false');
    assert.deepEqual(skipped.probed, []);
    assert.deepEqual(
      skipped.findings.map((f) => f.code),
      ['health-check-unbound'],
    );
  });

  it('takes a missing CRD (404) for no checks: the annotations name checks that do not exist', async () => {
    mode = 'no-crd';
    const { code, probed, findings } = await doctor();
    assert.deepEqual(probed, []);
    assert.deepEqual(
      findings.map((f) => [f.code, f.object]),
      ['a', 'b', 'c'].map((z) => ['health-check-unknown', `StatefulSet ${NS}/ingester-zone-${z}`]),
    );
    assert.equal(code, 0);
  });

  it('says it cannot read RolloutHealthChecks when the list is forbidden (403), and still exits 0', async () => {
    mode = 'forbidden';
    const { code, findings } = await doctor();
    assert.deepEqual(
      findings.map((f) => [f.severity, f.code, f.object]),
      [['warning', 'checks-skipped', 'resource rollouthealthchecks']],
    );
    assert.equal(code, 0);
  });
});
