// Go regular expressions (src/runtime/go/regexp.ts) held to Go itself: the
// answers in regexp/go-results.json come from Go's regexp package
// (regexp/generate.ts), for hand-written Go syntax and for random patterns
// of a small grammar. Then properties: any pattern of the grammar matches
// the same language as a backtracking engine, and patterns that make
// backtracking engines take exponential time run in linear time here.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { compileGoRegexp, GoRegexp, type Submatches } from '../../../src/runtime/go/regexp.ts';

interface GoResult {
  p: string;
  err?: string;
  groups: number;
  in?: string[];
  whole?: (string | null)[][];
  find?: (string | null)[][];
}

const goResults = JSON.parse(
  readFileSync(join(import.meta.dirname, 'regexp', 'go-results.json'), 'utf8'),
) as GoResult[];

function compiled(pattern: string): GoRegexp {
  const r = compileGoRegexp(pattern);
  assert.ok('regexp' in r, `${pattern}: ${JSON.stringify(r)}`);
  return r.regexp;
}

/** As go-results.json writes them: null for no match and for a group that took no part. */
const asGo = (m: Submatches | undefined) => (m === undefined ? null : m.map((g) => g ?? null));

describe('Go regular expressions: what Go answers', { timeout: 30_000 }, () => {
  it(`accepts and refuses what Go does, with Go's error text (${goResults.filter((r) => r.err).length} refused patterns)`, () => {
    for (const go of goResults) {
      const r = GoRegexp.compile(go.p);
      if (go.err !== undefined) assert.deepEqual(r, { error: go.err }, go.p);
      else assert.ok('regexp' in r, `${go.p} is valid Go, got ${JSON.stringify(r)}`);
    }
  });

  it(`numbers groups and finds the same submatches, whole and anywhere (${goResults.filter((r) => !r.err).length} patterns, ${goResults.reduce((n, r) => n + (r.in?.length ?? 0), 0)} inputs)`, () => {
    for (const go of goResults) {
      if (go.err !== undefined) continue;
      const re = compiled(go.p);
      assert.equal(re.numSubexp, go.groups, go.p);
      go.in!.forEach((input, i) => {
        const what = `${go.p} on ${JSON.stringify(input)}`;
        assert.deepEqual(asGo(re.submatchWhole(input)), go.whole![i], `whole: ${what}`);
        assert.deepEqual(asGo(re.findStringSubmatch(input)), go.find![i], `find: ${what}`);
        assert.equal(re.matchWhole(input), go.whole![i] !== null, `matchWhole: ${what}`);
        assert.equal(re.matchString(input), go.find![i] !== null, `matchString: ${what}`);
      });
    }
  });

  it('finds the partition of rollout-operator-style pod names with ([a-z]+-)*zone-([a-z])-(\\d+)', () => {
    const re = compiled('([a-z]+-)*zone-([a-z])-(\\d+)');
    assert.equal(re.numSubexp, 3);
    assert.deepEqual(re.submatchWhole('ingester-zone-a-0'), ['ingester-zone-a-0', 'ingester-', 'a', '0']);
    assert.deepEqual(
      re.submatchWhole('mimir-ingester-zone-b-12'),
      ['mimir-ingester-zone-b-12', 'ingester-', 'b', '12'],
      'a repeated group holds its last iteration, as in Go',
    );
    assert.deepEqual(re.submatchWhole('zone-c-3'), ['zone-c-3', undefined, 'c', '3']);
    assert.equal(re.submatchWhole('ingester-zone-a-0x'), undefined);
    assert.equal(re.submatchWhole('ingester-zone-ab-0'), undefined);
  });

  it('keeps what a textual ^(?:…)$ wrap would change: \\Q… to the end, a)|(b', () => {
    assert.ok(compiled('\\Qa.b').matchWhole('a.b'));
    assert.ok(!compiled('\\Qa.b').matchWhole('a.b)$'));
    assert.deepEqual(compileGoRegexp('a)|(b'), { error: 'error parsing regexp: unexpected ): `a)|(b`' });
  });

  it('accepts a name on several groups, as Go (RE2/J refuses it), numbering them in order', () => {
    const re = compiled('(?P<n>[a-z]+)-(?P<n>\\d+)|[(?P<n>]');
    assert.deepEqual(re.submatchWhole('a-1'), ['a-1', 'a', '1']);
    assert.ok(re.matchWhole('<'), 'a name inside a class is no group');
  });

  it('reads a lone surrogate as U+FFFD, as Go would have decoded it from JSON', () => {
    const re = compiled('x\uD800');
    assert.ok(re.matchWhole('x\uFFFD'));
    assert.ok(re.matchWhole('x\uD800'));
  });

  it('compiles a pattern once: the same answer again, also for a refusal, with the cache bounded', () => {
    assert.equal(compileGoRegexp('team-(a|b)'), compileGoRegexp('team-(a|b)'));
    assert.equal(compileGoRegexp('team-('), compileGoRegexp('team-('));
    for (let i = 0; i < 1_100; i++) assert.ok('regexp' in compileGoRegexp(`p${i}-(\\d+)`));
    assert.equal(compiled('p1099-(\\d+)').submatchWhole('p1099-7')?.[1], '7');
    assert.equal(compiled('p0-(\\d+)').submatchWhole('p0-7')?.[1], '7', 'compiled again once evicted');
  });

  it('refuses a program past Go\'s size limit as Go does ("expression too large")', () => {
    const r = compileGoRegexp('a{1000}'.repeat(3400));
    assert.ok('error' in r);
    assert.match(r.error, /^error parsing regexp: expression too large: `a\{1000\}a\{1000\}/);
    assert.ok('regexp' in compileGoRegexp('a{1000}'.repeat(30)));
  });
});

// ------------------------------------------------------------ properties

/** Patterns of a small grammar (as regexp/generate.ts draws them for Go): literals, classes, groups, alternation, greedy and lazy quantifiers, nested. */
const pattern: fc.Arbitrary<string> = fc
  .letrec<{ expr: string; seq: string; atom: string }>((tie) => ({
    expr: fc.oneof(
      { depthSize: 'xsmall', withCrossShrink: true },
      tie('seq'),
      fc.tuple(tie('seq'), tie('seq')).map(([a, b]) => `${a}|${b}`),
    ),
    seq: fc
      .array(
        fc
          .tuple(tie('atom'), fc.constantFrom('', '', '*', '+', '?', '*?', '+?', '??', '{0,2}', '{1,3}', '{2}'))
          .map(([a, q]) => a + q),
        { minLength: 1, maxLength: 3 },
      )
      .map((parts) => parts.join('')),
    atom: fc.oneof(
      { depthSize: 'xsmall', withCrossShrink: true },
      fc.constantFrom('a', 'b', '-', '.', '[ab]', '[^a]', '\\d'),
      tie('expr').map((e) => `(${e})`),
      tie('expr').map((e) => `(?:${e})`),
    ),
    // Short: the backtracking engine compared with takes seconds on some longer ones.
  }))
  .expr.filter((p) => p.length <= 60);

const input = fc.array(fc.constantFrom('a', 'b', '-', '1'), { maxLength: 8 }).map((cs) => cs.join(''));

describe('Go regular expressions: properties', { timeout: 60_000 }, () => {
  it('property: a pattern matches the same strings as a backtracking engine (whole and anywhere)', () => {
    fc.assert(
      fc.property(pattern, fc.array(input, { minLength: 1, maxLength: 6 }), (p, inputs) => {
        const re = compiled(p);
        const whole = new RegExp(`^(?:${p})$`);
        const anywhere = new RegExp(p);
        for (const s of inputs) {
          assert.equal(re.matchWhole(s), whole.test(s), `${p} on ${JSON.stringify(s)}`);
          assert.equal(re.submatchWhole(s) !== undefined, whole.test(s), `${p} on ${JSON.stringify(s)}`);
          assert.equal(re.matchString(s), anywhere.test(s), `${p} anywhere in ${JSON.stringify(s)}`);
          // The leftmost match starts where a backtracking engine's does (its extent may differ: Go's empty-loop rules).
          assert.equal(re.findStringSubmatch(s) === undefined, anywhere.exec(s) === null);
        }
      }),
      { numRuns: 400, seed: 17 },
    );
  });

  it('property: nested quantifiers run in linear time (the inputs make a backtracking engine take exponential time)', () => {
    // (x+)+y-style: a repeated group whose body can match the same text in many ways.
    const nested = fc
      .tuple(
        fc.constantFrom('a', 'a?', 'a*', 'a+', 'a|aa', 'a|a', '(?:a*)*'),
        fc.constantFrom('*', '+', '{1,100}'),
        fc.constantFrom('b', '$', 'c|d', '(b)'),
        fc.boolean(),
      )
      .map(([body, outer, tail, capture]) => `${capture ? '(' : '(?:'}${body})${outer}${tail}`);
    fc.assert(
      fc.property(nested, (p) => {
        const re = compiled(p);
        const started = performance.now();
        for (const s of ['a'.repeat(2_000) + '!', 'a'.repeat(2_000) + 'x' + 'a'.repeat(500)]) {
          re.matchWhole(s);
          re.submatchWhole(s);
          re.findStringSubmatch(s);
        }
        // A bound, not a target: a backtracking engine takes longer than the universe has existed on some of these.
        assert.ok(performance.now() - started < 5_000, `${p} took ${performance.now() - started} ms`);
      }),
      { numRuns: 30, seed: 5 },
    );
  });

  it('(a*)*b against 10,000 "a"s answers in well under a second', () => {
    const re = compiled('(a*)*b');
    const s = 'a'.repeat(10_000);
    const started = performance.now();
    assert.equal(re.matchWhole(s), false);
    assert.equal(re.submatchWhole(s), undefined);
    assert.equal(re.findStringSubmatch(s), undefined);
    assert.equal(re.matchString(s), false);
    assert.ok(performance.now() - started < 1_000, `${performance.now() - started} ms`);
  });
});
