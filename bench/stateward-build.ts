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
import { imageEnv, imageNodeFlags } from '../scripts/image-runtime.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface StatewardEntry {
  /** `node <nodeFlags> [--import <gcPreload>] <entry> <flags>` */
  entry: string;
  /** The Node flags the image's ENTRYPOINT passes (read from the Dockerfile, so the two cannot drift). */
  nodeFlags: string[];
  /** The environment the image sets (its final stage's ENV lines: the malloc settings among them). */
  env: Record<string, string>;
  /** bench/gc-on-signal.ts in the same form (a .ts preload would load the type stripper after all). */
  gcPreload: string;
  form: 'build' | 'sources';
}

let built: Promise<StatewardEntry> | undefined;

export async function statewardEntry(): Promise<StatewardEntry> {
  if (process.env['BENCH_STATEWARD_FROM'] === 'sources')
    return {
      entry: join(ROOT, 'bin', 'stateward.ts'),
      nodeFlags: await imageNodeFlags(),
      env: await imageEnv(),
      gcPreload: join(ROOT, 'bench', 'gc-on-signal.ts'),
      form: 'sources' as const,
    };
  built ??= (async () => {
    const out = await mkdtemp(join(tmpdir(), 'stateward-bench-build-'));
    await buildRuntime(out);
    await symlink(join(ROOT, 'node_modules'), join(out, 'node_modules'));
    const gcPreload = join(out, 'gc-on-signal.js');
    await writeFile(gcPreload, compileModule(await readFile(join(ROOT, 'bench', 'gc-on-signal.ts'), 'utf8')));
    return {
      entry: join(out, 'bin', 'stateward.js'),
      nodeFlags: await imageNodeFlags(),
      env: await imageEnv(),
      gcPreload,
      form: 'build' as const,
    };
  })();
  return built;
}

/** `A=1 B=2 ` for a report line (empty without variables). */
export function envText(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `${k}=${v} `)
    .join('');
}
