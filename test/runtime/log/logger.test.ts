import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger, jsonToLogfmt, logfmtValue } from '../../../src/runtime/log/logger.ts';

function capture(format: 'logfmt' | 'json', level: 'debug' | 'info' | 'warn' | 'error') {
  const lines: string[] = [];
  return { lines, logger: createLogger({ format, level, write: (l) => lines.push(l) }) };
}

describe('logger', () => {
  it('writes logfmt with ts, level and msg first, quoting where needed', () => {
    const { lines, logger } = capture('logfmt', 'info');
    logger.child({ controller: 'rollout' }).info('rolling pod', { pod: 'ingester-zone-a-0', reason: 'revision changed', n: 2 });
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /^ts=\d{4}-\d\d-\d\dT\S+Z level=info msg="rolling pod" controller=rollout pod=ingester-zone-a-0 reason="revision changed" n=2\n$/);
  });

  it('honours the level', () => {
    const { lines, logger } = capture('logfmt', 'warn');
    logger.info('hidden');
    logger.debug('hidden');
    logger.warn('shown');
    assert.equal(lines.length, 1);
    assert.ok(!logger.enabled('info'));
  });

  it('writes one JSON object per line in json format, errors by message', () => {
    const { lines, logger } = capture('json', 'debug');
    logger.error('failed', { err: new Error('boom') });
    const record = JSON.parse(lines[0]!) as Record<string, unknown>;
    assert.equal(record['level'], 'error');
    assert.equal(record['msg'], 'failed');
    assert.equal((record['err'] as { message: string }).message, 'boom');
    assert.equal(typeof record['ts'], 'string');
  });

  it('escapes values that would break a logfmt line', () => {
    assert.equal(logfmtValue('plain'), 'plain');
    assert.equal(logfmtValue(''), '""');
    assert.equal(logfmtValue('a "b"'), '"a \\"b\\""');
    assert.equal(logfmtValue('line1\nline2'), '"line1\\nline2"');
    assert.equal(logfmtValue('k=v'), '"k=v"');
    assert.equal(logfmtValue({ a: 1 }), '"{\\"a\\":1}"');
    assert.equal(jsonToLogfmt('{"level":"info","ts":"t","msg":"m","err":{"message":"x y"}}'), 'ts=t level=info msg=m err="x y"\n');
  });
});
