// Debian's libfaketime (package faketime, which .ci/run installs), preloaded
// into an operator process, offsets its wall clock and leaves its monotonic
// clock alone: a real clock step or skew, seen by everything in the process.
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1';

/** The environment for a fixed offset (`-10m`, `+90s`) or for the offset a file says, re-read every second. */
export function faketimeEnv(offset: { fixed: string } | { file: string }): NodeJS.ProcessEnv {
  const how =
    'fixed' in offset
      ? { FAKETIME: offset.fixed }
      : { FAKETIME_TIMESTAMP_FILE: offset.file, FAKETIME_CACHE_DURATION: '1' };
  return { LD_PRELOAD: LIBFAKETIME, FAKETIME_DONT_FAKE_MONOTONIC: '1', ...how };
}
