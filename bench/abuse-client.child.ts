// The hostile side of bench/abuse.bench.ts, in its own process so that its
// CPU does not delay the good requests the bench times. argv[2] is the JSON
// of ClientOptions; runs one scenario for `seconds`, then prints one JSON
// line, a ClientResult, and exits. Every connection goes to 127.0.0.1.
//   big        16 concurrent 7 MiB AdmissionReviews to /admission/no-downscale, back to back
//   idle       3,000 idle connections: 1,000 TLS (handshake done) and 1,000
//              bare TCP to the HTTPS port, 1,000 bare TCP to the plain port
//   slowloris  header bytes one at a time, 200 ms apart, on 32 connections to
//              each server, and 16 connections trickling an AdmissionReview
//              body the same way; when (and whether) the server cuts each
//   fuzz       test/fuzz/http-driver.ts at full speed, 64 connections at a time
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { setTimeout as delay } from 'node:timers/promises';
import { MAX_ADMISSION_BODY_BYTES } from '../src/runtime/admission/admission.ts';
import { FuzzStats, HOST, sendCases } from '../test/fuzz/http-driver.ts';
import { batchAt, noDownscaleReviewOfSize, routesFor } from '../test/fuzz/http-requests.ts';
import { listCounts, percentile, tally } from './report.ts';

export type Scenario = 'big' | 'idle' | 'slowloris' | 'fuzz';

export interface ClientOptions {
  scenario: Scenario;
  plainPort: number;
  tlsPort: number;
  namespace: string;
  seconds: number;
  seed: number;
}

export interface ClientResult {
  /** Hostile requests (or connections, for idle and slowloris) sent. */
  hostile: number;
  /** What happened, one line each, for the report. */
  notes: string[];
}

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

const list = (m: Map<string, number>) => listCounts(m, '');

// ------------------------------------------------------------------- big

async function big(o: ClientOptions): Promise<ClientResult> {
  const body = noDownscaleReviewOfSize({ uid: randomUUID(), namespace: o.namespace }, MAX_ADMISSION_BODY_BYTES);
  const agent = new Agent({ keepAlive: true, maxSockets: 16, rejectUnauthorized: false });
  const deadline = performance.now() + o.seconds * 1000;
  const outcomes = new Map<string, number>();
  const latencies: number[] = [];
  let sent = 0;
  const one = () =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const done = (what: string) => {
        tally(outcomes, what);
        latencies.push(performance.now() - started);
        resolve();
      };
      const req = request(
        {
          agent,
          host: HOST,
          port: o.tlsPort,
          servername: 'localhost',
          path: '/admission/no-downscale',
          method: 'POST',
          timeout: 30_000,
          headers: { 'content-type': 'application/json', 'content-length': body.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => done(`HTTP ${res.statusCode}`));
          res.on('error', (e: NodeJS.ErrnoException) => done(e.code ?? e.message));
        },
      );
      req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
      req.on('error', (e: NodeJS.ErrnoException) => done(e.code ?? e.message));
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (performance.now() < deadline) {
        sent++;
        await one();
      }
    }),
  );
  agent.destroy();
  return {
    hostile: sent,
    notes: [
      `${sent} reviews of ${(body.length / 2 ** 20).toFixed(2)} MiB (the limit), 16 at a time: ${list(outcomes)}; each took p50 ${s(percentile(latencies, 50))}, max ${s(Math.max(...latencies))}`,
    ],
  };
}

// ------------------------------------------------------------------ idle

interface Held {
  openedAt?: number;
  closedAt?: number;
  failed?: string;
}

