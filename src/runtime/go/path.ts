// Go's path.Clean, for slash-separated paths read from annotations:
// rollout-operator v0.39 (#468) cleans the prepare-downscale path with it, so
// Stateward must call exactly the URL it would. Purely lexical, as in Go:
// nothing is looked up, and `\` is an ordinary character.

/**
 * The shortest path equivalent to `p` by purely lexical processing: runs of
 * slashes become one, `.` elements go, an inner `..` goes with the
 * non-`..` element before it, `..` at the start of a rooted path goes. The
 * result ends in a slash only when it is the root "/", and is "." when
 * nothing remains.
 */
export function cleanPath(p: string): string {
  const rooted = p.startsWith('/');
  // One pass over the elements: a stack that `..` pops where it can.
  const kept: string[] = [];
  for (const element of p.split('/')) {
    if (element === '' || element === '.') continue;
    if (element !== '..') kept.push(element);
    else if (kept.length > 0 && kept[kept.length - 1] !== '..') kept.pop();
    // Above the root there is nothing: `/..` is `/`.
    else if (!rooted) kept.push('..');
  }
  const joined = kept.join('/');
  if (rooted) return `/${joined}`;
  return joined === '' ? '.' : joined;
}
