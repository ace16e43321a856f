// Go regular expressions (package regexp, RE2 syntax and semantics) for
// patterns users write for Go programs: a ZoneAwarePodDisruptionBudget's
// podNamePartitionRegex (rollout-operator) and Reloader's reload-list
// entries. Run by re2js, a JavaScript port of RE2/J, whose parser is a port
// of Go's regexp/syntax: the same syntax is accepted (Perl flags, as Go's
// regexp.Compile), the same leftmost-first match and submatches are found,
// numbered as Go numbers them, and matching takes time linear in the input
// whatever the pattern, so no pattern needs refusing as a backtracking risk.
//
// Where re2js and Go differ, this module follows Go:
//   - Go accepts the same name on several groups ((?P<n>a)(?P<n>b));
//     RE2/J refuses it. Such a pattern is compiled with its group names
//     dropped (names are never used here; numbering is unchanged).
//   - Error texts are Go's: "error parsing regexp: <problem>: `<part>`"
//     (re2js leaves out an empty part and the whole pattern Go quotes for
//     "expression nests too deeply").
//   - Go refuses a program larger than its maxSize (about 3.3 million
//     instructions) as "expression too large"; re2js compiles it. The same
//     limit is applied to re2js's program size, which is close to Go's
//     estimate but not identical at the boundary.
//   - A JavaScript string may hold a lone surrogate, which a Go string (or
//     JSON decoded by Go) cannot: it is read as U+FFFD, as Go's JSON decoder
//     would have, in patterns and inputs alike.
import { RE2JS, RE2JSSyntaxException } from 're2js';

/** Go's regexp/syntax maxSize: 128 MiB of 40-byte instructions. */
const GO_MAX_PROGRAM_SIZE = Math.floor((128 << 20) / 40);

/** Go's syntax.ErrLarge and ErrNestingDepth quote the whole pattern. */
const QUOTES_WHOLE_PATTERN = new Set(['expression too large', 'expression nests too deeply']);

/** A submatch that did not take part in the match is undefined (Go's FindStringSubmatchIndex gives -1 for it, FindStringSubmatch ""). */
export type Submatches = (string | undefined)[];

/** A compiled Go regular expression. */
export class GoRegexp {
  /** The pattern as written. */
  readonly source: string;
  /** Capture groups, Go's NumSubexp: group i of a submatch array is the i-th opening parenthesis of a capturing group. */
  readonly numSubexp: number;
  readonly #re: RE2JS;

  private constructor(source: string, re: RE2JS) {
    this.source = source;
    this.#re = re;
    this.numSubexp = re.groupCount();
  }

  /**
   * Go's regexp.Compile: the compiled expression, or Go's error text
   * ("error parsing regexp: missing closing ): `(a`").
   */
  static compile(pattern: string): { regexp: GoRegexp } | { error: string } {
    const cached = compiled.get(pattern);
    if (cached) {
      // Most recently used last.
      compiled.delete(pattern);
      compiled.set(pattern, cached);
      return cached;
    }
    const result = GoRegexp.compileNew(pattern);
    if (pattern.length <= MAX_CACHED_PATTERN_LENGTH) {
      if (compiled.size >= MAX_CACHED_PATTERNS) compiled.delete(compiled.keys().next().value!);
      compiled.set(pattern, result);
    }
    return result;
  }

  private static compileNew(pattern: string): { regexp: GoRegexp } | { error: string } {
    const source = pattern.toWellFormed();
    let re: RE2JS;
    try {
      re = withoutStacks(() => RE2JS.compile(source));
    } catch (error) {
      if (!isDuplicateName(error)) return { error: goError(error, source) };
      const unnamed = withoutGroupNames(source);
      try {
        re = withoutStacks(() => RE2JS.compile(unnamed));
      } catch (again) {
        // Errors that quote the whole pattern quote it as written.
        return { error: goError(again, source, unnamed) };
      }
    }
    if (re.programSize() > GO_MAX_PROGRAM_SIZE)
      return { error: `error parsing regexp: expression too large: \`${source}\`` };
    return { regexp: new GoRegexp(pattern, re) };
  }

  /** Go's MatchString: whether the expression matches anywhere in `s`. */
  matchString(s: string): boolean {
    return this.#re.test(s.toWellFormed());
  }

