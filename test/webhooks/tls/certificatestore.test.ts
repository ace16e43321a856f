import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../../src/runtime/clock.ts';
import type { Fields, Logger } from '../../../src/runtime/log/logger.ts';
import { generateSelfSigned } from '../../../src/webhooks/tls/generate.ts';
import {
  ensureCertificate,
  encodeSecretData,
  type CertificateStoreDeps,
  type SecretData,
  type SecretJson,
} from '../../../src/webhooks/tls/certificatestore.ts';
import { parseBundle } from '../../../src/webhooks/tls/bundle.ts';

const HOUR = 3_600_000;
const names = ['hooks', 'hooks.ns', 'hooks.ns.svc', 'hooks.ns.svc.cluster.local'];
const options = { org: 'Acme', dnsNames: names, validityMs: 3 * HOUR, renewBeforeMs: HOUR };

class ApiError extends Error {
  readonly code: number;
  constructor(code: number, msg: string) {
    super(msg);
    this.code = code;
  }
}

interface LogLine {
  level: string;
  msg: string;
  fields?: Fields;
}

function recordingLogger(lines: LogLine[]): Logger {
  const at = (level: string) => (msg: string, fields?: Fields) => void lines.push({ level, msg, fields });
  const log: Logger = {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => log,
    enabled: () => true,
    flush: () => {},
  };
  return log;
}

/** The injected API as a map with resourceVersions; hooks let a test interleave another writer. */
class FakeSecretApi {
  secret: SecretJson | undefined;
  rv = 0;
  creates = 0;
  updates = 0;
  /** Holds get() calls until this many are waiting, so callers read the same state. */
  barrier = 0;
  private waiting: (() => void)[] = [];
  beforeUpdate: (() => void) | undefined;

  write(data: Record<string, string>): SecretJson {
    this.secret = { metadata: { name: 'cert', resourceVersion: String(++this.rv) }, data: { ...data } };
    return structuredClone(this.secret);
  }

  deps(clock: FakeClock, lines: LogLine[]): CertificateStoreDeps {
    return {
      get: async () => {
        if (this.barrier > 0) {
          await new Promise<void>((resolve) => {
            this.waiting.push(resolve);
            if (this.waiting.length >= this.barrier) {
              this.barrier = 0;
              for (const w of this.waiting.splice(0)) w();
            }
          });
        }
        return this.secret === undefined ? undefined : structuredClone(this.secret);
      },
      create: async (data: SecretData) => {
        await Promise.resolve();
        if (this.secret) throw new ApiError(409, 'AlreadyExists');
        this.creates++;
        assert.deepEqual(Object.keys(data).sort(), ['ca', 'cert', 'key']);
        return this.write(data);
      },
      update: async (secret: SecretJson, data: SecretData) => {
        await Promise.resolve();
        const hook = this.beforeUpdate;
        this.beforeUpdate = undefined;
        hook?.();
        if (!this.secret) throw new ApiError(404, 'NotFound');
        if (secret.metadata?.resourceVersion !== this.secret.metadata?.resourceVersion)
          throw new ApiError(409, 'Conflict');
        this.updates++;
        return this.write(data);
      },
      isConflict: (e) => e instanceof ApiError && e.code === 409 && e.message === 'Conflict',
      isAlreadyExists: (e) => e instanceof ApiError && e.code === 409 && e.message === 'AlreadyExists',
      clock,
      log: recordingLogger(lines),
    };
  }

