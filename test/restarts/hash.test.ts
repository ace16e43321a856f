import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { assertReaching } from '../support/reach.ts';
import {
  CHECKSUM_PREFIX,
  checksumScheme,
  configChecksum,
  xingLegacyChecksum,
  type ConfigPayload,
} from '../../src/restarts/hash.ts';

const KEY = Buffer.from('0123456789abcdef0123456789abcdef');
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

/** The same entries, inserted in a different order (own properties, as JSON.parse makes them, "__proto__" included). */
function reordered(map: Record<string, string>, order: number[]): Record<string, string> {
  const keys = Object.keys(map);
  const out: Record<string, string> = {};
  const put = (k: string) =>
    Object.defineProperty(out, k, { value: map[k], enumerable: true, writable: true, configurable: true });
  for (const i of order) {
    const k = keys[i];
    if (k !== undefined && !Object.hasOwn(out, k)) put(k);
  }
  for (const k of keys) if (!Object.hasOwn(out, k)) put(k);
  return out;
}

const keyArb = fc.stringMatching(/^[-._a-zA-Z0-9]{1,12}$/);
const dataArb = fc.dictionary(keyArb, fc.string({ maxLength: 20 }), { maxKeys: 6 });
const binaryArb = fc.dictionary(
  keyArb,
  fc.uint8Array({ maxLength: 20 }).map((u) => Buffer.from(u).toString('base64')),
  { maxKeys: 6 },
);
const payloadArb: fc.Arbitrary<ConfigPayload> = fc.record({ data: dataArb, binaryData: binaryArb });

describe('configChecksum: format and basics', { timeout: 10000 }, () => {
  it('is "v1:" + 64 lowercase hex digits and deterministic', () => {
    const h = configChecksum(KEY, { data: { a: 'b' } });
    assert.match(h, /^v1:[0-9a-f]{64}$/);
    assert.ok(h.startsWith(CHECKSUM_PREFIX));
    assert.equal(configChecksum(KEY, { data: { a: 'b' } }), h);
    assert.equal(checksumScheme(h), 'v1');
  });

  it('absent, null and empty maps all hash the same, and that value is defined', () => {
    const empty = configChecksum(KEY, {});
    assert.match(empty, /^v1:[0-9a-f]{64}$/);
    assert.equal(configChecksum(KEY, { data: {}, binaryData: {} }), empty);
    assert.equal(configChecksum(KEY, { data: null, binaryData: null }), empty);
    assert.notEqual(configChecksum(KEY, { data: { a: '' } }), empty);
    assert.notEqual(configChecksum(KEY, { binaryData: { a: '' } }), empty);
  });

  it('matches an independent implementation of the documented framing', () => {
    const u64 = (n: number) => {
      const b = Buffer.alloc(8);
      b.writeBigUInt64BE(BigInt(n));
      return b;
    };
    const expected = createHmac('sha256', KEY)
      .update('stateward/config-checksum/v1\0')
      .update(Buffer.of(1))
      .update(Buffer.of(0x44))
      .update(u64(1))
      .update(u64(1))
      .update('k')
      .update(Buffer.of(0))
      .update(u64(3))
      .update('val')
      .update(Buffer.of(0x42))
      .update(u64(1))
      .update(u64(1))
      .update('z')
      .update(Buffer.of(0))
      .update(u64(2))
      .update(Buffer.of(0xff, 0x00))
      .digest('hex');
    assert.equal(
      configChecksum(KEY, { data: { k: 'val' }, binaryData: { z: Buffer.of(0xff, 0).toString('base64') } }),
      `v1:${expected}`,
    );
  });

  it('a string key is its UTF-8 bytes', () => {
    assert.equal(
      configChecksum('clé', { data: { a: 'b' } }),
      configChecksum(Buffer.from('clé', 'utf8'), { data: { a: 'b' } }),
    );
  });

  it('refuses an empty key and an unknown kind without echoing input', () => {
    assert.throws(
      () => configChecksum('', { data: { a: 'hunter2' } }),
      (e: Error) => e instanceof RangeError && !e.message.includes('hunter2'),
    );
    assert.throws(() => configChecksum(Buffer.alloc(0), {}), RangeError);
    assert.throws(() => configChecksum(KEY, {}, 'pod' as 'secret'), TypeError);
    assert.throws(
      () => configChecksum(KEY, { data: { password: 42 as unknown as string } }),
      (e: Error) => e instanceof TypeError && !e.message.includes('password'),
    );
    assert.throws(() => configChecksum(KEY, { data: 'abc' as unknown as Record<string, string> }), TypeError);
    assert.throws(() => configChecksum(KEY, { binaryData: ['x'] as unknown as Record<string, string> }), TypeError);
  });

  it('does not modify its input', () => {
    const obj = { data: { b: '2', a: '1' }, binaryData: { c: b64('x') } };
    const copy = structuredClone(obj);
    configChecksum(KEY, obj);
    configChecksum(KEY, obj, 'secret');
    assert.deepEqual(obj, copy);
    assert.deepEqual(Object.keys(obj.data), ['b', 'a']);
  });
});

