// Stateward's kubeconfig model (src/runtime/kube/kubeconfig.ts), without a
// cluster: parsing and its errors, paths relative to the file, every kind of
// authentication, exec credential plugins (tiny shell scripts in a temporary
// directory), token file rotation, the in-cluster configuration, a KubeClient
// over mutual TLS to a local HTTPS server, and a fuzzer holding the parser to
// "a KubeConfig or a KubeConfigError, never another exception".
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TLSSocket } from 'node:tls';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { KubeClient } from '../../../src/runtime/kube/client.ts';
import type { CredentialOptions } from '../../../src/runtime/kube/credentials.ts';
import { inClusterKubeConfig, parseKubeConfig, type KubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { KubeConfigError } from '../../../src/runtime/kube/kubeconfigfile.ts';
import { createCa, issue, type Pem } from '../../cluster/pki.ts';
import { params } from '../../fuzz/support.ts';

const b64 = (text: string) => Buffer.from(text).toString('base64');

/** A kubeconfig with one cluster, one user and one context, as YAML. */
function config(
  user: Record<string, unknown>,
  cluster: Record<string, unknown> = { server: 'https://10.0.0.1:6443' },
  extra: Record<string, unknown> = {},
): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u', namespace: 'ns' } }],
    'current-context': 'ctx',
    ...extra,
  });
}

async function apply(kc: KubeConfig): Promise<HttpsRequestOptions & { headers: Record<string, string> }> {
  const options: HttpsRequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  return options as HttpsRequestOptions & { headers: Record<string, string> };
}

/** The error `f` throws (or rejects with), asserted to be a one-line KubeConfigError. */
async function failure(f: () => unknown): Promise<string> {
  try {
    await f();
  } catch (error) {
    assert.ok(error instanceof KubeConfigError, `a KubeConfigError, not ${String(error)}`);
    assert.doesNotMatch(error.message, /\n/, 'one line');
    return error.message;
  }
  assert.fail('expected a KubeConfigError');
}

/** A clock the test moves: wall and monotonic readings advance together. */
class TestClock {
  wall = Date.parse('2030-01-01T00:00:00Z');
  mono = 1_000;
  now = () => this.wall;
  monotonic = () => this.mono;
  advance(ms: number): void {
    this.wall += ms;
    this.mono += ms;
  }
}

let dir = '';
let pki: { ca: Pem; client: Pem; server: Pem; other: Pem };

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stateward-kubeconfig-'));
  const ca = await createCa('kubeconfig-test-ca');
  pki = {
    ca: ca.pem,
    client: await issue(ca, { subject: 'CN=alice, O=team', usage: 'client' }),
    server: await issue(ca, { subject: 'CN=apiserver', usage: 'server', ipAddresses: ['127.0.0.1'] }),
    other: await issue(ca, { subject: 'CN=exec-user', usage: 'client' }),
  };
});
after(() => rm(dir, { recursive: true, force: true }));

