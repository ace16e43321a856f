// /debug/pprof on the real stateward executable, as an SRE reaches it: on
// with -server.pprof.enabled and only on the plain HTTP port (never on the
// HTTPS webhook port), off (404) without the flag.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { freePorts } from '../../cluster/ports.ts';
import { testCluster } from '../../cluster/testing.ts';
import { OperatorProcess } from '../../support/operator-process.ts';
import { decoded, httpsStatus, sampleTypes } from './profiles.ts';

const cluster = testCluster();

describe('/debug/pprof on the operator', () => {
  it('serves CPU and heap profiles on the plain port with -server.pprof.enabled, and nothing on the webhook port', async (t) => {
    const namespace = await cluster.namespace(t);
    const [tlsPort] = await freePorts(1);
    const operator = await OperatorProcess.start(cluster, namespace, [
      '-server.pprof.enabled',
      '-server-tls.enabled',
      `-server-tls.port=${tlsPort}`,
      '-server-tls.self-signed-cert.dns-name=localhost',
    ]);
    t.after(() => operator.stop());
    await operator.waitReady();
    const url = (path: string) => `http://127.0.0.1:${operator.port}${path}`;

    const [cpu, second] = [fetch(url('/debug/pprof/profile?seconds=1')), fetch(url('/debug/pprof/profile?seconds=1'))];
    const refused = await Promise.race([cpu, second]);
    assert.equal(refused.status, 409, 'a second CPU profile while one is taken');
    const { profile } = await decoded(refused === (await cpu) ? await second : await cpu);
    assert.deepEqual(sampleTypes(profile), ['samples/count', 'cpu/nanoseconds']);
    assert.ok(Number(profile.durationNanos) >= 900e6, `profiled for ${Number(profile.durationNanos) / 1e6} ms`);

    const heap = await decoded(await fetch(url('/debug/pprof/heap')));
    assert.deepEqual(sampleTypes(heap.profile), ['inuse_space/bytes']);
    assert.ok(heap.profile.sample.length > 0, 'the heap profile has no samples');

    assert.equal((await fetch(url('/debug/pprof/profile?seconds=61'))).status, 400);
    for (const path of ['/debug/pprof/', '/debug/pprof/heap', '/debug/pprof/profile?seconds=1'])
      assert.equal(await httpsStatus(tlsPort!, path), 404, `https ${path}`);
  });

  it('serves no /debug/pprof without the flag', async (t) => {
    const namespace = await cluster.namespace(t);
    const operator = await OperatorProcess.start(cluster, namespace);
    t.after(() => operator.stop());
    await operator.waitReady();
    for (const path of ['/debug/pprof/', '/debug/pprof/heap', '/debug/pprof/profile?seconds=1'])
      assert.equal((await operator.get(path))?.status, 404, path);
  });
});
