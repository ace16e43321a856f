// Shared pieces of the fuzz tests (test/fuzz/*.test.ts): nasty strings and
// JSON values, mutations of valid JSON documents, time bounds, and stand-ins
// for the API (a client whose every call fails) and the informer caches.
//
// Every property runs with a fixed seed (FUZZ_SEED, printed by fast-check on
// failure) so a failure reproduces; FUZZ_SEED=<n> in the environment picks
// another one, FUZZ_RUNS=<factor> scales the number of runs.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { KubeClient } from '../../src/runtime/kube/client.ts';
import { KubeApiError } from '../../src/runtime/kube/errors.ts';
import type { Informer } from '../../src/runtime/informer/informer.ts';
import { IndexedStore, objectKey, type IndexFunc } from '../../src/runtime/informer/store.ts';
import type { KubeObject } from '../../src/runtime/kube/types.ts';

export const FUZZ_SEED = Number(process.env['FUZZ_SEED'] || 20240917);
const RUN_FACTOR = Number(process.env['FUZZ_RUNS'] || 1);

/** fast-check parameters for one property: a fixed seed (offset per property so they differ), scaled runs. */
export function params<T>(numRuns: number, offset: number): fc.Parameters<T> {
  return { seed: FUZZ_SEED + offset, numRuns: Math.max(1, Math.round(numRuns * RUN_FACTOR)) };
}

// ------------------------------------------------------------------ time

/**
 * The budget for one parse of one fuzzed input, up to 100 KB. A parser that
 * backtracks or goes quadratic takes seconds on such input; a linear one
 * takes under 20 ms here (best of 3, 2 cores). 100 ms keeps five times that
 * margin, so a CI run on a loaded machine does not fail on a linear parser
 * that is merely slow (that is a benchmark's business), while every
 * super-linear one still fails.
 */
export const PARSE_BUDGET_MS = 100;

/**
 * Runs `f`, asserting it returns (or throws) within `budgetMs`; returns its
 * result (or rethrows). What counts is the smaller of the wall time and
 * this process's CPU time: on a machine busy with other processes (a CI run
 * next to a cluster on two cores) the wall time stretches while the CPU `f`
 * costs does not. A run over the budget is repeated up to twice and the
 * fastest counts: a slow input is slow every time, a pause is not. `f` must
 * be pure. The budgets catch a parser that backtracks or loops on some
 * input — orders of magnitude, not performance targets (those are in
 * `npm run bench`).
 */
export function within<T>(budgetMs: number, label: string, f: () => T): T {
  let fastest = Infinity;
  for (let attempt = 0; attempt < 3; attempt++) {
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    let outcome: { value: T } | { error: unknown };
    try {
      outcome = { value: f() };
    } catch (error) {
      outcome = { error };
    }
    const cpu = process.cpuUsage(cpuBefore);
    fastest = Math.min(fastest, performance.now() - started, (cpu.user + cpu.system) / 1000);
    if (fastest < budgetMs) {
      if ('error' in outcome) throw outcome.error;
      return outcome.value;
    }
  }
  assert.fail(`${label} took ${fastest.toFixed(1)} ms at best of 3 (budget ${budgetMs.toFixed(0)} ms)`);
}