function hold(port: number, tls: boolean, startedAt: number): Promise<{ held: Held; socket: Socket }> {
  return new Promise((resolve) => {
    const held: Held = {};
    const socket = tls
      ? tlsConnect({ host: HOST, port, servername: 'localhost', rejectUnauthorized: false })
      : netConnect({ host: HOST, port });
    let answered = false;
    const answer = () => {
      if (!answered) resolve({ held, socket });
      answered = true;
    };
    socket.once(tls ? 'secureConnect' : 'connect', () => {
      held.openedAt = performance.now() - startedAt;
      answer();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      held.failed ??= e.code ?? e.message;
    });
    socket.on('close', () => {
      held.closedAt = performance.now() - startedAt;
      answer();
    });
    socket.on('data', () => undefined);
    // A connect or handshake the server never finishes: counted as not opened.
    setTimeout(answer, 10_000).unref();
  });
}

async function idle(o: ClientOptions): Promise<ClientResult> {
  const startedAt = performance.now();
  const deadline = startedAt + o.seconds * 1000;
  const groups = [
    { name: 'HTTPS port, TLS handshake done', port: o.tlsPort, tls: true },
    { name: 'HTTPS port, bare TCP', port: o.tlsPort, tls: false },
    { name: 'plain port, bare TCP', port: o.plainPort, tls: false },
  ];
  const per = 1000;
  // Interleaved, 100 connects in flight at a time; none begun after the
  // deadline (a server that leaves connects hanging would stretch it 10 s a round).
  const order = Array.from({ length: groups.length * per }, (_, i) => groups[i % groups.length]!);
  const results: { group: string; held: Held; socket: Socket }[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 100 }, async () => {
      while (next < order.length && performance.now() < deadline) {
        const g = order[next++]!;
        results.push({ group: g.name, ...(await hold(g.port, g.tls, startedAt)) });
      }
    }),
  );
  const openedBy = performance.now() - startedAt;
  await delay(Math.max(0, deadline - performance.now()));
  const notes = [
    `${results.length} of 3,000 connections tried in ${s(openedBy)}, held until ${s(performance.now() - startedAt)}`,
  ];
  for (const g of groups) {
    const mine = results.filter((r) => r.group === g.name);
    const refused = mine.filter(
      (r) =>
        r.held.openedAt === undefined || (r.held.closedAt !== undefined && r.held.closedAt - r.held.openedAt < 100),
    );
    const cut = mine.filter(
      (r) => r.held.openedAt !== undefined && r.held.closedAt !== undefined && r.held.closedAt - r.held.openedAt >= 100,
    );
    const open = mine.filter((r) => r.held.closedAt === undefined);
    const lifetimes = cut.map((r) => r.held.closedAt! - r.held.openedAt!);
    notes.push(
      `${g.name}: ${mine.length} tried, ${refused.length} refused or closed at once, ${cut.length} closed by the server later${cut.length > 0 ? ` (after ${s(Math.min(...lifetimes))}–${s(Math.max(...lifetimes))}, median ${s(percentile(lifetimes, 50))})` : ''}, ${open.length} still open at the end`,
    );
  }
  for (const r of results) r.socket.destroy();
  return { hostile: results.length, notes };
}

// -------------------------------------------------------------- slowloris

interface Trickle {
  group: string;
  bytes: number;
  cutAt?: number;
  status?: string;
  /** Set when we close it ourselves at the end: not a cut. */
  ours?: boolean;
}

/**
 * Opens a connection, writes `head` at once, then one byte of `slow` every
 * 200 ms (then `endless` forever) until the server cuts it or the deadline.
 */
async function trickle(
  port: number,
  tls: boolean,
  head: string,
  slow: Buffer,
  endless: string,
  t: Trickle,
  deadline: number,
): Promise<void> {
  const started = performance.now();
  const socket: Socket = tls
    ? tlsConnect({ host: HOST, port, servername: 'localhost', rejectUnauthorized: false })
    : netConnect({ host: HOST, port });
  let closed = false;
  let received = '';
  socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
  socket.on('error', () => undefined);
  socket.on('close', () => {
    closed = true;
    if (t.ours) return;
    t.cutAt = performance.now() - started;
    t.status = /^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 'no response';
  });
  await new Promise<void>((resolve) => {
    socket.once(tls ? 'secureConnect' : 'connect', () => resolve());
    socket.once('close', () => resolve());
  });
  if (!closed && head) socket.write(head, 'latin1');
  for (let i = 0; !closed && performance.now() < deadline; i++) {
    socket.write(i < slow.length ? slow.subarray(i, i + 1) : Buffer.from(endless, 'latin1'));
    t.bytes++;
    await delay(200);
  }
  t.ours = true;
  socket.destroy();
}

