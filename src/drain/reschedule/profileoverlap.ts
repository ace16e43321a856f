// Whether two reschedule profiles could select one pod: a pod selected by two
// would get two operators' annotations and be judged twice, so configured
// overlaps are a startup error (profiles.ts).
//
// The rule (docs/drain.md, "Overlapping profiles"): two profiles overlap when
//   - their namespace scopes intersect, and
//   - their owner kinds intersect (a profile without owner kinds has any), and
//   - one selector of each, with the profiles' label patterns, constrains at
//     least one label key in common, and every key's constraints from both
//     sides can hold at once.
// Profiles on disjoint label keys are taken to be apart: operators label their
// pods with their own keys, and a pod carrying two operators' labels cannot be
// seen at startup (at run time the first profile judges it, with a warning).
// Identical selectors and a selector that narrows another always share keys,
// so they are always caught.
//
// Regexes cannot be intersected cheaply in general; two on one key are apart
// only when provably so (their literal prefixes or suffixes conflict, as
// `.+-kafka` and `.+-zookeeper` do, or a finite `in` list decides it).
// Anything unproven counts as an overlap: a false alarm can be fixed by
// rewording a regex, a missed overlap would judge a pod twice.
import type { LabelSelector } from '../../vocabulary/selectors.ts';
import type { LabelPattern, RescheduleConfig } from './rescheduleconfig.ts';

/** Everything one side says about one label key. */
interface KeyConstraints {
  /** Each `=`/`in` requirement's values; the value must be in all. */
  inSets: (readonly string[])[];
  notIn: Set<string>;
  exists: boolean;
  absent: boolean;
  patterns: LabelPattern[];
}

const emptyConstraints = (): KeyConstraints => ({
  inSets: [],
  notIn: new Set(),
  exists: false,
  absent: false,
  patterns: [],
});

function constraintsOf(selector: LabelSelector, patterns: readonly LabelPattern[]): Map<string, KeyConstraints> {
  const byKey = new Map<string, KeyConstraints>();
  const at = (key: string) => {
    let c = byKey.get(key);
    if (c === undefined) byKey.set(key, (c = emptyConstraints()));
    return c;
  };
  for (const r of selector.requirements) {
    const c = at(r.key);
    if (r.operator === 'Equals' || r.operator === 'In') c.inSets.push(r.values);
    else if (r.operator === 'NotEquals' || r.operator === 'NotIn') for (const v of r.values) c.notIn.add(v);
    else if (r.operator === 'Exists') c.exists = true;
    else c.absent = true;
  }
  for (const p of patterns) at(p.key).patterns.push(p);
  return byKey;
}

function merge(a: KeyConstraints | undefined, b: KeyConstraints | undefined): KeyConstraints {
  const x = a ?? emptyConstraints();
  const y = b ?? emptyConstraints();
  return {
    inSets: [...x.inSets, ...y.inSets],
    notIn: new Set([...x.notIn, ...y.notIn]),
    exists: x.exists || y.exists,
    absent: x.absent || y.absent,
    patterns: [...x.patterns, ...y.patterns],
  };
}

/** Whether some label value (or its absence) meets every constraint; unproven regex intersections count as yes. */
export function keySatisfiable(c: KeyConstraints): boolean {
  const mustExist = c.exists || c.inSets.length > 0 || c.patterns.length > 0;
  if (!mustExist) return true; // absent meets notin and !key
  if (c.absent) return false;
  const [first, ...rest] = c.inSets;
  if (first !== undefined) {
    const candidates = first.filter((v) => rest.every((s) => s.includes(v)) && !c.notIn.has(v));
    return candidates.some((v) => c.patterns.every((p) => p.regex.test(v)));
  }
  for (let i = 0; i < c.patterns.length; i++)
    for (let j = i + 1; j < c.patterns.length; j++)
      if (patternsApart(c.patterns[i]!.source, c.patterns[j]!.source)) return false;
  return true;
}

// ------------------------------------------------------------ regex literals

/** One alternative of a regex as atoms: a literal character, or anything else (undefined). */
type Atom = string | undefined;

