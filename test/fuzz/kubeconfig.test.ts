// Fuzzing kubeconfig files: random text, random YAML and JSON, and
// mutations of a valid kubeconfig, written to a temporary file and loaded by
// the operator (loadOperatorKubeConfig) and by the client commands
// (loadCliKubeConfig, then `stateward status` and `stateward doctor`).
// Loading answers a KubeConfig or a clear error of the loader's own type
// (KubeConfigError, CliError), never another exception; the commands exit
// with a one-line reason and no stack trace.
//
// Nothing connects anywhere but 127.0.0.1:1 (a port fetch refuses at once):
// the valid kubeconfig names that server, the commands are only run when
// the loaded server is that one (or loading failed), and never with a user
// that could run a command (exec or auth-provider).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { stringify } from 'yaml';
import type { KubeConfig } from '../../src/runtime/kube/kubeconfig.ts';
import { KubeConfigError } from '../../src/runtime/kube/kubeconfigfile.ts';
import { CliError, loadCliKubeConfig } from '../../src/cli/clikubeconfig.ts';
import { loadOperatorKubeConfig } from '../../src/runtime/kube/source.ts';
import { runStatus } from '../../src/status/cli.ts';
import { runDoctor } from '../../src/doctor/cli.ts';
import { jsonBytes, mutated, nastyString, params, settlesWithin } from './support.ts';
import { assertReachingAsync } from '../support/reach.ts';

const SERVER = 'https://127.0.0.1:1';

const validKubeconfig = fc.record({
  apiVersion: fc.constant('v1'),
  kind: fc.constant('Config'),
  clusters: fc.constant([{ name: 'c', cluster: { server: SERVER, 'insecure-skip-tls-verify': true } }]),
  users: fc.constantFrom(
    [{ name: 'u', user: { token: 'abc' } }],
    [{ name: 'u', user: { username: 'a', password: 'b' } }],
    [{ name: 'u', user: { 'client-certificate': 'cert.pem', 'client-key': 'key.pem' } }],
  ),
  contexts: fc.constant([
    { name: 'ctx', context: { cluster: 'c', user: 'u', namespace: 'ns' } },
    { name: 'other', context: { cluster: 'missing', user: 'u' } },
  ]),
  'current-context': fc.constantFrom('ctx', 'other', 'none', ''),
});

/** YAML-specific shapes: anchors and aliases, tags, several documents, tabs, flow style gone wrong. */
const yamlOddity = fc.constantFrom(
  'clusters: &a [*a]\n',
  'a: &a [1, 2]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nclusters: *c\n',
  'clusters: !!binary aGVsbG8=\n',
  '--- \ncurrent-context: a\n---\ncurrent-context: b\n',
  '%YAML 1.2\n---\n{',
  'clusters:\n\t- name: c\n',
  'current-context: [\n',
  'contexts: [{name: ctx, context: {cluster: c, user: u}}]\ncurrent-context: ctx\n',
  '? [a, b]\n: c\n',
  'clusters: {name: c}\n',
  '\uFEFFapiVersion: v1\n',
  'x: !!js/function "function () {}"\n',
);

/** A document as YAML, or as JSON (deep markers expanded) when asked or when YAML cannot write it. */
function textOf(doc: unknown, json: boolean): string {
  if (!json) {
    try {
      return stringify(doc);
    } catch {
      // too deep for the YAML writer: JSON is YAML too
    }
  }
  return jsonBytes(doc, { op: 'none' }).toString('utf8');
}

/** The text of a kubeconfig file: mostly a mutated valid one (as YAML or JSON), else anything. */
const kubeconfigText: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(mutated(validKubeconfig), fc.boolean()).map(([doc, json]) => textOf(doc, json)) },
  { weight: 1, arbitrary: fc.jsonValue().map((v) => textOf(v, false)) },
  { weight: 1, arbitrary: yamlOddity },
  { weight: 1, arbitrary: nastyString },
  {
    weight: 1,
    arbitrary: fc.tuple(mutated(validKubeconfig), fc.nat()).map(([doc, at]) => {
      const text = textOf(doc, false);
      return text.slice(0, at % (text.length + 1));
    }),
  },
);

/** Whether the commands may run with this configuration: it names only our dead server and runs no command. */
function safeToRun(kc: KubeConfig | undefined, text: string): boolean {
  if (/exec|auth-provider|command/.test(text)) return false;
  if (!kc) return true;
  return kc.getClusters().every((c) => c.server === SERVER);
}

function checkOneLine(label: string, err: string): void {
  assert.doesNotMatch(err, /\n\s+at .+:\d+:\d+\)?\n/, `${label}: a stack trace: ${err.slice(0, 600)}`);
  assert.ok(err.trim() !== '', `${label}: no reason given`);
}

