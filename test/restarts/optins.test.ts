// Which configs a workload opts in to: xing's annotation, Reloader's auto,
// reload lists, search/match and excludes (src/restarts/optins.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
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
import { NS, ALL_KEYS, fullTemplate, workload } from './workloads.ts';

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
        { keys: [], configs: [], excluded: [], patterns: [], selected: [], optIns: [], warnings: [] },
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
    const xing = workload({ [XING]: 'enabled' });
    const every = (annotations: Record<string, string> | undefined) =>
      watchedConfigs(xing, { configMeta: () => (annotations === undefined ? undefined : { annotations }) });
    assert.deepEqual(every({ [IGNORE]: 'true' }).keys, []);
    assert.deepEqual(every({ [IGNORE]: 'True' }).keys, ALL_KEYS, 'only "true" exactly ignores');
    assert.deepEqual(every(undefined).keys, ALL_KEYS, 'a config without metadata is not ignored');
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
