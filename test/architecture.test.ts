// The direction of dependencies (docs/architecture.md), checked on every
// import in src/: runtime/ depends on nothing above it, vocabulary/ on the
// runtime only, the shared workload caches on those two, a capability on
// those three and its own folder — never on another capability — and the
// views (status, web, doctor, cli) on anything below them. A sideways import
// fails here, as do a re-export and a module file name that is not unique or
// not in the house style.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const src = join(import.meta.dirname, '..', 'src');

const LAYERS: Record<string, number> = {
  runtime: 0,
  vocabulary: 1,
  workloads: 2,
  rollout: 3,
  downscale: 3,
  drain: 3,
  restarts: 3,
  webhooks: 3,
  rbac: 3,
  status: 4,
  web: 4,
  doctor: 4,
  cli: 4,
};
const CAPABILITY = 3;

/**
 * Sideways imports allowed, each with why. None: what two capabilities share
 * lives below them, and main.ts wires one capability's service into another.
 */
const ALLOWED: Record<string, string> = {};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.ts$/.test(name) ? [path] : [];
  });
}

/** Every relative module a file imports, statically or dynamically, as a path under src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
  return specifiers.map((s) => relative(src, resolve(dirname(file), s)));
}

const top = (path: string) => path.split('/')[0]!;

/** Edges that break the layering, from each file (a path under src/) to what it imports. */
function violations(graph: Iterable<{ from: string; imports: string[] }>): { edge: string; why: string }[] {
  const found: { edge: string; why: string }[] = [];
  for (const { from, imports } of graph) {
    const fromTop = top(from);
    if (!from.includes('/')) continue; // main.ts wires everything
    const fromLayer = LAYERS[fromTop];
    if (fromLayer === undefined) {
      found.push({ edge: from, why: `src/${fromTop}/ has no layer: add it to LAYERS and to docs/architecture.md` });
      continue;
    }
    for (const to of imports) {
      const toTop = top(to);
      if (toTop === fromTop) continue;
      const toLayer = to.includes('/') ? LAYERS[toTop] : Number.POSITIVE_INFINITY;
      const edge = `${from} -> ${to}`;
      if (toLayer === undefined) found.push({ edge, why: `src/${toTop}/ has no layer` });
      else if (toLayer > fromLayer)
        found.push({ edge, why: `layer ${fromTop} (${fromLayer}) imports upward into ${toTop} (${toLayer})` });
      else if (toLayer === fromLayer && fromLayer <= CAPABILITY)
        found.push({ edge, why: `${fromTop} imports sideways from ${toTop}` });
    }
  }
  return found;
}

const srcGraph = () => sourceFiles(src).map((file) => ({ from: relative(src, file), imports: importsOf(file) }));

describe('the direction of dependencies', () => {
  it('src/ imports only downward, apart from the listed sideways imports', () => {
    const found = violations(srcGraph());
    const unlisted = found.filter((v) => !(v.edge in ALLOWED)).map((v) => `${v.edge}: ${v.why}`);
    assert.deepEqual(unlisted, [], 'move the shared piece down (runtime/, vocabulary/) or wire it in main.ts');
    const stale = Object.keys(ALLOWED).filter((edge) => !found.some((v) => v.edge === edge));
    assert.deepEqual(stale, [], 'these sideways imports are gone: take them off ALLOWED');
  });

  it('flags upward, sideways and unlayered imports, and lets downward, same-folder and view imports through', () => {
    const edges = violations([
      { from: 'runtime/operator.ts', imports: ['runtime/clock.ts', 'rollout/controller.ts', 'main.ts'] },
      { from: 'vocabulary/pods.ts', imports: ['runtime/kube/types.ts', 'workloads/cache.ts'] },
      {
        from: 'drain/zpdb/decide.ts',
        imports: ['vocabulary/pods.ts', 'workloads/cache.ts', 'drain/zpdb/zpdbresource.ts', 'rollout/snapshot.ts'],
      },
      { from: 'status/build.ts', imports: ['rollout/planner.ts', 'cli/list.ts'] },
      { from: 'newthing/a.ts', imports: [] },
    ]).map((v) => v.edge);
    assert.deepEqual(edges, [
      'runtime/operator.ts -> rollout/controller.ts',
      'runtime/operator.ts -> main.ts',
      'vocabulary/pods.ts -> workloads/cache.ts',
      'drain/zpdb/decide.ts -> rollout/snapshot.ts',
      'newthing/a.ts',
    ]);
  });
});

