import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { FakeClock, flushMicrotasks } from '../../../src/runtime/clock.ts';
import { ItemExponentialFailureRateLimiter } from '../../../src/runtime/workqueue/ratelimiter.ts';
import {
  NOT_LEADING_RETRY_MS,
  WorkQueue,
  runWorkers,
  workQueueMetrics,
} from '../../../src/runtime/workqueue/workqueue.ts';

/** Takes every key currently queued (each left in processing). */
async function drainNow(queue: WorkQueue): Promise<string[]> {
  const keys: string[] = [];
  while (queue.len() > 0) keys.push((await queue.get())!);
  return keys;
}

describe('WorkQueue', { timeout: 10_000 }, () => {
  it('de-duplicates keys added before processing, FIFO by first add', async () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    for (const key of ['a', 'b', 'a', 'c', 'b', 'a']) queue.add(key);
    assert.equal(queue.len(), 3);
    assert.deepEqual(await drainNow(queue), ['a', 'b', 'c']);
  });

  it('get() waits for an add', async () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    let got: string | undefined;
    const getting = queue.get().then((k) => (got = k));
    await flushMicrotasks();
    assert.equal(got, undefined);
    queue.add('x');
    await getting;
    assert.equal(got, 'x');
    assert.equal(queue.processingCount(), 1);
  });

  it('never hands out a key being processed; an add meanwhile requeues it on done', async () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    queue.add('a');
    assert.equal(await queue.get(), 'a');
    queue.add('a');
    queue.add('a');
    queue.add('b');
    assert.equal(queue.len(), 1, 'only b is ready');
    assert.equal(await queue.get(), 'b');
    let second: string | undefined;
    const waiting = queue.get().then((k) => (second = k));
    await flushMicrotasks();
    assert.equal(second, undefined, 'a is not handed out while in processing');
    queue.done('a');
    await waiting;
    assert.equal(second, 'a', 'processed again, once');
    queue.done('a');
    queue.done('b');
    assert.equal(queue.len(), 0);
    assert.equal(queue.processingCount(), 0);
  });

  it('done() without a re-add does not requeue; done() of an unknown key is ignored', async () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    queue.add('a');
    const key = (await queue.get())!;
    queue.done(key);
    queue.done(key);
    queue.done('never-added');
    assert.equal(queue.len(), 0);
    assert.equal(queue.processingCount(), 0);
  });

  it('addAfter adds when the delay elapses', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock });
    queue.addAfter('a', 100);
    await clock.advance(99);
    assert.equal(queue.len(), 0);
    await clock.advance(1);
    assert.equal(queue.len(), 1);
  });

  it('addAfter keeps only the earliest pending delay per key', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock });
    queue.addAfter('a', 500);
    queue.addAfter('a', 200); // earlier: replaces
    queue.addAfter('a', 300); // later: dropped
    assert.equal(clock.pending, 1);
    await clock.advance(200);
    assert.equal(queue.len(), 1);
    assert.deepEqual(await drainNow(queue), ['a']);
    queue.done('a');
    await clock.advance(1000);
    assert.equal(queue.len(), 0, 'no later delayed add survived');
  });

  it('a wall clock stepping forward does not stall a shorter delayed add behind a longer one', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock });
    queue.addAfter('a', 30_000);
    clock.step(60_000);
    queue.addAfter('a', 1000); // earlier in real time: replaces the 30 s one
    await clock.advance(1000);
    assert.equal(queue.len(), 1, 'added after 1 s, not after 30 s');
  });

  it('a wall clock stepping backwards does not let a longer delayed add replace a shorter one', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock });
    queue.addAfter('a', 1000);
    clock.step(-60_000);
    queue.addAfter('a', 30_000); // later in real time: dropped
    await clock.advance(1000);
    assert.equal(queue.len(), 1, 'added after 1 s, not after 30 s');
  });

  it('addAfter with no delay adds at once', () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    queue.addAfter('a', 0);
    queue.addAfter('b', -5);
    assert.equal(queue.len(), 2);
  });

  it('addRateLimited backs off per key; forget resets', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(10, 1000) });
    queue.addRateLimited('a');
    assert.equal(queue.numRequeues('a'), 1);
    await clock.advance(10);
    assert.deepEqual(await drainNow(queue), ['a']);
    queue.done('a');
    queue.addRateLimited('a'); // 20ms now
    await clock.advance(19);
    assert.equal(queue.len(), 0);
    await clock.advance(1);
    assert.equal(queue.len(), 1);
    queue.forget('a');
    assert.equal(queue.numRequeues('a'), 0);
  });

  it('uses the default controller rate limiter when none is given', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock });
    queue.addRateLimited('a');
    await clock.advance(4);
    assert.equal(queue.len(), 0);
    await clock.advance(1);
    assert.equal(queue.len(), 1, 'first retry after 5ms');
  });

  it('shutDown drops new and delayed adds, drains what is queued, then gives undefined', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock });
    queue.add('a');
    queue.add('b');
    queue.addAfter('later', 10);
    queue.shutDown();
    queue.add('c');
    queue.addRateLimited('d');
    assert.ok(queue.isShuttingDown());
    assert.equal(clock.pending, 0);
    assert.equal(await queue.get(), 'a');
    assert.equal(await queue.get(), 'b');
    assert.equal(await queue.get(), undefined);
    await clock.advance(100);
    assert.equal(queue.len(), 0);
  });

  it('shutDown releases getters that are waiting', async () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    const waiting = [queue.get(), queue.get()];
    queue.shutDown();
    assert.deepEqual(await Promise.all(waiting), [undefined, undefined]);
  });

  it('shutDownWithDrain resolves only when in-flight and queued keys are done', async () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    queue.add('a');
    queue.add('b');
    const a = (await queue.get())!;
    queue.add(a); // dirty while processing: must be processed again before drained
    let drained = false;
    const draining = queue.shutDownWithDrain().then(() => (drained = true));
    queue.done(a);
    await flushMicrotasks();
    assert.equal(drained, false);
    assert.deepEqual(await drainNow(queue), ['b', 'a']);
    queue.done('b');
    await flushMicrotasks();
    assert.equal(drained, false, 'a is still in processing');
    queue.done('a');
    await draining;
    assert.ok(drained);
  });

  it('shutDownWithDrain rejects with the signal reason if it aborts first', async () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    queue.add('a');
    await queue.get();
    const controller = new AbortController();
    const draining = queue.shutDownWithDrain(controller.signal);
    controller.abort(new Error('grace period over'));
    await assert.rejects(draining, /grace period over/);
  });

  it('never hands a key in processing to another worker, and processes every add (property)', async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('add' as const), key: fc.integer({ min: 0, max: 4 }) }),
      fc.record({ kind: fc.constant('step' as const), worker: fc.integer({ min: 0, max: 3 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 80 }), async (ops) => {
        const queue = new WorkQueue({ clock: new FakeClock(0) });
        type Worker = { state: 'idle' } | { state: 'waiting' } | { state: 'holding'; key: string };
        const workers: Worker[] = Array.from({ length: 4 }, () => ({ state: 'idle' }));
        const held = new Set<string>();
        // Keys added since they were last handed out: the handler has not seen the latest add.
        const unseen = new Set<string>();
        const violations: string[] = [];
        const startGet = (w: number) => {
          workers[w] = { state: 'waiting' };
          void queue.get().then((key) => {
            if (key === undefined) {
              workers[w] = { state: 'idle' };
              return;
            }
            if (held.has(key)) violations.push(`${key} handed out twice`);
            held.add(key);
            unseen.delete(key);
            workers[w] = { state: 'holding', key };
          });
        };
        const step = (w: number) => {
          const worker = workers[w]!;
          if (worker.state === 'idle') startGet(w);
          else if (worker.state === 'holding') {
            held.delete(worker.key);
            workers[w] = { state: 'idle' };
            queue.done(worker.key);
          }
        };
        for (const o of ops) {
          if (o.kind === 'add') {
            queue.add(`k${o.key}`);
            unseen.add(`k${o.key}`);
          } else step(o.worker);
          await Promise.resolve();
          await Promise.resolve();
        }
        // Finish: every worker keeps stepping until the queue is drained.
        queue.shutDown();
        for (let round = 0; round < 20 && workers.some((w) => w.state !== 'idle' || queue.len() > 0); round++) {
          for (let w = 0; w < workers.length; w++) if (workers[w]!.state === 'holding') step(w);
          await flushMicrotasks();
          for (let w = 0; w < workers.length; w++) if (workers[w]!.state === 'idle' && queue.len() > 0) startGet(w);
          await flushMicrotasks();
        }
        assert.deepEqual(violations, []);
        assert.deepEqual([...unseen], [], 'every add was followed by a hand-out');
        assert.equal(queue.len(), 0);
        assert.equal(queue.processingCount(), 0);
      }),
      { numRuns: 200 },
    );
  });
});

