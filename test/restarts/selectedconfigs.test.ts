// Configs selected by label (selectedconfigs.ts, optins.ts): watched like
// referenced ones, and their coming and going is a change.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { mayOptIn, watchedConfigs, type WatchOptions, type WorkloadLike } from '../../src/restarts/optins.ts';
import { decideRestart } from '../../src/restarts/restartplan.ts';
import {
  configSelectors,
  isSelectorKey,
  membershipChecksum,
  restartCauses,
  selectorKey,
} from '../../src/restarts/selectedconfigs.ts';
import type { ConfigKind } from '../../src/restarts/references.ts';
import {
  CONFIG_RESTART_CONFIGMAP_SELECTOR_ANNOTATION as CM_SELECTOR,
  CONFIG_RESTART_SECRET_SELECTOR_ANNOTATION as SECRET_SELECTOR,
  RELOADER_IGNORE_ANNOTATION,
} from '../../src/vocabulary/keys.ts';

const NS = 'prod';

interface Config {
  kind: ConfigKind;
  namespace: string;
  name: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

function options(configs: Config[]): WatchOptions {
  return {
    configsOf: (kind, namespace) =>
      configs
        .filter((c) => c.kind === kind && c.namespace === namespace)
        .map((c) => ({ name: c.name, labels: c.labels })),
    configMeta: (kind, namespace, name) =>
      configs.find((c) => c.kind === kind && c.namespace === namespace && c.name === name),
  };
}

function workload(annotations: Record<string, string>, templateConfig?: string): WorkloadLike {
  return {
    metadata: { name: 'app', namespace: NS, annotations },
    spec: {
      template: {
        metadata: {},
        spec: {
          containers: [
            { name: 'c', ...(templateConfig ? { envFrom: [{ configMapRef: { name: templateConfig } }] } : {}) },
          ],
        },
      },
    },
  };
}

const CONFIGS: Config[] = [
  { kind: 'configmap', namespace: NS, name: 'dash-a', labels: { dashboards: 'true' } },
  { kind: 'configmap', namespace: NS, name: 'dash-b', labels: { dashboards: 'true', team: 'x' } },
  { kind: 'configmap', namespace: NS, name: 'other', labels: { dashboards: 'false' } },
  { kind: 'configmap', namespace: 'elsewhere', name: 'dash-c', labels: { dashboards: 'true' } },
  { kind: 'secret', namespace: NS, name: 'creds', labels: { dashboards: 'true' } },
];

describe('configSelectors', () => {
  it('reads both annotations; an empty, unparsable or overlong value warns and selects nothing', () => {
    const ok = configSelectors({ [CM_SELECTOR]: ' app in (a, b),!legacy ', [SECRET_SELECTOR]: 'tier=db' }, NS);
    assert.deepEqual(
      ok.selectors.map((s) => [s.kind, s.text]),
      [
        ['configmap', 'app in (a, b),!legacy'],
        ['secret', 'tier=db'],
      ],
    );
    assert.deepEqual(ok.warnings, []);
    const bad = configSelectors({ [CM_SELECTOR]: '', [SECRET_SELECTOR]: 'a=(' }, NS);
    assert.deepEqual(bad.selectors, []);
    assert.equal(bad.warnings.length, 2);
    assert.match(bad.warnings[0]!, /is empty; ignored/);
    assert.match(bad.warnings[1]!, /is not a valid label selector .*no Secret is selected by it/);
    assert.match(configSelectors({ [CM_SELECTOR]: `a in (${'x,'.repeat(3000)}x)` }, NS).warnings[0]!, /longer than/);
  });

  it('never throws, whatever the value', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (text) => {
        const r = configSelectors({ [CM_SELECTOR]: text }, NS);
        assert.equal(r.selectors.length + r.warnings.length, 1);
      }),
    );
  });
});