describe('parseKubeConfig', () => {
  it('reads clusters, users, contexts and the current context as kubectl does', () => {
    const kc = parseKubeConfig(
      config(
        { token: 'secret', as: 'bob', 'as-uid': '42' },
        {
          server: 'https://10.0.0.1:6443//',
          'certificate-authority-data': b64('ca'),
          'insecure-skip-tls-verify': false,
          'tls-server-name': 'kubernetes',
        },
      ),
    );
    assert.equal(kc.getCurrentContext(), 'ctx');
    assert.deepEqual(kc.getCurrentContextObject(), { name: 'ctx', cluster: 'c', user: 'u', namespace: 'ns' });
    const cluster = kc.getCurrentCluster()!;
    assert.equal(cluster.server, 'https://10.0.0.1:6443');
    assert.equal(cluster.caData, b64('ca'));
    assert.equal(cluster.tlsServerName, 'kubernetes');
    assert.equal(cluster.skipTLSVerify, false);
    const user = kc.getCurrentUser()!;
    assert.equal(user.token, 'secret');
    assert.equal(user.impersonate, 'bob');
    assert.equal(user.impersonateUid, '42');
    assert.equal(kc.getUser('nobody'), null);
    kc.setCurrentContext('other');
    assert.equal(kc.getCurrentCluster(), null);
  });

  it('reads YAML 1.1 booleans, leaves timestamps and times as strings, and takes an empty file as an empty config', () => {
    const kc = parseKubeConfig(
      'clusters:\n- name: c\n  cluster:\n    server: https://x\n    insecure-skip-tls-verify: yes\n    tls-server-name: 2024-01-01\ncontexts:\n- name: t\n  context: {cluster: c, user: 1:20}\n',
    );
    assert.equal(kc.getCluster('c')?.skipTLSVerify, true);
    assert.equal(kc.getCluster('c')?.tlsServerName, '2024-01-01');
    assert.equal(kc.getContextObject('t')?.user, '1:20');
    const empty = parseKubeConfig('');
    assert.deepEqual([empty.clusters, empty.users, empty.contexts, empty.currentContext], [[], [], [], '']);
  });

  it("resolves relative paths against the file's directory, exec commands only when they are paths", () => {
    const kc = parseKubeConfig(
      config(
        {
          'client-certificate': 'certs/client.crt',
          'client-key': '/abs/client.key',
          tokenFile: 'token',
          exec: { command: './bin/plugin', apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Never' },
        },
        { server: 'https://x', 'certificate-authority': '../ca.crt' },
      ),
      { baseDir: '/etc/kube' },
    );
    assert.equal(kc.getCurrentCluster()?.caFile, '/etc/ca.crt');
    const user = kc.getCurrentUser()!;
    assert.equal(user.certFile, '/etc/kube/certs/client.crt');
    assert.equal(user.keyFile, '/abs/client.key');
    assert.equal(user.tokenFile, '/etc/kube/token');
    assert.equal(user.exec?.command, '/etc/kube/bin/plugin');
    const inPath = parseKubeConfig(
      config({ exec: { command: 'aws', apiVersion: 'client.authentication.k8s.io/v1beta1' } }),
      { baseDir: '/etc/kube' },
    );
    assert.equal(inPath.getCurrentUser()?.exec?.command, 'aws');
    // Without a directory (text that is no file), paths stay as written.
    assert.equal(parseKubeConfig(config({ tokenFile: 'token' })).getCurrentUser()?.tokenFile, 'token');
  });

  it('names what is wrong in a file, in one line', async () => {
    const cases: [string, RegExp][] = [
      ['{ not yaml: [', /at line 1, column \d+/],
      ['a: 1\n---\nb: 2\n', /multiple documents/],
      ['- 1\n- 2\n', /^the file must hold a map, not a list$/],
      ['kind: Pod\n', /^kind is "Pod", not Config$/],
      ['apiVersion: v2\n', /^apiVersion is "v2", not v1$/],
      ['clusters: {name: c}\n', /^the file: clusters must be a list, not a map$/],
      ['clusters: [x]\n', /^clusters\[0\] must be a map, not a string$/],
      ['users: [{user: {token: t}}]\n', /^users\[0\]: name is missing$/],
      ['users: [{name: u}, {name: u}]\n', /^users: the name "u" is used twice$/],
      [config({ 'client-certificate': ['cert.pem'] }), /^user "u": client-certificate must be a string, not a list$/],
      [config({ token: 12345 }), /^user "u": token must be a string, not a number$/],
      [config({ 'client-key-data': 'not base64!' }), /^user "u": client-key-data is not base64$/],
      [config({ exec: { command: 'x', args: [1] } }), /^user "u": exec: args\[0\] must be a string, not a number$/],
      [
        config({}, { server: 'https://x', 'insecure-skip-tls-verify': 'true' }),
        /^cluster "c": insecure-skip-tls-verify must be true or false, not a string$/,
      ],
      ['contexts: [{name: ctx}]\n', /^context "ctx": context is missing$/],
      [
        'contexts: [{name: ctx, context: {cluster: c, namespace: [ns]}}]\n',
        /^context "ctx": namespace must be a string, not a list$/,
      ],
      ['users: [{name: "a\\nb", user: {token: [1]}}]\n', /^user "a\\nb": token must be a string/],
      [
        'a: &a [1, 2]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n',
        /alias/i,
      ],
    ];
    for (const [text, expected] of cases) assert.match(await failure(() => parseKubeConfig(text)), expected, text);
  });
});

describe('confirmUsable', () => {
  const usable = (text: string) => () => parseKubeConfig(text).confirmUsable();

  it('checks only the context in use: broken entries elsewhere do not matter', () => {
    const text = stringify({
      clusters: [
        { name: 'c', cluster: { server: 'https://x' } },
        { name: 'broken', cluster: { 'proxy-url': 'http://proxy' } },
      ],
      users: [
        { name: 'u', user: { token: 't' } },
        { name: 'gcp', user: { 'auth-provider': { name: 'gcp' } } },
      ],
      contexts: [
        { name: 'ctx', context: { cluster: 'c', user: 'u' } },
        { name: 'bad', context: { cluster: 'broken', user: 'gcp' } },
      ],
      'current-context': 'ctx',
    });
    parseKubeConfig(text).confirmUsable();
  });

  it('refuses auth-provider users, naming the user and suggesting an exec plugin', async () => {
    for (const name of ['gcp', 'azure', 'custom']) {
      const message = await failure(usable(config({ 'auth-provider': { name, config: { 'access-token': 'x' } } })));
      assert.match(
        message,
        new RegExp(`^user "u" uses auth-provider "${name}", which Stateward does not support .*exec credential plugin`),
      );
    }
    // The reason is true for each and names the plugin that replaces it; oidc is run (oidc.test.ts), once complete.
    assert.equal(
      await failure(usable(config({ 'auth-provider': { name: 'oidc', config: { 'id-token': 'x' } } }))),
      'user "u": the oidc auth-provider needs client-id',
    );
    assert.match(await failure(usable(config({ 'auth-provider': { name: 'gcp' } }))), /gke-gcloud-auth-plugin/);
    assert.match(await failure(usable(config({ 'auth-provider': { name: 'azure' } }))), /Azure\/kubelogin/);
    assert.match(
      await failure(usable(config({ 'auth-provider': { name: 'custom' } }))),
      /does not support \(it runs no auth-provider plugins\): use an exec credential plugin instead$/,
    );
  });

  it('refuses what Stateward does not support and what kubectl refuses', async () => {
    const cases: [string, RegExp][] = [
      [
        config({}, { server: 'https://x', 'proxy-url': 'socks5://proxy:1080' }),
        /^cluster "c": proxy-url socks5 proxies are not supported \(http and https are\)/,
      ],
      [config({}, { 'certificate-authority-data': b64('ca') }), /^cluster "c" has no server$/],
      [config({}, { server: '10.0.0.1:6443' }), /^cluster "c": server "10.0.0.1:6443" is not an http or https URL$/],
      [
        config({}, { server: 'https://x', 'certificate-authority-data': b64('ca'), 'certificate-authority': '/ca' }),
        /both set/,
      ],
      [
        config({}, { server: 'https://x', 'certificate-authority-data': b64('ca'), 'insecure-skip-tls-verify': true }),
        /insecure-skip-tls-verify cannot both be set/,
      ],
      [config({ token: 't', username: 'a', password: 'b' }), /^user "u" has more than one authentication method/],
      [
        config({ 'client-certificate-data': b64('cert') }),
        /^user "u": a client certificate needs client-key or client-key-data$/,
      ],
      [config({ 'client-key-data': b64('key') }), /^user "u": a client key needs client-certificate/],
      [config({ 'as-groups': ['admins'] }), /^user "u": as-groups needs as \(the user to impersonate\)$/],
      [config({ 'as-uid': '1', 'as-user-extra': { k: ['v'] } }), /^user "u": as-uid, as-user-extra needs as/],
      [config({ as: 'bob', 'as-groups': ['a\nb'] }), /^user "u": as-groups\[0\] contains a line break/],
      [config({ as: 'bob', 'as-user-extra': { k: 'v' } }), /as-user-extra: k must be a list, not a string/],
      [config({ token: 'abc\n' }), /^user "u": token contains a line break or a NUL character$/],
      [
        config({ exec: { apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Never' } }),
        /exec needs a command/,
      ],
      [
        config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1alpha1' } }),
        /exec apiVersion "client.authentication.k8s.io\/v1alpha1" is not supported/,
      ],
      [config({ exec: { command: 'x' } }), /exec apiVersion is missing/],
      [
        config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1' } }),
        /interactiveMode must be set/,
      ],
      [
        config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Always' } }),
        /needs a terminal/,
      ],
      [
        config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1beta1', env: [{ value: 'v' }] } }),
        /env has a variable without a name/,
      ],
      [
        config({ 'client-certificate': '/nonexistent/client.crt', 'client-key': '/nonexistent/client.key' }),
        /^user "u": client-certificate: cannot read \/nonexistent\/client.crt: ENOENT$/,
      ],
      [config({ tokenFile: '/nonexistent/token' }), /^user "u": tokenFile: cannot read \/nonexistent\/token: ENOENT$/],
      [
        stringify({
          clusters: [{ name: 'c', cluster: { server: 'https://x' } }],
          contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'ghost' } }],
          'current-context': 'ctx',
        }),
        /^context "ctx" names user "ghost", which is not defined$/,
      ],
    ];
    for (const [text, expected] of cases) assert.match(await failure(usable(text)), expected, text);
    // v1beta1 defaults interactiveMode to IfAvailable, as client-go does.
    parseKubeConfig(
      config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1beta1' } }),
    ).confirmUsable();
  });

  it('refuses an auth-provider even when nobody called confirmUsable (never silently unauthenticated)', async () => {
    const kc = parseKubeConfig(config({ 'auth-provider': { name: 'gcp' } }));
    assert.match(await failure(() => apply(kc)), /auth-provider "gcp"/);
  });
});

describe('applyToHTTPSOptions', () => {
  it('gives a client certificate, the CA, the server name and no bearer header for certificate users', async () => {
    const kc = parseKubeConfig(
      config(
        { 'client-certificate-data': b64(pki.client.cert), 'client-key-data': b64(pki.client.key) },
        { server: 'https://x', 'certificate-authority-data': b64(pki.ca.cert), 'tls-server-name': 'kubernetes' },
      ),
    );
    kc.confirmUsable();
    const options = await apply(kc);
    assert.equal(String(options.ca), pki.ca.cert);
    assert.equal(String(options.cert), pki.client.cert);
    assert.equal(String(options.key as Buffer), pki.client.key);
    assert.equal(options.servername, 'kubernetes');
    assert.equal(options.rejectUnauthorized, undefined);
    assert.deepEqual(options.headers, {});
  });

  it('reads certificate files relative to the kubeconfig', async () => {
    await writeFile(join(dir, 'ca.crt'), pki.ca.cert);
    await writeFile(join(dir, 'client.crt'), pki.client.cert);
    await writeFile(join(dir, 'client.key'), pki.client.key);
    const kc = parseKubeConfig(
      config(
        { 'client-certificate': 'client.crt', 'client-key': 'client.key' },
        { server: 'https://x', 'certificate-authority': 'ca.crt' },
      ),
      { baseDir: dir },
    );
    kc.confirmUsable();
    const options = await apply(kc);
    assert.equal(String(options.ca), pki.ca.cert);
    assert.equal(String(options.cert), pki.client.cert);
  });

  it('sends a bearer token, basic auth and impersonation headers; skips verification only when asked', async () => {
    assert.deepEqual((await apply(parseKubeConfig(config({ token: 'abc', as: 'bob', 'as-uid': '7' })))).headers, {
      Authorization: 'Bearer abc',
      'Impersonate-User': 'bob',
      'Impersonate-Uid': '7',
    });
    // client-go's transport: a header line per group and per extra value, the extra key percent-encoded.
    const groups = parseKubeConfig(
      config({
        token: 'abc',
        as: 'bob',
        'as-groups': ['devs', 'ops, eu'],
        'as-user-extra': { 'scopes.example.com/Team Name%': ['a', 'b'], reason: ['on call'], none: [] },
      }),
    );
    assert.deepEqual((await apply(groups)).headers, {
      Authorization: 'Bearer abc',
      'Impersonate-User': 'bob',
      'Impersonate-Group': ['devs', 'ops, eu'],
      'Impersonate-Extra-scopes.example.com%2FTeam%20Name%25': ['a', 'b'],
      'Impersonate-Extra-reason': ['on call'],
    });
    assert.deepEqual((await apply(parseKubeConfig(config({ username: 'admin', password: 'pw' })))).headers, {
      Authorization: `Basic ${b64('admin:pw')}`,
    });
    const insecure = await apply(
      parseKubeConfig(config({}, { server: 'https://x', 'insecure-skip-tls-verify': true })),
    );
    assert.equal(insecure.rejectUnauthorized, false);
    assert.deepEqual(insecure.headers, {});
  });

  it('names a certificate or key that TLS cannot use, and never quotes it', async () => {
    const badCa = parseKubeConfig(
      config({ token: 't' }, { server: 'https://x', 'certificate-authority-data': b64('not a certificate') }),
    );
    assert.match(await failure(() => apply(badCa)), /^cluster "c": the certificate authority is not usable/);
    const mismatched = parseKubeConfig(
      config({ 'client-certificate-data': b64(pki.client.cert), 'client-key-data': b64(pki.other.key) }),
    );
    const message = await failure(() => apply(mismatched));
    assert.match(message, /^user "u": the client certificate and key are not usable/);
    assert.ok(!message.includes('PRIVATE KEY'));
  });
});

describe('token files', () => {
  it("re-reads a rotated token after 50 s (client-go's period), at once after a 401, and keeps the last one while the file is unreadable", async () => {
    const clock = new TestClock();
    const token = join(dir, 'rotating-token');
    await writeFile(token, 'first\n');
    const kc = parseKubeConfig(config({ tokenFile: token }), { clock });
    kc.confirmUsable();
    const bearer = async () => (await apply(kc)).headers['Authorization'];
    assert.equal(await bearer(), 'Bearer first');
    await writeFile(token, 'second');
    clock.advance(49_000);
    assert.equal(await bearer(), 'Bearer first', 'cached within the period');
    clock.advance(2_000);
    assert.equal(await bearer(), 'Bearer second', 'rotated token picked up');
    await rm(token);
    clock.advance(60_000);
    assert.equal(await bearer(), 'Bearer second', 'an unreadable file keeps the last token');
    await writeFile(token, 'third');
    assert.equal(await bearer(), 'Bearer third', 'after a failed read the next request reads again');
    await writeFile(token, 'fourth');
    kc.credentialsRejected('Bearer stale');
    assert.equal(await bearer(), 'Bearer third', 'a 401 for another token changes nothing');
    kc.credentialsRejected('Bearer third');
    assert.equal(await bearer(), 'Bearer fourth', 'a 401 for the current token re-reads the file');
  });

  it('re-reads rotated certificate files every minute; a pair caught mid-rotation is read again at the next request', async () => {
    const clock = new TestClock();
    const sub = await mkdtemp(join(dir, 'rotate-'));
    await writeFile(join(sub, 'c.crt'), pki.client.cert);
    await writeFile(join(sub, 'c.key'), pki.client.key);
    const kc = parseKubeConfig(config({ 'client-certificate': 'c.crt', 'client-key': 'c.key' }), {
      baseDir: sub,
      clock,
    });
    assert.equal(String((await apply(kc)).cert as Buffer), pki.client.cert);
    await writeFile(join(sub, 'c.crt'), pki.other.cert);
    clock.advance(30_000);
    assert.equal(String((await apply(kc)).cert as Buffer), pki.client.cert, 'cached within the minute');
    clock.advance(31_000);
    assert.match(await failure(() => apply(kc)), /^user "u": the client certificate and key are not usable/);
    await writeFile(join(sub, 'c.key'), pki.other.key);
    const options = await apply(kc);
    assert.equal(String(options.cert as Buffer), pki.other.cert);
    assert.equal(String(options.key as Buffer), pki.other.key);
  });

  it('an empty token file is an error, unless a token is given too', async () => {
    const token = join(dir, 'empty-token');
    await writeFile(token, '  \n');
    assert.match(
      await failure(() => parseKubeConfig(config({ tokenFile: token })).confirmUsable()),
      /tokenFile .* is empty/,
    );
    assert.equal(
      (await apply(parseKubeConfig(config({ tokenFile: token, token: 'fallback' })))).headers['Authorization'],
      'Bearer fallback',
    );
  });
});

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

describe('exec credential plugins', () => {
  const V1 = 'client.authentication.k8s.io/v1';
  let n = 0;

  /** An executable shell script in the temporary directory. */
  async function script(body: string): Promise<string> {
    const path = join(dir, `plugin-${n++}.sh`);
    await writeFile(path, `#!/bin/sh\n${body}\n`);
    await chmod(path, 0o755);
    return path;
  }

  /** A plugin that counts its runs in a file and answers token "tok-<run>" (plus what `status` adds). */
  async function countingPlugin(
    status = '',
  ): Promise<{ command: string; runs: () => Promise<number>; info: () => Promise<unknown> }> {
    const count = join(dir, `count-${n}`);
    const info = join(dir, `info-${n}`);
    const command = await script(
      `n=$(( $(cat "${count}" 2>/dev/null || echo 0) + 1 )); echo $n > "${count}"\n` +
        `printf '%s' "$KUBERNETES_EXEC_INFO" > "${info}"\n` +
        `printf '{"apiVersion":"${V1}","kind":"ExecCredential","status":{"token":"tok-%s-%s-%s"${status}}}' "$n" "$1" "$GREETING"`,
    );
    return {
      command,
      runs: async () => Number((await readFile(count, 'utf8')).trim()),
      info: async () => JSON.parse(await readFile(info, 'utf8')) as unknown,
    };
  }

  const execUser = (command: string, more: Record<string, unknown> = {}) => ({
    exec: {
      command,
      apiVersion: V1,
      interactiveMode: 'Never',
      args: ['arg'],
      env: [{ name: 'GREETING', value: 'hi' }],
      ...more,
    },
  });

  it('runs the plugin with its args, env and KUBERNETES_EXEC_INFO, and caches the token until it expires', async () => {
    const clock = new TestClock();
    const plugin = await countingPlugin(',"expirationTimestamp":"2030-01-01T00:10:00Z"');
    const kc = parseKubeConfig(
      config(execUser(plugin.command, { provideClusterInfo: true }), {
        server: 'https://10.0.0.1:6443',
        'certificate-authority-data': b64(pki.ca.cert),
      }),
      { clock },
    );
    kc.confirmUsable();
    assert.equal((await apply(kc)).headers['Authorization'], 'Bearer tok-1-arg-hi');
    assert.deepEqual(await plugin.info(), {
      apiVersion: V1,
      kind: 'ExecCredential',
      spec: {
        interactive: false,
        cluster: { server: 'https://10.0.0.1:6443', 'certificate-authority-data': b64(pki.ca.cert) },
      },
    });
    // Concurrent requests share one run; a cached credential runs nothing.
    const all = await Promise.all(Array.from({ length: 5 }, () => apply(kc)));
    assert.deepEqual(new Set(all.map((o) => o.headers['Authorization'])), new Set(['Bearer tok-1-arg-hi']));
    clock.advance(9 * 60_000);
    assert.equal((await apply(kc)).headers['Authorization'], 'Bearer tok-1-arg-hi');
    assert.equal(await plugin.runs(), 1);
    // After expirationTimestamp the plugin runs again.
    clock.advance(61_000);
    assert.equal((await apply(kc)).headers['Authorization'], 'Bearer tok-2-arg-hi');
    assert.equal(await plugin.runs(), 2);
  });

  it('runs once for many concurrent first requests', async () => {
    const plugin = await countingPlugin();
    const kc = parseKubeConfig(config(execUser(plugin.command)));
    const all = await Promise.all(Array.from({ length: 8 }, () => apply(kc)));
    assert.ok(all.every((o) => o.headers['Authorization'] === 'Bearer tok-1-arg-hi'));
    assert.equal(await plugin.runs(), 1);
  });

  it('keeps a credential without expiry until the server rejects it (401), then runs again', async () => {
    const plugin = await countingPlugin();
    const kc = parseKubeConfig(config(execUser(plugin.command)));
    assert.equal((await apply(kc)).headers['Authorization'], 'Bearer tok-1-arg-hi');
    kc.credentialsRejected('Bearer some-older-token');
    assert.equal((await apply(kc)).headers['Authorization'], 'Bearer tok-1-arg-hi');
    kc.credentialsRejected('Bearer tok-1-arg-hi');
    assert.equal((await apply(kc)).headers['Authorization'], 'Bearer tok-2-arg-hi');
  });

  it("resolves a relative command against the kubeconfig's directory", async () => {
    const plugin = await countingPlugin();
    const kc = parseKubeConfig(config(execUser(`./${plugin.command.split('/').at(-1)!}`)), { baseDir: dir });
    assert.equal((await apply(kc)).headers['Authorization'], 'Bearer tok-1-arg-hi');
  });

  it('uses a client certificate and key from the plugin', async () => {
    const credential = JSON.stringify({
      apiVersion: V1,
      kind: 'ExecCredential',
      status: { clientCertificateData: pki.other.cert, clientKeyData: pki.other.key },
    });
    const command = await script(`cat <<'EOF'\n${credential}\nEOF`);
    const kc = parseKubeConfig(config(execUser(command)));
    const options = await apply(kc);
    assert.equal(options.cert, pki.other.cert);
    assert.equal(options.key, pki.other.key);
    assert.equal(options.headers['Authorization'], undefined);
  });

  it('prefers a static token, as client-go does (the plugin never runs)', async () => {
    const plugin = await countingPlugin();
    const kc = parseKubeConfig(config({ token: 'static', ...execUser(plugin.command) }));
    assert.equal((await apply(kc)).headers['Authorization'], 'Bearer static');
    await assert.rejects(plugin.runs());
  });

  it('reports a failing plugin with its exit code and last stderr line, and tries again on the next request', async () => {
    const flag = join(dir, 'fail-once');
    await writeFile(flag, '');
    const command = await script(
      `if [ -e "${flag}" ]; then rm "${flag}"; echo 'token: leaked-secret' ; echo 'error: please run login first' >&2; exit 3; fi\nprintf '{"apiVersion":"${V1}","kind":"ExecCredential","status":{"token":"ok"}}'`,
    );
    const kc = parseKubeConfig(config(execUser(command)));
    const message = await failure(() => apply(kc));
    assert.match(message, /^exec plugin ".*" of user "u" failed with exit code 3: error: please run login first$/);
    assert.ok(!message.includes('leaked-secret'));
    assert.equal((await apply(kc)).headers['Authorization'], 'Bearer ok');
  });

  it('names garbage output without quoting it', async () => {
    const outputs: [string, RegExp][] = [
      ['secret-garbage-not-json', /its output \(\d+ bytes\) is not JSON$/],
      ['[1, 2]', /its output is a list, not an object$/],
      [
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod","status":{"token":"secret-x"}}',
        /its kind is not ExecCredential$/,
      ],
      [
        '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"secret-x"}}',
        /configured to use API version client.authentication.k8s.io\/v1, and the plugin returned client.authentication.k8s.io\/v1beta1$/,
      ],
      [
        '{"apiVersion":"secret token here","kind":"ExecCredential","status":{"token":"secret-x"}}',
        /the plugin returned something else$/,
      ],
      ['{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}', /returned no status$/],
      [
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}',
        /returned neither a token nor a client certificate and key$/,
      ],
      [
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":["secret-x"]}}',
        /status.token is not a string$/,
      ],
      [
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"secret\\nx"}}',
        /status.token contains a line break/,
      ],
      [
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"secret-x"}}',
        /a client certificate or key, not both$/,
      ],
      [
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"secret-x","expirationTimestamp":"tomorrow"}}',
        /not an RFC 3339 time$/,
      ],
      [
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"secret-x","clientKeyData":"secret-y"}}',
        /a client certificate and key that are not usable/,
      ],
    ];
    for (const [output, expected] of outputs) {
      const command = await script(`cat <<'EOF'\n${output}\nEOF`);
      const message = await failure(() => apply(parseKubeConfig(config(execUser(command)))));
      assert.match(message, expected, output);
      assert.ok(!/secret/.test(message), `the message quotes the output: ${message}`);
    }
  });

  it('kills a plugin that does not finish in time, with the processes it started', async () => {
    const pidFile = join(dir, 'sleeper.pid');
    const command = await script(`sleep 30 &\necho $! > "${pidFile}"\nwait`);
    const options: CredentialOptions = { execTimeoutMs: 500 };
    const started = performance.now();
    const message = await failure(() => apply(parseKubeConfig(config(execUser(command)), options)));
    assert.match(message, /did not finish within 0.5 s$/);
    assert.ok(performance.now() - started < 10_000);
    const pid = Number((await readFile(pidFile, 'utf8')).trim());
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 50 && alive(); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(alive(), false, "the plugin's child was killed with it");
  });

  it('stops a plugin that prints too much', async () => {
    const command = await script('yes secret');
    const message = await failure(() => apply(parseKubeConfig(config(execUser(command)), { execOutputLimit: 10_000 })));
    assert.match(message, /printed more than 10000 bytes$/);
  });

  it('names a missing plugin with its install hint on one line', async () => {
    const kc = parseKubeConfig(
      config(execUser('/nonexistent/kubectl-login', { installHint: 'Install it:\n  brew install kubelogin\n' })),
    );
    assert.match(
      await failure(() => apply(kc)),
      /^exec plugin "\/nonexistent\/kubectl-login" of user "u": executable not found: Install it: brew install kubelogin$/,
    );
    const notExecutable = join(dir, 'not-executable');
    await writeFile(notExecutable, '#!/bin/sh\n');
    assert.match(
      await failure(() => apply(parseKubeConfig(config(execUser(notExecutable))))),
      /cannot run it: EACCES$/,
    );
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

// ---------------------------------------------------------------- fuzzing

/** Anything a field might hold instead of what belongs there. */
const wrongValue = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 }),
  fc.dictionary(fc.string({ maxLength: 4 }), fc.string({ maxLength: 4 }), { maxKeys: 2 }),
);
const maybe = <T>(usual: fc.Arbitrary<T>) =>
  fc.option(fc.oneof({ weight: 4, arbitrary: usual }, { weight: 1, arbitrary: wrongValue }), { nil: undefined });
