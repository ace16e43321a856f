import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  deletionNote,
  DeletionDigests,
  WINDOW_MS,
  type DeletedPod,
  type DeletionReport,
} from '../../src/rollout/deletionevents.ts';

const at = (statefulSet: string, revision = 'r1') => ({ group: 'ns/g', namespace: 'ns', statefulSet, revision });
const pod = (name: string): DeletedPod => ({ pod: name, uid: `uid-${name}`, reason: 'update' });
const names = (reports: DeletionReport[]) => reports.map((r) => r.pods.map((p) => p.pod));

describe('DeletionDigests', () => {
  it('reports the first delete at once and gathers the rest until the window has passed', () => {
    const d = new DeletionDigests();
    assert.deepEqual(names(d.deleted(at('a'), pod('a-0'), 0)), [['a-0']]);
    assert.deepEqual(names(d.deleted(at('a'), pod('a-1'), 2_000)), []);
    assert.deepEqual(names(d.deleted(at('a'), pod('a-2'), 4_000)), []);
    assert.deepEqual(names(d.due(WINDOW_MS - 1)), []);
    assert.deepEqual(names(d.due(WINDOW_MS)), [['a-1', 'a-2']]);
    // The next delete within a window of that report is gathered again.
    assert.deepEqual(names(d.deleted(at('a'), pod('a-3'), WINDOW_MS + 1_000)), []);
    // One past the window goes out at once, with what is held.
    assert.deepEqual(names(d.deleted(at('a'), pod('a-4'), 2 * WINDOW_MS)), [['a-3', 'a-4']]);
  });

  it('reports each StatefulSet on its own, and a new revision at once after what the old one held', () => {
    const d = new DeletionDigests();
    d.deleted(at('a'), pod('a-0'), 0);
    assert.deepEqual(names(d.deleted(at('b'), pod('b-0'), 1_000)), [['b-0']]);
    d.deleted(at('a'), pod('a-1'), 2_000);
    const reports = d.deleted(at('a', 'r2'), pod('a-0'), 3_000);
    assert.deepEqual(
      reports.map((r) => [r.revision, r.pods.map((p) => p.pod)]),
      [
        ['r1', ['a-1']],
        ['r2', ['a-0']],
      ],
    );
  });

  it('flushes a StatefulSet (its rollout completed), a group (it settled) or everything (leadership ends)', () => {
    const d = new DeletionDigests();
    for (const set of ['a', 'b']) d.deleted(at(set), pod(`${set}-0`), 0);
    d.deleted({ ...at('c'), group: 'ns/other' }, pod('c-0'), 0);
    for (const set of ['a', 'b']) d.deleted(at(set), pod(`${set}-1`), 1_000);
    d.deleted({ ...at('c'), group: 'ns/other' }, pod('c-1'), 1_000);
    assert.deepEqual(names(d.flushStatefulSet('ns', 'a', 2_000)), [['a-1']]);
    assert.deepEqual(names(d.flushStatefulSet('ns', 'a', 2_000)), []);
    assert.deepEqual(names(d.flush(2_000, 'ns/g')), [['b-1']]);
    assert.deepEqual(names(d.flush(2_000)), [['c-1']]);
  });

  it('names every delete in exactly one report, in order, and reports a StatefulSet at most once a window but for flushes and new revisions', () => {
    const step = fc.oneof(
      fc.record({
        kind: fc.constant('delete' as const),
        set: fc.constantFrom('a', 'b'),
        revision: fc.constantFrom('r1', 'r2'),
        gap: fc.nat(2 * WINDOW_MS),
      }),
      fc.record({ kind: fc.constantFrom('due' as const, 'flush' as const), gap: fc.nat(2 * WINDOW_MS) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const d = new DeletionDigests();
        let now = 0;
        let n = 0;
        const deleted: string[] = [];
        const reported: string[] = [];
        const lastReport = new Map<string, number>();
        const lastRevision = new Map<string, string>();
        const take = (reports: DeletionReport[], forced: boolean) => {
          for (const r of reports) {
            assert.ok(r.pods.length > 0);
            reported.push(...r.pods.map((p) => `${r.statefulSet}/${p.pod}`));
            const previous = lastReport.get(r.statefulSet);
            // Reports no flush or new revision forced come a window apart.
            if (!forced && previous !== undefined)
              assert.ok(now - previous >= WINDOW_MS, `${r.statefulSet} reported at ${previous} and ${now}`);
            lastReport.set(r.statefulSet, now);
          }
        };
        for (const s of steps) {
          now += s.gap;
          if (s.kind === 'delete') {
            const name = `${s.set}-${n++}`;
            deleted.push(`${s.set}/${name}`);
            const newRevision = (lastRevision.get(s.set) ?? s.revision) !== s.revision;
            lastRevision.set(s.set, s.revision);
            take(d.deleted(at(s.set, s.revision), pod(name), now), newRevision);
          } else take(s.kind === 'due' ? d.due(now) : d.flush(now), s.kind === 'flush');
        }
        take(d.flush(now), true);
        // Exactly once each, and a StatefulSet's deletes in the order they happened.
        assert.deepEqual([...reported].sort(), [...deleted].sort());
        for (const set of ['a', 'b'])
          assert.deepEqual(
            reported.filter((r) => r.startsWith(`${set}/`)),
            deleted.filter((r) => r.startsWith(`${set}/`)),
          );
      }),
    );
  });
});

describe('deletionNote', () => {
  it('keeps the one-pod note as it was, and lists several pods with why', () => {
    assert.equal(
      deletionNote({ namespace: 'ns', statefulSet: 'a', revision: 'r2', pods: [pod('a-0')] }),
      'deleting pod a-0 for revision r2',
    );
    assert.equal(
      deletionNote({
        namespace: 'ns',
        statefulSet: 'a',
        revision: 'r2',
        pods: [pod('a-1'), { pod: 'a-2', uid: 'u', reason: 'replace-unavailable', detail: 'CrashLoopBackOff' }],
      }),
      'deleting pods a-1, a-2 (already unavailable: CrashLoopBackOff) for revision r2',
    );
  });

  it('stays within an Event note, saying how many it left out', () => {
    const pods = Array.from({ length: 200 }, (_, i) => pod(`ingester-zone-a-with-a-long-name-${i}`));
    const note = deletionNote({ namespace: 'ns', statefulSet: 'a', revision: 'r2', pods });
    assert.ok(Buffer.byteLength(note) <= 1024, `${Buffer.byteLength(note)} bytes`);
    const listed = note.split(', ').length;
    assert.match(note, new RegExp(` and ${200 - listed} more for revision r2$`));
  });
});
