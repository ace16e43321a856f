import assert from 'node:assert/strict';
import { mkdtemp, mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadOperatorKubeConfig } from '../../../src/runtime/kube/source.ts';

const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "https://10.0.0.1:6443" } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: ctx, context: { cluster: c, user: u } }]
current-context: ctx
`;

describe('loadOperatorKubeConfig', () => {
  it('overrides the kubeconfig server with -kubernetes.api-url, like client-go', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kc-'));
    await writeFile(join(dir, 'config'), kubeconfig);
    const kc = loadOperatorKubeConfig({ configFile: join(dir, 'config'), apiUrl: 'https://127.0.0.1:6443/' });
    assert.equal(kc.getCurrentCluster()?.server, 'https://127.0.0.1:6443');
  });

  it('takes -kubernetes.config-file alone, the server from the kubeconfig; -kubernetes.api-url alone needs a kubeconfig', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kc-'));
    await writeFile(join(dir, 'config'), kubeconfig);
    const kc = loadOperatorKubeConfig({ configFile: join(dir, 'config'), apiUrl: '', env: {} });
    assert.equal(kc.getCurrentCluster()?.server, 'https://10.0.0.1:6443');
    assert.throws(
      () => loadOperatorKubeConfig({ configFile: '', apiUrl: 'https://x', env: { HOME: dir } }),
      /^KubeConfigError: -kubernetes.api-url=https:\/\/x needs a kubeconfig for its credentials: pass -kubernetes.config-file or set KUBECONFIG$/,
    );
  });

  it('merges the files of KUBECONFIG as kubectl does, and takes -kubernetes.context', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kc-'));
    // The context in one file, its cluster and user in the other.
    await writeFile(
      join(dir, 'contexts'),
      'contexts: [{ name: a, context: { cluster: c, user: u, namespace: ns } }, { name: b, context: { cluster: c } }]\ncurrent-context: a\n',
    );
    await writeFile(join(dir, 'credentials'), kubeconfig);
    const env = { KUBECONFIG: [join(dir, 'absent'), join(dir, 'contexts'), join(dir, 'credentials')].join(':') };
    const kc = loadOperatorKubeConfig({ configFile: '', apiUrl: '', env });
    assert.equal(kc.getCurrentContext(), 'a', 'the first file to name current-context wins');
    assert.equal(kc.getCurrentUser()?.token, 't');
    assert.equal(loadOperatorKubeConfig({ configFile: '', apiUrl: '', context: 'b', env }).getCurrentContext(), 'b');
    assert.throws(
      () => loadOperatorKubeConfig({ configFile: '', apiUrl: '', context: 'zz', env }),
      /^KubeConfigError: KUBECONFIG: -kubernetes.context=zz: no such context in the kubeconfig \(a, b, ctx\)$/,
    );
    // -kubernetes.config-file wins over KUBECONFIG; the api-url replaces the server.
    const own = loadOperatorKubeConfig({ configFile: join(dir, 'credentials'), apiUrl: 'https://127.0.0.2:1', env });
    assert.equal(own.getCurrentContext(), 'ctx');
    assert.equal(own.getCurrentCluster()?.server, 'https://127.0.0.2:1');
    assert.throws(
      () => loadOperatorKubeConfig({ configFile: '', apiUrl: '', env: { KUBECONFIG: join(dir, 'absent') } }),
      /none of the files in KUBECONFIG exists/,
    );
    // Outside a pod, ~/.kube/config; in a pod, the in-cluster configuration comes first (controller-runtime's order).
    await mkdir(join(dir, '.kube'));
    await writeFile(join(dir, '.kube', 'config'), kubeconfig);
    assert.equal(loadOperatorKubeConfig({ configFile: '', apiUrl: '', env: { HOME: dir } }).getCurrentContext(), 'ctx');
    const pod = { HOME: dir, KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
    assert.throws(
      () => loadOperatorKubeConfig({ configFile: '', apiUrl: '', env: pod, serviceAccountDir: join(dir, 'sa') }),
      /no ServiceAccount token/,
    );
  });

  it('explains each way a kubeconfig can be wrong', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kc-'));
    assert.throws(
      () => loadOperatorKubeConfig({ configFile: join(dir, 'missing'), apiUrl: 'https://x' }),
      /^KubeConfigError: -kubernetes.config-file=\S+: cannot read kubeconfig \S+: ENOENT$/,
    );
    await writeFile(join(dir, 'bad-context'), kubeconfig.replace('current-context: ctx', 'current-context: nope'));
    assert.throws(
      () => loadOperatorKubeConfig({ configFile: join(dir, 'bad-context'), apiUrl: 'https://x' }),
      /current-context "nope" is not defined/,
    );
    await writeFile(join(dir, 'ok'), kubeconfig);
    assert.throws(() => loadOperatorKubeConfig({ configFile: join(dir, 'ok'), apiUrl: 'not a url' }), /not a URL/);
    assert.throws(
      () => loadOperatorKubeConfig({ configFile: join(dir, 'ok'), apiUrl: 'ftp://x' }),
      /must be http or https/,
    );
  });

  it('uses the in-cluster ServiceAccount when neither flag is set', async () => {
    assert.throws(
      () => loadOperatorKubeConfig({ configFile: '', apiUrl: '', env: { HOME: '/nonexistent' } }),
      /not running in a Kubernetes pod/,
    );
    const root = await mkdtemp(join(tmpdir(), 'sa-'));
    const dir = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
    const env = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
    assert.throws(
      () => loadOperatorKubeConfig({ configFile: '', apiUrl: '', env, serviceAccountDir: dir }),
      /no ServiceAccount token/,
    );
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'token'), 'tok');
    await writeFile(join(dir, 'ca.crt'), '');
    const kc = loadOperatorKubeConfig({ configFile: '', apiUrl: '', env, serviceAccountDir: dir });
    assert.equal(kc.getCurrentCluster()?.server, 'https://10.96.0.1:443');
  });
});
