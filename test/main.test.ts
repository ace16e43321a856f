import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { main, version } from '../src/main.ts';

const exec = promisify(execFile);

async function capture(
  argv: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (t) => (out += t), err: (t) => (err += t), env });
  return { code, out, err };
}

describe('stateward command line', () => {
  it('prints its version for -version and --version', async () => {
    for (const flag of ['-version', '--version']) {
      const result = await capture([flag]);
      assert.equal(result.code, 0);
      assert.equal(result.out, `stateward ${version}\n`);
    }
  });

  it('lists every flag with its default for -help, and exits 0', async () => {
    const result = await capture(['-help']);
    assert.equal(result.code, 0);
    for (const line of [
      '-server.port int',
      '(default 8001)',
      '-kubernetes.client-qps float',
      '-log.format string',
      '(default "logfmt")',
      '-leader-election.lease-duration duration',
      '(default 15s)',
    ]) {
      assert.ok(result.err.includes(line), `help mentions ${line}`);
    }
  });

  it('rejects an unknown flag with exit 2 and the usage, like Go flag', async () => {
    const result = await capture(['-no-such-flag']);
    assert.equal(result.code, 2);
    assert.match(result.err, /flag provided but not defined: -no-such-flag/);
    assert.match(result.err, /Usage of stateward/);
  });

  it('rejects an invalid value with exit 2, naming the flag', async () => {
    const result = await capture(['-server.port=eighty']);
    assert.equal(result.code, 2);
    assert.match(result.err, /invalid value "eighty" for flag -server.port/);
  });

  it('requires a namespace (exit 2); -kubernetes.api-url without a kubeconfig for its credentials exits 1', async () => {
    assert.match((await capture([])).err, /the -kubernetes.namespace flag is required/);
    const unpaired = await capture(['-kubernetes.namespace=ns', '-kubernetes.api-url=https://127.0.0.1:6443'], {
      HOME: '/nonexistent-home',
    });
    assert.equal(unpaired.code, 1);
    assert.match(unpaired.err, /-kubernetes.api-url=https:\/\/127.0.0.1:6443 needs a kubeconfig for its credentials/);
  });

  it('takes the namespace from POD_NAMESPACE when the flag is absent', async () => {
    // Outside a cluster it then fails on the configuration, not on the namespace.
    const result = await capture(['-log.format=json'], { POD_NAMESPACE: 'mimir' });
    assert.equal(result.code, 1);
    assert.doesNotMatch(result.err, /namespace flag is required/);
    assert.match(result.err, /not running in a Kubernetes pod/);
  });

  it('runs the client commands status and doctor by their first word', async () => {
    const status = await capture(['status', '-help']);
    assert.equal(status.code, 0);
    assert.match(status.err, /-all-namespaces/);
    assert.doesNotMatch(status.err, /-server-tls\.enabled/, "the command's flags, not the operator's");
    const doctor = await capture(['doctor', '-help']);
    assert.equal(doctor.code, 0);
    assert.match(doctor.err, /misconfigurations/);
    assert.equal((await capture(['status', '-no-such-flag'])).code, 2);
  });

  it('accepts rollout-operator flags it does not implement, and warns when they are set', async () => {
    const result = await capture(['-zpdb.pod-ready-annotation-patch-timeout=10s'], { POD_NAMESPACE: 'mimir' });
    assert.doesNotMatch(result.err, /flag provided but not defined/);
    assert.equal(result.code, 1, 'gets as far as loading the cluster configuration');
    assert.match(result.err, /-zpdb\.pod-ready-annotation-patch-timeout has no effect/);
    const quiet = await capture([], { POD_NAMESPACE: 'mimir' });
    assert.doesNotMatch(quiet.err, /has no effect/, 'no warning at its default');
  });

  it("takes rollout-operator's cluster-validation flags without a warning, and refuses what it refuses (exit 2)", async () => {
    const enabled = await capture(
      [
        '-server.cluster-validation.http.enabled=true',
        '-server.cluster-validation.http.soft-validation',
        '-server.cluster-validation.http.excluded-paths=/a',
        '-server.cluster-validation.http.excluded-user-agents=^kube-apiserver',
      ],
      { POD_NAMESPACE: 'mimir' },
    );
    assert.equal(enabled.code, 1, 'gets as far as loading the cluster configuration');
    assert.doesNotMatch(enabled.err, /cluster-validation|X-Cluster/);
    const softAlone = await capture(['-server.cluster-validation.http.soft-validation'], { POD_NAMESPACE: 'mimir' });
    assert.equal(softAlone.code, 2);
    assert.match(softAlone.err, /soft validation can be enabled only if cluster validation is enabled/);
    const badAgents = await capture(
      ['-server.cluster-validation.http.enabled', '-server.cluster-validation.http.excluded-user-agents=(a'],
      { POD_NAMESPACE: 'mimir' },
    );
    assert.equal(badAgents.code, 2);
    assert.match(badAgents.err, /excluded-user-agents: error parsing regexp: missing closing \)/);
  });

  it('reports a malformed kubeconfig clearly and exits 1 without a stack trace', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kc-'));
    const path = join(dir, 'kubeconfig');
    await writeFile(path, 'apiVersion: v1\nclusters: [ {name: x, cluster: {server: ');
    const result = await capture([
      '-kubernetes.namespace=ns',
      `-kubernetes.config-file=${path}`,
      '-kubernetes.api-url=https://127.0.0.1:1',
    ]);
    assert.equal(result.code, 1);
    assert.match(result.err, /not a valid kubeconfig/);
    assert.doesNotMatch(result.err, /\n\s+at /);
  });

  it('runs as the package bin on Node 24', async () => {
    for (const name of ['stateward.ts', 'stateward.mjs']) {
      const bin = fileURLToPath(new URL(`../bin/${name}`, import.meta.url));
      const { stdout } = await exec(process.execPath, [bin, '-version']);
      assert.equal(stdout, `stateward ${version}\n`, name);
    }
    assert.ok(Number.parseInt(process.versions.node, 10) >= 24, `tests run on Node ${process.versions.node}`);
  });

  it('answers a first word that names no command with the nearest command, and `help` with the commands', async () => {
    const typo = await capture(['stauts', '-n', 'x']);
    assert.equal(typo.code, 2);
    assert.equal(
      typo.err,
      `stateward: unknown command "stauts". Did you mean "status"?\nRun 'stateward help' for the commands.\n`,
    );
    assert.doesNotMatch(typo.err, /namespace flag/, 'not taken for the operator');
    assert.match((await capture(['frobnicate'])).err, /unknown command "frobnicate"\.\nRun/, 'no far-fetched guess');
    assert.match(
      (await capture([''])).err,
      /namespace flag is required/,
      'an empty word is no command: Go flag runs on',
    );
    const help = await capture(['help']);
    assert.equal(help.code, 0);
    for (const command of ['status', 'doctor', 'help']) assert.match(help.out, new RegExp(`^  ${command} `, 'm'));
    assert.match(
      (await capture(['-help'])).err,
      /^Usage of stateward:\n[^]*\nCommands:\n {2}status/,
      '-help names them',
    );
    const bare = await capture([]);
    assert.equal(bare.code, 2);
    assert.match(
      bare.err,
      /the -kubernetes.namespace flag is required\n\nUsage:[^]*Commands:/,
      'a bare run shows the commands',
    );
  });
});

