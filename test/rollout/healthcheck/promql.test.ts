// The PromQL side of a health check: placeholders substituted as
// rollout-operator substitutes them, and a /api/v1/query answer read as one
// value, no data or an error.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  promNumber,
  promString,
  quoteMeta,
  readQueryResult,
  renderQuery,
  renderSuccessQuery,
  targetMatchers,
  type QueryValue,
} from '../../../src/rollout/healthcheck/promql.ts';

/** A PromQL double-quoted literal's value, unescaped as PromQL (Go's strconv) does for what promString writes. */
function unquote(literal: string): string {
  assert.ok(literal.startsWith('"') && literal.endsWith('"') && literal.length >= 2, literal);
  let out = '';
  for (let i = 1; i < literal.length - 1; i++) {
    const c = literal[i]!;
    assert.notEqual(c, '\n', 'a raw newline ends a PromQL string');
    if (c === '"') assert.fail(`unescaped quote in ${literal}`);
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = literal[++i];
    if (next === 'n') out += '\n';
    else if (next === '\\' || next === '"') out += next;
    else assert.fail(`escape \\${next} in ${literal}`);
  }
  return out;
}

/** The pod matcher of targetMatchers(…) as Prometheus applies it: the literal's value, anchored. */
function podRegex(matchers: string): RegExp {
  const m = /^namespace=("(?:[^"\\]|\\.)*"),pod=~("(?:[^"\\]|\\.)*")$/s.exec(matchers);
  assert.ok(m, `matchers shape: ${matchers}`);
  return new RegExp(`^(?:${unquote(m[2]!)})$`, 's');
}

/** Pod names as Kubernetes allows them (DNS subdomains), dots included. */
const podNameArb = fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?$/);

describe('targetMatchers', () => {
  it("is rollout-operator's namespace and anchored pod alternation, names sorted and regex-quoted", () => {
    assert.equal(
      targetMatchers('mimir', ['ingester-zone-b-1', 'ingester-zone-a-0', 'ingester-zone-a-1']),
      'namespace="mimir",pod=~"ingester-zone-a-0|ingester-zone-a-1|ingester-zone-b-1"',
    );
    assert.equal(targetMatchers('mimir', ['ingester-zone-a-0']), 'namespace="mimir",pod=~"ingester-zone-a-0"');
  });

  it('quotes a dot as \\\\. inside the PromQL literal, so it matches a dot only', () => {
    const matchers = targetMatchers('ns', ['kafka.broker-1', 'a.b.c']);
    assert.equal(matchers, String.raw`namespace="ns",pod=~"a\\.b\\.c|kafka\\.broker-1"`);
    const regex = podRegex(matchers);
    assert.ok(regex.test('kafka.broker-1') && regex.test('a.b.c'));
    assert.ok(!regex.test('kafkaxbroker-1') && !regex.test('aXb.c'), 'a dot is not any character');
  });

  it('matches no pod when there are none: pod=~"^$"', () => {
    assert.equal(targetMatchers('mimir', []), 'namespace="mimir",pod=~"^$"');
    assert.ok(!podRegex(targetMatchers('mimir', [])).test('ingester-zone-a-0'));
  });

  it('does not reorder the caller’s list', () => {
    const pods = ['b', 'a'];
    targetMatchers('ns', pods);
    assert.deepEqual(pods, ['b', 'a']);
  });

  it("quotes every RE2 metacharacter as Go's regexp.QuoteMeta does", () => {
    assert.equal(
      quoteMeta(String.raw`a.b+c*d?e(f)g|h[i]j{k}l^m$n\o-p`),
      String.raw`a\.b\+c\*d\?e\(f\)g\|h\[i\]j\{k\}l\^m\$n\\o-p`,
    );
    assert.equal(quoteMeta('ingester-zone-a-0'), 'ingester-zone-a-0');
  });

  it('writes a PromQL string literal PromQL reads back', () => {
    assert.equal(promString('a"b\\c\nd'), String.raw`"a\"b\\c\nd"`);
    assert.equal(unquote(promString('a"b\\c\nd')), 'a"b\\c\nd');
  });
});

