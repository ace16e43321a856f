// Exec credential plugins (src/runtime/kube/execplugin.ts), tiny shell
// scripts in a temporary directory: what a plugin is given, how its output
// is checked, the credential cached and fetched again, and the bounds on a
// plugin that misbehaves.
import assert from 'node:assert/strict';
import { chmod, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CredentialOptions } from '../../../src/runtime/kube/credentials.ts';
import { parseKubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { apply, b64, config, failure, kubeconfigFixtures, TestClock, type Pki } from './kubeconfigsupport.ts';

let dir = '';
let pki: Pki;

before(async () => {
  ({ dir, pki } = await kubeconfigFixtures());
});
after(() => rm(dir, { recursive: true, force: true }));

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