/** File fields name only harmless paths: files of the test's directory, or missing ones. */
const pathValue = fc.constantFrom('ca.crt', 'client.crt', 'client.key', 'missing.pem', 'token-file', '');
// The real CA is read when generating (pki exists by then), not when the module loads.
const base64Value = fc.oneof(
  fc.constant(null).map(() => b64(pki.ca.cert)),
  fc.base64String({ maxLength: 12 }),
  fc.string({ maxLength: 6 }),
);

const clusterArb = fc.record(
  {
    name: maybe(fc.constantFrom('c', 'd')),
    cluster: maybe(
      fc.record(
        {
          server: maybe(fc.constantFrom('https://127.0.0.1:1', 'http://127.0.0.1:1/', 'not a url', '', 'ftp://x')),
          'certificate-authority-data': maybe(base64Value),
          'certificate-authority': maybe(pathValue),
          'insecure-skip-tls-verify': maybe(fc.boolean()),
          'tls-server-name': maybe(fc.string({ maxLength: 6 })),
          'proxy-url': maybe(fc.constant('http://proxy:3128')),
          extensions: maybe(
            fc.array(
              fc.record({ name: maybe(fc.constant('client.authentication.k8s.io/exec')), extension: wrongValue }),
              { maxLength: 1 },
            ),
          ),
        },
        { requiredKeys: [] },
      ),
    ),
  },
  { requiredKeys: [] },
);

