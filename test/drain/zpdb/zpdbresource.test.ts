// ZoneAwarePodDisruptionBudget parsing and the budget's pure questions.
// Ports rollout-operator's pkg/zpdb/config_test.go, config_cache_test.go
// (selector matching) and pkg/admission/zpdb_validating_webhook_test.go.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  budgetReplicas,
  findZpdbForPod,
  invalidZpdb,
  invalidZpdbCovers,
  invalidZpdbMessage,
  maxUnavailableForReplicas,
  maxUnavailablePods,
  parseZpdb,
  podPartition,
  zpdbResource,
  zpdbSelects,
  type ZpdbConfig,
} from '../../../src/drain/zpdb/zpdbresource.ts';
import { zpdbValidationHandler } from '../../../src/drain/zpdb/zpdbvalidation.ts';
import { serveAdmission, type AdmissionResponseV1 } from '../../../src/runtime/admission/admission.ts';
import type { Pod, StatefulSet } from '../../../src/runtime/kube/types.ts';

const KIND = 'ZoneAwarePodDisruptionBudget';

function zpdb(
  spec: Record<string, unknown>,
  metadata: Record<string, unknown> = { name: 'test-zpdb', namespace: 'ns', generation: 1 },
): Record<string, unknown> {
  return {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: KIND,
    metadata,
    spec: { selector: { matchLabels: { 'rollout-group': 'test' } }, ...spec },
  };
}

function config(spec: Record<string, unknown>, metadata?: Record<string, unknown>): ZpdbConfig {
  const r = parseZpdb(zpdb(spec, metadata));
  assert.ok('config' in r, JSON.stringify(r));
  return r.config;
}

function error(obj: unknown): string {
  const r = parseZpdb(obj);
  assert.ok('error' in r, `expected an error, got ${JSON.stringify(r)}`);
  return r.error;
}

function sts(specReplicas: number | undefined, statusReplicas: number): StatefulSet {
  return {
    metadata: { name: 'test-sts' },
    spec: {
      ...(specReplicas !== undefined ? { replicas: specReplicas } : {}),
      selector: {},
      serviceName: '',
      template: {},
    },
    status: { replicas: statusReplicas },
  };
}

function pod(name: string, labels: Record<string, string> = {}, namespace = 'ns'): Pod {
  return { metadata: { name, namespace, uid: `${name}-uid`, labels } };
}

describe('zpdb resource', { timeout: 10000 }, () => {
  it('has rollout-operator CRD names', () => {
    assert.deepEqual(zpdbResource, {
      group: 'rollout-operator.grafana.com',
      version: 'v1',
      resource: 'zoneawarepoddisruptionbudgets',
      kind: KIND,
      namespaced: true,
    });
  });
});

describe('max unavailable (TestMaxUnavailable)', { timeout: 10000 }, () => {
  const three = sts(3, 3);

  it('a count is used as is, 0 included', () => {
    assert.equal(maxUnavailablePods({ maxUnavailable: { kind: 'count', value: 0 } }, three), 0);
    assert.equal(maxUnavailablePods({ maxUnavailable: { kind: 'count', value: 1 } }, three), 1);
  });

  it('a percentage rounds down, never below 1', () => {
    const pct = (value: number) => ({ maxUnavailable: { kind: 'percentage' as const, value } });
    assert.equal(maxUnavailablePods(pct(100), three), 3);
    assert.equal(maxUnavailablePods(pct(1), three), 1);
    assert.equal(maxUnavailablePods(pct(75), three), 2);
    assert.equal(maxUnavailablePods(pct(0), three), 0, '0% = no voluntary evictions');
  });

  it('a percentage applies to the lower of spec and status replicas; 0 replicas → 0', () => {
    const half = { maxUnavailable: { kind: 'percentage' as const, value: 50 } };
    assert.equal(maxUnavailablePods(half, sts(10, 6)), 3);
    assert.equal(maxUnavailablePods(half, sts(10, 20)), 5);
    assert.equal(maxUnavailablePods(half, sts(10, 0)), 0);
    assert.equal(budgetReplicas(sts(undefined, 5)), 0, 'unset spec.replicas → 0, as rollout-operator');
  });

  it('property: a percentage budget is within [1, replicas] and never above the exact share, except for the floor of 1', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 500 }), (percentage, replicas) => {
        const n = maxUnavailableForReplicas({ maxUnavailable: { kind: 'percentage', value: percentage } }, replicas);
        assert.ok(n >= 1 && n <= replicas);
        if (n > 1) assert.ok(n <= (percentage * replicas) / 100 && n + 1 > (percentage * replicas) / 100);
        assert.ok(
          maxUnavailableForReplicas({ maxUnavailable: { kind: 'percentage', value: percentage } }, replicas + 1) >= n,
          'monotonic in replicas',
        );
      }),
    );
  });
});

