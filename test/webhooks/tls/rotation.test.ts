import { describe, it, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeClock } from '../../../src/runtime/clock.ts';
import type { Fields, Logger } from '../../../src/runtime/log/logger.ts';
import { generateSelfSigned } from '../../../src/webhooks/tls/generate.ts';
import {
  ensureCertificate,
  type CertificateStoreDeps,
  type EnsuredCertificate,
  type SecretJson,
} from '../../../src/webhooks/tls/certificatestore.ts';
import {
  CertificateRotator,
  MAX_TIMER_MS,
  watchCertFiles,
  type FileCertificate,
} from '../../../src/webhooks/tls/rotation.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface LogLine {
  level: string;
  msg: string;
  fields?: Fields;
}

function recordingLogger(onLine?: (line: LogLine) => void): { log: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at = (level: string) => (msg: string, fields?: Fields) => {
    const line = { level, msg, fields };
    lines.push(line);
    onLine?.(line);
  };
  const log: Logger = {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => log,
    enabled: () => true,
    flush: () => {},
  };
  return { log, lines };
}

/** Lets every settled promise's callbacks run. */
async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

/** A resolvable promise, for waiting on events instead of time. */
function signal<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

function memoryDeps(clock: FakeClock): CertificateStoreDeps & { deleteSecret: () => void } {
  let secret: SecretJson | undefined;
  let rv = 0;
  return {
    deleteSecret: () => void (secret = undefined),
    get: () => Promise.resolve(secret && structuredClone(secret)),
    create: (data) => Promise.resolve((secret = { metadata: { resourceVersion: String(++rv) }, data })),
    update: (s, data) =>
      s.metadata?.resourceVersion === String(rv)
        ? Promise.resolve((secret = { metadata: { resourceVersion: String(++rv) }, data }))
        : Promise.reject(new Error('Conflict')),
    isConflict: (e) => e instanceof Error && e.message === 'Conflict',
    isAlreadyExists: () => false,
    clock,
    log: recordingLogger().log,
  };
}

