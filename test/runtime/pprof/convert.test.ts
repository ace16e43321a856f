import assert from 'node:assert/strict';
import type { HeapProfiler, Profiler } from 'node:inspector';
import { describe, it } from 'node:test';
import { Profile } from 'pprof-format';
import { cpuProfileToPprof, heapProfileToPprof } from '../../../src/runtime/pprof/convert.ts';
import { sampleTypes } from './profiles.ts';

const frame = (functionName: string, url = '', lineNumber = -1) => ({
  functionName,
  url,
  lineNumber,
  columnNumber: lineNumber < 0 ? -1 : 4,
  scriptId: '0',
});

/** Each sample's stack as function names, leaf first, with its values; decoded from the encoded bytes. */
function stacks(profile: Profile): { stack: string[]; value: number[] }[] {
  const decoded = Profile.decode(profile.encode());
  const strings = decoded.stringTable.strings;
  const functions = new Map(decoded.function.map((f) => [Number(f.id), strings[Number(f.name)]!]));
  const locations = new Map(decoded.location.map((l) => [Number(l.id), functions.get(Number(l.line[0]!.functionId))!]));
  return decoded.sample
    .map((s) => ({ stack: s.locationId.map((id) => locations.get(Number(id))!), value: s.value.map(Number) }))
    .sort((a, b) => a.stack.join('/').localeCompare(b.stack.join('/')));
}

describe('pprof conversion', () => {
  // (root) ─┬─ main (app.js:10) ─── work (app.js:20)
  //         ├─ (idle)
  //         └─ (garbage collector)
  const cpu: Profiler.Profile = {
    nodes: [
      { id: 1, callFrame: frame('(root)'), children: [2, 4, 5] },
      { id: 2, callFrame: frame('main', 'file:///app.js', 9), children: [3] },
      { id: 3, callFrame: frame('work', 'file:///app.js', 19) },
      { id: 4, callFrame: frame('(idle)') },
      { id: 5, callFrame: frame('(garbage collector)') },
    ],
    startTime: 1000,
    endTime: 1100,
    // at 1010 work, 1020 work, 1050 idle, 1060 main, 1090 gc
    samples: [3, 3, 4, 2, 5],
    timeDeltas: [10, 10, 30, 10, 30],
  };

  it('turns a CPU profile into samples by stack, leaf first, each standing for the time to the next sample, idle left out', () => {
    const profile = cpuProfileToPprof(cpu, { intervalMicros: 10_000, startedAtMs: 1_700_000_000_000 });
    assert.deepEqual(sampleTypes(profile), ['samples/count', 'cpu/nanoseconds']);
    assert.deepEqual(stacks(profile), [
      { stack: ['(garbage collector)'], value: [1, 10_000] },
      { stack: ['main'], value: [1, 30_000] },
      { stack: ['work', 'main'], value: [2, 40_000] },
    ]);
    assert.equal(profile.period, 10_000_000);
    assert.equal(profile.durationNanos, 100_000);
    assert.equal(BigInt(profile.timeNanos), 1_700_000_000_000_000_000n);
  });

  it("gives each function its file and 1-based start line, V8's -1 (unknown) as 0", () => {
    const decoded = Profile.decode(cpuProfileToPprof(cpu, { intervalMicros: 10_000, startedAtMs: 0 }).encode());
    const strings = decoded.stringTable.strings;
    const described = decoded.function
      .map((f) => `${strings[Number(f.name)]} ${strings[Number(f.filename)]}:${f.startLine}`)
      .sort();
    assert.deepEqual(described, ['(garbage collector) :0', 'main file:///app.js:10', 'work file:///app.js:20']);
  });

  it('names an anonymous function "(anonymous)" and keeps one location per distinct frame', () => {
    const profile = cpuProfileToPprof(
      {
        nodes: [
          { id: 1, callFrame: frame('(root)'), children: [2, 3] },
          { id: 2, callFrame: frame('', 'file:///a.js', 0), children: [4] },
          { id: 3, callFrame: frame('', 'file:///a.js', 0) },
          { id: 4, callFrame: frame('', 'file:///a.js', 0) },
        ],
        startTime: 0,
        endTime: 20,
        samples: [4, 3],
        timeDeltas: [5, 5],
      },
      { intervalMicros: 1000, startedAtMs: 0 },
    );
    assert.equal(profile.location.length, 1);
    assert.deepEqual(
      stacks(profile).map((s) => s.stack),
      [['(anonymous)'], ['(anonymous)', '(anonymous)']],
    );
  });

  it('turns a sampling heap profile into the bytes in use by allocating stack', () => {
    const heap: HeapProfiler.SamplingHeapProfile = {
      head: {
        callFrame: frame('(root)'),
        selfSize: 0,
        children: [
          {
            callFrame: frame('load', 'file:///app.js', 4),
            selfSize: 1024,
            children: [{ callFrame: frame('parse', 'file:///app.js', 40), selfSize: 4096, children: [] }],
          },
          { callFrame: frame('idle', 'file:///app.js', 60), selfSize: 0, children: [] },
        ],
      },
    };
    const profile = heapProfileToPprof(heap, { intervalBytes: 524_288, takenAtMs: 0 });
    assert.deepEqual(sampleTypes(profile), ['inuse_space/bytes']);
    assert.deepEqual(stacks(profile), [
      { stack: ['load'], value: [1024] },
      { stack: ['parse', 'load'], value: [4096] },
    ]);
    assert.equal(profile.period, 524_288);
  });
});
