// The controller runner with the real work queue on a fake clock: what a
// reconciler's results and errors come to, and what a leadership term
// starts with, keeps, and leaves behind.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { FakeClock, flushMicrotasks } from '../../../src/runtime/clock.ts';
import { Controller, type ControllerOptions, type Term } from '../../../src/runtime/controller/runner.ts';
import { NOT_LEADING_RETRY_MS, type HandlerResult } from '../../../src/runtime/workqueue/workqueue.ts';
import { recordingLogger } from '../../support/logger.ts';

interface Harness {
  clock: FakeClock;
  registry: Registry;
  controller: Controller;
  /** Every reconcile: key and monotonic time. */
  calls: [string, number][];
  lines: ReturnType<typeof recordingLogger>['lines'];
  leading: { value: boolean };
}

function harness(
  reconcile: (key: string, clock: FakeClock) => Promise<HandlerResult> | HandlerResult,
  options: Partial<Omit<ControllerOptions, 'runtime' | 'reconciler' | 'failures'>> = {},
): Harness {
  const clock = new FakeClock(0);
  const registry = new Registry();
  const { lines, log } = recordingLogger();
  const calls: [string, number][] = [];
  const leading = { value: true };
  const controller = new Controller({
    runtime: { clock, registry, isLeader: () => leading.value },
    reconciler: {
      reconcile: (key) => {
        calls.push([key, clock.monotonic()]);
        return reconcile(key, clock);
      },
    },
    workers: 2,
    failures: { logger: log, message: 'reconcile failed; retrying', keyField: 'thing' },
    enqueueAll: () => {},
    ...options,
  });
  return { clock, registry, controller, calls, lines, leading };
}

