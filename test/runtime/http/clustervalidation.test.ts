// dskit's HTTP cluster validation as a pure decision (which requests are
// checked, what each problem says), its flag rules, the 511 body as Go writes
// it, and the client's reading of that body: what rollout-operator's servers
// and clients do, without a server.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parseClusterRejection } from '../../../src/runtime/http/clusterlabel.ts';
import {
  checkClusterLabel,
  clusterLabels,
  clusterValidationProblem,
  compileClusterPolicy,
  DEFAULT_EXCLUDED_PATHS,
  rejectionBody,
  splitCsv,
  type ClusterPolicy,
  type ClusterValidationConfig,
} from '../../../src/runtime/http/clustervalidation.ts';
import { params } from '../../fuzz/support.ts';

function config(overrides: Partial<ClusterValidationConfig> = {}): ClusterValidationConfig {
  return {
    enabled: true,
    softValidation: false,
    labels: ['mimir'],
    excludedPaths: DEFAULT_EXCLUDED_PATHS,
    excludedUserAgents: [],
    ...overrides,
  };
}

function policy(overrides: Partial<ClusterValidationConfig> = {}): ClusterPolicy {
  const compiled = compileClusterPolicy(config(overrides));
  if ('error' in compiled) throw new Error(compiled.error);
  return compiled.policy;
}

const request = (path: string, values: string[], extra: { userAgent?: string; statewardOnly?: boolean } = {}) => ({
  path,
  values,
  userAgent: extra.userAgent ?? '',
  statewardOnly: extra.statewardOnly ?? false,
});

describe('cluster validation decision (dskit semantics)', () => {
  it('accepts exactly one X-Cluster holding a cluster label', () => {
    assert.deepEqual(checkClusterLabel(policy(), request('/admission/pod-eviction', ['mimir'])), { valid: true });
    assert.deepEqual(checkClusterLabel(policy({ labels: ['ops', 'mimir'] }), request('/x', ['mimir'])), {
      valid: true,
    });
  });

  it('words each problem as dskit does, the labels as Go prints a []string', () => {
    const p = policy({ labels: ['ops', 'mimir'] });
    assert.deepEqual(checkClusterLabel(p, request('/admission/pod-eviction', [])), {
      valid: false,
      problem: 'missing',
      requestLabel: '',
      message: 'rejected request with empty cluster validation label - it should be one of [ops mimir]',
    });
    assert.deepEqual(
      checkClusterLabel(p, request('/admission/pod-eviction', [''])),
      checkClusterLabel(p, request('/admission/pod-eviction', [])),
      'an empty header is a missing one',
    );
    assert.deepEqual(checkClusterLabel(p, request('/x', ['prod "eu"'])), {
      valid: false,
      problem: 'wrong',
      requestLabel: 'prod "eu"',
      message: 'rejected request with wrong cluster validation label "prod \\"eu\\"" - it should be one of [ops mimir]',
    });
    assert.deepEqual(checkClusterLabel(p, request('/x', ['mimir', 'mimir'])), {
      valid: false,
      problem: 'several',
      requestLabel: '',
      message:
        'rejected request: request header should contain exactly 1 value for key "X-Cluster", but it contains [mimir mimir]',
      cause: 'request header should contain exactly 1 value for key "X-Cluster", but it contains [mimir mimir]',
    });
  });

  it('leaves out any path containing /metrics, /debug/pprof, /ready or /<excluded path>, anywhere in it, and nothing else', () => {
    const p = policy();
    for (const path of [
      '/metrics',
      '/debug/pprof/heap',
      '/ready',
      '/prefix/metrics',
      '/readyz',
      '/metricsfoo',
      '/admission/no-downscale',
      '/admission/prepare-downscale',
      '/x/admission/no-downscale/y',
    ]) {
      assert.deepEqual(checkClusterLabel(p, request(path, [])), { valid: true }, path);
    }
    for (const path of [
      '/',
      '/healthz',
      '/admission/pod-eviction',
      '/admission/zpdb-validation',
      '/admission/no-downscal',
      '/debug/vars',
      '/status',
    ]) {
      assert.equal(checkClusterLabel(p, request(path, [])).valid, false, path);
    }
    // A path flag replaces rollout-operator's default; dskit quotes each path, so it is matched literally.
    const own = policy({ excludedPaths: ['admission/pod-eviction', 'a.c'] });
    assert.equal(checkClusterLabel(own, request('/admission/pod-eviction', [])).valid, true);
    assert.equal(checkClusterLabel(own, request('/admission/no-downscale', [])).valid, false);
    assert.equal(checkClusterLabel(own, request('/abc', [])).valid, false);
    assert.equal(checkClusterLabel(own, request('/a.c', [])).valid, true);
    // An empty element ("a,,b") is an empty alternative: every path is left out, as in dskit.
    assert.equal(checkClusterLabel(policy({ excludedPaths: splitCsv('a,,b') }), request('/anything', [])).valid, true);
  });

  it('leaves out requests whose User-Agent matches the excluded agents, a Go regular expression (a|b), unanchored', () => {
    const p = policy({ excludedUserAgents: ['^kube-apiserver-admission$', 'prometheus/\\d+'] });
    assert.equal(
      checkClusterLabel(p, request('/admission/pod-eviction', [], { userAgent: 'kube-apiserver-admission' })).valid,
      true,
    );
    assert.equal(checkClusterLabel(p, request('/x', [], { userAgent: 'my prometheus/2.53 scraper' })).valid, true);
    assert.equal(checkClusterLabel(p, request('/x', [], { userAgent: 'kube-apiserver-admission/1.36' })).valid, false);
    assert.equal(checkClusterLabel(p, request('/x', [], { userAgent: '' })).valid, false);
    assert.equal(
      checkClusterLabel(policy(), request('/x', [], { userAgent: 'kube-apiserver-admission' })).valid,
      false,
      'none by default',
    );
  });

  it('never checks a path only Stateward serves', () => {
    assert.deepEqual(checkClusterLabel(policy(), request('/healthz', ['wrong'], { statewardOnly: true })), {
      valid: true,
    });
  });

  it('holds for any label and path: a label of the cluster passes, any other non-empty one is named in the refusal', () => {
    const label = fc.string({ minLength: 1, maxLength: 20 });
    const path = fc
      .stringMatching(/^\/[a-z/_-]{0,30}$/)
      .filter((p) => !/\/(metrics|debug\/pprof|ready|admission\/no-downscale|admission\/prepare-downscale)/.test(p));
    fc.assert(
      fc.property(fc.uniqueArray(label, { minLength: 1, maxLength: 3 }), label, path, (labels, sent, p) => {
        const verdict = checkClusterLabel(policy({ labels }), request(p, [sent]));
        if (labels.includes(sent)) assert.deepEqual(verdict, { valid: true });
        else assert.ok(!verdict.valid && verdict.problem === 'wrong' && verdict.requestLabel === sent);
      }),
      params(300, 2101),
    );
  });

  it('holds for any headers: an excluded path is never refused', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('/metrics', '/ready', '/debug/pprof/', '/admission/no-downscale'),
        fc.stringMatching(/^[a-z/]{0,10}$/),
        fc.array(fc.string(), { maxLength: 3 }),
        (excluded, prefix, values) => {
          assert.deepEqual(
            checkClusterLabel(policy(), request(`/${prefix}${excluded}`.replace(/^\/\//, '/'), values)),
            { valid: true },
          );
        },
      ),
      params(200, 2102),
    );
  });
});

