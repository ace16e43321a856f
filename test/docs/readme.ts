// Reading the README's configuration reference (and other Markdown) the way
// a reader does: sections by heading, GitHub-flavoured tables, code spans,
// and heading anchors as GitHub computes them.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function readRepoFile(path: string): string {
  return readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
}

export interface Heading {
  level: number;
  text: string;
  line: number;
}

/** ATX headings outside fenced code blocks. */
export function headings(markdown: string): Heading[] {
  const out: Heading[] = [];
  let fenced = false;
  markdown.split('\n').forEach((line, index) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) return;
    const m = /^(#{1,6})\s+(.+?)\s*#*\s*$/.exec(line);
    if (m) out.push({ level: m[1]!.length, text: m[2]!, line: index });
  });
  return out;
}

/** The lines under a heading (matched exactly, without the #s), up to the next heading of the same or a higher level. */
export function section(markdown: string, title: string): string {
  const all = headings(markdown);
  const start = all.find((h) => h.text === title);
  if (!start) throw new Error(`no heading ${JSON.stringify(title)}`);
  const end = all.find((h) => h.line > start.line && h.level <= start.level);
  return markdown
    .split('\n')
    .slice(start.line + 1, end?.line)
    .join('\n');
}

/** Splits a table row on unescaped pipes; an escaped pipe stays in its cell. */
function cells(line: string): string[] {
  const inner = line.trim().replace(/^\|/, '').replace(/\|$/, '');
  const out: string[] = [];
  let current = '';
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i]!;
    if (c === '\\' && inner[i + 1] === '|') {
      current += '|';
      i++;
    } else if (c === '|') {
      out.push(current.trim());
      current = '';
    } else {
      current += c;
    }
  }
  out.push(current.trim());
  return out;
}

export interface Table {
  header: string[];
  rows: string[][];
}

/** Every table in a piece of Markdown, in order. */
export function tables(markdown: string): Table[] {
  const out: Table[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]!.trim().startsWith('|') || !/^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(lines[i + 1]!))
      continue;
    const header = cells(lines[i]!);
    const rows: string[][] = [];
    let j = i + 2;
    for (; j < lines.length && lines[j]!.trim().startsWith('|'); j++) {
      const row = cells(lines[j]!);
      if (row.length !== header.length)
        throw new Error(`table row ${j + 1} has ${row.length} cells, its header ${header.length}: ${lines[j]}`);
      rows.push(row);
    }
    out.push({ header, rows });
    i = j - 1;
  }
  return out;
}

/** The one table of a README section, checked to have the expected header. */
export function sectionTable(markdown: string, title: string, header: string[]): Table {
  const found = tables(section(markdown, title));
  if (found.length !== 1) throw new Error(`section ${title} has ${found.length} tables, expected 1`);
  const table = found[0]!;
  if (table.header.join('|') !== header.join('|'))
    throw new Error(`section ${title}: table header is ${table.header.join(' | ')}, expected ${header.join(' | ')}`);
  return table;
}

/** The contents of the code spans of a cell, in order. */
export function codeSpans(cell: string): string[] {
  return [...cell.matchAll(/`([^`]*)`/g)].map((m) => m[1]!);
}

/**
 * rollout-operator GitHub gives a heading: inline markup dropped, lowercased,
 * punctuation other than `-` and `_` removed, each space a `-`. (Repeated
 * headings get -1, -2, …; `anchors` accounts for that.)
 */
export function githubAnchor(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor of a document's headings. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const h of headings(markdown)) {
    const base = githubAnchor(h.text);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}
