// The raw-socket fuzzer's driver: runs the real operator executable with both
// servers (plain HTTP with -web.enabled, HTTPS webhooks with a self-signed
// certificate), sends batches of generated requests (http-requests.ts) over
// raw `net` and `tls` sockets, each connection bounded by a short timeout,
// and after each batch checks that the process is alive and still answers a
// good request on each server: GET /healthz (200) on the plain port, a valid
// AdmissionReview to /admission/no-downscale over HTTPS (200, JSON, the
// request's uid).
//
// When a batch kills the process (or leaves it unable to answer), the driver
// restarts it and replays the candidates one at a time (when it died: the
// connections open at that moment, closest first; otherwise the whole batch)
// until one reproduces, and reports it with the seed and its bytes.
//
// Used by test/fuzz/http-servers.int.test.ts (short, in `npm test`),
// scripts/fuzz.ts (`npm run fuzz -- --minutes N`) and bench/abuse.bench.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePorts } from '../cluster/ports.ts';
import { waitFor } from '../cluster/probe.ts';
import {
  batchAt,
  escapeBytes,
  noDownscaleReview,
  requestBytes,
  routesFor,
  type FuzzCase,
  type ServerKind,
} from './http-requests.ts';

export const HOST = '127.0.0.1';
const bin = fileURLToPath(new URL('../../bin/stateward.ts', import.meta.url));
const LOG_TAIL_CHARS = 64 * 1024;

// ------------------------------------------------------------ the operator

export interface OperatorExit {
  /** performance.now() when this process saw it exit. */
  at: number;
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface FuzzOperatorOptions {
  kubeconfigPath: string;
  apiServer: string;
  namespace: string;
  /** Default info, as deployed. */
  logLevel?: string;
  flags?: string[];
}

/**
 * The operator executable with both servers on fixed loopback ports (kept
 * across restarts). Its stdout and stderr are counted (logBytes) and the last
 * 64 KiB kept; nothing else is held, so it can run for hours.
 */
export class FuzzOperator {
  readonly plainPort: number;
  readonly tlsPort: number;
  readonly namespace: string;
  private readonly options: FuzzOperatorOptions;
  private child: ChildProcess | undefined;
  private tail = '';
  /** Bytes the operator wrote to stdout and stderr, over every start. */
  logBytes = 0;
  exit: OperatorExit | undefined;
  private exited: Promise<void> = Promise.resolve();
  restarts = 0;

  private constructor(options: FuzzOperatorOptions, plainPort: number, tlsPort: number) {
    this.options = options;
    this.namespace = options.namespace;
    this.plainPort = plainPort;
    this.tlsPort = tlsPort;
  }

