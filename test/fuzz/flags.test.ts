// Fuzzing the command line: random argv arrays through main() — every
// registered flag with random values, bare words, `--`, `-`, `=`, unicode —
// and random values in the flags' environment variables. main() resolves to
// 0, 1 or 2, never throws; 2 always comes with a message naming the problem;
// 1 with a one-line reason and no stack trace.
//
// Nothing may connect anywhere: the environment never holds a kubeconfig or
// the in-cluster variables, and -kubernetes.config-file only ever names a
// file that is not a kubeconfig, so the operator stops at loading its
// configuration. Should it start anyway, the SIGTERM handlers it registered
// are called at the deadline and the test fails.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { main } from '../../src/main.ts';
import { runStatus } from '../../src/status/cli.ts';
import { runDoctor } from '../../src/doctor/cli.ts';
import { mostly, nastyString, params } from './support.ts';

const DEADLINE_MS = 10_000;

interface Run {
  code: number;
  out: string;
  err: string;
}

/** Runs `main` (or a client command) with the io it needs, failing at the deadline and stopping whatever started. */
async function run(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  command: (argv: readonly string[], io: Parameters<typeof main>[1]) => Promise<number> = main,
): Promise<Run> {
  let out = '';
  let err = '';
  const stops: (() => void)[] = [];
  const io = {
    out: (t: string) => (out += t),
    err: (t: string) => (err += t),
    env,
    signals: { on: (_signal: 'SIGTERM' | 'SIGINT', handler: () => void) => void stops.push(handler) },
    isTTY: false,
    columns: 80,
  };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'deadline'>((resolve) => {
    timer = setTimeout(() => resolve('deadline'), DEADLINE_MS);
  });
  const settled = await Promise.race([command(argv, io).then((code) => ({ code })), deadline]);
  clearTimeout(timer);
  if (settled === 'deadline') {
    for (const stop of stops) stop();
    assert.fail(`did not return within ${DEADLINE_MS} ms: ${JSON.stringify(argv)}; stderr: ${err.slice(0, 500)}`);
  }
  assert.deepEqual(stops, [], `the operator got as far as waiting for signals: ${JSON.stringify(argv)}`);
  return { code: settled.code, out, err };
}

/** The flags of the operator's command line, read from its -help (name, and the value type shown there). */
async function registeredFlags(): Promise<{ name: string; type: string }[]> {
  const help = await run(['-help'], {});
  return [...help.err.matchAll(/^ {2}-(\S+)(?: (\S+))?/gm)].map((m) => ({ name: m[1]!, type: m[2] ?? 'bool' }));
}

/** What a flag of each type may be given: good values, edge values, nonsense. */
function valueFor(type: string): fc.Arbitrary<string> {
  const common = [nastyString, fc.constantFrom('', ' ', '-1', '0', '=', '--', '-', 'true', '1e309', '0x10', '\u0000')];
  const good: Record<string, readonly string[]> = {
    bool: ['true', 'false', '1', '0', 'T', 'F', 'yes'],
    int: ['0', '1', '8443', '65536', '-1', '0x1f', '1_000', '010', '9223372036854775808'],
    float: ['5', '0.5', '-1', 'NaN', 'Inf', '1e400', '0x1p-2'],
    duration: ['10s', '1h30m', '0', '-1s', '1.5h', '300ms', '5', '1d', '2562048h'],
    string: ['ns', 'json', 'logfmt', 'debug', 'info', 'a,b', '/nonexistent/kubeconfig', 'https://127.0.0.1:1', ''],
    value: ['a,b', '', ',', 'ns1,,ns2', '24h', '-1h', 'x'],
  };
  return fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom(...(good[type] ?? good.string!)) },
    { weight: 1, arbitrary: fc.oneof(...common) },
  );
}

/** A word of argv: a flag in one of Go's spellings, a stray word, or a separator. */
function argvWord(flags: { name: string; type: string }[]): fc.Arbitrary<string[]> {
  const flag = fc.constantFrom(...flags);
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .tuple(flag, fc.constantFrom('-', '--'), valueFor('string'))
        .chain(([f, dashes]) => valueFor(f.type).map((v) => [`${dashes}${f.name}=${v}`])),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(flag, fc.constantFrom('-', '--'))
        .chain(([f, dashes]) =>
          valueFor(f.type).map((v) => (f.type === 'bool' ? [`${dashes}${f.name}`] : [`${dashes}${f.name}`, v])),
        ),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom<string[]>(
        ['--'],
        ['-'],
        ['='],
        ['-='],
        ['---x'],
        ['-h'],
        ['--help'],
        ['-version'],
        ['status'],
        ['doctor'],
        ['word'],
        ['-no-such-flag'],
        ['-kubernetes.namespace'],
      ),
    },
    { weight: 1, arbitrary: nastyString.map((s) => [s]) },
  );
}

/** The variables flags fall back on, and ones that would point at a cluster (never set here). */
const envArb = fc.record(
  {
    POD_NAMESPACE: mostly('mimir', '', 'bad/ns', '\u00e9'),
    POD_NAME: nastyString,
    IGNORED_ERRORS: nastyString,
    RESTART_CHECK_PERIOD: fc.constantFrom('5', '-1', 'x', ''),
    RESTART_GRACE_PERIOD: fc.constantFrom('10', 'NaN', ''),
  },
  { requiredKeys: [] },
);

