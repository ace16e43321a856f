import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { apiClientMetrics } from '../../src/runtime/kube/apimetrics.ts';
import {
  checkOperatorRefusals,
  REPEATED_REFUSALS,
  refusedRequests,
  type OperatorRefusals,
} from '../../src/doctor/checks/operatorrefusals.ts';
import { gatherRefusals } from '../../src/doctor/operatormetrics.ts';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import type { Deployment } from '../../src/doctor/checks/scope.ts';

/** What the operator's own registry exposes after these refusals. */
async function exposition(refused: [method: string, path: string, times: number][]): Promise<string> {
  const registry = new Registry();
  const metrics = apiClientMetrics(registry);
  for (const [method, path, times] of refused)
    for (let i = 0; i < times; i++) metrics.observeRequest(method, path, '403', 0.001);
  metrics.observeRequest('GET', '/api/v1/namespaces/team-a/pods', '200', 0.001);
  return registry.metrics();
}

describe('operator-requests-refused', () => {
  it("reads the operator's refusal counter by rule, summing replicas, ignoring everything else", async () => {
    const page = await exposition([
      ['PUT', '/apis/apps/v1/namespaces/team-a/statefulsets/ingester-zone-a/status', 12],
      ['PATCH', '/api/v1/namespaces/team-a/configmaps/stateward-rollout-status', 1],
    ]);
    assert.deepEqual(refusedRequests(`${page}\n${page}`), [
      { verb: 'update', apiGroup: 'apps', resource: 'statefulsets/status', namespace: 'team-a', count: 24 },
      { verb: 'patch', apiGroup: '', resource: 'configmaps', namespace: 'team-a', count: 2 },
    ]);
    assert.deepEqual(refusedRequests('# nothing\nstateward_kubernetes_api_refused_requests_total{verb="get"} 3\n'), []);
    assert.deepEqual(
      refusedRequests('stateward_kubernetes_api_refused_requests_total{verb="get",resource="a\\"b"} 2 1700000000\n'),
      [{ verb: 'get', apiGroup: '', resource: 'a"b', namespace: '', count: 2 }],
    );
    assert.deepEqual(refusedRequests(await exposition([])), []);
  });

  it('names the rule to add, what Stateward uses it for, and how to check it; repeated refusals are an error', () => {
    const refusals: OperatorRefusals = {
      operator: 'Deployment ops/stateward',
      serviceAccount: 'ops/stateward',
      refused: [
        { verb: 'update', apiGroup: 'apps', resource: 'statefulsets/status', namespace: 'team-a', count: 40 },
        { verb: 'list', apiGroup: '', resource: 'nodes', namespace: '', count: 1 },
      ],
    };
    const findings = checkOperatorRefusals({
      input: { operatorRefusals: { 'ops/stateward': refusals, other: undefined } },
    });
    assert.deepEqual(
      findings.map((f) => [f.severity, f.code, f.object]),
      [
        ['error', 'operator-requests-refused', 'Deployment ops/stateward'],
        ['warning', 'operator-requests-refused', 'Deployment ops/stateward'],
      ],
    );
    const [status, nodes] = findings;
    assert.match(
      status!.problem,
      /refused its requests to update statefulsets\/status \(API group apps\) in namespace team-a 40 times since it started \(stateward_kubernetes_api_refused_requests_total\); it uses this to /,
    );
    assert.equal(
      status!.fix,
      'grant ServiceAccount ops/stateward update statefulsets/status (API group apps) in namespace team-a: add the rule {apiGroups: ["apps"], resources: ["statefulsets/status"], verbs: ["update"]} to a Role in namespace team-a bound to it (deploy/kustomize/rbac/PERMISSIONS.md); then kubectl auth can-i update statefulsets.apps --subresource=status -n team-a --as=system:serviceaccount:ops:stateward says yes',
    );
    assert.match(nodes!.problem, /list nodes cluster-wide 1 time since/);
    assert.match(
      nodes!.fix,
      /to a ClusterRole bound to it .*kubectl auth can-i list nodes --as=system:serviceaccount:ops:stateward/,
    );
    assert.equal(REPEATED_REFUSALS, 10);
    assert.deepEqual(checkOperatorRefusals({ input: {} }), []);
  });

  it('reads a metrics URL as given, and an operator Deployment through the pod proxy', async () => {
    const page = await exposition([['DELETE', '/api/v1/namespaces/team-a/pods/p-0', 3]]);
    const unused = {} as KubeClient;
    const viaUrl = await gatherRefusals(unused, [], {
      url: 'http://127.0.0.1:9/metrics',
      fetch: () => Promise.resolve(page),
    });
    assert.deepEqual(viaUrl.refusals['http://127.0.0.1:9/metrics'], {
      operator: "the operator's metrics at http://127.0.0.1:9/metrics",
      refused: [{ verb: 'delete', apiGroup: '', resource: 'pods', namespace: 'team-a', count: 3 }],
    });
    const unreachable = await gatherRefusals(unused, [], {
      url: 'http://127.0.0.1:9/metrics',
      fetch: () => Promise.reject(new Error('refused')),
    });
    assert.deepEqual(unreachable.refusals, { 'http://127.0.0.1:9/metrics': undefined });

    const operator: Deployment = {
      metadata: { name: 'stateward', namespace: 'ops' },
      spec: {
        selector: { matchLabels: { name: 'stateward' } },
        template: {
          spec: { serviceAccountName: 'stateward', containers: [{ name: 'stateward', args: ['-server.port=9000'] }] },
        },
      },
    };
    const asked: string[] = [];
    const client = {
      list: (_type: unknown, options: { labelSelector?: string }) => {
        asked.push(`list ${options.labelSelector}`);
        return Promise.resolve({
          items: [
            { metadata: { name: 'stateward-1' }, status: { phase: 'Running' } },
            { metadata: { name: 'stateward-2' }, status: { phase: 'Running' } },
            { metadata: { name: 'stateward-3' }, status: { phase: 'Pending' } },
          ],
        });
      },
      request: (_method: string, path: string) => {
        asked.push(path);
        return Promise.resolve(page);
      },
    } as unknown as KubeClient;
    const viaProxy = await gatherRefusals(client, [operator]);
    assert.deepEqual(asked.sort(), [
      '/api/v1/namespaces/ops/pods/stateward-1:9000/proxy/metrics',
      '/api/v1/namespaces/ops/pods/stateward-2:9000/proxy/metrics',
      'list name=stateward',
    ]);
    assert.deepEqual(viaProxy, {
      forbidden: false,
      refusals: {
        'ops/stateward': {
          operator: 'Deployment ops/stateward',
          serviceAccount: 'ops/stateward',
          refused: [{ verb: 'delete', apiGroup: '', resource: 'pods', namespace: 'team-a', count: 6 }],
        },
      },
    });
  });
});
