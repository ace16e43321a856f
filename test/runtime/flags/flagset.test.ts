import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { FlagSet } from '../../../src/runtime/flags/flagset.ts';
import type { Environment, Flag } from '../../../src/runtime/flags/flagset.ts';

// Expected parses, messages and help text below were checked against Go
// 1.26's flag package with the same definitions.

/** The rollout-operator's command line, as Stateward defines it. */
function operatorFlags() {
  const fs = new FlagSet('stateward');
  const flags = {
    logFormat: fs.enumString('log.format', 'logfmt', ['logfmt', 'json'], 'The log format.'),
    logLevel: fs.enumString('log.level', 'debug', ['debug', 'info', 'warn', 'error'], 'The log level.'),
    serverPort: fs.int('server.port', 8001, 'Port for instrumentation and readiness endpoints.'),
    apiURL: fs.string('kubernetes.api-url', '', 'The Kubernetes server API URL.'),
    configFile: fs.string('kubernetes.config-file', '', 'The Kubernetes config file path.'),
    clientTimeout: fs.duration('kubernetes.client-timeout', 5 * 60_000, 'HTTP client timeout.'),
    clientQPS: fs.float('kubernetes.client-qps', 5, 'Kubernetes client QPS.'),
    clientBurst: fs.int('kubernetes.client-burst', 10, 'Kubernetes client burst.'),
    podsTimeout: fs.duration('pods.client-timeout', 5_000, 'Timeout for requests to pods.'),
    clusterDomain: fs.string('kubernetes.cluster-domain', 'cluster.local.', 'The Kubernetes cluster domain.'),
    namespace: fs.string('kubernetes.namespace', '', 'The namespace to manage.', { env: 'NAMESPACE' }),
    reconcileInterval: fs.duration('reconcile.interval', 5_000, 'The minimum interval of reconciliation.'),
    tlsEnabled: fs.bool('server-tls.enabled', false, 'Enable TLS server for webhook connections.'),
    tlsPort: fs.int('server-tls.port', 8443, 'Port of the TLS server.'),
    tlsRequestTimeout: fs.duration('server-tls.request-timeout', 10_000, 'TLS server request timeout.'),
    certExpiration: fs.promDuration(
      'server-tls.self-signed-cert.expiration',
      365 * 86_400_000,
      'Certificate lifetime.',
    ),
    certSecretName: fs.string(
      'server-tls.self-signed-cert.secret-name',
      'rollout-operator-self-signed-certificate',
      'Secret name.',
    ),
    updateCABundle: fs.bool('webhooks.update-ca-bundle', true, 'Update the CA bundle of webhooks.'),
    useZoneTracker: fs.bool('use-zone-tracker', false, 'Use the zone tracker.'),
    zoneTrackerConfigMap: fs.string(
      'zone-tracker.config-map-name',
      'rollout-operator-zone-tracker',
      'Zone tracker ConfigMap.',
    ),
    zpdbPatchTimeout: fs.duration('zpdb.pod-ready-annotation-patch-timeout', 5_000, 'Pod annotation patch timeout.'),
    excludedPaths: fs.stringList(
      'server.cluster-validation.http.excluded-paths',
      [],
      'Paths exempt from cluster validation.',
    ),
  };
  return { fs, flags };
}

function parseOk(fs: FlagSet, argv: string[], env: Environment = {}): string[] {
  const result = fs.parse(argv, env);
  assert.equal(result.kind, 'ok', result.kind === 'error' ? result.message : 'help requested');
  return result.args;
}

function parseError(fs: FlagSet, argv: string[], env: Environment = {}): string {
  const result = fs.parse(argv, env);
  assert.equal(result.kind, 'error');
  return result.message;
}