/** Characters that stand for themselves when escaped with a backslash. */
const ESCAPED_LITERAL = /^[-.\\/^$*+?()[\]{}|]$/;
const QUANTIFIER = /^[*+?{]$/;

/** Top-level alternatives of a regex source, each as atoms; a quantified atom is not a literal. */
export function alternatives(source: string): Atom[][] {
  const result: Atom[][] = [[]];
  let i = 0;
  const push = (atom: Atom) => result[result.length - 1]!.push(atom);
  while (i < source.length) {
    const ch = source[i]!;
    let atom: Atom;
    if (ch === '|') {
      result.push([]);
      i++;
      continue;
    } else if (ch === '\\') {
      const next = source[i + 1] ?? '';
      atom = ESCAPED_LITERAL.test(next) ? next : undefined;
      i += 2;
    } else if (ch === '[') {
      i = skipClass(source, i);
    } else if (ch === '(') {
      i = skipGroup(source, i);
    } else {
      atom = '.^$*+?{})]'.includes(ch) ? undefined : ch;
      i++;
    }
    if (i < source.length && QUANTIFIER.test(source[i]!)) {
      atom = undefined;
      i = skipQuantifier(source, i);
    }
    push(atom);
  }
  return result;
}

function skipClass(source: string, start: number): number {
  let i = start + 1;
  if (source[i] === '^') i++;
  if (source[i] === ']') i++;
  while (i < source.length && source[i] !== ']') i += source[i] === '\\' ? 2 : 1;
  return i + 1;
}

function skipGroup(source: string, start: number): number {
  let depth = 0;
  let i = start;
  while (i < source.length) {
    const ch = source[i]!;
    if (ch === '\\') i += 2;
    else if (ch === '[') i = skipClass(source, i);
    else {
      if (ch === '(') depth++;
      else if (ch === ')' && --depth === 0) return i + 1;
      i++;
    }
  }
  return i;
}

function skipQuantifier(source: string, start: number): number {
  let i = start;
  if (source[i] === '{') {
    const close = source.indexOf('}', i);
    i = close < 0 ? source.length : close + 1;
  } else i++;
  return source[i] === '?' ? i + 1 : i;
}

function literalRun(atoms: readonly Atom[]): string {
  let out = '';
  for (const a of atoms) {
    if (a === undefined) break;
    out += a;
  }
  return out;
}

const conflict = (a: string, b: string, test: (x: string, y: string) => boolean) => !test(a, b) && !test(b, a);

/** Whether no string can match both alternatives (proven by their literal prefixes or suffixes). */
function alternativesApart(a: readonly Atom[], b: readonly Atom[]): boolean {
  if (conflict(literalRun(a), literalRun(b), (x, y) => x.startsWith(y))) return true;
  const suffix = (atoms: readonly Atom[]) => [...literalRun([...atoms].reverse())].reverse().join('');
  return conflict(suffix(a), suffix(b), (x, y) => x.endsWith(y));
}

/** Whether two full-match regexes provably match no common string. */
export function patternsApart(a: string, b: string): boolean {
  const altsA = alternatives(a);
  const altsB = alternatives(b);
  return altsA.every((x) => altsB.every((y) => alternativesApart(x, y)));
}

// ---------------------------------------------------------------- profiles

function namespacesMeet(a: RescheduleConfig, b: RescheduleConfig): boolean {
  if (a.namespaces === undefined || b.namespaces === undefined) return true;
  return [...a.namespaces].some((ns) => b.namespaces!.has(ns));
}

function ownerKindsMeet(a: RescheduleConfig, b: RescheduleConfig): boolean {
  if (a.ownerKinds === undefined || b.ownerKinds === undefined) return true;
  return [...a.ownerKinds].some((k) => b.ownerKinds!.has(k));
}

/** Two selectors (each with its profile's patterns) by the rule above: the keys they share, or undefined if apart. */
function selectorsMeet(
  a: LabelSelector,
  aPatterns: readonly LabelPattern[],
  b: LabelSelector,
  bPatterns: readonly LabelPattern[],
): string[] | undefined {
  const ca = constraintsOf(a, aPatterns);
  const cb = constraintsOf(b, bPatterns);
  const shared = [...ca.keys()].filter((k) => cb.has(k));
  if (shared.length === 0) return undefined;
  for (const key of new Set([...ca.keys(), ...cb.keys()]))
    if (!keySatisfiable(merge(ca.get(key), cb.get(key)))) return undefined;
  return shared;
}

/** The label keys through which two profiles overlap (non-empty), or undefined when they are apart. */
export function profilesOverlap(a: RescheduleConfig, b: RescheduleConfig): string[] | undefined {
  if (!namespacesMeet(a, b) || !ownerKindsMeet(a, b)) return undefined;
  for (const sa of a.selectors)
    for (const sb of b.selectors) {
      const shared = selectorsMeet(sa, a.labelPatterns ?? [], sb, b.labelPatterns ?? []);
      if (shared !== undefined) return shared;
    }
  return undefined;
}
