// The Secrets Store CSI integration's pure parts: the classes a template
// mounts, Reloader's secretproviderclass opt-ins, and the per-(workload,
// class) checksum rule, proved against a model of the driver, the workload
// controllers and the operator (one rotation, one restart).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MISSING } from '../../src/restarts/checksums.ts';
import {
  classChecksum,
  compareResourceVersions,
  isCurrentGeneration,
  podWorkload,
  versionsChecksum,
  type ClassMount,
} from '../../src/restarts/csichecksum.ts';
import { classPodStatusDigester, indexByClass } from '../../src/restarts/csiinformers.ts';
import {
  CLASS_AUTO_ANNOTATION as SPC_AUTO,
  CLASS_EXCLUDE_ANNOTATION as SPC_EXCLUDE,
  CLASS_RELOAD_ANNOTATION as SPC_RELOAD,
  classPatternMatches,
  watchedClasses,
  withClasses,
} from '../../src/restarts/csioptins.ts';
import { watchedConfigs } from '../../src/restarts/optins.ts';
import { classKey, classReferences, parseClassKey } from '../../src/restarts/csireferences.ts';
import { checksumScheme } from '../../src/restarts/hash.ts';
import type { WorkloadLike } from '../../src/restarts/optins.ts';
import {
  RELOADER_AUTO_ANNOTATION as AUTO,
  RELOADER_IGNORE_ANNOTATION as IGNORE,
  RELOADER_MATCH_ANNOTATION as MATCH,
  RELOADER_SEARCH_ANNOTATION as SEARCH,
  XING_ENABLED_ANNOTATION as XING,
  XING_TIMESTAMP_ANNOTATION as TRIGGER,
} from '../../src/vocabulary/keys.ts';

const NS = 'prod';
const KEY = Buffer.from('test-key-0123456789');

function csiVolume(name: string, spc: string, driver = 'secrets-store.csi.k8s.io') {
  return { name, csi: { driver, readOnly: true, volumeAttributes: { secretProviderClass: spc } } };
}

function classWorkload(annotations: Record<string, string>, templateAnnotations: Record<string, string> = {}) {
  return {
    metadata: { name: 'web', namespace: NS, annotations },
    spec: {
      template: {
        metadata: { annotations: templateAnnotations },
        spec: {
          containers: [{ name: 'app', volumeMounts: [{ name: 'vault', mountPath: '/mnt/vault' }] }],
          volumes: [
            csiVolume('vault', 'vault-db'),
            csiVolume('azure', 'kv-app'),
            csiVolume('other-driver', 'not-a-class', 'example.com/csi'),
            { name: 'cm', configMap: { name: 'vault-db' } },
          ],
        },
      },
    },
  } as WorkloadLike;
}

describe('classReferences', () => {
  it('names the classes of the Secrets Store driver’s CSI volumes, mounted by a container or not', () => {
    const refs = classReferences(classWorkload({}).spec?.template, NS);
    assert.deepEqual(
      refs.map((r) => [r.key, r.volumes]),
      [
        ['secretproviderclass/prod/kv-app', ['azure']],
        ['secretproviderclass/prod/vault-db', ['vault']],
      ],
    );
  });

  it('never throws on odd shapes, and skips volumes without a class', () => {
    for (const t of [undefined, null, 1, {}, { spec: { volumes: 'x' } }, { spec: { volumes: [null, { csi: 1 }] } }])
      assert.deepEqual(classReferences(t as never, NS), []);
    const noName = { spec: { volumes: [{ name: 'v', csi: { driver: 'secrets-store.csi.k8s.io' } }] } };
    assert.deepEqual(classReferences(noName as never, NS), []);
  });

  it('keys round-trip, and never parse as a ConfigMap or Secret key', () => {
    assert.deepEqual(parseClassKey(classKey(NS, 'a.b')), { namespace: NS, name: 'a.b' });
    assert.equal(parseClassKey('secret/prod/a'), undefined);
    assert.equal(parseClassKey('secretproviderclass/prod'), undefined);
  });
});