const userArb = fc.record(
  {
    name: maybe(fc.constantFrom('u', 'v')),
    user: maybe(
      fc.record(
        {
          token: maybe(fc.string({ maxLength: 8 })),
          tokenFile: maybe(pathValue),
          username: maybe(fc.string({ maxLength: 4 })),
          password: maybe(fc.string({ maxLength: 4 })),
          'client-certificate': maybe(pathValue),
          'client-key': maybe(pathValue),
          'client-certificate-data': maybe(base64Value),
          'client-key-data': maybe(base64Value),
          as: maybe(fc.string({ maxLength: 4 })),
          'as-uid': maybe(fc.string({ maxLength: 4 })),
          'as-groups': maybe(fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 })),
          'auth-provider': maybe(
            fc.record({ name: maybe(fc.constantFrom('gcp', 'oidc')), config: wrongValue }, { requiredKeys: [] }),
          ),
          // Never run: the property only calls applyToHTTPSOptions for users without exec.
          exec: maybe(
            fc.record(
              {
                command: maybe(fc.constantFrom('/nonexistent/never-run', './never-run')),
                apiVersion: maybe(
                  fc.constantFrom('client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1', 'v1'),
                ),
                args: maybe(fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 })),
                env: maybe(
                  fc.array(
                    fc.record(
                      { name: maybe(fc.string({ maxLength: 4 })), value: maybe(fc.string({ maxLength: 4 })) },
                      { requiredKeys: [] },
                    ),
                    { maxLength: 2 },
                  ),
                ),
                interactiveMode: maybe(fc.constantFrom('Never', 'IfAvailable', 'Always', 'Sometimes')),
                provideClusterInfo: maybe(fc.boolean()),
              },
              { requiredKeys: [] },
            ),
          ),
        },
        { requiredKeys: [] },
      ),
    ),
  },
  { requiredKeys: [] },
);

