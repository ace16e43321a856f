// The label and annotation keys the code really uses: string literals of
// src/**/*.ts (read with the TypeScript parser, so comments never count)
// and the mapping keys of the shipped webhook manifests, in the shapes
// Stateward's keys take.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { ROOT } from './readme.ts';

/** A whole key, optionally followed by `=value` (a selector or a flag default). */
const KEY =
  /^((?:[a-z0-9-]+\.)*(?:grafana\.com|reloader\.stakater\.com|stateward\.dev|cao\.couchbase\.com)\/[A-Za-z0-9][A-Za-z0-9._-]*|com\.xing\.deployment-restart(?:\.[a-z0-9-]+)*|rollout-group|rollout-max-unavailable)(?:=.*)?$/s;

/** Literals of a key's shape that are not label or annotation keys, and why. */
export const NOT_KEYS: ReadonlyMap<string, string> = new Map([
  ['stateward.dev/operator', 'the reportingController of the Events Stateward writes'],
  ['stateward.dev/v1', 'the apiVersion of the status report (stateward status -o json)'],
]);

function files(dir: string, suffix: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(suffix))
    .map((e) => join(e.parentPath, e.name))
    .sort();
}

/** Every string literal (and template literal piece) of a TypeScript file. */
export function stringLiterals(source: string, fileName = 'file.ts'): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isStringLiteral(node) ||
      ts.isNoSubstitutionTemplateLiteral(node) ||
      ts.isTemplateHead(node) ||
      ts.isTemplateMiddle(node) ||
      ts.isTemplateTail(node)
    ) {
      out.push(node.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return out;
}

export function keyOf(literal: string): string | undefined {
  return KEY.exec(literal)?.[1];
}

/** Every string literal of the TypeScript files under src/ and every mapping key of the YAML files under deploy/webhooks/, with the files it occurs in. */
export function sourceLiterals(): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  const add = (literal: string, file: string) => {
    const where = found.get(literal) ?? new Set<string>();
    where.add(relative(ROOT, file));
    found.set(literal, where);
  };
  for (const file of files(join(ROOT, 'src'), '.ts')) {
    for (const literal of stringLiterals(readFileSync(file, 'utf8'), file)) add(literal, file);
  }
  // Labels users set because a shipped manifest selects on them (e.g. a namespaceSelector).
  for (const file of files(join(ROOT, 'deploy', 'webhooks'), '.yaml')) {
    for (const m of readFileSync(file, 'utf8').matchAll(/^\s*(?:- )?([^\s:#]+):/gm)) add(m[1]!, file);
  }
  return found;
}

/** Key → files that use it, among the literals. */
export function keysIn(literals: Map<string, Set<string>>): Map<string, Set<string>> {
  const keys = new Map<string, Set<string>>();
  for (const [literal, where] of literals) {
    const key = keyOf(literal);
    if (key) keys.set(key, new Set([...(keys.get(key) ?? []), ...where]));
  }
  return keys;
}

/**
 * The keys a README labels-table cell names. A code span starting with `-`
 * abbreviates a sibling of the cell's first full key: its last `-word` is
 * replaced (`…-resource-name`, `-kind` → `…-resource-kind`).
 */
export function keysOfCell(spans: string[]): string[] {
  const out: string[] = [];
  let base: string | undefined;
  for (const span of spans) {
    if (span.startsWith('-')) {
      if (!base) throw new Error(`abbreviation ${span} with no full key before it`);
      out.push(base.replace(/-[^-/]+$/, '') + span);
    } else {
      base ??= span;
      out.push(span);
    }
  }
  return out;
}
