// The test exporter's exposition, as Prometheus's text parser reads it; the
// real scrape is in prometheus.int.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { prometheusRelease } from '../tools/prometheus.ts';
import { MetricExporter, renderTextFormat, TEXT_FORMAT_CONTENT_TYPE } from './metricexporter.ts';

describe('renderTextFormat', () => {
  it('writes one line per series, grouped by name, labels sorted and escaped', () => {
    const text = renderTextFormat([
      { name: 'b_total', labels: { pod: 'p-0', namespace: 'ns' }, value: 3 },
      { name: 'a', labels: {}, value: 0.5 },
      { name: 'b_total', labels: { namespace: 'ns', pod: 'p-1', note: 'say "hi"\\\n' }, value: NaN },
      { name: 'c', labels: { le: '+Inf' }, value: -Infinity },
    ]);
    assert.equal(
      text,
      [
        'a 0.5',
        'b_total{namespace="ns",pod="p-0"} 3',
        'b_total{namespace="ns",note="say \\"hi\\"\\\\\\n",pod="p-1"} NaN',
        'c{le="+Inf"} -Inf',
        '',
      ].join('\n'),
    );
    assert.equal(renderTextFormat([]), '');
  });
});

describe('MetricExporter', () => {
  it('serves what the test set, with the content type Prometheus 3 requires', async () => {
    const exporter = await MetricExporter.start();
    try {
      const pod = { namespace: 'mimir', pod: 'ingester-zone-a-0' };
      exporter.set('requests_total', { ...pod, status_code: '500' }, 2);
      exporter.add('requests_total', { ...pod, status_code: '500' }, 3);
      exporter.add('requests_total', { ...pod, status_code: '200' }, 1);
      exporter.set('other', pod, 1);
      exporter.remove('requests_total', { status_code: '200' });
      assert.equal(exporter.get('requests_total', { status_code: '500', ...pod }), 5, 'label order does not matter');
      const response = await fetch(exporter.url);
      assert.equal(response.headers.get('content-type'), TEXT_FORMAT_CONTENT_TYPE);
      assert.equal(
        await response.text(),
        'other{namespace="mimir",pod="ingester-zone-a-0"} 1\n' +
          'requests_total{namespace="mimir",pod="ingester-zone-a-0",status_code="500"} 5\n',
      );
      exporter.failScrapes(503);
      assert.equal((await fetch(exporter.url)).status, 503);
      assert.equal(exporter.scrapes, 2);
      assert.equal((await fetch(`http://${exporter.target}/other`)).status, 404);
    } finally {
      await exporter.close();
    }
  });

  it('refuses names Prometheus would reject, at the call that sets them', async () => {
    const exporter = await MetricExporter.start();
    try {
      assert.throws(() => exporter.set('http-requests', {}, 1), /not a metric name/);
      assert.throws(() => exporter.set('ok', { 'pod-name': 'x' }, 1), /not a label name/);
      assert.throws(() => exporter.add('ok', { __name__: 'x' }, 1), /not a label name/);
      assert.equal(exporter.render(), '');
    } finally {
      await exporter.close();
    }
  });
});

describe('prometheusRelease', () => {
  it('reads the release a Prometheus module version stands for', () => {
    assert.equal(prometheusRelease('v0.316.0'), '3.16.0');
    assert.equal(prometheusRelease('v0.305.12'), '3.5.12');
    assert.throws(() => prometheusRelease('v3.16.0'), /not a Prometheus module version/);
  });
});
