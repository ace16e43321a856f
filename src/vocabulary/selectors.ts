// Label selectors, one implementation for every capability: the string
// grammar `kubectl -l` takes (parse, match), a metav1.LabelSelector
// object (matchLabels and matchExpressions), and plain matchLabels as
// StatefulSets and ZoneAwarePodDisruptionBudgets use them.
import { quoteValue as quote } from '../runtime/log/logger.ts';

export type SelectorOperator = 'Equals' | 'NotEquals' | 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface LabelRequirement {
  key: string;
  operator: SelectorOperator;
  /** One value for Equals/NotEquals, one or more for In/NotIn, none otherwise. */
  values: readonly string[];
}

/** Requirements are AND-ed; no requirement matches every set of labels (as labels.Everything). */
export interface LabelSelector {
  requirements: readonly LabelRequirement[];
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

const NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** A qualified name (label or annotation key): `[prefix/]name`; undefined when valid. */
export function qualifiedNameProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined) {
    if (prefix === '') return `key ${quote(key)}: the prefix before "/" must not be empty`;
    if (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)) {
      return `key ${quote(key)}: prefix ${quote(prefix)} must be a lowercase DNS subdomain of at most 253 characters`;
    }
  }
  if (name === '') return `key ${quote(key)}: the name part must not be empty`;
  if (name.length > 63) return `key ${quote(key)}: the name part must be at most 63 characters`;
  if (!NAME_PART.test(name)) {
    return `key ${quote(key)}: the name part must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  }
  return undefined;
}

function labelValueProblem(value: string): string | undefined {
  if (value.length > 63) return `value ${quote(value)} must be at most 63 characters`;
  if (!LABEL_VALUE.test(value)) {
    return `value ${quote(value)} must be empty or alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  }
  return undefined;
}

type Token =
  | { kind: 'word'; text: string } // an identifier; `in`/`notin` too, the parser decides by position
  | { kind: '(' | ')' | ',' | '!' | '=' | '==' | '!=' | '<' | '>' }
  | { kind: 'end' };

const END: Token = { kind: 'end' };
const isSpace = (code: number) => code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
/** `! = ( ) , < >`: each starts a symbol, and so ends a word. */
const isSymbolStart = (code: number) =>
  code === 0x21 || code === 0x3d || code === 0x28 || code === 0x29 || code === 0x2c || code === 0x3c || code === 0x3e;

/**
 * Splits like apimachinery's lexer: symbols and whitespace end a word.
 * Lazy, one token of lookahead: the parser stops at the first error, so a
 * long bad value (annotations may be 256 KiB) is read only up to it rather
 * than cut into tens of thousands of tokens first.
 */
function lexer(text: string): { peek: () => Token; next: () => Token } {
  let i = 0;
  let ahead: Token | undefined;
  const scan = (): Token => {
    while (i < text.length && isSpace(text.charCodeAt(i))) i++;
    if (i >= text.length) return END;
    const c = text.charCodeAt(i);
    if (isSymbolStart(c)) {
      const doubled = text.charCodeAt(i + 1) === 0x3d && (c === 0x21 || c === 0x3d); // != and ==
      const kind = text.slice(i, doubled ? i + 2 : i + 1) as Exclude<Token['kind'], 'word' | 'end'>;
      i += kind.length;
      return { kind };
    }
    const start = i;
    while (i < text.length && !isSpace(text.charCodeAt(i)) && !isSymbolStart(text.charCodeAt(i))) i++;
    return { kind: 'word', text: text.slice(start, i) };
  };
  return {
    peek: () => (ahead ??= scan()),
    next: () => {
      const token = ahead ?? scan();
      ahead = undefined;
      return token;
    },
  };
}

const show = (t: Token) => (t.kind === 'word' ? quote(t.text) : t.kind === 'end' ? 'end of string' : `'${t.kind}'`);

/**
 * Parses a label selector string as `kubectl -l` takes it: requirements
 * separated by commas, each `key`, `!key`, `key=v`, `key==v`, `key!=v`,
 * `key in (a,b)` or `key notin (a,b)`. Set-based `>`/`<` are refused (only
 * node selectors use them). An empty string is the match-everything selector.
 */
