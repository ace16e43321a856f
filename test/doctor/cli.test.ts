import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { stringify } from 'yaml';
import { renderText, runDoctor } from '../../src/doctor/cli.ts';
import { freePorts } from '../cluster/ports.ts';

async function doctor(
  argv: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runDoctor(argv, { out: (s) => (out += s), err: (s) => (err += s), env });
  return { code, out, err };
}

async function kubeconfig(server: string, context = 'local'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'doctor-'));
  const path = join(dir, 'kubeconfig');
  await writeFile(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'local', cluster: { server, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'me', user: { token: 'x' } }],
      contexts: [{ name: context, context: { cluster: 'local', user: 'me', namespace: 'mimir' } }],
      'current-context': context,
    }),
  );
  return path;
}

describe('stateward doctor command line', () => {
  it('exits 2 on a bad command line, naming the problem, with the usage', async () => {
    for (const [argv, message] of [
      [['-no-such-flag'], /flag provided but not defined: -no-such-flag/],
      [['-o', 'yaml'], /invalid value "yaml" for flag -o/],
      [['-n', 'a', '-A'], /cannot be used together/],
      [['-n', 'a', '--namespace', 'b'], /name different namespaces/],
      [['extra'], /unexpected argument: extra/],
      [['-n'], /flag needs an argument: -n/],
    ] as const) {
      const result = await doctor([...argv]);
      assert.equal(result.code, 2, argv.join(' '));
      assert.match(result.err, message);
      assert.match(result.err, /-all-namespaces/, 'usage follows');
      assert.equal(result.out, '');
    }
  });

  it('prints its usage for -help and exits 0', async () => {
    const result = await doctor(['-help']);
    assert.equal(result.code, 0);
    assert.match(result.err, /^stateward doctor \[flags\]: reads the cluster/);
    assert.match(result.err, /Usage of stateward doctor:/);
    for (const flag of ['-n string', '-A', '-o string', '-kubeconfig string', '-context string'])
      assert.ok(result.err.includes(flag), flag);
  });

  it('fails with one clear line, exit 1, when the kubeconfig is missing or wrong', async () => {
    const missing = await doctor(['--kubeconfig', '/nonexistent/kubeconfig']);
    assert.equal(missing.code, 1);
    assert.equal(missing.err, 'stateward doctor: cannot read kubeconfig /nonexistent/kubeconfig: ENOENT\n');

    const none = await doctor([], { HOME: '/nonexistent' });
    assert.equal(none.code, 1);
    assert.match(
      none.err,
      /^stateward doctor: no kubeconfig found: pass --kubeconfig=<file>, set KUBECONFIG, or create ~\/\.kube\/config\n$/,
    );

    const path = await kubeconfig('https://127.0.0.1:1');
    const context = await doctor(['--kubeconfig', path, '--context', 'prod']);
    assert.equal(context.code, 1);
    assert.equal(context.err, 'stateward doctor: --context=prod: no such context in the kubeconfig (local)\n');
  });

  it('fails with one clear line, exit 1, when the API server cannot be reached', async () => {
    // A port nothing listens on (freePorts closes what it opened).
    const [port] = await freePorts(1);
    const path = await kubeconfig(`https://127.0.0.1:${port!}`);
    for (const argv of [
      ['--kubeconfig', path],
      ['-A', '--context', 'local'],
    ]) {
      const result = await doctor(argv, { KUBECONFIG: path });
      assert.equal(result.code, 1);
      assert.equal(
        result.err,
        `stateward doctor: cannot reach the Kubernetes API at https://127.0.0.1:${port!}: NetworkError: ECONNREFUSED\n`,
      );
      assert.doesNotMatch(result.err, /\bat .*\.ts:\d+/, 'no stack trace');
      assert.equal(result.out, '');
    }
  });

  it('renders one block per finding and a summary line', () => {
    const text = renderText(
      [
        {
          severity: 'error',
          code: 'group-not-ondelete',
          object: 'StatefulSet mimir/ingester-zone-b',
          problem: 'it is RollingUpdate',
          fix: 'make it OnDelete',
        },
        {
          severity: 'warning',
          code: 'invalid-max-unavailable',
          object: 'StatefulSet mimir/ingester-zone-c',
          problem: 'bad value',
          fix: 'use 2',
        },
      ],
      'namespace mimir',
    );
    assert.equal(
      text,
      [
        'ERROR  StatefulSet mimir/ingester-zone-b: it is RollingUpdate\n  fix: make it OnDelete\n',
        'WARNING  StatefulSet mimir/ingester-zone-c: bad value\n  fix: use 2\n',
        '1 error, 1 warning in namespace mimir.\n',
      ].join('\n'),
    );
    assert.equal(renderText([], 'all namespaces'), 'No problems found in all namespaces.\n');
  });
});
