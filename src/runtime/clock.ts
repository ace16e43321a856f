// Time as a dependency. Everything in the runtime that waits (rate limiters,
// the work queue, leader election, informer backoff) takes a Clock, so unit
// tests drive time with FakeClock instead of sleeping.
//
// Two readings, as Go's time package keeps two: now() is the wall clock, for
// timestamps written to the API or compared with timestamps read from it
// (Lease renewTime, grafana.com/last-downscale, Event times, certificate
// validity); monotonic() never steps, for every duration measured within
// this process (deadlines, rate limits, "at most every", leadership). The
// wall clock can step (an NTP correction, an administrator): a duration
// taken as a difference of two now() readings jumps or stalls by the step.
// Timers (setTimer, sleep) are relative, so they run on monotonic time.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Wall clock: milliseconds since the epoch. May step; never use a difference of two readings as a duration. */
  now(): number;
  /** Milliseconds from an arbitrary origin that never steps: for durations within this process only. */
  monotonic(): number;
  /** Calls fn once after ms milliseconds unless cancelled first. */
  setTimer(ms: number, fn: () => void): Timer;
  /** Resolves after ms milliseconds; rejects with the signal's reason if it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(typeof reason === 'string' ? reason : 'aborted');
}

function sleepWith(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      timer.cancel();
      reject(abortReason(signal!));
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export const systemClock: Clock = {
  now: () => Date.now(),
  // CLOCK_MONOTONIC (libuv's hrtime): unaffected by steps of the wall clock.
  monotonic: () => performance.now(),
  setTimer(ms, fn) {
    const handle = setTimeout(fn, Math.max(0, ms));
    // Runtime timers never keep the process alive on their own: shutdown
    // is decided by the servers and the signal handlers, not by a backoff.
    handle.unref();
    return { cancel: () => clearTimeout(handle) };
  },
  sleep(ms, signal) {
    return sleepWith(systemClock, ms, signal);
  },
};

interface FakeTimer {
  due: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only when a test says so. Both readings start at
 * `start`; advance() moves both (time passes), step() only the wall clock
 * (someone set the clock), so after a step now() and monotonic() differ.
 */
export class FakeClock implements Clock {
  /** Monotonic time: what timers are due against. */
  private current: number;
  /** now() − monotonic(): changed only by step(). */
  private wallOffset = 0;
  private timers: FakeTimer[] = [];
  private seq = 0;

  constructor(start = 1_700_000_000_000) {
    this.current = start;
  }

  now(): number {
    return this.current + this.wallOffset;
  }

  monotonic(): number {
    return this.current;
  }

  /**
   * Steps the wall clock by ms (negative: backwards), as an NTP correction
   * or `date -s` does. No time passes: monotonic() stays, no timer fires.
   */
  step(ms: number): void {
    this.wallOffset += ms;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const timer: FakeTimer = { due: this.current + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return { cancel: () => void (timer.cancelled = true) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith(this, ms, signal);
  }

  /** Number of timers still waiting to fire. */
  get pending(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  /**
   * Moves time forward by ms (both readings), firing due timers in order.
   * Between timers it lets promise continuations run, so async code woken by
   * one timer can schedule the next before time moves on.
   */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      await flushMicrotasks();
      const next = this.nextDue();
      if (!next || next.due > target) break;
      this.current = Math.max(this.current, next.due);
      next.cancelled = true;
      next.fn();
    }
    this.current = target;
    await flushMicrotasks();
    this.timers = this.timers.filter((t) => !t.cancelled);
  }

  private nextDue(): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) {
      if (t.cancelled) continue;
      if (!best || t.due < best.due || (t.due === best.due && t.seq < best.seq)) best = t;
    }
    return best;
  }
}

/** Lets every queued promise continuation run (a macrotask turn). */
export function flushMicrotasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
