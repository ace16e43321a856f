import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { FakeClock, flushMicrotasks } from '../../../src/runtime/clock.ts';
import type { Clock } from '../../../src/runtime/clock.ts';
import { microTime } from '../../../src/runtime/kube/time.ts';
import type { EventSink, EventsV1EventJson, ObjectRef } from '../../../src/runtime/events/event.ts';
import { EventRecorder, QUEUE_SIZE } from '../../../src/runtime/events/recorder.ts';
import { recordingLogger } from '../../support/logger.ts';

const SEC = 1000;
const MIN = 60 * SEC;
const T0 = Date.UTC(2026, 10, 22, 1, 2, 3, 123);

const sts: ObjectRef = {
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  namespace: 'mimir',
  name: 'ingester-zone-a',
  uid: 'uid-sts',
  resourceVersion: '7',
};
const pod: ObjectRef = { apiVersion: 'v1', kind: 'Pod', namespace: 'mimir', name: 'ingester-zone-a-0' };
const node: ObjectRef = { apiVersion: 'v1', kind: 'Node', name: 'node-1', uid: 'uid-node' };

interface Call {
  op: 'create' | 'patch';
  namespace: string;
  name: string;
  body: unknown;
  at: number;
}

function httpError(code: number): Error {
  return Object.assign(new Error(`the server answered ${code}`), { code });
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    typeof target === 'object' && target !== null && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/**
 * An in-memory EventSink: records every call, stores Events by namespace and
 * name (409 on a duplicate create, 404 on a patch of a missing one), and lets
 * a test inject a failure or a hang per call through `fault`.
 */
class FakeSink implements EventSink {
  readonly calls: Call[] = [];
  readonly stored = new Map<string, EventsV1EventJson>();
  fault: ((call: Call) => Error | Promise<void> | undefined) | undefined;
  private readonly clock: Clock;

  constructor(clock: Clock) {
    this.clock = clock;
  }

  get creates(): Call[] {
    return this.calls.filter((c) => c.op === 'create');
  }

  get patches(): Call[] {
    return this.calls.filter((c) => c.op === 'patch');
  }

  async create(namespace: string, event: EventsV1EventJson) {
    const call: Call = {
      op: 'create',
      namespace,
      name: event.metadata.name,
      body: structuredClone(event),
      at: this.clock.now(),
    };
    await this.inject(call);
    const key = `${namespace}/${event.metadata.name}`;
    if (this.stored.has(key)) throw httpError(409);
    this.stored.set(key, structuredClone(event));
    return { metadata: { name: event.metadata.name, resourceVersion: '1' } };
  }

  async patch(namespace: string, name: string, patch: object) {
    const call: Call = { op: 'patch', namespace, name, body: structuredClone(patch), at: this.clock.now() };
    await this.inject(call);
    const key = `${namespace}/${name}`;
    const current = this.stored.get(key);
    if (!current) throw httpError(404);
    const next = mergePatch(current, patch) as EventsV1EventJson;
    this.stored.set(key, next);
    return next;
  }

  private async inject(call: Call): Promise<void> {
    this.calls.push(call);
    const outcome = this.fault?.(call);
    if (outcome instanceof Error) throw outcome;
    if (outcome) await outcome;
  }
}

function setup() {
  const clock = new FakeClock(T0);
  const sink = new FakeSink(clock);
  const registry = new Registry();
  const { lines: logs, log } = recordingLogger();
  const recorder = new EventRecorder({
    sink,
    clock,
    reportingController: 'stateward.dev/rollout',
    reportingInstance: 'stateward-0',
    registry,
    logger: log,
  });
  const metric = async (name: string, labels: Record<string, string> = {}) => {
    const m = registry.getSingleMetric(name);
    assert.ok(m, `metric ${name} is registered`);
    const { values } = await m.get();
    return values
      .filter((v) => Object.entries(labels).every(([k, want]) => (v.labels as Record<string, unknown>)[k] === want))
      .reduce((sum, v) => sum + v.value, 0);
  };
  return { clock, sink, registry, logs, recorder, metric };
}

const blocked = (r: EventRecorder, note = 'zone b is not ready') =>
  r.event(sts, 'Warning', 'RolloutBlocked', 'Rollout', note, pod);

describe('EventRecorder', () => {
  it("writes an events.k8s.io/v1 Event off the caller's path", async () => {
    const { sink, recorder, metric } = setup();
    blocked(recorder);
    assert.equal(sink.calls.length, 0, "no API call on the caller's stack");
    await recorder.flush();

    assert.equal(sink.calls.length, 1);
    const call = sink.calls[0]!;
    assert.equal(call.op, 'create');
    assert.equal(call.namespace, 'mimir');
    assert.match(call.name, /^ingester-zone-a\.[0-9a-f]{16}$/);
    assert.deepEqual(call.body, {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: call.name, namespace: 'mimir' },
      eventTime: '2026-11-22T01:02:03.123000Z',
      type: 'Warning',
      reason: 'RolloutBlocked',
      action: 'Rollout',
      note: 'zone b is not ready',
      regarding: sts,
      related: pod,
      reportingController: 'stateward.dev/rollout',
      reportingInstance: 'stateward-0',
    });
    assert.equal(await metric('stateward_events_emitted_total', { type: 'Warning', reason: 'RolloutBlocked' }), 1);
  });

  it('files Events of cluster-scoped objects in default, truncates long notes and names each Event uniquely', async () => {
    const { sink, recorder } = setup();
    recorder.event(node, 'Normal', 'Cordoned', 'Drain', 'é'.repeat(2000));
    recorder.event(node, 'Normal', 'Cordoned', 'Drain', 'another note');
    await recorder.flush();
    const [a, b] = sink.creates;
    assert.equal(a?.namespace, 'default');
    const note = (a?.body as EventsV1EventJson).note;
    assert.ok(Buffer.byteLength(note) <= 1024 && note.endsWith('...'));
    assert.notEqual(a?.name, b?.name);
  });

  it('costs a tight loop one create, then one patch per 30 s, with the exact count', async () => {
    const { clock, sink, recorder, metric } = setup();
    const occurrences = 1200;
    for (let i = 0; i < occurrences; i++) {
      blocked(recorder);
      await clock.advance(100); // a reconcile every 100 ms for two minutes
    }
    await clock.advance(30 * SEC);
    await recorder.flush();

    assert.equal(sink.creates.length, 1);
    assert.ok(sink.patches.length <= 1 + (occurrences * 100) / (30 * SEC), `${sink.patches.length} patches`);
    const times = sink.calls.map((c) => c.at);
    for (let i = 1; i < times.length; i++) assert.ok(times[i]! - times[i - 1]! >= 30 * SEC);
    const [event] = sink.stored.values();
    assert.deepEqual(event?.series, { count: occurrences, lastObservedTime: microTime(T0 + (occurrences - 1) * 100) });
    assert.equal(await metric('stateward_events_series_patches_total'), sink.patches.length);
    assert.equal(await metric('stateward_events_emitted_total'), occurrences);
  });

  it('ends a series after 6 minutes of quiet; the next occurrence creates a new Event', async () => {
    const { clock, sink, recorder } = setup();
    blocked(recorder);
    await clock.advance(SEC);
    blocked(recorder);
    await clock.advance(29 * SEC); // the coalesced repeat is written at 30 s
    assert.deepEqual(
      sink.patches.map((c) => c.body),
      [{ series: { count: 2, lastObservedTime: microTime(T0 + SEC) } }],
    );

    await clock.advance(6 * MIN);
    blocked(recorder);
    await recorder.flush();
    assert.equal(sink.creates.length, 2);
    assert.notEqual(sink.creates[0]?.name, sink.creates[1]?.name);
    assert.equal(sink.stored.size, 2);
  });

  it('a wall clock stepping forward neither ends a series nor refills the spam budget (no burst)', async () => {
    const { clock, sink, recorder, metric } = setup();
    for (let i = 0; i < 25; i++) recorder.event(sts, 'Warning', `Reason${i}`, 'Rollout', 'n');
    await recorder.flush();
    assert.equal(sink.creates.length, 25);
    clock.step(60 * MIN);
    await clock.advance(SEC);
    recorder.event(sts, 'Warning', 'Reason0', 'Rollout', 'n'); // a second after its create: the same series
    recorder.event(sts, 'Warning', 'Fresh', 'Rollout', 'n'); // the budget refills over real minutes, not a step
    await recorder.flush();
    assert.equal(sink.creates.length, 25, 'no new Event: the series goes on and the budget is spent');
    assert.equal(await metric('stateward_events_dropped_total', { cause: 'spam' }), 1);
    await clock.advance(29 * SEC);
    await recorder.flush();
    // Timestamps written to the API are wall-clock ones: the repeat happened after the step.
    assert.deepEqual(
      sink.patches.map((c) => c.body),
      [{ series: { count: 2, lastObservedTime: microTime(T0 + 60 * MIN + SEC) } }],
    );
  });

  it('a wall clock stepping backwards does not hold back a series patch that is due (no stall)', async () => {
    const { clock, sink, recorder } = setup();
    blocked(recorder);
    await clock.advance(SEC);
    blocked(recorder);
    clock.step(-60 * MIN);
    await clock.advance(29 * SEC); // the coalesced repeat is due 30 s after the create, in real time
    await recorder.flush();
    assert.deepEqual(
      sink.patches.map((c) => c.body),
      [{ series: { count: 2, lastObservedTime: microTime(T0 + SEC) } }],
    );
    assert.equal(sink.patches[0]!.at, T0 + 30 * SEC - 60 * MIN);
  });

  it("drops creates beyond an object's spam budget, but keeps patching its existing series", async () => {
    const { clock, sink, recorder, metric } = setup();
    for (let i = 0; i < 30; i++) recorder.event(sts, 'Warning', `Reason${i}`, 'Rollout', 'n');
    await recorder.flush();
    assert.equal(sink.creates.length, 25);
    assert.equal(await metric('stateward_events_dropped_total', { cause: 'spam' }), 5);

    await clock.advance(30 * SEC);
    recorder.event(sts, 'Warning', 'Reason0', 'Rollout', 'n'); // a repeat: patched, no token needed
    recorder.event(sts, 'Warning', 'Reason29', 'Rollout', 'n'); // still no token
    await recorder.flush();
    assert.equal(sink.patches.length, 1);
    assert.equal(await metric('stateward_events_dropped_total', { cause: 'spam' }), 6);

    await clock.advance(5 * MIN);
    recorder.event(sts, 'Warning', 'Reason29', 'Rollout', 'n');
    await recorder.flush();
    assert.equal(sink.creates.length, 26);
  });

  it('creates the Event afresh when the one to patch was deleted', async () => {
    const { clock, sink, recorder } = setup();
    blocked(recorder);
    await recorder.flush();
    sink.stored.clear(); // expired (event TTL) or deleted by hand
    await clock.advance(30 * SEC);
    blocked(recorder);
    await recorder.flush();

    assert.deepEqual(
      sink.calls.map((c) => c.op),
      ['create', 'patch', 'create'],
    );
    const recreated = sink.calls[2]!.body as EventsV1EventJson;
    assert.equal(recreated.metadata.name, sink.calls[0]!.name);
    assert.deepEqual(recreated.series, { count: 2, lastObservedTime: microTime(T0 + 30 * SEC) });
    assert.equal(recreated.eventTime, microTime(T0));
  });

  it('retries server and transport errors with backoff on the clock', async () => {
    const { clock, sink, recorder, metric, logs } = setup();
    let failures = 2;
    sink.fault = () => (failures-- > 0 ? httpError(503) : undefined);
    blocked(recorder);
    await clock.advance(0);
    assert.equal(sink.calls.length, 1);
    await clock.advance(999);
    assert.equal(sink.calls.length, 1, 'waits 1 s before the second try');
    await clock.advance(1);
    await clock.advance(2 * SEC);
    await recorder.flush();
    assert.deepEqual(
      sink.calls.map((c) => c.at - T0),
      [0, 1000, 3000],
    );
    assert.equal(sink.stored.size, 1);
    assert.equal(await metric('stateward_events_dropped_total'), 0);
    assert.ok(!logs.some((l) => l.level === 'error'));
  });

  it('gives up at once on a rejected write, and after 5 tries on a failing server', async () => {
    const { clock, sink, recorder, metric, logs } = setup();
    sink.fault = () => httpError(422);
    blocked(recorder);
    await recorder.flush();
    assert.equal(sink.calls.length, 1);
    assert.equal(await metric('stateward_events_dropped_total', { cause: 'api-error' }), 1);
    const line = logs.find((l) => l.level === 'error');
    assert.equal(line?.fields.status, 422);
    assert.match(String(line?.fields.event), /^mimir\/ingester-zone-a\./);

    sink.fault = () => new Error('connection reset'); // no status: a transport error
    recorder.event(sts, 'Normal', 'Other', 'Rollout', 'n');
    const flushed = recorder.flush();
    await clock.advance(MIN);
    await flushed;
    assert.equal(sink.calls.length, 1 + 5);
    assert.deepEqual(
      sink.calls.slice(1).map((c) => c.at - T0),
      [0, 1000, 3000, 7000, 15000],
    );
    assert.equal(await metric('stateward_events_dropped_total', { cause: 'api-error' }), 2);
  });

  it("after a 403 says so once and drops that namespace's Events without calls for 5 minutes", async () => {
    const { clock, sink, recorder, metric, logs } = setup();
    sink.fault = () => httpError(403);
    blocked(recorder);
    await recorder.flush();
    assert.equal(sink.calls.length, 1, 'no retry of a refusal');
    recorder.event(sts, 'Normal', 'Second', 'Rollout', 'n');
    await recorder.flush();
    assert.equal(sink.calls.length, 1, 'no call while paused');
    assert.equal(await metric('stateward_events_dropped_total', { cause: 'forbidden' }), 2);
    assert.equal(logs.filter((l) => l.level === 'warn' && l.msg.includes('not permitted to write Events')).length, 1);
    assert.equal(logs.filter((l) => l.level === 'error').length, 0);
    sink.fault = undefined;
    await clock.advance(5 * MIN + 1);
    recorder.event(sts, 'Normal', 'Third', 'Rollout', 'n');
    await recorder.flush();
    assert.equal(sink.calls.length, 2, 'asks again after the pause');
    assert.equal(sink.stored.size, 1);
  });

  it('pauses a forbidden namespace for 5 minutes of real time, whichever way the wall clock steps', async () => {
    for (const step of [60 * MIN, -60 * MIN]) {
      const { clock, sink, recorder } = setup();
      sink.fault = () => httpError(403);
      blocked(recorder);
      await recorder.flush();
      sink.fault = undefined;
      clock.step(step);
      await clock.advance(SEC);
      recorder.event(sts, 'Normal', 'Second', 'Rollout', 'n');
      await recorder.flush();
      assert.equal(sink.calls.length, 1, `still paused a second later (step ${step / MIN} min)`);
      await clock.advance(5 * MIN);
      recorder.event(sts, 'Normal', 'Third', 'Rollout', 'n');
      await recorder.flush();
      assert.equal(sink.calls.length, 2, `asks again after 5 minutes (step ${step / MIN} min)`);
    }
  });

  it('takes a 409 on a retried create as success (the lost answer case)', async () => {
    const { clock, sink, recorder, metric, logs } = setup();
    let first = true;
    sink.fault = (call) => {
      if (!first) return undefined;
      first = false;
      sink.stored.set(`${call.namespace}/${call.name}`, call.body as EventsV1EventJson); // the server did create it
      return new Error('timeout reading the response');
    };
    blocked(recorder);
    await clock.advance(SEC);
    await recorder.flush();
    assert.equal(sink.creates.length, 2);
    assert.equal(sink.stored.size, 1);
    assert.equal(await metric('stateward_events_dropped_total'), 0);
    assert.ok(!logs.some((l) => l.level === 'error'));
  });

  it('never throws at the caller: a sink throwing synchronously, input that breaks building the Event', async () => {
    const clock = new FakeClock(T0);
    const registry = new Registry();
    const { lines, log } = recordingLogger();
    const sink: EventSink = {
      create: () => {
        throw httpError(400);
      },
      patch: () => Promise.resolve(undefined),
    };
    const recorder = new EventRecorder({
      sink,
      clock,
      reportingController: 'stateward.dev/rollout',
      reportingInstance: 'stateward-0',
      registry,
      logger: log,
    });
    assert.doesNotThrow(() => blocked(recorder));
    assert.doesNotThrow(() => recorder.event(null as unknown as ObjectRef, 'Warning', 'R', 'A', 'n'));
    await recorder.flush();
    const dropped = (await registry.getSingleMetric('stateward_events_dropped_total')!.get()).values;
    assert.equal(dropped.find((v) => v.labels.cause === 'api-error')?.value, 1);
    assert.ok(lines.some((l) => l.level === 'error' && l.msg === 'event recording failed' && l.fields.reason === 'R'));
  });

  it(`bounds its queue at ${QUEUE_SIZE} writes, dropping the oldest with one warning`, async () => {
    const { sink, recorder, metric, logs } = setup();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    sink.fault = () => gate;
    // Each on its own object, so no spam budget runs out.
    const event = (i: number) => recorder.event({ ...sts, uid: `uid-${i}` }, 'Normal', `R${i}`, 'Rollout', 'n');
    event(0);
    await flushMicrotasks(); // R0 is in flight, the rest queue up
    for (let i = 1; i <= QUEUE_SIZE + 2; i++) event(i);
    assert.equal(await metric('stateward_events_dropped_total', { cause: 'queue-full' }), 2);
    assert.equal(logs.filter((l) => l.msg.includes('queue full')).length, 1);
    release();
    await recorder.flush();
    const reasons = sink.creates.map((c) => (c.body as EventsV1EventJson).reason);
    assert.equal(reasons.length, 1 + QUEUE_SIZE);
    assert.deepEqual(reasons.slice(0, 3), ['R0', 'R3', 'R4']);
    assert.equal(reasons.at(-1), `R${QUEUE_SIZE + 2}`);
  });

  it('on stop writes pending repeats at once, gives retries one last try and refuses new events', async () => {
    const { clock, sink, recorder, metric } = setup();
    blocked(recorder);
    await clock.advance(SEC);
    blocked(recorder);
    blocked(recorder);
    sink.fault = (call) => (call.op === 'create' ? httpError(503) : undefined);
    recorder.event(sts, 'Normal', 'Failing', 'Rollout', 'n');
    await clock.advance(0); // its first try fails; it waits 1 s to retry

    await recorder.stop(); // no clock advance needed
    assert.deepEqual(
      sink.patches.map((c) => c.body),
      [{ series: { count: 3, lastObservedTime: microTime(T0 + SEC) } }],
    );
    assert.equal(sink.calls.filter((c) => (c.body as EventsV1EventJson).reason === 'Failing').length, 2);
    assert.equal(await metric('stateward_events_dropped_total', { cause: 'api-error' }), 1);

    blocked(recorder);
    await recorder.flush();
    assert.equal(await metric('stateward_events_dropped_total', { cause: 'shutdown' }), 1);
    assert.equal(clock.pending, 0, 'no timer left behind');
  });

  it('works without a metrics registry', async () => {
    const clock = new FakeClock(T0);
    const sink = new FakeSink(clock);
    const recorder = new EventRecorder({ sink, clock, reportingController: 'stateward.dev/x', reportingInstance: 'p' });
    blocked(recorder);
    await recorder.flush();
    assert.equal(sink.creates.length, 1);
  });

  it('cuts an over-long reportingInstance to the 128 bytes the API allows', async () => {
    const clock = new FakeClock(T0);
    const sink = new FakeSink(clock);
    const recorder = new EventRecorder({
      sink,
      clock,
      reportingController: 'stateward.dev/x',
      reportingInstance: `${'a'.repeat(150)}-xyz12`,
      registry: new Registry(),
    });
    blocked(recorder);
    await recorder.flush();
    const instance = (sink.creates[0]!.body as EventsV1EventJson).reportingInstance;
    assert.equal(instance.length, 128);
    assert.ok(instance.endsWith('-xyz12'));
  });

  it('end to end: writes stay within 1 + T/30s + gaps per event, and counts add up (property)', async () => {
    const step = fc.record({
      dt: fc.oneof(
        fc.integer({ min: 0, max: 3 * SEC }),
        fc.integer({ min: 0, max: 2 * MIN }),
        fc.integer({ min: 6 * MIN, max: 7 * MIN }),
      ),
      reason: fc.constantFrom('A', 'B', 'C'),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
        const { clock, sink, recorder } = setup();
        const seen = new Map<string, number[]>();
        for (const s of steps) {
          await clock.advance(s.dt);
          recorder.event(sts, 'Normal', s.reason, 'Rollout', 'n');
          seen.set(s.reason, [...(seen.get(s.reason) ?? []), clock.now()]);
        }
        await clock.advance(10 * MIN);
        await recorder.stop();

        const total = [...sink.stored.values()].reduce((sum, e) => sum + (e.series?.count ?? 1), 0);
        assert.equal(total, steps.length);
        for (const [reason, times] of seen) {
          const calls = sink.calls.filter((c) =>
            [...sink.stored.values()].some((e) => e.metadata.name === c.name && e.reason === reason),
          );
          const gaps = times.slice(1).filter((t, i) => t - times[i]! > 6 * MIN).length;
          const span = calls.at(-1)!.at - calls[0]!.at;
          assert.ok(
            calls.length <= 1 + Math.floor(span / (30 * SEC)) + gaps,
            `${reason}: ${calls.length} writes over ${span} ms, ${gaps} gaps`,
          );
        }
      }),
      { numRuns: 40 },
    );
  });
});
