// The command-line tools' kubeconfig loading, kubectl's rule: --kubeconfig,
// else $KUBECONFIG (merged, first wins), else ~/.kube/config, else the
// in-cluster configuration; each problem one clear line.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { CliError, loadCliKubeConfig } from '../../src/cli/clikubeconfig.ts';

interface Spec {
  clusters?: { name: string; server: string; ca?: string }[];
  users?: { name: string; cert?: string }[];
  contexts?: { name: string; cluster?: string; namespace?: string }[];
  current?: string;
}

function kubeconfigText(spec: Spec): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: (spec.clusters ?? [{ name: 'c', server: 'https://c.example:6443' }]).map((c) => ({
      name: c.name,
      cluster: { server: c.server, ...(c.ca ? { 'certificate-authority': c.ca } : {}) },
    })),
    users: (spec.users ?? [{ name: 'me' }]).map((u) => ({
      name: u.name,
      user: u.cert ? { 'client-certificate': u.cert, 'client-key': 'client.key' } : { token: 'x' },
    })),
    contexts: (spec.contexts ?? [{ name: 'main' }]).map((c) => ({
      name: c.name,
      context: { cluster: c.cluster ?? 'c', user: 'me', ...(c.namespace ? { namespace: c.namespace } : {}) },
    })),
    ...(spec.current !== undefined ? { 'current-context': spec.current } : {}),
  });
}

function failure(options: Parameters<typeof loadCliKubeConfig>[0]): string {
  try {
    loadCliKubeConfig(options);
  } catch (error) {
    assert.ok(error instanceof CliError, `a CliError, not ${String(error)}`);
    assert.doesNotMatch(error.message, /\n/, 'one line');
    return error.message;
  }
  assert.fail('expected a CliError');
}