describe('watchedConfigs with a selector', () => {
  it('watches the matching configs of its namespace, referenced or not, and opts in', () => {
    const w = watchedConfigs(workload({ [CM_SELECTOR]: 'dashboards=true' }), options(CONFIGS));
    assert.deepEqual(w.keys, ['configmap/prod/dash-a', 'configmap/prod/dash-b']);
    assert.deepEqual(w.optIns, ['stateward-selector']);
    assert.deepEqual(w.configs[0]!.reasons, ['stateward-selector']);
    assert.equal(w.configs[0]!.reference, undefined, 'not referenced by the template');
    assert.deepEqual(w.selected, [
      {
        key: 'configmap-selector/prod/dashboards=true',
        kind: 'configmap',
        text: 'dashboards=true',
        names: ['dash-a', 'dash-b'],
        checksum: membershipChecksum(['dash-a', 'dash-b']),
        configKeys: ['configmap/prod/dash-a', 'configmap/prod/dash-b'],
      },
    ]);
  });

  it('adds to the other opt-ins; Secrets by their own annotation', () => {
    const w = watchedConfigs(
      workload({ 'com.xing.deployment-restart': 'enabled', [SECRET_SELECTOR]: 'dashboards' }, 'app-config'),
      options(CONFIGS),
    );
    assert.deepEqual(w.keys, ['configmap/prod/app-config', 'secret/prod/creds']);
    assert.deepEqual(w.optIns, ['stateward-selector', 'xing']);
  });

  it('a valid selector matching nothing still opts in, with the empty set recorded', () => {
    const w = watchedConfigs(workload({ [CM_SELECTOR]: 'nothing=here' }), options(CONFIGS));
    assert.deepEqual(w.keys, []);
    assert.deepEqual(w.optIns, ['stateward-selector']);
    assert.equal(w.selected[0]!.checksum, membershipChecksum([]));
  });

  it('exclusions win: an ignored or excluded config is neither watched nor a member', () => {
    const configs = CONFIGS.map((c) =>
      c.name === 'dash-a' ? { ...c, annotations: { [RELOADER_IGNORE_ANNOTATION]: 'true' } } : c,
    );
    const w = watchedConfigs(
      workload({ [CM_SELECTOR]: 'dashboards=true', 'configmaps.exclude.reloader.stakater.com/reload': 'dash-b' }),
      options(configs),
    );
    assert.deepEqual(w.keys, []);
    assert.deepEqual(w.selected[0]!.names, []);
    assert.deepEqual(
      w.excluded.map((e) => e.reason),
      ['ignore-annotation', 'exclude-list'],
    );
  });

  it('a bad selector is a warning, and alone does not opt in', () => {
    const w = watchedConfigs(workload({ [CM_SELECTOR]: 'a b' }), options(CONFIGS));
    assert.deepEqual(w.optIns, []);
    assert.equal(w.warnings.length, 1);
    assert.match(
      w.warnings[0]!,
      /^app: stateward\.dev\/config-restart-configmap-selector is not a valid label selector/,
    );
  });

  it('mayOptIn sees the selector annotations', () => {
    assert.equal(mayOptIn(workload({ [CM_SELECTOR]: 'a' })), true);
    assert.equal(mayOptIn(workload({ [SECRET_SELECTOR]: 'a' })), true);
    assert.equal(mayOptIn(workload({ other: 'a' })), false);
  });
});

