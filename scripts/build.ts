// `node scripts/build.ts <out-dir>`: the form of Stateward the image ships —
// bin/ and src/ with their types stripped into .js files, as Node strips them
// when it loads a .ts file, so the process never loads Node's TypeScript
// stripper. That stripper (a WebAssembly module) costs ~30 MiB of RSS for as
// long as the process lives and a third of the time to /ready (issue 19);
// running from sources stays the way to develop and test.
//
// Stripping replaces types with whitespace (line and column numbers stay those
// of the sources, so stack traces point into src/), relative `.ts` import
// specifiers become `.js`, other files (web assets) are copied as they are,
// .d.ts files are left out, and package.json is copied beside bin/ and src/
// (main.ts reads the version from it). The build then checks that every
// relative import of the output resolves to a file of the output.
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { stripTypeScriptTypes } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Static imports, re-exports and dynamic imports of a relative path; group 3 is the path. */
const RELATIVE_SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"\n]*)\2/g;

/** The module's code with types stripped and relative `.ts` specifiers pointing at `.js`. */
export function compileModule(source: string): string {
  const stripped = stripTypeScriptTypes(source, { mode: 'strip' });
  return stripped.replace(RELATIVE_SPECIFIER, (whole, lead: string, quote: string, path: string) =>
    path.endsWith('.ts') ? `${lead}${quote}${path.slice(0, -3)}.js${quote}` : whole,
  );
}

/** Relative specifiers of compiled code that do not name a file under `dir`. */
export function unresolvedImports(code: string, dir: string): string[] {
  return [...code.matchAll(RELATIVE_SPECIFIER)].map((m) => m[3]!).filter((path) => !existsSync(resolve(dir, path)));
}

async function* files(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else yield path;
  }
}

/** Builds bin/, src/ and package.json of `root` into `out` (emptied first); resolves to the files written. */
export async function buildRuntime(out: string, root = ROOT): Promise<string[]> {
  await rm(out, { recursive: true, force: true });
  const written: string[] = [];
  for (const top of ['bin', 'src']) {
    for await (const path of files(join(root, top))) {
      const rel = relative(root, path);
      if (rel.endsWith('.d.ts')) continue;
      const target = join(out, rel.endsWith('.ts') ? `${rel.slice(0, -3)}.js` : rel);
      await mkdir(dirname(target), { recursive: true });
      if (rel.endsWith('.ts')) await writeFile(target, compileModule(await readFile(path, 'utf8')));
      else await copyFile(path, target);
      written.push(target);
    }
  }
  await copyFile(join(root, 'package.json'), join(out, 'package.json'));
  const broken: string[] = [];
  for (const file of written.filter((f) => f.endsWith('.js')))
    for (const path of unresolvedImports(await readFile(file, 'utf8'), dirname(file)))
      broken.push(`${relative(out, file)}: ${path}`);
  if (broken.length > 0) throw new Error(`imports that resolve to nothing in the build:\n  ${broken.join('\n  ')}`);
  return written;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) {
    process.stderr.write('usage: node scripts/build.ts <out-dir>\n');
    process.exit(2);
  }
  const written = await buildRuntime(resolve(out));
  process.stdout.write(`built ${written.length} files into ${out}\n`);
}
