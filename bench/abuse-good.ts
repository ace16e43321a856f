// The good traffic of the issue-33 rows of bench/abuse.bench.ts, sent and
// timed by the bench process from 127.0.0.1 (the API server's and the
// kubelet's side), open-loop so that a slow server cannot slow the senders:
//   fresh      no-downscale reviews, each on a new TLS connection with a full
//              handshake (no session resumption): what the API server does
//              when its pool of connections is short
//   keepalive  no-downscale reviews over 16 keep-alive TLS connections opened
//              before the attack (the API server's pool)
//   probe      the kubelet's readiness probe: GET /ready on a new plain
//              connection every second, 1 s timeout (timeoutSeconds: 1)
// A request fails on a wrong answer, an error, or no answer in time (5 s for
// a review, 1 s for the probe).
import { Agent } from 'node:https';
import { request } from 'node:http';
import { envNumber, percentile } from './report.ts';
import { drive, reviewTemplate, type Outcome } from './webhooks.bench.ts';

export const FRESH_RPS = envNumber('BENCH_ABUSE_FRESH_RPS', 20);
export const KEEPALIVE_RPS = envNumber('BENCH_ABUSE_KEEPALIVE_RPS', 100);
const PROBE_TIMEOUT_MS = 1_000;

export const GOOD_KINDS = ['fresh', 'keepalive', 'probe'] as const;
export type GoodKind = (typeof GOOD_KINDS)[number];

export interface GoodFigures {
  sent: number;
  failed: number;
  p50: number;
  p99: number;
  firstError?: string;
}

export type GoodResult = Record<GoodKind, GoodFigures>;

function figures(outcomes: Outcome[]): GoodFigures {
  const failed = outcomes.filter((o) => !o.ok);
  // A failed request counts as infinitely slow.
  const latencies = outcomes.map((o) => (o.ok ? o.latencyMs : Infinity));
  return {
    sent: outcomes.length,
    failed: failed.length,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    ...(failed[0]?.error ? { firstError: failed[0].error } : {}),
  };
}

/** GET /ready on a new connection: ok on 200 within the probe's timeout. */
function probeOnce(port: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const started = performance.now();
    const fail = (error: string) => resolve({ ok: false, latencyMs: performance.now() - started, error });
    const req = request({ host: '127.0.0.1', port, path: '/ready', agent: false, timeout: PROBE_TIMEOUT_MS }, (res) => {
      res.resume();
      res.on('error', (e) => fail(e.message));
      res.on('end', () => {
        const latencyMs = performance.now() - started;
        resolve(
          res.statusCode === 200 ? { ok: true, latencyMs } : { ok: false, latencyMs, error: `HTTP ${res.statusCode}` },
        );
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)));
    req.on('error', (e) => fail(e.message));
    req.end();
  });
}

/** Probes once a second, open-loop, for `seconds`. */
async function probes(port: number, seconds: number): Promise<Outcome[]> {
  const started = performance.now();
  const pending: Promise<Outcome>[] = [];
  for (let i = 0; i < Math.round(seconds); i++) {
    await new Promise((r) => setTimeout(r, Math.max(0, started + i * 1000 - performance.now())));
    pending.push(probeOnce(port));
  }
  return Promise.all(pending);
}

/** The three kinds against one system: keep-alive connections opened by warmUp(), then run() as often as needed. */
export class GoodTraffic {
  private readonly tlsPort: number;
  private readonly plainPort: number;
  private readonly templates = { deny: reviewTemplate(2), allow: reviewTemplate(4) };
  private readonly keepAlive = new Agent({ keepAlive: true, maxSockets: 16, rejectUnauthorized: false });
  // No keep-alive and no TLS session cache: every request a new connection and a full handshake.
  private readonly fresh = new Agent({ keepAlive: false, maxCachedSessions: 0, rejectUnauthorized: false });

  constructor(ports: { tlsPort: number; plainPort: number }) {
    this.tlsPort = ports.tlsPort;
    this.plainPort = ports.plainPort;
  }

  /** Not measured: the 16 keep-alive connections and their handshakes, the first fresh ones, the server's JIT. */
  async warmUp(): Promise<void> {
    await Promise.all([
      drive(this.keepAlive, this.tlsPort, KEEPALIVE_RPS, KEEPALIVE_RPS * 2, this.templates),
      drive(this.fresh, this.tlsPort, FRESH_RPS, FRESH_RPS, this.templates),
      probeOnce(this.plainPort),
    ]);
  }

  async run(seconds: number): Promise<GoodResult> {
    const [fresh, keepalive, probe] = await Promise.all([
      drive(this.fresh, this.tlsPort, FRESH_RPS, Math.round(FRESH_RPS * seconds), this.templates),
      drive(this.keepAlive, this.tlsPort, KEEPALIVE_RPS, Math.round(KEEPALIVE_RPS * seconds), this.templates),
      probes(this.plainPort, seconds),
    ]);
    return { fresh: figures(fresh.outcomes), keepalive: figures(keepalive.outcomes), probe: figures(probe) };
  }

  close(): void {
    this.keepAlive.destroy();
    this.fresh.destroy();
  }
}