describe('pod partition', { timeout: 10000 }, () => {
  it('extracts the group from the whole pod name (TestPodPartitionZoneMatch)', () => {
    const c = config({ podNamePartitionRegex: '[a-z\\-]+-(zone-[a-z]-[0-9]+)' });
    for (const name of ['ingester-zone-a-0', 'test-app-zone-a-0']) assert.equal(podPartition(c, name), 'zone-a-0');
    for (const name of ['', 'ingester-zone-a', 'test-app-1']) {
      assert.deepEqual(podPartition(c, name), {
        error: 'failed to extract partition from pod Name regular expression',
      });
    }
  });

  it('uses the configured group when an optional group comes first (TestOptionalRegexGrouping)', () => {
    const c = config({ podNamePartitionRegex: '[a-z\\-]+-zone-[a-z]-(partition\\-)?([0-9]+)', podNameRegexGroup: 2 });
    for (const name of ['ingester-zone-a-5', 'ingester-zone-a-partition-5'])
      assert.equal(podPartition(c, name), '5', name);
    for (const name of ['', 'ingester-zone-a', 'test-app-1'])
      assert.ok(typeof podPartition(c, name) === 'object', name);
  });

  it('group 2 with an optional prefix group (TestPodPartitionZoneMatchWithGrouping, TestRegexGrouping)', () => {
    const c = config({ podNamePartitionRegex: 'ingester(-foo)?-zone-[a-z]-([0-9]+)', podNameRegexGroup: 2 });
    assert.equal(c.partition?.group, 2);
    assert.equal(podPartition(c, 'ingester-foo-zone-a-0'), '0');
    assert.equal(podPartition(c, 'ingester-zone-a-1'), '1');
    assert.ok(typeof podPartition(c, 'foo') === 'object');
  });

  it('defaults the group to 1 (TestRegexGroupingDefault)', () => {
    const c = config({ podNamePartitionRegex: 'ingester-zone-[a-z]-([0-9]+)' });
    assert.equal(c.partition?.group, 1);
    assert.equal(podPartition(c, 'ingester-zone-b-7'), '7');
  });

  it('is undefined in zone mode (no regex, or an empty one)', () => {
    assert.equal(podPartition(config({}), 'ingester-zone-a-0'), undefined);
    assert.equal(
      podPartition(config({ podNamePartitionRegex: '', podNameRegexGroup: 5 }), 'ingester-zone-a-0'),
      undefined,
      'group not checked without a regex',
    );
  });

  it('anchors every branch of an alternation (rollout-operator anchors only the outer ones)', () => {
    const c = config({ podNamePartitionRegex: 'foo-([0-9]+)|bar-([0-9]+)', podNameRegexGroup: 1 });
    assert.equal(podPartition(c, 'foo-1'), '1');
    assert.ok(typeof podPartition(c, 'xfoo-1') === 'object');
    assert.ok(typeof podPartition(c, 'foo-1x') === 'object');
  });

  it('reads Go syntax: (?P<name>), \\z, a leading (?i)', () => {
    assert.equal(
      podPartition(config({ podNamePartitionRegex: 'ingester-zone-[a-z]-(?P<p>[0-9]+)' }), 'ingester-zone-a-3'),
      '3',
    );
    assert.equal(podPartition(config({ podNamePartitionRegex: 'ingester-([0-9]+)\\z' }), 'ingester-4'), '4');
    assert.equal(podPartition(config({ podNamePartitionRegex: '(?i)INGESTER-([0-9]+)' }), 'ingester-4'), '4');
  });

  it('accepts ([a-z]+-)*zone-([a-z])-(\\d+) (rollout-operator does; was refused as a backtracking risk) and finds the partition of any name', () => {
    const byOrdinal = config({ podNamePartitionRegex: '([a-z]+-)*zone-([a-z])-(\\d+)', podNameRegexGroup: 3 });
    assert.equal(byOrdinal.partition?.regex.numSubexp, 3);
    assert.equal(podPartition(byOrdinal, 'ingester-zone-a-0'), '0');
    assert.equal(podPartition(byOrdinal, 'mimir-ingester-zone-b-12'), '12');
    assert.equal(podPartition(byOrdinal, 'zone-c-3'), '3');
    for (const name of ['ingester-zone-a-x', 'ingester-zone-ab-0', 'Ingester-zone-a-0', 'ingester-zone-a-0-'])
      assert.deepEqual(
        podPartition(byOrdinal, name),
        { error: 'failed to extract partition from pod Name regular expression' },
        name,
      );
    const byZone = config({ podNamePartitionRegex: '([a-z]+-)*zone-([a-z])-(\\d+)', podNameRegexGroup: 2 });
    assert.equal(podPartition(byZone, 'mimir-ingester-zone-b-12'), 'b');
    assert.match(
      error(zpdb({ podNamePartitionRegex: '([a-z]+-)*zone-([a-z])-(\\d+)' })),
      /requires podNameRegexGroup to be set$/,
    );
  });

  it('accepts patterns a backtracking engine would take exponential time on, and answers in linear time', () => {
    for (const regex of [
      '(a*)*-([0-9]+)',
      '(?:(?:a|aa)+)+-(\\d+)',
      '(.*)-zone-.*-(\\d+)',
      '((a+)+)+b',
      '(a|a)*(a?){20}(b)',
    ]) {
      const c = config({ podNamePartitionRegex: regex, podNameRegexGroup: 1 });
      const started = performance.now();
      for (let n = 200; n <= 253; n++) podPartition(c, 'a'.repeat(n - 1) + '!');
      assert.ok(performance.now() - started < 2_000, `${regex}: ${performance.now() - started} ms`);
    }
  });

  it("finds Go's submatches, not a backtracking engine's: a repeated group keeps its last iteration", () => {
    // JavaScript resets a group inside a repetition on each iteration: /^(?:(?:(a)|b)+)$/.exec('ab')[1] is undefined.
    assert.equal(podPartition(config({ podNamePartitionRegex: '(?:(a)|b)+' }), 'ab'), 'a');
    assert.equal(
      podPartition(config({ podNamePartitionRegex: '(?U)(a+)(a*)', podNameRegexGroup: 1 }), 'aaa'),
      'a',
      'ungreedy flag',
    );
    assert.equal(
      podPartition(config({ podNamePartitionRegex: '(?P<n>[a-z]+)-(?P<n>\\d+)', podNameRegexGroup: 2 }), 'ingester-7'),
      '7',
      'a name on two groups, as Go allows',
    );
  });
});