async function slowloris(o: ClientOptions): Promise<ClientResult> {
  const deadline = performance.now() + o.seconds * 1000;
  const body = noDownscaleReviewOfSize({ uid: randomUUID(), namespace: o.namespace }, 10_000);
  const groups = [
    {
      name: 'plain port, header bytes',
      port: o.plainPort,
      tls: false,
      head: 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ',
      n: 32,
    },
    {
      name: 'HTTPS port, header bytes',
      port: o.tlsPort,
      tls: true,
      head: 'POST /admission/no-downscale HTTP/1.1\r\nHost: localhost\r\nX-Slow: ',
      n: 32,
    },
    {
      name: 'HTTPS port, body bytes',
      port: o.tlsPort,
      tls: true,
      head: `POST /admission/no-downscale HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.toString('latin1')}`,
      n: 16,
    },
  ];
  const all: Trickle[] = [];
  const runs: Promise<void>[] = [];
  for (const g of groups) {
    for (let i = 0; i < g.n; i++) {
      const t: Trickle = { group: g.name, bytes: 0 };
      all.push(t);
      // The body group sends its head at once and trickles only the body.
      const bodyGroup = g.name.endsWith('body bytes');
      const head = bodyGroup ? g.head.slice(0, g.head.indexOf('\r\n\r\n') + 4) : '';
      runs.push(
        trickle(
          g.port,
          g.tls,
          head,
          bodyGroup ? body : Buffer.from(g.head, 'latin1'),
          bodyGroup ? '' : 'a',
          t,
          deadline,
        ),
      );
    }
  }
  await Promise.all(runs);
  const notes = groups.map((g) => {
    const mine = all.filter((t) => t.group === g.name);
    const cut = mine.filter((t) => t.cutAt !== undefined);
    const times = cut.map((t) => t.cutAt!);
    const statuses = new Map<string, number>();
    for (const t of cut) tally(statuses, t.status!);
    return `${g.name} (one byte every 200 ms): ${cut.length} of ${mine.length} cut by the server${cut.length > 0 ? ` after ${s(Math.min(...times))}–${s(Math.max(...times))} (median ${s(percentile(times, 50))}), answers: ${list(statuses)}` : ''}${cut.length < mine.length ? `; ${mine.length - cut.length} not cut within ${s(o.seconds * 1000)}` : ''}`;
  });
  return { hostile: all.length, notes };
}

// ------------------------------------------------------------------ fuzz

async function fuzz(o: ClientOptions): Promise<ClientResult> {
  const deadline = performance.now() + o.seconds * 1000;
  const stats = new FuzzStats();
  const routes = routesFor(o.namespace);
  let batch = 0;
  while (performance.now() < deadline) {
    await sendCases(o, batchAt(o.seed, batch++, 200, routes), {
      concurrency: 64,
      timeoutMs: 1000,
      onOutcome: (x) => stats.add(x),
    });
  }
  return {
    hostile: stats.connections,
    notes: [`seed ${o.seed}, ${batch} batches: ${stats.summary().split('\n').slice(0, 3).join('; ')}`],
  };
}

const options = JSON.parse(process.argv[2] ?? '{}') as ClientOptions;
const run = { big, idle, slowloris, fuzz }[options.scenario];
if (!run) throw new Error(`unknown scenario ${String(options.scenario)}`);
const result = await run(options);
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
