// `npm run fuzz -- --minutes N [--seed S] [--cluster NAME] [--batch B] [--concurrency C] [--timeout-ms T] [--keep-going]`:
// the raw-socket fuzzer of issue 16 (test/fuzz/http-driver.ts) for N minutes
// against one real operator with both servers (plain HTTP with -web.enabled,
// HTTPS webhooks with a self-signed certificate): batches of generated
// requests over raw sockets, each followed by a health check (GET /healthz,
// a valid AdmissionReview to /admission/no-downscale). Reuses a running local
// cluster (the test run's, else `--cluster`'s, default "default"), or starts
// one for the run and stops it afterwards.
//
// Prints counts (connections, responses by server and status, connection
// endings, resets) every 30 s and at the end. When the process dies or stops
// answering, the batch's candidates are replayed one at a time on a fresh
// operator and the one that does it is printed with the seed and its bytes;
// the run stops there (or, with --keep-going, goes on with a fresh operator).
// Exit 1 if the process died or stopped answering at any point.
import { parseArgs } from 'node:util';
import { reuseOrStartCluster } from '../test/cluster/reuse.ts';
import { testCluster } from '../test/cluster/testing.ts';
import {
  checkHealth,
  describeFinding,
  fuzzBatch,
  FuzzOperator,
  FuzzStats,
  type Finding,
} from '../test/fuzz/http-driver.ts';

const usage =
  'usage: npm run fuzz -- --minutes N [--seed S] [--cluster NAME] [--batch B] [--concurrency C] [--timeout-ms T] [--keep-going]';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '5' },
      seed: { type: 'string' },
      cluster: { type: 'string' },
      batch: { type: 'string', default: '200' },
      concurrency: { type: 'string', default: '32' },
      'timeout-ms': { type: 'string', default: '1000' },
      'keep-going': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  const minutes = Number(values.minutes);
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  const size = Number(values.batch);
  const concurrency = Number(values.concurrency);
  const timeoutMs = Number(values['timeout-ms']);
  if (
    !(minutes > 0) ||
    !Number.isInteger(seed) ||
    !(Number.isInteger(size) && size > 0) ||
    !(Number.isInteger(concurrency) && concurrency > 0) ||
    !(timeoutMs > 0)
  ) {
    console.error(
      `--minutes and --timeout-ms must be > 0, --seed an integer, --batch and --concurrency positive integers\n${usage}`,
    );
    return 2;
  }

  const name = values.cluster ?? 'default';
  const owned = await reuseOrStartCluster(name, {
    name: name === 'default' ? `fuzz-${process.pid}` : name,
    nodesPerZone: 1,
    log: () => {},
  });

  const cleanups: (() => Promise<unknown>)[] = [];
  let operator: FuzzOperator | undefined;
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void (async () => {
      await operator?.stop();
      for (const fn of cleanups) await fn().catch(() => undefined);
      await owned?.teardown();
      process.exit(130);
    })();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);

  const log = (line: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
  const stats = new FuzzStats();
  const findings: Finding[] = [];
  let batches = 0;
  let stoppedAnswering = false;
  const started = performance.now();
  try {
    const cluster = testCluster();
    const namespace = await cluster.namespace({
      name: 'http-fuzz',
      after: (fn: () => Promise<unknown>) => void cleanups.push(fn),
    });
    operator = await FuzzOperator.start({
      kubeconfigPath: cluster.kubeconfigPath,
      apiServer: cluster.state.server,
      namespace,
    });
    log(
      `fuzzing for ${minutes} min, seed ${seed}: operator pid ${operator.pid}, plain port ${operator.plainPort}, HTTPS port ${operator.tlsPort}, namespace ${namespace}; batches of ${size}, ${concurrency} connections at a time, each cut after ${timeoutMs} ms`,
    );
    const deadline = started + minutes * 60_000;
    let lastProgress = started;
    while (performance.now() < deadline && !stopping) {
      const result = await fuzzBatch(operator, batches, {
        seed,
        size,
        concurrency,
        timeoutMs,
        isolateBudgetMs: 120_000,
        stats,
      });
      batches++;
      if (result.finding) {
        findings.push(result.finding);
        console.log(
          `${describeFinding(result.finding)}\n  again: npm run fuzz -- --seed ${seed} --batch ${size} --concurrency ${concurrency} --timeout-ms ${timeoutMs} --minutes ${minutes}`,
        );
        if (!values['keep-going']) break;
        if ((await checkHealth(operator)) !== undefined) await operator.restart();
      }
      if (performance.now() - lastProgress >= 30_000) {
        lastProgress = performance.now();
        const elapsed = (lastProgress - started) / 1000;
        log(
          `${batches} batches, ${stats.connections} connections (${(stats.connections / elapsed).toFixed(0)}/s), ${stats.responses} responses, ${findings.length} failure(s), operator log ${(operator.logBytes / 1024).toFixed(0)} KiB`,
        );
      }
    }
    const final = await checkHealth(operator);
    if (final !== undefined) {
      stoppedAnswering = true;
      console.log(
        `after the last batch: ${final}\noperator log, last lines:\n${operator.logTail.split('\n').slice(-30).join('\n')}`,
      );
    }
    const elapsed = (performance.now() - started) / 1000;
    console.log(
      [
        `fuzzed ${elapsed.toFixed(0)} s, seed ${seed}: ${batches} batches of ${size}`,
        stats.summary(),
        `resets: ${stats.byEnding.get('reset') ?? 0}; operator log ${operator.logBytes} bytes (${(((operator.logBytes / Math.max(1, stats.connections)) * 1000) / 1e6).toFixed(3)} MB per 1,000 connections); operator restarts ${operator.restarts}`,
        findings.length === 0 && !stoppedAnswering
          ? 'the operator stayed alive and answering throughout'
          : `FAILED: ${findings.length} batch(es) killed the operator or left it unable to answer${stoppedAnswering ? '; it was not answering at the end' : ''}`,
      ].join('\n'),
    );
    return findings.length > 0 || stoppedAnswering ? 1 : 0;
  } finally {
    await operator?.stop();
    for (const fn of cleanups) await fn().catch(() => undefined);
    await owned?.teardown();
  }
}

process.exitCode = await main();
process.exit();
