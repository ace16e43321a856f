import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { AdmissionDecision, AdmissionRequestV1 } from '../../src/runtime/admission/admission.ts';
import { KubeApiError } from '../../src/runtime/kube/errors.ts';
import { noDownscaleHandler } from '../../src/webhooks/nodownscale.ts';
import { replicasOf } from '../../src/vocabulary/replicas.ts';

const never = new AbortController().signal;
const LABEL = 'grafana.com/no-downscale';

type Replicas = number | null | undefined;

function workload(kind: string, replicas: Replicas, labels?: Record<string, string>) {
  const spec: Record<string, unknown> = {};
  if (replicas !== undefined) spec.replicas = replicas;
  return {
    apiVersion: 'apps/v1',
    kind,
    metadata: { name: 'web', namespace: 'ns', ...(labels ? { labels } : {}) },
    spec,
  };
}

function scale(replicas: number) {
  return {
    apiVersion: 'autoscaling/v1',
    kind: 'Scale',
    metadata: { name: 'web', namespace: 'ns' },
    spec: { replicas },
  };
}

function request(
  resource: string,
  oldObject: unknown,
  object: unknown,
  extra: Partial<AdmissionRequestV1> = {},
): AdmissionRequestV1 {
  return {
    uid: 'uid-1',
    resource: { group: 'apps', version: 'v1', resource },
    name: 'web',
    namespace: 'ns',
    operation: 'UPDATE',
    oldObject,
    object,
    ...extra,
  };
}

const resourceOf: Record<string, string> = {
  StatefulSet: 'statefulsets',
  Deployment: 'deployments',
  ReplicaSet: 'replicasets',
};

function denial(resource: string, from: number, to: number) {
  return `downscale of ${resource}/web in ns from ${from} to ${to} replicas is not allowed because it has the label 'grafana.com/no-downscale=true'`;
}

function handler(labels: Record<string, string> | undefined | Error = undefined) {
  const calls: string[][] = [];
  const h = noDownscaleHandler({
    getParentLabels: (resource, namespace, name) => {
      calls.push([resource, namespace, name]);
      return labels instanceof Error ? Promise.reject(labels) : Promise.resolve(labels);
    },
  });
  return { calls, run: (r: AdmissionRequestV1) => Promise.resolve(h(r, never)) };
}

function typed(
  kind: string,
  from: Replicas,
  to: Replicas,
  labels?: Record<string, string>,
  extra?: Partial<AdmissionRequestV1>,
) {
  return request(resourceOf[kind] ?? 'x', workload(kind, from, labels), workload(kind, to, labels), extra);
}

function assertAllowedQuietly(decision: AdmissionDecision) {
  assert.deepEqual(decision, { allowed: true });
}

