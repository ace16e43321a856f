import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { assertReaching, SKIP } from '../../support/reach.ts';
import { defaultRenewBefore, planCertificate, type SecretState } from '../../../src/webhooks/tls/certificateplan.ts';
import { parseBundle } from '../../../src/webhooks/tls/bundle.ts';
import { makeBundle, toSecretData, type TestLeaf } from './fixtures.ts';

const NOW = 1_700_000_000_000;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const window = { notBefore: NOW - HOUR, notAfter: NOW + 10 * HOUR };
const names = ['hooks', 'hooks.ns', 'hooks.ns.svc', 'hooks.ns.svc.cluster.local'];

describe('planCertificate', () => {
  let good: TestLeaf;
  let fewNames: TestLeaf;
  let other: TestLeaf;
  before(async () => {
    good = await makeBundle(names, window);
    fewNames = await makeBundle(['hooks.ns.svc'], window);
    other = await makeBundle(names, window);
  });
  const plan = (secret: SecretState | undefined, now = NOW, renewBeforeMs = HOUR, wantDnsNames = names) =>
    planCertificate({ secret, now, renewBeforeMs, wantDnsNames });

  it('creates a missing secret', () => {
    assert.deepEqual(plan(undefined), { action: 'create' });
  });

  it('fills an empty secret', () => {
    for (const secret of [{}, { data: {} }, { data: null }]) {
      const p = plan(secret);
      assert.equal(p.action, 'generate-and-update');
      assert.ok(p.action === 'generate-and-update' && p.warning === undefined);
    }
  });

  it('replaces, with a warning, a secret lacking keys (rollout-operator exits here)', () => {
    const p = plan({ data: toSecretData({ cert: good.cert, key: good.key }) });
    assert.equal(p.action, 'generate-and-update');
    assert.ok(p.action === 'generate-and-update');
    assert.match(p.reason, /lacks ca/);
    assert.match(p.warning ?? '', /lacks ca/);
    const q = plan({ data: { other: 'eA==' } });
    assert.ok(q.action === 'generate-and-update' && /lacks ca, cert, key/.test(q.warning ?? ''));
  });

  it('replaces, with a warning, a pair that does not parse or match', () => {
    for (const bundle of [
      { ...good, key: other.key },
      { ...good, cert: 'garbage' },
      { ...good, ca: other.ca },
    ]) {
      const p = plan({ data: toSecretData(bundle) });
      assert.ok(p.action === 'generate-and-update', p.action);
      assert.match(p.warning ?? '', /unusable/);
    }
  });

  it('replaces an expired or not-yet-valid certificate without a warning', () => {
    for (const now of [window.notAfter, window.notAfter + DAY, window.notBefore - 1]) {
      const p = plan({ data: toSecretData(good) }, now);
      assert.ok(p.action === 'generate-and-update');
      assert.equal(p.warning, undefined);
    }
  });

  it('renews a certificate within renewBefore of expiry', () => {
    const p = plan({ data: toSecretData(good) }, window.notAfter - HOUR);
    assert.ok(p.action === 'generate-and-update');
    assert.match(p.reason, /renewal window/);
    assert.equal(plan({ data: toSecretData(good) }, window.notAfter - HOUR - 1).action, 'reuse');
  });

  it('replaces a certificate missing a wanted DNS name', () => {
    const p = plan({ data: toSecretData(fewNames) });
    assert.ok(p.action === 'generate-and-update');
    assert.match(p.reason, /lacks DNS names hooks, hooks.ns, hooks.ns.svc.cluster.local/);
    assert.equal(
      plan({ data: toSecretData(fewNames) }, NOW, HOUR, ['HOOKS.ns.svc']).action,
      'reuse',
      'names compare case-insensitively',
    );
  });

  it('reuses a valid certificate, renewing at notAfter - renewBefore', () => {
    const p = plan({ data: toSecretData(good) });
    assert.ok(p.action === 'reuse');
    assert.equal(p.renewAt, window.notAfter - HOUR);
    assert.equal(p.bundle.cert, good.cert);
    assert.equal(p.bundle.key, good.key);
    assert.equal(p.bundle.ca, good.ca);
    assert.equal(p.bundle.notAfter, window.notAfter);
  });

  it('never reuses an expired, expiring, unusable or mismatched bundle (property)', () => {
    const states: (SecretState | undefined)[] = [
      undefined,
      {},
      { data: toSecretData(good) },
      { data: toSecretData(fewNames) },
      { data: toSecretData({ ...good, key: other.key }) },
      { data: toSecretData({ ...good, ca: other.ca }) },
      { data: toSecretData({ cert: good.cert, key: good.key }) },
      { data: toSecretData({ ...good, cert: 'garbage' }) },
    ];
    const valid = states[2];
    assertReaching(
      fc.tuple(
        // The valid bundle half the time, so that reuse is common enough to check.
        fc.oneof(fc.constantFrom(...states), fc.constant(valid)),
        fc.integer({ min: window.notBefore - 2 * HOUR, max: window.notAfter + 2 * HOUR }),
        fc.oneof(fc.integer({ min: 0, max: 6 * HOUR }), fc.integer({ min: 0, max: 2 * DAY })),
        // Names it has, more often than not.
        fc.oneof(fc.subarray(names), fc.subarray([...names, 'elsewhere.example'])),
      ),
      ([secret, now, renewBeforeMs, want]) => {
        const p = planCertificate({ secret, now, renewBeforeMs, wantDnsNames: want });
        if (p.action !== 'reuse') return SKIP;
        const data = secret?.data ?? {};
        const decoded = Object.fromEntries(
          Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
        );
        const check = parseBundle(decoded, now);
        assert.ok(check.ok, 'reused bundle parses, matches and is signed by its CA');
        assert.ok(now >= check.notBefore && now < check.notAfter - renewBeforeMs, 'not expired nor due');
        assert.equal(p.renewAt, check.notAfter - renewBeforeMs);
        assert.ok(p.renewAt > now);
        for (const n of want) assert.ok(check.dnsNames.includes(n), `has ${n}`);
      },
      { numRuns: 1000, floor: 0.06 },
    );
  });
});

describe('defaultRenewBefore', () => {
  it('is a third of the validity, at most 30 days', () => {
    assert.equal(defaultRenewBefore(365 * DAY), 30 * DAY);
    assert.equal(defaultRenewBefore(90 * DAY), 30 * DAY);
    assert.equal(defaultRenewBefore(30 * DAY), 10 * DAY);
    assert.equal(defaultRenewBefore(3 * HOUR), HOUR);
  });
});
