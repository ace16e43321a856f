// Go's /debug/pprof on the plain HTTP server, with -server.pprof.enabled:
// what rollout-operator serves there (net/http/pprof) and `go tool pprof`
// reads, for the two profiles a Node process has counterparts of:
//
//   GET /debug/pprof/                   what is served here (text)
//   GET /debug/pprof/profile?seconds=N  a CPU profile over N seconds (default 30, at most 60)
//   GET /debug/pprof/heap               the heap in use, sampled
//
// Never on the HTTPS webhook server: these routes are registered on the
// plain server alone. A profile is written only when it is complete; the
// write timeout (-server.write-timeout) starts once its last byte is handed
// to the socket (connections.ts), so a 30-second profile is not cut by a
// 10-second write timeout, as it is in rollout-operator (Go's pprof refuses
// any profile longer than the server's WriteTimeout).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../log/logger.ts';
import { replyText } from '../http/guard.ts';
import type { HttpServer } from '../http/server.ts';
import { ProfileInProgress, V8Profiler } from './profiler.ts';

export const PPROF_PATH = '/debug/pprof/';
/** Go's default for /debug/pprof/profile. */
export const DEFAULT_PROFILE_SECONDS = 30;
/** Longest CPU profile served: a request cannot keep the profiler running for longer. */
export const MAX_PROFILE_SECONDS = 60;

const PROFILES: Record<string, string> = {
  profile: `CPU profile; ?seconds=N (1 to ${MAX_PROFILE_SECONDS}, default ${DEFAULT_PROFILE_SECONDS}) sets how long it samples`,
  heap: 'sampled heap in use (objects still alive, by the stack that allocated them)',
};

const INDEX = [
  'Profiles of this process in the pprof format (gzipped protobuf), e.g.',
  `  go tool pprof http://<host>:<-server.port>${PPROF_PATH}profile?seconds=${DEFAULT_PROFILE_SECONDS}`,
  '',
  ...Object.entries(PROFILES).map(([name, what]) => `${PPROF_PATH}${name}\t${what}`),
  '',
].join('\n');

/** The query parameters of a request target ("" when it has none); the target was already checked (target.ts). */
function queryOf(req: IncomingMessage): URLSearchParams {
  const url = req.url ?? '';
  const question = url.indexOf('?');
  return new URLSearchParams(question < 0 ? '' : url.slice(question + 1));
}

/** How long a CPU profile a query asks for: `seconds`, a whole number from 1 to the cap, Go's 30 when absent. */
export function profileSeconds(query: URLSearchParams): { seconds: number } | { problem: string } {
  const given = query.get('seconds');
  if (given === null || given === '') return { seconds: DEFAULT_PROFILE_SECONDS };
  const seconds = /^[0-9]{1,6}$/.test(given) ? Number(given) : NaN;
  if (seconds >= 1 && seconds <= MAX_PROFILE_SECONDS) return { seconds };
  return { problem: `seconds must be a whole number from 1 to ${MAX_PROFILE_SECONDS}, not ${JSON.stringify(given)}` };
}

/** Why a query cannot be served as asked: the parameters of Go's that ask for what is not served here. */
export function unservedParameter(name: string, query: URLSearchParams): string | undefined {
  const debug = query.get('debug');
  if (debug !== null && debug !== '' && debug !== '0')
    return 'only the pprof protobuf format (debug=0) is served; open it with go tool pprof';
  if (name === 'heap' && query.has('seconds')) return 'a heap profile over seconds (a delta profile) is not served';
  return undefined;
}

export interface PprofOptions {
  logger: Logger;
  /** The operator's shutdown: a CPU profile under way ends early and is served as taken so far. */
  stopping: AbortSignal;
}

/**
 * Serves /debug/pprof/ on `http` and starts the profiler (heap sampling runs
 * from here on); the profiler is returned for the caller to close at
 * shutdown.
 */
export async function servePprof(http: HttpServer, options: PprofOptions): Promise<V8Profiler> {
  const profiler = new V8Profiler();
  await profiler.start();
  const log = options.logger.child({ component: 'pprof' });
  const handle = (req: IncomingMessage, res: ServerResponse, path: string) =>
    serveProfile(profiler, req, res, path.slice(PPROF_PATH.length), { log, stopping: options.stopping });
  // Go's mux sends /debug/pprof to /debug/pprof/; both are the index here.
  http.route(PPROF_PATH.slice(0, -1), handle);
  http.routePrefix(PPROF_PATH, handle);
  log.info('serving profiles', { path: PPROF_PATH });
  return profiler;
}

async function serveProfile(
  profiler: V8Profiler,
  req: IncomingMessage,
  res: ServerResponse,
  name: string,
  { log, stopping }: { log: Logger; stopping: AbortSignal },
): Promise<void> {
  if (name === '') return replyText(res, 200, INDEX);
  if (!Object.hasOwn(PROFILES, name))
    return replyText(
      res,
      404,
      `unknown profile ${JSON.stringify(name)}; served: ${Object.keys(PROFILES).join(', ')}\n`,
    );
  const query = queryOf(req);
  const unserved = unservedParameter(name, query);
  if (unserved !== undefined) return replyText(res, 400, `${unserved}\n`);
  const asked = name === 'profile' ? profileSeconds(query) : { seconds: 0 };
  if ('problem' in asked) return replyText(res, 400, `${asked.problem}\n`);
  // A HEAD request learns what it would get without making the process profile itself.
  if (req.method === 'HEAD') return sendProfile(res, name);
  // A client that goes away ends its profile; so does the operator's shutdown.
  const gone = new AbortController();
  res.once('close', () => gone.abort());
  try {
    const body =
      name === 'profile'
        ? await profiler.cpu(asked.seconds * 1000, AbortSignal.any([gone.signal, stopping]))
        : await profiler.heap();
    if (gone.signal.aborted) return;
    sendProfile(res, name, body);
    log.debug('profile served', { profile: name, seconds: asked.seconds, bytes: body.length });
  } catch (error) {
    if (error instanceof ProfileInProgress) return replyText(res, 409, `${error.message}\n`);
    throw error;
  }
}

/** A profile as Go's net/http/pprof sends it; without a body, the headers alone (HEAD). */
function sendProfile(res: ServerResponse, name: string, body?: Buffer): void {
  res.writeHead(200, {
    'content-type': 'application/octet-stream',
    'content-disposition': `attachment; filename="${name}"`,
    'x-content-type-options': 'nosniff',
    ...(body ? { 'content-length': String(body.length) } : {}),
  });
  res.end(body);
}