const contextArb = fc.record(
  {
    name: maybe(fc.constantFrom('ctx', 'other')),
    context: maybe(
      fc.record(
        {
          cluster: maybe(fc.constantFrom('c', 'd', 'none')),
          user: maybe(fc.constantFrom('u', 'v', 'none')),
          namespace: maybe(fc.string({ maxLength: 6 })),
        },
        { requiredKeys: [] },
      ),
    ),
  },
  { requiredKeys: [] },
);

const kubeconfigArb = fc.record(
  {
    apiVersion: maybe(fc.constantFrom('v1', 'v2')),
    kind: maybe(fc.constantFrom('Config', 'Pod')),
    clusters: maybe(fc.array(clusterArb, { maxLength: 3 })),
    users: maybe(fc.array(userArb, { maxLength: 3 })),
    contexts: maybe(fc.array(contextArb, { maxLength: 3 })),
    'current-context': maybe(fc.constantFrom('ctx', 'other', '')),
  },
  { requiredKeys: [] },
);

/** Parse, check and (when no plugin could run) build request options: a KubeConfigError or success, nothing else. */
async function exercise(text: string): Promise<void> {
  let kc: KubeConfig;
  try {
    kc = parseKubeConfig(text, { baseDir: dir });
    kc.confirmUsable();
    if (kc.getCurrentUser()?.exec) return;
    await kc.applyToHTTPSOptions({});
  } catch (error) {
    assert.ok(
      error instanceof KubeConfigError,
      `not a KubeConfigError: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`,
    );
    assert.ok(!error.message.includes('\n'), `more than one line: ${error.message}`);
  }
}

