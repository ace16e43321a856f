import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { configDigester } from '../../src/restarts/digest.ts';
import { configChecksum, xingLegacyChecksum } from '../../src/restarts/hash.ts';
import type { KubeObject } from '../../src/runtime/kube/types.ts';

const KEY = Buffer.from('0123456789abcdef0123456789abcdef');
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

describe('configDigester', () => {
  it('keeps metadata and checksums, and nothing of the content', () => {
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: 's',
        namespace: 'n',
        resourceVersion: '7',
        labels: { a: 'b' },
        managedFields: [{ manager: 'kubectl' }],
      },
      type: 'Opaque',
      data: { password: b64('hunter2-marker') },
      binaryData: { blob: b64('blob-marker') },
    } as KubeObject;
    const digest = configDigester(KEY, 'secret')(secret);
    assert.deepEqual(digest, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's', namespace: 'n', resourceVersion: '7', labels: { a: 'b' } },
      digest: { checksum: configChecksum(KEY, secret as never, 'secret'), legacy: xingLegacyChecksum(secret as never) },
    });
    assert.doesNotMatch(JSON.stringify(digest), /marker|aHVudGVy|Opaque/);
  });

  it('property: equal content gives equal digests, different content different checksums, per kind', () => {
    const data = fc.dictionary(fc.stringMatching(/^[a-z]{1,4}$/), fc.string({ maxLength: 8 }), { maxKeys: 3 });
    fc.assert(
      fc.property(data, data, fc.constantFrom('configmap' as const, 'secret' as const), (a, b, kind) => {
        const encode = (d: Record<string, string>) =>
          kind === 'secret' ? Object.fromEntries(Object.entries(d).map(([k, v]) => [k, b64(v)])) : d;
        const digest = configDigester(KEY, kind);
        const da = digest({ metadata: { name: 'x', resourceVersion: '1' }, data: encode(a) } as KubeObject).digest;
        const db = digest({ metadata: { name: 'x', resourceVersion: '2' }, data: encode(b) } as KubeObject).digest;
        assert.equal(
          da.checksum === db.checksum,
          JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort()),
        );
      }),
    );
  });

  it('never throws: content it cannot hash gets a checksum that moves with each resourceVersion, and no value is kept', () => {
    const digest = configDigester(KEY, 'configmap');
    const odd = (rv: string) =>
      digest({ metadata: { name: 'x', resourceVersion: rv }, data: { a: 42, b: 'marker' } } as unknown as KubeObject);
    assert.equal(odd('1').digest.checksum, 'unhashable:1');
    assert.notEqual(odd('1').digest.checksum, odd('2').digest.checksum);
    assert.doesNotMatch(JSON.stringify(odd('1')), /marker/);
    assert.doesNotThrow(() => digest({}));
  });
});