describe('watchedClasses: Reloader’s opt-ins for secretproviderclass', () => {
  it('reloader.stakater.com/auto and the typed auto watch every mounted class', () => {
    for (const ann of [{ [AUTO]: 'true' }, { [SPC_AUTO]: 'true' }, { [SPC_AUTO]: 'T' }] as Record<string, string>[]) {
      const w = watchedClasses(classWorkload(ann));
      assert.deepEqual(w.keys, ['secretproviderclass/prod/kv-app', 'secretproviderclass/prod/vault-db']);
      assert.ok(w.classes.every((c) => c.reference !== undefined));
      assert.deepEqual(w.warnings, []);
    }
  });

  it('xing’s opt-in does not cover classes; nothing at all is no opt-in', () => {
    assert.deepEqual(watchedClasses(classWorkload({ [XING]: 'enabled' })).optIns, []);
    assert.deepEqual(watchedClasses(classWorkload({})).keys, []);
  });

  it('auto "false" opts out even under --auto-reload-all; unset is auto there', () => {
    assert.deepEqual(watchedClasses(classWorkload({ [AUTO]: 'false' }), { autoReloadAll: true }).keys, []);
    assert.deepEqual(watchedClasses(classWorkload({}), { autoReloadAll: true }).optIns, ['reloader-auto-all']);
  });

  it('a bad boolean warns and is false', () => {
    const w = watchedClasses(classWorkload({ [SPC_AUTO]: 'yes' }));
    assert.deepEqual(w.keys, []);
    assert.match(w.warnings.join(), /secretproviderclass\.reloader\.stakater\.com\/auto="yes" is not a boolean/);
  });

  it('the reload list takes names (mounted or not) and whole-name Go regexes; bad entries warn', () => {
    const w = watchedClasses(classWorkload({ [SPC_RELOAD]: 'shared, vault-.*, (?=a), kv' }), {
      classNames: () => ['vault-cache', 'kv-app', 'unrelated'],
    });
    assert.deepEqual(w.keys, [
      'secretproviderclass/prod/kv',
      'secretproviderclass/prod/shared',
      'secretproviderclass/prod/vault-cache',
      'secretproviderclass/prod/vault-db',
    ]);
    assert.equal(w.classes.find((c) => c.name === 'shared')?.reference, undefined);
    assert.match(w.warnings.join(), /entry "\(\?=a\)" is not a valid Go regular expression/);
    assert.ok(classPatternMatches(w, NS, 'vault-new'));
    assert.ok(!classPatternMatches(w, NS, 'xvault-new'));
    assert.ok(!classPatternMatches(w, 'other', 'vault-new'));
  });

  it('reads the template’s annotations only when none of the keys is on the metadata', () => {
    assert.deepEqual(watchedClasses(classWorkload({}, { [SPC_AUTO]: 'true' })).keys.length, 2);
    // An empty reload list on the metadata still stops the fallback.
    assert.deepEqual(watchedClasses(classWorkload({ [SPC_RELOAD]: '' }, { [SPC_AUTO]: 'true' })).keys, []);
  });

  it('search watches mounted classes that carry match; ignore and the exclude list win over every opt-in', () => {
    const meta = (_ns: string, name: string): { annotations: Record<string, string> } =>
      name === 'kv-app' ? { annotations: { [MATCH]: 'true' } } : { annotations: { [IGNORE]: 'true' } };
    assert.deepEqual(watchedClasses(classWorkload({ [SEARCH]: 'true' }), { classMeta: meta }).keys, [
      'secretproviderclass/prod/kv-app',
    ]);
    const w = watchedClasses(classWorkload({ [AUTO]: 'true', [SPC_EXCLUDE]: 'kv-app' }), { classMeta: meta });
    assert.deepEqual(w.keys, []);
    assert.deepEqual(w.excluded, [
      { key: 'secretproviderclass/prod/kv-app', reason: 'exclude-list' },
      { key: 'secretproviderclass/prod/vault-db', reason: 'ignore-annotation' },
    ]);
  });

  it('Reloader’s renamed auto, search, match and ignore keys apply to classes too', () => {
    const keys = {
      auto: 'example.com/auto',
      search: 'example.com/search',
      match: 'example.com/match',
      ignore: 'example.com/ignore',
    };
    assert.equal(watchedClasses(classWorkload({ 'example.com/auto': 'true' }), { keys }).keys.length, 2);
    assert.deepEqual(watchedClasses(classWorkload({ [AUTO]: 'true' }), { keys }).keys, []);
    const meta = (_ns: string, name: string): { annotations: Record<string, string> } =>
      name === 'kv-app'
        ? { annotations: { 'example.com/match': 'true' } }
        : { annotations: { 'example.com/ignore': 'true' } };
    assert.deepEqual(watchedClasses(classWorkload({ 'example.com/search': 'true' }), { keys, classMeta: meta }).keys, [
      'secretproviderclass/prod/kv-app',
    ]);
    assert.deepEqual(
      watchedClasses(classWorkload({ 'example.com/auto': 'true' }), { keys, classMeta: meta }).excluded,
      [{ key: 'secretproviderclass/prod/vault-db', reason: 'ignore-annotation' }],
    );
  });

  it('withClasses: one selection for the decision, keys sorted, opt-ins and exclusions of both kinds', () => {
    const w = classWorkload({
      [AUTO]: 'true',
      [SPC_EXCLUDE]: 'kv-app',
      'configmaps.exclude.reloader.stakater.com/reload': 'vault-db',
    });
    const both = withClasses(watchedConfigs(w), watchedClasses(w));
    assert.deepEqual(both.keys, ['secretproviderclass/prod/vault-db']);
    assert.deepEqual(
      both.excluded.map((e) => e.key),
      ['configmap/prod/vault-db', 'secretproviderclass/prod/kv-app'],
    );
    assert.deepEqual(both.optIns, ['reloader-auto']);
    assert.equal(both.classes.keys.length, 1);
    // Opted in to classes only: still opted in.
    const onlyClasses = classWorkload({ [SPC_AUTO]: 'true' });
    assert.deepEqual(withClasses(watchedConfigs(onlyClasses), watchedClasses(onlyClasses)).optIns, [
      'reloader-typed-auto',
    ]);
    assert.deepEqual(watchedConfigs(onlyClasses).keys, []);
  });

  it('never throws, whatever the workload and callbacks', () => {
    fc.assert(
      fc.property(fc.anything(), fc.dictionary(fc.string(), fc.string()), (spec, annotations) => {
        const w = { metadata: { name: 'x', namespace: NS, annotations }, spec } as WorkloadLike;
        const r = watchedClasses(w, {
          classMeta: () => {
            throw new Error('boom');
          },
          classNames: () => {
            throw new Error('boom');
          },
        });
        assert.deepEqual(r.keys, [...r.keys].sort());
      }),
    );
  });
});

