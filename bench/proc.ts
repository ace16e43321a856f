// A child process's own figures from /proc: CPU time and resident memory.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of a process (all its threads), in ms. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After "pid (comm) ": field 3 (state) is index 0, so utime (14) and stime (15) are 11 and 12.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

/**
 * CPU time of a process's live threads in ms, to the nanosecond: the sum of
 * /proc/PID/task/TID/schedstat's first field over every thread. utime + stime count in 10 ms
 * ticks, too coarse for an idle minute (rollout-operator's is ~3–5 ms).
 * Threads that ended are not counted, so use it for the difference over a
 * window in which the process's threads stay (an idle window); falls back to
 * cpuMs where the kernel has no schedstat.
 */
export function cpuPreciseMs(pid: number): number {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`))
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    if (Number.isFinite(ns)) return ns / 1e6;
  } catch {
    // no schedstat (or the thread just ended): ticks below
  }
  return cpuMs(pid);
}

/** VmRSS of a process, and the part of it mapped from files (the executable's pages: Node's binary is ~120 MB), in bytes. */
export function rss(pid: number): { total: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n');
  const kib = (field: string) =>
    Number(/(\d+)/.exec(status.find((l) => l.startsWith(`${field}:`)) ?? '')?.[1] ?? NaN) * 1024;
  return { total: kib('VmRSS'), file: kib('RssFile') };
}

/** CPU time of each live thread of a process in ms (schedstat), by thread id, with the thread's name (/proc/…/comm). */
export function cpuByThread(pid: number): Map<string, { name: string; ms: number }> {
  const threads = new Map<string, { name: string; ms: number }>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const ms = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
        const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
        if (Number.isFinite(ms)) threads.set(tid, { name, ms });
      } catch {
        // the thread just ended
      }
    }
  } catch {
    // the process is gone
  }
  return threads;
}

/** Where a process's CPU went between two cpuByThread readings: "MainThread 5.1, V8Worker 0.4 ms" (by name, over 0.05 ms). */
export function threadCpuText(
  before: Map<string, { name: string; ms: number }>,
  after: Map<string, { name: string; ms: number }>,
): string {
  const byName = new Map<string, number>();
  for (const [tid, { name, ms }] of after) byName.set(name, (byName.get(name) ?? 0) + ms - (before.get(tid)?.ms ?? 0));
  return [...byName]
    .filter(([, ms]) => ms > 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${name} ${ms.toFixed(1)}`)
    .join(', ')
    .concat(' ms');
}