describe('fuzz: parseKubeConfig', () => {
  before(async () => {
    await writeFile(join(dir, 'ca.crt'), pki.ca.cert);
    await writeFile(join(dir, 'client.crt'), pki.client.cert);
    await writeFile(join(dir, 'client.key'), pki.client.key);
    await writeFile(join(dir, 'token-file'), 'file-token');
  });

  it('structured kubeconfigs with wrong and missing fields: a KubeConfig or a KubeConfigError', async () => {
    await fc.assert(
      fc.asyncProperty(kubeconfigArb, fc.boolean(), async (doc, json) =>
        exercise(json ? JSON.stringify(doc) : stringify(doc)),
      ),
      params(800, 71),
    );
  });

  it('arbitrary JSON values and YAML-ish text: a KubeConfig or a KubeConfigError', async () => {
    const yamlish = fc
      .array(
        fc.constantFrom(
          'clusters:',
          'users:',
          '- name: c',
          '  cluster:',
          '    server: https://x',
          '  user: {token: t}',
          'contexts: [',
          '{',
          '}',
          ']',
          ' ',
          '\t',
          '&a',
          '*a',
          '!!binary',
          '---',
          '? ',
          ': ',
          '"',
          "'",
          '#',
          '|',
          '>',
          '%YAML 1.1',
          '<<: *a',
          'current-context: ctx',
          '\n',
        ),
        { maxLength: 30 },
      )
      .map((parts) => parts.join(''));
    const text = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.string({ unit: 'binary', maxLength: 100 }),
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc.jsonValue().map((v) => stringify(v)),
      yamlish,
    );
    await fc.assert(fc.asyncProperty(text, exercise), params(1500, 72));
  });
});