describe('versionsChecksum and the cached digest', () => {
  it('is a v1 HMAC that depends on the version set only, not on its order', () => {
    const a = versionsChecksum(KEY, [
      { id: 'secret/db', version: '3' },
      { id: 'secret/api', version: '7' },
    ]);
    const b = versionsChecksum(KEY, [
      { id: 'secret/api', version: '7' },
      { id: 'secret/db', version: '3' },
    ]);
    assert.equal(a, b);
    assert.equal(checksumScheme(a), 'v1');
    assert.notEqual(
      a,
      versionsChecksum(KEY, [
        { id: 'secret/db', version: '4' },
        { id: 'secret/api', version: '7' },
      ]),
    );
    assert.notEqual(a, versionsChecksum(Buffer.from('another key'), [{ id: 'secret/db', version: '3' }]));
    assert.equal(versionsChecksum(KEY, undefined), versionsChecksum(KEY, []));
  });

  it('the transform keeps the pod, the class and the checksum, nothing else', () => {
    const digest = classPodStatusDigester(KEY)({
      apiVersion: 'secrets-store.csi.x-k8s.io/v1',
      kind: 'SecretProviderClassPodStatus',
      metadata: {
        name: 'web-1-prod-vault-db',
        namespace: NS,
        resourceVersion: '42',
        labels: { 'internal.secrets-store.csi.k8s.io/node-name': 'n1' },
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'web-1', uid: 'u1' }],
        managedFields: [{ manager: 'secrets-store' }],
      },
      status: {
        podName: 'web-1',
        secretProviderClassName: 'vault-db',
        mounted: true,
        targetPath: '/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/vault/mount',
        objects: [{ id: 'db', version: '1' }],
      },
    } as never);
    assert.deepEqual(digest.metadata, { name: 'web-1-prod-vault-db', namespace: NS, resourceVersion: '42' });
    assert.deepEqual(digest.mount, {
      podName: 'web-1',
      podUid: 'u1',
      className: 'vault-db',
      checksum: versionsChecksum(KEY, [{ id: 'db', version: '1' }]),
    });
    assert.deepEqual(indexByClass(digest), ['prod/vault-db']);
    assert.ok(!JSON.stringify(digest).includes('kubelet'));
  });
});