describe('targetMatchers (property)', () => {
  it('selects exactly the named pods, for Kubernetes names', () => {
    fc.assert(
      fc.property(fc.uniqueArray(podNameArb, { maxLength: 8 }), podNameArb, (pods, other) => {
        const matchers = targetMatchers('ns', pods);
        const regex = podRegex(matchers);
        for (const pod of pods) assert.ok(regex.test(pod), `${pod} selected by ${matchers}`);
        assert.equal(regex.test(other), pods.includes(other), `${other} against ${matchers}`);
        const alternatives = unquote(matchers.slice(matchers.indexOf('pod=~') + 5)).split('|');
        if (pods.length > 0) assert.deepEqual(alternatives, [...pods].sort().map(quoteMeta), 'sorted');
      }),
      { numRuns: 1000 },
    );
  });

  it('selects exactly the named strings, whatever characters they hold', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'binary' }), { maxLength: 5 }), fc.string(), (names, other) => {
        const regex = podRegex(targetMatchers('ns', names));
        for (const name of names) assert.ok(regex.test(name), JSON.stringify(name));
        assert.equal(regex.test(other), names.includes(other) || (names.length === 0 && other === ''));
      }),
      { numRuns: 300 },
    );
  });

  it('writes any namespace as a literal that reads back as itself', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (namespace) => {
        const m = /^namespace=(".*"),pod=~"\^\$"$/s.exec(targetMatchers(namespace, []));
        assert.ok(m);
        assert.equal(unquote(m[1]!), namespace);
      }),
    );
  });
});

const QUERY =
  'sum(rate(errors_total{${targetMatchers}}[${range}])) / sum(rate(requests_total{${targetMatchers}}[${range}]))';

describe('renderQuery and renderSuccessQuery', () => {
  it('replaces every ${targetMatchers} and ${range}', () => {
    assert.equal(
      renderQuery(QUERY, 'mimir', ['ingester-zone-a-1', 'ingester-zone-a-0'], 5 * 60_000),
      'sum(rate(errors_total{namespace="mimir",pod=~"ingester-zone-a-0|ingester-zone-a-1"}[5m])) / ' +
        'sum(rate(requests_total{namespace="mimir",pod=~"ingester-zone-a-0|ingester-zone-a-1"}[5m]))',
    );
    assert.equal(renderQuery('up{${targetMatchers}}', 'ns', [], 1000), 'up{namespace="ns",pod=~"^$"}');
    assert.equal(renderQuery('no placeholders', 'ns', ['p'], 1000), 'no placeholders');
  });

  it('writes ${range} as a Prometheus duration', () => {
    const range = (ms: number) => renderQuery('[${range}]', 'ns', [], ms);
    assert.equal(range(300_000), '[5m]');
    assert.equal(range(600_000), '[10m]');
    assert.equal(range(90_000), '[1m30s]');
    assert.equal(range(5_400_000), '[1h30m]');
    assert.equal(range(86_400_000), '[1d]');
    assert.equal(range(604_800_000), '[1w]');
    assert.equal(range(1_500), '[1s500ms]');
    assert.equal(range(250), '[250ms]');
  });

  it('replaces every ${current} and ${baseline} by parenthesised numbers', () => {
    assert.equal(
      renderSuccessQuery('${current} <= bool ${baseline} * 1.1', 0.02, 0.015),
      '(0.02) <= bool (0.015) * 1.1',
    );
    assert.equal(
      renderSuccessQuery('${current} > bool 0 and ${current} >= bool ${baseline} - ${baseline} * 0.2', -3, 10),
      '(-3) > bool 0 and (-3) >= bool (10) - (10) * 0.2',
    );
    assert.equal(renderSuccessQuery('${current} < bool 1', Infinity, NaN), '(+Inf) < bool 1');
  });

  it('writes negative numbers, infinities and NaN as PromQL literals', () => {
    assert.equal(promNumber(-2.5), '(-2.5)');
    assert.equal(promNumber(0), '(0)');
    assert.equal(promNumber(-0), '(0)');
    assert.equal(promNumber(Infinity), '(+Inf)');
    assert.equal(promNumber(-Infinity), '(-Inf)');
    assert.equal(promNumber(NaN), '(NaN)');
    assert.equal(promNumber(1e21), '(1e+21)');
    assert.equal(promNumber(1.5e-7), '(1.5e-7)');
    // `1 - ${baseline}` with a negative baseline must not become `1 - -2` or `1 --2`.
    assert.equal(renderSuccessQuery('1 - ${baseline}', 0, -2), '1 - (-2)');
  });
});