  static async start(options: FuzzOperatorOptions): Promise<FuzzOperator> {
    const [plainPort, tlsPort] = await freePorts(2);
    const operator = new FuzzOperator(options, plainPort!, tlsPort!);
    await operator.spawn();
    return operator;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get logTail(): string {
    return this.tail;
  }

  get alive(): boolean {
    return this.child !== undefined && this.exit === undefined;
  }

  private async spawn(): Promise<void> {
    const o = this.options;
    this.exit = undefined;
    const child = spawn(
      process.execPath,
      [
        bin,
        `-kubernetes.namespace=${o.namespace}`,
        `-kubernetes.config-file=${o.kubeconfigPath}`,
        `-kubernetes.api-url=${o.apiServer}`,
        `-server.port=${this.plainPort}`,
        `-log.level=${o.logLevel ?? 'info'}`,
        '-web.enabled',
        '-server-tls.enabled',
        `-server-tls.port=${this.tlsPort}`,
        '-server-tls.self-signed-cert.dns-name=localhost',
        '-reschedule.enabled',
        ...(o.flags ?? []),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    const take = (chunk: Buffer) => {
      this.logBytes += chunk.length;
      this.tail = (this.tail + chunk.toString('utf8')).slice(-LOG_TAIL_CHARS);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exit = { at: performance.now(), code, signal };
        resolve();
      }),
    );
    await waitFor('the operator to answer on both servers', async () => (await checkHealth(this)) === undefined, {
      timeoutMs: 60_000,
      intervalMs: 250,
      fail: () =>
        this.exit
          ? `the operator exited (${describeExit(this.exit)}) while starting:\n${this.tail.slice(-3_000)}`
          : undefined,
    });
  }

  /** Kills it (if running) and starts it again on the same ports. */
  async restart(): Promise<void> {
    await this.stop();
    this.restarts++;
    await this.spawn();
  }

  async stop(): Promise<void> {
    if (this.child && this.exit === undefined) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}

export function describeExit(exit: OperatorExit): string {
  return exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
}

// -------------------------------------------------------- health checks

function withTimeout<T>(
  ms: number,
  what: string,
  run: (done: (value: T) => void, fail: (error: string) => void) => () => void,
): Promise<T | string> {
  return new Promise((resolve) => {
    let settled = false;
    let cleanup: () => void = () => undefined;
    const timer = setTimeout(() => finish(`${what}: no answer within ${ms} ms`), ms);
    function finish(value: T | string) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      cleanup();
      resolve(value);
    }
    cleanup = run(
      (v) => finish(v),
      (e) => finish(`${what}: ${e}`),
    );
  });
}

/** GET /healthz on a fresh connection: undefined when 200, else what went wrong. */
export async function checkHealthz(port: number, timeoutMs = 5_000): Promise<string | undefined> {
  const result = await withTimeout<number>(timeoutMs, 'GET /healthz', (done, fail) => {
    const req = httpRequest({ host: HOST, port, path: '/healthz', agent: false }, (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode ?? 0));
      res.on('error', (e) => fail(e.message));
    });
    req.on('error', (e) => fail(e.message));
    req.end();
    return () => req.destroy();
  });
  if (typeof result === 'string') return result;
  return result === 200 ? undefined : `GET /healthz: HTTP ${result}`;
}

/**
 * POSTs `body` (a no-downscale review with `uid`) over HTTPS on a fresh
 * connection: undefined when the answer is 200, JSON, with the same uid and
 * the expected decision; else what went wrong.
 */
export async function checkReview(
  port: number,
  namespace: string,
  timeoutMs = 5_000,
  o: { body?: Buffer; uid?: string; downscale?: boolean } = {},
): Promise<string | undefined> {
  const uid = o.uid ?? randomUUID();
  const downscale = o.downscale ?? false;
  const body = o.body ?? Buffer.from(JSON.stringify(noDownscaleReview({ uid, namespace, downscale })));
  const result = await withTimeout<{ status: number; type: string; text: string }>(
    timeoutMs,
    'POST /admission/no-downscale',
    (done, fail) => {
      const req = httpsRequest(
        {
          host: HOST,
          port,
          servername: 'localhost',
          rejectUnauthorized: false,
          agent: false,
          path: '/admission/no-downscale',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': body.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            done({
              status: res.statusCode ?? 0,
              type: String(res.headers['content-type']),
              text: Buffer.concat(chunks).toString('utf8'),
            }),
          );
          res.on('error', (e) => fail(e.message));
        },
      );
      req.on('error', (e) => fail(e.message));
      req.end(body);
      return () => req.destroy();
    },
  );
  if (typeof result === 'string') return result;
  const what = 'POST /admission/no-downscale';
  if (result.status !== 200) return `${what}: HTTP ${result.status} ${result.text.slice(0, 200)}`;
  if (!result.type.startsWith('application/json')) return `${what}: content-type ${result.type}`;
  try {
    const review = JSON.parse(result.text) as { response?: { uid?: unknown; allowed?: unknown } };
    if (review.response?.uid !== uid)
      return `${what}: response.uid ${JSON.stringify(review.response?.uid)}, sent ${uid}`;
    if (review.response.allowed !== !downscale)
      return `${what}: allowed ${String(review.response.allowed)} for ${downscale ? 'a downscale' : 'an upscale'}`;
  } catch (error) {
    return `${what}: undecodable answer (${error instanceof Error ? error.message : String(error)})`;
  }
  return undefined;
}

