import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  boundValue,
  createLogger,
  logfmtFields,
  logfmtValue,
  MAX_FIELD_CHARS,
  MAX_MESSAGE_CHARS,
  RepeatLimiter,
} from '../../../src/runtime/log/logger.ts';

function capture(format: 'logfmt' | 'json', level: 'debug' | 'info' | 'warn' | 'error') {
  const lines: string[] = [];
  return { lines, logger: createLogger({ format, level, write: (l) => lines.push(l) }) };
}

describe('logger', () => {
  it('writes logfmt with ts, level and msg first, quoting where needed', () => {
    const { lines, logger } = capture('logfmt', 'info');
    logger
      .child({ controller: 'rollout' })
      .info('rolling pod', { pod: 'ingester-zone-a-0', reason: 'revision changed', n: 2 });
    assert.equal(lines.length, 1);
    assert.match(
      lines[0]!,
      /^ts=\d{4}-\d\d-\d\dT\S+Z level=info msg="rolling pod" controller=rollout pod=ingester-zone-a-0 reason="revision changed" n=2\n$/,
    );
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
    assert.equal(
      logfmtFields({ a: 'b', skipped: undefined, err: { type: 'Error', message: 'x y' } }),
      ' a=b err="x y"',
    );
  });

  it('cuts strings from requests to a fixed length, keeping their original length, at every level and in both formats', () => {
    for (const format of ['logfmt', 'json'] as const) {
      const { lines, logger } = capture(format, 'debug');
      const uid = 'u'.repeat(7 * 1024 * 1024);
      logger.child({ name: 'n'.repeat(5000) }).debug(`denied ${'m'.repeat(5000)}`, {
        uid,
        nested: { deep: [uid, uid] },
        err: new Error(`bad ${uid}`),
        list: Array.from({ length: 1000 }, (_, i) => i),
      });
      assert.equal(lines.length, 1);
      assert.ok(lines[0]!.length < 12 * 1024, `${format} line of ${lines[0]!.length} characters`);
      assert.ok(lines[0]!.includes(`…(${uid.length} chars)`));
      assert.ok(lines[0]!.includes('…(1000 items)'));
    }
    assert.equal(boundValue('x'.repeat(MAX_FIELD_CHARS)), 'x'.repeat(MAX_FIELD_CHARS));
    assert.equal(
      boundValue('x'.repeat(MAX_FIELD_CHARS + 1)),
      `${'x'.repeat(MAX_FIELD_CHARS)}…(${MAX_FIELD_CHARS + 1} chars)`,
    );
    assert.equal(
      (boundValue(new Error('y'.repeat(MAX_MESSAGE_CHARS * 2))) as { message: string }).message.length,
      MAX_MESSAGE_CHARS + `…(${MAX_MESSAGE_CHARS * 2} chars)`.length,
    );
  });

  it('rate-limits a repeated warning or error and says how many lines it dropped', () => {
    let now = 0;
    const limiter = new RepeatLimiter({ burst: 3, perSecond: 1, now: () => now });
    assert.deepEqual(
      [1, 2, 3, 4, 5].map(() => limiter.admit('error x')),
      [0, 0, 0, undefined, undefined],
    );
    assert.equal(limiter.admit('error other'), 0, 'each message has its own allowance');
    now += 1000;
    assert.equal(limiter.admit('error x'), 2, 'the next line written counts the two dropped');
    assert.equal(limiter.admit('error x'), undefined);

    const { lines, logger } = capture('logfmt', 'info');
    for (let i = 0; i < 1000; i++) logger.error('request handler failed', { path: `/p${i}` });
    for (let i = 0; i < 100; i++) logger.info('an info line is never dropped');
    assert.ok(
      lines.filter((l) => l.includes('request handler failed')).length <= 25,
      'a burst of about 20, then one a second',
    );
    assert.equal(lines.filter((l) => l.includes('never dropped')).length, 100);
  });
});