describe('renderQuery and promNumber (property)', () => {
  const piece = fc.constantFrom(
    '${targetMatchers}',
    '${range}',
    'sum(',
    ')',
    'rate(x{',
    '}[',
    ']',
    ' / ',
    '$',
    '{',
    'range',
  );

  it('leaves no placeholder and changes nothing else, for Kubernetes names', () => {
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 12 }),
        fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/),
        fc.uniqueArray(podNameArb, { maxLength: 4 }),
        fc.integer({ min: 1, max: 10 * 86_400_000 }),
        (pieces, namespace, pods, rangeMs) => {
          const query = pieces.join('');
          const rendered = renderQuery(query, namespace, pods, rangeMs);
          const range = renderQuery('${range}', namespace, pods, rangeMs);
          const matchers = targetMatchers(namespace, pods);
          assert.equal(rendered, query.split('${targetMatchers}').join(matchers).split('${range}').join(range));
          assert.ok(!rendered.includes('${targetMatchers}') && !rendered.includes('${range}'));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('writes every number as a literal that reads back as itself', () => {
    fc.assert(
      fc.property(fc.double(), (value) => {
        const literal = promNumber(value);
        const m = /^\(([-+]?(?:Inf|NaN|\d+(?:\.\d+)?(?:e[-+]\d+)?))\)$/.exec(literal);
        assert.ok(m, `literal ${literal}`);
        const text = m[1]!;
        const back = text === '+Inf' ? Infinity : text === '-Inf' ? -Infinity : Number(text);
        assert.ok(Object.is(back, value) || (Object.is(value, -0) && back === 0), `${literal} for ${value}`);
      }),
      { numRuns: 2000 },
    );
  });
});

const ok = (data: unknown) => ({ status: 'success', data });
const vector = (...values: string[]) =>
  ok({
    resultType: 'vector',
    result: values.map((v, i) => ({ metric: { pod: `ingester-zone-a-${i}` }, value: [1_795_000_000.123, v] })),
  });
const scalar = (v: unknown) => ok({ resultType: 'scalar', result: [1_795_000_000.123, v] });

function errorMessage(answer: QueryValue): string {
  assert.equal(answer.kind, 'error', JSON.stringify(answer));
  return (answer as { message: string }).message;
}