describe('regex validation (TestBadRegex)', { timeout: 10000 }, () => {
  const regexError = (regex: unknown, group?: unknown) =>
    error(zpdb({ podNamePartitionRegex: regex, ...(group !== undefined ? { podNameRegexGroup: group } : {}) }));

  it("an unparsable regex, in Go's words", () => {
    assert.equal(
      regexError('(a bad regex['),
      'invalid value: regex is not valid, got error parsing regexp: missing closing ]: `[`',
    );
    assert.equal(
      regexError('([bad_regex'),
      'invalid value: regex is not valid, got error parsing regexp: missing closing ]: `[bad_regex`',
    );
    assert.equal(
      regexError('(a)**'),
      'invalid value: regex is not valid, got error parsing regexp: invalid nested repetition operator: `**`',
    );
  });

  it('what Go refuses: lookaround, backreferences, \\Z', () => {
    assert.equal(
      regexError('(?=x)(a)'),
      'invalid value: regex is not valid, got error parsing regexp: invalid or unsupported Perl syntax: `(?=`',
    );
    assert.equal(
      regexError('(a)\\1'),
      'invalid value: regex is not valid, got error parsing regexp: invalid escape sequence: `\\1`',
    );
    assert.equal(
      regexError('(a)\\Z'),
      'invalid value: regex is not valid, got error parsing regexp: invalid escape sequence: `\\Z`',
    );
  });

  it('longer than 1024 characters (pod names are at most 253)', () => {
    assert.equal(
      regexError(`(${'a'.repeat(1100)})`),
      'invalid value: regex is not valid, got error parsing regexp: expression too large (longer than 1024 characters)',
    );
  });

  it('no capture group', () => {
    assert.equal(
      regexError('ingester-zone-[a-z]-[0-9]+'),
      'invalid value: regex is not valid, got regular expression requires at least one subexpression',
    );
  });

  it('several groups without podNameRegexGroup', () => {
    assert.equal(
      regexError('ingester-zone-([a-z])-([0-9]+)'),
      'invalid value: regex is not valid, got regular expression has multiple subexpressions and requires podNameRegexGroup to be set',
    );
  });

  it('a group past the last one', () => {
    assert.equal(
      regexError('ingester-zone-([a-z])-([0-9]+),$10', 10),
      'invalid value: regex is not valid, got regular expression subexpression index out of range',
    );
  });

  it('a group below 1 (rollout-operator accepts 0, and panics on a negative one)', () => {
    assert.equal(
      regexError('ingester-([0-9]+)', 0),
      'invalid value: regex is not valid, got regular expression subexpression index out of range',
    );
    assert.equal(
      regexError('ingester-([0-9]+)', -1),
      'invalid value: regex is not valid, got regular expression subexpression index out of range',
    );
  });

  it('wrong types', () => {
    assert.equal(
      regexError(5),
      'invalid value: regex is not valid, got failed to extract regex value from config field podNamePartitionRegex',
    );
    assert.equal(
      regexError('a-([0-9]+)', '1'),
      'invalid value: regex is not valid, got failed to extract group value from config field podNameRegexGroup',
    );
  });

  it('Go syntax JavaScript would misread is read as Go reads it (was: refused)', () => {
    const partition = (regex: string, name: string) => podPartition(config({ podNamePartitionRegex: regex }), name);
    assert.equal(partition('[[:alpha:]]+-([0-9]+)', 'ingester-3'), '3');
    assert.equal(partition('a-[x[:digit:]]-([0-9]+)', 'a-7-3'), '3');
    assert.equal(partition('\\Qa.b\\E-([0-9]+)', 'a.b-3'), '3');
    assert.ok(typeof partition('\\Qa.b\\E-([0-9]+)', 'axb-3') === 'object', '\\Q…\\E is literal');
    assert.equal(partition('\\pL+-([0-9]+)', 'ingester-3'), '3');
    assert.equal(partition('(?U)a+(b)', 'aab'), 'b');
  });
});