describe('fuzz: kubeconfig files', { timeout: 120_000 }, () => {
  let dir = '';
  let n = 0;
  const file = async (text: string) => {
    const path = join(dir, `kubeconfig-${n++}`);
    await writeFile(path, text);
    return path;
  };
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stateward-fuzz-kubeconfig-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('the operator loads any file into a KubeConfig or a KubeConfigError', async () => {
    await fc.assert(
      fc.asyncProperty(
        kubeconfigText,
        fc.constantFrom(SERVER, 'not a url', 'ftp://127.0.0.1:1', 'http://127.0.0.1:1/', ''),
        async (text, apiUrl) => {
          const path = await file(text);
          let kc: KubeConfig;
          try {
            kc = loadOperatorKubeConfig({ configFile: path, apiUrl, env: {} });
          } catch (error) {
            assert.ok(error instanceof KubeConfigError, `not a KubeConfigError: ${String(error)}`);
            assert.ok(error.message.startsWith('-kubernetes.'), error.message);
            return;
          }
          assert.ok(kc.getCurrentCluster(), 'a loaded configuration has a current cluster');
        },
      ),
      params(450, 41),
    );
  });

  it('the client commands load any file (and KUBECONFIG list) into a KubeConfig or a CliError', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(kubeconfigText, { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        fc.constantFrom('', 'ctx', 'other', 'nope', '\u00e9'),
        async (texts, viaEnv, context) => {
          const paths = await Promise.all(texts.map(file));
          const options = viaEnv
            ? { kubeconfig: '', context, env: { KUBECONFIG: [...paths, join(dir, 'missing')].join(':') } }
            : { kubeconfig: paths[0]!, context, env: {} };
          let loaded: ReturnType<typeof loadCliKubeConfig>;
          try {
            loaded = loadCliKubeConfig(options);
          } catch (error) {
            assert.ok(
              error instanceof CliError,
              `not a CliError: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`,
            );
            assert.ok(!error.message.includes('\n'), `more than one line: ${error.message}`);
            return;
          }
          assert.ok(loaded.kubeConfig.getCurrentCluster(), 'a loaded configuration has a current cluster');
          assert.ok(
            typeof loaded.namespace === 'string' && loaded.namespace !== '',
            `namespace ${JSON.stringify(loaded.namespace)}`,
          );
        },
      ),
      params(450, 42),
    );
  });

  it('`stateward status` and `stateward doctor` exit with one line and no stack trace, whatever the file', async () => {
    await assertReachingAsync(
      fc.tuple(kubeconfigText, fc.constantFrom('status' as const, 'doctor' as const)),
      async ([text, which]) => {
        const path = await file(text);
        let loaded: KubeConfig | undefined;
        try {
          loaded = loadCliKubeConfig({ kubeconfig: path, context: '', env: {} }).kubeConfig;
        } catch {
          loaded = undefined;
        }
        fc.pre(safeToRun(loaded, text));
        let err = '';
        const io = { out: () => undefined, err: (t: string) => void (err += t), env: {}, isTTY: false, columns: 80 };
        const argv = which === 'status' ? ['--kubeconfig', path] : ['--kubeconfig', path, '-request-timeout=2s'];
        const code = await settlesWithin(10_000, which, which === 'status' ? runStatus(argv, io) : runDoctor(argv, io));
        assert.equal(code, 1, `${which} exit ${code}: ${err.slice(0, 300)}`);
        checkOneLine(which, err);
        // The reason names where it came from: the file, the kubeconfig or the API it could not reach.
        assert.match(
          err,
          new RegExp(`${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}|kubeconfig|context|127\\.0\\.0\\.1:1`),
          `${which}: a reason that names nothing: ${err.slice(0, 300)}`,
        );
      },
      { ...params(225, 43), floor: 0.8 },
    );
  });
});

// ---------------------------------------------------------- regressions
// Each failure the properties above found, as its shrunk counterexample.

describe('fuzz regressions: kubeconfig files', { timeout: 120_000 }, () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stateward-fuzz-kubeconfig-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('a client-certificate that is a list is a CliError naming the file (was: TypeError "The \\"path\\" argument must be of type string")', async () => {
    const path = join(dir, 'kubeconfig');
    await writeFile(
      path,
      'apiVersion: v1\nkind: Config\nclusters:\n  - name: c\n    cluster:\n      server: https://127.0.0.1:1\n      insecure-skip-tls-verify: true\nusers:\n  - name: u\n    user:\n      client-certificate:\n        - cert.pem\n      client-key: key.pem\ncontexts:\n  - name: ctx\n    context:\n      cluster: c\n      user: u\n      namespace: ns\n  - name: other\n    context:\n      cluster: missing\n      user: u\ncurrent-context: ctx\n',
    );
    assert.throws(
      () => loadCliKubeConfig({ kubeconfig: path, context: '', env: {} }),
      (error: unknown) => {
        assert.ok(error instanceof CliError, String(error));
        assert.match(
          error.message,
          new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is not a valid kubeconfig: `),
        );
        return true;
      },
    );
    let err = '';
    const code = await runStatus(['--kubeconfig', path], {
      out: () => undefined,
      err: (t) => void (err += t),
      env: {},
      isTTY: false,
      columns: 80,
    });
    assert.equal(code, 1);
    assert.match(err, /^error: .* is not a valid kubeconfig: /);
  });

  for (const namespace of ['\n        - ns', ' []']) {
    it(`a context namespace that is a list (${namespace.trim().replace(/\s+/g, ' ')}) is a CliError (was: loaded, and the list used as the namespace)`, async () => {
      const path = join(dir, 'kubeconfig-namespace');
      await writeFile(
        path,
        `apiVersion: v1\nkind: Config\nclusters:\n  - name: c\n    cluster:\n      server: https://127.0.0.1:1\n      insecure-skip-tls-verify: true\nusers:\n  - name: u\n    user:\n      client-certificate: cert.pem\n      client-key: key.pem\ncontexts:\n  - name: ctx\n    context:\n      cluster: c\n      user: u\n      namespace:${namespace}\n  - name: other\n    context:\n      cluster: missing\n      user: u\ncurrent-context: ctx\n`,
      );
      assert.throws(
        () => loadCliKubeConfig({ kubeconfig: path, context: '', env: {} }),
        (error: unknown) => {
          assert.ok(error instanceof CliError, String(error));
          assert.match(error.message, /context "ctx".*namespace/);
          return true;
        },
      );
    });
  }
});
