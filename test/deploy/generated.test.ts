// The RBAC source of truth and what is generated from it agree.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { generatedFiles, staleFiles, WRITE_POLICY, writePolicySpec } from '../../deploy/generate.ts';
import { lockName } from '../../src/downscale/prepare/handler.ts';
import { DEFAULT_TRACKING_CONFIG_MAP } from '../../src/drain/reschedule/rescheduleconfig.ts';
import { registerRescheduleFlags } from '../../src/drain/reschedule/webhook.ts';
import { ledgerName } from '../../src/drain/zpdb/ledger.ts';
import {
  CERTIFICATE_SECRET,
  CHECKSUM_KEY_SECRET,
  DOWNSCALE_LOCK_PREFIX,
  FEATURES,
  LEADER_LEASE,
  PERMISSIONS,
  policyRules,
  RESCHEDULE_TRACKING_CONFIGMAP,
  RESCHEDULE_WEBHOOK_CONFIGURATION,
  STRIMZI_WEBHOOK_CONFIGURATION,
  ROLLOUT_STATUS_CONFIGMAP,
  WEBHOOK_CONFIGURATIONS,
  WRITTEN,
  ZONE_TRACKER_CONFIGMAP,
  ZPDB_LEDGER_PREFIX,
  type KubeRule,
  type NameMatch,
} from '../../src/rbac/permissions.ts';
import { registerRestartFlags } from '../../src/restarts/controller.ts';
import { STATUS_CONFIGMAP } from '../../src/rollout/status.ts';
import { registerRuntimeFlags } from '../../src/runtime/runtimeflags.ts';
import { FlagSet } from '../../src/runtime/flags/flagset.ts';
import { registerWebhookFlags } from '../../src/webhooks/webhookflags.ts';
import { narrowingViolations } from '../support/rbac.ts';

const DEPLOY = fileURLToPath(new URL('../../deploy/', import.meta.url));

/** The webhook configurations a kustomize component ships, by kind. */
function shippedConfigurations(...files: string[]): { kind: string; name: string }[] {
  return files
    .flatMap((f) =>
      parseAllDocuments(readFileSync(`${DEPLOY}kustomize/components/${f}`, 'utf8')).map(
        (d) => d.toJS() as { kind: string; metadata: { name: string } },
      ),
    )
    .map((d) => ({ kind: d.kind, name: d.metadata.name }));
}

/** Flag defaults as `stateward -help` prints them. */
function flagDefaults(): Map<string, string> {
  const fs = new FlagSet('stateward');
  registerRuntimeFlags(fs);
  registerWebhookFlags(fs, () => ({ clusterDomain: 'cluster.local.', podTimeoutMs: 5000 }));
  registerRescheduleFlags(fs);
  registerRestartFlags(fs);
  const defaults = new Map<string, string>();
  for (const entry of fs.usage().split('\n  -').slice(1)) {
    const value = /\(default "?([^")]*)"?\)/.exec(entry)?.[1];
    if (value !== undefined) defaults.set(entry.split(/\s/)[0]!, value);
  }
  return defaults;
}

const matches = (match: NameMatch, name: string) =>
  match.names.includes(name) || match.prefixes.some((p) => name.startsWith(p));

