// Leadership terms of one replica never overlap: a lease lost and won back
// while the controllers of the lost term are still finishing starts the new
// term only once they have. The controllers here stand in for any capability's
// lead(): they record when they start and stop, and stop only when released.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeadershipTerms } from '../../../src/runtime/leaderelection/terms.ts';

const turn = () => new Promise((resolve) => setImmediate(resolve));

/** The first term's controllers start and stop, then the second term's start. */
const AFTER_FIRST_TERM_THEN_SECOND = [
  'start rollout 1',
  'start restarts 1',
  'stop rollout 1',
  'stop restarts 1',
  'start rollout 2',
  'start restarts 2',
];

function controllers() {
  const log: string[] = [];
  const releases: (() => void)[] = [];
  let term = 0;
  const terms = new LeadershipTerms((signal) => {
    const n = ++term;
    return ['rollout', 'restarts'].map((name) => {
      log.push(`start ${name} ${n}`);
      return new Promise<void>((resolve) => {
        // Like a controller with work in hand: it stops some time after its signal aborts.
        signal.addEventListener('abort', () => releases.push(() => (log.push(`stop ${name} ${n}`), resolve())), {
          once: true,
        });
      });
    });
  });
  const releaseAll = () => releases.splice(0).forEach((release) => release());
  /** Ends a term's leadership and lets its controllers stop. */
  const end = async (leadership: AbortController, term: Promise<void>) => {
    leadership.abort();
    await turn();
    releaseAll();
    await term;
  };
  return { log, terms, releaseAll, end };
}

describe('leadership terms', () => {
  it('starts a term won back at once only after the lost term has finished its work', async () => {
    const { log, terms, releaseAll, end } = controllers();
    const first = new AbortController();
    const firstTerm = terms.begin(first.signal);
    await turn();
    first.abort();
    let waited = false;
    const second = new AbortController();
    const secondTerm = terms.begin(second.signal, () => (waited = true));
    await turn();
    assert.ok(waited, 'told that it waits');
    assert.deepEqual(log, ['start rollout 1', 'start restarts 1'], 'the new term has not started beside the old');
    releaseAll();
    await firstTerm;
    await turn();
    assert.deepEqual(log, AFTER_FIRST_TERM_THEN_SECOND);
    await end(second, secondTerm);
  });

  it('never starts a term whose leadership ended while it waited', async () => {
    const { log, terms, releaseAll, end } = controllers();
    const first = new AbortController();
    const firstTerm = terms.begin(first.signal);
    await turn();
    first.abort();
    const second = new AbortController();
    const secondTerm = terms.begin(second.signal);
    second.abort();
    const third = new AbortController();
    const thirdTerm = terms.begin(third.signal);
    await turn();
    releaseAll();
    await Promise.all([firstTerm, secondTerm]);
    await turn();
    assert.deepEqual(log, AFTER_FIRST_TERM_THEN_SECOND);
    await end(third, thirdTerm);
  });

  it('starts at once when no term is running, without waiting', async () => {
    const { log, terms, end } = controllers();
    let waited = false;
    const only = new AbortController();
    const term = terms.begin(only.signal, () => (waited = true));
    await turn();
    assert.equal(waited, false);
    assert.deepEqual(log, ['start rollout 1', 'start restarts 1']);
    await end(only, term);
  });
});
