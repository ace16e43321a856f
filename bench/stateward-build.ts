// The Stateward a benchmark runs: the image's form (scripts/build.ts, types
// stripped ahead of time), not the sources, since that is what users run and
// the two differ by ~30 MiB of RSS and a third of the start. Built into a
// scratch directory beside the repository's node_modules;
// BENCH_STATEWARD_FROM=sources runs bin/stateward.ts instead, for comparison.
import { mkdtemp, readFile, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildRuntime, compileModule } from '../scripts/build.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface StatewardEntry {
  /** `node [--import <gcPreload>] <entry> <flags>` */
  entry: string;
  /** bench/gc-on-signal.ts in the same form (a .ts preload would load the type stripper after all). */
  gcPreload: string;
  form: 'build' | 'sources';
}

let built: Promise<StatewardEntry> | undefined;

export function statewardEntry(): Promise<StatewardEntry> {
  if (process.env['BENCH_STATEWARD_FROM'] === 'sources')
    return Promise.resolve({
      entry: join(ROOT, 'bin', 'stateward.ts'),
      gcPreload: join(ROOT, 'bench', 'gc-on-signal.ts'),
      form: 'sources',
    });
  built ??= (async () => {
    const out = await mkdtemp(join(tmpdir(), 'stateward-bench-build-'));
    await buildRuntime(out);
    await symlink(join(ROOT, 'node_modules'), join(out, 'node_modules'));
    const gcPreload = join(out, 'gc-on-signal.js');
    await writeFile(gcPreload, compileModule(await readFile(join(ROOT, 'bench', 'gc-on-signal.ts'), 'utf8')));
    return { entry: join(out, 'bin', 'stateward.js'), gcPreload, form: 'build' as const };
  })();
  return built;
}
