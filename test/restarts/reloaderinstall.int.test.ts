// Reloader's install requires the checksum key Secret and never creates it:
// missing, it fails at once with the command that makes it; present, it is
// read, and nothing is created either way.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/runtime/clock.ts';
import { KubeClient } from '../../src/runtime/kube/client.ts';
import { resources, type Secret } from '../../src/runtime/kube/types.ts';
import { MissingKeySecretError, keySecretCommand, requireKeySecret } from '../../src/restarts/reloaderinstall.ts';
import { testCluster } from '../cluster/testing.ts';

const cluster = testCluster();

describe("Reloader's install: the checksum key Secret", () => {
  it('missing: fails at once naming the command; present: read; never created', async (t) => {
    const namespace = await cluster.namespace(t);
    const kube = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 10_000 });
    const name = 'stateward-config-checksum-key';
    const options = { signal: AbortSignal.timeout(20_000), clock: new FakeClock() };
    await assert.rejects(requireKeySecret(kube, namespace, name, options), (error: unknown) => {
      assert.ok(error instanceof MissingKeySecretError);
      assert.ok(error.message.includes(keySecretCommand(namespace, name)), error.message);
      return true;
    });
    const secrets = await kube.list<Secret>(resources.secrets, { namespace });
    assert.equal(
      secrets.items.some((s) => s.metadata?.name === name),
      false,
      'not created',
    );
    await kube.create<Secret>(resources.secrets, {
      metadata: { name, namespace },
      stringData: { key: 'a'.repeat(64) },
    });
    await requireKeySecret(kube, namespace, name, options);
  });
});
