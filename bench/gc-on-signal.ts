// Preloaded (node --expose-gc --import) into an operator process a bench
// measures: on SIGUSR2, collect garbage twice and print the live heap and
// RSS as one JSON line, so memory figures are of what the operator keeps,
// not of garbage not yet collected — with what the heap and the rest of the
// process hold (heapTotal: V8's committed heap; external: off-heap memory
// of JS objects; spaces: V8's heap spaces, committed bytes), to tell where
// an RSS goes. Bench-only: production has no such hook.
import { getHeapSpaceStatistics } from 'node:v8';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('gc-on-signal needs node --expose-gc');
process.on('SIGUSR2', () => {
  gc();
  gc();
  const { heapUsed, heapTotal, external, arrayBuffers, rss } = process.memoryUsage();
  const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, s.space_size]));
  process.stdout.write(
    `${JSON.stringify({ gcMemory: { heapUsed, heapTotal, external, arrayBuffers, rss, spaces } })}\n`,
  );
});