  /** Go's FindStringSubmatch: the leftmost match and its submatches, or undefined. */
  findStringSubmatch(s: string): Submatches | undefined {
    const m = this.#re.matcher(s.toWellFormed());
    return m.find() ? submatches(m, this.numSubexp) : undefined;
  }

  /** Whether the expression matches the whole of `s`: Go's MatchString of `^(?:re)$`. */
  matchWhole(s: string): boolean {
    return this.#re.testExact(s.toWellFormed());
  }

  /**
   * The submatches of a match of the whole of `s` (index 0 is `s`), or
   * undefined: Go's FindStringSubmatch of `^(?:re)$`, without rewriting the
   * pattern (a textual wrap would change `\Qa` or `a)|(b`).
   */
  submatchWhole(s: string): Submatches | undefined {
    const m = this.#re.matcher(s.toWellFormed());
    return m.matches() ? submatches(m, this.numSubexp) : undefined;
  }
}

/**
 * Compiled patterns (and refusals), most recently used last: the same
 * reload lists and partition regexes are compiled again on every change of
 * the objects that carry them. A GoRegexp holds no match state, so one can
 * serve every caller.
 */
const compiled = new Map<string, { regexp: GoRegexp } | { error: string }>();
const MAX_CACHED_PATTERNS = 1024;
const MAX_CACHED_PATTERN_LENGTH = 1024;

/**
 * Runs `f` with V8's stack capture off: re2js reports a bad pattern by
 * throwing, and the stack trace is most of what that costs (a 256-entry
 * reload list of bad entries is read twice as fast without). Synchronous,
 * so nothing else runs meanwhile.
 */
function withoutStacks<T>(f: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return f();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** Shorthand for GoRegexp.compile. */
export function compileGoRegexp(pattern: string): { regexp: GoRegexp } | { error: string } {
  return GoRegexp.compile(pattern);
}

function submatches(m: ReturnType<RE2JS['matcher']>, groups: number): Submatches {
  const out: Submatches = [];
  for (let i = 0; i <= groups; i++) out.push(m.group(i) ?? undefined);
  return out;
}

function isDuplicateName(error: unknown): boolean {
  return error instanceof RE2JSSyntaxException && error.error === 'duplicate capture group name';
}

function goError(error: unknown, source: string, compiled = source): string {
  if (error instanceof RE2JSSyntaxException) {
    const part = QUOTES_WHOLE_PATTERN.has(error.error) || error.input === compiled ? source : (error.input ?? '');
    return `error parsing regexp: ${error.error}: \`${part}\``;
  }
  return `error parsing regexp: ${error instanceof Error ? error.message : String(error)}`;
}

/**
 * The pattern with every validly named group `(?P<name>` / `(?<name>` made
 * a plain group `(`: the same groups in the same order. Only where Go would
 * read a group: not inside a character class, after a backslash or within
 * \Q…\E. Names Go refuses are left for the parser to report.
 */
const NAMED_GROUP = /\(\?P?<[A-Za-z0-9_]+>/y;

function withoutGroupNames(p: string): string {
  let out = '';
  let i = 0;
  while (i < p.length) {
    const c = p[i]!;
    if (c === '\\') {
      if (p[i + 1] === 'Q') {
        const end = p.indexOf('\\E', i + 2);
        const stop = end < 0 ? p.length : end + 2;
        out += p.slice(i, stop);
        i = stop;
        continue;
      }
      out += p.slice(i, i + 2);
      i += 2;
      continue;
    }
    if (c === '[') {
      const stop = classEnd(p, i);
      out += p.slice(i, stop);
      i = stop;
      continue;
    }
    NAMED_GROUP.lastIndex = i;
    const named = c === '(' ? NAMED_GROUP.exec(p) : null;
    if (named) {
      out += '(';
      i += named[0].length;
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

/** The index just past the character class opening at `start` (or the end of the pattern when it does not close). */
function classEnd(p: string, start: number): number {
  let i = start + 1;
  if (p[i] === '^') i++;
  // A ']' first in the class is a literal.
  if (p[i] === ']') i++;
  while (i < p.length) {
    if (p[i] === '\\') i += 2;
    else if (p.startsWith('[:', i)) {
      const close = p.indexOf(':]', i + 2);
      i = close < 0 ? i + 1 : close + 2;
    } else if (p[i] === ']') return i + 1;
    else i++;
  }
  return p.length;
}
