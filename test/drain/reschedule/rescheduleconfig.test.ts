import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  DEFAULT_DRAIN_TAINTS,
  DEFAULT_RECORD_TTL_MS,
  DEFAULT_TRACKING_CONFIG_MAP,
  namespaceInScope,
  parseRescheduleConfig,
  podSelected,
  type RescheduleConfig,
  type RescheduleConfigInput,
} from '../../../src/drain/reschedule/rescheduleconfig.ts';
import {
  matchesLabelSelector,
  parseLabelSelector,
  qualifiedNameProblem,
  type LabelRequirement,
  type LabelSelector,
} from '../../../src/vocabulary/selectors.ts';
import { formatLabelSelector } from '../../support/selectors.ts';

function selector(text: string): LabelSelector {
  const parsed = parseLabelSelector(text);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
  return parsed.value;
}

function config(input: RescheduleConfigInput = {}): RescheduleConfig {
  const parsed = parseRescheduleConfig(input);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.errors.join('; '));
  return parsed.config;
}

function errors(input: RescheduleConfigInput): string[] {
  const parsed = parseRescheduleConfig(input);
  assert.equal(parsed.ok, false);
  return parsed.ok ? [] : parsed.errors;
}

describe('parseLabelSelector', { timeout: 10000 }, () => {
  it('reads every operator', () => {
    assert.deepEqual(selector('app=couchbase').requirements, [
      { key: 'app', operator: 'Equals', values: ['couchbase'] },
    ]);
    assert.deepEqual(selector('app==couchbase').requirements, [
      { key: 'app', operator: 'Equals', values: ['couchbase'] },
    ]);
    assert.deepEqual(selector('tier!=x').requirements, [{ key: 'tier', operator: 'NotEquals', values: ['x'] }]);
    assert.deepEqual(selector('app in (a,b)').requirements, [{ key: 'app', operator: 'In', values: ['a', 'b'] }]);
    assert.deepEqual(selector('app notin (a)').requirements, [{ key: 'app', operator: 'NotIn', values: ['a'] }]);
    assert.deepEqual(selector('couchbase.com/cluster').requirements, [
      { key: 'couchbase.com/cluster', operator: 'Exists', values: [] },
    ]);
    assert.deepEqual(selector('!legacy').requirements, [{ key: 'legacy', operator: 'DoesNotExist', values: [] }]);
  });

  it('reads the issue example and ignores whitespace', () => {
    assert.deepEqual(selector('  app in ( a , b ) ,tier!=x ').requirements, [
      { key: 'app', operator: 'In', values: ['a', 'b'] },
      { key: 'tier', operator: 'NotEquals', values: ['x'] },
    ]);
  });

  it('takes empty values as upstream does', () => {
    assert.deepEqual(selector('a=').requirements, [{ key: 'a', operator: 'Equals', values: [''] }]);
    assert.deepEqual(selector('a=,b').requirements[0], { key: 'a', operator: 'Equals', values: [''] });
    assert.deepEqual(selector('a in (x,,y)').requirements[0]?.values, ['x', '', 'y']);
    assert.deepEqual(selector('a in ()').requirements[0]?.values, ['']);
  });

  it('keywords are plain words as keys and values', () => {
    assert.deepEqual(selector('in=notin').requirements, [{ key: 'in', operator: 'Equals', values: ['notin'] }]);
  });

  it('the empty string selects everything', () => {
    assert.deepEqual(selector('').requirements, []);
    assert.deepEqual(selector('   ').requirements, []);
  });

  const bad: [string, RegExp][] = [
    ['app=couchbase,', /trailing comma/],
    [',app', /expected a label key/],
    ['app in a,b', /expected '\('/],
    ['app in (a,b', /value list/],
    ['app in (a b)', /expected ',' or '\)'/],
    ['!app=x', /found '=', expected ',' or end of string/],
    ['app = = x', /expected a value/],
    ['a b', /found "b" after key "a"/],
    ['replicas>1', /operator '>' is not supported/],
    ['replicas<1', /operator '<' is not supported/],
    ['Bad_Prefix/app=x', /prefix "Bad_Prefix" must be a lowercase DNS subdomain/],
    ['/app=x', /prefix before "\/" must not be empty/],
    ['app=-x', /value "-x"/],
    [`app=${'v'.repeat(64)}`, /at most 63 characters/],
    [`${'k'.repeat(64)}=v`, /name part must be at most 63/],
    ['app=(x)', /expected a value/],
  ];
  for (const [text, error] of bad) {
    it(`refuses ${JSON.stringify(text)}`, () => {
      const parsed = parseLabelSelector(text);
      assert.equal(parsed.ok, false);
      if (!parsed.ok) {
        assert.match(parsed.error, error);
        assert.ok(parsed.error.startsWith(`label selector ${JSON.stringify(text)}: `), parsed.error);
      }
    });
  }

  it('never throws, whatever the text', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', 'b', '=', '!', '(', ')', ',', ' ', 'in', 'notin', '/', '.', '-', '<') }),
        (text) => {
          const parsed = parseLabelSelector(text);
          assert.equal(typeof parsed.ok, 'boolean');
        },
      ),
    );
  });
});

