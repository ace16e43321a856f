// A real Prometheus (built by test/tools/prometheus.ts) for the health-gated
// rollout tests: its own data directory and a free loopback port, scraping
// the tests' exporters (test/support/metricexporter.ts) every second under
// honor_labels, so the pods' `namespace` and `pod` labels are the exporter's.
// A test can stop it (gracefully or by SIGKILL), freeze it, and start it
// again on the same port and data directory, as an outage mid-rollout does.
// Tests wait on what it answers (waitForQuery), never on sleeps.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '../cluster/ports.ts';
import { DeadlineError, httpStatus, waitFor } from '../cluster/probe.ts';
import { prometheusBinary } from '../tools/prometheus.ts';
import type { Labels } from './metricexporter.ts';

export interface PrometheusOptions {
  /** Scrape targets as host:port (e.g. MetricExporter.target), scraped at /metrics under honor_labels. */
  targets: string[];
  /** Scrape interval (and timeout); 1000 unless given. */
  scrapeIntervalMs?: number;
  /** Rule evaluation interval; 1000 unless given. */
  evaluationIntervalMs?: number;
  /** How far back an instant query looks for a series' last sample (--query.lookback-delta); Prometheus's 5m unless given. */
  lookbackDelta?: string;
  /**
   * How often the scrape manager takes up new targets (the hidden flag
   * --scrape.discovery-reload-interval): Prometheus's 5s would delay the
   * first scrape after every start by ~5 s; 250ms unless given, so the first
   * sample arrives within about a scrape interval of ready.
   */
  discoveryReloadInterval?: string;
  /** Deadline for /-/ready at each start; 60 s unless given. */
  readyTimeoutMs?: number;
}

/** One element of an instant query's answer; a scalar answer is one sample with no labels. */
export interface Sample {
  metric: Labels;
  value: number;
  /** Unix seconds, as Prometheus reports them. */
  timestamp: number;
}

/** Prometheus answered, with `"status": "error"` (a bad query, a timeout, …). */
export class PrometheusQueryError extends Error {
  readonly httpStatus: number;
  /** Prometheus's errorType, e.g. bad_data, timeout, execution. */
  readonly errorType: string;

  constructor(httpStatus: number, errorType: string, message: string) {
    super(`Prometheus answered ${httpStatus} ${errorType}: ${message}`);
    this.httpStatus = httpStatus;
    this.errorType = errorType;
  }
}

