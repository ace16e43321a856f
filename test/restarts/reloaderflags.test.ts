// Reloader's command line and environment on Stateward (src/restarts/reloaderflags.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { FlagSet } from '../../src/runtime/flags/flagset.ts';
import {
  mapReloaderLogLevel,
  registerReloaderFlags,
  reloaderLabelSelectorText,
  RELOADER_ANNOTATION_FLAGS,
  RELOADER_DEFAULTS,
  resolveReloaderSettings,
  splitReloaderList,
  unhonouredRenameErrors,
  type ReloaderAnnotationKeys,
  type ReloaderFlagValues,
} from '../../src/restarts/reloaderflags.ts';

function parsed(argv: string[], env: Record<string, string> = {}) {
  const fs = new FlagSet('test');
  const flags = registerReloaderFlags(fs);
  const result = fs.parse(argv, env);
  assert.equal(result.kind, 'ok', result.kind === 'error' ? result.message : '');
  return flags.read(env);
}

function values(over: Partial<ReloaderFlagValues> = {}): ReloaderFlagValues {
  return { ...RELOADER_DEFAULTS, given: new Set(), ...over };
}

describe('Reloader flags: activation', () => {
  it('nothing given: inactive, Stateward reasons, default scope', () => {
    const s = parsed([]);
    assert.equal(s.active, false);
    assert.deepEqual(s.activatedBy, []);
    assert.equal(s.eventReasons, 'stateward');
    assert.deepEqual(s.errors, []);
    assert.deepEqual(s.notices, []);
    assert.equal(s.scope.autoReloadAll, false);
    assert.equal(s.scope.workloadKindIncluded('Rollout'), true, "Stateward's own default");
    assert.equal(s.logLevel, undefined);
  });

  it("in Reloader's install, Argo Rollouts are restarted only with --is-Argo-Rollouts=true", () => {
    const install = { RELOADER_NAMESPACE: 'r' };
    assert.equal(parsed(['--log-level=info'], install).scope.workloadKindIncluded('Rollout'), false);
    assert.equal(parsed([], install).scope.workloadKindIncluded('Rollout'), false);
    assert.equal(parsed(['--is-Argo-Rollouts=true'], install).scope.workloadKindIncluded('Rollout'), true);
    // Reloader flags on Stateward's own install keep Stateward's default unless the flag says otherwise.
    assert.equal(parsed(['--auto-reload-all']).scope.workloadKindIncluded('Rollout'), true);
    assert.equal(parsed(['--is-Argo-Rollouts=false']).scope.workloadKindIncluded('Rollout'), false);
  });

  it("any Reloader flag activates, even at its default value (the chart's --log-level=info)", () => {
    const s = parsed(['--log-level=info']);
    assert.equal(s.active, true);
    assert.deepEqual(s.activatedBy, ['--log-level']);
    assert.equal(s.install, false);
    assert.equal(s.eventReasons, 'reloader');
    assert.equal(s.logLevel, 'info');
  });

  it("Reloader's install environment activates without any flag", () => {
    const s = parsed([], { RELOADER_NAMESPACE: 'reloader', RELOADER_DEPLOYMENT_NAME: 'reloader-reloader' });
    assert.equal(s.active, true);
    assert.deepEqual(s.activatedBy, ['RELOADER_NAMESPACE', 'RELOADER_DEPLOYMENT_NAME']);
    assert.equal(s.install, true);
    assert.equal(s.operatorNamespace, 'reloader');
  });

  it('an explicit -config-restarts.event-reasons wins over auto', () => {
    assert.equal(parsed(['--auto-reload-all', '-config-restarts.event-reasons=stateward']).eventReasons, 'stateward');
    assert.equal(parsed(['-config-restarts.event-reasons=reloader']).eventReasons, 'reloader');
  });
});