describe('matchesLabelSelector', { timeout: 10000 }, () => {
  const cases: [string, Record<string, string> | undefined, boolean][] = [
    ['app=couchbase', { app: 'couchbase' }, true],
    ['app=couchbase', { app: 'kafka' }, false],
    ['app=couchbase', undefined, false],
    ['app!=couchbase', {}, true], // != matches pods without the label, as in Kubernetes
    ['app!=couchbase', { app: 'couchbase' }, false],
    ['app in (a,b),tier!=x', { app: 'b', tier: 'y' }, true],
    ['app in (a,b),tier!=x', { app: 'b', tier: 'x' }, false],
    ['app in (a,b),tier!=x', { app: 'c' }, false],
    ['app notin (a,b)', {}, true],
    ['app notin (a,b)', { app: 'a' }, false],
    ['app', { app: '' }, true],
    ['!app', { app: '' }, false],
    ['!app', { other: 'x' }, true],
    ['a=', { a: '' }, true],
    ['a=', {}, false],
    ['', undefined, true],
  ];
  for (const [text, labels, expected] of cases) {
    it(`${JSON.stringify(text)} on ${JSON.stringify(labels)} → ${expected}`, () => {
      assert.equal(matchesLabelSelector(selector(text), labels), expected);
    });
  }

  it('does not see inherited properties as labels', () => {
    assert.equal(matchesLabelSelector(selector('toString'), {}), false);
    assert.equal(matchesLabelSelector(selector('!constructor'), {}), true);
  });

  const key = fc.constantFrom('app', 'tier', 'example.com/role');
  const value = fc.constantFrom('', 'a', 'b', 'couchbase');
  const requirement: fc.Arbitrary<LabelRequirement> = fc
    .oneof(
      fc.record({ key, operator: fc.constantFrom('Equals' as const, 'NotEquals' as const), values: fc.tuple(value) }),
      fc.record({
        key,
        operator: fc.constantFrom('In' as const, 'NotIn' as const),
        values: fc.array(value, { minLength: 1, maxLength: 3 }),
      }),
      fc.record({
        key,
        operator: fc.constantFrom('Exists' as const, 'DoesNotExist' as const),
        values: fc.constant([]),
      }),
    )
    .map((r) => ({ key: r.key, operator: r.operator, values: [...r.values] })); // plain objects, as the parser builds
  const labels = fc.dictionary(key, value, { maxKeys: 3 });

  it('parseLabelSelector reads a formatted selector back to the same requirements', () => {
    fc.assert(
      fc.property(fc.array(requirement, { maxLength: 4 }), (requirements) => {
        const text = formatLabelSelector({ requirements });
        const parsed = parseLabelSelector(text);
        assert.ok(parsed.ok, text);
        if (parsed.ok) assert.deepEqual(parsed.value.requirements, requirements);
      }),
    );
  });

  it('a selector is the conjunction of its requirements, and the negations are complements', () => {
    fc.assert(
      fc.property(fc.array(requirement, { maxLength: 4 }), labels, (requirements, l) => {
        const all = matchesLabelSelector({ requirements }, l);
        assert.equal(
          all,
          requirements.every((r) => matchesLabelSelector({ requirements: [r] }, l)),
        );
        for (const r of requirements) {
          const flipped: Record<string, LabelRequirement['operator']> = {
            Equals: 'NotEquals',
            NotEquals: 'Equals',
            In: 'NotIn',
            NotIn: 'In',
            Exists: 'DoesNotExist',
            DoesNotExist: 'Exists',
          };
          const negation = { ...r, operator: flipped[r.operator] ?? r.operator };
          assert.notEqual(
            matchesLabelSelector({ requirements: [r] }, l),
            matchesLabelSelector({ requirements: [negation] }, l),
          );
        }
      }),
    );
  });
});