describe('FlagSet: rollout-operator command lines', () => {
  const rows: [string[], string, unknown][] = [
    [['-log.format=json'], 'log.format', 'json'],
    [['-log.level=debug'], 'log.level', 'debug'],
    [['-server.port=8001'], 'server.port', 8001],
    [['-kubernetes.api-url=https://1.2.3.4:6443'], 'kubernetes.api-url', 'https://1.2.3.4:6443'],
    [['-kubernetes.config-file=/x/kubeconfig'], 'kubernetes.config-file', '/x/kubeconfig'],
    [['-kubernetes.client-timeout=5m'], 'kubernetes.client-timeout', 300_000],
    [['-kubernetes.client-qps=5'], 'kubernetes.client-qps', 5],
    [['-kubernetes.client-qps=0'], 'kubernetes.client-qps', 0],
    [['-kubernetes.client-burst=10'], 'kubernetes.client-burst', 10],
    [['-pods.client-timeout=5s'], 'pods.client-timeout', 5_000],
    [['-kubernetes.cluster-domain=cluster.local.'], 'kubernetes.cluster-domain', 'cluster.local.'],
    [['-kubernetes.namespace=mimir'], 'kubernetes.namespace', 'mimir'],
    [['-reconcile.interval=1s'], 'reconcile.interval', 1_000],
    [['-server-tls.enabled=true'], 'server-tls.enabled', true],
    [['-server-tls.enabled'], 'server-tls.enabled', true],
    [['-server-tls.port', '8443'], 'server-tls.port', 8443],
    [['-server-tls.request-timeout=10s'], 'server-tls.request-timeout', 10_000],
    [['-server-tls.self-signed-cert.expiration=1y'], 'server-tls.self-signed-cert.expiration', 31_536_000_000],
    [
      ['-server-tls.self-signed-cert.secret-name=rollout-operator-self-signed-certificate'],
      'server-tls.self-signed-cert.secret-name',
      'rollout-operator-self-signed-certificate',
    ],
    [['-webhooks.update-ca-bundle=false'], 'webhooks.update-ca-bundle', false],
    [['-use-zone-tracker'], 'use-zone-tracker', true],
    [['-zone-tracker.config-map-name=x'], 'zone-tracker.config-map-name', 'x'],
    [['-zpdb.pod-ready-annotation-patch-timeout=5s'], 'zpdb.pod-ready-annotation-patch-timeout', 5_000],
    [
      ['-server.cluster-validation.http.excluded-paths=admission/no-downscale,admission/prepare-downscale'],
      'server.cluster-validation.http.excluded-paths',
      ['admission/no-downscale', 'admission/prepare-downscale'],
    ],
  ];
  for (const [argv, name, expected] of rows) {
    it(`${argv.join(' ')} sets ${name}`, () => {
      const { fs, flags } = operatorFlags();
      assert.deepEqual(parseOk(fs, argv), []);
      const flag = Object.values(flags).find((f: Flag<unknown>) => f.name === name)!;
      assert.deepEqual(flag.value, expected);
      assert.equal(fs.isSet(name), true);
      assert.equal(flag.source, 'command-line');
    });
  }

  it('leaves unset flags at their defaults and reports them unset', () => {
    const { fs, flags } = operatorFlags();
    parseOk(fs, ['-server.port=9000']);
    assert.equal(flags.serverPort.value, 9000);
    assert.equal(flags.clientTimeout.value, 300_000);
    assert.equal(flags.certExpiration.value, 31_536_000_000);
    assert.equal(flags.updateCABundle.value, true);
    assert.deepEqual(flags.excludedPaths.value, []);
    assert.equal(fs.isSet('kubernetes.client-timeout'), false);
    assert.equal(flags.clientTimeout.source, 'default');
  });
});