describe('Reloader flags: syntax as Reloader parses it', () => {
  it('string booleans take a separate value; only "true" is true', () => {
    const s = parsed(['--reload-on-create', 'true', '--reload-on-delete=yes', '--is-Argo-Rollouts=true']);
    assert.equal(s.scope.reloadOnCreate, true);
    assert.equal(s.scope.reloadOnDelete, false);
    assert.equal(s.scope.argoRollouts, true);
    assert.ok(s.notices.some((n) => n.startsWith('--reload-on-delete=yes is read as false')));
  });

  it('list flags append across repeats, as pflag string slices', () => {
    const s = parsed(['--ignored-workload-types=jobs', '--ignored-workload-types=cronjobs']);
    assert.equal(s.scope.workloadKindIncluded('Job'), false);
    assert.equal(s.scope.workloadKindIncluded('CronJob'), false);
    assert.deepEqual(s.errors, []);
  });

  it("both resources ignored (the chart's ignoreSecrets and ignoreConfigMaps) is refused, as by Reloader", () => {
    const s = parsed(['--resources-to-ignore=secrets', '--resources-to-ignore=configmaps']);
    assert.deepEqual(s.errors, [
      '--resources-to-ignore: configmaps or secrets can be ignored, not both (Reloader refuses it too)',
    ]);
  });

  it('resources-to-ignore is case-insensitive; other values are refused', () => {
    assert.equal(parsed(['--resources-to-ignore=ConfigMaps']).scope.configKindWatched('configmap'), false);
    assert.deepEqual(parsed(['--resources-to-ignore=pods']).errors, [
      '--resources-to-ignore=pods: only configmaps or secrets can be ignored',
    ]);
  });

  it('ignored-workload-types refuses anything but jobs and cronjobs', () => {
    assert.deepEqual(parsed(['--ignored-workload-types=deployments']).errors, [
      '--ignored-workload-types=deployments: only jobs and cronjobs can be ignored',
    ]);
  });

  it('an unknown reload strategy is refused; a valid one is accepted with a notice saying what happens instead', () => {
    assert.deepEqual(parsed(['--reload-strategy=rolling']).errors, [
      '--reload-strategy=rolling: must be one of env-vars, annotations (as in Reloader)',
    ]);
    const s = parsed(['--reload-strategy=annotations']);
    assert.deepEqual(s.errors, []);
    assert.match(s.notices.join('\n'), /--reload-strategy=annotations has no effect: a restart sets/);
  });

  it('sync-after-restart and pprof-addr are accepted with a notice each', () => {
    const s = parsed(['--sync-after-restart=true', '--enable-pprof', '--pprof-addr=:7070']);
    assert.equal(s.pprof, true);
    assert.equal(s.notices.length, 2);
    assert.match(s.notices[0]!, /^--sync-after-restart has no effect/);
    assert.match(s.notices[1]!, /^--pprof-addr=:7070 has no effect/);
  });

  it('a resource label selector in legacy and set-based forms', () => {
    const s = parsed(['--resource-label-selector=team:a,tier:*,env in (prod,staging)']);
    assert.deepEqual(s.errors, []);
    assert.equal(s.scope.configSelectorText, 'team=a,tier,env in (prod,staging)');
    assert.equal(s.scope.configIncluded('secret', { team: 'a', tier: 'x', env: 'prod' }), true);
    assert.equal(s.scope.configIncluded('secret', { team: 'a', env: 'prod' }), false);
    assert.match(parsed(['--resource-label-selector=a=(']).errors[0]!, /^--resource-label-selector: label selector/);
  });
});

describe('Reloader flags: logging and HA', () => {
  it('--log-format=json asks for JSON logs; empty keeps the format; others only warn', () => {
    assert.equal(parsed(['--log-format=json']).logFormat, 'json');
    assert.equal(parsed(['--log-format=']).logFormat, undefined);
    const s = parsed(['--log-format=text']);
    assert.equal(s.logFormat, undefined);
    assert.deepEqual(s.errors, []);
    assert.match(s.notices[0]!, /^--log-format=text is not a format/);
  });

  it("logrus's level names map onto Stateward's four", () => {
    const expected = {
      trace: 'debug',
      debug: 'debug',
      info: 'info',
      warning: 'warn',
      warn: 'warn',
      error: 'error',
      fatal: 'error',
      panic: 'error',
      WARNING: 'warn',
    };
    for (const [text, level] of Object.entries(expected)) assert.equal(mapReloaderLogLevel(text), level, text);
    assert.equal(mapReloaderLogLevel('verbose'), undefined);
    assert.equal(parsed(['--log-level=verbose']).logLevel, undefined);
  });

  it('--enable-ha asks for leader election', () => {
    assert.equal(parsed(['--enable-ha=true'], { POD_NAME: 'p' }).leaderElection, true);
    assert.match(parsed(['--enable-ha']).notices.join('\n'), /without POD_NAME/);
  });

  it('METRICS_COUNT_BY_NAMESPACE=enabled and KUBERNETES_NAMESPACE are read', () => {
    const s = parsed([], { METRICS_COUNT_BY_NAMESPACE: 'enabled', KUBERNETES_NAMESPACE: 'apps' });
    assert.equal(s.countByNamespace, true);
    assert.equal(s.singleNamespace, 'apps');
    assert.equal(s.active, false, 'neither variable alone means a Reloader install');
    assert.equal(parsed([], { METRICS_COUNT_BY_NAMESPACE: 'true' }).countByNamespace, false);
  });
});

