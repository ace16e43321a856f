// The hostile side of the issue-33 rows of bench/abuse.bench.ts
// (bench/abuse-rows.ts), in its own process at nice 19 like
// bench/abuse-client.child.ts. argv[2] is the JSON of AttackOptions; runs one
// attack until `seconds` have passed, closes everything, prints one JSON line
// (an AttackResult) and exits. Every connection goes to 127.0.0.1 from
// `localAddress` (127.0.0.2 unless BENCH_ABUSE_SAME_PEER=1), so that a
// server's per-peer limits can tell it from the good traffic.
//   pipeline-metrics     1 plain connection: 10,000 pipelined GET /metrics in one write, never read
//   pipeline-metrics-20  the same on 20 connections
//   body-hold            5 TLS connections: a review declaring 1 MiB with one body byte, reopened when answered or closed
//   slow-readers         ~900 requests with made-up methods, then 500 plain connections: GET /metrics, never read
//   idle-tls             1,100 TLS connections: one valid review each, answer read, then idle
//   handshake-flood      32 loops of TLS connect, handshake, close
//   pipeline-reviews     20 TLS connections × 2,000 pipelined reviews in one write, never read
//   keepalive-plain      GET /healthz then GET /ready on one connection, over and over: both answered?
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { setTimeout as delay } from 'node:timers/promises';
import { HOST } from '../test/fuzz/http-driver.ts';
import { noDownscaleReview } from '../test/fuzz/http-requests.ts';
import { listCounts, percentile, tally } from './report.ts';

export type Attack =
  | 'pipeline-metrics'
  | 'pipeline-metrics-20'
  | 'body-hold'
  | 'slow-readers'
  | 'idle-tls'
  | 'handshake-flood'
  | 'pipeline-reviews'
  | 'keepalive-plain';

export interface AttackOptions {
  attack: Attack;
  plainPort: number;
  tlsPort: number;
  namespace: string;
  seconds: number;
  localAddress: string;
  seed: number;
}

export interface AttackResult {
  /** Hostile requests (or connections, where the attack is connections) sent. */
  hostile: number;
  /** The attack's own figure for the table: what the server did with it. */
  headline: string;
  /** What happened, one line each, for the report. */
  notes: string[];
}

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
// Unanchored: a pipelined answer follows the last one's body directly.
const STATUS_LINE = /HTTP\/1\.[01] (\d{3}) /g;

const list = (m: Map<string, number>) => listCounts(m);

/** One connection's life, as seen from this side. */
interface Life {
  /** performance.now() when connected (handshake done for TLS); undefined when it never was. */
  openedAt?: number;
  /** When the server closed or reset it, as it happened (a read connection). */
  cutAt?: number;
  /** The server had closed it, seen only at the end (a never-read connection learns it then). */
  cutSeenLate?: boolean;
  /** We closed it: its close is not a cut. */
  ours?: boolean;
  error?: string;
  bytesIn: number;
  /** The start of what it received (status lines are read from it). */
  head: string;
}

interface Held {
  socket: Socket;
  life: Life;
}

function open(o: AttackOptions, tls: boolean): Socket {
  const base = { host: HOST, localAddress: o.localAddress };
  return tls
    ? tlsConnect({ ...base, port: o.tlsPort, servername: 'localhost', rejectUnauthorized: false })
    : netConnect({ ...base, port: o.plainPort });
}

/**
 * Opens a connection and tracks it. `read`: take what the server sends (else
 * the socket is paused once connected, so the kernel's buffers fill and the
 * server must hold the rest). Resolves once connected, or not within 10 s.
 */
function track(o: AttackOptions, tls: boolean, read: boolean): Promise<Held> {
  const socket = open(o, tls);
  const life: Life = { bytesIn: 0, head: '' };
  socket.on('error', (e: NodeJS.ErrnoException) => (life.error ??= e.code ?? e.message));
  socket.on('close', () => {
    if (!life.ours) life.cutAt ??= performance.now();
  });
  if (read) socket.on('data', (chunk: Buffer) => take(life, chunk));
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ socket, life }), 10_000);
    socket.once(tls ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      life.openedAt = performance.now();
      if (!read) socket.pause();
      resolve({ socket, life });
    });
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ socket, life });
    });
  });
}