describe('FlagSet: syntax', () => {
  function tiny() {
    const fs = new FlagSet('t');
    return { fs, b: fs.bool('b', false, 'a bool'), n: fs.int('n', 7, 'an int'), s: fs.string('s', 'x', 'a string') };
  }

  const equivalent: [string, string[]][] = [
    ['-n=5', ['-n=5']],
    ['--n=5', ['--n=5']],
    ['-n 5', ['-n', '5']],
    ['--n 5', ['--n', '5']],
  ];
  for (const [label, argv] of equivalent) {
    it(`${label} sets the int`, () => {
      const { fs, n } = tiny();
      assert.deepEqual(parseOk(fs, argv), []);
      assert.equal(n.value, 5);
    });
  }

  for (const [text, expected] of [
    ['true', true],
    ['false', false],
    ['1', true],
    ['0', false],
    ['t', true],
    ['f', false],
    ['T', true],
    ['F', false],
    ['TRUE', true],
    ['FALSE', false],
    ['True', true],
    ['False', false],
  ] as const) {
    it(`-b=${text} sets the bool to ${expected}`, () => {
      const { fs, b } = tiny();
      parseOk(fs, [`-b=${text}`]);
      assert.equal(b.value, expected);
    });
  }

  it('a bare boolean is true, with one or two dashes', () => {
    for (const argv of [['-b'], ['--b']]) {
      const { fs, b } = tiny();
      parseOk(fs, argv);
      assert.equal(b.value, true);
    }
  });

  it('-b false does not consume false: it is the first positional and flags stop there', () => {
    const { fs, b, n } = tiny();
    assert.deepEqual(parseOk(fs, ['-b', 'false', '-n=5']), ['false', '-n=5']);
    assert.equal(b.value, true);
    assert.equal(n.value, 7);
    assert.equal(fs.isSet('n'), false);
  });

  it('a non-bool value may start with a dash or be empty', () => {
    const { fs, s, n } = tiny();
    parseOk(fs, ['-s', '-b', '-n', '-3']);
    assert.equal(s.value, '-b');
    assert.equal(n.value, -3);
    const other = tiny();
    parseOk(other.fs, ['-s=']);
    assert.equal(other.s.value, '');
    assert.equal(other.fs.isSet('s'), true);
  });

  it('only the first = separates name and value', () => {
    const { fs, s } = tiny();
    parseOk(fs, ['-s=a=b']);
    assert.equal(s.value, 'a=b');
  });

  it('stops at the first non-flag argument', () => {
    const { fs, n } = tiny();
    assert.deepEqual(parseOk(fs, ['-n=1', 'serve', '-n=2']), ['serve', '-n=2']);
    assert.equal(n.value, 1);
  });

  it('stops at a lone dash, which stays a positional', () => {
    const { fs, b } = tiny();
    assert.deepEqual(parseOk(fs, ['-', '-b']), ['-', '-b']);
    assert.equal(b.value, false);
  });

  it('stops after --, which is consumed', () => {
    const { fs, b } = tiny();
    assert.deepEqual(parseOk(fs, ['--', '-b', '--']), ['-b', '--']);
    assert.equal(b.value, false);
  });

  it('the last occurrence of a flag wins', () => {
    const { fs, n, b } = tiny();
    parseOk(fs, ['-n=1', '--n', '2', '-n=3', '-b', '-b=false']);
    assert.equal(n.value, 3);
    assert.equal(b.value, false);
    assert.equal(fs.isSet('b'), true);
  });

  for (const [text, expected] of [
    ['0x10', 16],
    ['0X1f', 31],
    ['0o17', 15],
    ['017', 15],
    ['0b101', 5],
    ['1_000', 1000],
    ['+8', 8],
    ['-0x10', -16],
  ] as const) {
    it(`ints accept Go syntax: ${text} = ${expected}`, () => {
      const { fs, n } = tiny();
      parseOk(fs, [`-n=${text}`]);
      assert.equal(n.value, expected);
    });
  }

  for (const [text, expected] of [
    ['1.5', 1.5],
    ['.5', 0.5],
    ['1e3', 1000],
    ['-2', -2],
    ['+Inf', Infinity],
    ['0x1p-2', 0.25],
  ] as const) {
    it(`floats accept Go syntax: ${text} = ${expected}`, () => {
      const fs = new FlagSet('t');
      const f = fs.float('f', 0, 'a float');
      parseOk(fs, ['-f', text]);
      assert.equal(f.value, expected);
    });
  }

  it('stringList: each occurrence replaces the list; an empty value keeps it (dskit)', () => {
    const fs = new FlagSet('t');
    const list = fs.stringList('l', ['d'], 'a list');
    parseOk(fs, ['-l=a,b', '-l', 'c,,e', '-l=', '-l=""']);
    assert.deepEqual(list.value, ['c', '', 'e']);
    const untouched = new FlagSet('t');
    const kept = untouched.stringList('l', ['d'], 'a list');
    parseOk(untouched, ['-l=']);
    assert.deepEqual(kept.value, ['d']);
  });

  it('a custom value type receives the previous value', () => {
    const fs = new FlagSet('t');
    const tags = fs.value<string[]>('tag', [], 'a repeatable tag', {
      parse: (text, current) => [...current, text],
      format: (value) => value.join(','),
    });
    parseOk(fs, ['-tag=a', '-tag', 'b']);
    assert.deepEqual(tags.value, ['a', 'b']);
  });
});

