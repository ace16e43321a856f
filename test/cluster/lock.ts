// A cross-process lock on a directory path: mkdir is atomic, and the owner's
// pid inside lets a later process break the lock of one that died.
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie (exited, not yet reaped by its parent) answers signal 0 too.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** Pids of live processes whose command line contains `text`. */
export function processesMentioning(text: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text) && processAlive(pid)) pids.push(pid);
    } catch {
      // exited while we looked
    }
  }
  return pids;
}

export async function acquireLock(
  path: string,
  options: { waitingMessage?: () => void; pollMs?: number } = {},
): Promise<() => Promise<void>> {
  let told = false;
  for (;;) {
    try {
      await mkdir(path);
      await writeFile(join(path, 'pid'), String(process.pid));
      return async () => {
        await rm(path, { recursive: true, force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = Number.parseInt(await readFile(join(path, 'pid'), 'utf8').catch(() => ''), 10);
    if (Number.isFinite(owner) && !processAlive(owner)) {
      await rm(path, { recursive: true, force: true });
      continue;
    }
    if (!told) {
      options.waitingMessage?.();
      told = true;
    }
    // Polling here waits on another process, not on our own test's condition.
    await delay(options.pollMs ?? 500);
  }
}
