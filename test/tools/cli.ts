// npm run helm -- <helm args...>   build helm if needed, then run it
// npm run tools:build              only build (or find cached) tools: helm,
//                                  the OpenTelemetry Collector and Prometheus
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { helmBinary } from './helm.ts';
import { otelcolBinary } from './otelcol.ts';
import { prometheusBinary } from './prometheus.ts';

const usage = 'usage: node test/tools/cli.ts <helm [args...]|build>';

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'helm':
      return exec(await helmBinary(), rest);
    case 'build':
      await helmBinary();
      await otelcolBinary();
      await prometheusBinary();
      return 0;
    case '-h':
    case '--help':
      console.log(usage);
      return 0;
    default:
      console.error(command ? `unknown command "${command}"\n${usage}` : usage);
      return 2;
  }
}

/** Runs `binary` on our terminal and hands back its exit status. */
async function exec(binary: string, args: string[]): Promise<number> {
  const child = spawn(binary, args, { stdio: 'inherit' });
  // Let helm decide how to stop (it may clean up); we exit when it does.
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  return new Promise((resolve, reject) => {
    child.on('error', (error) => reject(new Error(`cannot run ${binary}: ${error.message}`)));
    // A shell reports death by signal N as 128 + N; callers can tell the two apart.
    child.on('exit', (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0)));
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 1;
  },
);