describe('FlagSet: help', () => {
  for (const argv of [['-h'], ['-help'], ['--help'], ['--h'], ['-help=1'], ['-server.port=1', '-h', '-nope']]) {
    it(`${argv.join(' ')} requests help`, () => {
      const { fs } = operatorFlags();
      const result = fs.parse(argv, {});
      assert.equal(result.kind, 'help');
      assert.equal(result.usage, fs.usage());
    });
  }

  it('-h is an ordinary flag when defined', () => {
    const fs = new FlagSet('t');
    const h = fs.bool('h', false, 'host mode');
    assert.deepEqual(parseOk(fs, ['-h']), []);
    assert.equal(h.value, true);
  });

  it('a flag error before -h wins', () => {
    const { fs } = operatorFlags();
    assert.equal(parseError(fs, ['-nope', '-h']), 'flag provided but not defined: -nope');
  });

  it('formats usage like Go PrintDefaults, plus environment variables', () => {
    const fs = new FlagSet('stateward');
    fs.bool('v', false, 'Verbose output.');
    fs.bool('server-tls.enabled', false, 'Enable the TLS server.');
    fs.bool('webhooks.update-ca-bundle', true, 'Patch the CA bundle.');
    fs.int('server.port', 8001, 'HTTP port.');
    fs.int('retries', 0, 'Retries.');
    fs.float('kubernetes.client-qps', 5, 'Client QPS.');
    fs.float('ratio', 0.5, 'A ratio.');
    fs.float('huge', 1e21, 'A huge number.');
    fs.string('kubernetes.cluster-domain', 'cluster.local.', 'Cluster domain.');
    fs.string('kubernetes.config-file', '', 'Path to the kubeconfig `file`, if any.');
    fs.string('kubernetes.namespace', '', 'Namespace to manage.', { env: 'NAMESPACE' });
    fs.duration('kubernetes.client-timeout', 5 * 60_000, 'Client timeout.');
    fs.duration('server-tls.request-timeout', 10_000, 'Request timeout.');
    fs.duration('long', 3_600_000, 'Long.');
    fs.duration('short', 5, 'Short.');
    fs.duration('frac', 1_500, 'Fractional.');
    fs.duration('none', 0, 'No default.');
    fs.promDuration('server-tls.self-signed-cert.expiration', 365 * 86_400_000, 'Certificate lifetime.');
    fs.stringList(
      'server.cluster-validation.http.excluded-paths',
      ['admission/no-downscale', 'admission/prepare-downscale'],
      'Paths exempt from validation.\nComma-separated.',
    );
    fs.enumString('log.level', 'debug', ['debug', 'info'], 'Log level.', { env: 'LOG_LEVEL' });
    fs.string('quote', 'say "hi"\n', 'Quoted.');
    assert.equal(
      fs.usage(),
      [
        'Usage of stateward:',
        '  -frac duration',
        '    \tFractional. (default 1.5s)',
        '  -huge float',
        '    \tA huge number. (default 1e+21)',
        '  -kubernetes.client-qps float',
        '    \tClient QPS. (default 5)',
        '  -kubernetes.client-timeout duration',
        '    \tClient timeout. (default 5m0s)',
        '  -kubernetes.cluster-domain string',
        '    \tCluster domain. (default "cluster.local.")',
        '  -kubernetes.config-file file',
        '    \tPath to the kubeconfig file, if any.',
        '  -kubernetes.namespace string',
        '    \tNamespace to manage. (env NAMESPACE)',
        '  -log.level string',
        '    \tLog level. (default "debug") (env LOG_LEVEL)',
        '  -long duration',
        '    \tLong. (default 1h0m0s)',
        '  -none duration',
        '    \tNo default.',
        '  -quote string',
        '    \tQuoted. (default "say \\"hi\\"\\n")',
        '  -ratio float',
        '    \tA ratio. (default 0.5)',
        '  -retries int',
        '    \tRetries.',
        '  -server-tls.enabled',
        '    \tEnable the TLS server.',
        '  -server-tls.request-timeout duration',
        '    \tRequest timeout. (default 10s)',
        '  -server-tls.self-signed-cert.expiration value',
        '    \tCertificate lifetime. (default 1y)',
        '  -server.cluster-validation.http.excluded-paths value',
        '    \tPaths exempt from validation.',
        '    \tComma-separated. (default admission/no-downscale,admission/prepare-downscale)',
        '  -server.port int',
        '    \tHTTP port. (default 8001)',
        '  -short duration',
        '    \tShort. (default 5ms)',
        '  -v\tVerbose output.',
        '  -webhooks.update-ca-bundle',
        '    \tPatch the CA bundle. (default true)',
        '',
      ].join('\n'),
    );
  });

  it('an unnamed flag set has a plain header', () => {
    const fs = new FlagSet('');
    fs.int('n', 0, 'n');
    assert.equal(fs.usage(), 'Usage:\n  -n int\n    \tn\n');
  });
});