const LOG_LIMIT = 256 * 1024;
/** Children still running when the test process exits are killed with it. */
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export class Prometheus {
  /** Where the HTTP API is, e.g. http://127.0.0.1:41234 (the same across restarts). */
  readonly url: string;
  readonly port: number;
  /** The TSDB directory, kept across stop() and resume() and removed by close(). */
  readonly dataDir: string;
  private readonly binary: string;
  private readonly dir: string;
  private readonly options: PrometheusOptions;
  private child: ChildProcess | undefined;
  private frozen = false;
  private log = '';
  private lastExit = '';

  private constructor(binary: string, dir: string, port: number, options: PrometheusOptions) {
    this.binary = binary;
    this.dir = dir;
    this.options = options;
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.dataDir = join(dir, 'data');
  }

  /** Builds Prometheus if the cache lacks it, starts it, and resolves once /-/ready answers 200. */
  static async start(options: PrometheusOptions): Promise<Prometheus> {
    const binary = await prometheusBinary();
    const dir = await mkdtemp(join(tmpdir(), 'stateward-prometheus-'));
    const [port] = await freePorts(1);
    const prometheus = new Prometheus(binary, dir, port!, options);
    await mkdir(prometheus.dataDir);
    await writeFile(join(dir, 'prometheus.yml'), JSON.stringify(prometheusConfig(options), null, 2));
    try {
      await prometheus.resume();
    } catch (error) {
      await prometheus.close();
      throw error;
    }
    return prometheus;
  }

  /** True while the process runs (frozen included). */
  get running(): boolean {
    return this.child !== undefined;
  }

  /** Its log (stderr and stdout), the last 256 KiB. */
  get logs(): string {
    return this.log;
  }

  /** Starts it again after stop(), on the same port and data directory; resolves once ready. */
  async resume(): Promise<void> {
    if (this.child) throw new Error('Prometheus is already running');
    const args = [
      `--config.file=${join(this.dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${this.dataDir}`,
      `--web.listen-address=127.0.0.1:${this.port}`,
      `--scrape.discovery-reload-interval=${this.options.discoveryReloadInterval ?? '250ms'}`,
      ...(this.options.lookbackDelta ? [`--query.lookback-delta=${this.options.lookbackDelta}`] : []),
    ];
    const child = spawn(this.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    running.add(child);
    const append = (chunk: Buffer) => {
      this.log = (this.log + chunk.toString()).slice(-LOG_LIMIT);
    };
    child.stdout?.on('data', append);
    child.stderr?.on('data', append);
    const gone = (why: string) => {
      running.delete(child);
      if (this.child === child) this.child = undefined;
      this.lastExit = why;
    };
    child.on('exit', (code, signal) => gone(`Prometheus exited with ${signal ?? code}`));
    child.on('error', (error) => gone(`cannot run ${this.binary}: ${error.message}`));
    await waitFor('Prometheus to be ready', async () => (await httpStatus(`${this.url}/-/ready`)) === 200, {
      timeoutMs: this.options.readyTimeoutMs ?? 60_000,
      fail: () => (this.child === child ? undefined : `${this.lastExit}:\n${this.log.slice(-3000)}`),
    });
  }

  /** Stop and start again on the same port and data directory. */
  async restart(): Promise<void> {
    await this.stop();
    await this.resume();
  }

  /**
   * Ends the process and waits for its exit: SIGTERM shuts it down cleanly,
   * SIGKILL is a crash (the next start replays its write-ahead log). A
   * query meanwhile is refused (ECONNREFUSED). A no-op when it is not running.
   */
  async stop(options: { signal?: 'SIGTERM' | 'SIGKILL' } = {}): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(options.signal ?? 'SIGTERM');
    // A stopped process acts on signals only once continued.
    if (this.frozen) child.kill('SIGCONT');
    this.frozen = false;
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exited.finally(() => clearTimeout(timer));
  }

  /**
   * SIGSTOP: the port stays open and the kernel accepts connections, but
   * nothing answers, so a client waits until its own timeout (a hung
   * Prometheus, unlike a stopped one).
   */
  async freeze(): Promise<void> {
    const pid = this.child?.pid;
    if (pid === undefined) throw new Error('Prometheus is not running');
    this.child!.kill('SIGSTOP');
    this.frozen = true;
    // The signal is delivered asynchronously: until every thread is stopped
    // a query may still be answered.
    await waitFor('Prometheus to be stopped (SIGSTOP)', () => allThreadsStopped(pid), {
      timeoutMs: 5_000,
      intervalMs: 5,
    });
  }

  /** SIGCONT after freeze(). */
  thaw(): void {
    if (!this.child || !this.frozen) return;
    this.child.kill('SIGCONT');
    this.frozen = false;
  }

  /** Stops it and removes its directory (data included). */
  async close(): Promise<void> {
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
  }

  /**
   * An instant query (/api/v1/query) at `time` (Unix seconds; now unless
   * given). Rejects with PrometheusQueryError when Prometheus answers with an
   * error, and with Node's own error (code ECONNREFUSED, …) when it cannot be
   * reached. A range vector or string answer is rejected too: ask for a value.
   */
  async query(promql: string, options: { time?: number; timeoutMs?: number } = {}): Promise<Sample[]> {
    const params = new URLSearchParams({ query: promql });
    if (options.time !== undefined) params.set('time', String(options.time));
    const data = (await this.api(`/api/v1/query?${params.toString()}`, options.timeoutMs)) as {
      resultType: string;
      result: unknown;
    };
    if (data.resultType === 'vector') {
      return (data.result as { metric: Labels; value: [number, string] }[]).map(({ metric, value }) => ({
        metric,
        timestamp: value[0],
        value: parseSampleValue(value[1]),
      }));
    }
    if (data.resultType === 'scalar') {
      const [timestamp, value] = data.result as [number, string];
      return [{ metric: {}, timestamp, value: parseSampleValue(value) }];
    }
    throw new Error(`${promql} is a ${data.resultType}, not an instant vector or scalar`);
  }

  /** GET an API path (e.g. /api/v1/status/buildinfo) and resolve to its `data`. */
  async api(path: string, timeoutMs = 10_000): Promise<unknown> {
    const { status, body } = await get(`${this.url}${path}`, timeoutMs);
    let answer: { status?: string; data?: unknown; errorType?: string; error?: string };
    try {
      answer = JSON.parse(body) as typeof answer;
    } catch {
      throw new Error(`Prometheus answered ${status} with a body that is not JSON: ${body.slice(0, 300)}`);
    }
    if (answer.status !== 'success') {
      throw new PrometheusQueryError(status, answer.errorType ?? 'unknown', answer.error ?? body.slice(0, 300));
    }
    return answer.data;
  }
}

