import assert from 'node:assert/strict';
import { mkdtemp, mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { acquireLock, processAlive } from './lock.ts';

describe('acquireLock', () => {
  it('makes a second taker wait until the first releases', async () => {
    const path = join(await mkdtemp(join(tmpdir(), 'lock-')), 'l');
    const release = await acquireLock(path);
    let second = false;
    const pending = acquireLock(path, { pollMs: 5 }).then((r) => {
      second = true;
      return r;
    });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(second, false);
    await release();
    await (
      await pending
    )();
    assert.equal(second, true);
  });

  it('breaks the lock of a process that died', async () => {
    const path = join(await mkdtemp(join(tmpdir(), 'lock-')), 'l');
    await mkdir(path);
    // pid 2^22+1 is above Linux's pid_max limit, so it never runs.
    await writeFile(join(path, 'pid'), String(4194305));
    assert.equal(processAlive(4194305), false);
    const release = await acquireLock(path, { pollMs: 5 });
    await release();
  });
});
