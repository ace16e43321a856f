// A child process's own figures from /proc: CPU time and resident memory.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

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

/** VmRSS of a process, and the part of it mapped from files (the executable's pages: Node's binary is ~120 MB), in bytes. */
export function rss(pid: number): { total: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n');
  const kib = (field: string) =>
    Number(/(\d+)/.exec(status.find((l) => l.startsWith(`${field}:`)) ?? '')?.[1] ?? NaN) * 1024;
  return { total: kib('VmRSS'), file: kib('RssFile') };
}