describe('parseZpdb (TestParseAndValidate)', { timeout: 10000 }, () => {
  it('refuses another kind', () => {
    assert.equal(
      error({ apiVersion: 'rollout-operator.grafana.com/v1', kind: 'Foo', spec: {} }),
      'unexpected object kind - expecting ZoneAwarePodDisruptionBudget',
    );
  });

  it('needs a spec, and a map there', () => {
    assert.equal(error({ kind: KIND }), 'no spec found in unstructured object');
    assert.equal(error('x'), 'no spec found in unstructured object');
    assert.equal(
      error({ kind: KIND, spec: 3 }),
      '.spec accessor error: 3 is of the type int64, expected map[string]interface{}',
    );
  });

  it('maxUnavailable ≥ 0', () => {
    assert.equal(error(zpdb({ maxUnavailable: -1 })), 'invalid value: max unavailable must be 0 <= val, got -1');
    assert.deepEqual(config({ maxUnavailable: 0 }).maxUnavailable, { kind: 'count', value: 0 });
    assert.deepEqual(config({ maxUnavailable: 1 }).maxUnavailable, { kind: 'count', value: 1 });
  });

  it('defaults to maxUnavailable 1', () => {
    assert.deepEqual(config({}).maxUnavailable, { kind: 'count', value: 1 });
  });

  it('maxUnavailablePercentage within 0..100', () => {
    assert.equal(
      error(zpdb({ maxUnavailablePercentage: -1 })),
      'invalid value: max unavailable percentage must be 0 <= val <= 100, got -1',
    );
    assert.equal(
      error(zpdb({ maxUnavailablePercentage: 101 })),
      'invalid value: max unavailable percentage must be 0 <= val <= 100, got 101',
    );
    assert.deepEqual(config({ maxUnavailablePercentage: 0 }).maxUnavailable, { kind: 'percentage', value: 0 });
    assert.deepEqual(config({ maxUnavailablePercentage: 100 }).maxUnavailable, { kind: 'percentage', value: 100 });
  });

  it('a percentage cannot be combined with a partition regex (0% can)', () => {
    assert.equal(
      error(zpdb({ maxUnavailablePercentage: 50, podNamePartitionRegex: '[a-z]+\\-([0-9]+)' })),
      'invalid value: max unavailable percentage can not be used with partition awareness',
    );
    assert.ok(config({ maxUnavailablePercentage: 0, podNamePartitionRegex: '[a-z]+\\-([0-9]+)' }).partition);
  });

  it('only one of maxUnavailable and maxUnavailablePercentage', () => {
    assert.equal(
      error(zpdb({ maxUnavailable: 1, maxUnavailablePercentage: 50 })),
      'invalid value: only one of maxUnavailable or maxUnavailablePercentage may be set',
    );
  });

  it('non-integer budgets', () => {
    assert.equal(error(zpdb({ maxUnavailable: '1' })), 'failed to extract value from config field maxUnavailable');
    assert.equal(error(zpdb({ maxUnavailable: 1.5 })), 'failed to extract value from config field maxUnavailable');
    assert.equal(
      error(zpdb({ maxUnavailablePercentage: null })),
      'failed to extract value from config field maxUnavailablePercentage',
    );
  });

  it('a bad regex is reported as such', () => {
    assert.ok(
      error(zpdb({ maxUnavailable: 1, podNamePartitionRegex: '([bad_regex' })).startsWith(
        'invalid value: regex is not valid',
      ),
    );
  });

  it('a simple partition regex', () => {
    const c = config({ maxUnavailable: 1, podNamePartitionRegex: '[a-z]+\\-([0-9]+)' });
    assert.deepEqual(c.maxUnavailable, { kind: 'count', value: 1 });
    assert.equal(c.partition?.group, 1);
    assert.equal(c.partition?.source, '[a-z]+\\-([0-9]+)');
  });

  it('needs selector.matchLabels of strings (TestValidationFails)', () => {
    assert.equal(error({ kind: KIND, spec: {} }), 'invalid value: selector is not found');
    assert.equal(error({ kind: KIND, spec: { selector: {} } }), 'invalid value: selector is not found');
    assert.equal(
      error({ kind: KIND, spec: { selector: 'x' } }),
      'invalid value: selector is not valid, got .spec.selector.matchLabels accessor error: x is of the type string, expected map[string]interface{}',
    );
    assert.equal(
      error({ kind: KIND, spec: { selector: { matchLabels: { a: 1 } } } }),
      'invalid value: selector is not valid, got .spec.selector.matchLabels accessor error: contains non-string value in the map under key "a": 1 is of the type int64, expected string',
    );
  });

  it('keeps name, namespace, generation and labels', () => {
    const c = config({}, { name: 'z', namespace: 'mimir', generation: 7 });
    assert.equal(c.name, 'z');
    assert.equal(c.namespace, 'mimir');
    assert.equal(c.generation, 7);
    assert.deepEqual(c.matchLabels, { 'rollout-group': 'test' });
  });
});