describe('membership in the applied record', () => {
  it('the checksum depends on the set of names only', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string(), { maxLength: 8 }), fc.string(), (names, extra) => {
        const shuffled = [...names].reverse();
        assert.equal(membershipChecksum(names), membershipChecksum(shuffled));
        assert.equal(membershipChecksum(names), membershipChecksum([...names, ...names]));
        if (!names.includes(extra)) assert.notEqual(membershipChecksum(names), membershipChecksum([...names, extra]));
      }),
    );
  });

  it('keys: recognisable, never a config key', () => {
    const key = selectorKey({ kind: 'secret', namespace: NS, text: 'app.kubernetes.io/name=x' });
    assert.equal(key, 'secret-selector/prod/app.kubernetes.io/name=x');
    assert.equal(isSelectorKey(key), true);
    assert.equal(isSelectorKey('secret/prod/x'), false);
  });

  /** What the controller feeds decideRestart: each watched config's checksum and the membership entries. */
  function current(configs: Config[], content: Record<string, string>) {
    const w = watchedConfigs(workload({ [CM_SELECTOR]: 'dashboards=true' }), options(configs));
    const out = new Map(w.keys.map((k) => [k, content[k] ?? 'c0']));
    for (const set of w.selected) out.set(set.key, set.checksum);
    return out;
  }

  it('recorded without a restart; then a change, a new match and a deletion each restart once', () => {
    const base = current(CONFIGS, {});
    const first = decideRestart({ workload: W, optedIn: true, applied: {}, current: base, now: 0, settings: NO_GRACE });
    assert.equal(first.action, 'update-annotation-only', 'opting in restarts nothing');
    const applied = base;

    const changed = current(CONFIGS, { 'configmap/prod/dash-a': 'c1' });
    const onChange = decideRestart({
      workload: W,
      optedIn: true,
      applied,
      current: changed,
      now: 0,
      settings: NO_GRACE,
    });
    assert.ok(onChange.action === 'restart');
    assert.deepEqual(onChange.restartedBy, ['configmap/prod/dash-a']);

    const created = [
      ...CONFIGS,
      { kind: 'configmap' as const, namespace: NS, name: 'dash-new', labels: { dashboards: 'true' } },
    ];
    const onCreate = decideRestart({
      workload: W,
      optedIn: true,
      applied,
      current: current(created, {}),
      now: 0,
      settings: NO_GRACE,
    });
    assert.ok(onCreate.action === 'restart');
    assert.deepEqual(restartCauses(onCreate.restartedBy, onCreate.changes), ['configmap/prod/dash-new']);

    const deleted = CONFIGS.filter((c) => c.name !== 'dash-b');
    const onDelete = decideRestart({
      workload: W,
      optedIn: true,
      applied,
      current: current(deleted, {}),
      now: 0,
      settings: NO_GRACE,
    });
    assert.ok(onDelete.action === 'restart');
    assert.deepEqual(restartCauses(onDelete.restartedBy, onDelete.changes), ['configmap/prod/dash-b']);

    const relabelled = CONFIGS.map((c) => (c.name === 'other' ? { ...c, labels: { dashboards: 'true' } } : c));
    const onRelabel = decideRestart({
      workload: W,
      optedIn: true,
      applied,
      current: current(relabelled, {}),
      now: 0,
      settings: NO_GRACE,
    });
    assert.equal(onRelabel.action, 'restart');

    const unrelated = [...CONFIGS, { kind: 'configmap' as const, namespace: NS, name: 'x', labels: {} }];
    assert.equal(
      decideRestart({
        workload: W,
        optedIn: true,
        applied,
        current: current(unrelated, {}),
        now: 0,
        settings: NO_GRACE,
      }).action,
      'nothing',
    );
  });

  it('restartCauses names configs, and a membership entry by what came or went', () => {
    assert.deepEqual(
      restartCauses(
        ['configmap-selector/prod/a=b', 'secret/prod/s'],
        [
          { key: 'configmap/prod/new', change: 'added' },
          { key: 'secret/prod/other', change: 'added' },
        ],
      ),
      ['configmap/prod/new', 'secret/prod/s'],
    );
    assert.deepEqual(restartCauses(['secret-selector/prod/a=b'], []), ['secret-selector/prod/a=b']);
  });
});

const W = { kind: 'Deployment' as const, namespace: NS, name: 'app' };
const NO_GRACE = { gracePeriodMs: 0, maxWaitMs: 0 };
