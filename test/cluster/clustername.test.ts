import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { defaultClusterName } from './cluster.ts';

describe('the default local cluster name', () => {
  it('is per clone: two clones (even both named main) get two clusters, one clone always the same', async (t) => {
    const parent = await mkdtemp(join(tmpdir(), 'clones-'));
    t.after(() => rm(parent, { recursive: true, force: true }));
    const first = join(parent, 'a', 'main');
    const second = join(parent, 'b', 'main');
    for (const dir of [first, second]) await mkdir(dir, { recursive: true });
    const a = defaultClusterName(first);
    const b = defaultClusterName(second);
    assert.notEqual(a, b);
    assert.equal(defaultClusterName(first), a, 'stable for one clone');
    assert.equal(defaultClusterName(join(first, '.')), a, 'the same directory however it is written');
    for (const name of [a, b]) assert.match(name, /^main-[0-9a-f]{8}$/);
    const odd = join(parent, 'My Clone (2)');
    await mkdir(odd);
    assert.match(defaultClusterName(odd), /^my-clone-2-[0-9a-f]{8}$/, 'a name fit for a directory and a cluster label');
  });
});