describe('FlagSet: errors', () => {
  const cases: [string[], string][] = [
    [['---x'], 'bad flag syntax: ---x'],
    [['-=x'], 'bad flag syntax: -=x'],
    [['--=x'], 'bad flag syntax: --=x'],
    [['-x'], 'flag provided but not defined: -x'],
    [['--nope=1'], 'flag provided but not defined: -nope'],
    [['-server.port'], 'flag needs an argument: -server.port'],
    [['--server.port'], 'flag needs an argument: -server.port'],
    [['-server.port=abc'], 'invalid value "abc" for flag -server.port: parse error'],
    [['-server.port', '8.5'], 'invalid value "8.5" for flag -server.port: parse error'],
    [['-server.port='], 'invalid value "" for flag -server.port: parse error'],
    [['-server.port=a"b'], 'invalid value "a\\"b" for flag -server.port: parse error'],
    [
      ['-server.port=99999999999999999999'],
      'invalid value "99999999999999999999" for flag -server.port: value out of range',
    ],
    [['-kubernetes.client-qps=fast'], 'invalid value "fast" for flag -kubernetes.client-qps: parse error'],
    [['-kubernetes.client-qps=1e400'], 'invalid value "1e400" for flag -kubernetes.client-qps: value out of range'],
    [['-server-tls.enabled=x'], 'invalid boolean value "x" for -server-tls.enabled: parse error'],
    [['-server-tls.enabled='], 'invalid boolean value "" for -server-tls.enabled: parse error'],
    [['--use-zone-tracker=yes'], 'invalid boolean value "yes" for -use-zone-tracker: parse error'],
    [['-kubernetes.client-timeout=1'], 'invalid value "1" for flag -kubernetes.client-timeout: parse error'],
    [['-reconcile.interval', '1d'], 'invalid value "1d" for flag -reconcile.interval: parse error'],
    [
      ['-server-tls.self-signed-cert.expiration=1.5h'],
      'invalid value "1.5h" for flag -server-tls.self-signed-cert.expiration: unknown unit "." in duration "1.5h"',
    ],
    [
      ['-server-tls.self-signed-cert.expiration=1h1d'],
      'invalid value "1h1d" for flag -server-tls.self-signed-cert.expiration: not a valid duration string: "1h1d"',
    ],
    [
      ['-server-tls.self-signed-cert.expiration='],
      'invalid value "" for flag -server-tls.self-signed-cert.expiration: empty duration string',
    ],
    [['-log.level=trace'], 'invalid value "trace" for flag -log.level: must be one of debug, info, warn, error'],
    [['-log.format', 'JSON'], 'invalid value "JSON" for flag -log.format: must be one of logfmt, json'],
    [['-server.port=1', '-x', '-y'], 'flag provided but not defined: -x'],
  ];
  for (const [argv, message] of cases) {
    it(`${argv.join(' ')} → ${message}`, () => {
      const { fs } = operatorFlags();
      const result = fs.parse(argv, {});
      assert.deepEqual(result, { kind: 'error', message, usage: fs.usage() });
    });
  }

  it('refuses integers a JavaScript number cannot hold exactly (Go would accept them)', () => {
    const { fs } = operatorFlags();
    assert.equal(
      parseError(fs, ['-server.port=9007199254740992']),
      'invalid value "9007199254740992" for flag -server.port: value out of range',
    );
  });

  it("reports a custom type's own error text", () => {
    const fs = new FlagSet('t');
    fs.value('mode', 'a', 'mode', {
      parse: () => {
        throw new Error('modes are a or b');
      },
      format: String,
    });
    assert.equal(parseError(fs, ['-mode=c']), 'invalid value "c" for flag -mode: modes are a or b');
  });
});

