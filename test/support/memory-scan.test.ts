import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { countInProcessMemory } from './memory-scan.ts';

describe('countInProcessMemory', () => {
  it('finds the copies a process holds, including one across a read boundary, and nothing it never had', async (t) => {
    // The marker reaches the child through stdin, so it is in no file or argument; the child
    // writes it all over 20 MiB and says how many copies it made. Reads of 64 KiB + 3 bytes make
    // about one copy in 500 straddle two reads.
    const marker = randomBytes(16);
    const absent = randomBytes(16);
    const child = spawn(
      process.execPath,
      [
        '-e',
        `
      process.stdin.once('data', (m) => {
        const held = Buffer.alloc(20 * 1024 * 1024 + 5);
        let n = 0;
        for (let at = 3; at + m.length <= held.length; at += 131) { m.copy(held, at); n++; }
        m.fill(0);
        globalThis.held = held;
        process.stdout.write(String(n) + '\\n');
        setInterval(() => {}, 1000);
      });`,
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    t.after(() => child.kill('SIGKILL'));
    child.stdin.write(marker);
    const [line] = (await once(child.stdout, 'data')) as [Buffer];
    const made = Number(line.toString().trim());
    const { scanned, counts } = await countInProcessMemory(child.pid!, [marker, absent], 64 * 1024 + 3);
    assert.ok(scanned > 20 * 1024 * 1024, `scanned ${scanned} bytes`);
    // At least the copies made (the marker also lingers in the buffers stdin read it through; a read-boundary bug would lose ~40).
    assert.ok(counts[0]! >= made && counts[0]! <= made + 16, `found ${counts[0]} of ${made}`);
    assert.equal(counts[1], 0);
  });
});
