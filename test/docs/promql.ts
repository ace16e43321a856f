// The metric names a PromQL expression reads, found by a small tokenizer:
// identifiers that are not functions (followed by `(`), not keywords or
// aggregation operators, not label names inside `{…}` or in the label list of
// by/without/on/ignoring/group_left/group_right, and not Grafana variables.

const AGGREGATIONS = new Set([
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
  'limitk',
  'limit_ratio',
]);
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'atan2',
  'offset',
  'inf',
  'nan',
]);
/** Keywords followed by a parenthesised list of label names. */
const LABEL_LISTS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);

function skipString(expr: string, i: number): number {
  const quote = expr[i]!;
  for (let j = i + 1; j < expr.length; j++) {
    if (expr[j] === '\\' && quote !== '`') j++;
    else if (expr[j] === quote) return j + 1;
  }
  throw new Error(`unterminated string at ${i} in ${expr}`);
}

/** Index after the bracket closing the one at i, skipping strings. */
function skipBracketed(expr: string, i: number, open: string, close: string): number {
  let depth = 0;
  for (let j = i; j < expr.length;) {
    const c = expr[j]!;
    if (c === '"' || c === "'" || c === '`') {
      j = skipString(expr, j);
      continue;
    }
    if (c === open) depth++;
    else if (c === close && --depth === 0) return j + 1;
    j++;
  }
  throw new Error(`unbalanced ${open} at ${i} in ${expr}`);
}

function skipSpace(expr: string, i: number): number {
  while (i < expr.length && /\s/.test(expr[i]!)) i++;
  return i;
}

/** Metric names read by a PromQL expression, in order of first appearance. */
export function metricNames(expr: string): string[] {
  const names: string[] = [];
  let i = 0;
  while (i < expr.length) {
    const c = expr[i]!;
    if (c === '"' || c === "'" || c === '`') {
      i = skipString(expr, i);
    } else if (c === '#') {
      // A comment runs to the end of the line.
      while (i < expr.length && expr[i] !== '\n') i++;
    } else if (c === '{') {
      i = skipBracketed(expr, i, '{', '}');
    } else if (c === '[') {
      i = skipBracketed(expr, i, '[', ']');
    } else if (c === '$') {
      // A Grafana variable: $name, ${name}, ${name:format}.
      i++;
      if (expr[i] === '{') i = skipBracketed(expr, i, '{', '}');
      else while (i < expr.length && /[A-Za-z0-9_]/.test(expr[i]!)) i++;
    } else if (/[0-9.]/.test(c)) {
      // Numbers and durations (1e3, 0x1f, 5m, 1h30m).
      while (i < expr.length && /[0-9A-Za-z_.]/.test(expr[i]!)) i++;
    } else if (/[A-Za-z_:]/.test(c)) {
      let j = i;
      while (j < expr.length && /[A-Za-z0-9_:]/.test(expr[j]!)) j++;
      const word = expr.slice(i, j);
      const next = skipSpace(expr, j);
      i = j;
      const lower = word.toLowerCase();
      if (LABEL_LISTS.has(lower)) {
        if (expr[next] === '(') i = skipBracketed(expr, next, '(', ')');
      } else if (AGGREGATIONS.has(lower) || KEYWORDS.has(lower) || expr[next] === '(') {
        // A function, an aggregation or a keyword.
      } else if (!names.includes(word)) {
        names.push(word);
      }
    } else {
      i++;
    }
  }
  return names;
}

/** The metric of a Grafana `label_values(metric_or_selector, label)` or `label_values(label)` query; undefined for other queries. */
export function labelValuesQuery(query: string): { expr: string; label: string } | undefined {
  const m = /^\s*label_values\(\s*(?:(.*),\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$/s.exec(query);
  return m ? { expr: m[1] ?? '', label: m[2]! } : undefined;
}

/** Whether a series name belongs to a family: itself, or a histogram's or summary's _bucket/_sum/_count. */
export function familyOf(series: string, families: ReadonlyMap<string, string>): string | undefined {
  if (families.has(series)) return series;
  const m = /^(.*)_(bucket|sum|count)$/.exec(series);
  if (!m) return undefined;
  const type = families.get(m[1]!);
  if (type === 'histogram' || (type === 'summary' && m[2] !== 'bucket')) return m[1]!;
  return undefined;
}
