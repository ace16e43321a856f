// The command-line tools' listing: pages, metadata lists with "items": null,
// 403 as a part left out, 404 as none for an optional resource, and one
// clear line for anything else.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CliError } from '../../src/cli/clikubeconfig.ts';
import { listAll } from '../../src/cli/list.ts';
import type { KubeClient, ListOptions } from '../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../src/runtime/kube/errors.ts';
import { resources, type KubeObject, type ObjectList, type ResourceType } from '../../src/runtime/kube/types.ts';
import { zpdbResource } from '../../src/drain/zpdb/zpdbresource.ts';

/** A client answering each list call with the next of `answers` (an error is thrown). */
function fakeClient(answers: (ObjectList<KubeObject> | Error)[]): {
  client: KubeClient;
  calls: { type: ResourceType; options: ListOptions }[];
} {
  const calls: { type: ResourceType; options: ListOptions }[] = [];
  const client = {
    serverUrl: 'https://api.example:6443',
    list(type: ResourceType, options: ListOptions = {}): Promise<ObjectList<KubeObject>> {
      calls.push({ type, options });
      const answer = answers.shift();
      if (answer === undefined) return Promise.reject(new Error('no more answers'));
      return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
    },
  };
  return { client: client as unknown as KubeClient, calls };
}

const apiError = (code: number, reason: string, message: string) =>
  new KubeApiError({ code, reason, message, method: 'GET', path: '/x' });
const named = (name: string): KubeObject => ({ metadata: { name } });

describe('listAll', () => {
  it('follows continue tokens, taking "items": null as none', async () => {
    const { client, calls } = fakeClient([
      { metadata: { continue: 'a' }, items: [named('one'), named('two')] },
      { metadata: { continue: 'b' }, items: null as unknown as KubeObject[] },
      { metadata: {}, items: [named('three')] },
    ]);
    const listed = await listAll(client, resources.secrets, {
      namespace: 'mimir',
      metadataOnly: true,
      labelSelector: 'a=b',
    });
    assert.deepEqual(listed, { items: [named('one'), named('two'), named('three')] });
    assert.deepEqual(
      calls.map((c) => c.options.continue),
      [undefined, 'a', 'b'],
    );
    assert.ok(
      calls.every(
        (c) =>
          c.options.namespace === 'mimir' &&
          c.options.metadataOnly === true &&
          c.options.labelSelector === 'a=b' &&
          c.options.limit === 500,
      ),
    );
  });

  it('lists a cluster-scoped resource without the namespace', async () => {
    const { client, calls } = fakeClient([{ metadata: {}, items: [] }]);
    await listAll(client, resources.nodes, { namespace: 'mimir' });
    assert.equal(calls[0]!.options.namespace, undefined);
  });

  it('turns 403 into a message naming the missing permission and what is left out', async () => {
    const inNamespace = await listAll(fakeClient([apiError(403, 'Forbidden', 'no')]).client, resources.leases, {
      namespace: 'mimir',
      without: 'pending evictions are unknown',
    });
    assert.deepEqual(inNamespace, {
      forbidden: true,
      message:
        'forbidden to list leases.coordination.k8s.io in namespace mimir (missing permission: list leases.coordination.k8s.io); pending evictions are unknown',
    });
    const clusterWide = await listAll(fakeClient([apiError(403, 'Forbidden', 'no')]).client, resources.pods);
    assert.deepEqual(clusterWide, {
      forbidden: true,
      message: 'forbidden to list pods cluster-wide (missing permission: list pods)',
    });
  });

  it('takes 404 as none only for an optional resource', async () => {
    const notFound = () =>
      fakeClient([apiError(404, 'NotFound', 'the server could not find the requested resource')]).client;
    assert.deepEqual(await listAll(notFound(), zpdbResource, { namespace: 'mimir', optional: true }), { items: [] });
    await assert.rejects(listAll(notFound(), zpdbResource, { namespace: 'mimir' }), (error: unknown) => {
      assert.ok(error instanceof CliError);
      assert.equal(
        error.message,
        `cannot list zoneawarepoddisruptionbudgets.${zpdbResource.group} in namespace mimir: 404 NotFound: the server could not find the requested resource`,
      );
      return true;
    });
  });

  it('throws one clear line for an unreachable API server or refused credentials', async () => {
    await assert.rejects(
      listAll(fakeClient([apiError(0, 'NetworkError', 'ECONNREFUSED')]).client, resources.pods),
      new CliError('cannot reach the Kubernetes API at https://api.example:6443: NetworkError: ECONNREFUSED'),
    );
    await assert.rejects(
      listAll(fakeClient([apiError(401, 'Unauthorized', 'Unauthorized')]).client, resources.pods),
      new CliError(
        "the Kubernetes API at https://api.example:6443 refused the credentials (401 Unauthorized): check the kubeconfig's user",
      ),
    );
  });
});