/** The first line of a usage error: a specific problem, naming a flag (or the word "flag"). */
function checkUsageError(result: Run, flags: { name: string }[]): void {
  const first = result.err.split('\n')[0] ?? '';
  assert.ok(
    first.trim() !== '' && !first.startsWith('Usage'),
    `exit 2 without a message: ${JSON.stringify(result.err.slice(0, 300))}`,
  );
  // A first word that names no command is answered as one (src/cli/commandline.ts).
  const names =
    flags.some((f) => first.includes(`-${f.name}`)) || /flag|-reschedule\.\*|argument|unknown command/.test(first);
  assert.ok(names, `exit 2 with a message naming no flag: ${JSON.stringify(first)}`);
}

function checkNoStack(result: Run): void {
  assert.doesNotMatch(result.err, /\n\s+at .+:\d+:\d+\)?\n/, `a stack trace: ${result.err.slice(0, 800)}`);
}

describe('fuzz: the operator command line', { timeout: 120_000 }, () => {
  let flags: { name: string; type: string }[] = [];
  let dir = '';
  before(async () => {
    flags = await registeredFlags();
    assert.ok(flags.length > 40, `read ${flags.length} flags from -help`);
    dir = await mkdtemp(join(tmpdir(), 'stateward-fuzz-flags-'));
    await writeFile(
      join(dir, 'not-a-kubeconfig'),
      'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\ncurrent-context: none\n',
    );
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('resolves to 0, 1 or 2 for any argv and environment; 2 names the problem; no stack trace', async () => {
    const outcomes: Record<number, number> = { 0: 0, 1: 0, 2: 0 };
    const argvArb = fc.array(argvWord(flags), { maxLength: 8 }).map((words) => words.flat());
    await fc.assert(
      fc.asyncProperty(argvArb, envArb, fc.boolean(), async (argv, env, pointAtFile) => {
        // Half the time, a kubeconfig that exists but names no cluster: the furthest the operator can get.
        const args = pointAtFile
          ? [
              ...argv.filter((a) => !a.includes('kubernetes.config-file') && !a.includes('kubernetes.api-url')),
              `-kubernetes.config-file=${join(dir, 'not-a-kubeconfig')}`,
              '-kubernetes.api-url=https://127.0.0.1:1',
            ]
          : argv;
        // HOME without a kubeconfig: `status` and `doctor` as the first word must find none either.
        const result = await run(args, { ...env, HOME: '/nonexistent-home' });
        assert.ok([0, 1, 2].includes(result.code), `exit ${result.code}`);
        checkNoStack(result);
        if (result.code === 2) checkUsageError(result, flags);
        if (result.code === 1) assert.ok(result.err.trim() !== '', 'exit 1 says why');
        if (result.code === 0)
          assert.ok(
            /Usage of|stateward \d/.test(result.err + result.out),
            'exit 0 only for -help, -version or a client command',
          );
        outcomes[result.code] = (outcomes[result.code] ?? 0) + 1;
      }),
      params(1000, 31),
    );
    // Each outcome was reached (the property is not passing on one branch only).
    assert.ok(outcomes[0]! > 0 && outcomes[1]! > 0 && outcomes[2]! > 0, JSON.stringify(outcomes));
  });
});

describe('fuzz: the status and doctor command lines', { timeout: 120_000 }, () => {
  it('resolve to 0, 1 or 2 for any argv, without a kubeconfig; 2 names the problem; no stack trace', async () => {
    const statusFlags = [
      'n',
      'namespace',
      'A',
      'all-namespaces',
      'o',
      'output',
      'watch',
      'interval',
      'kubeconfig',
      'context',
    ].map((name) => ({
      name,
      type: ['A', 'all-namespaces', 'watch'].includes(name) ? 'bool' : name === 'interval' ? 'duration' : 'string',
    }));
    const doctorFlags = [
      ...statusFlags.filter((f) => f.name !== 'watch' && f.name !== 'interval'),
      { name: 'operator-namespace', type: 'string' },
      { name: 'request-timeout', type: 'duration' },
    ];
    const argvArb = (fs: typeof statusFlags) =>
      fc.array(argvWord(fs), { maxLength: 6 }).map((w) => w.flat().filter((a) => !/^--?kubeconfig(=|$)/.test(a)));
    for (const [name, command, fs] of [
      ['status', runStatus, statusFlags],
      ['doctor', runDoctor, doctorFlags],
    ] as const) {
      await fc.assert(
        fc.asyncProperty(argvArb([...fs]), async (argv) => {
          // HOME without a kubeconfig and no KUBECONFIG: nothing to connect to.
          const result = await run(argv, { HOME: '/nonexistent-home' }, command);
          assert.ok([0, 1, 2].includes(result.code), `${name}: exit ${result.code}`);
          checkNoStack(result);
          if (result.code === 2) checkUsageError(result, fs);
          if (result.code === 1)
            assert.match(
              result.err,
              /no kubeconfig found|kubeconfig|context/,
              `${name}: exit 1 says why: ${result.err.slice(0, 300)}`,
            );
        }),
        params(400, name === 'status' ? 32 : 33),
      );
    }
  });
});