describe('classChecksum: the decision table', () => {
  const m = (checksum: string, rv: string, current = true, terminating = false): ClassMount => ({
    checksum,
    resourceVersion: rv,
    current,
    terminating,
  });

  it('no current, live mount: the applied checksum when there is one, else missing', () => {
    assert.equal(classChecksum([], 'v1:a'), 'v1:a');
    assert.equal(classChecksum([], undefined), MISSING);
    assert.equal(classChecksum([m('x', '9', false), m('y', '10', true, true)], 'v1:a'), 'v1:a');
  });

  it('else the newest write among the current, live mounts, whatever the record', () => {
    assert.equal(classChecksum([m('old', '9'), m('new', '10'), m('stale-gen', '11', false)], 'old'), 'new');
    assert.equal(classChecksum([m('new', '10'), m('old', '9')], undefined), 'new');
    // Integers by value, not as text.
    assert.equal(classChecksum([m('a', '99'), m('b', '100')], undefined), 'b');
  });

  it('resourceVersions: integers by value, then anything else as text; a total order', () => {
    assert.ok(compareResourceVersions('100', '99') > 0);
    assert.equal(compareResourceVersions('007', '7'), 0);
    assert.ok(compareResourceVersions('x', '5') > 0);
    const rv = fc.oneof(fc.nat().map(String), fc.string({ maxLength: 3 }));
    fc.assert(
      fc.property(rv, rv, rv, (a, b, c) => {
        assert.equal(Math.sign(compareResourceVersions(a, b)), -Math.sign(compareResourceVersions(b, a)) || 0);
        if (compareResourceVersions(a, b) <= 0 && compareResourceVersions(b, c) <= 0)
          assert.ok(compareResourceVersions(a, c) <= 0);
      }),
    );
  });

  it('does not depend on the order of the mounts', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            checksum: fc.constantFrom('a', 'b', 'c'),
            resourceVersion: fc.nat(20).map(String),
            current: fc.boolean(),
            terminating: fc.boolean(),
          }),
        ),
        fc.option(fc.constantFrom('a', 'b'), { nil: undefined }),
        (mounts, applied) => {
          assert.equal(classChecksum(mounts, applied), classChecksum([...mounts].reverse(), applied));
        },
      ),
    );
  });
});

describe('pods and their workloads', () => {
  it('the generation is the restart trigger the pod was created with, and for restartAt its creation time', () => {
    assert.ok(isCurrentGeneration({}, {}));
    assert.ok(isCurrentGeneration(undefined, undefined));
    assert.ok(isCurrentGeneration({ annotations: { [TRIGGER]: 't1' } }, { [TRIGGER]: 't1' }));
    assert.ok(!isCurrentGeneration({ annotations: { [TRIGGER]: 't1' } }, { [TRIGGER]: 't2' }));
    assert.ok(!isCurrentGeneration({ annotations: {} }, { [TRIGGER]: 't1' }));
    const at = '2026-11-29T10:00:00Z';
    assert.ok(!isCurrentGeneration({ creationTimestamp: '2026-11-29T09:59:59Z' }, {}, at));
    assert.ok(isCurrentGeneration({ creationTimestamp: '2026-11-29T10:00:00Z' }, {}, at));
    assert.ok(isCurrentGeneration({ creationTimestamp: new Date('2026-11-29T10:00:01Z') }, {}, at));
    assert.ok(isCurrentGeneration({ creationTimestamp: 'garbage' }, {}, at));
    assert.ok(isCurrentGeneration({}, {}, at));
  });

  it('a pod’s workload from its controller reference and template-hash label', () => {
    const pod = (kind: string, name: string, labels: Record<string, string> = {}) => ({
      metadata: { labels, ownerReferences: [{ kind, name, controller: true }] },
    });
    assert.deepEqual(podWorkload(pod('ReplicaSet', 'web-7d9f', { 'pod-template-hash': '7d9f' })), {
      kind: 'Deployment',
      name: 'web',
    });
    assert.deepEqual(podWorkload(pod('ReplicaSet', 'canary-5c6', { 'rollouts-pod-template-hash': '5c6' })), {
      kind: 'Rollout',
      name: 'canary',
    });
    assert.deepEqual(podWorkload(pod('StatefulSet', 'db')), { kind: 'StatefulSet', name: 'db' });
    assert.deepEqual(podWorkload(pod('DaemonSet', 'agent')), { kind: 'DaemonSet', name: 'agent' });
    assert.equal(podWorkload(pod('ReplicaSet', 'bare-rs')), undefined);
    assert.equal(podWorkload(pod('ReplicaSet', '7d9f', { 'pod-template-hash': '7d9f' })), undefined);
    assert.equal(podWorkload({ metadata: { ownerReferences: [{ kind: 'StatefulSet', name: 'db' }] } }), undefined);
    assert.equal(podWorkload({}), undefined);
  });
});