describe('configChecksum: framing is unambiguous', { timeout: 10000 }, () => {
  it('{a:"bc"} and {ab:"c"} differ, as do other re-splittings', () => {
    assert.notEqual(configChecksum(KEY, { data: { a: 'bc' } }), configChecksum(KEY, { data: { ab: 'c' } }));
    assert.notEqual(configChecksum(KEY, { data: { a: 'b;c=d' } }), configChecksum(KEY, { data: { a: 'b', c: 'd' } }));
    assert.notEqual(configChecksum(KEY, { data: { a: '', b: '' } }), configChecksum(KEY, { data: { a: 'b' } }));
  });

  it('moving a key between data and binaryData changes the hash', () => {
    assert.notEqual(configChecksum(KEY, { data: { a: 'x' } }), configChecksum(KEY, { binaryData: { a: b64('x') } }));
    assert.notEqual(
      configChecksum(KEY, { data: { a: 'x', b: 'y' } }),
      configChecksum(KEY, { data: { a: 'x' }, binaryData: { b: b64('y') } }),
    );
  });

  it('a ConfigMap and a Secret with the same bytes differ (kind is framed)', () => {
    assert.notEqual(
      configChecksum(KEY, { binaryData: { a: b64('x') } }, 'configmap'),
      configChecksum(KEY, { binaryData: { a: b64('x') } }, 'secret'),
    );
    assert.notEqual(
      configChecksum(KEY, { data: { a: b64('x') } }),
      configChecksum(KEY, { data: { a: b64('x') } }, 'secret'),
    );
  });

  it('Secret data is hashed as decoded bytes; non-canonical base64 is kept apart', () => {
    // Canonical encodings of different bytes differ; the same bytes agree.
    assert.equal(
      configChecksum(KEY, { data: { a: b64('pw') } }, 'secret'),
      configChecksum(KEY, { data: { a: Buffer.from('pw').toString('base64') } }, 'secret'),
    );
    assert.notEqual(
      configChecksum(KEY, { data: { a: b64('pw') } }, 'secret'),
      configChecksum(KEY, { data: { a: b64('pW') } }, 'secret'),
    );
    // Node would decode all of these to the same bytes as "cHc=".
    const canonical = configChecksum(KEY, { data: { a: 'cHc=' } }, 'secret');
    for (const loose of ['cHc', 'cHc=\n', 'c H c =', 'cHc=!!']) {
      assert.notEqual(configChecksum(KEY, { data: { a: loose } }, 'secret'), canonical, loose);
    }
  });

  it('property: insertion order of keys never matters', () => {
    fc.assert(
      fc.property(payloadArb, fc.array(fc.nat(6)), fc.array(fc.nat(6)), (p, o1, o2) => {
        const q = { data: reordered(p.data ?? {}, o1), binaryData: reordered(p.binaryData ?? {}, o2) };
        assert.equal(configChecksum(KEY, q), configChecksum(KEY, p));
        assert.equal(configChecksum(KEY, q, 'secret'), configChecksum(KEY, p, 'secret'));
      }),
    );
  });

  it('property: different payloads give different checksums', () => {
    const canon = (p: ConfigPayload) =>
      JSON.stringify([
        Object.entries(p.data ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)),
        Object.entries(p.binaryData ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)),
      ]);
    assertReaching(
      fc.tuple(payloadArb, payloadArb),
      ([p, q]) => {
        fc.pre(canon(p) !== canon(q));
        assert.notEqual(configChecksum(KEY, p), configChecksum(KEY, q));
      },
      { numRuns: 100, floor: 0.9 },
    );
  });

  it('property: changing one value, or renaming one key, changes the checksum', () => {
    assertReaching(
      // At least one key: the dictionary plus the entry k changed or renamed.
      fc.tuple(dataArb, keyArb, fc.string({ maxLength: 20 }), fc.string({ maxLength: 5 })),
      ([data, k, value, extra]) => {
        const d = { ...data, [k]: value };
        const before = configChecksum(KEY, { data: d });
        const changed = { ...d, [k]: `${d[k]}${extra}x` };
        assert.notEqual(configChecksum(KEY, { data: changed }), before);
        const { [k]: v, ...rest } = d;
        const renamed = { ...rest, [`${k}_`]: v ?? '' };
        fc.pre(!Object.hasOwn(d, `${k}_`));
        assert.notEqual(configChecksum(KEY, { data: renamed }), before);
      },
      { numRuns: 100, floor: 0.9 },
    );
  });

  it('property: different HMAC keys give different checksums', () => {
    assertReaching(
      fc.tuple(
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        payloadArb,
      ),
      ([k1, k2, p]) => {
        fc.pre(!Buffer.from(k1).equals(Buffer.from(k2)));
        // HMAC pads short keys with zeros, so keys differing only by trailing
        // zero bytes are the same key; that is HMAC, not our framing.
        fc.pre(
          Buffer.from(k1)
            .toString('hex')
            .replace(/(00)+$/, '') !==
            Buffer.from(k2)
              .toString('hex')
              .replace(/(00)+$/, ''),
        );
        assert.notEqual(configChecksum(Buffer.from(k1), p), configChecksum(Buffer.from(k2), p));
      },
      { numRuns: 100, floor: 0.9 },
    );
  });
});