/** Awaits `promise`, failing (rather than hanging) when it has not settled after `ms`. */
export async function settlesWithin<T>(ms: number, label: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const started = performance.now();
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`${label} did not settle within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    const took = performance.now() - started;
    assert.ok(took < ms, `${label} took ${took.toFixed(0)} ms (budget ${ms} ms)`);
  }
}

// --------------------------------------------------------------- strings

/** Strings that are known to hurt parsers: regex-y, numeric-looking, control characters, unicode. */
const NASTY = [
  '',
  ' ',
  '\t',
  '\n',
  '\r\n',
  '\u0000',
  '\uFEFF',
  '\u200B',
  '\uD800',
  '\uDFFF',
  'é',
  'ß',
  'İ',
  'ﬁ',
  '😀',
  '👩‍👩‍👧',
  'Ω',
  '\u202E',
  'true',
  'True',
  'TRUE',
  'false',
  'yes',
  'null',
  'undefined',
  'NaN',
  'Infinity',
  '-Infinity',
  '0',
  '-0',
  '+0',
  '00',
  '0x10',
  '1e3',
  '1e309',
  '-1',
  '2147483647',
  '2147483648',
  '-2147483649',
  '9007199254740993',
  '1.5',
  '.5',
  '5.',
  '1_000',
  '%',
  '50%',
  '100%',
  '101%',
  '0%',
  '-5%',
  '%%',
  '1%%',
  ' 1% ',
  '1s',
  '1h30m',
  '1.5h',
  '-1s',
  '1d',
  '1w',
  '1y',
  '1y1y',
  '0s',
  '1µs',
  '1us',
  '1ns',
  '9223372036854775807ns',
  '9223372036854775808ns',
  '300000000h',
  '2024-01-02T03:04:05Z',
  '2024-02-30T00:00:00Z',
  '0000-01-01T00:00:00Z',
  '9999-12-31T23:59:59.999999999+23:59',
  '2024-01-02T03:04:05',
  '(',
  ')',
  '[',
  ']',
  '{',
  '}',
  '\\',
  '/',
  '//',
  '|',
  '^',
  '$',
  '.*',
  '.+',
  '(a+)+',
  '(a|a)*',
  '(?:',
  '(?=x)',
  '(?<n>x)',
  '(?P<n>x)',
  '\\1',
  '[[:alpha:]]',
  '\\Q',
  '\\p{L}',
  '(?i)',
  '(?U)',
  'a{1,}',
  'a{0,16}',
  'a{,5}',
  '[]',
  '[^]',
  '[]a]',
  'key=value',
  'a=b,c',
  'a in (b)',
  'a notin ()',
  '!a',
  'a!=b',
  'a==b',
  'a<1',
  'a>1',
  ',',
  '=',
  '==',
  '!=',
  'a,',
  ',a',
  'in',
  'notin',
  '( ,',
  'http://',
  'http://x',
  'http://[::1]:80/p',
  'http://h:port/',
  'x://@',
  'scheme://user@host:1/path?q#f',
  'grafana.com/no-downscale',
  'rollout-group',
  '{"a":"b"}',
  '{"a":1}',
  '[]',
  '{}',
  'null',
  '{"__proto__":{"x":"y"}}',
  '{"constructor":"x"}',
  '{',
  '{"a":',
  'configmap/ns/name',
  'secret//x',
  'configmap/a/b/c',
];

/** A string from the nasty list, fast-check's strings (ASCII, full unicode, graphemes), or a mix of both. */
export const nastyString: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...NASTY) },
  { weight: 2, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  {
    weight: 2,
    arbitrary: fc.array(fc.constantFrom(...NASTY), { minLength: 1, maxLength: 6 }).map((parts) => parts.join('')),
  },
);

/** Long inputs: up to 100 KB, from repetition of a nasty unit (where linear parsers go quadratic and regexes backtrack). */
export const hugeString: fc.Arbitrary<string> = fc
  .tuple(
    nastyString.filter((s) => s.length > 0),
    fc.integer({ min: 1_000, max: 100_000 }),
    nastyString,
  )
  .map(([unit, length, tail]) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length) + tail);

/** Inputs for annotation/label parsers: mostly nasty strings, sometimes huge ones. */
export const metadataValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: nastyString },
  { weight: 1, arbitrary: hugeString },
);

// ------------------------------------------------------------------ JSON

/** Nested arrays `depth` deep: the shape that overflows recursive walkers. */
export function deepArray(depth: number, leaf: unknown = 0): unknown {
  let value: unknown = leaf;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** Nested objects `depth` deep under key `k`. */
export function deepObject(depth: number, key = 'k', leaf: unknown = 0): unknown {
  let value: unknown = leaf;
  for (let i = 0; i < depth; i++) value = { [key]: value };
  return value;
}

/**
 * A stand-in for a value nested `depth` deep, expanded by jsonBytes in the
 * JSON text itself (JSON.stringify cannot write deep nesting; JSON.parse, as
 * the server uses, reads it).
 */
export function deepMarker(kind: 'array' | 'object', depth: number): string {
  return `@@deep-${kind}-${depth}@@`;
}

function expandDeepMarkers(text: string): string {
  return text.replace(/"@@deep-(array|object)-(\d+)@@"/g, (_m, kind: string, depth: string) => {
    const n = Number(depth);
    return kind === 'array' ? `${'['.repeat(n)}0${']'.repeat(n)}` : `${'{"k":'.repeat(n)}0${'}'.repeat(n)}`;
  });
}

/** `doc` as the server would see it after JSON.parse: deep markers expanded into real nesting. */
export function materialize(doc: unknown): unknown {
  return JSON.parse(jsonBytes(doc, { op: 'none' }).toString('utf8'));
}

/** Values that are the wrong type almost everywhere: edge numbers, huge and unicode strings, deep nesting. */
export const weirdValue: fc.Arbitrary<unknown> = fc.oneof(
  // Cloned: mutate() edits inserted values in place, and constants are shared between runs.
  {
    weight: 4,
    arbitrary: fc
      .constantFrom<unknown>(
        null,
        true,
        false,
        0,
        -0,
        -1,
        1,
        1.5,
        -2.5,
        2 ** 31,
        2 ** 31 - 1,
        -(2 ** 31),
        -(2 ** 31) - 1,
        2 ** 53 + 2,
        Number.MAX_VALUE,
        1e308,
        [],
        {},
        [null],
        { '': '' },
      )
      .map((v) => structuredClone(v)),
  },
  { weight: 3, arbitrary: nastyString },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom(1_000, 100_000, 1_000_000).map((n) => 'x'.repeat(n)) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom<'array' | 'object'>('array', 'object'), fc.constantFrom(100, 10_000, 100_000))
      .map(([kind, depth]) => deepMarker(kind, depth)),
  },
  { weight: 1, arbitrary: fc.constantFrom(100, 3_000).map((n) => deepArray(n)) },
);

type Path = (string | number)[];

/** Paths to values inside `doc` (the root included), in a fixed order; not below depth 64 nor past `limit` paths. */
function pathsOf(doc: unknown, limit = 2_000): Path[] {
  const out: Path[] = [];
  const stack: { value: unknown; path: Path }[] = [{ value: doc, path: [] }];
  while (stack.length > 0 && out.length < limit) {
    const { value, path } = stack.shift()!;
    out.push(path);
    if (path.length >= 64) continue;
    if (Array.isArray(value)) value.forEach((v, i) => stack.push({ value: v, path: [...path, i] }));
    else if (typeof value === 'object' && value !== null)
      for (const [k, v] of Object.entries(value)) stack.push({ value: v, path: [...path, k] });
  }
  return out;
}

export type Mutation =
  | { op: 'delete'; at: number }
  | { op: 'replace'; at: number; value: unknown }
  | { op: 'add'; at: number; key: string; value: unknown }
  | { op: 'wrap'; at: number };

export const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({ op: fc.constant('replace' as const), at: fc.nat(), value: weirdValue }),
  fc.record({
    op: fc.constant('add' as const),
    at: fc.nat(),
    key: fc.oneof(
      nastyString,
      fc.constantFrom('uid', 'kind', 'apiVersion', 'spec', 'replicas', 'labels', 'metadata', 'dryRun', '__proto__'),
    ),
    value: weirdValue,
  }),
  fc.record({ op: fc.constant('wrap' as const), at: fc.nat() }),
);

/** A deep copy of `doc` with the mutations applied in order (each picks its target among the current paths). */
export function mutate(doc: unknown, mutations: readonly Mutation[]): unknown {
  let root = structuredClone(doc);
  for (const m of mutations) {
    const paths = pathsOf(root);
    const path = paths[m.at % paths.length]!;
    if (path.length === 0) {
      if (m.op === 'replace') root = m.value;
      else if (m.op === 'wrap') root = [root];
      else if (m.op === 'add' && typeof root === 'object' && root !== null && !Array.isArray(root))
        Object.defineProperty(root, m.key, { value: m.value, enumerable: true, writable: true, configurable: true });
      continue;
    }
    const parent = path.slice(0, -1).reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], root) as
      Record<string | number, unknown> | unknown[];
    const key = path[path.length - 1]!;
    if (m.op === 'delete') {
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete parent[key];
    } else if (m.op === 'replace') {
      (parent as Record<string | number, unknown>)[key] = m.value;
    } else if (m.op === 'wrap') {
      (parent as Record<string | number, unknown>)[key] = [(parent as Record<string | number, unknown>)[key]];
    } else {
      const target = (parent as Record<string | number, unknown>)[key];
      if (typeof target === 'object' && target !== null && !Array.isArray(target)) {
        Object.defineProperty(target, m.key, { value: m.value, enumerable: true, writable: true, configurable: true });
      } else {
        (parent as Record<string | number, unknown>)[key] = m.value;
      }
    }
  }
  return root;
}

/** A valid document, as is (a third of the time) or mutated 1–4 times (mostly once). */
export function mutated(valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  const count = fc.oneof(
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 3, arbitrary: fc.constant(1) },
    { weight: 1, arbitrary: fc.integer({ min: 2, max: 4 }) },
  );
  return fc
    .tuple(
      valid,
      count.chain((n) => fc.array(mutationArb, { minLength: n, maxLength: n })),
    )
    .map(([doc, ms]) => mutate(doc, ms));
}

/** `usual` most of the time, one of `others` now and then. */
export function mostly<T>(usual: T, ...others: T[]): fc.Arbitrary<T> {
  return fc.oneof({ weight: 4, arbitrary: fc.constant(usual) }, { weight: 1, arbitrary: fc.constantFrom(...others) });
}

export type TextMutation =
  | { op: 'none' }
  | { op: 'truncate'; at: number }
  | { op: 'byte'; at: number; byte: number }
  | { op: 'insert'; at: number; text: string }
  | { op: 'bom' };

export const textMutationArb: fc.Arbitrary<TextMutation> = fc.oneof(
  { weight: 12, arbitrary: fc.constant({ op: 'none' as const }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('byte' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('insert' as const),
      at: fc.nat(),
      text: fc.constantFrom(
        'NaN',
        'Infinity',
        '-',
        '1e400',
        ',',
        '}',
        '"',
        '\\u',
        '\u0000',
        '\uD800',
        '\uFEFF',
        '/*x*/',
        '"x":1,',
      ),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: 'bom' as const }) },
);

/** The JSON text of `doc` as bytes, with a byte-level mutation. */
export function jsonBytes(doc: unknown, m: TextMutation): Buffer {
  let text: string;
  try {
    text = expandDeepMarkers(JSON.stringify(doc) ?? 'undefined');
  } catch {
    text = '{"unserialisable":';
  }
  let bytes = Buffer.from(text, 'utf8');
  switch (m.op) {
    case 'none':
      break;
    case 'truncate':
      bytes = bytes.subarray(0, m.at % (bytes.length + 1));
      break;
    case 'byte': {
      bytes = Buffer.from(bytes);
      if (bytes.length > 0) bytes[m.at % bytes.length] = m.byte;
      break;
    }
    case 'insert': {
      const at = m.at % (bytes.length + 1);
      bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from(m.text, 'utf8'), bytes.subarray(at)]);
      break;
    }
    case 'bom':
      bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]);
      break;
  }
  return bytes;
}

// ---------------------------------------------------------------- regexes

// Regexes built from what people write (classes, groups, alternations, every
// quantifier), nested, so that the catastrophic shapes appear too.
const regexAtom = fc.constantFrom('a', 'b', '-', 'zone', '[a-z]', '[a-z0-9-]', '.', '\\d', '\\w', '\\-', '[^-]');
const regexQuantifier = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  { weight: 2, arbitrary: fc.constantFrom('*', '+', '?', '{0,16}', '{1,3}', '{2,}', '*?', '+?') },
);
const { regex: regexBody } = fc.letrec<{ regex: string; node: string }>((tie) => ({
  regex: fc.array(tie('node'), { minLength: 1, maxLength: 4 }).map((nodes) => nodes.join('')),
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 4, arbitrary: fc.tuple(regexAtom, regexQuantifier).map(([a, q]) => a + q) },
    { weight: 1, arbitrary: fc.tuple(tie('regex'), regexQuantifier).map(([r, q]) => `(?:${r})${q}`) },
    {
      weight: 1,
      arbitrary: fc.tuple(tie('regex'), tie('regex'), regexQuantifier).map(([a, b, q]) => `(?:${a}|${b})${q}`),
    },
  ),
}));

/** One short piece repeated: a?a?a?…, (?:a|\w)(?:a|\w)…, a{0,3}a{0,3}…: every repetition multiplies the ways to match. */
const repeatedPiece = fc
  .tuple(
    fc.oneof(
      fc.tuple(regexAtom, fc.constantFrom('?', '{0,3}', '{0,16}', '*', '+?')).map(([a, q]) => a + q),
      fc.tuple(regexAtom, regexAtom).map(([a, b]) => `(?:${a}|${b})`),
      regexBody,
    ),
    fc.integer({ min: 2, max: 40 }),
  )
  .map(([piece, times]) => piece.repeat(times));

/** A regex source without capture groups. */
export const regexSource: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: regexBody },
  { weight: 1, arbitrary: fc.tuple(repeatedPiece, regexBody).map(([a, b]) => a + b) },
);

/** A regex source with at least one capture group. */
export const capturingRegexSource: fc.Arbitrary<string> = fc
  .tuple(regexSource, regexBody, regexBody, fc.boolean())
  .map(([before, inside, after, repeated]) => `${before}(${inside})${repeated ? '+' : ''}${after}`);

/** 1 to 32, then growing by an eighth up to the longest object name (253): no step lets a slow regex go from fast to hours. */
const NAME_LENGTHS: number[] = [];
for (let n = 1; n < 253; n = n < 32 ? n + 1 : Math.ceil(n * 1.125)) NAME_LENGTHS.push(n);
NAME_LENGTHS.push(253);

/**
 * Names a regex is matched against: `realistic` ones, then runs of one unit
 * with a tail that does not match (where backtracking explodes), a little
 * longer each, so that a catastrophic regex fails a time bound on a short
 * name instead of running for hours on a long one (shrinking tries many
 * such regexes).
 */
export function adversarialNames(
  realistic: readonly string[],
  units: readonly string[],
  tails: readonly string[],
): fc.Arbitrary<string[]> {
  return fc
    .tuple(fc.constantFrom(...units), fc.constantFrom(...tails))
    .map(([unit, tail]) => [
      ...realistic,
      ...NAME_LENGTHS.map((n) => unit.repeat(Math.ceil(n / unit.length)).slice(0, Math.max(1, n - tail.length)) + tail),
    ]);
}

// ------------------------------------------------------------ the API

export type Failure = 'transport' | 'server-error';

/** What a failed call rejects with: no answer at all (code 0), or a 500. */
export function apiError(failure: Failure, method: string): KubeApiError {
  return failure === 'transport'
    ? new KubeApiError({
        code: 0,
        reason: 'NetworkError',
        message: 'connect ECONNREFUSED 127.0.0.1:1',
        method,
        path: '/fuzz',
      })
    : new KubeApiError({
        code: 500,
        reason: 'InternalError',
        message: 'etcdserver: request timed out',
        method,
        path: '/fuzz',
      });
}

/** A KubeClient whose every method rejects: the handlers' input handling is under test, not the API. */
export function failingClient(failure: Failure): { client: KubeClient; calls: string[] } {
  const calls: string[] = [];
  const client = new Proxy(
    {},
    {
      get: (_target, property) => {
        if (typeof property !== 'string' || property === 'then') return undefined;
        return (..._args: unknown[]) => {
          calls.push(property);
          return Promise.reject(apiError(failure, property.toUpperCase()));
        };
      },
    },
  ) as unknown as KubeClient;
  return { client, calls };
}

/** An informer stand-in over a fixed set of objects, synced or not, with the real store and indexers. */
export function fakeInformer<T extends KubeObject>(
  objects: readonly T[],
  options: { synced?: boolean; indexers?: Record<string, IndexFunc<T>> } = {},
): Informer<T> {
  const store = new IndexedStore<T>(options.indexers ?? {});
  for (const o of objects) store.set(objectKey(o), o);
  const synced = options.synced ?? true;
  const fake = {
    namespace: undefined,
    name: 'fake',
    hasSynced: () => synced,
    get: (namespace: string | undefined, name: string) => store.get(namespace ? `${namespace}/${name}` : name),
    getByKey: (key: string) => store.get(key),
    list: () => store.list(),
    byIndex: (index: string, value: string) => store.byIndex(index, value),
    addHandlers: (handlers: { onAdd?: (o: T, initial: boolean) => void }) => {
      if (synced) for (const o of store.list()) handlers.onAdd?.(o, true);
      return () => undefined;
    },
  };
  return fake as unknown as Informer<T>;
}
