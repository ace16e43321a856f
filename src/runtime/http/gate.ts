// How the servers keep a warning that an attacker can trigger at will from
// flooding the log: each kind of warning is written at most once per
// interval (monotonic time).

/** A gate that opens at most once per interval. */
export function everyMs(intervalMs: number): () => boolean {
  let last = -Infinity;
  return () => {
    const now = performance.now();
    if (now - last < intervalMs) return false;
    last = now;
    return true;
  };
}

/** One such gate per key (a reason, a route): opens at most once per interval for each. */
export function everyMsPerKey(intervalMs: number): (key: string) => boolean {
  const gates = new Map<string, () => boolean>();
  return (key) => {
    let gate = gates.get(key);
    if (gate === undefined) {
      gate = everyMs(intervalMs);
      gates.set(key, gate);
    }
    return gate();
  };
}
