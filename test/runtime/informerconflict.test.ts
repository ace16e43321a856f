import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { informerConflict } from '../../src/runtime/operator.ts';

describe('shared informers', () => {
  const byOwner = () => [];
  const byNode = () => [];
  const strip = <T>(o: T) => o;

  it('serve a second caller only with what it asked for: same transform and optional flag, indexers a subset by function', () => {
    const first = { indexers: { byOwner, byNode }, transform: strip };
    assert.equal(
      informerConflict(first, { indexers: { byOwner }, transform: strip }),
      undefined,
      'fewer indexers are fine',
    );
    assert.equal(informerConflict(first, { transform: strip }), undefined);
    assert.equal(
      informerConflict(first, { indexers: { byOwner: () => [] }, transform: strip }),
      'indexers (byOwner)',
      'same name, another function',
    );
    assert.equal(informerConflict(first, { indexers: { byZone: byOwner }, transform: strip }), 'indexers (byZone)');
    assert.equal(
      informerConflict(first, {}),
      'transforms',
      'objects transformed for the first caller are not what the second expects',
    );
    assert.equal(informerConflict({ optional: true }, {}), 'optional flags');
  });
});
