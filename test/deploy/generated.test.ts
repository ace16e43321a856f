// The RBAC source of truth and what is generated from it agree.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { staleFiles } from '../../deploy/generate.ts';
import { FEATURES, PERMISSIONS, policyRules } from '../../src/rbac/permissions.ts';

describe('generated deploy files', { timeout: 10_000 }, () => {
  it('are up to date with src/rbac/permissions.ts (npm run generate)', async () => {
    assert.deepEqual(await staleFiles(), []);
  });

  it('every rule says why, names a verb, and no rule grants a wildcard', () => {
    for (const feature of FEATURES) {
      assert.ok(PERMISSIONS[feature].length > 0, feature);
      for (const rule of PERMISSIONS[feature]) {
        assert.ok(rule.why.length > 10, `${feature}: ${JSON.stringify(rule)}`);
        assert.ok(rule.verbs.length > 0);
        for (const value of [...rule.verbs, ...rule.resources, ...rule.apiGroups]) assert.notEqual(value, '*', `${feature} grants a wildcard`);
      }
    }
  });

  it('merges identical rules of several features once, keeping order', () => {
    const once = policyRules(['rollouts'], ['managed']);
    assert.deepEqual(policyRules(['rollouts', 'rollouts'], ['managed']), once);
    assert.deepEqual(policyRules(['rollouts'], ['cluster']), [], 'rollouts alone needs nothing cluster-scoped');
    assert.ok(policyRules(['webhooks'], ['cluster']).some((r) => r.resources.includes('validatingwebhookconfigurations')));
  });
});