/** Undefined when the operator is running and answers a good request on each server. */
export async function checkHealth(operator: FuzzOperator, timeoutMs = 5_000): Promise<string | undefined> {
  if (operator.exit) return `the operator exited (${describeExit(operator.exit)})`;
  const problems = (
    await Promise.all([
      checkHealthz(operator.plainPort, timeoutMs),
      checkReview(operator.tlsPort, operator.namespace, timeoutMs),
    ])
  ).filter((p) => p !== undefined);
  if (operator.exit) return `the operator exited (${describeExit(operator.exit)})`;
  return problems.length > 0 ? problems.join('; ') : undefined;
}

// ------------------------------------------------------------ sending

export type Ending = 'closed' | 'reset' | 'timeout' | 'error';

export interface Outcome {
  server: ServerKind;
  kind: string;
  /** Status codes of the responses received (pipelined requests can get several). */
  statuses: number[];
  /** How the connection ended: the server closed it, reset it, our timeout cut it, or another error. */
  ending: Ending;
  error?: string;
  bytesOut: number;
  bytesIn: number;
  /** performance.now() */
  startedAt: number;
  endedAt: number;
}

const KEEP_IN = 64 * 1024;
const STATUS_LINE = /(?:^|\n)HTTP\/\d\.\d (\d{3})/g;

/** Sends one case on its own connection and waits until the server closes it, or timeoutMs. Never rejects. */
export function sendCase(
  ports: { plainPort: number; tlsPort: number },
  c: FuzzCase,
  timeoutMs: number,
): Promise<Outcome> {
  const startedAt = performance.now();
  const port = c.server === 'plain' ? ports.plainPort : ports.tlsPort;
  const handshake = c.server === 'tls' && !c.request.noHandshake;
  return new Promise<Outcome>((resolve) => {
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let bytesIn = 0;
    let bytesOut = 0;
    let settled = false;
    const variant = c.request.tls ?? {};
    const socket = handshake
      ? tlsConnect({
          host: HOST,
          port,
          servername: 'localhost',
          rejectUnauthorized: false,
          ...(variant.maxVersion ? { maxVersion: variant.maxVersion } : {}),
          ...(variant.alpn ? { ALPNProtocols: variant.alpn } : {}),
        })
      : netConnect({ host: HOST, port });
    const finish = (ending: Ending, error?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const head = Buffer.concat(kept).toString('latin1');
      const statuses = [...head.matchAll(STATUS_LINE)].map((m) => Number(m[1]));
      resolve({
        server: c.server,
        kind: c.request.kind,
        statuses,
        ending,
        ...(error ? { error: (error as NodeJS.ErrnoException).code ?? error.message } : {}),
        bytesOut,
        bytesIn,
        startedAt,
        endedAt: performance.now(),
      });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      bytesIn += chunk.length;
      if (keptBytes < KEEP_IN) {
        kept.push(chunk);
        keptBytes += chunk.length;
      }
    });
    socket.on('error', (error: NodeJS.ErrnoException) =>
      finish(error.code === 'ECONNRESET' ? 'reset' : 'error', error),
    );
    socket.on('close', () => finish('closed'));
    socket.once(handshake ? 'secureConnect' : 'connect', () => {
      void (async () => {
        for (let i = 0; i < (variant.renegotiate ?? 0) && !settled && 'renegotiate' in socket; i++) {
          // Answered, refused past the limit (the server then closes), or cut by our timeout.
          await new Promise<void>((done) => {
            if (!socket.renegotiate({ rejectUnauthorized: false }, () => done())) done();
            socket.once('close', () => done());
          });
        }
        for (const [i, piece] of c.request.pieces.entries()) {
          if (settled || socket.destroyed) return;
          if (i > 0 && c.request.pauseMs > 0) await delay(c.request.pauseMs);
          if (settled || socket.destroyed) return;
          bytesOut += piece.length;
          socket.write(piece);
        }
        if (c.request.end && !settled && !socket.destroyed) socket.end();
      })();
    });
  });
}