describe('readQueryResult', () => {
  it('reads a scalar and a one-sample vector as the value', () => {
    assert.deepEqual(readQueryResult(scalar('0.25')), { kind: 'value', value: 0.25 });
    assert.deepEqual(readQueryResult(scalar('1')), { kind: 'value', value: 1 });
    assert.deepEqual(readQueryResult(vector('-3.5e-3')), { kind: 'value', value: -0.0035 });
    assert.deepEqual(readQueryResult(vector('0')), { kind: 'value', value: 0 });
    assert.deepEqual(readQueryResult({ ...vector('7'), warnings: ['PromQL info: …'] }), { kind: 'value', value: 7 });
  });

  it('reads the infinities Prometheus writes', () => {
    assert.deepEqual(readQueryResult(vector('+Inf')), { kind: 'value', value: Infinity });
    assert.deepEqual(readQueryResult(scalar('-Inf')), { kind: 'value', value: -Infinity });
    assert.deepEqual(readQueryResult(scalar('Inf')), { kind: 'value', value: Infinity });
  });

  it('calls an empty vector and a NaN no data', () => {
    assert.deepEqual(readQueryResult(vector()), { kind: 'no_data' });
    assert.deepEqual(readQueryResult(vector('NaN')), { kind: 'no_data' });
    assert.deepEqual(readQueryResult(scalar('NaN')), { kind: 'no_data' });
  });

  it('calls three samples an error that names how many came back, not a pass', () => {
    const message = errorMessage(readQueryResult(vector('1', '1', '1')));
    assert.match(message, /\b3 samples\b/);
    assert.match(message, /must return one/);
    assert.match(errorMessage(readQueryResult(vector('1', '0'))), /\b2 samples\b/);
  });

  it('calls a matrix or a string an error', () => {
    const matrix = ok({ resultType: 'matrix', result: [{ metric: {}, values: [[1, '1']] }] });
    assert.match(errorMessage(readQueryResult(matrix)), /returned a matrix/);
    assert.match(errorMessage(readQueryResult(ok({ resultType: 'string', result: [1, 'x'] }))), /returned a string/);
    assert.match(errorMessage(readQueryResult(ok({ result: [] }))), /must return a scalar or one sample/);
    assert.match(errorMessage(readQueryResult(ok({ resultType: 'vector', result: {} }))), /returned a vector/);
  });

  it("passes on Prometheus' error type and text", () => {
    const body = { status: 'error', errorType: 'bad_data', error: 'invalid parameter "query": 1:5: parse error' };
    assert.equal(
      errorMessage(readQueryResult(body)),
      'Prometheus answered bad_data: invalid parameter "query": 1:5: parse error',
    );
    assert.equal(errorMessage(readQueryResult({ status: 'error', error: 'timeout' })), 'Prometheus answered timeout');
    assert.equal(errorMessage(readQueryResult({ status: 'error' })), 'Prometheus answered no error text');
    assert.equal(errorMessage(readQueryResult({ data: {} })), 'Prometheus answered no error text', 'no status');
    assert.equal(
      errorMessage(readQueryResult({ status: 'error', errorType: 3, error: 4 })),
      'Prometheus answered no error text',
    );
  });

  it('calls anything but a JSON object, or an answer without data, an error', () => {
    for (const body of [null, undefined, 'success', 1, true, [], [scalar('1')]])
      assert.equal(errorMessage(readQueryResult(body)), 'the answer is not a JSON object', JSON.stringify(body));
    assert.equal(errorMessage(readQueryResult({ status: 'success' })), 'the answer has no data');
    assert.equal(errorMessage(readQueryResult(ok([]))), 'the answer has no data');
  });

  it('calls a sample without a readable value an error, not a number', () => {
    for (const v of ['', ' ', 'abc', '1,5', 1, null, undefined])
      assert.match(errorMessage(readQueryResult(scalar(v))), /scalar has no readable value/, JSON.stringify(v));
    const broken = [
      [{ metric: {} }],
      [{ metric: {}, value: [1] }],
      [{ metric: {}, value: [1, '1', '2'] }],
      [{ metric: {}, value: { 1: '1' } }],
      ['1'],
      [null],
      // A native histogram sample: no single value to compare.
      [{ metric: {}, histogram: [1, { count: '3', sum: '4', buckets: [] }] }],
    ];
    for (const result of broken)
      assert.match(
        errorMessage(readQueryResult(ok({ resultType: 'vector', result }))),
        /vector has no readable value/,
        JSON.stringify(result),
      );
  });
});

/** Whether some object in `json` has its own toString or valueOf (the bug the todo test below names). */
function shadowsPrototype(json: unknown): boolean {
  if (Array.isArray(json)) return json.some(shadowsPrototype);
  if (typeof json !== 'object' || json === null) return false;
  return (
    Object.hasOwn(json, 'toString') || Object.hasOwn(json, 'valueOf') || Object.values(json).some(shadowsPrototype)
  );
}

/**
 * Any JSON in place of a part of an answer. fast-check favours keys such as
 * "toString": `withPrototypeKeys: false` leaves out objects with those until
 * the bug below is fixed (then drop the option).
 */
const junkArb = (withPrototypeKeys: boolean) =>
  fc.jsonValue({ maxDepth: 2 }).filter((json) => withPrototypeKeys || !shadowsPrototype(json));