describe('CertificateRotator', () => {
  it('renews at renewAt and hands listeners the new certificate', async () => {
    const clock = new FakeClock();
    const deps = memoryDeps(clock);
    let ensures = 0;
    const ensure = () => {
      ensures++;
      return ensureCertificate(deps, {
        org: 'o',
        dnsNames: ['hooks.ns.svc'],
        validityMs: 3 * HOUR,
        renewBeforeMs: HOUR,
      });
    };
    const rotator = new CertificateRotator({ ensure, clock });
    const first = await rotator.start();
    assert.equal(rotator.current, first);
    assert.equal(first.renewAt, first.notAfter - HOUR);
    const changed = signal<EnsuredCertificate>();
    rotator.onChange(changed.resolve);

    await clock.advance(first.renewAt - clock.now() - 1);
    assert.equal(ensures, 1, 'nothing happens before renewAt');
    await clock.advance(1);
    const next = await changed.promise;
    assert.equal(ensures, 2);
    assert.notEqual(next.cert, first.cert);
    assert.ok(next.notAfter > first.notAfter);
    assert.equal(rotator.current, next);
    assert.equal(clock.pending, 1, 'the next renewal is scheduled');
    rotator.stop();
    assert.equal(clock.pending, 0);
  });

  it('adopts a certificate another replica renewed first', async () => {
    const clock = new FakeClock();
    const deps = memoryDeps(clock);
    const opts = { org: 'o', dnsNames: ['hooks.ns.svc'], validityMs: 3 * HOUR, renewBeforeMs: HOUR };
    const a = new CertificateRotator({ ensure: () => ensureCertificate(deps, opts), clock });
    const b = new CertificateRotator({ ensure: () => ensureCertificate(deps, opts), clock });
    const [fa, fb] = [await a.start(), await b.start()];
    assert.equal(fa.cert, fb.cert);
    const ca = signal<EnsuredCertificate>();
    const cb = signal<EnsuredCertificate>();
    a.onChange(ca.resolve);
    b.onChange(cb.resolve);
    await clock.advance(fa.renewAt - clock.now());
    const [na, nb] = await Promise.all([ca.promise, cb.promise]);
    assert.notEqual(na.cert, fa.cert);
    assert.equal(na.cert, nb.cert);
    a.stop();
    b.stop();
  });

  it('wakes at most every MAX_TIMER_MS while a long-lived certificate runs', async () => {
    const clock = new FakeClock();
    let ensures = 0;
    const bundle = {
      ca: 'c',
      cert: 'x',
      key: 'k',
      notAfter: clock.now() + 365 * DAY,
      renewAt: clock.now() + 335 * DAY,
    };
    const rotator = new CertificateRotator({ ensure: () => (ensures++, Promise.resolve(bundle)), clock });
    await rotator.start();
    await clock.advance(MAX_TIMER_MS);
    assert.equal(ensures, 1);
    assert.equal(clock.pending, 1, 're-armed for the remaining time');
    await clock.advance(334 * DAY - MAX_TIMER_MS);
    assert.equal(ensures, 1);
    await clock.advance(DAY);
    assert.equal(ensures, 2);
    rotator.stop();
  });

  it('retries a failed renewal after retryMs and keeps the old certificate meanwhile', async () => {
    const clock = new FakeClock();
    const { log, lines } = recordingLogger();
    const now = clock.now();
    const results: (() => Promise<EnsuredCertificate>)[] = [
      () => Promise.resolve({ ca: 'c', cert: 'one', key: 'k1', notAfter: now + 2 * HOUR, renewAt: now + HOUR }),
      () => Promise.reject(new Error('apiserver down')),
      () => Promise.resolve({ ca: 'c', cert: 'two', key: 'k2', notAfter: now + 5 * HOUR, renewAt: now + 4 * HOUR }),
    ];
    let calls = 0;
    const rotator = new CertificateRotator({ ensure: () => results[calls++]!(), clock, log, retryMs: 60_000 });
    await rotator.start();
    const seen: string[] = [];
    rotator.onChange((b) => seen.push(b.cert));
    await clock.advance(HOUR);
    assert.equal(calls, 2);
    assert.equal(rotator.current?.cert, 'one');
    assert.ok(lines.some((l) => l.level === 'warn' && l.fields?.['err'] === 'apiserver down'));
    await clock.advance(59_999);
    assert.equal(calls, 2);
    await clock.advance(1);
    assert.equal(calls, 3);
    assert.deepEqual(seen, ['two']);
    rotator.stop();
  });

  it('on a recheck after its Secret was deleted, issues a new certificate at once and re-stores it', async () => {
    const clock = new FakeClock();
    const deps = memoryDeps(clock);
    const opts = { org: 'o', dnsNames: ['hooks.ns.svc'], validityMs: 3 * HOUR, renewBeforeMs: HOUR };
    const a = new CertificateRotator({ ensure: () => ensureCertificate(deps, opts), clock });
    const b = new CertificateRotator({ ensure: () => ensureCertificate(deps, opts), clock });
    const first = await a.start();
    await b.start();
    const seenA = signal<EnsuredCertificate>();
    const seenB = signal<EnsuredCertificate>();
    a.onChange(seenA.resolve);
    b.onChange(seenB.resolve);
    deps.deleteSecret();
    // Both replicas see the delete; the second adopts what the first stored.
    a.recheck();
    const na = await seenA.promise;
    b.recheck();
    const nb = await seenB.promise;
    assert.notEqual(na.ca, first.ca, 'a new CA');
    assert.equal(nb.cert, na.cert, 'both replicas serve the same new certificate');
    assert.equal((await deps.get())?.data?.['cert'], Buffer.from(na.cert).toString('base64'), 'stored again');
    assert.equal(clock.now(), first.notAfter - 3 * HOUR, 'at once, not at renewAt');
    a.stop();
    b.stop();
  });

  it('folds rechecks that come during a renewal into one more, and ignores them after stop', async () => {
    const clock = new FakeClock();
    let ensures = 0;
    let release: (() => void) | undefined;
    const rotator = new CertificateRotator({
      ensure: async () => {
        ensures++;
        if (ensures === 2) await new Promise<void>((resolve) => (release = resolve));
        return {
          ca: 'c',
          cert: `x${ensures}`,
          key: 'k',
          notAfter: clock.now() + 2 * HOUR,
          renewAt: clock.now() + HOUR,
        };
      },
      clock,
    });
    await rotator.start();
    rotator.recheck();
    await flush();
    assert.equal(ensures, 2, 'the first recheck runs');
    rotator.recheck();
    rotator.recheck();
    rotator.recheck();
    release!();
    await flush();
    assert.equal(ensures, 3, 'three rechecks during it make one more');
    assert.equal(rotator.current?.cert, 'x3');
    rotator.stop();
    rotator.recheck();
    await flush();
    assert.equal(ensures, 3);
  });

  it('does nothing after stop', async () => {
    const clock = new FakeClock();
    let ensures = 0;
    const rotator = new CertificateRotator({
      ensure: () => (
        ensures++,
        Promise.resolve({ ca: 'c', cert: 'x', key: 'k', notAfter: clock.now() + 2 * HOUR, renewAt: clock.now() + HOUR })
      ),
      clock,
    });
    await rotator.start();
    rotator.stop();
    await clock.advance(3 * HOUR);
    assert.equal(ensures, 1);
  });
});

