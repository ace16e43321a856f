// V8's profiles in pprof's format, the one `go tool pprof` reads and Go's
// /debug/pprof serves. Pure: a profile as node:inspector hands it over in,
// a pprof Profile out. The encoding itself is pprof-format's (Datadog's
// encoder, the one @datadog/pprof writes with), so only the mapping from
// V8's call trees to pprof's samples, locations and functions is ours.
//
// What maps to what:
// - A V8 call frame is a pprof function (name, script URL, start line) and
//   a location on it. V8 reports a CPU profile node's position as where its
//   function starts, so a location's line is that line.
// - A sample's stack is the path from a node up to V8's "(root)", leaf first.
// - CPU: samples/count and cpu/nanoseconds, as Go's CPU profile. Each V8
//   sample stands for the time until the next one; samples of "(idle)" (the
//   thread waiting for work) are left out, as Go's profile holds only time on
//   a CPU.
// - Heap: inuse_space/bytes, what V8's sampling heap profiler holds (objects
//   still alive, each sample scaled up to the bytes it stands for). V8 hands
//   over the scaled bytes only, not the scaled object counts, so Go's
//   inuse_objects has no counterpart here.
import type { HeapProfiler, Profiler, Runtime } from 'node:inspector';
import { Function as PprofFunction, Location, Profile, Sample, StringTable, ValueType } from 'pprof-format';

/** The node V8 roots every call tree at; it is no frame of the program. */
const ROOT = '(root)';
/** The node V8 samples while the thread waits for work. */
const IDLE = '(idle)';

/** Functions and locations of one profile, each distinct frame once, and its string table. */
class Frames {
  readonly strings = new StringTable();
  readonly functions: PprofFunction[] = [];
  readonly locations: Location[] = [];
  private readonly functionIds = new Map<string, number>();
  private readonly locationIds = new Map<string, number>();

  /** The location id of a frame. V8's lines and columns count from 0 (-1: unknown), pprof's from 1 (0: unknown). */
  location(frame: Runtime.CallFrame): number {
    const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
    const line = Math.max(0, frame.lineNumber + 1);
    const functionKey = JSON.stringify([name, frame.url, line]);
    let functionId = this.functionIds.get(functionKey);
    if (functionId === undefined) {
      functionId = this.functions.length + 1;
      this.functionIds.set(functionKey, functionId);
      const nameId = this.strings.dedup(name);
      this.functions.push(
        new PprofFunction({
          id: functionId,
          name: nameId,
          systemName: nameId,
          filename: this.strings.dedup(frame.url),
          startLine: line,
        }),
      );
    }
    const locationKey = `${functionId}:${line}`;
    let locationId = this.locationIds.get(locationKey);
    if (locationId === undefined) {
      locationId = this.locations.length + 1;
      this.locationIds.set(locationKey, locationId);
      this.locations.push(new Location({ id: locationId, line: [{ functionId, line }] }));
    }
    return locationId;
  }

  /** A value type with its names in this profile's string table. */
  type(type: string, unit: string): ValueType {
    return new ValueType({ type: this.strings.dedup(type), unit: this.strings.dedup(unit) });
  }
}

/** Nanoseconds since the Unix epoch of a wall-clock time in milliseconds (beyond 2^53: a bigint). */
function epochNanos(ms: number): bigint {
  return BigInt(Math.round(ms)) * 1_000_000n;
}

export interface CpuProfileTiming {
  /** The interval V8 was asked to sample at. */
  intervalMicros: number;
  /** Wall-clock time the profile started (V8's own times are monotonic). */
  startedAtMs: number;
}

/** A V8 CPU profile (Profiler.stop) as pprof's CPU profile. */
export function cpuProfileToPprof(profile: Profiler.Profile, timing: CpuProfileTiming): Profile {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  // Per node: how many samples landed on it and the microseconds they stand for.
  const totals = new Map<number, { count: number; micros: number }>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  let at = profile.startTime;
  for (let i = 0; i < samples.length; i++) {
    at += deltas[i] ?? 0;
    const next = i + 1 < samples.length ? at + (deltas[i + 1] ?? 0) : profile.endTime;
    const id = samples[i]!;
    if (byId.get(id)?.callFrame.functionName === IDLE) continue;
    const total = totals.get(id) ?? { count: 0, micros: 0 };
    total.count += 1;
    total.micros += Math.max(0, next - at);
    totals.set(id, total);
  }

  const frames = new Frames();
  const stacks = new Map<number, number[]>();
  const stackOf = (id: number): number[] => {
    const known = stacks.get(id);
    if (known) return known;
    const node = byId.get(id);
    const up = parent.get(id);
    const rest = up === undefined ? [] : stackOf(up);
    const stack = !node || node.callFrame.functionName === ROOT ? rest : [frames.location(node.callFrame), ...rest];
    stacks.set(id, stack);
    return stack;
  };
  const sampleType = [frames.type('samples', 'count'), frames.type('cpu', 'nanoseconds')];
  return new Profile({
    sampleType,
    sample: [...totals].map(
      ([id, total]) => new Sample({ locationId: stackOf(id), value: [total.count, Math.round(total.micros * 1000)] }),
    ),
    location: frames.locations,
    function: frames.functions,
    stringTable: frames.strings,
    timeNanos: epochNanos(timing.startedAtMs),
    durationNanos: Math.max(0, Math.round((profile.endTime - profile.startTime) * 1000)),
    periodType: frames.type('cpu', 'nanoseconds'),
    period: timing.intervalMicros * 1000,
  });
}

export interface HeapProfileSampling {
  /** The mean bytes between two samples V8 was asked for. */
  intervalBytes: number;
  /** Wall-clock time the profile was taken. */
  takenAtMs: number;
}

/** A V8 sampling heap profile (HeapProfiler.getSamplingProfile) as pprof's heap profile of the bytes in use. */
export function heapProfileToPprof(profile: HeapProfiler.SamplingHeapProfile, sampling: HeapProfileSampling): Profile {
  const frames = new Frames();
  const sample: Sample[] = [];
  // Depth first, each node with the stack of its caller; an explicit stack, as call trees can be deep.
  const pending: { node: HeapProfiler.SamplingHeapProfileNode; callers: number[] }[] = [
    { node: profile.head, callers: [] },
  ];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { node, callers } = next;
    const stack = node.callFrame.functionName === ROOT ? callers : [frames.location(node.callFrame), ...callers];
    if (node.selfSize > 0) sample.push(new Sample({ locationId: stack, value: [node.selfSize] }));
    for (const child of node.children) pending.push({ node: child, callers: stack });
  }
  return new Profile({
    sampleType: [frames.type('inuse_space', 'bytes')],
    sample,
    location: frames.locations,
    function: frames.functions,
    stringTable: frames.strings,
    timeNanos: epochNanos(sampling.takenAtMs),
    periodType: frames.type('space', 'bytes'),
    period: sampling.intervalBytes,
  });
}
