// Builds helm from its pinned Go module on a machine's first run (minutes),
// then checks the binary is the pinned release and is served from the cache.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { helmBinary, readHelmPin } from './helm.ts';

const execFileAsync = promisify(execFile);

describe('helm built from its Go module', { timeout: 900_000 }, () => {
  it('prints the pinned version', async () => {
    const pin = await readHelmPin();
    const { stdout } = await execFileAsync(await helmBinary(), ['version', '--short']);
    assert.equal(stdout.trim(), pin.version);
  });

  it('reuses the cached binary instead of rebuilding', async () => {
    const first = await helmBinary();
    const builtAt = (await stat(first)).mtimeMs;
    const second = await helmBinary({ log: (line) => assert.fail(`unexpected build: ${line}`) });
    assert.equal(second, first);
    assert.equal((await stat(second)).mtimeMs, builtAt);
  });
});
