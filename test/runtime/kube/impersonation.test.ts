import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { headerKeyEscape } from '../../../src/runtime/kube/impersonation.ts';
import { assertReaching, SKIP } from '../../support/reach.ts';

describe('headerKeyEscape (client-go)', () => {
  it('keeps token characters and percent-encodes every other byte of the UTF-8 key, and %', () => {
    assert.equal(headerKeyEscape('acme.com/project'), 'acme.com%2Fproject');
    assert.equal(headerKeyEscape("a!#$&'*+-.^_`|~Z9"), "a!#$&'*+-.^_`|~Z9");
    assert.equal(headerKeyEscape('50% é'), '50%25%20%C3%A9');
  });

  it('is a valid header name that decodeURIComponent turns back into the key (as the apiserver unescapes it)', () => {
    assertReaching(
      fc.string({ unit: 'binary' }),
      (key) => {
        if (key.length === 0 || !key.isWellFormed()) return SKIP;
        const escaped = headerKeyEscape(key);
        assert.match(escaped, /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/);
        assert.equal(decodeURIComponent(escaped), key);
      },
      { floor: 0.6 }, // about 88%: the empty key and lone surrogates are skipped
    );
  });
});
