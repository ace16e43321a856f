// Reloader's settings landing on Stateward's runtime config (src/restarts/reloaderruntime.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FlagSet } from '../../src/runtime/flags/flagset.ts';
import { registerRuntimeFlags, type RuntimeConfig } from '../../src/runtime/runtimeflags.ts';
import { registerReloaderFlags, type ReloaderSettings } from '../../src/restarts/reloaderflags.ts';
import {
  applyReloaderToRuntime,
  configRestartsEnabled,
  explicitRuntimeFlags,
  reloaderEnvironment,
} from '../../src/restarts/reloaderruntime.ts';

function setup(argv: string[], env: Record<string, string>) {
  const fs = new FlagSet('test');
  const runtime = registerRuntimeFlags(fs);
  const reloader = registerReloaderFlags(fs);
  const result = fs.parse(argv, reloaderEnvironment(env));
  assert.equal(result.kind, 'ok', result.kind === 'error' ? result.message : '');
  const settings = reloader.read(env);
  return {
    validation: runtime.validate(),
    settings,
    config: applyReloaderToRuntime(runtime.read(), settings, explicitRuntimeFlags(fs)),
  };
}

const CHART_ENV = { RELOADER_NAMESPACE: 'reloader', RELOADER_DEPLOYMENT_NAME: 'reloader-reloader' };

describe('applyReloaderToRuntime', () => {
  it("Reloader's default install: its namespace, its port, the whole cluster", () => {
    const { validation, config } = setup(['--log-level=info'], CHART_ENV);
    assert.equal(validation, undefined, 'RELOADER_NAMESPACE stands in for POD_NAMESPACE');
    assert.equal(config.namespace, 'reloader');
    assert.equal(config.serverPort, 9090);
    assert.deepEqual(config.watchNamespaces, ['*']);
    assert.equal(config.logFormat, 'logfmt');
    assert.equal(config.leaderElection.enabled, false);
  });

  it('KUBERNETES_NAMESPACE narrows the watch to that namespace', () => {
    const { config } = setup([], { ...CHART_ENV, KUBERNETES_NAMESPACE: 'reloader' });
    assert.deepEqual(config.watchNamespaces, ['reloader']);
  });

  it('Reloader flags map onto logging, HA and profiling', () => {
    const { config } = setup(['--log-format=json', '--log-level=warning', '--enable-ha=true', '--enable-pprof'], {
      ...CHART_ENV,
      POD_NAME: 'reloader-0',
      POD_NAMESPACE: 'reloader',
    });
    assert.equal(config.logFormat, 'json');
    assert.equal(config.logLevel, 'warn');
    assert.equal(config.leaderElection.enabled, true);
    assert.equal(config.leaderElection.identity, 'reloader-0');
    assert.equal(config.pprofEnabled, true);
  });

  it("Stateward's own flags, when given, win over Reloader's", () => {
    const { config } = setup(
      [
        '--log-format=json',
        '-log.format=logfmt',
        '--log-level=debug',
        '-log.level=error',
        '-server.port=8001',
        '-kubernetes.watch-namespaces=a,b',
        '--enable-ha',
        '-leader-election.enabled=false',
      ],
      CHART_ENV,
    );
    assert.equal(config.logFormat, 'logfmt');
    assert.equal(config.logLevel, 'error');
    assert.equal(config.serverPort, 8001);
    assert.deepEqual(config.watchNamespaces, ['a', 'b']);
    assert.equal(config.leaderElection.enabled, false);
  });

  it("Reloader flags on Stateward's own install keep its port and its namespaces", () => {
    const { config } = setup(['--log-format=json', '-kubernetes.namespace=stateward'], {});
    assert.equal(config.logFormat, 'json');
    assert.equal(config.serverPort, 8001);
    assert.deepEqual(config.watchNamespaces, ['stateward']);
  });

  it('without Reloader, nothing changes', () => {
    const fs = new FlagSet('test');
    const runtime = registerRuntimeFlags(fs);
    const reloader = registerReloaderFlags(fs);
    assert.equal(fs.parse(['-kubernetes.namespace=x'], {}).kind, 'ok');
    const before: RuntimeConfig = runtime.read();
    assert.deepEqual(applyReloaderToRuntime(before, reloader.read({}), explicitRuntimeFlags(fs)), before);
  });
});

describe('reloaderEnvironment', () => {
  it('adds POD_NAMESPACE from RELOADER_NAMESPACE only when POD_NAMESPACE is unset', () => {
    assert.deepEqual(reloaderEnvironment({ RELOADER_NAMESPACE: 'r' }), { RELOADER_NAMESPACE: 'r', POD_NAMESPACE: 'r' });
    assert.deepEqual(reloaderEnvironment({ RELOADER_NAMESPACE: 'r', POD_NAMESPACE: 'p' }), {
      RELOADER_NAMESPACE: 'r',
      POD_NAMESPACE: 'p',
    });
    const plain = { A: 'b' };
    assert.equal(reloaderEnvironment(plain), plain);
  });
});

describe('configRestartsEnabled', () => {
  const active: Pick<ReloaderSettings, 'active' | 'activatedBy'> = { active: true, activatedBy: ['--auto-reload-all'] };
  const inactive: Pick<ReloaderSettings, 'active' | 'activatedBy'> = { active: false, activatedBy: [] };

  it('a Reloader command line or install turns config restarts on', () => {
    assert.deepEqual(configRestartsEnabled({ value: false, explicit: false }, active), {
      enabled: true,
      notice: undefined,
    });
  });

  it('-config-restarts.enabled alone decides without Reloader', () => {
    assert.equal(configRestartsEnabled({ value: false, explicit: false }, inactive).enabled, false);
    assert.equal(configRestartsEnabled({ value: true, explicit: true }, inactive).enabled, true);
  });

  it('an explicit -config-restarts.enabled=false keeps them off, and says so', () => {
    assert.deepEqual(configRestartsEnabled({ value: false, explicit: true }, active), {
      enabled: false,
      notice:
        "-config-restarts.enabled=false: config restarts stay off although Reloader's --auto-reload-all was given",
    });
  });
});
