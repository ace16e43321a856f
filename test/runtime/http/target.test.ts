import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MAX_TARGET_LENGTH, parseRequestTarget } from '../../../src/runtime/http/target.ts';

const path = (target: string) => {
  const parsed = parseRequestTarget(target);
  return parsed.ok ? parsed.path : `${parsed.status}: ${parsed.reason}`;
};

describe('request targets', () => {
  it('reads the path of origin-form and absolute-form targets, as sent', () => {
    assert.equal(path('/metrics'), '/metrics');
    assert.equal(path('/status/team-a?x=1&y'), '/status/team-a');
    assert.equal(path('/admission%2Fno-downscale'), '/admission%2Fno-downscale');
    assert.equal(path('http://stateward.ns.svc:8443/admission/no-downscale?timeout=10s'), '/admission/no-downscale');
    assert.equal(path('https://[::1]:8443/ready'), '/ready');
    assert.equal(path('http://a:8001'), '/');
    assert.equal(path('http://a?x'), '/');
    assert.equal(path('http://user@a:/healthz'), '/healthz');
  });

  it('answers the targets that used to end the process (issue 16) without throwing', () => {
    // `//` parses as a path that no route serves: a 404, not a crash.
    assert.equal(path('//'), '//');
    assert.equal(path('http://a:99999/metrics'), '400: malformed port in the request target');
    assert.equal(path('http://[::1/admission/no-downscale'), '400: unclosed IPv6 address in the request target');
  });

  it('refuses every other form with a reason', () => {
    for (const [target, status] of [
      ['', 400],
      ['*', 400],
      ['example.com:443', 400],
      ['metrics', 400],
      ['/a b', 400],
      ['/%zz', 400],
      ['/ok?%g1', 400],
      ['/frag#x', 400],
      ['http://[zz]/x', 400],
      ['http://a b/x', 400],
      ['http://a:-1/x', 400],
      ['http://[::1]x/', 400],
      [`/${'a'.repeat(MAX_TARGET_LENGTH)}`, 414],
    ] as const) {
      const parsed = parseRequestTarget(target);
      assert.equal(parsed.ok, false, `${JSON.stringify(target)} refused`);
      if (!parsed.ok) assert.equal(parsed.status, status, JSON.stringify(target));
    }
    assert.equal(parseRequestTarget(undefined).ok, false);
  });

  it('never throws, and a path it returns is one the target carries, starting with "/"', () => {
    const targets = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 200 }),
      fc.string({ maxLength: 200 }).map((s) => `/${s}`),
      fc
        .tuple(
          fc.constantFrom('http://', 'https://', 'HTTP://', 'x+y.z://', '//'),
          fc.string({ maxLength: 60 }),
          fc.constantFrom('', ':', ':0', ':65535', ':65536', ':99999', ':-1', ':8a'),
          fc.string({ maxLength: 60 }),
        )
        .map((parts) => parts.join('')),
      fc
        .tuple(
          fc.constantFrom('http://[', 'http://[::1', 'http://[::1]', 'http://[fe80::1%25eth0]'),
          fc.string({ maxLength: 40 }),
        )
        .map((parts) => parts.join('')),
    );
    fc.assert(
      fc.property(targets, (target) => {
        const parsed = parseRequestTarget(target);
        if (parsed.ok) {
          assert.ok(parsed.path.startsWith('/'));
          assert.ok(target.includes(parsed.path) || parsed.path === '/');
          assert.ok(!/[\s#?]/.test(parsed.path));
        } else {
          assert.ok(parsed.reason.length > 0 && parsed.reason.length < 100);
        }
      }),
      { seed: 16, numRuns: 20_000 },
    );
  });
});
