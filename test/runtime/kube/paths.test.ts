import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { apiClientMetrics } from '../../../src/runtime/kube/apimetrics.ts';
import { apiGroupOfPath, describePath, permissionOf, resourcePath } from '../../../src/runtime/kube/paths.ts';
import { resources } from '../../../src/runtime/kube/types.ts';

describe('API paths', () => {
  it('builds core, grouped, cluster-scoped and subresource paths', () => {
    assert.equal(resourcePath(resources.pods, { namespace: 'ns' }), '/api/v1/namespaces/ns/pods');
    assert.equal(resourcePath(resources.pods), '/api/v1/pods');
    assert.equal(
      resourcePath(resources.statefulSets, { namespace: 'ns', name: 'ingester-zone-a', subresource: 'status' }),
      '/apis/apps/v1/namespaces/ns/statefulsets/ingester-zone-a/status',
    );
    assert.equal(resourcePath(resources.nodes, { namespace: 'ignored', name: 'n1' }), '/api/v1/nodes/n1');
    assert.equal(
      resourcePath(resources.leases, { namespace: 'a b', name: 'x/y' }),
      '/apis/coordination.k8s.io/v1/namespaces/a%20b/leases/x%2Fy',
    );
    assert.throws(() => resourcePath(resources.pods, { name: 'p' }), /needs a namespace/);
  });

  it('names the API group of a path as rollout-operator buckets it', () => {
    assert.equal(apiGroupOfPath('/api/v1/namespaces/ns/pods'), 'core');
    assert.equal(apiGroupOfPath('/apis/apps/v1/statefulsets?watch=true'), 'apps');
    assert.equal(apiGroupOfPath('/apis'), 'apis');
    assert.equal(apiGroupOfPath('/healthz'), '/healthz');
    assert.equal(apiGroupOfPath('/'), '/');
  });

  it('describes paths for metric labels without names or namespaces', () => {
    assert.equal(
      describePath('/apis/apps/v1/namespaces/ns/statefulsets/x/status'),
      'apps/v1/statefulsets object status subresource',
    );
    assert.equal(describePath('/api/v1/namespaces/ns/pods'), 'core/v1/pods collection');
    assert.equal(describePath('/api/v1/namespaces/ns/pods/p'), 'core/v1/pods object');
    assert.equal(describePath('/api/v1/namespaces/ns'), 'core/v1/namespaces object');
    assert.equal(describePath('/api/v1/nodes?limit=1'), 'core/v1/nodes collection');
    assert.equal(describePath('/version'), '/version');
  });

  it('names the RBAC rule a request needs: verb, API group, resource with subresource, namespace', () => {
    const rule = (verb: string, apiGroup: string, resource: string, namespace = 'ns') => ({
      verb,
      apiGroup,
      resource,
      namespace,
    });
    assert.deepEqual(permissionOf('GET', '/api/v1/namespaces/ns/pods'), rule('list', '', 'pods'));
    assert.deepEqual(permissionOf('GET', '/api/v1/namespaces/ns/pods?watch=1', true), rule('watch', '', 'pods'));
    assert.deepEqual(permissionOf('GET', '/api/v1/namespaces/ns/pods/p-0'), rule('get', '', 'pods'));
    assert.deepEqual(permissionOf('DELETE', '/api/v1/namespaces/ns/pods/p-0'), rule('delete', '', 'pods'));
    assert.deepEqual(permissionOf('DELETE', '/api/v1/namespaces/ns/pods'), rule('deletecollection', '', 'pods'));
    assert.deepEqual(
      permissionOf('PUT', '/apis/apps/v1/namespaces/ns/statefulsets/ingester-zone-a/status'),
      rule('update', 'apps', 'statefulsets/status'),
    );
    assert.deepEqual(
      permissionOf('POST', '/api/v1/namespaces/ns/pods/p-0/eviction'),
      rule('create', '', 'pods/eviction'),
    );
    assert.deepEqual(
      permissionOf('PATCH', '/apis/coordination.k8s.io/v1/namespaces/my%20ns/leases/stateward'),
      rule('patch', 'coordination.k8s.io', 'leases', 'my ns'),
    );
    assert.deepEqual(permissionOf('GET', '/api/v1/nodes'), rule('list', '', 'nodes', ''));
    assert.deepEqual(permissionOf('GET', '/api/v1/namespaces/ns'), rule('get', '', 'namespaces', ''));
    assert.deepEqual(permissionOf('GET', '/apis/apps/v1/statefulsets'), rule('list', 'apps', 'statefulsets', ''));
    for (const path of ['/version', '/api', '/apis/apps', '/healthz'])
      assert.equal(permissionOf('GET', path), undefined);
    assert.equal(permissionOf('OPTIONS', '/api/v1/pods'), undefined);
  });

  it('counts refused requests by that rule, and only refused ones', async () => {
    const registry = new Registry();
    const metrics = apiClientMetrics(registry);
    metrics.observeRequest('PATCH', '/api/v1/namespaces/ns/configmaps/stateward-rollout-status', '403', 0.01);
    metrics.observeRequest('PATCH', '/api/v1/namespaces/ns/configmaps/another', '403', 0.01);
    metrics.observeRequest('GET', '/apis/apps/v1/namespaces/ns/statefulsets', '403', 0.01, true);
    metrics.observeRequest('GET', '/api/v1/namespaces/ns/pods', '200', 0.01);
    metrics.observeRequest('GET', '/api/v1/namespaces/ns/pods', 'error', 0.01);
    const text = await registry.metrics();
    const lines = text.split('\n').filter((l) => l.startsWith('stateward_kubernetes_api_refused_requests_total{'));
    assert.deepEqual(lines.sort(), [
      'stateward_kubernetes_api_refused_requests_total{verb="patch",api_group="",resource="configmaps",namespace="ns"} 2',
      'stateward_kubernetes_api_refused_requests_total{verb="watch",api_group="apps",resource="statefulsets",namespace="ns"} 1',
    ]);
  });
});
