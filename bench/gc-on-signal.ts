// Preloaded (node --expose-gc --import) into an operator process a bench
// measures: on SIGUSR2, collect garbage twice and print the live heap and
// RSS as one JSON line, so memory figures are of what the operator keeps,
// not of garbage not yet collected. Bench-only: production has no such hook.
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('gc-on-signal needs node --expose-gc');
process.on('SIGUSR2', () => {
  gc();
  gc();
  const { heapUsed, rss } = process.memoryUsage();
  process.stdout.write(`${JSON.stringify({ gcMemory: { heapUsed, rss } })}\n`);
});