describe('parseRescheduleConfig', { timeout: 10000 }, () => {
  it("defaults are the reference hook's", () => {
    const c = config();
    assert.deepEqual(c.selectors.map(formatLabelSelector), ['app=couchbase']);
    assert.deepEqual(c.annotation, { key: 'cao.couchbase.com/reschedule', value: 'true' });
    assert.equal(c.namespaces, undefined);
    assert.equal(c.track, true);
    assert.equal(c.trackingConfigMap, DEFAULT_TRACKING_CONFIG_MAP);
    assert.equal(c.recordTtlMs, DEFAULT_RECORD_TTL_MS);
    assert.deepEqual(c.drainTaints, DEFAULT_DRAIN_TAINTS);
  });

  it('takes several selectors, OR-ed, each possibly with commas', () => {
    const c = config({ selectors: ['app=couchbase', 'app in (kafka,zookeeper),tier!=test'] });
    assert.equal(podSelected(c, { app: 'couchbase' }), true);
    assert.equal(podSelected(c, { app: 'kafka' }), true);
    assert.equal(podSelected(c, { app: 'kafka', tier: 'test' }), false);
    assert.equal(podSelected(c, { app: 'nginx' }), false);
    assert.equal(podSelected(c, undefined), false);
  });

  it('reads the annotation as key=value, splitting at the first =', () => {
    assert.deepEqual(config({ annotation: 'example.com/move = a=b' }).annotation, {
      key: 'example.com/move',
      value: 'a=b',
    });
    assert.match(errors({ annotation: 'cao.couchbase.com/reschedule' })[0] ?? '', /expected key=value/);
    assert.match(errors({ annotation: 'cao.couchbase.com/reschedule=' })[0] ?? '', /value must not be empty/);
    assert.match(errors({ annotation: 'Not A Key=true' })[0] ?? '', /annotation key "Not A Key"/);
  });

  it('reads namespaces from a comma list or an array; empty or * means all', () => {
    const c = config({ namespaces: ' db-a, db-b ,' });
    assert.deepEqual([...(c.namespaces ?? [])], ['db-a', 'db-b']);
    assert.equal(namespaceInScope(c, 'db-a'), true);
    assert.equal(namespaceInScope(c, 'kube-system'), false);
    assert.equal(config({ namespaces: ['db-a', '*'] }).namespaces, undefined);
    assert.equal(config({ namespaces: '' }).namespaces, undefined);
    assert.equal(namespaceInScope(config(), 'anything'), true);
    assert.match(errors({ namespaces: 'DB_A' })[0] ?? '', /namespace "DB_A": must be a lowercase DNS label/);
  });

  it('reads the TTL as a Go duration or milliseconds, within bounds', () => {
    assert.equal(config({ recordTtl: '30m' }).recordTtlMs, 1_800_000);
    assert.equal(config({ recordTtl: '1h30m' }).recordTtlMs, 5_400_000);
    assert.equal(config({ recordTtl: 120_000 }).recordTtlMs, 120_000);
    assert.match(errors({ recordTtl: 'soon' })[0] ?? '', /record TTL "soon": time: invalid duration/);
    assert.match(errors({ recordTtl: '10s' })[0] ?? '', /must be between 1m and 24h/);
    assert.match(errors({ recordTtl: '25h' })[0] ?? '', /must be between 1m and 24h/);
    assert.match(errors({ recordTtl: 90_000.5 })[0] ?? '', /must be between 1m and 24h/);
  });

  it("refuses an unparsable track flag instead of reading it as false (the reference's quirk)", () => {
    assert.equal(config({ track: 'false' }).track, false);
    assert.equal(config({ track: 'True' }).track, true);
    assert.equal(config({ track: false }).track, false);
    assert.match(errors({ track: 'nope' })[0] ?? '', /track "nope": expected true or false/);
  });

  it('refuses an empty selector list or an empty selector', () => {
    assert.match(errors({ selectors: [] })[0] ?? '', /at least one pod selector/);
    assert.match(errors({ selectors: [' '] })[0] ?? '', /must not be empty/);
  });

  it('validates the ConfigMap name and drain taints', () => {
    assert.match(errors({ trackingConfigMap: 'Tracking' })[0] ?? '', /tracking ConfigMap "Tracking"/);
    assert.deepEqual(config({ drainTaints: 'a.example/drain, other' }).drainTaints, ['a.example/drain', 'other']);
    assert.match(errors({ drainTaints: ['bad key'] })[0] ?? '', /drain taint key "bad key"/);
  });

  it('reports every problem at once', () => {
    const all = errors({ selectors: ['a in'], annotation: 'x', namespaces: 'N', recordTtl: '1s', track: '?' });
    assert.equal(all.length, 5, all.join('\n'));
  });

  it('qualifiedNameProblem accepts prefixed keys', () => {
    assert.equal(qualifiedNameProblem('cao.couchbase.com/reschedule'), undefined);
    assert.equal(qualifiedNameProblem('ToBeDeletedByClusterAutoscaler'), undefined);
    assert.match(qualifiedNameProblem('a/b/c') ?? '', /name part/);
  });
});