describe('Controller', { timeout: 10_000 }, () => {
  it('reconciles every key enqueueAll adds when a term starts, and what add() queues while it runs', async () => {
    const h = harness(() => undefined, { enqueueAll: (term) => ['a', 'b'].forEach((k) => term.add(k)) });
    assert.equal(h.controller.running, false);
    h.controller.add('before'); // no term: dropped, the term's enqueueAll covers it
    const leadership = new AbortController();
    const term = h.controller.run(leadership.signal);
    assert.equal(h.controller.running, true);
    h.controller.add('c');
    await h.clock.advance(10);
    assert.deepEqual(
      h.calls.map(([k]) => k),
      ['a', 'b', 'c'],
    );
    leadership.abort();
    await term;
    assert.equal(h.controller.running, false);
  });

  it('retries a failed reconcile with exponential back-off, logging each failure with its key', async () => {
    let failures = 3;
    const h = harness((key) => {
      if (failures-- > 0) throw new Error(`boom ${key}`);
    });
    const leadership = new AbortController();
    const term = h.controller.run(leadership.signal);
    h.controller.add('flaky');
    await h.clock.advance(1000);
    // client-go's per-key limiter: 5 ms, then 10, then 20.
    assert.deepEqual(h.calls, [
      ['flaky', 0],
      ['flaky', 5],
      ['flaky', 15],
      ['flaky', 35],
    ]);
    assert.deepEqual(
      h.lines.map((l) => [l.level, l.msg, l.fields]),
      Array.from({ length: 3 }, () => ['warn', 'reconcile failed; retrying', { thing: 'flaky', err: 'boom flaky' }]),
    );
    // Forgotten after the success: the next failure starts at 5 ms again.
    failures = 1;
    h.controller.add('flaky');
    await h.clock.advance(1000);
    assert.deepEqual(h.calls.slice(4), [
      ['flaky', 1000],
      ['flaky', 1005],
    ]);
    leadership.abort();
    await term;
  });

  it('honours requeueAfterMs, and requeue: true backs off without a failure', async () => {
    let polls = 2;
    let requeues = 2;
    const h = harness((key) => {
      if (key === 'poll' && polls-- > 0) return { requeueAfterMs: 1000 };
      if (key === 'again' && requeues-- > 0) return { requeue: true };
      return undefined;
    });
    const leadership = new AbortController();
    const term = h.controller.run(leadership.signal);
    h.controller.add('poll');
    h.controller.add('again');
    await h.clock.advance(999);
    assert.deepEqual(h.calls, [
      ['poll', 0],
      ['again', 0],
      ['again', 5],
      ['again', 15],
    ]);
    await h.clock.advance(5000);
    assert.deepEqual(
      h.calls.filter(([k]) => k === 'poll'),
      [
        ['poll', 0],
        ['poll', 1000],
        ['poll', 2000],
      ],
    );
    assert.deepEqual(h.lines, [], 'a requested requeue is not a failure');
    leadership.abort();
    await term;
  });

  it('does not reconcile while this replica does not lead, and does once it leads again', async () => {
    const h = harness(() => undefined);
    h.leading.value = false;
    const leadership = new AbortController();
    const term = h.controller.run(leadership.signal);
    h.controller.add('workload');
    await h.clock.advance(NOT_LEADING_RETRY_MS * 3);
    assert.deepEqual(h.calls, []);
    h.leading.value = true;
    await h.clock.advance(NOT_LEADING_RETRY_MS);
    assert.deepEqual(h.calls, [['workload', NOT_LEADING_RETRY_MS * 4]]);
    leadership.abort();
    await term;
  });

  it('ends a term only once the work in hand is done, then runs afterTerm once', async () => {
    const order: string[] = [];
    let release!: () => void;
    const h = harness(
      (key) => {
        order.push(`reconcile ${key}`);
        return new Promise<void>((resolve) => (release = resolve)).then(() => void order.push(`done ${key}`));
      },
      {
        workers: 1,
        afterTerm: () => void order.push('afterTerm'),
      },
    );
    const leadership = new AbortController();
    let ended = false;
    const term = h.controller.run(leadership.signal).then(() => (ended = true));
    h.controller.add('slow');
    await h.clock.advance(0);
    leadership.abort();
    h.controller.add('late'); // the queue is shutting down: dropped
    await h.clock.advance(1000);
    assert.equal(ended, false, 'still finishing the reconcile in hand');
    release();
    await term;
    assert.deepEqual(order, ['reconcile slow', 'done slow', 'afterTerm']);
  });

  it('runs the alongside task for the term and waits for it', async () => {
    const resyncs: number[] = [];
    const h = harness(() => undefined, {
      alongside: async (term: Term) => {
        while (!term.signal.aborted) {
          await h.clock.sleep(100, term.signal).catch(() => undefined);
          if (term.signal.aborted) return;
          resyncs.push(h.clock.monotonic());
          term.add('group');
        }
      },
    });
    const leadership = new AbortController();
    const term = h.controller.run(leadership.signal);
    await h.clock.advance(350);
    assert.deepEqual(resyncs, [100, 200, 300]);
    assert.deepEqual(h.calls, [
      ['group', 100],
      ['group', 200],
      ['group', 300],
    ]);
    leadership.abort();
    await term;
  });

  it('never runs work of an old term in a new one', async () => {
    // A failure's retry and a delayed requeue of term 1 are pending when it ends.
    const h = harness((key) => {
      if (key === 'failing') throw new Error('no');
      if (key === 'polling') return { requeueAfterMs: 1000 };
      return undefined;
    });
    const first = new AbortController();
    const term1 = h.controller.run(first.signal);
    h.controller.add('failing');
    h.controller.add('polling');
    await h.clock.advance(1);
    first.abort();
    await term1;
    h.controller.add('between terms'); // no term runs: dropped
    const second = new AbortController();
    const term2 = h.controller.run(second.signal);
    await h.clock.advance(60_000);
    assert.deepEqual(h.calls, [
      ['failing', 0],
      ['polling', 0],
    ]);
    second.abort();
    await term2;
  });

  it("leaves a later term's queue and state alone when an earlier term ends after it began", async () => {
    // LeadershipTerms never lets this happen; the runner holds all the same.
    let afterTerms = 0;
    let release!: () => void;
    const h = harness((key) => (key === 'slow' ? new Promise<void>((resolve) => (release = resolve)) : undefined), {
      afterTerm: () => void afterTerms++,
    });
    const first = new AbortController();
    const term1 = h.controller.run(first.signal);
    h.controller.add('slow');
    await h.clock.advance(0);
    first.abort();
    const second = new AbortController();
    const term2 = h.controller.run(second.signal);
    release();
    await term1;
    assert.equal(afterTerms, 0, "the old term's cleanup did not run over the new term");
    assert.equal(h.controller.running, true);
    h.controller.add('new');
    await h.clock.advance(10);
    assert.deepEqual(h.calls.at(-1), ['new', 0]);
    second.abort();
    await term2;
    assert.equal(afterTerms, 1);
  });

  it('measures the queue under its name, and an unnamed queue not at all', async () => {
    const named = harness(() => undefined, { queueName: 'things' });
    const leadership = new AbortController();
    const term = named.controller.run(leadership.signal);
    named.controller.add('a');
    await named.clock.advance(10);
    const adds = await named.registry.getSingleMetric('workqueue_adds_total')!.get();
    assert.deepEqual(
      adds.values.map((v) => [v.labels.name, v.value]),
      [['things', 1]],
    );
    leadership.abort();
    await term;

    const unnamed = harness(() => undefined);
    const other = new AbortController();
    const term2 = unnamed.controller.run(other.signal);
    unnamed.controller.add('a');
    await flushMicrotasks();
    assert.equal(unnamed.registry.getSingleMetric('workqueue_adds_total'), undefined);
    other.abort();
    await term2;
  });

  it('refuses a worker count that is not a positive integer', () => {
    assert.throws(() => harness(() => undefined, { workers: 0 }), RangeError);
  });
});
