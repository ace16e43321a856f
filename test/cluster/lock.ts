// A cross-process lock on a directory path: mkdir is atomic, and the owner's
// pid inside lets a later process break the lock of one that died.
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export async function acquireLock(path: string, options: { waitingMessage?: () => void; pollMs?: number } = {}): Promise<() => Promise<void>> {
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