describe('FlagSet: environment fallback', () => {
  function envFlags() {
    const fs = new FlagSet('t');
    return {
      fs,
      namespace: fs.string('kubernetes.namespace', 'default-ns', 'ns', { env: 'NAMESPACE' }),
      port: fs.int('server.port', 8001, 'port', { env: 'PORT' }),
      tls: fs.bool('server-tls.enabled', false, 'tls', { env: 'TLS' }),
    };
  }

  it('the command line beats the environment', () => {
    const { fs, namespace } = envFlags();
    parseOk(fs, ['-kubernetes.namespace=cli'], { NAMESPACE: 'env' });
    assert.equal(namespace.value, 'cli');
    assert.equal(namespace.source, 'command-line');
  });

  it('the environment beats the default and counts as set', () => {
    const { fs, namespace, port, tls } = envFlags();
    parseOk(fs, [], { NAMESPACE: 'mimir', PORT: '0x1f', TLS: 'true' });
    assert.deepEqual([namespace.value, port.value, tls.value], ['mimir', 31, true]);
    assert.equal(fs.isSet('kubernetes.namespace'), true);
    assert.equal(namespace.source, 'env');
  });

  it('an unset or empty variable leaves the default', () => {
    const { fs, namespace, port } = envFlags();
    parseOk(fs, [], { NAMESPACE: '', OTHER: 'x' });
    assert.equal(namespace.value, 'default-ns');
    assert.equal(port.value, 8001);
    assert.equal(fs.isSet('kubernetes.namespace'), false);
  });

  it('an invalid variable is an error naming the variable and the flag', () => {
    assert.equal(
      parseError(envFlags().fs, [], { PORT: 'http' }),
      'invalid value "http" for environment variable PORT (flag -server.port): parse error',
    );
    assert.equal(
      parseError(envFlags().fs, [], { TLS: 'yes' }),
      'invalid value "yes" for environment variable TLS (flag -server-tls.enabled): parse error',
    );
  });

  it('an invalid variable does not matter when the command line sets the flag', () => {
    const { fs, port } = envFlags();
    parseOk(fs, ['-server.port=1'], { PORT: 'http' });
    assert.equal(port.value, 1);
  });
});

describe('FlagSet: definition mistakes throw', () => {
  it('rejects redefinition', () => {
    const fs = new FlagSet('stateward');
    fs.int('server.port', 1, 'a');
    assert.throws(() => fs.string('server.port', '', 'b'), { message: 'stateward flag redefined: server.port' });
  });

  it('rejects names Go would reject', () => {
    const fs = new FlagSet('t');
    assert.throws(() => fs.bool('-b', false, ''), { message: 'flag "-b" begins with -' });
    assert.throws(() => fs.bool('a=b', false, ''), { message: 'flag "a=b" contains =' });
    assert.throws(() => fs.bool('', false, ''), /empty/);
  });

  it('rejects an enum default outside the allowed values', () => {
    const fs = new FlagSet('t');
    // @ts-expect-error the type system already refuses this default
    assert.throws(() => fs.enumString('log.level', 'trace', ['debug', 'info'], ''), /not one of debug, info/);
  });

  it('rejects a non-integer int default', () => {
    assert.throws(() => new FlagSet('t').int('n', 1.5, ''), /not a safe integer/);
  });

  it('rejects parsing twice and defining after parsing', () => {
    const fs = new FlagSet('t');
    fs.parse([], {});
    assert.throws(() => fs.parse([], {}), /parsed twice/);
    assert.throws(() => fs.int('late', 0, ''), /after flag set t was parsed/);
  });

  it('rejects isSet for an undefined flag', () => {
    assert.throws(() => new FlagSet('t').isSet('nope'), /has no flag nope/);
  });
});

