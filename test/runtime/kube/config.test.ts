import assert from 'node:assert/strict';
import { mkdtemp, mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadKubeConfig } from '../../../src/runtime/kube/config.ts';

const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "https://10.0.0.1:6443" } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: ctx, context: { cluster: c, user: u } }]
current-context: ctx
`;

describe('loadKubeConfig', () => {
  it('overrides the kubeconfig server with -kubernetes.api-url, like client-go', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kc-'));
    await writeFile(join(dir, 'config'), kubeconfig);
    const kc = loadKubeConfig({ configFile: join(dir, 'config'), apiUrl: 'https://127.0.0.1:6443/' });
    assert.equal(kc.getCurrentCluster()?.server, 'https://127.0.0.1:6443');
  });

  it('insists on both flags or neither', () => {
    assert.throws(() => loadKubeConfig({ configFile: '/x', apiUrl: '' }), /must be set together/);
    assert.throws(() => loadKubeConfig({ configFile: '', apiUrl: 'https://x' }), /must be set together/);
  });

  it('explains each way a kubeconfig can be wrong', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kc-'));
    assert.throws(
      () => loadKubeConfig({ configFile: join(dir, 'missing'), apiUrl: 'https://x' }),
      /cannot read it: ENOENT/,
    );
    await writeFile(join(dir, 'bad-context'), kubeconfig.replace('current-context: ctx', 'current-context: nope'));
    assert.throws(
      () => loadKubeConfig({ configFile: join(dir, 'bad-context'), apiUrl: 'https://x' }),
      /current-context "nope" is not defined/,
    );
    await writeFile(join(dir, 'ok'), kubeconfig);
    assert.throws(() => loadKubeConfig({ configFile: join(dir, 'ok'), apiUrl: 'not a url' }), /not a URL/);
    assert.throws(() => loadKubeConfig({ configFile: join(dir, 'ok'), apiUrl: 'ftp://x' }), /must be http or https/);
  });

  it('uses the in-cluster ServiceAccount when neither flag is set', async () => {
    assert.throws(() => loadKubeConfig({ configFile: '', apiUrl: '', env: {} }), /not running in a Kubernetes pod/);
    const root = await mkdtemp(join(tmpdir(), 'sa-'));
    const dir = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
    const env = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
    assert.throws(
      () => loadKubeConfig({ configFile: '', apiUrl: '', env, serviceAccountDir: dir }),
      /no ServiceAccount token/,
    );
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'token'), 'tok');
    await writeFile(join(dir, 'ca.crt'), '');
    const kc = loadKubeConfig({ configFile: '', apiUrl: '', env, serviceAccountDir: dir });
    assert.equal(kc.getCurrentCluster()?.server, 'https://10.96.0.1:443');
  });
});