describe('runWorkers', { timeout: 10_000 }, () => {
  it('forgets on success, retries rate-limited on error, requeues after a delay on request', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(100, 10_000) });
    const calls: [string, number][] = [];
    const errors: [string, unknown][] = [];
    let failuresLeft = 2;
    let requeues = 1;
    const running = runWorkers(
      queue,
      2,
      (key) => {
        calls.push([key, clock.now()]);
        if (key === 'flaky' && failuresLeft-- > 0) throw new Error(`boom ${failuresLeft}`);
        if (key === 'poll' && requeues-- > 0) return { requeueAfterMs: 1000 };
        return undefined;
      },
      { onError: (key, error) => errors.push([key, error]) },
    );
    queue.add('flaky');
    queue.add('poll');
    await clock.advance(5000);
    assert.deepEqual(calls, [
      ['flaky', 0],
      ['poll', 0],
      ['flaky', 100],
      ['flaky', 300],
      ['poll', 1000],
    ]);
    assert.equal(errors.length, 2);
    assert.deepEqual(
      errors.map(([k]) => k),
      ['flaky', 'flaky'],
    );
    assert.equal(queue.numRequeues('flaky'), 0, 'forgotten after the success');
    assert.equal(queue.numRequeues('poll'), 0);
    queue.shutDown();
    await running;
  });

  it('runs at most `concurrency` handlers and never one key twice at once', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock });
    let active = 0;
    let maxActive = 0;
    const activeKeys = new Set<string>();
    let overlap = false;
    let processed = 0;
    const running = runWorkers(queue, 3, async (key) => {
      if (activeKeys.has(key)) overlap = true;
      activeKeys.add(key);
      maxActive = Math.max(maxActive, ++active);
      await clock.sleep(10);
      if (key === 'hot' && processed < 3) queue.add('hot'); // re-added while running
      processed++;
      active--;
      activeKeys.delete(key);
    });
    for (const key of ['hot', 'a', 'b', 'c', 'd', 'e']) queue.add(key);
    await clock.advance(1000);
    assert.equal(maxActive, 3);
    assert.equal(overlap, false);
    assert.ok(processed >= 7, `processed ${processed}`);
    await queue.shutDownWithDrain();
    await running;
  });

  it('keeps going when onError itself throws, and stops after shutdown', async () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    const seen: string[] = [];
    const running = runWorkers(
      queue,
      1,
      (key) => {
        seen.push(key);
        return Promise.reject(new Error('no'));
      },
      {
        onError: () => {
          throw new Error('reporter broke');
        },
      },
    );
    queue.add('a');
    queue.add('b');
    queue.shutDown();
    await running;
    assert.deepEqual(seen, ['a', 'b']);
  });

  it('puts a key taken while not leading back for a retry, and handles it once leading again', async () => {
    // A lease renewal answered late: not leading for a moment inside a term that goes on.
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock });
    let leading = false;
    const calls: [string, number][] = [];
    const running = runWorkers(queue, 2, (key) => void calls.push([key, clock.now()]), {
      whileLeading: () => leading,
    });
    queue.add('workload');
    await clock.advance(NOT_LEADING_RETRY_MS * 3);
    assert.deepEqual(calls, [], 'never handled while not leading');
    leading = true;
    await clock.advance(NOT_LEADING_RETRY_MS);
    assert.deepEqual(calls, [['workload', NOT_LEADING_RETRY_MS * 4]], 'handled once, at the first retry after');
    await clock.advance(NOT_LEADING_RETRY_MS * 4);
    assert.equal(calls.length, 1, 'and not again');
    queue.shutDown();
    await running;
  });

  it('drops a not-leading retry when the term ends and its queue shuts down', async () => {
    const clock = new FakeClock(0);
    const queue = new WorkQueue({ clock });
    const calls: string[] = [];
    const running = runWorkers(queue, 1, (key) => void calls.push(key), { whileLeading: () => false });
    queue.add('workload');
    await clock.advance(NOT_LEADING_RETRY_MS / 2);
    queue.shutDown();
    await clock.advance(NOT_LEADING_RETRY_MS * 2);
    await running;
    assert.deepEqual(calls, []);
    assert.equal(queue.len(), 0);
  });

  it('rejects a bad concurrency', async () => {
    const queue = new WorkQueue({ clock: new FakeClock(0) });
    await assert.rejects(
      runWorkers(queue, 0, () => undefined),
      RangeError,
    );
  });
});

