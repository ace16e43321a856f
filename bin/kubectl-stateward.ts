#!/usr/bin/env node
// kubectl plugin: `kubectl stateward status …` and `kubectl stateward doctor …`
// run the same commands as `stateward status` and `stateward doctor`.
import { main } from '../src/main.ts';
import { classifyFirstWord, unknownCommandMessage } from '../src/cli/commandline.ts';

const argv = process.argv.slice(2);
const first = classifyFirstWord(argv, ['status', 'doctor']);
const usage = 'usage: kubectl stateward status|doctor [flags]   (-help after the command lists its flags)\n';
if (first.kind === 'command') {
  process.exitCode = await main(argv, {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    env: process.env,
  });
} else if (first.kind === 'unknown') {
  process.stderr.write(unknownCommandMessage(first, 'kubectl stateward') + usage);
  process.exitCode = 2;
} else {
  // No command, `help` or a help flag: the usage, exit 0; any other flag first is a mistake.
  const asksHelp = argv.length === 0 || first.kind === 'help' || ['-help', '--help', '-h'].includes(argv[0]!);
  process.stderr.write(usage);
  process.exitCode = asksHelp ? 0 : 2;
}
