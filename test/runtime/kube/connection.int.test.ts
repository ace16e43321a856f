// The connection policy against the real apiserver (docs/runtime.md, "Which
// cluster"): the operator started with neither -kubernetes.config-file nor
// -kubernetes.api-url, from a KUBECONFIG of two files (the context in one,
// the cluster and user in the other), merged as kubectl merges them; the
// admin's kubeconfig impersonating a user with groups and extra fields, which
// RBAC grants or refuses by the groups sent; API calls through a real
// CONNECT proxy (a cluster's proxy-url, HTTPS_PROXY) and around it (NO_PROXY,
// loopback).
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import { isForbidden } from '../../../src/runtime/kube/errors.ts';
import { KubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import type { User } from '../../../src/runtime/kube/kubeconfigfile.ts';
import { resources, type ConfigMap } from '../../../src/runtime/kube/types.ts';
import { testCluster } from '../../cluster/testing.ts';
import { OperatorProcess } from '../../support/operator-process.ts';
import { connectProxy } from '../../support/connect-proxy.ts';

const cluster = testCluster();

interface AdminKubeconfig {
  clusters: unknown[];
  users: unknown[];
  contexts: { name: string; context: Record<string, unknown> }[];
}

async function tempDir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'stateward-connection-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** The admin's kubeconfig with the cluster's server and proxy-url replaced. */
function adminAt(server: string, proxyUrl?: string): KubeConfig {
  const admin = cluster.kubeConfig();
  return new KubeConfig({
    clusters: admin.getClusters().map((c) => ({ ...c, server, proxyUrl })),
    users: admin.getUsers(),
    contexts: admin.getContexts(),
    currentContext: admin.getCurrentContext(),
  });
}

/** The test cluster's admin, impersonating as the kubeconfig's as, as-uid, as-groups and as-user-extra say. */
function impersonating(impersonation: Partial<User>): KubeClient {
  const admin = cluster.kubeConfig();
  const kubeConfig = new KubeConfig({
    clusters: admin.getClusters(),
    users: admin.getUsers().map((u) => ({ ...u, ...impersonation })),
    contexts: admin.getContexts(),
    currentContext: admin.getCurrentContext(),
  });
  return new KubeClient({ kubeConfig, timeoutMs: 10_000 });
}

const rbac = (resource: string, kind: string) => ({
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  resource,
  kind,
  namespaced: true,
});

describe('connection policy', () => {
  it('connects through a CONNECT proxy: proxy-url, HTTPS_PROXY; NO_PROXY and loopback go direct', async (t) => {
    const namespace = await cluster.namespace(t);
    const proxy = await connectProxy(t);
    const apiserver = new URL(cluster.state.server);
    const list = (kubeConfig: KubeConfig, env: NodeJS.ProcessEnv) =>
      new KubeClient({ kubeConfig, timeoutMs: 10_000, env }).list<ConfigMap>(resources.configMaps, { namespace });

    // proxy-url: every request to the cluster, loopback or not, NO_PROXY or not (client-go's http.ProxyURL);
    // its credentials as Proxy-Authorization.
    const withCredentials = proxy.url.replace('http://', 'http://ops:s%3Acret@');
    await list(adminAt(cluster.state.server, withCredentials), { NO_PROXY: '*' });
    assert.deepEqual(proxy.tunnels, [
      `127.0.0.1:${apiserver.port} Basic ${Buffer.from('ops:s:cret').toString('base64')}`,
    ]);
    // A tunnel the proxy refuses fails the call, naming the proxy and its answer.
    await assert.rejects(
      list(adminAt(`https://refused.example:${apiserver.port}`, proxy.url), {}),
      (e: Error & { reason?: string }) =>
        e.reason === 'NetworkError' &&
        e.message.includes('refused the tunnel to refused.example') &&
        e.message.includes('403'),
    );

    // HTTPS_PROXY: a name only the proxy can reach (one of the serving certificate's names).
    const byName = `https://kubernetes.default.svc:${apiserver.port}`;
    const root = await list(adminAt(byName), { HTTPS_PROXY: proxy.url, NO_PROXY: 'example.com,.cluster.local' });
    assert.ok(Array.isArray(root.items));
    assert.deepEqual(proxy.tunnels.slice(1), [`kubernetes.default.svc:${apiserver.port}`]);
    // …kept alive: a second call reuses the tunnel.
    await list(adminAt(byName), { HTTPS_PROXY: proxy.url });
    assert.equal(proxy.tunnels.length, 3, 'one tunnel per client (each has its own pool)');

    // NO_PROXY naming the domain: direct, so the name does not resolve here, and the proxy saw nothing.
    for (const noProxy of ['.svc', 'default.svc', `kubernetes.default.svc:${apiserver.port}`, '*']) {
      await assert.rejects(
        list(adminAt(byName), { HTTPS_PROXY: proxy.url, NO_PROXY: noProxy }),
        (e: Error & { reason?: string }) => e.reason === 'NetworkError',
        `NO_PROXY=${noProxy} goes direct`,
      );
    }
    // A port that is not the server's does not match.
    await list(adminAt(byName), { HTTPS_PROXY: proxy.url, NO_PROXY: 'kubernetes.default.svc:1' });
    assert.equal(proxy.tunnels.length, 4);
    // Loopback is never proxied from the environment (Go's rule), so the local cluster is reached directly.
    await list(adminAt(cluster.state.server), { HTTPS_PROXY: proxy.url, https_proxy: proxy.url });
    assert.equal(proxy.tunnels.length, 4);
  });

  it('impersonates a user with groups, uid and extra fields, which RBAC grants or refuses by group', async (t) => {
    const namespace = await cluster.namespace(t);
    const admin = new KubeClient({ kubeConfig: cluster.kubeConfig(), timeoutMs: 10_000 });
    const readers = `stateward-readers-${namespace}`;
    await admin.create(rbac('roles', 'Role'), {
      metadata: { name: 'read-configmaps', namespace },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
    });
    await admin.create(rbac('rolebindings', 'RoleBinding'), {
      metadata: { name: 'readers', namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-configmaps' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: readers }],
    });
    await admin.create<ConfigMap>(resources.configMaps, { metadata: { name: 'seen', namespace } });

    const alice = impersonating({
      impersonate: 'alice',
      impersonateUid: 'uid-7',
      impersonateGroups: ['stateward-others', readers],
      impersonateExtra: { 'example.com/team name': ['storage', 'on call'] },
    });
    // Who the apiserver takes the caller for: every header arrived, each group and value on its own.
    const review = await alice.request<{ status: { userInfo: Record<string, unknown> } }>(
      'POST',
      '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } },
    );
    const { userInfo } = review.status;
    assert.equal(userInfo['username'], 'alice');
    assert.equal(userInfo['uid'], 'uid-7');
    assert.deepEqual(
      (userInfo['groups'] as string[]).filter((g) => g !== 'system:authenticated'),
      ['stateward-others', readers],
    );
    assert.deepEqual(userInfo['extra'], { 'example.com/team name': ['storage', 'on call'] });
    const list = await alice.list<ConfigMap>(resources.configMaps, { namespace });
    assert.ok(
      list.items.some((c) => c.metadata?.name === 'seen'),
      'the RoleBinding grants the group',
    );

    const bob = impersonating({ impersonate: 'alice', impersonateGroups: ['stateward-others'] });
    await assert.rejects(bob.list(resources.configMaps, { namespace }), (e) => isForbidden(e), 'no group granted');
    await assert.rejects(
      alice.create(resources.configMaps, { metadata: { name: 'written', namespace } }),
      (e) => isForbidden(e),
      'the Role grants reading only',
    );
  });

  it('runs the operator from a merged two-file KUBECONFIG, without -kubernetes.config-file or -api-url', async (t) => {
    const namespace = await cluster.namespace(t);
    const dir = await tempDir(t);
    const admin = parse(await readFile(cluster.kubeconfigPath, 'utf8')) as AdminKubeconfig;
    // The first file: only contexts (one of them broken, so only -kubernetes.context picks the good one).
    const contexts = join(dir, 'contexts.yaml');
    await writeFile(
      contexts,
      JSON.stringify({
        contexts: [
          { name: 'elsewhere', context: { cluster: 'nowhere', user: 'nobody' } },
          { name: 'mine', context: { ...admin.contexts[0]!.context, namespace } },
        ],
        'current-context': 'elsewhere',
      }),
    );
    // The second: the cluster and the user, and a current-context the first file's overrides.
    const credentials = join(dir, 'credentials.yaml');
    await writeFile(
      credentials,
      JSON.stringify({ clusters: admin.clusters, users: admin.users, 'current-context': 'mine' }),
    );
    const env = { KUBECONFIG: [join(dir, 'absent.yaml'), contexts, credentials].join(delimiter), HOME: dir };
    const broken = await OperatorProcess.start(cluster, namespace, [], { kubeconfigFlags: false, env });
    t.after(() => broken.stop());
    assert.equal((await broken.exited).code, 1, 'the current context of the merged files names no defined cluster');
    assert.match(broken.logs, /KUBECONFIG: context \\"elsewhere\\" names cluster \\"nowhere\\", which is not defined/);

    const operator = await OperatorProcess.start(cluster, namespace, ['-kubernetes.context=mine'], {
      kubeconfigFlags: false,
      env,
    });
    t.after(() => operator.stop());
    await operator.waitReady(60_000);
    assert.doesNotMatch(operator.logs, /level=error/);
  });
});
