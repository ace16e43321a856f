import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { apiGroupOfPath, describePath, resourcePath } from '../../../src/runtime/kube/paths.ts';
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
});
