#!/usr/bin/env node
// kubectl plugin: `kubectl stateward status …` and `kubectl stateward doctor …`
// run the same commands as `stateward status` and `stateward doctor`.
import { main } from '../src/main.ts';

const [command] = process.argv.slice(2);
if (command !== 'status' && command !== 'doctor') {
  process.stderr.write('usage: kubectl stateward status|doctor [flags]   (-help after the command lists its flags)\n');
  process.exitCode = command === undefined || command === '-help' || command === '--help' || command === '-h' ? 0 : 2;
} else {
  process.exitCode = await main(process.argv.slice(2), {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    env: process.env,
  });
}