describe('loadCliKubeConfig', () => {
  let dir = '';
  let n = 0;
  const file = async (spec: Spec | string, name = `kubeconfig-${n++}`): Promise<string> => {
    const path = join(dir, name);
    await writeFile(path, typeof spec === 'string' ? spec : kubeconfigText(spec));
    return path;
  };
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stateward-cli-kubeconfig-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("reads --kubeconfig before KUBECONFIG, with the current context's namespace and cert paths relative to the file", async () => {
    // The files must exist: like kubectl, loading checks that the context's files can be read.
    await mkdir(join(dir, 'sub', 'certs'), { recursive: true });
    for (const f of ['certs/ca.crt', 'certs/client.crt', 'client.key']) await writeFile(join(dir, 'sub', f), 'pem');
    const path = await file(
      {
        clusters: [{ name: 'c', server: 'https://explicit:6443', ca: 'certs/ca.crt' }],
        users: [{ name: 'me', cert: 'certs/client.crt' }],
        contexts: [{ name: 'main', namespace: 'mimir' }],
        current: 'main',
      },
      'sub/config',
    );
    const other = await file({ clusters: [{ name: 'c', server: 'https://other:6443' }], current: 'main' });
    const { kubeConfig, namespace } = loadCliKubeConfig({ kubeconfig: path, context: '', env: { KUBECONFIG: other } });
    assert.equal(kubeConfig.getCurrentCluster()?.server, 'https://explicit:6443');
    assert.equal(namespace, 'mimir');
    assert.equal(kubeConfig.getCurrentCluster()?.caFile, join(dir, 'sub', 'certs', 'ca.crt'));
    assert.equal(kubeConfig.getCurrentUser()?.certFile, join(dir, 'sub', 'certs', 'client.crt'));
    assert.equal(kubeConfig.getCurrentUser()?.keyFile, join(dir, 'sub', 'client.key'));
  });

  it('uses "default" when the context names no namespace, and --context to pick another context', async () => {
    const path = await file({ contexts: [{ name: 'main', namespace: 'mimir' }, { name: 'bare' }], current: 'main' });
    assert.equal(loadCliKubeConfig({ kubeconfig: path, context: 'bare', env: {} }).namespace, 'default');
    const picked = loadCliKubeConfig({ kubeconfig: path, context: 'main', env: {} });
    assert.equal(picked.kubeConfig.getCurrentContext(), 'main');
    assert.equal(picked.namespace, 'mimir');
  });

  it('merges the files of KUBECONFIG, the first to name something winning, skipping files that do not exist', async () => {
    const first = await file({
      clusters: [{ name: 'c', server: 'https://first:6443' }],
      contexts: [{ name: 'shared', namespace: 'first' }],
    });
    const second = await file({
      clusters: [
        { name: 'c', server: 'https://second:6443' },
        { name: 'only-second', server: 'https://only-second:6443' },
      ],
      contexts: [
        { name: 'shared', namespace: 'second' },
        { name: 'mine', cluster: 'only-second', namespace: 'mine' },
      ],
      current: 'shared',
    });
    const third = await file({ contexts: [{ name: 'mine', namespace: 'third' }], current: 'mine' });
    const KUBECONFIG = [join(dir, 'absent'), first, '', second, third].join(delimiter);
    const merged = loadCliKubeConfig({ kubeconfig: '', context: '', env: { KUBECONFIG, HOME: dir } });
    // The first file has no current-context: the second's wins over the third's.
    assert.equal(merged.kubeConfig.getCurrentContext(), 'shared');
    assert.equal(merged.namespace, 'first');
    assert.equal(merged.kubeConfig.getCurrentCluster()?.server, 'https://first:6443');
    const mine = loadCliKubeConfig({ kubeconfig: '', context: 'mine', env: { KUBECONFIG } });
    assert.equal(mine.namespace, 'mine');
    assert.equal(mine.kubeConfig.getCurrentCluster()?.server, 'https://only-second:6443');
    assert.equal(
      failure({ kubeconfig: '', context: '', env: { KUBECONFIG: join(dir, 'absent') } }),
      `none of the files in KUBECONFIG exists: ${join(dir, 'absent')}`,
    );
  });

  it('falls back to ~/.kube/config under $HOME', async () => {
    const home = await mkdtemp(join(dir, 'home-'));
    await mkdir(join(home, '.kube'));
    await writeFile(
      join(home, '.kube', 'config'),
      kubeconfigText({
        clusters: [{ name: 'c', server: 'https://home:6443' }],
        contexts: [{ name: 'main', namespace: 'home' }],
        current: 'main',
      }),
    );
    const { kubeConfig, namespace } = loadCliKubeConfig({ kubeconfig: '', context: '', env: { HOME: home } });
    assert.equal(kubeConfig.getCurrentCluster()?.server, 'https://home:6443');
    assert.equal(namespace, 'home');
    // An empty KUBECONFIG is unset.
    assert.equal(
      loadCliKubeConfig({ kubeconfig: '', context: '', env: { HOME: home, KUBECONFIG: '' } }).namespace,
      'home',
    );
  });

  it('names an unknown --context and the contexts there are', async () => {
    const path = await file({ contexts: [{ name: 'main' }, { name: 'bare' }], current: 'main' });
    assert.equal(
      failure({ kubeconfig: path, context: 'prod', env: {} }),
      '--context=prod: no such context in the kubeconfig (main, bare)',
    );
    const empty = await file({ contexts: [] });
    assert.equal(
      failure({ kubeconfig: empty, context: 'prod', env: {} }),
      '--context=prod: no such context in the kubeconfig (it has none)',
    );
  });

  it('asks for --context when there is no current context, and names one that is not defined', async () => {
    const none = await file({ contexts: [{ name: 'main' }] });
    assert.equal(
      failure({ kubeconfig: none, context: '', env: {} }),
      `kubeconfig ${none} has no current-context: pass --context=<name>`,
    );
    const dangling = await file({ contexts: [{ name: 'main' }], current: 'gone' });
    assert.equal(
      failure({ kubeconfig: dangling, context: '', env: {} }),
      `current-context "gone" is not defined in kubeconfig ${dangling}`,
    );
    const noCluster = await file({ contexts: [{ name: 'main', cluster: 'elsewhere' }], current: 'main' });
    assert.equal(
      failure({ kubeconfig: noCluster, context: '', env: {} }),
      `context "main" names cluster "elsewhere", which is not defined in kubeconfig ${noCluster}`,
    );
  });

  it('names a file that cannot be read or is not a kubeconfig', async () => {
    assert.equal(
      failure({ kubeconfig: join(dir, 'absent'), context: '', env: {} }),
      `cannot read kubeconfig ${join(dir, 'absent')}: ENOENT`,
    );
    const malformed = await file('{ not yaml: [');
    assert.ok(
      failure({ kubeconfig: malformed, context: '', env: {} }).startsWith(`${malformed} is not a valid kubeconfig: `),
    );
    // A malformed file among KUBECONFIG's is named too.
    const good = await file({ current: 'main' });
    assert.ok(
      failure({ kubeconfig: '', context: '', env: { KUBECONFIG: [good, malformed].join(delimiter) } }).startsWith(
        `${malformed} is not a valid kubeconfig: `,
      ),
    );
  });

  it('without any kubeconfig file: the in-cluster configuration in a pod, else says how to give one', async () => {
    const home = await mkdtemp(join(dir, 'empty-home-'));
    const pod = { HOME: home, KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
    const serviceAccountDir = await mkdtemp(join(dir, 'serviceaccount-'));
    await writeFile(join(serviceAccountDir, 'token'), 'token');
    await writeFile(join(serviceAccountDir, 'namespace'), 'mimir\n');
    const { kubeConfig, namespace } = loadCliKubeConfig({ kubeconfig: '', context: '', env: pod, serviceAccountDir });
    assert.equal(kubeConfig.getCurrentCluster()?.server, 'https://10.96.0.1:443');
    assert.equal(namespace, 'mimir');
    await rm(join(serviceAccountDir, 'namespace'));
    assert.equal(loadCliKubeConfig({ kubeconfig: '', context: '', env: pod, serviceAccountDir }).namespace, 'default');
    assert.equal(
      failure({ kubeconfig: '', context: 'prod', env: pod, serviceAccountDir }),
      '--context=prod: there is no kubeconfig, only the in-cluster configuration',
    );
    const noToken = await mkdtemp(join(dir, 'serviceaccount-'));
    assert.equal(
      failure({ kubeconfig: '', context: '', env: pod, serviceAccountDir: noToken }),
      `in-cluster configuration: no ServiceAccount token at ${noToken}/token`,
    );
    const expected = 'no kubeconfig found: pass --kubeconfig=<file>, set KUBECONFIG, or create ~/.kube/config';
    assert.equal(failure({ kubeconfig: '', context: '', env: { HOME: home } }), expected);
    // Half of the in-cluster environment is not a pod.
    assert.equal(
      failure({
        kubeconfig: '',
        context: '',
        env: { HOME: home, KUBERNETES_SERVICE_HOST: '10.96.0.1' },
        serviceAccountDir,
      }),
      expected,
    );
  });
});
