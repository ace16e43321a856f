import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { caBundlePatch, type WebhookConfiguration } from '../../src/webhooks/cainjection.ts';

describe('CA bundle patch', () => {
  it('sets caBundle only where it differs, guarding each entry by its name at its index', () => {
    const config: WebhookConfiguration = {
      webhooks: [
        { name: 'a.grafana.com', clientConfig: { caBundle: 'CA' } },
        { name: 'b.grafana.com', clientConfig: {} },
        { name: 'c.grafana.com', clientConfig: { caBundle: 'OLD' } },
      ],
    };
    assert.deepEqual(caBundlePatch(config, 'CA'), [
      { op: 'test', path: '/webhooks/1/name', value: 'b.grafana.com' },
      { op: 'add', path: '/webhooks/1/clientConfig/caBundle', value: 'CA' },
      { op: 'test', path: '/webhooks/2/name', value: 'c.grafana.com' },
      { op: 'add', path: '/webhooks/2/clientConfig/caBundle', value: 'CA' },
    ]);
  });

  it('writes nothing when every webhook already has the CA', () => {
    assert.equal(caBundlePatch({ webhooks: [{ name: 'a', clientConfig: { caBundle: 'CA' } }] }, 'CA'), undefined);
    assert.equal(caBundlePatch({}, 'CA'), undefined);
  });
});
