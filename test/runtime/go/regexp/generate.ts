// Writes go-results.json: Go's own answers (go-results.go, run with the Go
// toolchain) for the patterns and inputs below, which
// test/runtime/go/regexp.test.ts holds src/runtime/go/regexp.ts to. Run again
// after changing the cases:
//
//   node test/runtime/go/regexp/generate.ts
//
// The cases: Go syntax written by hand (partition regexes, flags, named
// groups, \Q…\E, POSIX and Unicode classes, every parse error) and patterns
// drawn at random (fixed seed) from a small grammar of literals, classes,
// groups, alternations and greedy and lazy quantifiers, each with two
// strings it matches and four random ones.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

interface Case {
  p: string;
  in: string[];
}

const handWritten: Case[] = [
  {
    p: '([a-z]+-)*zone-([a-z])-(\\d+)',
    in: ['ingester-zone-a-0', 'mimir-ingester-zone-b-12', 'zone-c-3', 'ingester-zone-a-', 'ingester-zone-ab-1', 'x'],
  },
  { p: '[a-z\\-]+-zone-[a-z]-([0-9]+)', in: ['ingester-zone-a-0', 'a-zone-b-11', 'zone-a-0'] },
  { p: '(.*)-zone-.*-(\\d+)', in: ['ingester-zone-a-0', 'a-zone-b-zone-c-11'] },
  { p: 'ingester(-foo)?-zone-[a-z]-([0-9]+)', in: ['ingester-foo-zone-a-0', 'ingester-zone-a-1', 'foo'] },
  { p: 'foo-([0-9]+)|bar-([0-9]+)', in: ['foo-1', 'bar-2', 'xfoo-1', 'foo-1x'] },
  { p: '(?:(a)|b)+', in: ['ab', 'ba', 'bb'] },
  { p: '(|a)*', in: ['aa', ''] },
  { p: '(a*)+', in: ['b', '', 'aa'] },
  { p: '(a*)*', in: ['aaa', ''] },
  { p: '(a|ab)(c|bcd)(d*)', in: ['abcd'] },
  { p: '(a+|b+)*c', in: ['aabbc', 'c'] },
  { p: '(a+?)(a*)', in: ['aaa'] },
  { p: '(a??)(a*)', in: ['aaa'] },
  { p: '(.*?)-(\\d+)', in: ['a-b-12'] },
  { p: '(?U)(a+)(a*)', in: ['aaa'] },
  { p: '(?i)INGESTER-([0-9]+)', in: ['ingester-4', 'Ingester-5'] },
  { p: '(?i:A)b', in: ['ab', 'aB', 'Ab'] },
  { p: '(?i)k', in: ['\u212a', 'K', 'k'] },
  { p: '(?s).', in: ['\n'] },
  { p: '.', in: ['\n', '😀', 'é'] },
  { p: '(?m)^a$', in: ['a'] },
  { p: '\\A(a)\\z', in: ['a'] },
  { p: 'ingester-([0-9]+)\\z', in: ['ingester-4'] },
  { p: '(?P<zone>[a-z])-(?<ordinal>\\d+)', in: ['a-1'] },
  { p: '(?P<n>a)(?P<n>b)', in: ['ab', 'a'] },
  { p: '(?P<n>a)(?<n>b)|[(?P<n>x)]', in: ['ab', '(', 'x'] },
  { p: '\\Qa.b', in: ['a.b', 'axb'] },
  { p: '\\Qa)|(b', in: ['a)|(b', 'a'] },
  { p: '\\Qa.b\\E+', in: ['a.bb'] },
  { p: '\\Q\\E', in: [''] },
  { p: '[[:alpha:]]+-([[:digit:]]+)', in: ['ab-12', 'a1-2'] },
  { p: '[[:^alpha:]]', in: ['1', 'a'] },
  { p: '[[:word:]]+', in: ['a_1', 'a-1'] },
  { p: '\\pL+', in: ['ab', 'a1'] },
  { p: '\\p{Greek}+', in: ['αβ', 'ab'] },
  { p: '\\PL', in: ['1', 'a'] },
  { p: '\\p{^L}', in: ['1'] },
  { p: '[\\p{L}\\d]+', in: ['a1'] },
  { p: '\\w\\W\\s\\S\\d\\D', in: ['a- x1a'] },
  { p: '\\-x', in: ['-x'] },
  { p: '[\\d\\-]+', in: ['1-2'] },
  { p: '[]a]', in: [']', 'a'] },
  { p: '[^]a]', in: ['b', ']'] },
  { p: '[a-]', in: ['-'] },
  { p: '[a&&b]', in: ['&'] },
  { p: 'a{,2}', in: ['a{,2}', 'aa'] },
  { p: 'a{2', in: ['a{2'] },
  { p: 'a{0}', in: [''] },
  { p: '(a){0}', in: [''] },
  { p: 'a{1,1000}', in: ['aa'] },
  { p: '\\0\\01\\123\\x41\\x{42}\\v', in: ['\u0000\u0001SAB\u000b'] },
  { p: '😀+|[😀-😂]', in: ['😀😀', '😁'] },
  { p: '', in: ['', 'a'] },
  { p: '()', in: [''] },
  { p: 'a|', in: ['', 'a'] },
  { p: '|', in: [''] },
  { p: '(?:a|b|)+', in: ['ab'] },
  { p: 'a\\bb|\\Ba', in: ['ab', 'a'] },
  { p: '((((((((((a))))))))))', in: ['a'] },
  {
    p: '(((((((((((((((((((((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))))))))))))))))))))',
    in: ['a'],
  },
  // Refused by Go: the errors, word for word.
  ...[
    '(?=a)',
    '(?!a)',
    '(?<=a)b',
    '(?<!a)b',
    '(a)\\1',
    '\\8',
    '\\C',
    '\\Z',
    '\\e',
    '\\cA',
    '\\x{110000}',
    '(?P<>a)',
    '(?P<a-b>a)',
    '(?P<é>a)',
    '(?P<n',
    '(?x)a b',
    '(?z)a',
    '(?i',
    'a{1001}',
    '(a{500}){500}',
    '((a{100}){100}){100}',
    'a{2,1}',
    '[[:foo:]]',
    '\\p{Foo}',
    '[z-a]',
    '[a',
    '[]',
    '(a',
    'a)',
    'a**',
    'a*+',
    '*a',
    '?',
    'x\\',
    '('.repeat(1001) + ')'.repeat(1001),
    '(?P<n>a)(?P<n>b)(',
  ].map((p) => ({ p, in: [] })),
];