export function parseLabelSelector(text: string): Parsed<LabelSelector> {
  const { peek, next } = lexer(text);
  const fail = (error: string): Parsed<LabelSelector> => ({
    ok: false,
    error: `label selector ${quote(text)}: ${error}`,
  });
  const requirements: LabelRequirement[] = [];
  if (peek().kind === 'end') return { ok: true, value: { requirements } };

  for (;;) {
    let token = next();
    const negated = token.kind === '!';
    if (negated) token = next();
    if (token.kind !== 'word') return fail(`found ${show(token)}, expected a label key`);
    const key = token.text;
    const keyProblem = qualifiedNameProblem(key);
    if (keyProblem !== undefined) return fail(keyProblem);

    const op = peek();
    if (negated || op.kind === ',' || op.kind === 'end') {
      requirements.push({ key, operator: negated ? 'DoesNotExist' : 'Exists', values: [] });
    } else {
      next();
      let operator: SelectorOperator;
      let values: string[];
      if (op.kind === '=' || op.kind === '==' || op.kind === '!=') {
        operator = op.kind === '!=' ? 'NotEquals' : 'Equals';
        // `key=` (end or comma follows) is the empty value, as upstream.
        const v = peek();
        if (v.kind === ',' || v.kind === 'end') values = [''];
        else if (v.kind === 'word') {
          next();
          values = [v.text];
        } else return fail(`found ${show(v)} after ${key}${op.kind}, expected a value`);
      } else if (op.kind === 'word' && (op.text === 'in' || op.text === 'notin')) {
        operator = op.text === 'in' ? 'In' : 'NotIn';
        const list = parseValueList();
        if (typeof list === 'string') return fail(list);
        values = list;
      } else if (op.kind === '<' || op.kind === '>') {
        return fail(`operator '${op.kind}' is not supported (use =, ==, !=, in, notin, key or !key)`);
      } else {
        return fail(`found ${show(op)} after key ${quote(key)}, expected =, ==, !=, in, notin, ',' or end of string`);
      }
      for (const value of values) {
        const problem = labelValueProblem(value);
        if (problem !== undefined) return fail(`${key}: ${problem}`);
      }
      requirements.push({ key, operator, values });
    }

    const after = next();
    if (after.kind === 'end') return { ok: true, value: { requirements } };
    if (after.kind !== ',') return fail(`found ${show(after)}, expected ',' or end of string`);
    if (peek().kind === 'end') return fail('trailing comma');
  }

  /** `( v, v, … )`; empty items are empty values, `()` is the one empty value (as upstream). */
  function parseValueList(): string[] | string {
    const open = next();
    if (open.kind !== '(') return `found ${show(open)}, expected '('`;
    const values: string[] = [];
    let current = '';
    for (;;) {
      const t = next();
      if (t.kind === 'word') {
        if (current !== '') return `found ${show(t)} in a value list, expected ',' or ')'`;
        current = t.text;
      } else if (t.kind === ',') {
        values.push(current);
        current = '';
      } else if (t.kind === ')') {
        values.push(current);
        return values;
      } else {
        return `found ${show(t)} in a value list, expected a value, ',' or ')'`;
      }
    }
  }
}

/** Kubernetes semantics: `!=` and `notin` also match pods without the label. */
export function matchesLabelSelector(
  selector: LabelSelector,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  const all = labels ?? {};
  return selector.requirements.every((r) => {
    const has = Object.hasOwn(all, r.key);
    const value = has ? all[r.key] : undefined;
    switch (r.operator) {
      case 'Exists':
        return has;
      case 'DoesNotExist':
        return !has;
      case 'Equals':
      case 'In':
        return value !== undefined && r.values.includes(value);
      case 'NotEquals':
      case 'NotIn':
        return value === undefined || !r.values.includes(value);
    }
  });
}

/** A metav1.LabelSelector object as the API carries it. */
export interface LabelSelectorSpec {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

/** metav1.LabelSelector semantics; an absent selector selects everything, an unknown operator nothing. */
export function labelSelectorMatches(
  selector: LabelSelectorSpec | undefined,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  if (selector === undefined) return true;
  const requirements: LabelRequirement[] = Object.entries(selector.matchLabels ?? {}).map(([key, value]) => ({
    key,
    operator: 'Equals',
    values: [value],
  }));
  for (const e of selector.matchExpressions ?? []) {
    if (e.operator !== 'In' && e.operator !== 'NotIn' && e.operator !== 'Exists' && e.operator !== 'DoesNotExist')
      return false;
    requirements.push({ key: e.key, operator: e.operator, values: e.values ?? [] });
  }
  return matchesLabelSelector({ requirements }, labels);
}

/** Every key of `matchLabels` has its value in `labels`; no key matches everything. */
export function matchLabelsSelect(
  matchLabels: Readonly<Record<string, string>>,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  return Object.entries(matchLabels).every(([k, v]) => labels?.[k] === v);
}
