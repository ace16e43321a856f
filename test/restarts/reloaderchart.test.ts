// Reloader's own Helm chart, rendered (test/fixtures/reloader-chart/), through
// Stateward's command line: the Deployment's args and environment must parse
// with every Stateward flag registered as main.ts registers them, and mean
// what they mean to Reloader.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { main } from '../../src/main.ts';
import { registerCompatFlags } from '../../src/runtime/compat.ts';
import { FlagSet } from '../../src/runtime/flags/flagset.ts';
import { registerRuntimeFlags } from '../../src/runtime/runtimeflags.ts';
import { registerRescheduleFlags } from '../../src/drain/reschedule/webhook.ts';
import { registerRestartFlags } from '../../src/restarts/controller.ts';
import { registerAlertFlags } from '../../src/restarts/alertflags.ts';
import { registerReloaderFlags, RELOADER_HTTP_PORT, unhonouredRenameErrors } from '../../src/restarts/reloaderflags.ts';
import {
  applyReloaderToRuntime,
  configRestartsEnabled,
  explicitRuntimeFlags,
  reloaderEnvironment,
} from '../../src/restarts/reloaderruntime.ts';
import { registerRolloutFlags } from '../../src/rollout/controller.ts';
import { registerWebFlags } from '../../src/web/capability.ts';
import { registerWebhookFlags } from '../../src/webhooks/webhookflags.ts';
import { registerPodCallFlags } from '../../src/workloads/podclient.ts';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; resourceFieldRef?: { resource: string } };
}
interface Probe {
  httpGet: { path: string; port: string | number };
}
interface Container {
  args?: string[];
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
}
interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: { template: { spec: { containers: Container[] } } };
}

function fixture(name: string): Manifest[] {
  const text = readFileSync(new URL(`../fixtures/reloader-chart/${name}.yaml`, import.meta.url), 'utf8');
  return parseAllDocuments(text)
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}

function container(manifests: Manifest[]): { container: Container; namespace: string; name: string } {
  const deployment = manifests.find((m) => m.kind === 'Deployment');
  assert.ok(deployment?.spec, 'the chart renders a Deployment');
  return {
    container: deployment.spec.template.spec.containers[0]!,
    namespace: deployment.metadata.namespace!,
    name: deployment.metadata.name,
  };
}

/** The container's environment as the kubelet would set it for a pod of the Deployment. */
function environment(c: Container, namespace: string, podName: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const v of c.env ?? []) {
    const path = v.valueFrom?.fieldRef?.fieldPath;
    if (v.value !== undefined) env[v.name] = v.value;
    else if (path === 'metadata.namespace') env[v.name] = namespace;
    else if (path === 'metadata.name') env[v.name] = podName;
    else if (v.valueFrom?.resourceFieldRef)
      env[v.name] = '1'; // GOMAXPROCS, GOMEMLIMIT: no effect here
    else assert.fail(`unexpected env source for ${v.name}`);
  }
  return env;
}

/** Every operator flag, registered as main.ts's registerOperatorFlags does. */
function operatorFlagSet() {
  const fs = new FlagSet('stateward');
  fs.bool('version', false, 'Print the version and exit.');
  const runtime = registerRuntimeFlags(fs);
  const podCalls = registerPodCallFlags(fs);
  registerRolloutFlags(fs);
  registerWebhookFlags(fs, podCalls.read);
  registerRescheduleFlags(fs);
  const restarts = registerRestartFlags(fs);
  registerAlertFlags(fs);
  const reloader = registerReloaderFlags(fs);
  registerWebFlags(fs);
  registerCompatFlags(fs);
  return { fs, runtime, restarts, reloader };
}

const flagName = (arg: string) => arg.replace(/^--?/, '').split('=')[0]!;
const flagArgs = (args: readonly string[]) => args.filter((a) => a.startsWith('-')).map(flagName);

function isDefined(fs: FlagSet, name: string): boolean {
  try {
    fs.isSet(name);
    return true;
  } catch {
    return false;
  }
}

/** Parses the chart's command line as main.ts does. */
function parseChart(name: string) {
  const { container: c, namespace, name: deployment } = container(fixture(name));
  const env = environment(c, namespace, `${deployment}-7d9f-abcde`);
  const args = c.args ?? [];
  const flags = operatorFlagSet();
  const unknown = flagArgs(args).filter((n) => !isDefined(flags.fs, n));
  assert.deepEqual(unknown, [], 'every flag the chart passes is defined');
  const parsed = flags.fs.parse(args, reloaderEnvironment(env));
  assert.equal(parsed.kind, 'ok', parsed.kind === 'error' ? parsed.message : '');
  assert.deepEqual(parsed.kind === 'ok' && parsed.args, [], 'no argument is left over');
  const settings = flags.reloader.read(env);
  const restarts = flags.restarts();
  return {
    container: c,
    env,
    settings,
    validation: flags.runtime.validate(),
    runtime: applyReloaderToRuntime(flags.runtime.read(), settings, explicitRuntimeFlags(flags.fs)),
    restartsEnabled: configRestartsEnabled(
      { value: restarts.enabled, explicit: flags.fs.isSet('config-restarts.enabled') },
      settings,
    ).enabled,
  };
}