describe('Reloader flags: annotation renames', () => {
  it('a rename is reported, and refused until the controller reads it', () => {
    const s = parsed(['--auto-annotation', 'example.com/auto']);
    assert.deepEqual(s.errors, []);
    assert.equal(s.annotationKeys['auto-annotation'], 'example.com/auto');
    assert.deepEqual(s.renamedAnnotations, ['auto-annotation']);
    assert.deepEqual(unhonouredRenameErrors(s, ['auto-annotation']), []);
    assert.deepEqual(unhonouredRenameErrors(s, []), [
      "--auto-annotation=example.com/auto: Stateward does not read a renamed key for reloader.stakater.com/auto yet; keep Reloader's key, or leave the flag out",
    ]);
  });

  it('giving a flag its default key is no rename', () => {
    const s = parsed(['--ignore-annotation=reloader.stakater.com/ignore']);
    assert.deepEqual(s.renamedAnnotations, []);
  });

  it('a key taken by another role, by xing or Stateward, or not a key at all, is refused', () => {
    assert.deepEqual(parsed(['--auto-annotation=reloader.stakater.com/search']).errors, [
      '--auto-search-annotation=reloader.stakater.com/search: the same key as --auto-annotation; one annotation cannot mean both',
    ]);
    assert.deepEqual(parsed(['--ignore-annotation=com.xing.deployment-restart']).errors, [
      '--ignore-annotation=com.xing.deployment-restart: that key already has a meaning of its own',
    ]);
    assert.match(
      parsed(['--secret-annotation=not a key']).errors[0]!,
      /^--secret-annotation=not a key: not an annotation key/,
    );
  });

  it('property: distinct valid renames outside the reserved keys are never refused', () => {
    const flags = Object.keys(RELOADER_ANNOTATION_FLAGS) as (keyof typeof RELOADER_ANNOTATION_FLAGS)[];
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9]{0,10}$/), {
          minLength: flags.length,
          maxLength: flags.length,
        }),
        (names) => {
          const annotations = Object.fromEntries(
            flags.map((f, i) => [f, `example.com/${names[i]}`]),
          ) as ReloaderAnnotationKeys;
          const s = resolveReloaderSettings(values({ annotations }), {});
          assert.deepEqual(s.errors, []);
          assert.equal(s.renamedAnnotations.length, flags.length);
        },
      ),
    );
  });
});

describe('Reloader list syntax', () => {
  it('splits as a CSV record: quotes may hold commas; empty is nothing', () => {
    assert.deepEqual(splitReloaderList(''), []);
    assert.deepEqual(splitReloaderList('jobs,cronjobs'), ['jobs', 'cronjobs']);
    assert.deepEqual(splitReloaderList('"a,b",c'), ['a,b', 'c']);
    assert.deepEqual(splitReloaderList('"say ""hi""",x'), ['say "hi"', 'x']);
  });

  it('property: items without quotes or commas round-trip through a join', () => {
    fc.assert(
      fc.property(fc.array(fc.stringMatching(/^[^",]*$/), { minLength: 1 }), (items) => {
        assert.deepEqual(splitReloaderList(items.join(',')), items.length === 1 && items[0] === '' ? [] : items);
      }),
    );
  });

  it("label selector items: Reloader's legacy forms become selectors, others are kept", () => {
    assert.equal(reloaderLabelSelectorText(['a:b', 'c:*', 'd=*', 'e!=f', 'g']), 'a=b,c,d,e!=f,g');
    assert.equal(reloaderLabelSelectorText([]), '');
  });
});
