// HTTP/1.1 exchanges with the API server over node:http and node:https: a
// keep-alive connection pool, a request aborted by its AbortSignal (its
// connection with it), and a response body read chunk by chunk, as received.
// KubeClient (client.ts) is its one user.
//
// Why not fetch (undici): importing it costs memory (issue 19), and Node's
// http client does all the API client needs. What the client relied on fetch
// for is here too: gzip-encoded answers decoded (the apiserver gzips answers
// over 128 KiB when asked), at most 10 s to connect, idle pooled connections
// closed after 4 s, and every failure an Error with a `code` when it has one
// (ECONNREFUSED, ECONNRESET, a TLS verification code).
import type { Agent, ClientRequest, IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { finished, pipeline, type Readable } from 'node:stream';
import { constants, createGunzip } from 'node:zlib';
import { http } from '../http/nodehttp.ts';
import { tunnelThrough } from './proxy.ts';

/** TLS material of a pool, as the kubeconfig gives it (Node https options). */
export interface TlsOptions {
  ca?: Buffer | string | undefined;
  cert?: Buffer | string | undefined;
  key?: Buffer | string | undefined;
  rejectUnauthorized?: boolean | undefined;
  servername?: string | undefined;
}

/** A connection that is neither up nor (for https) through its handshake within this fails (as undici's connectTimeout). */
const CONNECT_TIMEOUT_MS = 10_000;
/** An idle pooled connection is closed after this (as undici's keepAliveTimeout): a stale one is not reused. */
const IDLE_TIMEOUT_MS = 4_000;
/** TCP keep-alive probes start after this much silence. */
const TCP_KEEPALIVE_DELAY_MS = 30_000;

/**
 * A keep-alive connection pool for a server's scheme, direct or through
 * `proxy`. HTTP/1.1 only: an
 * aborted request takes its connection with it, so a watch restarted by the
 * idle watchdog gets a fresh one. Timeouts are the caller's (AbortSignal).
 */
export function connectionPool(protocol: string, tls: TlsOptions, proxy?: URL): Agent {
  const options = { keepAlive: true, keepAliveMsecs: TCP_KEEPALIVE_DELAY_MS, timeout: IDLE_TIMEOUT_MS };
  const secure = protocol === 'https:';
  const defined = Object.fromEntries(Object.entries(tls).filter(([, value]) => value !== undefined));
  const pool = secure ? new https.Agent({ ...options, ...defined }) : new http.Agent(options);
  // Through a proxy (proxy.ts): each new connection a CONNECT tunnel, pooled as a direct one.
  if (proxy) tunnelThrough(pool, proxy, secure);
  return pool;
}

/**
 * Closes a pool as undici's Agent.close() did: idle connections at once,
 * busy ones once their exchange ends (they are not pooled again), and
 * resolves then.
 */
export async function closePool(pool: Agent): Promise<void> {
  // Consulted when an exchange frees its connection: false closes it instead of pooling it.
  pool.keepSocketAlive = () => false;
  for (const socket of Object.values(pool.freeSockets).flat()) socket?.destroy();
  const busy = Object.values(pool.sockets)
    .flat()
    .filter((socket): socket is Socket => socket !== undefined && !socket.destroyed);
  await Promise.all(busy.map((socket) => new Promise((resolve) => socket.once('close', resolve))));
}

export interface Exchange {
  status: number;
  /** A response header, repeated ones joined with ", " (as fetch's Headers.get); null when absent. */
  header(name: string): string | null;
  /**
   * The body's chunks as they arrive, each one a buffer of its own (never
   * concatenated with others, so the caller can zero every byte it was
   * handed), gzip decoded. Throws what failed the exchange (the abort
   * reason once the signal aborted).
   */
  body: AsyncIterable<Buffer>;
  /** Done with the exchange: stops following the signal; a body not read to its end closes the connection. */
  close(): void;
}

/**
 * Sends one request; resolves once the response's head arrived, rejects with
 * the failure (an Error with the system `code`) or, once `signal` aborted,
 * its reason. The signal stays followed until close(): aborting it while the
 * body is read fails the body, and destroys the connection.
 */
export function exchange(
  url: string,
  init: {
    pool: Agent;
    method: string;
    /** An array value is sent as one header line per value. */
    headers: Record<string, string | string[]>;
    body?: string;
    signal: AbortSignal;
  },
): Promise<Exchange> {
  const { signal } = init;
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise((resolve, reject) => {
    const secure = url.startsWith('https:');
    const headers = { ...init.headers };
    if (init.body !== undefined) headers['content-length'] = String(Buffer.byteLength(init.body));
    let request: ClientRequest;
    try {
      request = (secure ? https : http).request(url, { agent: init.pool, method: init.method, headers });
    } catch (error) {
      // An invalid header value, say.
      reject(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    let response: IncomingMessage | undefined;
    const onAbort = () => {
      const reason = abortError(signal);
      request.destroy(reason);
      response?.destroy(reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    // A socket error can come at any time until the connection is released:
    // before the head it fails the request, after it the body's reader.
    request.on('error', (error) => {
      if (response) {
        response.destroy(error);
        return;
      }
      signal.removeEventListener('abort', onAbort);
      reject(error);
    });
    request.on('socket', (socket: Socket) => {
      if (!request.reusedSocket) prepareConnection(socket, request, secure);
    });
    request.on('response', (message) => {
      // The body's reader takes the error from `finished`; this keeps it from being unhandled before that.
      message.on('error', () => undefined);
      if (signal.aborted) {
        // A head parsed in the tick the signal aborted in.
        message.destroy(abortError(signal));
        reject(abortError(signal));
        return;
      }
      response = message;
      resolve({
        status: message.statusCode ?? 0,
        header: (name) => message.headersDistinct[name.toLowerCase()]?.join(', ') ?? null,
        body: chunks(decoded(message)),
        close: () => {
          signal.removeEventListener('abort', onAbort);
          if (!message.readableEnded) message.destroy();
        },
      });
    });
    request.end(init.body);
  });
}

/** A new connection: TCP keep-alive, no Nagle delay, and at most CONNECT_TIMEOUT_MS to be up (TLS handshake included). */
function prepareConnection(socket: Socket, request: ClientRequest, secure: boolean): void {
  socket.setKeepAlive(true, TCP_KEEPALIVE_DELAY_MS);
  socket.setNoDelay(true);
  const timer = setTimeout(() => {
    const error = new Error(`connect timeout after ${CONNECT_TIMEOUT_MS} ms`) as Error & { code: string };
    error.code = 'ETIMEDOUT';
    request.destroy(error);
  }, CONNECT_TIMEOUT_MS);
  const clear = () => clearTimeout(timer);
  socket.once(secure ? 'secureConnect' : 'connect', clear);
  socket.once('close', clear);
}

function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new DOMException('This operation was aborted', 'AbortError');
}

/**
 * The body as sent, or inflated when the server gzipped it (fetch asked for
 * gzip, and so do we). Each compressed chunk is zeroed once inflated: it
 * holds the same values as what it inflates to.
 */
function decoded(response: IncomingMessage): Readable {
  const encoding = response.headers['content-encoding']?.trim().toLowerCase();
  if (encoding !== 'gzip' && encoding !== 'x-gzip') return response;
  // Lenient about a truncated end, as fetch (and curl) are.
  const gunzip = createGunzip({ flush: constants.Z_SYNC_FLUSH, finishFlush: constants.Z_SYNC_FLUSH });
  const transform = gunzip._transform.bind(gunzip);
  gunzip._transform = (chunk: Buffer, bufferEncoding, callback) =>
    transform(chunk, bufferEncoding, (error?: Error | null) => {
      chunk.fill(0);
      callback(error);
    });
  return pipeline(response, gunzip, () => undefined);
}

/**
 * A readable's chunks one at a time, as they were pushed: a paused stream
 * read by its own async iterator hands out what accumulated as one new
 * buffer, leaving the chunks it was copied from unzeroed. The stream is
 * paused while a chunk waits for the caller, and destroyed unless it ended.
 */
export async function* chunks(stream: Readable): AsyncGenerator<Buffer> {
  const queue: Buffer[] = [];
  let outcome: { error: Error | null | undefined } | undefined;
  let wake: (() => void) | undefined;
  const onData = (chunk: Buffer) => {
    queue.push(chunk);
    stream.pause();
    wake?.();
  };
  stream.pause();
  stream.on('data', onData);
  const stopFollowing = finished(stream, (error) => {
    outcome = { error };
    wake?.();
  });
  try {
    for (;;) {
      if (outcome?.error) throw outcome.error;
      const chunk = queue.shift();
      if (chunk) yield chunk;
      else if (outcome) return;
      else {
        const arrived = new Promise<void>((resolve) => (wake = resolve));
        stream.resume();
        await arrived;
        wake = undefined;
      }
    }
  } finally {
    stopFollowing();
    stream.off('data', onData);
    for (const chunk of queue) chunk.fill(0);
    if (!stream.readableEnded) stream.destroy();
  }
}
