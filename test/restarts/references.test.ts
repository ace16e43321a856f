import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  configKey,
  configReferences,
  describeUse,
  parseConfigKey,
  type ConfigKind,
  type PodTemplateSpec,
} from '../../src/restarts/references.ts';
import {
  isIgnoredConfig,
  mayOptIn,
  patternMatches,
  watchedConfigs,
  type WatchOptions,
  type WorkloadLike,
} from '../../src/restarts/optins.ts';
import {
  RELOADER_AUTO_ANNOTATION as AUTO,
  RELOADER_CONFIGMAP_AUTO_ANNOTATION as CM_AUTO,
  RELOADER_CONFIGMAP_EXCLUDE_ANNOTATION as CM_EXCLUDE,
  RELOADER_CONFIGMAP_RELOAD_ANNOTATION as CM_RELOAD,
  RELOADER_IGNORE_ANNOTATION as IGNORE,
  RELOADER_MATCH_ANNOTATION as MATCH,
  RELOADER_SEARCH_ANNOTATION as SEARCH,
  RELOADER_SECRET_EXCLUDE_ANNOTATION as SECRET_EXCLUDE,
  RELOADER_SECRET_RELOAD_ANNOTATION as SECRET_RELOAD,
  XING_ENABLED_ANNOTATION as XING,
} from '../../src/vocabulary/keys.ts';

const NS = 'prod';