describe('cluster validation flags', () => {
  it('refuses what rollout-operator refuses to start with', () => {
    assert.equal(
      clusterValidationProblem(config({ enabled: false, softValidation: true })),
      '-server.cluster-validation.http.soft-validation: soft validation can be enabled only if cluster validation is enabled (-server.cluster-validation.http.enabled)',
    );
    assert.equal(clusterValidationProblem(config({ softValidation: true })), undefined);
    assert.match(
      clusterValidationProblem(config({ excludedUserAgents: ['(unclosed'] })) ?? '',
      /excluded-user-agents: error parsing regexp: missing closing \)/,
    );
    // dskit compiles the agents only when validation is on.
    assert.equal(clusterValidationProblem(config({ enabled: false, excludedUserAgents: ['(unclosed'] })), undefined);
  });

  it('reads comma-separated values as dskit does, and takes the labels from the namespaces', () => {
    assert.deepEqual(splitCsv(''), []);
    assert.deepEqual(splitCsv('a, b,,c'), ['a', ' b', '', 'c']);
    assert.deepEqual(clusterLabels('mimir', ['mimir']), ['mimir']);
    assert.deepEqual(clusterLabels('stateward', ['a', 'b', 'a']), ['stateward', 'a', 'b']);
    assert.deepEqual(clusterLabels('stateward', ['*']), ['stateward']);
  });
});

describe('the 511 body', () => {
  it('is what Go writes: HTML characters escaped, no trailing newline', () => {
    assert.equal(
      rejectionBody(
        'rejected request with empty cluster validation label - it should be one of [mimir]',
        '<unknown-route>',
      ),
      '{"cluster_validation_error_message":"rejected request with empty cluster validation label - it should be one of [mimir]","route":"\\u003cunknown-route\\u003e"}',
    );
    assert.equal(rejectionBody('a & b', 'r'), '{"cluster_validation_error_message":"a \\u0026 b","route":"r"}');
  });

  it('is read back by the client side as the same message and route, for any strings', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (message, route) => {
        assert.deepEqual(parseClusterRejection(511, 'application/json', rejectionBody(message, route)), {
          message,
          route,
        });
      }),
      params(300, 2103),
    );
  });

  it('is a rejection only with status 511, Content-Type exactly application/json and a JSON object (or null) of strings', () => {
    const body = rejectionBody('m', 'r');
    assert.equal(parseClusterRejection(500, 'application/json', body), undefined);
    assert.equal(parseClusterRejection(511, 'application/json; charset=utf-8', body), undefined);
    assert.equal(parseClusterRejection(511, null, body), undefined);
    assert.equal(parseClusterRejection(511, 'application/json', 'not json'), undefined);
    assert.equal(parseClusterRejection(511, 'application/json', '["m"]'), undefined);
    assert.equal(parseClusterRejection(511, 'application/json', '{"route":5}'), undefined);
    assert.deepEqual(parseClusterRejection(511, 'application/json', 'null'), { message: '', route: '' });
    assert.deepEqual(
      parseClusterRejection(511, 'application/json', '{"Cluster_Validation_Error_Message":"m","ROUTE":"r","other":1}'),
      { message: 'm', route: 'r' },
      "Go's decoder matches field names without regard to case",
    );
  });
});
