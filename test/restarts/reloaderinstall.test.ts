// Reloader's install mode, the pure parts: what its notice says and the exact
// command the missing key Secret's error gives.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { CHECKSUM_KEY_FIELD } from '../../src/restarts/checksumkey.ts';
import {
  installNotice,
  keySecretCommand,
  missingKeyMessage,
  POLL_INTERVAL_MS,
} from '../../src/restarts/reloaderinstall.ts';

describe("Reloader's install mode", () => {
  it('says once what runs, what does not and why, naming the environment that turned it on', () => {
    const notice = installNotice(['--auto-reload-all', 'RELOADER_NAMESPACE', 'RELOADER_DEPLOYMENT_NAME']);
    assert.match(notice, /\(RELOADER_NAMESPACE, RELOADER_DEPLOYMENT_NAME set\)/);
    assert.match(notice, /only config restarts run/);
    assert.match(notice, /rollouts, webhooks and the web page/);
    assert.match(notice, /CronJob and Job restarts/);
    assert.match(notice, /OnDelete evictions and the Secrets Store CSI integration/);
    assert.match(notice, new RegExp(`listed every ${POLL_INTERVAL_MS / 1000}s`));
    assert.equal(notice.includes('\n'), false, 'one line');
  });

  it('gives the exact command that makes the key Secret, on one line', () => {
    const command = keySecretCommand('reloader', 'stateward-config-checksum-key');
    assert.equal(
      command,
      `kubectl -n reloader create secret generic stateward-config-checksum-key --from-literal=${CHECKSUM_KEY_FIELD}=$(openssl rand -hex 32)`,
    );
    const message = missingKeyMessage('reloader', 'stateward-config-checksum-key');
    assert.ok(message.endsWith(command));
    assert.equal(message.includes('\n'), false);
  });

  it("the command's key is long enough for the checksum key (at least 16 bytes)", () => {
    // What $(openssl rand -hex 32) expands to: 64 hex characters, taken as bytes.
    const key = execFileSync('openssl', ['rand', '-hex', '32'], { encoding: 'utf8' }).trim();
    assert.match(key, /^[0-9a-f]{64}$/);
    assert.ok(Buffer.from(key).length >= 16);
  });
});
