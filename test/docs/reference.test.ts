// The README's configuration reference against the code: every flag and
// its default, every label and annotation key. The metrics table is checked
// against a running operator in reference.int.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { flagRows, parseFlagRow, parseHelp, statewardHelp, zeroDefault } from './flags.ts';
import { keyOf, keysIn, keysOfCell, NOT_KEYS, sourceLiterals, stringLiterals } from './keys.ts';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { codeSpans, readRepoFile, ROOT, sectionTable } from './readme.ts';

const readme = readRepoFile('README.md');

describe('README flag table', { timeout: 120000 }, () => {
  const help = statewardHelp();
  const rows = flagRows(sectionTable(readme, '`stateward` flags', ['flag', 'default', 'meaning']));
  const documented = new Map(rows.flatMap((row) => row.flags.map((f) => [f, row] as const)));

  it('reads -help', () => {
    assert.equal(help.status, 0, help.text);
    assert.match(help.text, /^Usage of stateward:\n/);
    // A sanity floor, so a broken parser cannot make the checks below vacuous.
    assert.ok(help.flags.size >= 40, `only ${help.flags.size} flags parsed from -help`);
    assert.deepEqual(help.flags.get('server.port'), {
      name: 'server.port',
      type: 'int',
      default: '8001',
      env: undefined,
      usage: 'Port for the HTTP server: /ready, /healthz, /metrics. (default 8001)',
    });
  });

  it('lists every flag -help prints', () => {
    const missing = [...help.flags.keys()].filter((f) => !documented.has(f));
    assert.deepEqual(missing, [], `flags missing from the README table: ${missing.map((f) => `-${f}`).join(', ')}`);
  });

  it("lists no flag the code lacks (-help itself is the flag package's)", () => {
    const unknown = [...documented.keys()].filter((f) => !help.flags.has(f));
    assert.deepEqual(unknown, ['help'], 'flags in the README table that stateward does not define');
  });

  it('gives each flag its default as -help prints it', () => {
    const wrong: string[] = [];
    for (const row of rows) {
      for (const name of row.flags) {
        const flag = help.flags.get(name);
        if (!flag) continue;
        const code = flag.default ?? zeroDefault(flag);
        const readmeDefault = row.defaults.get(name);
        if (row.special) {
          // Words stand for a default computed at run time; a literal default must be shown as such.
          if (flag.default !== undefined)
            wrong.push(
              `-${name}: the README describes its default in words, -help prints ${JSON.stringify(flag.default)}`,
            );
        } else if (row.empty) {
          if (!(flag.type === '' && flag.default === undefined))
            wrong.push(`-${name}: no default in the README, -help prints ${JSON.stringify(code)}`);
        } else if (readmeDefault !== code) {
          wrong.push(`-${name}: README ${JSON.stringify(readmeDefault)}, -help ${JSON.stringify(code)}`);
        }
      }
    }
    assert.deepEqual(wrong, []);
  });

  it("names each flag's environment variable, and no other", () => {
    const wrong: string[] = [];
    for (const row of rows) {
      for (const name of row.flags) {
        const flag = help.flags.get(name);
        if (!flag) continue;
        const named = row.env.get(name) ?? [];
        const expected = flag.env === undefined ? [] : [flag.env];
        if (named.join() !== expected.join())
          wrong.push(`-${name}: README names ${JSON.stringify(named)}, -help ${JSON.stringify(expected)}`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  it('parses rows with several flags, environment variables and defaults', () => {
    const two = parseFlagRow([
      '`-restart-check-period` (env `RESTART_CHECK_PERIOD`), `-ignored-errors` (env `IGNORED_ERRORS`)',
      '`500`, `""`',
      'x',
    ]);
    assert.deepEqual(
      [...two.defaults],
      [
        ['restart-check-period', '500'],
        ['ignored-errors', ''],
      ],
    );
    assert.deepEqual(
      [...two.env],
      [
        ['restart-check-period', ['RESTART_CHECK_PERIOD']],
        ['ignored-errors', ['IGNORED_ERRORS']],
      ],
    );
    const shared = parseFlagRow(['`-server-tls.cert-file`, `-server-tls.key-file`', '`""`', 'x']);
    assert.deepEqual(
      [...shared.defaults],
      [
        ['server-tls.cert-file', ''],
        ['server-tls.key-file', ''],
      ],
    );
    const special = parseFlagRow(['`-kubernetes.namespace`', '(required; env `POD_NAMESPACE`)', 'x']);
    assert.equal(special.special, true);
    assert.deepEqual(special.env.get('kubernetes.namespace'), ['POD_NAMESPACE']);
    assert.throws(() => parseFlagRow(['`-a`, `-b`, `-c`', '`1`, `2`', 'x']), /2 literals for 3 flags/);
  });

  it('parses Go help text: quoted defaults, env suffixes, defaults mentioned inside the usage', () => {
    const flags = parseHelp(
      [
        'Usage of x:',
        '  -a string',
        '    \tA thing. (default "x y") (env A_ENV)',
        '  -b',
        '    \tA switch.',
        '  -c string',
        '    \tName (default x.<namespace>.svc); more words.',
        '  -d duration',
        '    \tTwo',
        '    \tlines. (default 1m0s)',
      ].join('\n'),
    );
    assert.deepEqual(
      [...flags.values()].map((f) => [f.name, f.type, f.default, f.env]),
      [
        ['a', 'string', 'x y', 'A_ENV'],
        ['b', '', undefined, undefined],
        ['c', 'string', undefined, undefined],
        ['d', 'duration', '1m0s', undefined],
      ],
    );
  });
});

describe('README labels and annotations table', { timeout: 120000 }, () => {
  const table = sectionTable(readme, 'Labels and annotations', ['key', 'kind, on', 'value', 'meaning']);
  const documented = new Set(table.rows.flatMap((row) => keysOfCell(codeSpans(row[0]!))));
  const literals = sourceLiterals();
  const used = keysIn(literals);

  it('finds the keys the code uses', () => {
    // A floor and a few known ones, so a broken scan cannot pass vacuously.
    assert.ok(used.size >= 30, `only ${used.size} keys found`);
    for (const key of [
      'rollout-group',
      'rollout-max-unavailable',
      'grafana.com/no-downscale',
      'com.xing.deployment-restart',
      'reloader.stakater.com/auto',
      'stateward.dev/config-restart-ondelete',
      'cao.couchbase.com/reschedule',
    ]) {
      assert.ok(used.has(key), `${key} not found in src/`);
    }
    for (const key of NOT_KEYS.keys())
      assert.ok(used.has(key), `${key} is listed as not a key but no longer occurs; drop it from NOT_KEYS`);
  });

  it('documents every key the code uses', () => {
    const missing = [...used]
      .filter(([key]) => !NOT_KEYS.has(key) && !documented.has(key))
      .map(([key, where]) => `${key} (${[...where].join(', ')})`);
    assert.deepEqual(missing, [], 'keys missing from the README labels table');
  });

  it('documents no key the code does not use', () => {
    // Any shape counts here: `controller-revision-hash` is Kubernetes' own label, read by the code.
    const inCode = (key: string) => literals.has(key) || [...literals.keys()].some((l) => l.startsWith(`${key}=`));
    const stale = [...documented].filter((key) => !inCode(key));
    assert.deepEqual(
      stale,
      [],
      'keys in the README labels table that no string literal of src/ nor deploy/webhooks/ holds',
    );
  });

  it('reads keys only from real string literals, and abbreviations in cells', () => {
    const literals = stringLiterals(
      [
        '// grafana.com/in-a-comment',
        "const a = 'grafana.com/no-downscale';",
        'const b = `stateward.dev/x=${1}`;',
        "const c = 'cao.couchbase.com/reschedule=true';",
        "const d = 'the label grafana.com/in-a-message';",
      ].join('\n'),
    );
    assert.deepEqual(literals.map(keyOf).filter(Boolean), [
      'grafana.com/no-downscale',
      'stateward.dev/x',
      'cao.couchbase.com/reschedule',
    ]);
    assert.deepEqual(keysOfCell(['grafana.com/a-from-resource-name', '-kind', '-api-version']), [
      'grafana.com/a-from-resource-name',
      'grafana.com/a-from-resource-kind',
      'grafana.com/a-from-resource-api-version',
    ]);
  });
});

describe('README custom resources table', () => {
  it('names every CRD in deploy/crds with its plural, short names and group/version', () => {
    const table = sectionTable(readme, 'Custom resources', [
      'kind (plural, short name)',
      'group/version',
      'what it configures',
    ]);
    const documented = table.rows.map((row) => `${codeSpans(row[0]!).join(' ')} ${codeSpans(row[1]!).join(' ')}`);
    const shipped = readdirSync(join(ROOT, 'deploy/crds'))
      .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
      .map((f) => parse(readRepoFile(`deploy/crds/${f}`)) as Crd)
      .map((crd) => {
        const { group, names, versions } = crd.spec;
        const served = versions.filter((v) => v.served).map((v) => `${group}/${v.name}`);
        return `${[names.kind, names.plural, ...(names.shortNames ?? [])].join(' ')} ${served.join(' ')}`;
      });
    assert.deepEqual([...documented].sort(), [...shipped].sort());
  });
});

interface Crd {
  spec: {
    group: string;
    names: { kind: string; plural: string; shortNames?: string[] };
    versions: { name: string; served: boolean }[];
  };
}