function take(life: Life, chunk: Buffer): void {
  life.bytesIn += chunk.length;
  if (life.head.length < 4096) life.head += chunk.toString('latin1', 0, Math.min(chunk.length, 4096));
}

/** Closes it from our side (not counted as the server's cut). */
function close({ socket, life }: Held): void {
  life.ours = true;
  socket.destroy();
}

/**
 * Ends a never-read connection: reads what the server had left in the
 * kernel's buffers for up to 500 ms (how much it had sent; whether it had
 * closed or reset it), then closes it.
 */
async function drainAndClose(h: Held): Promise<void> {
  const { socket, life } = h;
  if (life.cutAt === undefined && !socket.destroyed) {
    socket.on('data', (chunk: Buffer) => take(life, chunk));
    socket.once('end', () => (life.cutSeenLate = true));
    socket.once('error', () => (life.cutSeenLate = true));
    life.ours = true;
    socket.resume();
    await Promise.race([new Promise((r) => socket.once('close', r)), delay(500)]);
  }
  close(h);
}

const statuses = (life: Life) => [...life.head.matchAll(STATUS_LINE)].map((m) => m[1]!);

/** /proc/net/tcp's key for a local IPv4 endpoint: the address as the kernel's little-endian hex, the port in hex. */
function kernelKey(address: string, port: number): string {
  const ip = address
    .split('.')
    .reverse()
    .map((b) => Number(b).toString(16).padStart(2, '0'))
    .join('');
  return `${ip}:${port.toString(16).padStart(4, '0')}`.toUpperCase();
}

/**
 * A never-read connection does not see the server's close until it reads,
 * so the kernel is asked instead, every 250 ms until the deadline: a socket
 * gone from /proc/net/tcp was reset, one in CLOSE_WAIT (08) got the server's
 * FIN. Either is a cut, timed to within 250 ms.
 */
async function watchKernel(held: Held[], deadline: number): Promise<void> {
  const keys = new Map<Held, string>();
  for (const h of held)
    if (h.life.openedAt !== undefined && h.socket.localAddress && h.socket.localPort)
      keys.set(h, kernelKey(h.socket.localAddress, h.socket.localPort));
  while (performance.now() < deadline) {
    let states: Map<string, string>;
    try {
      states = new Map(
        readFileSync('/proc/net/tcp', 'utf8')
          .split('\n')
          .slice(1)
          .map((line) => line.trim().split(/\s+/))
          .filter((f) => f.length > 3)
          .map((f) => [f[1]!, f[3]!]),
      );
    } catch {
      return; // not Linux: cuts are seen at the end only
    }
    const now = performance.now();
    for (const [h, key] of keys) {
      const state = states.get(key);
      if (h.life.cutAt === undefined && (state === undefined || state === '08')) h.life.cutAt = now;
    }
    await delay(Math.min(250, Math.max(0, deadline - performance.now())));
  }
}

/** Cut by the server, whether seen as it happened or only at the end. */
const wasCut = (l: Life) => l.cutAt !== undefined || l.cutSeenLate === true;

/** " after <median> s" of the cuts timed as they happened; empty without any. */
function cutTimes(lives: Life[]): string {
  const after = lives
    .filter((l) => l.cutAt !== undefined && l.openedAt !== undefined)
    .map((l) => l.cutAt! - l.openedAt!);
  return after.length ? ` after ${s(percentile(after, 50))}` : '';
}

/** Per group of lives: opened, cut by the server (when), still open at the end. */
function livesNote(name: string, lives: Life[]): string {
  const opened = lives.filter((l) => l.openedAt !== undefined);
  const cut = opened.filter(wasCut);
  const after = cut.filter((l) => l.cutAt !== undefined).map((l) => l.cutAt! - l.openedAt!);
  const late = cut.length - after.length;
  const byStatus = new Map<string, number>();
  for (const l of opened) tally(byStatus, statuses(l)[0] ?? 'none');
  const errors = new Map<string, number>();
  for (const l of lives) if (l.error) tally(errors, l.error);
  return [
    `${name}: ${lives.length} tried, ${opened.length} opened, ${cut.length} closed by the server`,
    after.length
      ? ` (${after.length} after ${s(Math.min(...after))}–${s(Math.max(...after))}, median ${s(percentile(after, 50))})`
      : '',
    late ? ` (${late} seen only when read at the end)` : '',
    `, ${opened.length - cut.length} open at the end; first answers: ${list(byStatus)}`,
    errors.size ? `; errors: ${list(errors)}` : '',
  ].join('');
}