/** Whether the write policy's allow-list lets the operator write `name` of `resource`, in its own namespace or another. */
function allowed(resource: string, name: string, where: 'own' | 'elsewhere'): boolean {
  const kind = WRITTEN.find((k) => k.resource === resource);
  if (!kind) return false;
  return matches(kind.anywhere, name) || (where === 'own' && matches(kind.own, name));
}

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
        for (const value of [...rule.verbs, ...rule.resources, ...rule.apiGroups])
          assert.notEqual(value, '*', `${feature} grants a wildcard`);
      }
    }
  });

  it('merges identical rules of several features once, keeping order', () => {
    const once = policyRules(['rollouts'], ['managed']);
    assert.deepEqual(policyRules(['rollouts', 'rollouts'], ['managed']), once);
    assert.deepEqual(policyRules(['rollouts'], ['cluster']), [], 'rollouts alone needs nothing cluster-scoped');
    assert.ok(
      policyRules(['webhooks'], ['cluster']).some((r) => r.resources.includes('validatingwebhookconfigurations')),
    );
  });

  it('names in resourceNames are the defaults of the flags (and constants) that name those objects', () => {
    const defaults = flagDefaults();
    assert.equal(defaults.get('leader-election.lease-name'), LEADER_LEASE);
    assert.equal(defaults.get('server-tls.self-signed-cert.secret-name'), CERTIFICATE_SECRET);
    assert.equal(defaults.get('config-restarts.checksum-key-secret'), CHECKSUM_KEY_SECRET);
    assert.equal(defaults.get('zone-tracker.config-map-name'), ZONE_TRACKER_CONFIGMAP);
    assert.equal(defaults.get('reschedule.tracking-config-map'), RESCHEDULE_TRACKING_CONFIGMAP);
    assert.equal(DEFAULT_TRACKING_CONFIG_MAP, RESCHEDULE_TRACKING_CONFIGMAP);
    assert.equal(STATUS_CONFIGMAP, ROLLOUT_STATUS_CONFIGMAP);
  });

  it("the write policy allows every name Stateward writes, where it writes it, and nothing of kube-system's", () => {
    // Written in every managed namespace.
    for (const zpdb of ['ingester', 'Kafka.Brokers', '']) assert.ok(allowed('leases', ledgerName(zpdb), 'elsewhere'));
    for (const group of ['ingester', 'UPPER_case', '']) assert.ok(allowed('leases', lockName(group), 'elsewhere'));
    assert.ok(ledgerName('x').startsWith(ZPDB_LEDGER_PREFIX) && lockName('x').startsWith(DOWNSCALE_LOCK_PREFIX));
    for (const name of [ROLLOUT_STATUS_CONFIGMAP, RESCHEDULE_TRACKING_CONFIGMAP, ZONE_TRACKER_CONFIGMAP])
      assert.ok(allowed('configmaps', name, 'elsewhere'), name);
    // Written in its own namespace only (the leader Lease's and the Secrets' Roles are `own`).
    assert.ok(allowed('leases', LEADER_LEASE, 'own') && !allowed('leases', LEADER_LEASE, 'elsewhere'));
    for (const name of [CERTIFICATE_SECRET, CHECKSUM_KEY_SECRET])
      assert.ok(allowed('secrets', name, 'own') && !allowed('secrets', name, 'elsewhere'), name);
    // What it must not write.
    for (const name of ['kube-controller-manager', 'kube-scheduler', 'cloud-controller-manager'])
      assert.ok(!allowed('leases', name, 'elsewhere') && !allowed('leases', name, 'own'), name);
    for (const name of ['kube-proxy', 'coredns', 'extension-apiserver-authentication'])
      assert.ok(!allowed('configmaps', name, 'elsewhere'), name);
    assert.ok(!allowed('secrets', 'default-token', 'own'));
    // The rendered policy judges exactly these kinds, with one validation each, and fails closed.
    const spec = writePolicySpec() as {
      failurePolicy: string;
      matchConstraints: { resourceRules: { apiGroups: string[]; resources: string[]; operations: string[] }[] };
      validations: { expression: string; message: string; reason: string }[];
    };
    assert.equal(spec.failurePolicy, 'Fail');
    assert.deepEqual(
      spec.matchConstraints.resourceRules.flatMap((r) => r.resources.map((x) => `${r.apiGroups[0]}/${x}`)).sort(),
      WRITTEN.map((k) => `${k.apiGroup}/${k.resource}`).sort(),
    );
    for (const r of spec.matchConstraints.resourceRules) assert.deepEqual(r.operations, ['CREATE', 'UPDATE', 'DELETE']);
    assert.equal(spec.validations.length, WRITTEN.length);
    for (const [i, kind] of WRITTEN.entries()) {
      assert.ok(spec.validations[i]!.expression.startsWith(`request.resource.resource != '${kind.resource}' || `));
      assert.equal(spec.validations[i]!.reason, 'Forbidden', 'refused as RBAC refuses: 403');
      for (const p of [...kind.anywhere.prefixes, ...kind.own.prefixes, ...kind.anywhere.names, ...kind.own.names])
        assert.ok(spec.validations[i]!.message.includes(p), `${kind.kind}'s message names ${p}`);
    }
    // Every overlay ships it.
    for (const overlay of ['rollouts', 'webhooks', 'cluster-wide', 'ha', 'all'])
      assert.match(
        readFileSync(`${DEPLOY}kustomize/overlays/${overlay}/kustomization.yaml`, 'utf8'),
        /^- \.\.\/\.\.\/rbac\/write-policy$/m,
        overlay,
      );
    const docs = parseAllDocuments(generatedFiles().get('kustomize/rbac/write-policy/write-policy.yaml')!).map(
      (d) => d.toJS() as { kind: string; metadata: { name: string }; spec: { policyName?: string } },
    );
    assert.deepEqual(
      docs.map((d) => [d.kind, d.metadata.name, d.spec.policyName]),
      [
        ['ValidatingAdmissionPolicy', WRITE_POLICY, undefined],
        ['ValidatingAdmissionPolicyBinding', WRITE_POLICY, WRITE_POLICY],
      ],
    );
  });

  it('webhook-configuration names are exactly the shipped configurations', () => {
    const names = (kind: string, list: { kind: string; name: string }[]) =>
      list
        .filter((c) => c.kind === kind)
        .map((c) => c.name)
        .sort();
    const webhooks = shippedConfigurations(
      'webhooks/no-downscale.yaml',
      'webhooks/prepare-downscale.yaml',
      'webhooks/pod-eviction.yaml',
    );
    assert.deepEqual(names('ValidatingWebhookConfiguration', webhooks), [...WEBHOOK_CONFIGURATIONS.validating].sort());
    assert.deepEqual(names('MutatingWebhookConfiguration', webhooks), [...WEBHOOK_CONFIGURATIONS.mutating].sort());
    assert.deepEqual(shippedConfigurations('reschedule/reschedule-on-eviction.yaml'), [
      { kind: 'ValidatingWebhookConfiguration', name: RESCHEDULE_WEBHOOK_CONFIGURATION },
    ]);
    assert.deepEqual(shippedConfigurations('strimzi-drain-cleaner/strimzi-drain-cleaner.yaml'), [
      { kind: 'ValidatingWebhookConfiguration', name: STRIMZI_WEBHOOK_CONFIGURATION },
    ]);
    // The components pass the same names to -webhooks.ca-bundle-configurations (the reschedule one all five).
    const flag = (component: string) =>
      /-webhooks\.ca-bundle-configurations=(\S+)/
        .exec(readFileSync(`${DEPLOY}kustomize/components/${component}/kustomization.yaml`, 'utf8'))?.[1]
        ?.split(',')
        .sort();
    const shipped = [...WEBHOOK_CONFIGURATIONS.validating, ...WEBHOOK_CONFIGURATIONS.mutating];
    assert.deepEqual(flag('webhooks'), [...shipped].sort());
    assert.deepEqual(flag('reschedule'), [...shipped, RESCHEDULE_WEBHOOK_CONFIGURATION].sort());
    // The Strimzi component's names every configuration, so it works before or after the reschedule one.
    assert.deepEqual(
      flag('strimzi-drain-cleaner'),
      [...shipped, RESCHEDULE_WEBHOOK_CONFIGURATION, STRIMZI_WEBHOOK_CONFIGURATION].sort(),
    );
  });

  it('listed-namespaces mode: every rule of every feature lands in exactly one of its halves, and only webhooks, reschedule and the namespace selector keep a ClusterRole', () => {
    const files = generatedFiles();
    for (const feature of FEATURES) {
      const docs = ['listed-namespaces', 'watched-namespace'].flatMap((mode) =>
        parseAllDocuments(files.get(`kustomize/rbac/${mode}/${feature}/rbac.yaml`) ?? '')
          .map((d) => d.toJS() as { kind: string; metadata: { name: string }; rules?: KubeRule[] } | null)
          .filter((d) => d !== null)
          .map((d) => ({ mode, ...d })),
      );
      const rules = (mode: string, kind: string) =>
        docs.filter((d) => d.mode === mode && d.kind === kind).flatMap((d) => d.rules ?? []);
      assert.deepEqual(rules('watched-namespace', 'Role'), policyRules([feature], ['managed']), `${feature}: managed`);
      assert.deepEqual(rules('listed-namespaces', 'Role'), policyRules([feature], ['own']), `${feature}: own`);
      assert.deepEqual(
        rules('listed-namespaces', 'ClusterRole'),
        policyRules([feature], ['cluster']),
        `${feature}: cluster`,
      );
      assert.deepEqual(rules('watched-namespace', 'ClusterRole'), []);
      const hasClusterRole = docs.some((d) => d.kind === 'ClusterRole');
      assert.equal(
        hasClusterRole,
        ['webhooks', 'reschedule', 'namespace-selector'].includes(feature),
        `${feature}'s ClusterRole`,
      );
    }
    // The watched namespace's binding names the operator's ServiceAccount across namespaces, spelled out.
    const binding = parseAllDocuments(files.get('kustomize/rbac/watched-namespace/config-restarts/rbac.yaml')!)
      .map((d) => d.toJS() as { kind: string; subjects?: unknown[] })
      .find((d) => d.kind === 'RoleBinding');
    assert.deepEqual(binding?.subjects, [{ kind: 'ServiceAccount', name: 'stateward', namespace: 'stateward' }]);
  });

  it('no render grants ConfigMap writes or webhook-configuration patches beyond fixed names, nor any Lease delete (namespaced, cluster-wide, listed namespaces, chart)', () => {
    const allowed = [
      ...WEBHOOK_CONFIGURATIONS.validating,
      ...WEBHOOK_CONFIGURATIONS.mutating,
      RESCHEDULE_WEBHOOK_CONFIGURATION,
      STRIMZI_WEBHOOK_CONFIGURATION,
    ];
    const files = generatedFiles();
    let checked = 0;
    for (const mode of ['namespaced', 'cluster-wide', 'listed-namespaces', 'watched-namespace']) {
      for (const feature of FEATURES) {
        // The listed-namespaces mode's halves have no file for a feature without rules of theirs.
        const file = files.get(`kustomize/rbac/${mode}/${feature}/rbac.yaml`);
        if (file === undefined && mode.includes('-namespace')) continue;
        const docs = parseAllDocuments(file!).map((d) => d.toJS() as { kind: string; rules?: KubeRule[] });
        for (const role of docs.filter((d) => d.rules)) {
          assert.deepEqual(narrowingViolations(role.rules!, allowed), [], `${mode}/${feature} ${role.kind}`);
          checked += role.rules!.length;
        }
      }
    }
    const chart = parse(files.get('helm/stateward/files/rbac.yaml')!) as Record<string, Record<string, KubeRule[]>>;
    for (const [feature, scopes] of Object.entries(chart))
      for (const [scope, rules] of Object.entries(scopes))
        assert.deepEqual(narrowingViolations(rules, allowed), [], `chart ${feature}/${scope}`);
    assert.ok(checked > 30, 'the renders were read');
    // The method itself catches what it is meant to.
    assert.equal(
      narrowingViolations([{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'create', 'update'] }], allowed)
        .length,
      1,
    );
    assert.equal(
      narrowingViolations(
        [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['delete'], resourceNames: ['x'] }],
        allowed,
      ).length,
      1,
    );
    assert.equal(
      narrowingViolations(
        [
          {
            apiGroups: ['admissionregistration.k8s.io'],
            resources: ['mutatingwebhookconfigurations'],
            verbs: ['list', 'watch', 'patch'],
          },
        ],
        allowed,
      ).length,
      1,
    );
    assert.equal(
      narrowingViolations(
        [
          {
            apiGroups: ['admissionregistration.k8s.io'],
            resources: ['mutatingwebhookconfigurations'],
            verbs: ['patch'],
            resourceNames: ['someone-elses'],
          },
        ],
        allowed,
      ).length,
      1,
    );
  });
});
