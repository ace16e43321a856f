// `npm test`: type-check, lint, format check, then every test file in one node:test run
// against one local cluster started for the run and torn down after it.
//
//   npm test                      everything
//   npm test -- --unit            only files that need no cluster
//   npm test -- test/foo.test.ts  only these files (cluster started if any needs it)
//
// Files named *.int.test.ts need the cluster; all others must not.
import { spawn } from 'node:child_process';
import { glob } from 'node:fs/promises';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { LocalCluster } from '../test/cluster/cluster.ts';
import { serveControl } from '../test/cluster/control.ts';
import { TEST_CLUSTER_ENV } from '../test/cluster/testing.ts';

const root = join(import.meta.dirname, '..');
const bin = (name: string) => join(root, 'node_modules', '.bin', name);

function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): { done: Promise<number>; kill: () => void } {
  const child = spawn(command, args, { cwd: root, stdio: 'inherit', env });
  const done = new Promise<number>((resolve) => {
    child.on('error', (error) => {
      console.error(`cannot run ${command}: ${error.message}`);
      resolve(127);
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
  return { done, kill: () => child.kill('SIGTERM') };
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const unitOnly = args.includes('--unit');
  const explicit = args.filter((a) => !a.startsWith('--'));
  const files =
    explicit.length > 0 ? explicit : (await Array.fromAsync(glob('test/**/*.test.ts', { cwd: root }))).sort();
  const selected = unitOnly ? files.filter((f) => !f.endsWith('.int.test.ts')) : files;
  const needsCluster = selected.some((f) => f.endsWith('.int.test.ts'));

  console.log('# type-check (tsc)');
  const typecheck = await run(bin('tsc'), ['-p', 'tsconfig.json']).done;
  console.log(typecheck === 0 ? '# type-check passed' : '# type-check FAILED');
  console.log('# lint (eslint)');
  const lint = await run(bin('eslint'), ['.']).done;
  console.log(lint === 0 ? '# lint passed' : '# lint FAILED');
  console.log('# format (prettier --check; npm run format fixes it)');
  const format = await run(bin('prettier'), ['--check', '--log-level=warn', '**/*.{ts,js,mjs}']).done;
  console.log(format === 0 ? '# format passed' : '# format FAILED');

  let cluster: LocalCluster | undefined;
  let control: Server | undefined;
  let tests: ReturnType<typeof run> | undefined;
  let interrupted = false;
  const interrupt = () => {
    interrupted = true;
    tests?.kill();
    void cluster?.teardown().then(() => process.exit(130));
    if (!cluster) process.exit(130);
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);

  const env: NodeJS.ProcessEnv = { ...process.env };
  if (needsCluster) {
    try {
      cluster = await LocalCluster.start({ name: `test-${process.pid}` });
      control = await serveControl(cluster, () => undefined);
      env[TEST_CLUSTER_ENV] = cluster.stateDir;
    } catch (error) {
      console.error(`# local cluster failed to start: ${error instanceof Error ? error.message : String(error)}`);
      return 1;
    }
  }
  let testsCode = 1;
  try {
    // One file at a time: cluster tests share a control plane, and some stop
    // or restart its components.
    tests = run(process.execPath, ['--test', '--test-concurrency=1', '--test-reporter=spec', ...selected], env);
    testsCode = await tests.done;
  } finally {
    control?.close();
    await cluster?.teardown();
  }
  if (interrupted) return 130;
  return typecheck !== 0 || lint !== 0 || format !== 0 ? 1 : testsCode;
}

process.exitCode = await main();