describe('crossZoneEvictionDelay (TestParseAndValidateCrossZoneEvictionDelay)', { timeout: 10000 }, () => {
  const regex = '[a-z]+\\-([0-9]+)';
  const MIN = 60_000;

  it('Go durations with a partition regex', () => {
    assert.equal(
      config({ podNamePartitionRegex: regex, crossZoneEvictionDelay: '20m' }).crossZoneEvictionDelayMs,
      20 * MIN,
    );
    assert.equal(
      config({ podNamePartitionRegex: regex, crossZoneEvictionDelay: '1h30m' }).crossZoneEvictionDelayMs,
      90 * MIN,
    );
    assert.equal(config({ podNamePartitionRegex: regex, crossZoneEvictionDelay: '0s' }).crossZoneEvictionDelayMs, 0);
    assert.equal(config({ podNamePartitionRegex: regex }).crossZoneEvictionDelayMs, 0, 'omitted');
    assert.equal(
      config({ podNamePartitionRegex: regex, crossZoneEvictionDelay: '' }).crossZoneEvictionDelayMs,
      0,
      'empty',
    );
  });

  it('refuses an invalid or negative duration', () => {
    assert.equal(
      error(zpdb({ podNamePartitionRegex: regex, crossZoneEvictionDelay: 'notaduration' })),
      'invalid value: crossZoneEvictionDelay is not a valid duration, got time: invalid duration "notaduration"',
    );
    assert.equal(
      error(zpdb({ podNamePartitionRegex: regex, crossZoneEvictionDelay: '-5m' })),
      'invalid value: crossZoneEvictionDelay must be >= 0, got -5m',
    );
    assert.equal(
      error(zpdb({ podNamePartitionRegex: regex, crossZoneEvictionDelay: 20 })),
      'failed to extract value from config field crossZoneEvictionDelay',
    );
  });

  it('needs a partition regex', () => {
    assert.equal(
      error(zpdb({ podNamePartitionRegex: '', crossZoneEvictionDelay: '20m' })),
      'invalid value: crossZoneEvictionDelay requires podNamePartitionRegex to be set',
    );
    assert.ok('config' in parseZpdb(zpdb({ crossZoneEvictionDelay: '0s' })), 'a zero delay needs no regex');
  });
});

