// A real node process for heaprelease.test.ts: HeapRelease with V8's own gc,
// GC reports and event-loop utilization, through a burst of garbage and an
// idle spell. Prints the logger's lines, then one JSON line of what it saw.
// `no-gc` as the argument: start it and exit (node runs without --expose-gc).
import { setTimeout as delay } from 'node:timers/promises';
import { systemClock } from '../../src/runtime/clock.ts';
import { exposedCollect, gcReports, HeapRelease, loopUtilization } from '../../src/runtime/heaprelease.ts';
import { createLogger } from '../../src/runtime/log/logger.ts';

const released: { rssBeforeMiB: number; rssAfterMiB: number }[] = [];
const logger = createLogger({
  format: 'json',
  level: 'debug',
  write: (line) => {
    process.stdout.write(line);
    const entry = JSON.parse(line) as { msg: string; rssBeforeMiB?: number; rssAfterMiB?: number };
    if (entry.msg === 'heap released after a burst of work')
      released.push({ rssBeforeMiB: entry.rssBeforeMiB!, rssAfterMiB: entry.rssAfterMiB! });
  },
});
const release = new HeapRelease({
  collect: exposedCollect(),
  onGc: gcReports(),
  rss: () => process.memoryUsage.rss(),
  utilization: loopUtilization(),
  clock: systemClock,
  logger,
  policy: {
    checkMs: 200,
    idleUtilization: 0.05,
    minGrowthBytes: 4 * 1024 * 1024,
    minIntervalMs: 0,
    maxPauseShare: 0.01,
  },
});
release.start();
if (process.argv[2] === 'no-gc') process.exit(0);

// Start-up's own release first, so the burst below is measured on its own.
const deadline = (ms: number) => performance.now() + ms;
for (const until = deadline(20_000); released.length === 0 && performance.now() < until;) await delay(50);
const before = released.length;

// The burst: ~150 MiB of small objects kept for a while, in turns of the loop (as list decoding is), then dropped.
let kept: { name: string; value: number[] }[][] = [];
for (let turn = 0; turn < 60; turn++) {
  kept.push(Array.from({ length: 25_000 }, (_, i) => ({ name: `object-${turn}-${i}`, value: [i, turn, i * turn] })));
  await delay(1);
}
kept = [];

for (const until = deadline(20_000); released.length === before && performance.now() < until;) await delay(50);
const after = released.length;
// Idle: nothing is armed and no release happens.
await delay(2_000);
const MiB = 1024 * 1024;
process.stdout.write(
  `${JSON.stringify({
    releases: after - before,
    rssBefore: (released[before]?.rssBeforeMiB ?? 0) * MiB,
    rssAfter: (released[before]?.rssAfterMiB ?? 0) * MiB,
    idleReleases: released.length - after,
    armedWhenIdle: release.armed,
  })}\n`,
);
release.stop();
