import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { familyOf, labelValuesQuery, metricNames } from './promql.ts';

describe('PromQL metric names', { timeout: 120000 }, () => {
  it('finds selectors, not functions, aggregations, keywords or label names', () => {
    assert.deepEqual(
      metricNames(
        'sum by (namespace, rollout_group) (rate(rollout_operator_group_reconciles_failed_total{job=~"a|b", x!="sum(y)"}[5m])) > 0',
      ),
      ['rollout_operator_group_reconciles_failed_total'],
    );
    assert.deepEqual(
      metricNames('histogram_quantile(0.99, sum without (pod) (rate(a_seconds_bucket[$__rate_interval])))'),
      ['a_seconds_bucket'],
    );
    assert.deepEqual(
      metricNames('max(a) by (namespace) and on (instance) group_left b == bool 1 unless ignoring(x) c offset 5m'),
      ['a', 'b', 'c'],
    );
    assert.deepEqual(metricNames('time() - max(last_ts @ end()) > 1.5e3 or vector(0)'), ['last_ts']);
    assert.deepEqual(
      metricNames('increase(a[1h:5m]) / ignoring (le) group_right (pod) b{namespace=~"${namespace:regex}"} # c'),
      ['a', 'b'],
    );
    assert.deepEqual(
      metricNames('count_values("v", a) + topk(3, b) + quantile(0.5, c) + absent(d) + absent_over_time(e[5m])'),
      ['a', 'b', 'c', 'd', 'e'],
    );
    assert.deepEqual(metricNames('sum(a:recorded:rate5m)'), ['a:recorded:rate5m']);
  });

  it('reads Grafana label_values queries', () => {
    assert.deepEqual(labelValuesQuery('label_values(stateward_leader_is_leader, namespace)'), {
      expr: 'stateward_leader_is_leader',
      label: 'namespace',
    });
    assert.deepEqual(labelValuesQuery('label_values(a{namespace=~"$namespace"}, rollout_group)'), {
      expr: 'a{namespace=~"$namespace"}',
      label: 'rollout_group',
    });
    assert.deepEqual(labelValuesQuery('label_values(namespace)'), { expr: '', label: 'namespace' });
    assert.equal(labelValuesQuery('query_result(a)'), undefined);
  });

  it('maps histogram series to their family', () => {
    const families = new Map([
      ['h_seconds', 'histogram'],
      ['c_total', 'counter'],
      ['g_count', 'gauge'],
    ]);
    assert.equal(familyOf('h_seconds_bucket', families), 'h_seconds');
    assert.equal(familyOf('h_seconds_count', families), 'h_seconds');
    assert.equal(familyOf('c_total', families), 'c_total');
    assert.equal(familyOf('g_count', families), 'g_count');
    assert.equal(familyOf('c_total_sum', families), undefined);
    assert.equal(familyOf('nope', families), undefined);
  });
});
