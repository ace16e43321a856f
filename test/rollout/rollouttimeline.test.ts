import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { SetSummary } from '../../src/rollout/planner.ts';
import {
  MAX_TIMELINE_MESSAGE,
  MAX_TIMELINE_WAITS,
  MAX_TIMELINE_ZONES,
  recordTimeline,
  ROLLOUT_CONTINUES_MS,
  RolloutTimelines,
  type RolloutTimeline,
  type TimelineInput,
} from '../../src/rollout/rollouttimeline.ts';

const T0 = Date.parse('2026-11-29T12:00:00.000Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

const set = (name: string, state: SetSummary['state'], updated = 3): SetSummary => ({
  name,
  replicas: 3,
  pods: 3,
  ready: 3,
  updated,
  maxUnavailable: 1,
  paused: false,
  state,
});

const A = 'ingester-zone-a';
const B = 'ingester-zone-b';
const C = 'ingester-zone-c';

/** The statuses of a 3-zone rollout, one zone after the other, each with its pods' own pace. */
function threeZoneRollout(): [number, TimelineInput][] {
  const wait = (code: string, statefulSet: string) => ({
    code,
    statefulSet,
    message: `waiting: ${code} ${statefulSet}`,
  });
  const zones = (a: SetSummary['state'], b: SetSummary['state'], c: SetSummary['state'], updatedA = 3) => [
    set(A, a, a === 'up-to-date' ? 3 : updatedA),
    set(B, b, b === 'up-to-date' ? 3 : 0),
    set(C, c, c === 'up-to-date' ? 3 : 0),
  ];
  return [
    [0, { phase: 'complete', statefulSets: zones('up-to-date', 'up-to-date', 'up-to-date') }],
    // The StatefulSet controller has not caught up yet: not started.
    [
      1,
      {
        phase: 'waiting',
        waitingFor: wait('statefulset-status-pending', A),
        statefulSets: zones('waiting', 'pending', 'pending', 0),
      },
    ],
    [2, { phase: 'rolling', statefulSets: zones('rolling', 'pending', 'pending', 0) }],
    [
      3,
      {
        phase: 'waiting',
        waitingFor: wait('pods-terminating', A),
        statefulSets: zones('waiting', 'pending', 'pending', 0),
      },
    ],
    [
      5,
      {
        phase: 'waiting',
        waitingFor: wait('max-unavailable-reached', A),
        statefulSets: zones('waiting', 'pending', 'pending', 1),
      },
    ],
    [6, { phase: 'rolling', statefulSets: zones('rolling', 'pending', 'pending', 1) }],
    [
      7,
      {
        phase: 'waiting',
        waitingFor: wait('pods-terminating', A),
        statefulSets: zones('waiting', 'pending', 'pending', 1),
      },
    ],
    [9, { phase: 'rolling', statefulSets: zones('up-to-date', 'rolling', 'pending') }],
    [
      10,
      { phase: 'waiting', waitingFor: wait('zpdb-denied', B), statefulSets: zones('up-to-date', 'rolling', 'pending') },
    ],
    [14, { phase: 'rolling', statefulSets: zones('up-to-date', 'up-to-date', 'rolling') }],
    [20, { phase: 'complete', statefulSets: zones('up-to-date', 'up-to-date', 'up-to-date') }],
  ];
}

function play(statuses: [number, TimelineInput][], start?: RolloutTimeline): (RolloutTimeline | undefined)[] {
  let timeline = start;
  return statuses.map(([s, status]) => (timeline = recordTimeline(timeline, status, T0 + s * 1000)));
}

describe('rollout timeline', () => {
  it('records when each zone started, what it waited for and how long, and when it finished', () => {
    const timelines = play(threeZoneRollout());
    assert.equal(timelines[0], undefined, 'a settled group has no rollout to show');
    assert.equal(timelines[1], undefined, 'waiting for the StatefulSet controller is not rolling yet');
    assert.deepEqual(timelines.at(-1), {
      startedAt: at(2),
      finishedAt: at(20),
      zones: [
        {
          statefulSet: A,
          startedAt: at(2),
          finishedAt: at(9),
          waits: [
            // Twice, 2 s then 2 s: one entry, counted.
            {
              code: 'pods-terminating',
              message: `waiting: pods-terminating ${A}`,
              since: at(3),
              from: at(7),
              until: at(9),
              times: 2,
              waitedMs: 4000,
            },
            {
              code: 'max-unavailable-reached',
              message: `waiting: max-unavailable-reached ${A}`,
              since: at(5),
              from: at(5),
              until: at(6),
              times: 1,
              waitedMs: 1000,
            },
          ],
        },
        {
          statefulSet: B,
          startedAt: at(9),
          finishedAt: at(14),
          waits: [
            {
              code: 'zpdb-denied',
              message: `waiting: zpdb-denied ${B}`,
              since: at(10),
              from: at(10),
              until: at(14),
              times: 1,
              waitedMs: 4000,
            },
          ],
        },
        { statefulSet: C, startedAt: at(14), finishedAt: at(20), waits: [] },
      ],
    });
  });

  it('keeps a finished rollout until the next one starts, then starts afresh', () => {
    const rollout = threeZoneRollout();
    const done = play(rollout).at(-1)!;
    // Settled reconciles change nothing.
    assert.deepEqual(recordTimeline(done, rollout[0]![1], T0 + 60_000), done);
    const again = play(
      rollout.slice(2).map(([s, status]) => [s + 100, status]),
      done,
    ).at(-1)!;
    assert.equal(again.startedAt, at(102));
    assert.deepEqual(
      again.zones.map((z) => z.statefulSet),
      [A, B, C],
    );
  });

  it('a release applied one StatefulSet at a time, each finishing before the next changes, is one rollout', () => {
    const complete = (): TimelineInput => ({
      phase: 'complete',
      statefulSets: [A, B, C].map((n) => set(n, 'up-to-date')),
    });
    const rolling = (name: string): TimelineInput => ({
      phase: 'rolling',
      statefulSets: [A, B, C].map((n) => (n === name ? set(n, 'rolling', 0) : set(n, 'up-to-date'))),
    });
    let timeline: RolloutTimeline | undefined;
    // Zone a changed, rolled and done before zone b's template changed; then b, then c, a few seconds apart.
    for (const [s, status] of [
      [0, rolling(A)],
      [1, complete()],
      [3, rolling(B)],
      [4, complete()],
      [6, rolling(C)],
      [7, complete()],
    ] as const)
      timeline = recordTimeline(timeline, status, T0 + s * 1000);
    assert.equal(timeline?.startedAt, at(0));
    assert.equal(timeline?.finishedAt, at(7));
    assert.deepEqual(
      timeline?.zones.map((z) => [z.statefulSet, z.startedAt, z.finishedAt]),
      [
        [A, at(0), at(1)],
        [B, at(3), at(4)],
        [C, at(6), at(7)],
      ],
    );
    // Past the window, the next change is a rollout of its own.
    const later = recordTimeline(timeline, rolling(B), T0 + 7000 + ROLLOUT_CONTINUES_MS + 1);
    assert.deepEqual(
      later?.zones.map((z) => z.statefulSet),
      [B],
    );
  });

  it('leaves the wait going on open, and its counts and messages are not changes', () => {
    const status = (message: string): TimelineInput => ({
      phase: 'waiting',
      waitingFor: { code: 'health-check-waiting', statefulSet: B, message },
      statefulSets: [set(A, 'up-to-date'), set(B, 'waiting', 0)],
    });
    const first = recordTimeline(undefined, status('baking, 1 of 3'), T0)!;
    const later = recordTimeline(first, status('baking, 2 of 3'), T0 + 30_000)!;
    assert.deepEqual(later, first, 'the same wait going on');
    assert.deepEqual(first.zones[0]!.waits, [
      {
        code: 'health-check-waiting',
        message: 'baking, 1 of 3',
        since: at(0),
        from: at(0),
        times: 1,
        waitedMs: 0,
      },
    ]);
  });

  it('attributes a wait that names no StatefulSet to the waiting ones', () => {
    const timeline = recordTimeline(
      undefined,
      {
        phase: 'waiting',
        waitingFor: { code: 'several-statefulsets-not-ready', message: 'waiting: 2 StatefulSets have not-Ready pods' },
        statefulSets: [set(A, 'waiting', 1), set(B, 'waiting', 0), set(C, 'pending', 0)],
      },
      T0,
    )!;
    assert.deepEqual(
      timeline.zones.map((z) => [z.statefulSet, z.waits.map((w) => w.code)]),
      [
        [A, ['several-statefulsets-not-ready']],
        [B, ['several-statefulsets-not-ready']],
      ],
    );
  });

  it('cuts long messages and stays bounded whatever it is fed', () => {
    const codes = fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k');
    const states = fc.constantFrom<SetSummary['state']>('up-to-date', 'rolling', 'waiting', 'paused', 'pending');
    const step = fc.record({
      sets: fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), states, fc.integer({ min: 0, max: 3 })), {
        maxLength: 40,
      }),
      wait: fc.option(fc.tuple(codes, fc.integer({ min: 0, max: 40 }), fc.string({ maxLength: 700 }))),
      complete: fc.boolean(),
      dt: fc.integer({ min: 0, max: 10_000 }),
    });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        let timeline: RolloutTimeline | undefined;
        let now = T0;
        for (const s of steps) {
          now += s.dt;
          const seen = new Set<number>();
          const statefulSets = s.sets
            .filter(([n]) => !seen.has(n) && seen.add(n))
            .map(([n, state, updated]) => set(`sts-${n}`, state, updated));
          const waitingFor = s.wait
            ? { code: s.wait[0], statefulSet: `sts-${s.wait[1]}`, message: s.wait[2] }
            : undefined;
          timeline = recordTimeline(
            timeline,
            { phase: s.complete ? 'complete' : 'rolling', statefulSets, ...(waitingFor ? { waitingFor } : {}) },
            now,
          );
          if (!timeline) continue;
          assert.ok(timeline.zones.length <= MAX_TIMELINE_ZONES);
          assert.equal(new Set(timeline.zones.map((z) => z.statefulSet)).size, timeline.zones.length);
          for (const z of timeline.zones) {
            assert.ok(z.waits.length <= MAX_TIMELINE_WAITS);
            assert.ok(z.waits.filter((w) => w.until === undefined).length <= 1, 'one wait at a time');
            for (const w of z.waits) {
              assert.ok(w.message.length <= MAX_TIMELINE_MESSAGE);
              assert.ok(w.waitedMs >= 0 && w.times >= 1);
              assert.ok(w.since <= w.from && (w.until === undefined || w.from <= w.until));
            }
            if (z.finishedAt !== undefined) assert.ok(z.startedAt <= z.finishedAt);
          }
          assert.ok(timeline.zones.every((z, i, all) => i === 0 || all[i - 1]!.startedAt <= z.startedAt));
          if (timeline.finishedAt !== undefined) assert.ok(timeline.zones.every((z) => z.waits.every((w) => w.until)));
        }
      }),
    );
  });

  it('tells the web view which namespace changed, and only on a change', () => {
    const timelines = new RolloutTimelines();
    const heard: string[] = [];
    timelines.onChange((ns) => heard.push(ns));
    for (const [s, status] of threeZoneRollout()) timelines.record('team-a', 'ingester', status, T0 + s * 1000);
    // a starts, waits, waits for another thing, rolls, waits again; a finishes and b starts; b waits; c starts; done.
    assert.equal(heard.length, 9);
    assert.ok(heard.every((ns) => ns === 'team-a'));
    assert.deepEqual([...timelines.latest('team-a').keys()], ['team-a/ingester']);
    assert.equal(timelines.latest('team-b').size, 0);
    timelines.forget('team-a', 'ingester');
    assert.equal(timelines.latest('team-a').size, 0);
  });
});
