// The pod grid's cells, in one place for both renderings of the status page:
// the server's (src/web/html.ts, typed by cells.d.ts beside this file) and
// the browser's (app.js, which loads this file from /status/assets/). Plain
// JavaScript, since the browser runs it as served.

/** One cell per ordinal up to the replicas (or the highest pod present): missing ordinals included. */
export function cellsOf(row) {
  const byOrdinal = new Map(row.podGrid.map((p) => [p.ordinal, p]));
  const count = Math.max(row.replicas, ...row.podGrid.map((p) => p.ordinal + 1));
  const cells = [];
  for (let ordinal = 0; ordinal < count; ordinal++) {
    const pod = byOrdinal.get(ordinal);
    if (!pod) {
      cells.push({ pod: `${row.name}-${ordinal}`, ordinal, state: 'missing', updated: false, ready: false });
      continue;
    }
    const state = pod.terminating ? 'terminating' : pod.ready ? 'ready' : 'not-ready';
    cells.push({
      pod: pod.name,
      ordinal,
      state,
      updated: pod.updated,
      ready: pod.ready && !pod.terminating,
      ...(pod.stuckReason ? { stuckReason: pod.stuckReason } : {}),
    });
  }
  return cells;
}

export function cellTitle(cell) {
  if (cell.state === 'missing') return `${cell.pod}: missing`;
  return `${cell.pod}: ${cell.updated ? 'updated' : 'outdated'}, ${cell.state}${cell.stuckReason ? ` (${cell.stuckReason})` : ''}`;
}

export function cellClass(cell) {
  return [
    'cell',
    cell.state === 'missing' ? '' : cell.updated ? 'updated' : 'outdated',
    cell.state,
    cell.stuckReason ? 'stuck' : '',
  ]
    .filter(Boolean)
    .join(' ');
}