/** One use of every kind the API allows, split over containers, init and ephemeral containers. */
function fullTemplate(): PodTemplateSpec {
  return {
    metadata: {},
    spec: {
      containers: [
        {
          name: 'app',
          env: [
            { name: 'PLAIN', value: 'x' },
            { name: 'CM_KEY', valueFrom: { configMapKeyRef: { name: 'env-cm', key: 'k1' } } },
            { name: 'SECRET_KEY', valueFrom: { secretKeyRef: { name: 'env-secret', key: 'password' } } },
            { name: 'FIELD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
          envFrom: [{ configMapRef: { name: 'envfrom-cm' } }, { secretRef: { name: 'envfrom-secret' }, prefix: 'S_' }],
          volumeMounts: [
            { name: 'cm-vol', mountPath: '/cm' },
            { name: 'proj', mountPath: '/proj' },
          ],
        },
      ],
      initContainers: [
        {
          name: 'init',
          env: [{ name: 'INIT', valueFrom: { configMapKeyRef: { name: 'init-cm', key: 'i' } } }],
          envFrom: [{ secretRef: { name: 'init-secret' } }],
          volumeMounts: [{ name: 'secret-vol', mountPath: '/s' }],
        },
      ],
      ephemeralContainers: [{ name: 'debug', envFrom: [{ configMapRef: { name: 'debug-cm' } }] }],
      volumes: [
        { name: 'cm-vol', configMap: { name: 'vol-cm' } },
        { name: 'secret-vol', secret: { secretName: 'vol-secret', items: [{ key: 'tls.crt', path: 'crt' }] } },
        { name: 'empty', emptyDir: {} },
        {
          name: 'proj',
          projected: {
            sources: [
              {
                configMap: {
                  name: 'proj-cm',
                  items: [
                    { key: 'b', path: 'b' },
                    { key: 'a', path: 'a' },
                  ],
                },
              },
              { secret: { name: 'proj-secret' } },
              { serviceAccountToken: { path: 'token' } },
            ],
          },
        },
      ],
    },
  };
}

const ALL_KEYS = [
  'configmap/prod/debug-cm',
  'configmap/prod/env-cm',
  'configmap/prod/envfrom-cm',
  'configmap/prod/init-cm',
  'configmap/prod/proj-cm',
  'configmap/prod/vol-cm',
  'secret/prod/env-secret',
  'secret/prod/envfrom-secret',
  'secret/prod/init-secret',
  'secret/prod/proj-secret',
  'secret/prod/vol-secret',
];

function workload(
  annotations: Record<string, string>,
  template: PodTemplateSpec = fullTemplate(),
  name = 'web',
): WorkloadLike {
  return { metadata: { name, namespace: NS, annotations }, spec: { template } };
}

describe('configKey / parseConfigKey', { timeout: 10000 }, () => {
  it("uses xing's checksum key format and round-trips", () => {
    assert.equal(configKey('configmap', 'ns', 'a.b'), 'configmap/ns/a.b');
    assert.equal(configKey('secret', 'ns', 'x'), 'secret/ns/x');
    assert.deepEqual(parseConfigKey('secret/ns/x'), { kind: 'secret', namespace: 'ns', name: 'x' });
    for (const bad of ['', 'pod/ns/x', 'secret/ns', 'secret/ns/x/y', 'secret//x'])
      assert.equal(parseConfigKey(bad), undefined, bad);
  });
});

describe('configReferences', { timeout: 10000 }, () => {
  it('finds every reference path, across containers, initContainers and ephemeralContainers', () => {
    const refs = configReferences(fullTemplate(), NS);
    assert.deepEqual(
      refs.map((r) => r.key),
      ALL_KEYS,
    );
    const by = new Map(refs.map((r) => [r.name, r]));
    assert.deepEqual(by.get('env-cm')?.uses, [
      { via: 'env', container: { type: 'container', name: 'app' }, env: 'CM_KEY', key: 'k1', optional: false },
    ]);
    assert.deepEqual(by.get('init-secret')?.uses, [
      { via: 'envFrom', container: { type: 'initContainer', name: 'init' }, optional: false },
    ]);
    assert.deepEqual(by.get('debug-cm')?.uses, [
      { via: 'envFrom', container: { type: 'ephemeralContainer', name: 'debug' }, optional: false },
    ]);
    assert.deepEqual(by.get('vol-secret')?.uses, [
      {
        via: 'volume',
        volume: 'secret-vol',
        items: ['tls.crt'],
        mountedBy: [{ type: 'initContainer', name: 'init' }],
        optional: false,
      },
    ]);
    assert.deepEqual(by.get('proj-secret')?.uses, [
      {
        via: 'projected',
        volume: 'proj',
        source: 1,
        items: undefined,
        mountedBy: [{ type: 'container', name: 'app' }],
        optional: false,
      },
    ]);
    for (const r of refs) {
      assert.equal(r.namespace, NS);
      assert.equal(r.kind, r.key.startsWith('secret/') ? 'secret' : 'configmap');
    }
  });

  it('dataKeys: the keys read, or "all" when a use takes the whole object', () => {
    const by = new Map(configReferences(fullTemplate(), NS).map((r) => [r.name, r.dataKeys]));
    assert.deepEqual(by.get('env-cm'), ['k1']);
    assert.deepEqual(by.get('proj-cm'), ['a', 'b']);
    assert.deepEqual(by.get('vol-secret'), ['tls.crt']);
    assert.equal(by.get('envfrom-cm'), 'all');
    assert.equal(by.get('vol-cm'), 'all');
  });

  it('deduplicates: one reference per config, identical uses once', () => {
    const t: PodTemplateSpec = {
      spec: {
        containers: [
          {
            name: 'a',
            envFrom: [{ configMapRef: { name: 'shared' } }, { configMapRef: { name: 'shared' } }],
            env: [{ name: 'X', valueFrom: { configMapKeyRef: { name: 'shared', key: 'x' } } }],
          },
          { name: 'b', envFrom: [{ configMapRef: { name: 'shared' } }] },
        ],
        volumes: [{ name: 'v', configMap: { name: 'shared' } }],
      },
    };
    const refs = configReferences(t, NS);
    assert.equal(refs.length, 1);
    assert.equal(refs[0]?.uses.length, 4);
    assert.equal(refs[0]?.dataKeys, 'all');
  });

  it('a ConfigMap and a Secret with the same name are different references', () => {
    const t: PodTemplateSpec = {
      spec: {
        containers: [{ name: 'a', envFrom: [{ configMapRef: { name: 'same' } }, { secretRef: { name: 'same' } }] }],
      },
    };
    assert.deepEqual(
      configReferences(t, NS).map((r) => r.key),
      ['configmap/prod/same', 'secret/prod/same'],
    );
  });

  it('optional only when every use is optional', () => {
    const t = (secondOptional: boolean | undefined): PodTemplateSpec => ({
      spec: {
        containers: [{ name: 'a', envFrom: [{ secretRef: { name: 's', optional: true } }] }],
        volumes: [
          {
            name: 'v',
            secret: { secretName: 's', ...(secondOptional === undefined ? {} : { optional: secondOptional }) },
          },
        ],
      },
    });
    assert.equal(configReferences(t(true), NS)[0]?.optional, true);
    assert.equal(configReferences(t(false), NS)[0]?.optional, false);
    assert.equal(configReferences(t(undefined), NS)[0]?.optional, false);
    const projected: PodTemplateSpec = {
      spec: {
        containers: [],
        volumes: [{ name: 'p', projected: { sources: [{ configMap: { name: 'c', optional: true } }] } }],
      },
    };
    assert.equal(configReferences(projected, NS)[0]?.optional, true);
  });

  it('counts unmounted volumes, and says so', () => {
    const t: PodTemplateSpec = {
      spec: { containers: [{ name: 'a' }], volumes: [{ name: 'unused', configMap: { name: 'c' } }] },
    };
    const [ref] = configReferences(t, NS);
    assert.equal(ref?.key, 'configmap/prod/c');
    assert.ok(ref && ref.uses[0] && describeUse(ref.uses[0]).includes('not mounted'));
  });

  it('skips nameless references and never throws on odd shapes', () => {
    const t = {
      spec: {
        containers: [{ name: 'a', envFrom: [{ configMapRef: {} }, { secretRef: { name: '' } }] }],
        volumes: [{ name: 'v', secret: {} }],
      },
    } as PodTemplateSpec;
    assert.deepEqual(configReferences(t, NS), []);
    assert.deepEqual(configReferences(undefined, NS), []);
    fc.assert(
      fc.property(fc.anything(), (junk) => {
        configReferences(junk as PodTemplateSpec, NS);
        configReferences({ spec: junk } as PodTemplateSpec, NS);
        configReferences(
          { spec: { containers: [junk], volumes: [junk], initContainers: junk } } as PodTemplateSpec,
          NS,
        );
      }),
    );
  });

  it('describeUse names the container or volume', () => {
    const descriptions = configReferences(fullTemplate(), NS).flatMap((r) => r.uses.map(describeUse));
    assert.ok(descriptions.includes('env CM_KEY (key k1) of container app'));
    assert.ok(descriptions.includes('envFrom of initContainer init'));
    assert.ok(descriptions.includes('projected volume proj (source 0), mounted by container app'));
  });

  // --- properties over generated templates ---

  interface Planned {
    kind: ConfigKind;
    name: string;
    optional: boolean;
    path: 'env' | 'envFrom' | 'volume' | 'projected';
    container: 'containers' | 'initContainers';
  }
  const plannedArb: fc.Arbitrary<Planned> = fc.record({
    kind: fc.constantFrom<ConfigKind>('configmap', 'secret'),
    name: fc.constantFrom('a', 'b', 'c', 'd', 'e.f'),
    optional: fc.boolean(),
    path: fc.constantFrom('env', 'envFrom', 'volume', 'projected'),
    container: fc.constantFrom('containers', 'initContainers'),
  });

  function build(plan: Planned[]): PodTemplateSpec {
    const containers = [{ name: 'main', env: [] as object[], envFrom: [] as object[] }];
    const initContainers = [{ name: 'init', env: [] as object[], envFrom: [] as object[] }];
    const volumes: object[] = [];
    plan.forEach((p, i) => {
      const c = p.container === 'containers' ? containers[0] : initContainers[0];
      const sel = { name: p.name, optional: p.optional };
      if (p.path === 'env')
        c?.env.push({
          name: `E${i}`,
          valueFrom: { [p.kind === 'configmap' ? 'configMapKeyRef' : 'secretKeyRef']: { ...sel, key: 'k' } },
        });
      if (p.path === 'envFrom') c?.envFrom.push({ [p.kind === 'configmap' ? 'configMapRef' : 'secretRef']: sel });
      if (p.path === 'volume')
        volumes.push({
          name: `v${i}`,
          ...(p.kind === 'configmap' ? { configMap: sel } : { secret: { secretName: p.name, optional: p.optional } }),
        });
      if (p.path === 'projected')
        volumes.push({
          name: `v${i}`,
          projected: { sources: [{ [p.kind === 'configmap' ? 'configMap' : 'secret']: sel }] },
        });
    });
    return { spec: { containers, initContainers, volumes } } as PodTemplateSpec;
  }

  it('property: every planted reference is found, deduplicated, with optional = all uses optional', () => {
    fc.assert(
      fc.property(fc.array(plannedArb, { maxLength: 20 }), (plan) => {
        const refs = configReferences(build(plan), NS);
        const expected = new Map<string, boolean>();
        for (const p of plan) {
          const key = configKey(p.kind, NS, p.name);
          expected.set(key, (expected.get(key) ?? true) && p.optional);
        }
        assert.deepEqual(
          refs.map((r) => r.key),
          [...expected.keys()].sort(),
        );
        for (const r of refs) assert.equal(r.optional, expected.get(r.key), r.key);
        // Identical envFrom entries are one use; env vars and volumes are distinct by name.
        const distinct = new Set(
          plan.map((p, i) =>
            p.path === 'envFrom' ? JSON.stringify([p.container, p.kind, p.name, p.optional]) : String(i),
          ),
        );
        assert.equal(
          refs.reduce((n, r) => n + r.uses.length, 0),
          distinct.size,
        );
      }),
    );
  });

  it('property: the output does not depend on the order of containers, env, envFrom, volumes or sources', () => {
    const shuffle = <T>(xs: T[] | undefined, seed: number): T[] | undefined => {
      if (!xs) return xs;
      const out = [...xs];
      for (let i = out.length - 1; i > 0; i--) {
        const j = (seed * (i + 7)) % (i + 1);
        [out[i], out[j]] = [out[j] as T, out[i] as T];
      }
      return out;
    };
    fc.assert(
      fc.property(fc.array(plannedArb, { maxLength: 20 }), fc.nat(1000), (plan, seed) => {
        const t = build(plan);
        const spec = t.spec;
        assert.ok(spec);
        const shuffled: PodTemplateSpec = {
          spec: {
            ...spec,
            containers:
              shuffle(
                spec.containers?.map((c) => ({
                  ...c,
                  env: shuffle(c.env, seed),
                  envFrom: shuffle(c.envFrom, seed + 1),
                })),
                seed,
              ) ?? [],
            volumes: shuffle(spec.volumes, seed + 2),
          },
        };
        assert.deepEqual(configReferences(shuffled, NS), configReferences(t, NS));
        assert.deepEqual(configReferences(t, NS), configReferences(t, NS));
      }),
    );
  });
});

describe('watchedConfigs: xing', { timeout: 10000 }, () => {
  it('com.xing.deployment-restart: enabled watches every reference', () => {
    const w = watchedConfigs(workload({ [XING]: 'enabled' }));
    assert.deepEqual(w.keys, ALL_KEYS);
    assert.deepEqual(w.optIns, ['xing']);
    assert.deepEqual(w.warnings, []);
    assert.ok(w.configs.every((c) => c.reference !== undefined && c.reasons.join() === 'xing'));
  });

  it('only the exact value counts; odd values warn, "disabled" and absence are silent', () => {
    for (const v of ['Enabled', 'true', '', 'yes']) {
      const w = watchedConfigs(workload({ [XING]: v }));
      assert.deepEqual(w.keys, [], v);
      assert.equal(w.warnings.length, 1, v);
    }
    for (const a of [{ [XING]: 'disabled' }, {}] as Record<string, string>[]) {
      const w = watchedConfigs(workload(a));
      assert.deepEqual([w.keys, w.optIns, w.warnings], [[], [], []]);
    }
  });

  it('is read from the workload metadata only, not the pod template', () => {
    const t = fullTemplate();
    t.metadata = { annotations: { [XING]: 'enabled' } };
    assert.deepEqual(watchedConfigs(workload({}, t)).keys, []);
  });
});

describe('watchedConfigs: Reloader', { timeout: 10000 }, () => {
  it('auto watches every reference; ParseBool spellings; invalid values warn', () => {
    for (const v of ['true', 'True', 'TRUE', 't', '1'])
      assert.deepEqual(watchedConfigs(workload({ [AUTO]: v })).keys, ALL_KEYS, v);
    for (const v of ['false', '0', 'F'])
      assert.deepEqual(
        watchedConfigs(workload({ [AUTO]: v })),
        { keys: [], configs: [], excluded: [], patterns: [], optIns: [], warnings: [] },
        v,
      );
    const bad = watchedConfigs(workload({ [AUTO]: 'yes' }));
    assert.deepEqual(bad.keys, []);
    assert.equal(bad.warnings.length, 1);
    assert.match(bad.warnings[0] ?? '', /reloader\.stakater\.com\/auto="yes" is not a boolean/);
  });

  it('typed auto covers one kind', () => {
    const w = watchedConfigs(workload({ [CM_AUTO]: 'true' }));
    assert.deepEqual(
      w.keys,
      ALL_KEYS.filter((k) => k.startsWith('configmap/')),
    );
    assert.deepEqual(w.optIns, ['reloader-typed-auto']);
  });

  it('--auto-reload-all: everything unless auto says "false"', () => {
    assert.deepEqual(watchedConfigs(workload({}), { autoReloadAll: true }).keys, ALL_KEYS);
    assert.deepEqual(watchedConfigs(workload({}), { autoReloadAll: true }).optIns, ['reloader-auto-all']);
    assert.deepEqual(watchedConfigs(workload({ [AUTO]: 'false' }), { autoReloadAll: true }).keys, []);
    assert.deepEqual(
      watchedConfigs(workload({ [CM_AUTO]: 'false' }), { autoReloadAll: true }).keys,
      ALL_KEYS.filter((k) => k.startsWith('secret/')),
    );
  });

  it('reload lists name configs, referenced or not, and do not restrict auto', () => {
    const w = watchedConfigs(workload({ [CM_RELOAD]: ' vol-cm , not-used,', [SECRET_RELOAD]: 'proj-secret' }));
    assert.deepEqual(w.keys, ['configmap/prod/not-used', 'configmap/prod/vol-cm', 'secret/prod/proj-secret']);
    assert.equal(w.configs.find((c) => c.name === 'not-used')?.reference, undefined);
    assert.ok(w.configs.find((c) => c.name === 'vol-cm')?.reference);
    assert.deepEqual(w.optIns, ['reloader-reload-list']);
    assert.deepEqual(w.warnings, []);
    assert.deepEqual(w.patterns, []);

    const both = watchedConfigs(workload({ [CM_RELOAD]: 'not-used', [AUTO]: 'true' }));
    assert.deepEqual(both.keys, [...ALL_KEYS.slice(0, 6), 'configmap/prod/not-used', ...ALL_KEYS.slice(6)].sort());
    assert.deepEqual(both.configs.find((c) => c.name === 'not-used')?.reasons, ['reloader-reload-list']);
    assert.deepEqual(both.configs.find((c) => c.name === 'env-cm')?.reasons, ['reloader-auto']);
  });

  it('reload-list entries are whole-name regexes, expanded over existing configs', () => {
    const options: WatchOptions = {
      configNames: (kind) =>
        kind === 'configmap' ? ['team-a-config', 'team-b-config', 'other', 'team-a-config-old'] : ['team-a-config'],
    };
    const w = watchedConfigs(workload({ [CM_RELOAD]: 'team-.*-config,env-c.|x' }, fullTemplate()), options);
    assert.deepEqual(w.keys, ['configmap/prod/env-cm', 'configmap/prod/team-a-config', 'configmap/prod/team-b-config']);
    assert.deepEqual(
      w.patterns.map((p) => p.source),
      ['env-c.|x', 'team-.*-config'],
    );
    assert.ok(patternMatches(w, 'configmap', NS, 'team-z-config'));
    assert.ok(!patternMatches(w, 'configmap', NS, 'team-z-config-old'));
    assert.ok(!patternMatches(w, 'secret', NS, 'team-z-config'));
    assert.ok(!patternMatches(w, 'configmap', 'other-ns', 'team-z-config'));
    // Anchored as a whole: "a|b" does not match "a-prefix" as Reloader's ^a|b$ would.
    const alt = watchedConfigs(workload({ [CM_RELOAD]: 'env|x' }), { configNames: () => ['env-cm', 'env'] });
    assert.deepEqual(alt.keys, ['configmap/prod/env']);
  });

  it("reload entries Go refuses warn with Go's error and are skipped, the rest still apply", () => {
    const refused: [string, string][] = [
      ['team-(', 'error parsing regexp: missing closing ): `team-(`'],
      ['(?=x)a', 'error parsing regexp: invalid or unsupported Perl syntax: `(?=`'],
      ['(a)\\1', 'error parsing regexp: invalid escape sequence: `\\1`'],
    ];
    for (const [bad, why] of refused) {
      const w = watchedConfigs(workload({ [CM_RELOAD]: `${bad},vol-cm` }), { configNames: () => ['a'.repeat(40)] });
      assert.deepEqual(w.keys, ['configmap/prod/vol-cm'], bad);
      assert.deepEqual(
        w.warnings,
        [`web: ${CM_RELOAD}: entry ${JSON.stringify(bad)} is not a valid Go regular expression (${why}); ignored`],
        bad,
      );
    }
    const long = watchedConfigs(workload({ [CM_RELOAD]: `${'x'.repeat(1100)},vol-cm` }));
    assert.deepEqual(long.keys, ['configmap/prod/vol-cm']);
    assert.match(long.warnings[0] ?? '', /is longer than 1024 characters; ignored$/);
    assert.deepEqual(watchedConfigs(workload({ [CM_RELOAD]: '(ab)+c,(x|y)-z,a{2,3}.*-.*,a{3}' })).warnings, []);
  });

  it('reload entries are Go regexes: Go syntax JavaScript lacks, and shapes that backtrack, match in linear time (were: refused)', () => {
    const names = ['ABC', 'team-a', 'a'.repeat(252) + '!', 'a'.repeat(40), 'aaab'];
    for (const [entry, matched] of [
      ['(?i)abc', ['ABC']],
      ['(?P<team>team)-[[:alpha:]]', ['team-a']],
      ['\\Qteam-a\\E', ['team-a']],
      ['(a+)+b', ['aaab']],
      ['(a|aa)*', ['a'.repeat(40)]],
      ['.*.*.*!', ['a'.repeat(252) + '!']],
      ['a+b+c+', []],
    ] as const) {
      const started = performance.now();
      const w = watchedConfigs(workload({ [CM_RELOAD]: entry }), { configNames: () => names });
      assert.ok(performance.now() - started < 2_000, `${entry}: ${performance.now() - started} ms`);
      assert.deepEqual(w.warnings, [], entry);
      assert.deepEqual(w.keys, matched.map((n) => `configmap/prod/${n}`).sort(), entry);
    }
  });

  it('ignore on the config excludes it from every opt-in, xing included', () => {
    const ignored = new Set(['vol-cm', 'env-secret', 'not-used']);
    const options: WatchOptions = {
      configMeta: (_k, ns, name) =>
        ns === NS && ignored.has(name) ? { annotations: { [IGNORE]: 'true' } } : { annotations: { [IGNORE]: 'yes' } },
    };
    const w = watchedConfigs(workload({ [XING]: 'enabled', [CM_RELOAD]: 'not-used' }), options);
    assert.deepEqual(
      w.keys,
      ALL_KEYS.filter((k) => !/\/(vol-cm|env-secret)$/.test(k)),
    );
    assert.deepEqual(w.excluded, [
      { key: 'configmap/prod/not-used', reason: 'ignore-annotation' },
      { key: 'configmap/prod/vol-cm', reason: 'ignore-annotation' },
      { key: 'secret/prod/env-secret', reason: 'ignore-annotation' },
    ]);
    assert.equal(isIgnoredConfig({ metadata: { annotations: { [IGNORE]: 'true' } } }), true);
    assert.equal(isIgnoredConfig({ metadata: { annotations: { [IGNORE]: 'True' } } }), false);
    assert.equal(isIgnoredConfig(undefined), false);
  });

  it('exclude lists (exact names, metadata only) win over auto, reload lists and xing', () => {
    const w = watchedConfigs(
      workload({ [AUTO]: 'true', [CM_RELOAD]: 'extra', [CM_EXCLUDE]: 'extra, vol-cm', [SECRET_EXCLUDE]: 'env-sec.*' }),
    );
    assert.deepEqual(
      w.keys,
      ALL_KEYS.filter((k) => k !== 'configmap/prod/vol-cm'),
    );
    assert.deepEqual(
      w.excluded.map((e) => [e.key, e.reason]),
      [
        ['configmap/prod/extra', 'exclude-list'],
        ['configmap/prod/vol-cm', 'exclude-list'],
      ],
    );
    assert.deepEqual(
      watchedConfigs(workload({ [XING]: 'enabled', [SECRET_EXCLUDE]: 'env-secret' })).keys,
      ALL_KEYS.filter((k) => k !== 'secret/prod/env-secret'),
    );
  });

  it('search watches referenced configs carrying match: "true"', () => {
    const matching: Record<string, string> = { [MATCH]: 'true' };
    const options: WatchOptions = {
      configMeta: (_k, _ns, name) => ({
        annotations: name.startsWith('env') || name === 'unreferenced' ? matching : {},
      }),
    };
    const w = watchedConfigs(workload({ [SEARCH]: 'true', [CM_RELOAD]: '' }), options);
    assert.deepEqual(w.keys, [
      'configmap/prod/env-cm',
      'configmap/prod/envfrom-cm',
      'secret/prod/env-secret',
      'secret/prod/envfrom-secret',
    ]);
    assert.deepEqual(w.optIns, ['reloader-search']);
    assert.deepEqual(watchedConfigs(workload({ [SEARCH]: 'true' })).keys, []);
    assert.equal(watchedConfigs(workload({ [SEARCH]: 'on' })).warnings.length, 1);
  });

  it('falls back to the pod template annotations only when the metadata has none of the keys for that kind', () => {
    const t = fullTemplate();
    t.metadata = { annotations: { [AUTO]: 'true' } };
    assert.deepEqual(watchedConfigs(workload({}, t)).keys, ALL_KEYS);
    // A ConfigMap reload key on the metadata, even empty, stops the fallback for ConfigMaps only.
    assert.deepEqual(
      watchedConfigs(workload({ [CM_RELOAD]: '' }, t)).keys,
      ALL_KEYS.filter((k) => k.startsWith('secret/')),
    );
    // The exclude list is never read from the template.
    t.metadata = { annotations: { [AUTO]: 'true', [CM_EXCLUDE]: 'vol-cm' } };
    assert.deepEqual(watchedConfigs(workload({}, t)).keys, ALL_KEYS);
  });

  it('xing and Reloader opt-ins combine as a union, with reasons', () => {
    const w = watchedConfigs(workload({ [XING]: 'enabled', [CM_RELOAD]: 'extra' }));
    assert.deepEqual(w.optIns, ['reloader-reload-list', 'xing']);
    assert.deepEqual(w.keys, [...ALL_KEYS, 'configmap/prod/extra'].sort());
    assert.deepEqual(w.configs.find((c) => c.name === 'extra')?.reasons, ['reloader-reload-list']);
  });

  it('warns about CSI opt-ins and a missing namespace', () => {
    const w = watchedConfigs({
      metadata: { name: 'x', annotations: { 'secretproviderclass.reloader.stakater.com/reload': 'v' } },
    });
    assert.equal(w.warnings.length, 2);
    assert.ok(w.warnings.every((m) => m.startsWith('x: ')));
  });

  it('property: never throws, and the output is sorted and deduplicated', () => {
    const annotationArb = fc.dictionary(
      fc.constantFrom(XING, AUTO, CM_AUTO, CM_RELOAD, SECRET_RELOAD, CM_EXCLUDE, SECRET_EXCLUDE, SEARCH, 'other'),
      fc.oneof(
        fc.string({ maxLength: 30 }),
        fc.constantFrom('enabled', 'true', 'false', 'vol-cm,env-.*', '(a+)+', '['),
      ),
    );
    fc.assert(
      fc.property(annotationArb, annotationArb, fc.boolean(), fc.anything(), (meta, tmpl, all, junk) => {
        const t = fullTemplate();
        t.metadata = { annotations: tmpl };
        const options: WatchOptions = {
          autoReloadAll: all,
          configNames: () => ['vol-cm', 'env-x'],
          configMeta: () => ({ annotations: { [MATCH]: 'true' } }),
        };
        const w = watchedConfigs(workload(meta, t), options);
        assert.deepEqual(w.keys, [...new Set(w.keys)].sort());
        assert.deepEqual(
          w.configs.map((c) => c.key),
          w.keys,
        );
        assert.deepEqual(watchedConfigs(workload(meta, t), options), w);
        watchedConfigs(junk as WorkloadLike, options);
        watchedConfigs({ metadata: { annotations: junk } } as WorkloadLike, {
          configNames: () => junk as string[],
          configMeta: () => junk as undefined,
        });
        watchedConfigs(workload(meta, t), {
          configNames: () => {
            throw new Error('x');
          },
          configMeta: () => {
            throw new Error('y');
          },
        });
      }),
    );
  });
});

describe('mayOptIn', { timeout: 10000 }, () => {
  it('is false only where watchedConfigs finds no opt-in (property over opt-in annotations on workload and template)', () => {
    const keys = [XING, AUTO, CM_AUTO, CM_RELOAD, SECRET_RELOAD, SEARCH, 'unrelated.example.com/x', 'app'];
    const values = ['enabled', 'true', 'false', 'env-cm', 'disabled', ''];
    const annotations = fc.dictionary(fc.constantFrom(...keys), fc.constantFrom(...values), { maxKeys: 3 });
    fc.assert(
      fc.property(annotations, annotations, (onWorkload, onTemplate) => {
        const template = fullTemplate();
        template.metadata = { annotations: onTemplate };
        const w = workload(onWorkload, template);
        if (!mayOptIn(w)) assert.deepEqual(watchedConfigs(w).optIns, []);
      }),
    );
    assert.equal(mayOptIn(workload({})), false);
    assert.equal(mayOptIn(workload({ [XING]: 'enabled' })), true);
  });
});