describe('xing compatibility', { timeout: 10000 }, () => {
  it('xingLegacyChecksum reproduces xing’s test vectors', () => {
    // xing:src/controller/meta_config_test.go
    assert.equal(xingLegacyChecksum({ data: { key: 'value' } }), 'e43abcf337524483');
    assert.equal(xingLegacyChecksum({ data: { key: b64('value') } }), 'fed7a27106a07691');
  });

  it('xingLegacyChecksum follows Go’s JSON: sorted keys, HTML escaping, nil map, binaryData ignored', () => {
    const sha16 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex').slice(0, 16);
    assert.equal(xingLegacyChecksum({}), sha16('null'));
    assert.equal(xingLegacyChecksum({ data: {} }), sha16('{}'));
    assert.equal(xingLegacyChecksum({ data: { b: '1', a: '2' } }), sha16('{"a":"2","b":"1"}'));
    assert.equal(
      xingLegacyChecksum({ data: { a: '<&>\u2028"\\\n\t\b' } }),
      sha16('{"a":"\\u003c\\u0026\\u003e\\u2028\\"\\\\\\n\\t\\u0008"}'),
    );
    assert.equal(
      xingLegacyChecksum({ data: { a: 'x' }, binaryData: { b: b64('y') } }),
      xingLegacyChecksum({ data: { a: 'x' } }),
    );
  });

  it('property: xingLegacyChecksum is Go’s JSON for any text, escaped or not (a model built on JSON.stringify)', () => {
    const sha16 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex').slice(0, 16);
    // JSON.stringify escapes what Go escapes except <, >, &, U+2028/9 and lone surrogates;
    // it writes \b and \f where Go < 1.22 wrote \u0008 and \u000c.
    const goString = (s: string) =>
      JSON.stringify(s)
        .replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
        // One escape at a time, so an escaped backslash followed by "b" is not read as \b.
        .replace(/\\(u[0-9a-f]{4}|.)/g, (escape: string, what: string) =>
          what === 'b' ? '\\u0008' : what === 'f' ? '\\u000c' : /^ud[89a-f]/.test(what) ? '\\ufffd' : escape,
        );
    const goMap = (m: Record<string, string>) =>
      `{${Object.keys(m)
        .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
        .map((k) => `${goString(k)}:${goString(m[k]!)}`)
        .join(',')}}`;
    const text = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.string({
        unit: fc.constantFrom('a', '<', '&', '\\', '"', '\u2028', '\b', '\f', '\ud800', '\udc00', '😀', '\u0000'),
        maxLength: 20,
      }),
    );
    fc.assert(
      fc.property(fc.dictionary(keyArb, text, { maxKeys: 5 }), (data) => {
        assert.equal(xingLegacyChecksum({ data }), sha16(goMap(data)));
      }),
      { numRuns: 500 },
    );
  });

  it('checksumScheme tells v1, xing and anything else apart', () => {
    assert.equal(checksumScheme('e43abcf337524483'), 'xing-legacy');
    assert.equal(checksumScheme(configChecksum(KEY, {})), 'v1');
    for (const other of [
      '',
      'v1:',
      'v2:' + '0'.repeat(64),
      'E43ABCF337524483',
      'e43abcf33752448',
      'v1:' + 'g'.repeat(64),
    ]) {
      assert.equal(checksumScheme(other), 'unknown', other);
    }
  });
});
