// The reschedule handler with several profiles, over a recording client: the
// profile that selects a pod judges it (its annotation, its text), and pods
// no profile takes cost no API call beyond the pod cache.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import type { AdmissionRequestV1 } from '../../../src/runtime/admission/admission.ts';
import type { KubeClient } from '../../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../../src/runtime/kube/errors.ts';
import type { Pod } from '../../../src/runtime/kube/types.ts';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { nopLogger } from '../../../src/runtime/log/logger.ts';
import { parseRescheduleConfig, type RescheduleConfig } from '../../../src/drain/reschedule/rescheduleconfig.ts';
import { strimziProfileInput } from '../../../src/drain/reschedule/profiles.ts';
import { rescheduleHandler } from '../../../src/drain/reschedule/webhook.ts';
import { fakeInformer } from '../../fuzz/support.ts';

function profile(input: Parameters<typeof parseRescheduleConfig>[0]): RescheduleConfig {
  const parsed = parseRescheduleConfig(input);
  assert.ok(parsed.ok);
  return parsed.config;
}

const strimziInput = strimziProfileInput({
  denyEviction: true,
  drainKafka: true,
  drainZooKeeper: true,
  namespaces: 'kafka,db',
  denyCode: 429,
});
assert.ok(strimziInput.ok);
const COUCHBASE = profile({ namespaces: 'db' });
const STRIMZI = profile(strimziInput.ok ? strimziInput.input : {});

const pod = (namespace: string, name: string, labels: Record<string, string>): Pod => ({
  metadata: { namespace, name, uid: `uid-${name}`, labels },
  spec: { containers: [], nodeName: 'node-a' },
});
const PODS = [
  pod('db', 'cb-0000', { app: 'couchbase' }),
  pod('db', 'my-cluster-kafka-0', { 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-cluster-kafka' }),
  pod('db', 'my-kafka-exporter-1', { 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-kafka-exporter' }),
  pod('other', 'cb-0000', { app: 'couchbase' }),
];

/** Records every call; ConfigMaps are not found, writes succeed. */
function recordingClient() {
  const calls: { method: string; args: unknown[] }[] = [];
  const client = new Proxy(
    {},
    {
      get: (_t, method) =>
        typeof method !== 'string' || method === 'then'
          ? undefined
          : (...args: unknown[]) => {
              calls.push({ method, args });
              if (method === 'get')
                return Promise.reject(
                  new KubeApiError({ code: 404, reason: 'NotFound', message: 'not found', method: 'GET', path: '/' }),
                );
              return Promise.resolve({});
            },
    },
  ) as unknown as KubeClient;
  return { client, calls };
}

const eviction = (namespace: string, name: string): AdmissionRequestV1 => ({
  uid: 'u',
  operation: 'CREATE',
  resource: { group: '', version: 'v1', resource: 'pods' },
  subResource: 'eviction',
  namespace,
  name,
  object: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace } },
});

describe('reschedule handler with several profiles', () => {
  const setup = () => {
    const { client, calls } = recordingClient();
    const handler = rescheduleHandler({
      client,
      clock: new FakeClock(),
      log: nopLogger,
      registry: new Registry(),
      config: [COUCHBASE, STRIMZI],
      pods: [fakeInformer(PODS)],
    });
    return { handler, calls };
  };
  const signal = AbortSignal.timeout(10_000);
  const podPatches = (calls: { method: string; args: unknown[] }[]) =>
    calls
      .filter((c) => c.method === 'patch' && (c.args[0] as { resource?: string }).resource === 'pods')
      .map((c) => (c.args[3] as { metadata: { annotations: Record<string, string> } }).metadata.annotations);

  it("each selected pod gets its own profile's annotation and answer text", async () => {
    const { handler, calls } = setup();
    const kafka = await handler(eviction('db', 'my-cluster-kafka-0'), signal);
    assert.equal(kafka.status?.code, 429);
    assert.equal(kafka.status?.message, 'The pod will be rolled by the Strimzi Cluster Operator');
    const cb = await handler(eviction('db', 'cb-0000'), signal);
    assert.equal(cb.status?.code, 429);
    assert.equal(cb.status?.message, 'Reschedule annotation added to pod');
    assert.deepEqual(podPatches(calls), [
      { 'strimzi.io/manual-rolling-update': 'true' },
      { 'cao.couchbase.com/reschedule': 'true' },
    ]);
  });

  it('an unselected pod, or one outside every profile namespace, is allowed without an API call', async () => {
    const { handler, calls } = setup();
    assert.equal((await handler(eviction('db', 'my-kafka-exporter-1'), signal)).allowed, true);
    assert.equal((await handler(eviction('other', 'cb-0000'), signal)).allowed, true);
    assert.equal((await handler(eviction('nowhere', 'x'), signal)).allowed, true);
    assert.deepEqual(calls, []);
  });
});
