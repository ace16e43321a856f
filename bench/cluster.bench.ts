// cluster-warm-start: LocalCluster.start() to Ready (nodes Ready, default
// ServiceAccount present) with cached binaries, then teardown; median of N.
// Target: under 60 s.
import { LocalCluster } from '../test/cluster/cluster.ts';
import { ensureBinaries } from '../test/cluster/build.ts';
import { median, report, seconds } from './report.ts';

export async function clusterBench(runs: number): Promise<boolean> {
  await ensureBinaries();
  const starts: number[] = [];
  const stops: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const cluster = await LocalCluster.start({ name: `bench-${process.pid}-${i}`, log: () => {} });
    const t1 = performance.now();
    await cluster.teardown();
    stops.push(performance.now() - t1);
    starts.push(t1 - t0);
  }
  const target = 60_000;
  const startMedian = median(starts);
  report(
    'cluster-warm-start',
    `median ${seconds(startMedian)} over ${runs} runs (min ${seconds(Math.min(...starts))}, max ${seconds(Math.max(...starts))}); target < 60 s: ${startMedian < target ? 'met' : 'MISSED'} (${(startMedian / target).toFixed(3)} of the budget)`,
  );
  report('cluster-teardown', `median ${seconds(median(stops))}`);
  return startMedian < target;
}