describe('unhealthyPodEvictionPolicy (Stateward only)', { timeout: 10000 }, () => {
  it('IfHealthyBudget or AlwaysAllow, kept as written; omitted stays unset (IfHealthyBudget)', () => {
    assert.equal(config({ unhealthyPodEvictionPolicy: 'AlwaysAllow' }).unhealthyPodEvictionPolicy, 'AlwaysAllow');
    assert.equal(
      config({ unhealthyPodEvictionPolicy: 'IfHealthyBudget' }).unhealthyPodEvictionPolicy,
      'IfHealthyBudget',
    );
    assert.equal('unhealthyPodEvictionPolicy' in config({}), false);
    const regex = '[a-z]+\\-([0-9]+)';
    assert.equal(
      config({ podNamePartitionRegex: regex, unhealthyPodEvictionPolicy: 'AlwaysAllow' }).unhealthyPodEvictionPolicy,
      'AlwaysAllow',
      'partition mode too',
    );
  });

  it('refuses anything else, case included, naming the two policies', () => {
    for (const [value, got] of [
      ['alwaysallow', '"alwaysallow"'],
      ['Always', '"Always"'],
      ['', '""'],
    ] as const)
      assert.equal(
        error(zpdb({ unhealthyPodEvictionPolicy: value })),
        `invalid value: unhealthyPodEvictionPolicy must be IfHealthyBudget or AlwaysAllow, got ${got}`,
      );
    for (const value of [true, 1, null, ['AlwaysAllow']])
      assert.equal(
        error(zpdb({ unhealthyPodEvictionPolicy: value })),
        'failed to extract value from config field unhealthyPodEvictionPolicy',
      );
  });

  it("rollout-operator's checks come first: a budget it refuses is refused with its message", () => {
    assert.equal(
      error(zpdb({ maxUnavailable: -1, unhealthyPodEvictionPolicy: 'Never' })),
      'invalid value: max unavailable must be 0 <= val, got -1',
    );
  });
});

