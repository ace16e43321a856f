// Types of cells.js for the server's rendering (src/web/html.ts).
import type { StatefulSetRow } from '../../status/model.ts';

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
