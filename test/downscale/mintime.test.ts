import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { StatefulSet } from '../../src/runtime/kube/types.ts';
import { minTimeSetting } from '../../src/downscale/mintime.ts';
import { MIN_TIME_BETWEEN_ZONES_DOWNSCALE_KEY as KEY } from '../../src/vocabulary/keys.ts';

const sts = (labels?: Record<string, string>, annotations?: Record<string, string>): StatefulSet => ({
  metadata: { name: 'zone-a', ...(labels ? { labels } : {}), ...(annotations ? { annotations } : {}) },
});

describe('minTimeSetting (rollout-operator v0.39, #463)', () => {
  it('the annotation first, the label as the fallback, an empty value as not set', () => {
    assert.equal(minTimeSetting(sts()), undefined);
    assert.deepEqual(minTimeSetting(sts(undefined, { [KEY]: '1h' })), { value: '1h', from: 'annotation' });
    assert.deepEqual(minTimeSetting(sts({ [KEY]: '12h' })), { value: '12h', from: 'label' });
    assert.deepEqual(minTimeSetting(sts({ [KEY]: '12h' }, { [KEY]: '1h' })), {
      value: '1h',
      from: 'annotation',
      ignoredLabel: '12h',
    });
    assert.deepEqual(minTimeSetting(sts({ [KEY]: '12h' }, { [KEY]: '' })), { value: '12h', from: 'label' });
    assert.equal(minTimeSetting(sts({ [KEY]: '' })), undefined);
  });

  it('property: a non-empty annotation always wins; otherwise a non-empty label is read', () => {
    const value = fc.option(fc.string({ maxLength: 6 }), { nil: undefined });
    fc.assert(
      fc.property(value, value, (label, annotation) => {
        const setting = minTimeSetting(
          sts(
            label === undefined ? undefined : { [KEY]: label },
            annotation === undefined ? undefined : { [KEY]: annotation },
          ),
        );
        if (annotation) assert.equal(setting?.value, annotation);
        else if (label) assert.deepEqual(setting, { value: label, from: 'label' });
        else assert.equal(setting, undefined);
        assert.equal(setting?.ignoredLabel, annotation && label !== undefined ? label : undefined);
      }),
    );
  });
});