  stored(): Record<string, string> {
    return Object.fromEntries(
      Object.entries(this.secret?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
    );
  }
}

describe('ensureCertificate', () => {
  it('creates the secret with exactly ca, cert and key, base64-encoded', async () => {
    const clock = new FakeClock();
    const api = new FakeSecretApi();
    const out = await ensureCertificate(api.deps(clock, []), options);
    assert.equal(api.creates, 1);
    assert.deepEqual(Object.keys(api.secret!.data!).sort(), ['ca', 'cert', 'key']);
    assert.equal(api.secret!['type'], undefined);
    const stored = api.stored();
    assert.deepEqual(
      { ca: stored.ca, cert: stored.cert, key: stored.key },
      { ca: out.ca, cert: out.cert, key: out.key },
    );
    assert.ok(parseBundle(stored, clock.now()).ok);
    assert.equal(out.renewAt, out.notAfter - HOUR);
  });

  it('reuses a valid secret without writing', async () => {
    const clock = new FakeClock();
    const api = new FakeSecretApi();
    const first = await ensureCertificate(api.deps(clock, []), options);
    await clock.advance(HOUR);
    const second = await ensureCertificate(api.deps(clock, []), options);
    assert.equal(second.cert, first.cert);
    assert.equal(second.renewAt, first.renewAt);
    assert.equal(api.creates + api.updates, 1);
  });

  it('two replicas racing on an empty store end with the same certificate', async () => {
    const clock = new FakeClock();
    const api = new FakeSecretApi();
    api.barrier = 2; // both read "not found" before either writes
    const lines: LogLine[] = [];
    const [a, b] = await Promise.all([
      ensureCertificate(api.deps(clock, lines), options),
      ensureCertificate(api.deps(clock, lines), options),
    ]);
    assert.equal(api.creates, 1);
    assert.equal(api.updates, 0);
    assert.equal(a.cert, b.cert);
    assert.equal(a.key, b.key);
    assert.equal(a.ca, b.ca);
    assert.equal(api.stored().cert, a.cert);
    assert.ok(lines.some((l) => /created concurrently/.test(l.msg)));
  });

  it('two replicas racing to renew an expiring secret end with the same certificate', async () => {
    const clock = new FakeClock();
    const api = new FakeSecretApi();
    const old = await ensureCertificate(api.deps(clock, []), options);
    await clock.advance(old.renewAt - clock.now());
    api.barrier = 2;
    const [a, b] = await Promise.all([
      ensureCertificate(api.deps(clock, []), options),
      ensureCertificate(api.deps(clock, []), options),
    ]);
    assert.equal(api.updates, 1);
    assert.notEqual(a.cert, old.cert);
    assert.equal(a.cert, b.cert);
    assert.equal(api.stored().cert, a.cert);
  });

  it('on a conflict, accepts the valid certificate the winner wrote', async () => {
    const clock = new FakeClock();
    const api = new FakeSecretApi();
    api.write({});
    const winner = await generateSelfSigned({ org: 'Acme', dnsNames: names, validityMs: 3 * HOUR, now: clock.now() });
    api.beforeUpdate = () => api.write(encodeSecretData(winner));
    const out = await ensureCertificate(api.deps(clock, []), options);
    assert.equal(out.cert, winner.cert);
    assert.equal(out.key, winner.key);
    assert.equal(out.notAfter, winner.notAfter);
    assert.equal(api.updates, 0, 'our write lost and was not retried over the winner');
    assert.equal(api.stored().cert, winner.cert);
  });

  it('on a conflict with an unusable winner, replaces it', async () => {
    const clock = new FakeClock();
    const api = new FakeSecretApi();
    api.write({});
    const narrow = await generateSelfSigned({
      org: 'Acme',
      dnsNames: ['hooks.ns.svc'],
      validityMs: 3 * HOUR,
      now: clock.now(),
    });
    api.beforeUpdate = () => api.write(encodeSecretData(narrow));
    const out = await ensureCertificate(api.deps(clock, []), options);
    assert.notEqual(out.cert, narrow.cert);
    assert.equal(api.updates, 1);
    assert.equal(api.stored().cert, out.cert);
  });

  it('replaces a damaged secret with a warning instead of failing', async () => {
    const clock = new FakeClock();
    const api = new FakeSecretApi();
    api.write({ cert: Buffer.from('garbage').toString('base64') });
    const lines: LogLine[] = [];
    const out = await ensureCertificate(api.deps(clock, lines), options);
    assert.equal(api.stored().cert, out.cert);
    assert.ok(lines.some((l) => l.level === 'warn' && /lacks ca, key/.test(l.msg)));
  });

  it('gives up after maxAttempts when every write conflicts', async () => {
    const clock = new FakeClock();
    const api = new FakeSecretApi();
    api.write({});
    const deps = api.deps(clock, []);
    let updates = 0;
    deps.update = () => {
      updates++;
      return Promise.reject(new ApiError(409, 'Conflict'));
    };
    await assert.rejects(ensureCertificate(deps, { ...options, maxAttempts: 3 }), /after 3 attempts/);
    assert.equal(updates, 3);
  });

  it('passes on other errors', async () => {
    const clock = new FakeClock();
    const deps = new FakeSecretApi().deps(clock, []);
    deps.create = () => Promise.reject(new ApiError(403, 'Forbidden'));
    await assert.rejects(ensureCertificate(deps, options), /Forbidden/);
  });

  it('refuses a renew-before at or above the validity', async () => {
    const deps = new FakeSecretApi().deps(new FakeClock(), []);
    await assert.rejects(ensureCertificate(deps, { ...options, renewBeforeMs: 3 * HOUR }), /renew-before/);
  });

  it('never logs key material', async () => {
    const clock = new FakeClock();
    const api = new FakeSecretApi();
    const lines: LogLine[] = [];
    api.barrier = 2;
    const [out] = await Promise.all([
      ensureCertificate(api.deps(clock, lines), options),
      ensureCertificate(api.deps(clock, lines), options),
    ]);
    await clock.advance(out.renewAt - clock.now());
    await ensureCertificate(api.deps(clock, lines), options);
    api.write({ key: 'eA==' });
    await ensureCertificate(api.deps(clock, lines), options);
    assert.ok(lines.length >= 5);
    const text = JSON.stringify(lines);
    assert.doesNotMatch(text, /PRIVATE KEY|BEGIN/);
    assert.ok(!text.includes(Buffer.from(out.key).toString('base64').slice(0, 40)));
  });
});
