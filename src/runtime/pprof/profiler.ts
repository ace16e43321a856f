// V8's CPU profiler and sampling heap profiler, reached through an inspector
// session of the process's own (node:inspector/promises: no debugger port
// is opened, nothing leaves the process), their profiles handed back as Go's
// /debug/pprof serves them: pprof protobuf, gzipped (convert.ts maps them).
//
// One CPU profile at a time, and one heap profile at a time: a second
// request while one is being taken is told so (ProfileInProgress) rather
// than queued, so requests cannot pile up profiling work. The two may run
// side by side, as in Go.
import { Session } from 'node:inspector/promises';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { Profile } from 'pprof-format';
import { cpuProfileToPprof, heapProfileToPprof } from './convert.ts';

/** Go samples CPU at 100 Hz (V8's default, 1 kHz, costs ten times the interrupts). */
export const CPU_SAMPLING_INTERVAL_MICROS = 10_000;
/** Go's runtime.MemProfileRate: one sample per 512 KiB allocated, on average. */
export const HEAP_SAMPLING_INTERVAL_BYTES = 512 * 1024;

export type ProfileKind = 'cpu' | 'heap';

/** A profile of this kind is already being taken. */
export class ProfileInProgress extends Error {
  readonly kind: ProfileKind;
  constructor(kind: ProfileKind) {
    super(`a ${kind === 'cpu' ? 'CPU' : 'heap'} profile is already being taken; ask again once it is done`);
    this.kind = kind;
  }
}

const gzipped = promisify(gzip);

/** The encoded profile as Go's /debug/pprof serves it. */
async function encoded(profile: Profile): Promise<Buffer> {
  return gzipped(profile.encode());
}

export class V8Profiler {
  private readonly session = new Session();
  private readonly taking = new Set<ProfileKind>();
  private connected = false;

  /**
   * Connects and starts heap sampling. A heap profile holds what was
   * allocated since and is still alive, as Go's (whose sampling runs from
   * the process's start): so it starts with the endpoint, not per request.
   */
  async start(): Promise<void> {
    this.session.connect();
    this.connected = true;
    await this.session.post('HeapProfiler.startSampling', { samplingInterval: HEAP_SAMPLING_INTERVAL_BYTES });
  }

  /**
   * A CPU profile over `ms`, ended early when `until` aborts (then it holds
   * what was sampled so far). Rejects with ProfileInProgress while another
   * CPU profile is being taken.
   */
  async cpu(ms: number, until: AbortSignal): Promise<Buffer> {
    return this.exclusively('cpu', async () => {
      await this.session.post('Profiler.enable');
      try {
        await this.session.post('Profiler.setSamplingInterval', { interval: CPU_SAMPLING_INTERVAL_MICROS });
        const startedAtMs = Date.now();
        await this.session.post('Profiler.start');
        await elapsed(ms, until);
        const { profile } = await this.session.post('Profiler.stop');
        return encoded(cpuProfileToPprof(profile, { intervalMicros: CPU_SAMPLING_INTERVAL_MICROS, startedAtMs }));
      } finally {
        await this.session.post('Profiler.disable').catch(() => undefined);
      }
    });
  }

  /**
   * The heap in use, as sampled since start(). V8 collects garbage first
   * (the sampling is started that way), so only live objects are counted,
   * as Go's heap profile after `?gc=1`. Rejects with ProfileInProgress
   * while another heap profile is being taken.
   */
  async heap(): Promise<Buffer> {
    return this.exclusively('heap', async () => {
      const takenAtMs = Date.now();
      const { profile } = await this.session.post('HeapProfiler.getSamplingProfile');
      return encoded(heapProfileToPprof(profile, { intervalBytes: HEAP_SAMPLING_INTERVAL_BYTES, takenAtMs }));
    });
  }

  /** Stops heap sampling and disconnects; a CPU profile under way ends with an error. */
  close(): void {
    if (!this.connected) return;
    this.connected = false;
    this.session.disconnect();
  }

  private async exclusively<T>(kind: ProfileKind, take: () => Promise<T>): Promise<T> {
    if (this.taking.has(kind)) throw new ProfileInProgress(kind);
    if (!this.connected) throw new Error('the profiler is not running');
    this.taking.add(kind);
    try {
      return await take();
    } finally {
      this.taking.delete(kind);
    }
  }
}

/** Resolves after `ms`, or as soon as `until` aborts. */
async function elapsed(ms: number, until: AbortSignal): Promise<void> {
  if (until.aborted) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      until.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    until.addEventListener('abort', done, { once: true });
  });
}