// ------------------------------------------------------------ pipelines

/**
 * `connections` connections each write `count` copies of `request` in one
 * write and never read; held to the deadline (a cut one stays cut).
 */
async function pipeline(
  o: AttackOptions,
  tls: boolean,
  connections: number,
  request: Buffer,
  count: number,
): Promise<AttackResult> {
  const deadline = performance.now() + o.seconds * 1000;
  const payload = Buffer.concat(Array.from({ length: count }, () => request));
  const held = await Promise.all(Array.from({ length: connections }, () => track(o, tls, false)));
  for (const { socket, life } of held) if (life.openedAt !== undefined && !socket.destroyed) socket.write(payload);
  await watchKernel(held, deadline);
  // Per connection: what of our requests the server had not read by the end.
  const unread = held.reduce((n, { socket }) => n + socket.writableLength, 0);
  await Promise.all(held.map(drainAndClose));
  const lives = held.map((h) => h.life);
  const cut = lives.filter(wasCut).length;
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  return {
    hostile: connections * count,
    headline: `${cut}/${connections} cut by server${cutTimes(lives)}`,
    notes: [
      `${connections} connection(s) × ${count} requests of ${request.length} bytes (${mib(payload.length)} each, one write), never read`,
      livesNote(tls ? 'TLS' : 'plain', lives),
      `read in 500 ms at the end: ${mib(lives.reduce((n, l) => n + l.bytesIn, 0))} of answers the server had queued; ${mib(unread)} of our requests not yet taken by the server`,
    ],
  };
}

function pipelineMetrics(o: AttackOptions, connections: number): Promise<AttackResult> {
  const request = Buffer.from('GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n', 'latin1');
  return pipeline(o, false, connections, request, 10_000);
}

