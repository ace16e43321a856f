// How the image runs node: the flags of the Dockerfile's ENTRYPOINT and the
// environment its final stage sets (the malloc settings among them), read
// from the Dockerfile itself so that the benchmarks and the tests that run
// Stateward "as the image does" cannot drift from it.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The flags between node and the script in the Dockerfile's ENTRYPOINT ["/nodejs/bin/node", ..., "/app/bin/stateward.js"]. */
export async function imageNodeFlags(): Promise<string[]> {
  const dockerfile = await readFile(join(ROOT, 'Dockerfile'), 'utf8');
  const line = dockerfile.split('\n').find((l) => l.startsWith('ENTRYPOINT '));
  if (!line) throw new Error('the Dockerfile has no ENTRYPOINT line');
  const argv = JSON.parse(line.slice('ENTRYPOINT '.length)) as string[];
  return argv.slice(1, -1);
}

/** The variables the final stage of the Dockerfile sets with ENV KEY=VALUE ... (no quoting, as ours writes them). */
export async function imageEnv(): Promise<Record<string, string>> {
  const dockerfile = await readFile(join(ROOT, 'Dockerfile'), 'utf8');
  const lines = dockerfile.split('\n');
  const final = lines.findLastIndex((l) => l.startsWith('FROM '));
  const env: Record<string, string> = {};
  for (const line of lines.slice(final).filter((l) => l.startsWith('ENV '))) {
    for (const pair of line.slice('ENV '.length).trim().split(/\s+/)) {
      const at = pair.indexOf('=');
      if (at <= 0) throw new Error(`the Dockerfile's "${line}": only ENV KEY=VALUE ... is read`);
      env[pair.slice(0, at)] = pair.slice(at + 1);
    }
  }
  return env;
}