describe('the package bins on an older Node', () => {
  it("plans: run here on 24+, hand over to the project's Node 24 when npm ci brought one, else explain", async () => {
    const { launchPlan, explanation } = await import('../bin/node24.mjs');
    assert.equal(launchPlan(24, false), 'import');
    assert.equal(launchPlan(26, true), 'import');
    assert.equal(launchPlan(20, true), 'project-node');
    assert.equal(launchPlan(18, false), 'explain');
    const line = explanation('stateward', 'v20.1.0');
    assert.equal(line.split('\n').length, 2, 'one line');
    assert.match(line, /needs Node\.js 24 or later, and this is Node v20\.1\.0: .*npx stateward/);
  });

  // The machine's own Node, when it is older than 24 (Debian's is): what a user's `stateward` meets.
  const older = ['/usr/bin/node', '/usr/local/bin/node'].find((path) => {
    try {
      return Number.parseInt(execFileSync(path, ['-p', 'process.versions.node'], { encoding: 'utf8' }), 10) < 24;
    } catch {
      return false;
    }
  });
  it(
    `runs the bins from an older Node (${older ?? 'none on this machine: the launch plan above is all that is tested'})`,
    { skip: older === undefined },
    async () => {
      const bin = fileURLToPath(new URL('../bin/stateward.mjs', import.meta.url));
      const { stdout } = await exec(older!, [bin, '-version']);
      assert.equal(stdout, `stateward ${version}\n`, "handed to the project's Node 24");
      // A copy of the bins without the project's node_modules: one line, exit 1, no stack trace.
      const alone = await mkdtemp(join(tmpdir(), 'bins-'));
      await mkdir(join(alone, 'bin'));
      for (const file of ['stateward.mjs', 'node24.mjs', 'stateward.ts'])
        await copyFile(fileURLToPath(new URL(`../bin/${file}`, import.meta.url)), join(alone, 'bin', file));
      const refused = await exec(older!, [join(alone, 'bin', 'stateward.mjs'), '-version']).catch(
        (error: { code: number; stderr: string }) => error,
      );
      assert.equal((refused as { code: number }).code, 1);
      assert.match(refused.stderr, /^stateward needs Node\.js 24 or later, and this is Node v\d+[^\n]*\n$/);
    },
  );
});