function reviewRequest(namespace: string): Buffer {
  const body = JSON.stringify(noDownscaleReview({ uid: randomUUID(), namespace }));
  return Buffer.from(
    `POST /admission/no-downscale HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    'latin1',
  );
}

function pipelineReviews(o: AttackOptions): Promise<AttackResult> {
  return pipeline(o, true, 20, reviewRequest(o.namespace), 2_000);
}

// ------------------------------------------------------------ body-hold

/** 5 TLS connections, each a review declaring 1 MiB that sends one byte of it; reopened when answered or closed. */
async function bodyHold(o: AttackOptions): Promise<AttackResult> {
  const deadline = performance.now() + o.seconds * 1000;
  const head = `POST /admission/no-downscale HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{`;
  const lives: Life[] = [];
  /** Per answered connection: from its request to the answer. */
  const waits: number[] = [];
  const slot = async () => {
    while (performance.now() < deadline) {
      const h = await track(o, true, true);
      lives.push(h.life);
      if (h.life.openedAt !== undefined && !h.socket.destroyed) {
        h.socket.write(head, 'latin1');
        // Until the server answers or closes it, or the deadline.
        await Promise.race([
          new Promise((r) => h.socket.once('data', r)),
          new Promise((r) => h.socket.once('close', r)),
          delay(Math.max(0, deadline - performance.now())),
        ]);
        if (h.life.bytesIn > 0 || h.life.cutAt !== undefined) waits.push(performance.now() - h.life.openedAt);
      }
      close(h);
      // Reopened at once, bounded: at most 100 a second per slot.
      if (performance.now() < deadline) await delay(10);
    }
  };
  await Promise.all(Array.from({ length: 5 }, slot));
  const byStatus = new Map<string, number>();
  for (const l of lives) tally(byStatus, statuses(l)[0] ?? (l.cutAt !== undefined ? 'closed unanswered' : 'held'));
  return {
    hostile: lives.length,
    headline: `${lives.length} opened, ${waits.length} ended by server`,
    notes: [
      `${lives.length} TLS connections (5 at a time) each declaring a 1 MiB review and sending 1 byte: ${list(byStatus)}`,
      waits.length
        ? `the server answered or closed them after p50 ${s(percentile(waits, 50))}, max ${s(Math.max(...waits))}`
        : 'the server ended none of them within the row',
    ],
  };
}

// ---------------------------------------------------------- slow readers

/** A small seeded generator (mulberry32), so the made-up methods are the same every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Methods no client sends: WebDAV's and other registered ones, then made-up tokens. */
function unusualMethods(n: number, seed: number): string[] {
  const known = ['PROPFIND', 'PROPPATCH', 'MKCOL', 'COPY', 'MOVE', 'LOCK', 'UNLOCK', 'PURGE', 'LINK', 'UNLINK'];
  const next = random(seed);
  const letters = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
  const made = Array.from({ length: n - known.length }, (_, i) => {
    const length = 3 + Math.floor(next() * 10);
    return `${Array.from({ length }, () => letters[Math.floor(next() * letters.length)]).join('')}${i}`;
  });
  return [...known, ...made];
}

/** Until the connection has `n` answers (their status lines), is cut, or 2 s have passed. */
async function answers(life: Life, n: number): Promise<void> {
  const until = performance.now() + 2_000;
  while (statuses(life).length < n && life.cutAt === undefined && performance.now() < until) await delay(5);
}

/** One request on its own connection; its status (or how it ended). */
async function oneRequest(o: AttackOptions, text: string): Promise<string> {
  const h = await track(o, false, true);
  if (h.life.openedAt === undefined) return h.life.error ?? 'not opened';
  h.socket.write(text, 'latin1');
  await answers(h.life, 1);
  close(h);
  return statuses(h.life)[0] ?? h.life.error ?? 'no answer';
}

async function slowReaders(o: AttackOptions): Promise<AttackResult> {
  const deadline = performance.now() + o.seconds * 1000;
  const methods = unusualMethods(900, o.seed);
  const byStatus = new Map<string, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < methods.length && performance.now() < deadline) {
        const method = methods[next++]!;
        tally(byStatus, await oneRequest(o, `${method} /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n`));
      }
    }),
  );
  const methodsSent = next;
  const held: Held[] = [];
  const request = 'GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n';
  next = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < 500 && performance.now() < deadline) {
        next++;
        const h = await track(o, false, false);
        held.push(h);
        if (h.life.openedAt !== undefined && !h.socket.destroyed) h.socket.write(request, 'latin1');
      }
    }),
  );
  await watchKernel(held, deadline);
  await Promise.all(held.map(drainAndClose));
  const lives = held.map((h) => h.life);
  const cut = lives.filter(wasCut).length;
  return {
    hostile: methodsSent + held.length,
    headline: `${held.length - cut}/${held.length} held${cut ? `, ${cut} cut${cutTimes(lives)}` : ''}`,
    notes: [
      `${methodsSent} requests with unusual or made-up methods (GET's path /metrics), one connection each: ${list(byStatus)}`,
      livesNote('plain, GET /metrics never read', lives),
    ],
  };
}

// -------------------------------------------------------------- idle-tls

async function idleTls(o: AttackOptions): Promise<AttackResult> {
  const deadline = performance.now() + o.seconds * 1000;
  const request = reviewRequest(o.namespace);
  const held: Held[] = [];
  let next = 0;
  let openedBy = 0;
  // 100 handshakes in flight at a time; each waits for its answer (or 5 s) before the next.
  await Promise.all(
    Array.from({ length: 100 }, async () => {
      while (next < 1_100 && performance.now() < deadline) {
        next++;
        const h = await track(o, true, true);
        held.push(h);
        if (h.life.openedAt === undefined || h.socket.destroyed) continue;
        h.socket.write(request);
        await Promise.race([
          new Promise((r) => h.socket.once('data', r)),
          new Promise((r) => h.socket.once('close', r)),
          delay(5_000),
        ]);
        openedBy = performance.now();
      }
    }),
  );
  const started = deadline - o.seconds * 1000;
  await delay(Math.max(0, deadline - performance.now()));
  for (const h of held) close(h);
  const lives = held.map((h) => h.life);
  const answered = lives.filter((l) => statuses(l).length > 0);
  const open = lives.filter((l) => l.openedAt !== undefined && !wasCut(l));
  return {
    hostile: held.length,
    headline: `${answered.length} answered, ${open.length} idle at end`,
    notes: [
      `${held.length} TLS connections, one review each, all sent within ${s(openedBy - started)}`,
      livesNote('TLS, answered then idle', lives),
    ],
  };
}

// ------------------------------------------------------- handshake-flood

async function handshakeFlood(o: AttackOptions): Promise<AttackResult> {
  const started = performance.now();
  const deadline = started + o.seconds * 1000;
  const outcomes = new Map<string, number>();
  let done = 0;
  const one = () =>
    new Promise<void>((resolve) => {
      const socket = open(o, true);
      let settled = false;
      const end = (what: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.destroy(); // ours: nothing tracks this one
        tally(outcomes, what);
        resolve();
      };
      const timer = setTimeout(() => end('no handshake within 5 s'), 5_000);
      socket.once('secureConnect', () => {
        done++;
        end('handshake');
      });
      socket.once('error', (e: NodeJS.ErrnoException) => end(e.code ?? e.message));
      socket.once('close', () => end('closed before the handshake'));
    });
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (performance.now() < deadline) await one();
    }),
  );
  const rate = done / ((performance.now() - started) / 1000);
  return {
    hostile: [...outcomes.values()].reduce((a, b) => a + b, 0),
    headline: `${rate.toFixed(0)} handshakes/s`,
    notes: [`32 loops of connect, TLS handshake (no session resumption), close: ${list(outcomes)}`],
  };
}

