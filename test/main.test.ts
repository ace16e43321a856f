import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { main, version } from '../src/main.ts';

const exec = promisify(execFile);

function capture(argv: string[]): { code: number; out: string; err: string } {
  let out = '';
  let err = '';
  const code = main(argv, { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

describe('stateward command line', () => {
  it('prints its version for -version and --version', () => {
    for (const flag of ['-version', '--version']) {
      const result = capture([flag]);
      assert.equal(result.code, 0);
      assert.equal(result.out, `stateward ${version}\n`);
    }
  });

  it('rejects an unknown flag with exit 2 and the usage, like Go flag', () => {
    const result = capture(['-no-such-flag']);
    assert.equal(result.code, 2);
    assert.match(result.err, /flag provided but not defined: -no-such-flag/);
    assert.match(result.err, /Usage of stateward/);
  });

  it('runs as the package bin on Node 24', async () => {
    const bin = fileURLToPath(new URL('../bin/stateward.ts', import.meta.url));
    const { stdout } = await exec(process.execPath, [bin, '-version']);
    assert.equal(stdout, `stateward ${version}\n`);
    assert.ok(Number.parseInt(process.versions.node, 10) >= 24, `tests run on Node ${process.versions.node}`);
  });
});
