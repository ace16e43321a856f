import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { reportFaults } from '../../src/runtime/faults.ts';
import { createLogger } from '../../src/runtime/log/logger.ts';

function setup() {
  const emitter = new EventEmitter();
  const lines: string[] = [];
  const stops: string[] = [];
  const registry = new Registry();
  const logger = createLogger({ format: 'logfmt', level: 'info', write: (l) => lines.push(l) });
  const state = reportFaults(emitter, { logger, registry, stop: (reason) => stops.push(reason), graceMs: 10 });
  return { emitter, lines, stops, registry, state };
}

describe('errors nobody caught', () => {
  it('an unhandled rejection is logged and counted, and the process keeps serving', async () => {
    const { emitter, lines, stops, registry, state } = setup();
    emitter.emit('unhandledRejection', new Error('lost write'));
    assert.deepEqual(stops, []);
    assert.equal(state.happened, false);
    assert.match(lines.join(''), /level=error msg="unhandled promise rejection[^"]*" err="lost write"/);
    assert.match(await registry.metrics(), /stateward_unhandled_errors_total\{kind="rejection"\} 1/);
  });

  it('an uncaught exception is logged and counted, and stops the operator to exit 1', async () => {
    const { emitter, lines, stops, registry, state } = setup();
    emitter.emit('uncaughtException', new TypeError('half done'));
    assert.deepEqual(stops, ['uncaught exception']);
    assert.equal(state.happened, true);
    assert.match(lines.join(''), /level=error msg="uncaught exception[^"]*" err="half done"/);
    assert.match(await registry.metrics(), /stateward_unhandled_errors_total\{kind="exception"\} 1/);
  });
});