// ------------------------------------------------------- keepalive-plain

/** GET /healthz, then (once its answer is whole) GET /ready on the same connection: the two statuses. */
async function twoOnOne(o: AttackOptions): Promise<string> {
  const h = await track(o, false, true);
  const { socket, life } = h;
  if (life.openedAt === undefined) return `not opened (${life.error ?? 'timeout'})`;
  socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n', 'latin1');
  await answers(life, 1);
  // The first answer's end is not parsed: bodies here are small and arrive with their head.
  if (life.cutAt === undefined) socket.write('GET /ready HTTP/1.1\r\nHost: localhost\r\n\r\n', 'latin1');
  await answers(life, 2);
  close(h);
  const got = statuses(life);
  return `${got[0] ?? 'none'} then ${got[1] ?? (life.cutAt !== undefined ? 'closed' : 'none')}`;
}

async function keepalivePlain(o: AttackOptions): Promise<AttackResult> {
  const deadline = performance.now() + o.seconds * 1000;
  const outcomes = new Map<string, number>();
  let tries = 0;
  while (performance.now() < deadline) {
    tries++;
    tally(outcomes, await twoOnOne(o));
    await delay(100);
  }
  const both = [...outcomes].filter(([k]) => /^\d{3} then \d{3}$/.test(k)).reduce((n, [, v]) => n + v, 0);
  return {
    hostile: tries,
    headline: `both answered ${both}/${tries}`,
    notes: [`GET /healthz then GET /ready on one connection, ${tries} times: ${list(outcomes)}`],
  };
}

const options = JSON.parse(process.argv[2] ?? '{}') as AttackOptions;
const runs: Record<Attack, (o: AttackOptions) => Promise<AttackResult>> = {
  'pipeline-metrics': (o) => pipelineMetrics(o, 1),
  'pipeline-metrics-20': (o) => pipelineMetrics(o, 20),
  'body-hold': bodyHold,
  'slow-readers': slowReaders,
  'idle-tls': idleTls,
  'handshake-flood': handshakeFlood,
  'pipeline-reviews': pipelineReviews,
  'keepalive-plain': keepalivePlain,
};
const run = runs[options.attack];
if (!run) throw new Error(`unknown attack ${String(options.attack)}`);
const result = await run(options);
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
