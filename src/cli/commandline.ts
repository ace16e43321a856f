// The first word of the stateward command line. One executable is both the
// operator (rollout-operator's command line: flags only, no positional
// words) and the client commands a person types. A first word that is not a
// flag and names no command is a mistake of the person at the terminal, so
// it is answered as one — "unknown command", with the nearest command —
// instead of falling through to the operator, whose first complaint would be
// a missing namespace flag. Pure.

/** The client commands, as `stateward help` lists them. */
export const CLIENT_COMMANDS = [
  { name: 'status', summary: 'show the rollout groups of a namespace, their zones and why one waits' },
  { name: 'doctor', summary: 'check an install and the workloads it manages; every finding says how to fix it' },
  { name: 'help', summary: 'show this help' },
] as const;

export type FirstWord =
  | { kind: 'command'; name: string }
  | { kind: 'help' }
  | { kind: 'operator' }
  | { kind: 'unknown'; word: string; suggestion?: string };

/** What the first word asks for; `commands` are the runnable ones besides `help`. */
export function classifyFirstWord(argv: readonly string[], commands: readonly string[]): FirstWord {
  const word = argv[0];
  // An empty word is no command a person typed: Go's flag package stops at it and runs on, and so does the operator.
  if (word === undefined || word === '' || word.startsWith('-')) return { kind: 'operator' };
  if (word === 'help') return { kind: 'help' };
  if (commands.includes(word)) return { kind: 'command', name: word };
  const suggestion = nearest(word, [...commands, 'help']);
  return { kind: 'unknown', word, ...(suggestion !== undefined ? { suggestion } : {}) };
}

/** The candidate within two edits of `word` (fewest first), if any: typos, not guesses. */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const distance = editDistance(word.toLowerCase(), name);
    if (distance <= 2 && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** Damerau–Levenshtein (optimal string alignment): a swap of two letters, the commonest typo, is one edit. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) =>
    Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        value = Math.min(value, d[i - 2]![j - 2]! + 1);
      d[i]![j] = value;
    }
  }
  return d[a.length]![b.length]!;
}

/** `stateward help`, and the head of the operator's `-help`. */
export function topLevelHelp(): string {
  const width = Math.max(...CLIENT_COMMANDS.map((c) => c.name.length));
  return [
    'Usage:',
    '  stateward <command> [flags]     a client command, run from a workstation with your kubeconfig',
    "  stateward [flags]               the operator (rollout-operator's flags; in a pod, or with a kubeconfig)",
    '',
    'Commands:',
    ...CLIENT_COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    "Run 'stateward <command> -help' for a command's flags, 'stateward -help' for the operator's.",
    'From a clone: npx stateward …   As a kubectl plugin: kubectl stateward status|doctor …',
    '',
  ].join('\n');
}

/** The answer to a first word that names no command. */
export function unknownCommandMessage(first: { word: string; suggestion?: string }, program = 'stateward'): string {
  const hint = first.suggestion !== undefined ? ` Did you mean "${first.suggestion}"?` : '';
  return `${program}: unknown command "${first.word}".${hint}\nRun '${program} help' for the commands.\n`;
}
