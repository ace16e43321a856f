import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { operatorPermissions } from '../../src/doctor/access.ts';
import { checkOperatorPermissions } from '../../src/doctor/checks/operatorpermissions.ts';
import type { Deployment } from '../../src/doctor/checks/scope.ts';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../src/runtime/kube/errors.ts';

type Attributes = { verb: string; group: string; resource: string; name?: string; namespace?: string };

/** grafana's Helm chart for rollout-operator 0.51.1: its Role, webhook Role and webhook ClusterRole. */
function chartRole({ verb, group, resource, name }: Attributes): boolean {
  const grants: [string, string, string[], string[]?][] = [
    ['', 'pods', ['list', 'get', 'watch', 'delete', 'patch']],
    ['apps', 'statefulsets', ['list', 'get', 'watch', 'patch']],
    ['apps', 'statefulsets', ['update']],
    ['rollout-operator.grafana.com', 'zoneawarepoddisruptionbudgets', ['get', 'list', 'watch']],
    ['rollout-operator.grafana.com', 'replicatemplates', ['get', 'patch']],
    ['', 'secrets', ['update', 'get'], ['certificate']],
    ['', 'secrets', ['create']],
    ['admissionregistration.k8s.io', 'validatingwebhookconfigurations', ['list', 'patch', 'watch']],
    ['admissionregistration.k8s.io', 'mutatingwebhookconfigurations', ['list', 'patch', 'watch']],
  ];
  return grants.some(
    ([g, r, verbs, names]) =>
      g === group && r === resource && verbs.includes(verb) && (!names || (name !== undefined && names.includes(name))),
  );
}

const chartDeployment: Deployment = {
  metadata: { name: 'rollout-operator', namespace: 'ro', labels: { 'app.kubernetes.io/name': 'rollout-operator' } },
  spec: {
    selector: {},
    template: {
      spec: {
        serviceAccountName: 'rollout-operator',
        containers: [
          {
            name: 'rollout-operator',
            args: [
              '-kubernetes.namespace=ro',
              '-zpdb.pod-ready-annotation-patch-timeout=5s',
              '-server-tls.enabled=true',
              '-server-tls.self-signed-cert.secret-name=certificate',
              '-server-tls.self-signed-cert.dns-name=rollout-operator.ro.svc',
            ],
          },
        ],
      },
    },
  },
};

function reviewer(allowed: (a: Attributes) => boolean) {
  const asked: Attributes[] = [];
  const client = {
    create: (_type: unknown, review: { spec: { user: string; resourceAttributes: Attributes } }) => {
      assert.equal(review.spec.user, 'system:serviceaccount:ro:rollout-operator');
      asked.push(review.spec.resourceAttributes);
      return Promise.resolve({ status: { allowed: allowed(review.spec.resourceAttributes) } });
    },
  } as unknown as KubeClient;
  return { client, asked };
}

describe('the operator’s permissions (doctor, issue 34)', () => {
  it('names what grafana’s chart Role lacks: the status ConfigMap, the Secret watch, Events and Leases', async () => {
    const { client, asked } = reviewer(chartRole);
    const [result] = (await operatorPermissions(client, [chartDeployment]))!;
    const missing = result!.missing.map(
      (m) => `${m.verbs.join(',')} ${m.resource}${m.names ? `/${m.names.join(',')}` : ''}`,
    );
    assert.ok(missing.includes('create configmaps'), missing.join('\n'));
    assert.ok(missing.includes('patch configmaps/stateward-rollout-status'), missing.join('\n'));
    assert.ok(missing.includes('list,watch secrets/certificate'), 'the certificate Secret under the chart’s name');
    assert.ok(missing.includes('create,patch events.events.k8s.io'), missing.join('\n'));
    assert.ok(
      missing.some((m) => m.endsWith('leases.coordination.k8s.io')),
      missing.join('\n'),
    );
    assert.ok(!missing.some((m) => m.includes('zone-tracker')), 'no zone tracker without -use-zone-tracker');
    assert.ok(!missing.some((m) => m.startsWith('get,update secrets')), 'what the chart grants is not named');
    assert.ok(asked.some((a) => a.name === 'certificate'));
    const findings = checkOperatorPermissions({ input: { operatorPermissions: [result!] } });
    assert.equal(findings.length, result!.missing.length);
    assert.ok(findings.every((f) => f.severity === 'warning' && f.code === 'operator-permission-missing'));
    assert.match(
      findings.map((f) => f.problem).join('\n'),
      /may not patch configmaps named stateward-rollout-status in namespace ro/,
    );
  });

  it('names nothing when everything is granted, and is skipped when the doctor may not ask', async () => {
    const { client } = reviewer(() => true);
    assert.deepEqual((await operatorPermissions(client, [chartDeployment]))![0]!.missing, []);
    const refusing = {
      create: () =>
        Promise.reject(new KubeApiError({ code: 403, reason: 'Forbidden', message: 'no', method: 'POST', path: '/' })),
    } as unknown as KubeClient;
    assert.equal(await operatorPermissions(refusing, [chartDeployment]), undefined);
  });
});

describe('config restarts’ Namespace cache (doctor)', () => {
  const deployment = (watch: string | undefined): Deployment => {
    const d = structuredClone(chartDeployment);
    d.spec!.template.spec!.containers[0]!.args = [
      '-kubernetes.namespace=ro',
      '-config-restarts.enabled',
      ...(watch !== undefined ? [`-kubernetes.watch-namespaces=${watch}`] : []),
    ];
    return d;
  };
  const asksForNamespaces = async (watch: string | undefined) => {
    const { client, asked } = reviewer(() => true);
    await operatorPermissions(client, [deployment(watch)]);
    return asked.some((a) => a.resource === 'namespaces');
  };

  it('is asked about only where the operator reads Namespaces: cluster-wide', async () => {
    assert.equal(await asksForNamespaces('*'), true);
    assert.equal(await asksForNamespaces(undefined), false, 'its own namespace: Roles only, no Namespace read');
    assert.equal(await asksForNamespaces('team-a,team-b'), false, 'listed namespaces: Roles only, no Namespace read');
  });
});