describe("Reloader's chart, default values", () => {
  it('starts config restarts on the whole cluster, in its namespace, on its port', () => {
    const r = parseChart('default');
    assert.deepEqual(r.container.args, ['--log-level=info']);
    assert.deepEqual(r.settings.errors, []);
    assert.deepEqual(r.settings.notices, [
      'RELOADER_DEPLOYMENT_NAME: no reloader-meta-info ConfigMap is published; `kubectl stateward status` describes the running operator',
    ]);
    assert.equal(r.validation, undefined);
    assert.equal(r.restartsEnabled, true);
    assert.equal(r.settings.eventReasons, 'reloader');
    assert.equal(r.runtime.namespace, 'reloader');
    assert.deepEqual(r.runtime.watchNamespaces, ['*']);
    assert.equal(r.runtime.logLevel, 'info');
    assert.equal(r.runtime.logFormat, 'logfmt');
    assert.equal(r.runtime.leaderElection.enabled, false);
  });

  it('probes /live and /metrics on the port Stateward then listens on', () => {
    const r = parseChart('default');
    const port = r.container.ports?.find((p) => p.name === 'http');
    assert.equal(port?.containerPort, RELOADER_HTTP_PORT);
    assert.deepEqual(r.container.livenessProbe?.httpGet, { path: '/live', port: 'http' });
    assert.deepEqual(r.container.readinessProbe?.httpGet, { path: '/metrics', port: 'http' });
    assert.equal(r.runtime.serverPort, RELOADER_HTTP_PORT);
  });
});

describe("Reloader's chart, watchGlobally=false and namespaces", () => {
  it('passes --namespaces, which makes Stateward Reloader’s drop-in', () => {
    const r = parseChart('scoped');
    assert.deepEqual(r.settings.errors, []);
    assert.ok(r.settings.activatedBy.includes('--namespaces'));
    assert.equal(r.restartsEnabled, true);
    assert.notDeepEqual(r.runtime.watchNamespaces, ['*'], '--namespaces decides what is watched');
  });
});

describe("Reloader's chart, common options", () => {
  it('maps every option onto Stateward', () => {
    const r = parseChart('options');
    const { settings: s, runtime } = r;
    assert.deepEqual(s.errors, []);
    assert.equal(r.restartsEnabled, true);
    assert.equal(s.scope.autoReloadAll, true);
    assert.equal(s.scope.reloadOnCreate, true);
    assert.equal(s.scope.reloadOnDelete, true);
    assert.equal(s.scope.configKindWatched('secret'), false);
    assert.equal(s.scope.configKindWatched('configmap'), true);
    assert.equal(s.scope.configSelectorText, 'team=a');
    assert.equal(s.scope.workloadKindIncluded('Job'), false);
    assert.equal(s.scope.workloadKindIncluded('CronJob'), false);
    assert.equal(s.scope.workloadKindIncluded('Rollout'), true);
    assert.equal(s.countByNamespace, true);
    assert.equal(runtime.logFormat, 'json');
    assert.equal(runtime.logLevel, 'debug');
    assert.equal(runtime.leaderElection.enabled, true);
    assert.equal(runtime.leaderElection.identity, 'reloader-reloader-7d9f-abcde');
    assert.equal(runtime.pprofEnabled, true);
    assert.equal(r.validation, undefined);
    assert.deepEqual(
      s.notices.map((n) => n.split(' ')[0]),
      ['--reload-strategy=annotations', '--sync-after-restart', '--pprof-addr=:6060', 'RELOADER_DEPLOYMENT_NAME:'],
    );
  });

  it('refuses the annotation rename until the restart controller reads renamed keys', () => {
    const r = parseChart('options');
    assert.deepEqual(r.settings.renamedAnnotations, ['auto-annotation']);
    assert.match(unhonouredRenameErrors(r.settings, []).join('\n'), /^--auto-annotation=example.com\/auto: /);
  });
});

describe('the real main() with Reloader flags it cannot honour', () => {
  it('exits 2 naming a renamed annotation key, before connecting to anything', async () => {
    let err = '';
    const code = await main(['--auto-annotation=example.com/auto'], {
      out: () => {},
      err: (s) => (err += s),
      env: { POD_NAMESPACE: 'stateward' },
    });
    assert.equal(code, 2);
    assert.match(err, /^--auto-annotation=example.com\/auto: /);
  });

  it('exits 2 on a resource it cannot ignore', async () => {
    let err = '';
    const code = await main(['--resources-to-ignore=pods'], {
      out: () => {},
      err: (s) => (err += s),
      env: { POD_NAMESPACE: 'stateward' },
    });
    assert.equal(code, 2);
    assert.match(err, /--resources-to-ignore=pods: only configmaps or secrets/);
  });
});

describe('the real main() takes the chart’s command line', () => {
  for (const name of ['default', 'scoped', 'options']) {
    it(`${name}: no flag is refused`, async () => {
      let help = '';
      await main(['-help'], { out: () => {}, err: (s) => (help += s), env: {} });
      const defined = new Set([...help.matchAll(/^ {2}-(\S+)/gm)].map((m) => m[1]!));
      assert.ok(defined.has('config-restarts.enabled'), 'the operator flags are read from -help');
      const { container: c } = container(fixture(name));
      const args = c.args ?? [];
      assert.deepEqual(
        flagArgs(args).filter((n) => !defined.has(n)),
        [],
        'main.ts registers every flag',
      );
      let err = '';
      const code = await main([...args, '-version'], { out: () => {}, err: (s) => (err += s), env: {} });
      assert.equal(code, 0, err);
    });
  }
});
