// Raw-socket fuzzing of the operator's two servers (issue 16): one real
// operator process with the plain HTTP server (-web.enabled) and the HTTPS
// webhook server (self-signed certificate), batches of generated requests
// (test/fuzz/http-requests.ts: random and mutated request lines, methods,
// targets, header blocks, framing, bodies, on every routed path) over raw
// `net` and `tls` sockets, and after each batch: the process has not exited,
// GET /healthz is 200, and a valid AdmissionReview POSTed to
// /admission/no-downscale gets 200 with its uid (test/fuzz/http-driver.ts).
//
// Seeded: FUZZ_SEED picks another seed, FUZZ_RUNS scales the number of
// batches. A failure names the seed, the batch and the request that did it
// (replayed alone on a fresh operator), its bytes escaped, and the
// operator's last log lines. `npm run fuzz -- --minutes N` runs the same
// driver for longer.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { testCluster } from '../cluster/testing.ts';
import {
  checkHealth,
  describeExit,
  describeFinding,
  fuzzBatch,
  FuzzOperator,
  FuzzStats,
  sendCase,
} from './http-driver.ts';
import { escapeBytes, ISSUE_16_REGRESSIONS } from './http-requests.ts';
import { FUZZ_SEED } from './support.ts';

const cluster = testCluster();
const RUN_FACTOR = Number(process.env['FUZZ_RUNS'] || 1);
const BATCHES = Math.max(1, Math.round(10 * RUN_FACTOR));
const BATCH_SIZE = 120;
const SEED = FUZZ_SEED + 16;

describe('raw-socket fuzzing of the plain HTTP and HTTPS webhook servers', { timeout: 120_000 }, () => {
  let operator: FuzzOperator | undefined;
  const cleanups: (() => Promise<unknown>)[] = [];

  before(async () => {
    const namespace = await cluster.namespace({
      name: 'http-fuzz',
      after: (fn: () => Promise<unknown>) => void cleanups.push(fn),
    });
    operator = await FuzzOperator.start({
      kubeconfigPath: cluster.kubeconfigPath,
      apiServer: cluster.state.server,
      namespace,
    });
  });
  after(async () => {
    await operator?.stop();
    for (const fn of cleanups) await fn().catch(() => undefined);
  });

  /** A running, answering operator for each test, even after an earlier one killed it. */
  async function healthy(): Promise<FuzzOperator> {
    assert.ok(operator, 'the operator did not start');
    if ((await checkHealth(operator)) !== undefined) await operator.restart();
    return operator;
  }

  for (const regression of ISSUE_16_REGRESSIONS) {
    it(`issue 16: ${regression.name} gets a 4xx answer and the process lives on`, async () => {
      const op = await healthy();
      const bytes = Buffer.from(regression.bytes, 'latin1');
      const outcome = await sendCase(
        op,
        { server: regression.server, request: { kind: 'regression', pieces: [bytes], pauseMs: 0, end: true } },
        3_000,
      );
      await delay(100); // a crash is seen as an exit, not as a refused connection
      const request = `Buffer.from(${escapeBytes(bytes)}, 'latin1') to the ${regression.server === 'plain' ? 'plain HTTP' : 'HTTPS webhook'} server`;
      const problem = await checkHealth(op);
      assert.equal(problem, undefined, `${problem} after ${request}\noperator log:\n${op.logTail.slice(-2_500)}`);
      assert.equal(
        outcome.statuses.length,
        1,
        `one response expected to ${request}; got ${outcome.statuses.join(', ') || 'none'} (connection ${outcome.ending}${outcome.error ? ` ${outcome.error}` : ''})`,
      );
      const status = outcome.statuses[0]!;
      assert.ok(
        status >= 400 && status < 500,
        `a 4xx expected to ${request} (the target cannot be parsed), got ${status}`,
      );
    });
  }

  it(`keeps answering after ${BATCHES} batches of ${BATCH_SIZE} generated requests to both servers (seed ${SEED})`, async (t) => {
    const op = await healthy();
    const stats = new FuzzStats();
    const logBytesBefore = op.logBytes;
    for (let batch = 0; batch < BATCHES; batch++) {
      const result = await fuzzBatchOrFail(op, batch, stats);
      if (result) assert.fail(result);
    }
    t.diagnostic(
      `seed ${SEED}: ${stats.summary().replaceAll('\n', '; ')}; operator log ${op.logBytes - logBytesBefore} bytes`,
    );
  });
});

async function fuzzBatchOrFail(op: FuzzOperator, batch: number, stats: FuzzStats): Promise<string | undefined> {
  const result = await fuzzBatch(op, batch, {
    seed: SEED,
    size: BATCH_SIZE,
    concurrency: 24,
    timeoutMs: 400,
    isolateBudgetMs: 15_000,
    stats,
  });
  if (!result.finding) return undefined;
  const exit = op.exit ? ` (the replay ended with ${describeExit(op.exit)})` : '';
  return `${describeFinding(result.finding)}${exit}\n  again: FUZZ_SEED=${FUZZ_SEED} npm test -- test/fuzz/http-servers.int.test.ts`;
}