describe('no-downscale: typed objects', { timeout: 10000 }, () => {
  it('allows an unlabelled StatefulSet downscale', async () => {
    assertAllowedQuietly(await handler().run(typed('StatefulSet', 2, 1)));
  });

  it('denies a labelled StatefulSet update 2→1 with the exact message and no status code, as rollout-operator', async () => {
    const decision = await handler().run(typed('StatefulSet', 2, 1, { [LABEL]: 'true' }));
    assert.deepEqual(decision, { allowed: false, status: { message: denial('statefulsets', 2, 1) } });
  });

  it('denies a dry-run downscale too', async () => {
    const decision = await handler().run(typed('StatefulSet', 2, 1, { [LABEL]: 'true' }, { dryRun: true }));
    assert.equal(decision.allowed, false);
    assert.equal(decision.status?.message, denial('statefulsets', 2, 1));
  });

  it('allows upscale 2→3 and an unchanged count of a labelled StatefulSet', async () => {
    assertAllowedQuietly(await handler().run(typed('StatefulSet', 2, 3, { [LABEL]: 'true' })));
    assertAllowedQuietly(await handler().run(typed('StatefulSet', 2, 2, { [LABEL]: 'true' })));
  });

  it('reads the label from the old object, not the new one', async () => {
    const removing = request(
      'statefulsets',
      workload('StatefulSet', 3, { [LABEL]: 'true' }),
      workload('StatefulSet', 1),
    );
    assert.equal((await handler().run(removing)).allowed, false);
    const adding = request('statefulsets', workload('StatefulSet', 3), workload('StatefulSet', 1, { [LABEL]: 'true' }));
    assertAllowedQuietly(await handler().run(adding));
  });

  it('allows when the label value is not exactly "true"', async () => {
    for (const value of ['True', 'yes', 'TRUE', '', 'true ']) {
      assertAllowedQuietly(await handler().run(typed('StatefulSet', 2, 1, { [LABEL]: value })));
    }
  });

  it('denies labelled Deployment and ReplicaSet downscales with their resource in the message', async () => {
    const deployment = await handler().run(typed('Deployment', 5, 0, { [LABEL]: 'true' }));
    assert.equal(deployment.allowed, false);
    assert.equal(deployment.status?.message, denial('deployments', 5, 0));
    const replicaSet = await handler().run(typed('ReplicaSet', 4, 3, { [LABEL]: 'true' }));
    assert.equal(replicaSet.status?.message, denial('replicasets', 4, 3));
    assertAllowedQuietly(await handler().run(typed('Deployment', 5, 0)));
  });

  it('handles nil replicas: both nil allowed quietly, one nil allowed with a warning', async () => {
    const labels = { [LABEL]: 'true' };
    assertAllowedQuietly(await handler().run(typed('StatefulSet', undefined, undefined, labels)));
    assertAllowedQuietly(await handler().run(typed('StatefulSet', null, undefined, labels)));
    for (const [from, to] of [
      [undefined, 1],
      [3, undefined],
      [null, 1],
      [3, null],
    ] as [Replicas, Replicas][]) {
      assert.deepEqual(await handler().run(typed('StatefulSet', from, to, labels)), {
        allowed: true,
        warnings: ['old/new replicas is nil, allowing the change'],
      });
    }
  });

  it('allows an unsupported kind with a warning', async () => {
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web' } };
    const decision = await handler().run(request('pods', pod, pod));
    assert.equal(decision.allowed, true);
    assert.deepEqual(decision.warnings, [
      "can't get old replicas, allowing the change, err: unsupported type /v1, Kind=Pod",
    ]);
    const newOnly = await handler().run(
      request('statefulsets', workload('StatefulSet', 2), { apiVersion: 'apps/v1', kind: 'DaemonSet' }),
    );
    assert.deepEqual(newOnly.warnings, [
      "can't get new replicas, allowing the change, err: unsupported type apps/v1, Kind=DaemonSet",
    ]);
  });

  it('allows undecodable objects with a warning', async () => {
    const missingOld = await handler().run(request('statefulsets', undefined, workload('StatefulSet', 1)));
    assert.equal(missingOld.allowed, true);
    assert.match(missingOld.warnings?.[0] ?? '', /^can't decode old object, allowing the change, err: /);
    const noKind = await handler().run(request('statefulsets', workload('StatefulSet', 2), { apiVersion: 'apps/v1' }));
    assert.deepEqual(noKind.warnings, ["can't decode new object, allowing the change, err: Object 'Kind' is missing"]);
    const badReplicas = await handler().run(
      request('statefulsets', workload('StatefulSet', 2), { ...workload('StatefulSet', 1), spec: { replicas: '1' } }),
    );
    assert.equal(badReplicas.allowed, true);
    assert.match(badReplicas.warnings?.[0] ?? '', /^can't get new replicas, allowing the change, err: /);
  });
});

describe('no-downscale: /scale', { timeout: 10000 }, () => {
  it('denies a downscale of a labelled StatefulSet through Scale objects, using the parent labels', async () => {
    const { calls, run } = handler({ [LABEL]: 'true' });
    const decision = await run(request('statefulsets', scale(3), scale(2), { subResource: 'scale' }));
    assert.deepEqual(decision, { allowed: false, status: { message: denial('statefulsets', 3, 2) } });
    assert.deepEqual(calls, [['statefulsets', 'ns', 'web']]);
  });

  it('allows when the parent is unlabelled, or has no labels at all', async () => {
    assertAllowedQuietly(
      await handler({ other: 'x' }).run(request('statefulsets', scale(3), scale(2), { subResource: 'scale' })),
    );
    assertAllowedQuietly(
      await handler(undefined).run(request('statefulsets', scale(3), scale(2), { subResource: 'scale' })),
    );
  });

  it('does not look the parent up unless it is a downscale', async () => {
    const { calls, run } = handler({ [LABEL]: 'true' });
    assertAllowedQuietly(await run(request('statefulsets', scale(2), scale(3), { subResource: 'scale' })));
    assert.deepEqual(calls, []);
  });

  it('allows with a "can\'t get" warning when the parent does not exist', async () => {
    const notFound = new KubeApiError({
      code: 404,
      reason: 'NotFound',
      message: 'statefulsets.apps "web" not found',
      method: 'GET',
      path: '/apis/apps/v1/namespaces/ns/statefulsets/web',
    });
    const decision = await handler(notFound).run(request('statefulsets', scale(3), scale(2), { subResource: 'scale' }));
    assert.deepEqual(decision, {
      allowed: true,
      warnings: [`can't get statefulsets/web in namespace ns, allowing the change: ${notFound.message}`],
    });
  });

  it('allows with a "can\'t get" warning when not permitted to read the parent (rollout-operator\'s Role grants nothing on Deployments)', async () => {
    const forbidden = new KubeApiError({
      code: 403,
      reason: 'Forbidden',
      message: 'deployments.apps "web" is forbidden',
      method: 'GET',
      path: '/apis/apps/v1/namespaces/ns/deployments/web',
    });
    const decision = await handler(forbidden).run(request('deployments', scale(3), scale(2), { subResource: 'scale' }));
    assert.equal(decision.allowed, true);
    assert.match(
      decision.warnings?.[0] ?? '',
      /^can't get deployments\/web in namespace ns, allowing the change: .*forbidden/,
    );
  });

  it('denies, saying to retry, when the parent cannot be read (rollout-operator allows: a throttled read let protected downscales through)', async () => {
    for (const error of [
      new KubeApiError({ code: 0, reason: 'RateLimited', message: 'client rate limit', method: 'GET', path: '/x' }),
      new KubeApiError({ code: 500, reason: 'InternalError', message: 'etcd', method: 'GET', path: '/x' }),
      new Error('connect ECONNREFUSED'),
    ]) {
      const decision = await handler(error).run(request('statefulsets', scale(3), scale(2), { subResource: 'scale' }));
      assert.equal(decision.allowed, false);
      assert.equal(decision.status?.code, 503);
      assert.match(
        decision.status?.message ?? '',
        /^downscale of statefulsets\/web in ns from 3 to 2 replicas is denied because its label 'grafana\.com\/no-downscale' could not be read \(.+\); retry$/,
      );
    }
  });

  it('allows with a "can\'t get" warning for a resource it cannot resolve, without a lookup', async () => {
    const { calls, run } = handler({ [LABEL]: 'true' });
    const decision = await run(request('replicationcontrollers', scale(3), scale(2), { subResource: 'scale' }));
    assert.deepEqual(decision.warnings, [
      "can't get replicationcontrollers/web in namespace ns, allowing the change: unsupported resource replicationcontrollers",
    ]);
    assert.equal(decision.allowed, true);
    assert.deepEqual(calls, []);
  });

  it('treats a Scale without spec.replicas as 0, as Go decodes it', async () => {
    const empty = { apiVersion: 'autoscaling/v1', kind: 'Scale', metadata: { name: 'web' } };
    const decision = await handler({ [LABEL]: 'true' }).run(
      request('statefulsets', scale(1), empty, { subResource: 'scale' }),
    );
    assert.equal(decision.status?.message, denial('statefulsets', 1, 0));
  });
});

describe('replicasOf', { timeout: 10000 }, () => {
  it('reads typed workloads and Scale', () => {
    assert.deepEqual(replicasOf(workload('StatefulSet', 3)), { kind: 'StatefulSet', replicas: 3 });
    assert.deepEqual(replicasOf(workload('Deployment', undefined)), { kind: 'Deployment', replicas: undefined });
    assert.deepEqual(replicasOf(workload('ReplicaSet', null)), { kind: 'ReplicaSet', replicas: null });
    assert.deepEqual(replicasOf({ apiVersion: 'apps/v1', kind: 'StatefulSet' }), {
      kind: 'StatefulSet',
      replicas: undefined,
    });
    assert.deepEqual(replicasOf(scale(4)), { kind: 'Scale', replicas: 4 });
  });

  it('refuses other kinds and versions, and malformed values', () => {
    for (const obj of [
      null,
      'StatefulSet',
      [],
      { kind: 'StatefulSet' },
      { apiVersion: 'apps/v1beta2', kind: 'StatefulSet' },
      { apiVersion: 'extensions/v1beta1', kind: 'Scale' },
      { apiVersion: 'apps/v1', kind: 'StatefulSet', spec: 3 },
      { apiVersion: 'apps/v1', kind: 'StatefulSet', spec: { replicas: 1.5 } },
      { apiVersion: 'apps/v1', kind: 'StatefulSet', spec: { replicas: 2 ** 31 } },
    ]) {
      assert.ok('error' in replicasOf(obj), JSON.stringify(obj));
    }
  });

  it('property: a labelled typed workload is denied exactly when replicas decrease', async () => {
    const count = fc.integer({ min: 0, max: 2 ** 31 - 1 });
    const kind = fc.constantFrom('StatefulSet', 'Deployment', 'ReplicaSet');
    await fc.assert(
      fc.asyncProperty(kind, count, count, async (k, from, to) => {
        const decision = await handler().run(typed(k, from, to, { [LABEL]: 'true' }));
        assert.equal(decision.allowed, !(to < from));
        if (to < from) assert.equal(decision.status?.message, denial(resourceOf[k] ?? '', from, to));
      }),
      { numRuns: 300 },
    );
  });
});
