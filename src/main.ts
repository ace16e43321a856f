// Entry point of the stateward executable. The operator's capabilities
// (rollouts, replica coordination, webhooks, config-change restarts) plug in
// here as they are built; until then it answers -version and -help.
import { readFileSync } from 'node:fs';

export const version: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

const usage = `Usage of stateward:
  -help
    	Print this help and exit.
  -version
    	Print the version and exit.
`;

/** Runs the command line; returns the process exit code. */
export function main(argv: readonly string[], io: Io): number {
  for (const arg of argv) {
    // Go's flag package treats -x and --x alike; so do we, for drop-in compatibility.
    const name = arg.replace(/^--?/, '').split('=')[0];
    if (name === 'version') {
      io.out(`stateward ${version}\n`);
      return 0;
    }
    if (name === 'help' || name === 'h') {
      io.out(usage);
      return 0;
    }
    io.err(`flag provided but not defined: ${arg}\n${usage}`);
    return 2;
  }
  io.err('stateward: no capability is enabled yet; see -help\n');
  return 1;
}
