import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { cleanPath } from '../../../src/runtime/go/path.ts';
import { prepareDownscalePath } from '../../../src/downscale/prepare/prepareplan.ts';

/**
 * A model of Go's path.Clean written from its documentation, not from any
 * implementation: each numbered rule applied on its own, the third until
 * nothing changes, over the list of elements.
 *   1. Replace multiple slashes with a single slash.
 *   2. Eliminate each . path name element (the current directory).
 *   3. Eliminate each inner .. path name element (the parent directory)
 *      along with the non-.. element that precedes it.
 *   4. Eliminate .. elements that begin a rooted path: that is, replace
 *      "/.." by "/" at the beginning of a path.
 * The result ends in a slash only if it is the root "/"; an empty result is ".".
 */
function modelClean(path: string): string {
  // Rule 1, on the text itself.
  const single = path.replace(/\/+/g, '/');
  const rooted = single.startsWith('/');
  // The elements between the slashes; a leading or trailing slash leaves an
  // empty name that is no element (a trailing slash is dropped by the last rule).
  let elements = single.split('/').filter((e) => e !== '');
  // Rule 2.
  elements = elements.filter((e) => e !== '.');
  // Rule 3, one pair at a time until none is left.
  for (;;) {
    const i = elements.findIndex((e, j) => j > 0 && e === '..' && elements[j - 1] !== '..');
    if (i < 0) break;
    elements = [...elements.slice(0, i - 1), ...elements.slice(i + 1)];
  }
  // Rule 4.
  if (rooted) while (elements[0] === '..') elements = elements.slice(1);
  const out = (rooted ? '/' : '') + elements.join('/');
  return out === '' ? '.' : out;
}

// Paths made of the pieces the rules are about, so that runs of slashes,
// dots, dot-dots and names that merely contain dots meet often.
const pathPieces = fc
  .array(fc.constantFrom('/', '//', '.', '..', '...', '.a', 'a.', 'a', 'bc', 'ingester', '\\', '?x=1', ' '), {
    maxLength: 16,
  })
  .map((pieces) => pieces.join(''));
const anyPath = fc.oneof(pathPieces, fc.string({ maxLength: 24 }), fc.string({ unit: 'grapheme', maxLength: 12 }));

describe("cleanPath (Go's path.Clean)", () => {
  it("Go's documented examples (ExampleClean in package path)", () => {
    const examples: [string, string][] = [
      ['a/c', 'a/c'],
      ['a//c', 'a/c'],
      ['a/c/.', 'a/c'],
      ['a/c/b/..', 'a/c'],
      ['/../a/c', '/a/c'],
      ['/../a/b/../././/c', '/a/c'],
      ['', '.'],
    ];
    for (const [input, want] of examples) assert.equal(cleanPath(input), want, JSON.stringify(input));
  });

  it('the documented special cases: the root keeps its slash, nothing left is "."', () => {
    for (const [input, want] of [
      ['/', '/'],
      ['//', '/'],
      ['/..', '/'],
      ['/../..', '/'],
      ['.', '.'],
      ['./', '.'],
      ['a/..', '.'],
      ['..', '..'],
      ['../..', '../..'],
      ['../a/../..', '../..'],
      ['a/../../b', '../b'],
      ['abc/', 'abc'],
      ['.../a', '.../a'],
    ] as const)
      assert.equal(cleanPath(input), want, JSON.stringify(input));
  });

  it('property: agrees with the model of the documented rules', () => {
    fc.assert(
      fc.property(anyPath, (path) => {
        assert.equal(cleanPath(path), modelClean(path));
      }),
      { numRuns: 5000 },
    );
  });

  it('property: clean is idempotent, and its result has no //, no . or .. inside, no trailing /', () => {
    fc.assert(
      fc.property(anyPath, (path) => {
        const cleaned = cleanPath(path);
        assert.equal(cleanPath(cleaned), cleaned);
        assert.ok(!cleaned.includes('//'));
        if (cleaned !== '/') assert.ok(!cleaned.endsWith('/'));
        const elements = cleaned.split('/').filter((e) => e !== '');
        assert.ok(!elements.includes('.') || cleaned === '.');
        // Any .. left leads the path (an unrooted one), never follows a name.
        const firstName = elements.findIndex((e) => e !== '..');
        if (firstName >= 0) assert.ok(!elements.slice(firstName).includes('..'));
        if (cleaned.startsWith('/')) assert.ok(!elements.includes('..'));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('prepareDownscalePath (rollout-operator v0.39, #468)', () => {
  it('adds a leading slash only when missing, then cleans', () => {
    for (const [annotation, want] of [
      ['ingester/prepare-shutdown', '/ingester/prepare-shutdown'],
      ['/ingester/prepare-shutdown', '/ingester/prepare-shutdown'],
      ['//ingester/prepare-shutdown', '/ingester/prepare-shutdown'],
      ['a//b/../c', '/a/c'],
      ['ingester/prepare-shutdown/', '/ingester/prepare-shutdown'],
      ['../../prepare', '/prepare'],
      ['.', '/'],
    ] as const)
      assert.equal(prepareDownscalePath(annotation), want, JSON.stringify(annotation));
  });

  it('property: a rooted clean path, the model applied to the path with one leading slash', () => {
    fc.assert(
      fc.property(anyPath, (annotation) => {
        const path = prepareDownscalePath(annotation);
        assert.ok(path.startsWith('/'));
        assert.ok(!path.includes('//'));
        assert.equal(path, modelClean(`/${annotation}`));
      }),
      { numRuns: 2000 },
    );
  });
});
