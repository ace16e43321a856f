// The resync gate: a group is skipped by a resync only when its last
// reconcile decided nothing and began after every change to the group.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ResyncGate } from '../../src/rollout/resync.ts';
import { coordinatesReplicas } from '../../src/downscale/coordination/scalingfields.ts';
import type { StatefulSet } from '../../src/runtime/kube/types.ts';

type Op =
  | { kind: 'change'; key: string }
  | { kind: 'begin'; key: string }
  | { kind: 'end'; key: string; settled: boolean }
  | { kind: 'forget'; key: string }
  | { kind: 'clear' };

// Mostly one group, so that its begin/change/end interleavings are many.
const keyArb = fc.oneof({ arbitrary: fc.constant('ns/a'), weight: 4 }, fc.constantFrom('ns/b', 'other/a'));
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('change' as const), key: keyArb }),
  fc.record({ kind: fc.constant('begin' as const), key: keyArb }),
  fc.record({ kind: fc.constant('end' as const), key: keyArb, settled: fc.boolean() }),
  fc.record({ kind: fc.constant('forget' as const), key: keyArb }),
  fc.constant({ kind: 'clear' as const }),
);

describe('resync gate', () => {
  it('settles a group only after a reconcile that decided nothing and began after its last change', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 60, size: 'large' }), (ops) => {
        const gate = new ResyncGate();
        // The model, from the history alone: per group, the step of its last
        // change (or forget/clear), the step its running reconcile began, and
        // whether the last reconcile to end settles it.
        let step = 0;
        const lastChange = new Map<string, number>();
        const running = new Map<string, number>();
        const settledAt = new Map<string, number>();
        for (const op of ops) {
          step++;
          switch (op.kind) {
            case 'change':
              gate.changed(op.key);
              lastChange.set(op.key, step);
              settledAt.delete(op.key);
              break;
            case 'begin':
              // The work queue never runs one key twice at once.
              if (running.has(op.key)) continue;
              gate.begin(op.key);
              running.set(op.key, step);
              break;
            case 'end': {
              const began = running.get(op.key);
              if (began === undefined) continue;
              running.delete(op.key);
              const wasSettled = settledAt.has(op.key);
              const newly = gate.end(op.key, op.settled);
              if (op.settled && (lastChange.get(op.key) ?? 0) < began) {
                if (!wasSettled) settledAt.set(op.key, step);
              } else settledAt.delete(op.key);
              assert.equal(
                newly,
                !wasSettled && settledAt.has(op.key),
                'end() says whether it settled the group just now',
              );
              break;
            }
            case 'forget':
              gate.forget(op.key);
              settledAt.delete(op.key);
              break;
            case 'clear':
              gate.clear();
              settledAt.clear();
              // A reconcile still running when a term ends cannot settle its group for the next term.
              for (const key of running.keys()) lastChange.set(key, step);
              break;
          }
          for (const key of ['ns/a', 'ns/b', 'other/a']) {
            const expected = settledAt.has(key) && (lastChange.get(key) ?? 0) < settledAt.get(key)!;
            assert.equal(gate.isSettled(key), expected, `${key} after step ${step} (${JSON.stringify(op)})`);
          }
        }
      }),
      {
        numRuns: 3000,
        examples: [
          [
            [
              { kind: 'begin', key: 'ns/a' },
              { kind: 'end', key: 'ns/a', settled: true },
              { kind: 'change', key: 'ns/a' },
              { kind: 'begin', key: 'ns/a' },
              { kind: 'end', key: 'ns/a', settled: true },
            ],
          ],
        ],
      },
    );
  });

  it('keeps a group changed during its reconcile unsettled', () => {
    const gate = new ResyncGate();
    gate.begin('ns/a');
    gate.changed('ns/a');
    gate.end('ns/a', true);
    assert.equal(gate.isSettled('ns/a'), false);
    gate.begin('ns/a');
    gate.end('ns/a', true);
    assert.equal(gate.isSettled('ns/a'), true);
    gate.changed('ns/a');
    assert.equal(gate.isSettled('ns/a'), false);
  });
});

describe('resync gate: waiting for a change', () => {
  it('resolves at the next change of any group, or when the term ends', async () => {
    const gate = new ResyncGate();
    const term = new AbortController();
    let woke = false;
    const waiting = gate.untilChanged(term.signal).then(() => (woke = true));
    gate.begin('ns/a');
    gate.end('ns/a', true);
    await Promise.resolve();
    assert.equal(woke, false, 'a reconcile that settles is no change');
    gate.changed('ns/b');
    await waiting;
    assert.equal(woke, true);
    const ended = gate.untilChanged(term.signal);
    term.abort();
    await ended;
  });
});

describe('coordinatesReplicas', () => {
  const sts = (labels: Record<string, string>, annotations: Record<string, string>): StatefulSet => ({
    metadata: { name: 's', labels, annotations },
  });

  it('is true for any key of replica coordination, as a label or an annotation, whatever its value', () => {
    for (const key of [
      'grafana.com/rollout-downscale-leader',
      'grafana.com/rollout-upscale-only-when-leader-ready',
      'grafana.com/rollout-force-replicas',
      'grafana.com/rollout-mirror-replicas-from-resource-name',
      'grafana.com/rollout-mirror-replicas-from-resource-kind',
      'grafana.com/rollout-mirror-replicas-from-resource-api-version',
      'grafana.com/rollout-delayed-downscale',
      'grafana.com/rollout-prepare-delayed-downscale-url',
      'grafana.com/last-downscale',
      'grafana.com/min-time-between-zones-downscale',
    ]) {
      assert.equal(coordinatesReplicas(sts({}, { [key]: '' })), true, key);
      assert.equal(coordinatesReplicas(sts({ [key]: 'x' }, {})), true, key);
    }
  });

  it('is false for a rollout group member with only rollout metadata', () => {
    assert.equal(
      coordinatesReplicas(
        sts(
          { 'rollout-group': 'ingester', 'grafana.com/no-downscale': 'true' },
          { 'rollout-max-unavailable': '2', 'grafana.com/rollout-paused': 'false', constructor: 'x' },
        ),
      ),
      false,
    );
    assert.equal(coordinatesReplicas({}), false);
  });
});
