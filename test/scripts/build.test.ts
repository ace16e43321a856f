// scripts/build.ts: the image's type-stripped form of bin/ and src/.
import assert from 'node:assert/strict';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { buildRuntime, compileModule, unresolvedImports } from '../../scripts/build.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('scripts/build.ts', () => {
  it('strips types and points relative .ts imports (static, dynamic, re-export) at .js, leaving packages alone', () => {
    const source = [
      "import { a, type B } from './a.ts';",
      "import type { C } from '../c.ts';",
      "import x from 'prom-client';",
      "import './side-effect.ts';",
      "import data from './assets/markup.js';",
      'const f = (n: number): string => String(n);',
      "const lazy = await import('./lazy.ts');",
      "export { a } from './a.ts';",
    ].join('\n');
    const out = compileModule(source);
    assert.match(out, /from '\.\/a\.js';/);
    assert.doesNotMatch(out, /\.ts'/, 'no .ts specifier left');
    assert.match(out, /from 'prom-client'/);
    assert.match(out, /import '\.\/side-effect\.js'/);
    assert.match(out, /from '\.\/assets\/markup\.js'/);
    assert.match(out, /import\('\.\/lazy\.js'\)/);
    assert.match(out, /const f = \(n\s*\)\s*=> String\(n\);/);
  });

  it('keeps every line of every source at its length, so stack traces point at the same line and column', async () => {
    const out = await mkdtemp(join(tmpdir(), 'stateward-build-'));
    try {
      const written = await buildRuntime(out, ROOT);
      const modules = written.filter((f) => f.endsWith('.js') && !f.includes('/web/assets/'));
      assert.ok(modules.length > 100, `${modules.length} modules built`);
      for (const file of modules) {
        const source = join(ROOT, `${relative(out, file).slice(0, -3)}.ts`);
        const lines = (await readFile(source, 'utf8')).split('\n').map((l) => l.length);
        const built = (await readFile(file, 'utf8')).split('\n').map((l) => l.length);
        assert.deepEqual(built, lines, relative(out, file));
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it('names the imports that resolve to no file of the build', () => {
    const dir = join(ROOT, 'src');
    // src/ holds main.ts, not main.js.
    assert.deepEqual(unresolvedImports("import { main } from './main.ts';", dir), []);
    assert.deepEqual(unresolvedImports("import { main } from './main.js'; await import('./nowhere.ts');", dir), [
      './main.js',
      './nowhere.ts',
    ]);
    assert.deepEqual(unresolvedImports("import x from 'prom-client';", dir), []);
  });
});
