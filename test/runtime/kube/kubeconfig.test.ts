// The KubeConfig a client is given (src/runtime/kube/kubeconfig.ts): the
// in-cluster configuration, and a KubeClient over mutual TLS to a local
// HTTPS server. Parsing, checks, credentials and exec plugins are tested
// beside their modules (kubeconfigfile, kubeconfigvalidation, credentials,
// execplugin .test.ts).
import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import { inClusterKubeConfig, parseKubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { apply, b64, config, kubeconfigFixtures, TestClock, type Pki } from './kubeconfigsupport.ts';

let dir = '';
let pki: Pki;

before(async () => {
  ({ dir, pki } = await kubeconfigFixtures());
});
after(() => rm(dir, { recursive: true, force: true }));

describe('inClusterKubeConfig', () => {
  it('uses the ServiceAccount token (re-read as it rotates), ca.crt and the namespace file', async () => {
    const sa = await mkdtemp(join(dir, 'sa-'));
    await writeFile(join(sa, 'token'), 'sa-token-1');
    await writeFile(join(sa, 'ca.crt'), pki.ca.cert);
    await writeFile(join(sa, 'namespace'), 'mimir\n');
    const clock = new TestClock();
    const kc = inClusterKubeConfig({ server: 'https://10.96.0.1:443', dir: sa }, { clock });
    kc.confirmUsable();
    assert.equal(kc.getCurrentContextObject()?.namespace, 'mimir');
    let options = await apply(kc);
    assert.equal(options.headers['Authorization'], 'Bearer sa-token-1');
    assert.equal(String(options.ca), pki.ca.cert);
    await writeFile(join(sa, 'token'), 'sa-token-2');
    clock.advance(51_000);
    options = await apply(kc);
    assert.equal(options.headers['Authorization'], 'Bearer sa-token-2');
  });

  it("without a usable ca.crt or namespace file: the system's roots and no namespace, as client-go", async () => {
    const sa = await mkdtemp(join(dir, 'sa-'));
    await writeFile(join(sa, 'token'), 't');
    await writeFile(join(sa, 'ca.crt'), '');
    const kc = inClusterKubeConfig({ server: 'https://10.96.0.1:443', dir: sa });
    assert.equal(kc.getCurrentCluster()?.caFile, undefined);
    assert.equal(kc.getCurrentContextObject()?.namespace, undefined);
    assert.equal((await apply(kc)).ca, undefined);
  });
});

describe('KubeClient with a Stateward kubeconfig', () => {
  let server: Server;
  let port = 0;
  const seen: { authorization?: string | undefined; cn?: string | undefined }[] = [];

  before(async () => {
    server = createServer(
      { key: pki.server.key, cert: pki.server.cert, ca: pki.ca.cert, requestCert: true, rejectUnauthorized: false },
      (req, res) => {
        const peer = (req.socket as TLSSocket).getPeerCertificate();
        seen.push({ authorization: req.headers.authorization, cn: String(peer?.subject?.CN) });
        // The first exec token is "revoked": the client must run the plugin again.
        const status = req.headers.authorization === 'Bearer tok-1' ? 401 : 200;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(
          status === 401
            ? JSON.stringify({ kind: 'Status', code: 401, reason: 'Unauthorized', message: 'Unauthorized' })
            : JSON.stringify({ kind: 'APIVersions', versions: ['v1'] }),
        );
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('connects with mutual TLS from a client-certificate kubeconfig, verifying the server', async () => {
    const kc = parseKubeConfig(
      config(
        { 'client-certificate-data': b64(pki.client.cert), 'client-key-data': b64(pki.client.key) },
        { server: `https://127.0.0.1:${port}`, 'certificate-authority-data': b64(pki.ca.cert) },
      ),
    );
    kc.confirmUsable();
    const client = new KubeClient({ kubeConfig: kc, timeoutMs: 10_000 });
    try {
      assert.deepEqual(await client.request('GET', '/api'), { kind: 'APIVersions', versions: ['v1'] });
      assert.deepEqual(seen.at(-1), { authorization: undefined, cn: 'alice' });
    } finally {
      await client.close();
    }
    // Without the CA the server is not trusted.
    const untrusted = new KubeClient({
      kubeConfig: parseKubeConfig(config({ token: 't' }, { server: `https://127.0.0.1:${port}` })),
      timeoutMs: 10_000,
    });
    try {
      await assert.rejects(
        untrusted.request('GET', '/api'),
        (error: Error & { reason?: string }) => error.reason === 'NetworkError',
      );
    } finally {
      await untrusted.close();
    }
  });

  it('runs the exec plugin again when the server answers 401', async () => {
    const count = join(dir, 'client-count');
    const command = join(dir, 'client-plugin.sh');
    await writeFile(
      command,
      `#!/bin/sh\nn=$(( $(cat "${count}" 2>/dev/null || echo 0) + 1 )); echo $n > "${count}"\nprintf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"tok-%s"}}' "$n"\n`,
    );
    await chmod(command, 0o755);
    const kc = parseKubeConfig(
      config(
        { exec: { command, apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Never' } },
        { server: `https://127.0.0.1:${port}`, 'certificate-authority-data': b64(pki.ca.cert) },
      ),
    );
    const client = new KubeClient({ kubeConfig: kc, timeoutMs: 10_000 });
    try {
      await assert.rejects(client.request('GET', '/api'), (error: Error & { code?: number }) => error.code === 401);
      assert.deepEqual(await client.request('GET', '/api'), { kind: 'APIVersions', versions: ['v1'] });
      assert.equal(seen.at(-1)?.authorization, 'Bearer tok-2');
    } finally {
      await client.close();
    }
  });
});