describe('watchCertFiles', () => {
  let dir: string | undefined;
  const stops: (() => void)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0)) stop();
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  async function setup(clock: FakeClock) {
    dir = await mkdtemp(join(tmpdir(), 'stateward-tls-'));
    const certFile = join(dir, 'tls.crt');
    const keyFile = join(dir, 'tls.key');
    const pair = () => generateSelfSigned({ org: 'o', dnsNames: ['hooks.ns.svc'], validityMs: DAY, now: clock.now() });
    const write = async (p: { cert: string; key: string }) => {
      await writeFile(certFile, p.cert);
      await writeFile(keyFile, p.key);
    };
    const first = await pair();
    await write(first);
    return { certFile, keyFile, pair, write, first };
  }

  it('polls with the clock and swaps in a new pair', async () => {
    const clock = new FakeClock();
    const { certFile, keyFile, pair, write, first } = await setup(clock);
    const changed = signal<FileCertificate>();
    const calls: FileCertificate[] = [];
    const w = await watchCertFiles(certFile, keyFile, (p) => (calls.push(p), changed.resolve(p)), {
      clock,
      pollMs: 10_000,
      fsWatch: false,
    });
    stops.push(() => w.stop());
    assert.equal(w.current.cert, first.cert);
    assert.equal(await w.check(), false, 'unchanged files are not a change');

    const second = await pair();
    await write(second);
    await clock.advance(10_000);
    const got = await changed.promise;
    assert.equal(got.cert, second.cert);
    assert.equal(got.key, second.key);
    assert.equal(w.current.cert, second.cert);
    assert.equal(calls.length, 1);
  });

  it('keeps the old pair and warns when the new one is broken', async () => {
    const clock = new FakeClock();
    const { certFile, keyFile, pair, write, first } = await setup(clock);
    const warned = signal<LogLine>();
    const { log, lines } = recordingLogger((l) => l.level === 'warn' && warned.resolve(l));
    const calls: FileCertificate[] = [];
    const w = await watchCertFiles(certFile, keyFile, (p) => calls.push(p), {
      clock,
      pollMs: 10_000,
      fsWatch: false,
      log,
    });
    stops.push(() => w.stop());

    const a = await pair();
    const b = await pair();
    await write({ cert: a.cert, key: b.key });
    await clock.advance(10_000);
    const warning = await warned.promise;
    assert.match(String(warning.fields?.['reason']), /does not match/);
    assert.equal(calls.length, 0);
    assert.equal(w.current.cert, first.cert);

    assert.equal(await w.check(), false, 'the same broken content is not re-evaluated');
    assert.equal(lines.filter((l) => l.level === 'warn').length, 1, 'warned once');

    await write({ cert: 'garbage', key: a.key });
    assert.equal(await w.check(), false);
    assert.equal(w.current.cert, first.cert);

    await write(a);
    assert.equal(await w.check(), true);
    assert.equal(w.current.cert, a.cert);
    assert.deepEqual(
      calls.map((c) => c.cert),
      [a.cert],
    );
    assert.doesNotMatch(JSON.stringify(lines), /PRIVATE KEY/);
  });

  it('reacts to fs.watch events without waiting for the poll', async () => {
    const clock = new FakeClock();
    const { certFile, keyFile, pair, write } = await setup(clock);
    const second = await pair();
    const changed = signal<FileCertificate>();
    const w = await watchCertFiles(certFile, keyFile, (p) => p.cert === second.cert && changed.resolve(p), {
      clock,
      pollMs: HOUR,
    });
    stops.push(() => w.stop());
    await write(second);
    assert.equal((await changed.promise).key, second.key);
  });

  it('rejects an unusable initial pair, and stops polling on stop', async () => {
    const clock = new FakeClock();
    const { certFile, keyFile, pair, write } = await setup(clock);
    const other = await pair();
    await writeFile(keyFile, other.key);
    await assert.rejects(
      watchCertFiles(certFile, keyFile, () => {}, { clock, fsWatch: false }),
      /unusable: private key does not match/,
    );
    await write(other);
    const w = await watchCertFiles(certFile, keyFile, () => {}, { clock, pollMs: 1000, fsWatch: false });
    assert.equal(clock.pending, 1);
    w.stop();
    assert.equal(clock.pending, 0);
  });
});