describe('FlagSet: properties', () => {
  const kinds = ['int', 'float', 'string', 'duration', 'promDuration', 'enum', 'stringList'] as const;
  type Kind = (typeof kinds)[number];

  const validValue: Record<Kind, fc.Arbitrary<string>> = {
    int: fc.oneof(
      fc.integer().map(String),
      fc.integer({ min: 0 }).map((n) => '0x' + n.toString(16)),
    ),
    float: fc.double({ noNaN: true }).map(String),
    string: fc.string(),
    duration: fc.tuple(fc.nat(1000), fc.constantFrom('ns', 'us', 'ms', 's', 'm', 'h')).map(([n, u]) => `${n}${u}`),
    // Under 292 of any unit stays within Prometheus' ~292-year range.
    promDuration: fc
      .tuple(fc.nat(291), fc.constantFrom('ms', 's', 'm', 'h', 'd', 'w', 'y'))
      .map(([n, u]) => `${n}${u}`),
    enum: fc.constantFrom('a', 'b', 'c'),
    stringList: fc.array(fc.stringMatching(/^[a-z/]*$/)).map((items) => items.join(',')),
  };

  const table = fc.uniqueArray(
    fc.record({ name: fc.stringMatching(/^[a-z][a-z0-9.-]{0,12}$/), kind: fc.constantFrom(...kinds) }),
    { minLength: 1, maxLength: 6, selector: (flag) => flag.name },
  );

  function define(specs: readonly { name: string; kind: Kind }[]): { fs: FlagSet; handles: Flag<unknown>[] } {
    const fs = new FlagSet('p');
    const handles = specs.map(({ name, kind }): Flag<unknown> => {
      switch (kind) {
        case 'int':
          return fs.int(name, 0, '');
        case 'float':
          return fs.float(name, 0, '');
        case 'string':
          return fs.string(name, '', '');
        case 'duration':
          return fs.duration(name, 0, '');
        case 'promDuration':
          return fs.promDuration(name, 0, '');
        case 'enum':
          return fs.enumString(name, 'a', ['a', 'b', 'c'], '');
        case 'stringList':
          return fs.stringList(name, [], '');
      }
    });
    return { fs, handles };
  }

  function outcome(specs: readonly { name: string; kind: Kind }[], argv: string[]) {
    const { fs, handles } = define(specs);
    const result = fs.parse(argv, {});
    return { result, values: handles.map((h) => h.value), set: specs.map((s) => fs.isSet(s.name)) };
  }

  it('-name=value and -name value parse identically for non-boolean flags', () => {
    const scenario = table.chain((specs) =>
      fc.record({
        specs: fc.constant(specs),
        uses: fc.array(
          fc.nat(specs.length - 1).chain((index) =>
            fc.record({
              index: fc.constant(index),
              dashes: fc.constantFrom('-', '--'),
              value: fc.oneof(validValue[specs[index]!.kind], fc.string()),
            }),
          ),
          { maxLength: 6 },
        ),
        rest: fc.array(fc.string(), { maxLength: 2 }),
      }),
    );
    fc.assert(
      fc.property(scenario, ({ specs, uses, rest }) => {
        const joined = uses.map((u) => `${u.dashes}${specs[u.index]!.name}=${u.value}`);
        const split = uses.flatMap((u) => [`${u.dashes}${specs[u.index]!.name}`, u.value]);
        assert.deepEqual(outcome(specs, [...joined, '--', ...rest]), outcome(specs, [...split, '--', ...rest]));
      }),
    );
  });

  it('valid values always parse, and the last occurrence wins', () => {
    const scenario = table
      .chain((specs) =>
        fc.record({
          specs: fc.constant(specs),
          index: fc.nat(specs.length - 1),
        }),
      )
      .chain(({ specs, index }) =>
        fc.record({
          specs: fc.constant(specs),
          index: fc.constant(index),
          values: fc.array(validValue[specs[index]!.kind], { minLength: 1, maxLength: 3 }),
        }),
      );
    fc.assert(
      fc.property(scenario, ({ specs, index, values }) => {
        const name = specs[index]!.name;
        const many = outcome(
          specs,
          values.map((v) => `-${name}=${v}`),
        );
        const last = outcome(specs, [`-${name}`, values.at(-1)!]);
        assert.equal(many.result.kind, 'ok');
        // An empty list value keeps the previous one (dskit), so compare only non-empty lists.
        if (specs[index]!.kind !== 'stringList' || values.at(-1) !== '') assert.deepEqual(many.values, last.values);
        assert.equal(many.set[index], true);
      }),
    );
  });
});
