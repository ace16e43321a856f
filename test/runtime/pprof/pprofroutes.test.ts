// /debug/pprof on the real HTTP server, in-process: profiles that decode as
// pprof (with pprof-format, and with Go's own `go tool pprof` when Go is
// installed), the bounds on what a request may ask, and that a profile
// longer than the write timeout is not cut by it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import type { ServerLimits } from '../../../src/runtime/http/guard.ts';
import { DEFAULT_HTTP_LIMITS, HttpServer } from '../../../src/runtime/http/server.ts';
import { nopLogger } from '../../../src/runtime/log/logger.ts';
import { MAX_PROFILE_SECONDS, servePprof } from '../../../src/runtime/pprof/pprofroutes.ts';
import { testWebhookServer } from '../http/webhook-server.ts';
import { decoded, functionNames, httpsStatus, sampleTypes } from './profiles.ts';

const run = promisify(execFile);

async function started(t: TestContext, options: { pprof: boolean; limits?: ServerLimits }) {
  const server = new HttpServer({
    port: 0,
    host: '127.0.0.1',
    registry: new Registry(),
    notReady: () => undefined,
    limits: options.limits ?? DEFAULT_HTTP_LIMITS,
  });
  const stopping = new AbortController();
  const profiler = options.pprof
    ? await servePprof(server, { logger: nopLogger, stopping: stopping.signal })
    : undefined;
  const port = await server.listen();
  t.after(async () => {
    stopping.abort();
    await server.close(100);
    profiler?.close();
  });
  return { url: (path: string) => `http://127.0.0.1:${port}${path}` };
}