/** `export … from` statements (re-exports) in a module's text, one line each. */
function reExports(text: string): string[] {
  return [...text.matchAll(/^export\s+(?:type\s+)?(?:\*(?:\s+as\s+\w+)?|\{[^}]*\})\s*from\s*'[^']+'/gm)].map((m) =>
    m[0].replace(/\s+/g, ' '),
  );
}

describe('one import path per symbol', () => {
  it('no module in src/ re-exports another module: importers name the module that defines a symbol', () => {
    const found = sourceFiles(src).flatMap((file) =>
      reExports(readFileSync(file, 'utf8')).map((line) => `${relative(src, file)}: ${line}`),
    );
    assert.deepEqual(found, []);
  });

  it('recognises every form of re-export, and leaves plain exports alone', () => {
    const text = [
      "export * from './a.ts';",
      "export * as b from './b.ts';",
      "export { c, type D } from './c.ts';",
      "export type {\n  E,\n  F,\n} from './e.ts';",
      'export const g = 1;',
      'export { h };',
      "import { i } from './i.ts';",
    ].join('\n');
    assert.deepEqual(reExports(text), [
      "export * from './a.ts'",
      "export * as b from './b.ts'",
      "export { c, type D } from './c.ts'",
      "export type { E, F, } from './e.ts'",
    ]);
  });
});

/**
 * File names more than one module in src/ has, each because the file does
 * the same job in every folder that has one. Any other name belongs to one
 * module, so a name alone (a stack trace, an editor tab, a log's source)
 * says which module it is.
 */
const SAME_JOB_NAMES: Record<string, string> = {
  'capability.ts': "the folder's Capability: what it registers with the operator",
  'cli.ts': "a client command's entry (stateward status, stateward doctor)",
  'controller.ts': "a capability's controller, run by runtime/'s controller runner",
  'decide.ts': "a capability's pure decision (the snapshot in, the verdict out)",
};

/** One style for module file names: lower case, words run together, no hyphens or dots (a .d.ts aside). */
const MODULE_NAME = /^[a-z0-9]+(\.d)?\.(ts|js)$/;

/** Is a file in src/ a module (not an asset the web view serves, like app.css or icon.svg)? */
const isModule = (name: string) => /\.[cm]?[jt]sx?$/.test(name);

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** File names that more than one of `paths` has, each with those paths, sorted. */
function sharedNames(paths: readonly string[]): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  for (const path of paths) {
    const name = path.split('/').at(-1)!;
    byName.set(name, [...(byName.get(name) ?? []), path]);
  }
  return new Map([...byName].filter(([, all]) => all.length > 1).map(([name, all]) => [name, all.sort()]));
}

describe('module file names', () => {
  const modules = () =>
    filesUnder(src)
      .map((file) => relative(src, file))
      .filter((path) => isModule(path));

  it('no two modules in src/ share a file name, apart from the same-job names', () => {
    const shared = sharedNames(modules());
    const unlisted = [...shared].filter(([name]) => !(name in SAME_JOB_NAMES)).map(([, paths]) => paths.join(', '));
    assert.deepEqual(unlisted, [], 'name each module for its own job (folder + job run together: zpdbresource.ts)');
    const stale = Object.keys(SAME_JOB_NAMES).filter((name) => !shared.has(name));
    assert.deepEqual(stale, [], 'these names are no longer shared: take them off SAME_JOB_NAMES');
  });

  it('every module file name is lower case with its words run together', () => {
    const badlyNamed = modules().filter((path) => !MODULE_NAME.test(path.split('/').at(-1)!));
    assert.deepEqual(badlyNamed, []);
  });

  it('finds names two folders share, and tells modules from assets', () => {
    const shared = sharedNames(['a/config.ts', 'b/config.ts', 'a/plan.ts', 'b/store.ts', 'c/config.ts']);
    assert.deepEqual([...shared], [['config.ts', ['a/config.ts', 'b/config.ts', 'c/config.ts']]]);
    assert.deepEqual(
      ['app.js', 'markup.d.ts', 'app.css', 'icon.svg', 'deletion-events.ts', 'Plan.ts', 'x.mts'].filter(isModule),
      ['app.js', 'markup.d.ts', 'deletion-events.ts', 'Plan.ts', 'x.mts'],
    );
    assert.deepEqual(
      ['markup.d.ts', 'zpdbresource.ts', 'deletion-events.ts', 'Plan.ts', 'x.mts'].filter((n) => MODULE_NAME.test(n)),
      ['markup.d.ts', 'zpdbresource.ts'],
    );
  });
});