/** The value of one series of a metric, by queue name. */
async function value(registry: Registry, metric: string, name: string, suffix = ''): Promise<number | undefined> {
  const json = await registry.getSingleMetric(metric)!.get();
  const wanted = metric + suffix;
  const sample = json.values.find(
    (v) => v.labels.name === name && ((v as { metricName?: string }).metricName ?? metric) === wanted,
  );
  return sample?.value;
}

describe('workQueueMetrics', { timeout: 10_000 }, () => {
  it('tracks depth, adds, retries and the queue/work durations', async () => {
    const clock = new FakeClock(0);
    const registry = new Registry();
    const queue = new WorkQueue({ clock, metrics: workQueueMetrics(registry, 'pods') });
    queue.add('a');
    queue.add('a');
    queue.add('b');
    assert.equal(await value(registry, 'workqueue_depth', 'pods'), 2);
    assert.equal(await value(registry, 'workqueue_adds_total', 'pods'), 2, 'de-duplicated adds are not counted');
    await clock.advance(2000);
    const a = (await queue.get())!;
    assert.equal(await value(registry, 'workqueue_depth', 'pods'), 1);
    assert.equal(await value(registry, 'workqueue_queue_duration_seconds', 'pods', '_sum'), 2);
    await clock.advance(3000);
    queue.done(a);
    assert.equal(await value(registry, 'workqueue_work_duration_seconds', 'pods', '_sum'), 3);
    assert.equal(await value(registry, 'workqueue_work_duration_seconds', 'pods', '_count'), 1);
    queue.addAfter('c', 10);
    queue.addRateLimited('d');
    assert.equal(await value(registry, 'workqueue_retries_total', 'pods'), 2);
  });

  it('measures queue and work durations on the monotonic clock: a step neither inflates nor hides them', async () => {
    const clock = new FakeClock(0);
    const registry = new Registry();
    const queue = new WorkQueue({ clock, metrics: workQueueMetrics(registry, 'steps') });
    queue.add('a');
    clock.step(3_600_000);
    await clock.advance(2000);
    const a = (await queue.get())!;
    assert.equal(await value(registry, 'workqueue_queue_duration_seconds', 'steps', '_sum'), 2);
    clock.step(-7_200_000);
    await clock.advance(500);
    assert.equal(await value(registry, 'workqueue_longest_running_processor_seconds', 'steps'), 0.5);
    await clock.advance(2500);
    queue.done(a);
    assert.equal(await value(registry, 'workqueue_work_duration_seconds', 'steps', '_sum'), 3);
  });

  it('reports unfinished work and the longest running processor at scrape time', async () => {
    const clock = new FakeClock(0);
    const registry = new Registry();
    const queue = new WorkQueue({ clock, metrics: workQueueMetrics(registry, 'nodes') });
    queue.add('a');
    queue.add('b');
    const a = (await queue.get())!;
    await clock.advance(1000);
    await queue.get();
    await clock.advance(500);
    assert.equal(await value(registry, 'workqueue_unfinished_work_seconds', 'nodes'), 1.5 + 0.5);
    assert.equal(await value(registry, 'workqueue_longest_running_processor_seconds', 'nodes'), 1.5);
    queue.done(a);
    assert.equal(await value(registry, 'workqueue_longest_running_processor_seconds', 'nodes'), 0.5);
    const text = await registry.getSingleMetricAsString('workqueue_unfinished_work_seconds');
    assert.match(text, /workqueue_unfinished_work_seconds\{name="nodes"\} 0\.5/);
  });

  it('shares metric objects per registry, labelled by queue name', async () => {
    const clock = new FakeClock(0);
    const registry = new Registry();
    const q1 = new WorkQueue({ clock, metrics: workQueueMetrics(registry, 'one') });
    const q2 = new WorkQueue({ clock, metrics: workQueueMetrics(registry, 'two') });
    assert.doesNotThrow(() => workQueueMetrics(registry, 'one'));
    q1.add('x');
    q2.add('x');
    q2.add('y');
    assert.equal(await value(registry, 'workqueue_adds_total', 'one'), 1);
    assert.equal(await value(registry, 'workqueue_adds_total', 'two'), 2);
    // Another registry is independent.
    const other = new Registry();
    workQueueMetrics(other, 'one');
    assert.equal(await value(other, 'workqueue_adds_total', 'one'), 0);
    assert.match(await registry.metrics(), /workqueue_depth\{name="two"\} 2/);
  });
});