/** JSON shaped like Prometheus answers, each part right or replaced by any JSON. */
function answerLikeArb(withPrototypeKeys: boolean) {
  /** A value as Prometheus answers it, or something in its place. */
  const maybe = <T>(good: fc.Arbitrary<T>) =>
    fc.oneof({ arbitrary: good, weight: 9 }, { arbitrary: junkArb(withPrototypeKeys), weight: 1 });

  const valueTextArb = maybe(
    fc.oneof(fc.constantFrom('NaN', 'NaN', '+Inf', '-Inf', 'Inf', '', 'x'), fc.double().map(String)),
  );
  const pairArb = maybe(fc.tuple(fc.double({ noNaN: true, noDefaultInfinity: true }), valueTextArb));
  const sampleArb = maybe(fc.record({ metric: maybe(fc.dictionary(fc.string(), fc.string())), value: pairArb }));

  return maybe(
    fc.record(
      {
        status: maybe(fc.constantFrom('success', 'success', 'error')),
        errorType: maybe(fc.constantFrom('bad_data', 'timeout', 'execution')),
        error: maybe(fc.string()),
        data: maybe(
          fc.oneof(
            fc.record({ resultType: maybe(fc.constantFrom('scalar', 'matrix', 'string')), result: pairArb }),
            fc.record({
              resultType: maybe(fc.constantFrom('vector', 'vector', 'matrix')),
              result: maybe(
                fc.oneof(
                  { arbitrary: fc.tuple(sampleArb), weight: 3 },
                  fc.constant([]),
                  fc.array(sampleArb, { maxLength: 3 }),
                ),
              ),
            }),
          ),
        ),
      },
      { requiredKeys: ['status', 'data'] },
    ),
  );
}

describe('readQueryResult (property)', () => {
  const wellFormed = (answer: QueryValue) => {
    if (answer.kind === 'value') assert.ok(typeof answer.value === 'number' && !Number.isNaN(answer.value));
    else if (answer.kind === 'error') assert.ok(typeof answer.message === 'string' && answer.message !== '');
    else assert.deepEqual(answer, { kind: 'no_data' });
  };

  it('never throws on any JSON, and answers a value, no data or an error', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (body) => wellFormed(readQueryResult(body))),
      { numRuns: 2000 },
    );
  });

  it('never throws on JSON shaped like a Prometheus answer, and reads each kind of answer', () => {
    const kinds = { value: 0, no_data: 0, error: 0 };
    const numRuns = 5000;
    fc.assert(
      fc.property(answerLikeArb(true), (body) => {
        const answer = readQueryResult(body);
        wellFormed(answer);
        kinds[answer.kind]++;
      }),
      { numRuns },
    );
    // The generator reaches every outcome, not only the errors of broken shapes
    // (about 8% values, 6% no data, 86% errors).
    for (const [kind, count] of Object.entries(kinds))
      assert.ok(count >= 0.02 * numRuns, `${kind}: ${count} of ${numRuns} (floor 2%)`);
  });

  it('reads any number Prometheus can write back as that number', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true }), fc.boolean(), (value, asScalar) => {
        const text = value === Infinity ? '+Inf' : value === -Infinity ? '-Inf' : String(value);
        const answer = readQueryResult(asScalar ? scalar(text) : vector(text));
        assert.deepEqual(answer, { kind: 'value', value: Object.is(value, -0) ? 0 : value });
      }),
      { numRuns: 1000 },
    );
  });
});

// Found writing these tests, and fixed: readQueryResult wrote a resultType
// with String(), which throws on a JSON object whose own "toString" is not a
// function; prometheus.ts's post() reads a 5xx/429 answer inside the
// response's 'end' listener, where the throw was an uncaught exception.
describe('readQueryResult on hostile answers', () => {
  it('never throws, whatever the answer', () => {
    for (const body of [
      '{"status":"success","data":{"resultType":{"toString":1},"result":[]}}',
      '{"status":"success","data":{"resultType":{"toString":{},"valueOf":{}},"result":0}}',
    ]) {
      const answer = readQueryResult(JSON.parse(body));
      assert.equal(answer.kind, 'error');
    }
    fc.assert(
      fc.property(answerLikeArb(true), (body) => {
        readQueryResult(body);
      }),
      { numRuns: 20_000 },
    );
  });
});
