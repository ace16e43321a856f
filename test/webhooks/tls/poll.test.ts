import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../src/runtime/clock.ts';
import { KubeApiError } from '../../../src/runtime/kube/errors.ts';
import { nopLogger } from '../../../src/runtime/log/logger.ts';
import { pollCertificateSecret, SECRET_POLL_MS } from '../../../src/webhooks/tls/poll.ts';

function poller(state: { refused: boolean; version: string | undefined; getRefused?: boolean }) {
  const clock = new FakeClock();
  let reads = 0;
  let rechecks = 0;
  const stop = pollCertificateSecret({
    watchRefused: () => state.refused,
    read: () => {
      reads++;
      if (state.getRefused)
        return Promise.reject(
          new KubeApiError({ code: 403, reason: 'Forbidden', message: 'no', method: 'GET', path: '/' }),
        );
      return Promise.resolve(state.version);
    },
    recheck: () => void rechecks++,
    clock,
    log: nopLogger,
  });
  return { clock, stop, reads: () => reads, rechecks: () => rechecks };
}

describe('pollCertificateSecret', () => {
  it('makes no request while the watch works', async () => {
    const p = poller({ refused: false, version: '1' });
    await p.clock.advance(SECRET_POLL_MS * 5);
    assert.equal(p.reads(), 0);
    p.stop();
  });

  it('while the watch is refused: rechecks within one interval of a change or a delete', async () => {
    const state: { refused: boolean; version: string | undefined } = { refused: true, version: '1' };
    const p = poller(state);
    await p.clock.advance(SECRET_POLL_MS * 2);
    assert.equal(p.rechecks(), 0, 'unchanged: nothing to do');
    state.version = undefined;
    await p.clock.advance(SECRET_POLL_MS);
    assert.equal(p.rechecks(), 1, 'deleted: rechecked (ensure issues it anew)');
    state.version = '7';
    await p.clock.advance(SECRET_POLL_MS);
    assert.equal(p.rechecks(), 2, 'changed: rechecked');
    await p.clock.advance(SECRET_POLL_MS);
    assert.equal(p.rechecks(), 2);
    p.stop();
    await p.clock.advance(SECRET_POLL_MS * 3);
    assert.equal(p.reads(), 5);
  });

  it('stops after a refused get: one refused request, not one a minute', async () => {
    const p = poller({ refused: true, version: '1', getRefused: true });
    await p.clock.advance(SECRET_POLL_MS * 10);
    assert.equal(p.reads(), 1);
    p.stop();
  });
});
