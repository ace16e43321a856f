// `npm run bench`: performance figures, reported with the machine they ran on.
// Targets live here, never in timed tests.
//
// cluster-warm-start: LocalCluster.start() to Ready (nodes Ready, default
//   ServiceAccount present) with cached binaries, then teardown; median of N.
//   Target: under 60 s.
import { cpus, totalmem } from 'node:os';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { ensureBinaries } from '../test/cluster/build.ts';

const runs = Number.parseInt(process.env['BENCH_RUNS'] ?? '3', 10);

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const cpu = cpus();
  console.log(`machine: ${cpu.length} × ${cpu[0]?.model ?? 'unknown cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`);
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
  console.log(`cluster-warm-start: median ${(startMedian / 1000).toFixed(2)} s over ${runs} runs (min ${(Math.min(...starts) / 1000).toFixed(2)} s, max ${(Math.max(...starts) / 1000).toFixed(2)} s); target < 60 s: ${startMedian < target ? 'met' : 'MISSED'} (${(startMedian / target).toFixed(3)} of the budget)`);
  console.log(`cluster-teardown:   median ${(median(stops) / 1000).toFixed(2)} s`);
  if (startMedian >= target) process.exitCode = 1;
}

await main();