describe('validating webhook input (zpdb_validating_webhook_test.go)', { timeout: 10000 }, () => {
  const raw = (spec: Record<string, unknown>) =>
    JSON.stringify({
      apiVersion: 'rollout-operator.grafana.com/v1',
      kind: KIND,
      metadata: { name: 'test', namespace: 'test' },
      spec,
    });
  const selector = { matchLabels: { 'rollout-group': 'test-app' } };
  /** The webhook's answer to an AdmissionReview carrying this object (JSON text; undefined: none). */
  const validate = async (object: string | undefined) => {
    const request =
      '{"uid":"u","operation":"CREATE","resource":{"group":"rollout-operator.grafana.com","version":"v1","resource":"zoneawarepoddisruptionbudgets"}' +
      (object === undefined ? '' : `,"object":${object}`) +
      '}';
    const answer = await serveAdmission(
      {
        contentType: 'application/json',
        body: Buffer.from(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":${request}}`),
        signal: AbortSignal.timeout(5_000),
      },
      zpdbValidationHandler,
    );
    if (answer.status !== 200) return { status: answer.status, text: answer.body };
    const { response } = JSON.parse(answer.body) as { response: AdmissionResponseV1 };
    return response.allowed
      ? { allowed: true }
      : { allowed: false, code: response.status?.code, message: response.status?.message };
  };

  it('a valid budget', async () => {
    assert.deepEqual(await validate(raw({ maxUnavailable: 1, selector })), { allowed: true });
  });

  it('a valid budget with crossZoneEvictionDelay', async () => {
    assert.deepEqual(
      await validate(
        raw({
          maxUnavailable: 1,
          selector,
          podNamePartitionRegex: '[a-z\\-]+-zone-[a-z]-([0-9]+)',
          crossZoneEvictionDelay: '20m',
        }),
      ),
      { allowed: true },
    );
  });

  it('a bad budget', async () => {
    assert.deepEqual(await validate(raw({ maxUnavailable: -1, selector })), {
      allowed: false,
      code: 400,
      message: 'invalid value: max unavailable must be 0 <= val, got -1',
    });
  });

  it('crossZoneEvictionDelay without a partition regex', async () => {
    assert.deepEqual(await validate(raw({ maxUnavailable: 1, selector, crossZoneEvictionDelay: '20m' })), {
      allowed: false,
      code: 400,
      message: 'invalid value: crossZoneEvictionDelay requires podNamePartitionRegex to be set',
    });
  });

  it('an unknown unhealthyPodEvictionPolicy', async () => {
    assert.deepEqual(await validate(raw({ selector, unhealthyPodEvictionPolicy: 'Always' })), {
      allowed: false,
      code: 400,
      message: 'invalid value: unhealthyPodEvictionPolicy must be IfHealthyBudget or AlwaysAllow, got "Always"',
    });
    assert.deepEqual(await validate(raw({ selector, unhealthyPodEvictionPolicy: 'AlwaysAllow' })), { allowed: true });
  });

  it('no object at all', async () => {
    const none = { allowed: false, code: 400, message: 'no spec found in unstructured object' };
    assert.deepEqual(await validate(undefined), none);
    assert.deepEqual(await validate('null'), none);
    const broken = await validate('{');
    assert.ok('status' in broken && broken.status === 400 && broken.text.startsWith('Request could not be decoded'));
  });
});

describe('an invalid budget: what can be read of it', { timeout: 10000 }, () => {
  it('keeps its name, namespace, error and, when it reads, its selector', () => {
    const obj = zpdb({ maxUnavailable: -1 }, { name: 'broken', namespace: 'mimir' });
    assert.deepEqual(invalidZpdb(obj, 'x'), {
      name: 'broken',
      namespace: 'mimir',
      error: 'x',
      matchLabels: { 'rollout-group': 'test' },
    });
    assert.deepEqual(
      invalidZpdb(
        { kind: KIND, metadata: { name: 'b', namespace: 'mimir' }, spec: { selector: { matchLabels: { a: 1 } } } },
        'y',
      ),
      { name: 'b', namespace: 'mimir', error: 'y' },
    );
    assert.deepEqual(invalidZpdb({ kind: KIND, metadata: { name: 'b', namespace: 'mimir' } }, 'z'), {
      name: 'b',
      namespace: 'mimir',
      error: 'z',
    });
    assert.deepEqual(invalidZpdb('nonsense', 'w'), { name: '', namespace: '', error: 'w' });
  });

  it('covers the pods its selector selects in its namespace; with no readable selector, every StatefulSet pod of its namespace', () => {
    const readable = invalidZpdb(zpdb({ maxUnavailable: -1 }), 'e');
    const unreadable = invalidZpdb({ kind: KIND, metadata: { name: 'b', namespace: 'ns' }, spec: {} }, 'e');
    const stsPod = (labels: Record<string, string>, namespace = 'ns'): Pod => ({
      metadata: {
        ...pod('p', labels, namespace).metadata,
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 's', uid: 'u', controller: true }],
      },
    });
    assert.equal(invalidZpdbCovers(readable, pod('p', { 'rollout-group': 'test' })), true);
    assert.equal(invalidZpdbCovers(readable, pod('p', { 'rollout-group': 'other' })), false);
    assert.equal(invalidZpdbCovers(readable, pod('p', { 'rollout-group': 'test' }, 'elsewhere')), false);
    assert.equal(invalidZpdbCovers(unreadable, stsPod({})), true);
    assert.equal(invalidZpdbCovers(unreadable, stsPod({}, 'elsewhere')), false);
    assert.equal(invalidZpdbCovers(unreadable, pod('p', { 'rollout-group': 'test' })), false, 'no StatefulSet owner');
  });

  it('its denial names it and says what is wrong', () => {
    assert.equal(
      invalidZpdbMessage(invalidZpdb(zpdb({}, { name: 'ingester', namespace: 'mimir' }), 'bad')),
      'ZoneAwarePodDisruptionBudget mimir/ingester is invalid, evictions of the pods it selects are denied until it is fixed: bad',
    );
  });
});