// ------------------------------------------------------------ random ones

let seed = 20261122;
const random = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const pick = <T>(from: readonly T[]): T => from[Math.floor(random() * from.length)]!;

type Sampler = () => string;
const ATOMS: [string, Sampler][] = [
  ['a', () => 'a'],
  ['b', () => 'b'],
  ['-', () => '-'],
  ['.', () => pick(['a', 'b', '-', '1'])],
  ['[ab]', () => pick(['a', 'b'])],
  ['[^a]', () => pick(['b', '-', '1'])],
  ['\\d', () => '1'],
];
const QUANTIFIERS: [string, number, number][] = [
  ['', 1, 1],
  ['', 1, 1],
  ['', 1, 1],
  ['*', 0, 3],
  ['+', 1, 3],
  ['?', 0, 1],
  ['*?', 0, 3],
  ['+?', 1, 3],
  ['??', 0, 1],
  ['{0,2}', 0, 2],
  ['{1,3}', 1, 3],
  ['{2}', 2, 2],
];

function expression(depth: number): { source: string; sample: Sampler } {
  const branches: { source: string; sample: Sampler }[] = [];
  for (let b = random() < 0.25 ? 2 : 1; b > 0; b--) {
    const parts: { source: string; sample: Sampler }[] = [];
    for (let n = Math.floor(random() * 3) + (random() < 0.1 ? 0 : 1); n > 0; n--) {
      const r = random();
      const [source, sample]: [string, Sampler] =
        depth < 3 && r < 0.25 ? group('(', depth) : depth < 3 && r < 0.35 ? group('(?:', depth) : pick(ATOMS);
      const [q, min, max] = pick(QUANTIFIERS);
      parts.push({
        source: source + q,
        sample: () => Array.from({ length: min + Math.floor(random() * (max - min + 1)) }, sample).join(''),
      });
    }
    branches.push({ source: parts.map((p) => p.source).join(''), sample: () => parts.map((p) => p.sample()).join('') });
  }
  return { source: branches.map((b) => b.source).join('|'), sample: () => pick(branches).sample() };
}

function group(open: string, depth: number): [string, Sampler] {
  const inner = expression(depth + 1);
  return [`${open}${inner.source})`, inner.sample];
}

const drawn: Case[] = [];
for (let i = 0; i < 150; i++) {
  const e = expression(0);
  const inputs = new Set([e.sample(), e.sample()]);
  while (inputs.size < 6)
    inputs.add(Array.from({ length: Math.floor(random() * 7) }, () => pick(['a', 'b', '-', '1'])).join(''));
  drawn.push({ p: e.source, in: [...inputs] });
}

// ---------------------------------------------------------------- Go

const here = import.meta.dirname;
const go = spawnSync('go', ['run', 'go-results.go'], {
  cwd: here,
  input: JSON.stringify([...handWritten, ...drawn]),
  encoding: 'utf8',
  maxBuffer: 64 << 20,
});
if (go.status !== 0) {
  console.error(go.stderr);
  process.exit(1);
}
const results = JSON.parse(go.stdout) as unknown[];
writeFileSync(join(here, 'go-results.json'), `${JSON.stringify(results, null, 0).replaceAll('},{', '},\n{')}\n`);
console.log(
  `wrote ${results.length} patterns' results (${go.stdout.length} bytes) with ${spawnSync('go', ['version'], { encoding: 'utf8' }).stdout.trim()}`,
);