/**
 * Polls an instant query until `predicate` holds for its answer and resolves
 * to that answer. Errors (Prometheus not up yet, a restart under way) count
 * as "not yet"; at the deadline the error says what the last answer was. Ends
 * at once if Prometheus is not running.
 */
export async function waitForQuery(
  prometheus: Prometheus,
  promql: string,
  predicate: (samples: Sample[]) => boolean,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<Sample[]> {
  let last = 'none yet';
  try {
    return await waitFor(
      `${promql} to satisfy the predicate`,
      async () => {
        const samples = await prometheus.query(promql);
        last = JSON.stringify(samples);
        return predicate(samples) ? samples : undefined;
      },
      {
        timeoutMs: options.timeoutMs ?? 30_000,
        intervalMs: options.intervalMs ?? 100,
        fail: () => (prometheus.running ? undefined : `Prometheus is not running; cannot wait for ${promql}`),
      },
    );
  } catch (error) {
    if (error instanceof DeadlineError) throw new DeadlineError(`${error.message}; last answer: ${last}`);
    throw error;
  }
}

/** Linux: every thread of `pid` is in state T (stopped), per /proc/<pid>/task/<tid>/stat. */
async function allThreadsStopped(pid: number): Promise<boolean> {
  const tasks = await readdir(`/proc/${pid}/task`);
  for (const tid of tasks) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // The state follows the command name, which is in parentheses and may hold spaces.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state !== 'T' && state !== 't') return false;
  }
  return true;
}

/** The value of an answer with exactly one sample, else undefined: `(s) => onlyValue(s) === 3`. */
export function onlyValue(samples: Sample[]): number | undefined {
  return samples.length === 1 ? samples[0]!.value : undefined;
}

/** The configuration file's content (JSON, which Prometheus reads as YAML). */
export function prometheusConfig(options: PrometheusOptions): object {
  const scrape = `${options.scrapeIntervalMs ?? 1000}ms`;
  return {
    global: {
      scrape_interval: scrape,
      scrape_timeout: scrape,
      evaluation_interval: `${options.evaluationIntervalMs ?? 1000}ms`,
    },
    scrape_configs: [
      {
        job_name: 'stateward-test',
        // Keep the exporter's namespace/pod (and any instance/job it sets)
        // instead of renaming them exported_*.
        honor_labels: true,
        metrics_path: '/metrics',
        static_configs: [{ targets: options.targets }],
      },
    ],
  };
}

/** Prometheus writes values as strings; Number() reads "NaN" but not "+Inf" or "-Inf". */
function parseSampleValue(text: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  return Number(text);
}

async function get(url: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    // A new connection each time (no keep-alive pool): a socket pooled before
    // a stop or a freeze would make the next query fail in its own way.
    const req = request(url, { method: 'GET', timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}