/** Keeps the event loop busy in named JavaScript until `done` settles, yielding so the server still serves. */
async function burnCpuUntil(done: Promise<unknown>): Promise<void> {
  let settled = false;
  void done.finally(() => (settled = true)).catch(() => undefined);
  while (!settled) {
    spinForAMoment();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function spinForAMoment(): number {
  let x = 0;
  const until = performance.now() + 5;
  while (performance.now() < until) x += Math.sqrt(x + 1);
  return x;
}

/** Objects kept alive, so the heap profile finds them under the function that allocated them. */
const retained: number[][] = [];
function retainForHeapProfile(): void {
  for (let i = 0; i < 4000; i++) retained.push(Array.from({ length: 1000 }, (_, j) => i + j + 0.5));
}

/**
 * Go's pprof, if Go is installed; it reads a local file and never goes
 * online. Go builds the tool on its first use (a minute or two on a cold
 * build cache), hence the long timeout.
 */
async function goPprof(args: string[], profile: Buffer): Promise<string | undefined> {
  const dir = await mkdtemp(join(tmpdir(), 'stateward-pprof-'));
  try {
    const file = join(dir, 'profile.pb.gz');
    await writeFile(file, profile);
    const env = { ...process.env, GOTOOLCHAIN: 'local', GOPROXY: 'off' };
    const { stdout } = await run('go', ['tool', 'pprof', ...args, file], { env, cwd: dir, timeout: 600_000 });
    return stdout;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('/debug/pprof', () => {
  it('serves a CPU profile of the seconds asked for, in the pprof format go tool pprof reads', async (t) => {
    const { url } = await started(t, { pprof: true });
    const pending = fetch(url('/debug/pprof/profile?seconds=1'));
    await burnCpuUntil(pending);
    const { profile, raw } = await decoded(await pending);
    assert.deepEqual(sampleTypes(profile), ['samples/count', 'cpu/nanoseconds']);
    assert.ok(profile.sample.length > 0, 'no samples');
    assert.ok(functionNames(profile).has('spinForAMoment'), [...functionNames(profile)].join(', '));
    const durationMs = Number(profile.durationNanos) / 1e6;
    assert.ok(durationMs >= 900 && durationMs < 5000, `profiled for ${durationMs} ms`);
    const top = await goPprof(['-top', '-nodecount=200'], raw);
    if (top === undefined) return t.diagnostic('go is not installed: go tool pprof not run');
    assert.match(top, /Type: cpu/);
    assert.match(top, /spinForAMoment/);
  });

  it('serves the heap in use, by the function that allocated it', async (t) => {
    const { url } = await started(t, { pprof: true });
    retainForHeapProfile();
    t.after(() => void retained.splice(0));
    const { profile, raw } = await decoded(await fetch(url('/debug/pprof/heap')));
    assert.deepEqual(sampleTypes(profile), ['inuse_space/bytes']);
    assert.ok(functionNames(profile).has('retainForHeapProfile'), [...functionNames(profile)].join(', '));
    const traces = await goPprof(['-raw'], raw);
    if (traces === undefined) return t.diagnostic('go is not installed: go tool pprof not run');
    assert.match(traces, /inuse_space\/bytes/);
    assert.match(traces, /retainForHeapProfile/);
  });

  it('takes one CPU profile at a time: a second one asked for meanwhile is refused with 409, a heap profile is not', async (t) => {
    const { url } = await started(t, { pprof: true });
    const [first, second] = [
      fetch(url('/debug/pprof/profile?seconds=2')),
      fetch(url('/debug/pprof/profile?seconds=2')),
    ];
    const refused = await Promise.race([first, second]);
    assert.equal(refused.status, 409);
    assert.match(await refused.text(), /a CPU profile is already being taken/);
    assert.equal((await fetch(url('/debug/pprof/heap'))).status, 200);
    const taken = refused === (await first) ? await second : await first;
    await decoded(taken);
  });

  it('refuses seconds that are not a whole number from 1 to the cap with 400, saying so', async (t) => {
    const { url } = await started(t, { pprof: true });
    for (const seconds of [String(MAX_PROFILE_SECONDS + 1), '0', '-1', '1.5', 'abc', '9999999999']) {
      const response = await fetch(url(`/debug/pprof/profile?seconds=${seconds}`));
      assert.equal(response.status, 400, seconds);
      assert.match(
        await response.text(),
        new RegExp(`seconds must be a whole number from 1 to ${MAX_PROFILE_SECONDS}`),
      );
    }
    const text = await fetch(url('/debug/pprof/heap?debug=1'));
    assert.equal(text.status, 400);
    assert.match(await text.text(), /only the pprof protobuf format/);
  });

  it('lists what it serves at /debug/pprof/ and answers 404 for a profile it does not serve', async (t) => {
    const { url } = await started(t, { pprof: true });
    for (const path of ['/debug/pprof/', '/debug/pprof']) {
      const index = await fetch(url(path));
      assert.equal(index.status, 200);
      const text = await index.text();
      assert.match(text, /\/debug\/pprof\/profile/);
      assert.match(text, /\/debug\/pprof\/heap/);
    }
    const goroutine = await fetch(url('/debug/pprof/goroutine'));
    assert.equal(goroutine.status, 404);
    assert.match(await goroutine.text(), /served: profile, heap/);
    for (const path of ['/debug/pprof/constructor', '/debug/pprof/__proto__', '/debug/pprof/heap/'])
      assert.equal((await fetch(url(path))).status, 404, path);
    assert.equal((await fetch(url('/debug/pprof/heap'), { method: 'POST' })).status, 405);
  });

  it('answers a HEAD request without profiling', async (t) => {
    const { url } = await started(t, { pprof: true });
    const asked = performance.now();
    const head = await fetch(url('/debug/pprof/profile?seconds=60'), { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.ok(performance.now() - asked < 10_000);
    assert.equal((await fetch(url('/debug/pprof/profile?seconds=1'))).status, 200);
  });

  it('is not cut by write and request timeouts shorter than the profile', async (t) => {
    const limits = { ...DEFAULT_HTTP_LIMITS, writeTimeoutMs: 200, requestTimeoutMs: 200 };
    const { url } = await started(t, { pprof: true, limits });
    const { profile } = await decoded(await fetch(url('/debug/pprof/profile?seconds=1')));
    assert.ok(Number(profile.durationNanos) >= 900e6, `profiled for ${Number(profile.durationNanos) / 1e6} ms`);
  });

  it('is not served without the flag, nor ever on the HTTPS webhook server', async (t) => {
    const { url } = await started(t, { pprof: false });
    for (const path of ['/debug/pprof/', '/debug/pprof/profile?seconds=1', '/debug/pprof/heap'])
      assert.equal((await fetch(url(path))).status, 404, path);
    await started(t, { pprof: true });
    const { port } = await testWebhookServer(t, { requestTimeoutMs: 10_000 });
    for (const path of ['/debug/pprof/', '/debug/pprof/heap']) assert.equal(await httpsStatus(port, path), 404, path);
  });
});