describe('which ZPDB covers a pod (config_cache_test.go)', { timeout: 10000 }, () => {
  const budget = (name: string, group: string, namespace = 'ns') =>
    config({ selector: { matchLabels: { 'rollout-group': group } } }, { name, namespace });

  it('the one whose selector matches (TestSelectorMatching)', () => {
    const configs = [budget('test-zpdb', 'ingester'), budget('test-zpdb-1', 'another-rollout-group')];
    const found = findZpdbForPod(configs, pod('test-1', { 'rollout-group': 'ingester' }));
    assert.equal(found.kind, 'match');
    assert.equal(found.kind === 'match' && found.config.name, 'test-zpdb');
    assert.deepEqual(findZpdbForPod(configs, pod('test-1', { 'rollout-group': 'no-match' })), { kind: 'none' });
  });

  it('several matches are an error (TestMultipleSelectorMatches)', () => {
    const found = findZpdbForPod(
      [budget('zpdb-2', 'ingester'), budget('zpdb-1', 'ingester')],
      pod('test-1', { 'rollout-group': 'ingester' }),
    );
    assert.deepEqual(found, {
      kind: 'multiple',
      error: 'multiple zoned pod disruption budgets found for pod',
      names: ['zpdb-1', 'zpdb-2'],
    });
  });

  it("only budgets of the pod's namespace apply", () => {
    assert.deepEqual(findZpdbForPod([budget('z', 'ingester', 'other')], pod('p', { 'rollout-group': 'ingester' })), {
      kind: 'none',
    });
  });

  it('every matchLabels entry must match; empty matchLabels select everything (Kubernetes PDB semantics)', () => {
    const c = config({ selector: { matchLabels: { a: '1', b: '2' } } });
    assert.equal(zpdbSelects(c, { a: '1', b: '2', c: '3' }), true);
    assert.equal(zpdbSelects(c, { a: '1' }), false);
    assert.equal(zpdbSelects(c, undefined), false);
    assert.equal(zpdbSelects(config({ selector: { matchLabels: {} } }), undefined), true);
  });
});
