// Parsing a kubeconfig (src/runtime/kube/kubeconfigfile.ts), through the
// KubeConfig it makes: what is read and how, its errors, paths relative to
// the file, and a fuzzer holding the parser to "a KubeConfig or a
// KubeConfigError, never another exception".
import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { parseKubeConfig, type KubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { KubeConfigError } from '../../../src/runtime/kube/kubeconfigfile.ts';
import { params } from '../../fuzz/support.ts';
import { b64, config, failure, kubeconfigFixtures, type Pki } from './kubeconfigsupport.ts';

let dir = '';
let pki: Pki;

before(async () => {
  ({ dir, pki } = await kubeconfigFixtures());
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
