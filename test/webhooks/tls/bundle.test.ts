import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey } from 'node:crypto';
import { parseBundle } from '../../../src/webhooks/tls/bundle.ts';
import { generateSelfSigned } from '../../../src/webhooks/tls/generate.ts';
import { makeBundle, makeCa, makeLeaf, type TestLeaf } from './fixtures.ts';

const NOW = 1_700_000_000_000;
const HOUR = 3_600_000;
const window = { notBefore: NOW - HOUR, notAfter: NOW + 10 * HOUR };

describe('parseBundle', () => {
  let good: TestLeaf;
  let other: TestLeaf;
  before(async () => {
    good = await makeBundle(['a.ns.svc', 'a'], window);
    other = await makeBundle(['a.ns.svc'], window);
  });

  it('accepts a good bundle and reports its window and names', () => {
    const r = parseBundle(good, NOW);
    assert.deepEqual(r, {
      ok: true,
      notBefore: window.notBefore,
      notAfter: window.notAfter,
      dnsNames: ['a.ns.svc', 'a'],
    });
  });

  it('accepts a pair without a CA (certificate files)', () => {
    assert.equal(parseBundle({ cert: good.cert, key: good.key }, NOW).ok, true);
  });

  it('accepts what generateSelfSigned produces (PKCS#8 EC)', async () => {
    const g = await generateSelfSigned({ org: 'o', dnsNames: ['x'], validityMs: HOUR, now: NOW });
    const r = parseBundle(g, NOW);
    assert.ok(r.ok);
    assert.equal(r.notAfter, g.notAfter);
  });

  it('accepts an RSA PKCS#1 bundle like rollout-operator writes', async () => {
    const rsa = await makeBundle(['rollout-operator.ns.svc'], window, 'rsa');
    assert.match(rsa.key, /^-----BEGIN RSA PRIVATE KEY-----/);
    assert.deepEqual(parseBundle(rsa, NOW), {
      ok: true,
      notBefore: window.notBefore,
      notAfter: window.notAfter,
      dnsNames: ['rollout-operator.ns.svc'],
    });
    const pkcs8 = createPrivateKey(rsa.key).export({ type: 'pkcs8', format: 'pem' }) as string;
    assert.equal(parseBundle({ ...rsa, key: pkcs8 }, NOW).ok, true);
  });

  it('accepts an EC SEC1 key', () => {
    assert.match(good.key, /^-----BEGIN EC PRIVATE KEY-----/);
    assert.equal(parseBundle(good, NOW).ok, true);
  });

  it('rejects a key of another certificate', () => {
    assert.deepEqual(parseBundle({ ...good, key: other.key }, NOW), {
      ok: false,
      reason: 'private key does not match the certificate',
    });
  });

  it('rejects a certificate the CA did not sign', () => {
    assert.deepEqual(parseBundle({ ...good, ca: other.ca }, NOW), {
      ok: false,
      reason: 'certificate is not signed by the CA',
    });
  });

  it('rejects a CA that is not a CA', () => {
    const r = parseBundle({ ...good, ca: good.cert }, NOW);
    assert.equal(r.ok, false);
  });

  it('rejects an expired certificate, and one not valid yet', () => {
    assert.match(reason(parseBundle(good, window.notAfter)), /^expired at/);
    assert.match(reason(parseBundle(good, window.notAfter + HOUR)), /^expired at/);
    assert.match(reason(parseBundle(good, window.notBefore - 1)), /^not valid before/);
    assert.equal(parseBundle(good, window.notBefore).ok, true);
    assert.equal(parseBundle(good, window.notAfter - 1).ok, true);
  });

  it('bounds validity by the CA: a CA expiring first ends the chain', async () => {
    const ca = await makeCa({ notBefore: window.notBefore, notAfter: NOW + HOUR });
    const leaf = await makeLeaf(ca, ['a'], window);
    const r = parseBundle(leaf, NOW);
    assert.ok(r.ok);
    assert.equal(r.notAfter, NOW + HOUR);
    assert.match(reason(parseBundle(leaf, NOW + 2 * HOUR)), /^expired/);
  });

  it('rejects garbage and missing parts', () => {
    assert.match(reason(parseBundle({ ...good, cert: 'garbage' }, NOW)), /^certificate does not parse/);
    assert.match(reason(parseBundle({ ...good, key: 'garbage' }, NOW)), /^private key does not parse/);
    assert.match(reason(parseBundle({ ...good, ca: 'garbage' }, NOW)), /^CA certificate does not parse/);
    assert.match(reason(parseBundle({ ...good, cert: good.key }, NOW)), /^certificate does not parse/);
    assert.deepEqual(parseBundle({ key: good.key }, NOW), { ok: false, reason: 'no certificate' });
    assert.deepEqual(parseBundle({ cert: good.cert, key: '' }, NOW), { ok: false, reason: 'no private key' });
  });
});

function reason(r: ReturnType<typeof parseBundle>): string {
  assert.equal(r.ok, false);
  return r.ok ? '' : r.reason;
}
