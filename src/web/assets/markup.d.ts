// Types of markup.js for the server's rendering (src/web/html.ts) and the tests.
import type { NamespaceStatus, StatefulSetRow } from '../../status/model.ts';

/** Text or attribute value safe inside HTML (quoted attributes). */
export function escapeHtml(text: string): string;

/** Markup that is already safe: the output of h(), or a constant of this code's own. */
export class Raw {
  readonly html: string;
  constructor(html: string);
}

export type Attrs = Record<string, string | number | boolean | undefined>;

/** One element; string children are escaped, Raw ones (already markup) are not; undefined ones are left out. */
export function h(tag: string, attrs: Attrs, ...children: (string | Raw | undefined)[]): Raw;
export function join(parts: Raw[]): Raw;

/** What one grid cell shows: a pod, or the gap where a pod of the StatefulSet should be. */
export interface CellState {
  pod: string;
  ordinal: number;
  state: 'ready' | 'not-ready' | 'terminating' | 'missing';
  updated: boolean;
  ready: boolean;
  stuckReason?: string;
}

export function cellsOf(row: StatefulSetRow): CellState[];
export function cellTitle(cell: CellState): string;
export function cellClass(cell: CellState): string;

/** A wait code in a few words (an unknown one as it is). */
export function waitWords(code: string): string;
/** A duration in whole seconds, as people read it: "42 s", "3 min 5 s". */
export function formatDuration(ms: number): string;

/** The inside of <main id="report">: the namespace's groups (with their last rollout's timeline), then its budgets; `generatedAt` is the report's time. */
export function namespaceBody(ns: NamespaceStatus | undefined, generatedAt?: string): Raw;