/** Sends every case, `concurrency` connections at a time; outcomes in the cases' order. */
export async function sendCases(
  ports: { plainPort: number; tlsPort: number },
  cases: FuzzCase[],
  o: { concurrency: number; timeoutMs: number; onOutcome?: (outcome: Outcome, c: FuzzCase) => void },
): Promise<Outcome[]> {
  const outcomes: Outcome[] = new Array<Outcome>(cases.length);
  let next = 0;
  const worker = async () => {
    while (next < cases.length) {
      const i = next++;
      outcomes[i] = await sendCase(ports, cases[i]!, o.timeoutMs);
      o.onOutcome?.(outcomes[i], cases[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency, cases.length) }, worker));
  return outcomes;
}

// -------------------------------------------------------------- counts

export class FuzzStats {
  connections = 0;
  responses = 0;
  bytesOut = 0;
  bytesIn = 0;
  healthChecks = 0;
  readonly byStatus = new Map<string, number>();
  readonly byEnding = new Map<string, number>();
  readonly byServer = new Map<string, number>();
  /** The first few cases answered with a 500 (a handler failed: worth a look, though the process lives on). */
  readonly serverErrors: string[] = [];

  add(outcome: Outcome, c?: FuzzCase): void {
    this.connections++;
    if (c && outcome.statuses.includes(500) && this.serverErrors.length < 5)
      this.serverErrors.push(describeCase(this.connections - 1, c, 800));
    this.responses += outcome.statuses.length;
    this.bytesOut += outcome.bytesOut;
    this.bytesIn += outcome.bytesIn;
    bump(this.byServer, outcome.server);
    bump(this.byEnding, outcome.ending === 'error' ? `error ${outcome.error ?? ''}`.trim() : outcome.ending);
    if (outcome.statuses.length === 0) bump(this.byStatus, `${outcome.server}:none`);
    for (const s of outcome.statuses) bump(this.byStatus, `${outcome.server}:${s}`);
  }

  summary(): string {
    const list = (m: Map<string, number>) =>
      [...m]
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');
    return [
      `connections ${this.connections} (${list(this.byServer)}), ${(this.bytesOut / 2 ** 20).toFixed(1)} MiB sent, ${(this.bytesIn / 2 ** 20).toFixed(1)} MiB received`,
      `responses ${this.responses}, by server:status: ${list(this.byStatus)}`,
      `connection endings: ${list(this.byEnding)}`,
      `health checks passed ${this.healthChecks}`,
      ...(this.serverErrors.length > 0
        ? [
            `answered 500 (first ${this.serverErrors.length}; case numbers count connections of the run):`,
            ...this.serverErrors.map((e) => `  ${e}`),
          ]
        : []),
    ].join('\n');
  }
}

function bump(m: Map<string, number>, key: string): void {
  m.set(key, (m.get(key) ?? 0) + 1);
}

// ------------------------------------------------------------- batches

export interface BatchOptions {
  seed: number;
  size: number;
  concurrency: number;
  /** Each connection is cut after this long. */
  timeoutMs: number;
  /** Time allowed to replay candidates after a failure, to find the one that does it. */
  isolateBudgetMs: number;
  stats?: FuzzStats;
}

export interface Finding {
  seed: number;
  /** The operator's namespace: it appears in generated targets and bodies. */
  namespace: string;
  batch: number;
  size: number;
  problem: string;
  logTail: string;
  /** The case that did it, replayed alone on a fresh operator. */
  culprit?: { index: number; case: FuzzCase; problem: string };
  /** Cases that may have done it, when none reproduced alone. */
  candidates: { index: number; case: FuzzCase }[];
  replayed: number;
}

export interface BatchResult {
  outcomes: Outcome[];
  finding?: Finding;
}

/** Sends batch `batch` of the run, checks health, and on a problem isolates the culprit (the operator is left restarted or dead). */
export async function fuzzBatch(operator: FuzzOperator, batch: number, o: BatchOptions): Promise<BatchResult> {
  const cases = batchAt(o.seed, batch, o.size, routesFor(operator.namespace));
  const outcomes = await sendCases(operator, cases, {
    concurrency: o.concurrency,
    timeoutMs: o.timeoutMs,
    ...(o.stats ? { onOutcome: (x: Outcome, c: FuzzCase) => o.stats!.add(x, c) } : {}),
  });
  const problem = await checkHealth(operator);
  if (problem === undefined) {
    if (o.stats) o.stats.healthChecks++;
    return { outcomes };
  }
  return { outcomes, finding: await isolate(operator, cases, outcomes, problem, batch, o) };
}

/** Replays the likely cases one at a time on a restarted operator until one reproduces the problem. */
export async function isolate(
  operator: FuzzOperator,
  cases: FuzzCase[],
  outcomes: Outcome[],
  problem: string,
  batch: number,
  o: BatchOptions,
): Promise<Finding> {
  const logTail = operator.logTail.slice(-4_000);
  const exitAt = operator.exit?.at;
  let order = cases.map((_, i) => i);
  if (exitAt !== undefined) {
    // The connection that did it was open when the process died.
    const distance = (i: number) => Math.abs(outcomes[i]!.endedAt - exitAt);
    order = order
      .filter((i) => outcomes[i]!.startedAt <= exitAt + 50 && outcomes[i]!.endedAt >= exitAt - 250)
      .sort((a, b) => distance(a) - distance(b));
  }
  const finding: Finding = {
    seed: o.seed,
    namespace: operator.namespace,
    batch,
    size: o.size,
    problem,
    logTail,
    candidates: order.map((index) => ({ index, case: cases[index]! })),
    replayed: 0,
  };
  const deadline = performance.now() + o.isolateBudgetMs;
  try {
    await operator.restart();
  } catch (error) {
    finding.problem += `; the restart for replaying failed: ${error instanceof Error ? error.message : String(error)}`;
    return finding;
  }
  for (const index of order) {
    if (performance.now() > deadline) break;
    await sendCase(operator, cases[index]!, o.timeoutMs);
    finding.replayed++;
    await delay(20);
    const again = await checkHealth(operator);
    if (again !== undefined) {
      finding.culprit = { index, case: cases[index]!, problem: again };
      finding.logTail = operator.logTail.slice(-4_000);
      finding.candidates = [];
      break;
    }
  }
  return finding;
}

/** One case, for a report: where it went, how it was sent, its bytes as a JS expression. */
export function describeCase(index: number, c: FuzzCase, maxChars = 3_000): string {
  const bytes = requestBytes(c.request);
  const how = [
    `${c.request.pieces.length} write${c.request.pieces.length > 1 ? `s ${c.request.pauseMs} ms apart` : ''}`,
    c.request.end ? 'then half-closed' : 'left open',
    ...(c.request.noHandshake ? ['over plain TCP, no TLS handshake'] : []),
    ...(c.request.tls?.maxVersion ? [`TLS 1.2, ${c.request.tls.renegotiate ?? 0} renegotiation(s) first`] : []),
    ...(c.request.tls?.alpn ? [`ALPN offer ${JSON.stringify(c.request.tls.alpn)}`] : []),
  ].join(', ');
  return `case #${index} to the ${c.server === 'plain' ? 'plain HTTP' : 'HTTPS webhook'} server (${c.request.kind}; ${bytes.length} bytes in ${how}):\n    Buffer.from(${escapeBytes(bytes, maxChars)}, 'latin1')`;
}

export function describeFinding(f: Finding): string {
  const lines = [
    `fuzz failure: ${f.problem}`,
    `  run seed ${f.seed}, batch ${f.batch} of ${f.size} cases (regenerate: batchAt(${f.seed}, ${f.batch}, ${f.size}, routesFor('${f.namespace}')))`,
  ];
  if (f.culprit) {
    lines.push(
      `  reproduced alone on a fresh operator (${f.culprit.problem}) by ${describeCase(f.culprit.index, f.culprit.case)}`,
    );
  } else {
    lines.push(
      `  no single case reproduced it (${f.replayed} replayed alone); ${f.candidates.length} candidate(s)${f.candidates.length > 12 ? ', the first 12' : ''}:`,
    );
    for (const c of f.candidates.slice(0, 12)) lines.push(`  ${describeCase(c.index, c.case, 600)}`);
  }
  lines.push(
    '  operator log, last lines:',
    ...f.logTail
      .split('\n')
      .slice(-30)
      .map((l) => `    ${l.slice(0, 400)}`),
  );
  return lines.join('\n');
}
