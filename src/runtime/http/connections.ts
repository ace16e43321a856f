// What each connection of Stateward's two servers may hold, and how a full
// server makes room, so that no client — slow, pipelining, never reading, or
// holding many connections — can deny service to the API server's fresh
// connections or the kubelet's probe (issue 33):
//
// - One request at a time per connection. Node parses every pipelined
//   request it receives and calls the listener for each at once; for an
//   async route that meant thousands of handlers in flight for one socket.
//   Here a connection's next request waits until the previous response has
//   been written out, and Node's parser gets the connection's bytes a slice
//   at a time and none while a request waits (parsefeed.ts); a few may wait
//   (MAX_QUEUED_PER_CONNECTION, and MAX_QUEUED_PER_SERVER across all
//   connections), and a connection that pipelines beyond that is closed.
// - A write timeout: a response the client has not taken within
//   writeTimeoutMs of its last byte being handed to the socket closes the
//   connection and frees what it held.
// - A connection cap that nobody can fill: at the cap a newcomer is let in
//   and the connection that has waited longest without a request in progress
//   is closed (the longest-idle keep-alive, a connection that never sent a
//   whole request); a peer address that already holds its share of the cap
//   has its own oldest connection closed instead. The API server opens new
//   connections whenever its pool is short, and the kubelet's probe opens
//   one each time: both get in while an attacker holds idle or slow ones.
//
// Every connection closed here is counted (stateward_http_connections_closed_total)
// and logged at most once a minute per reason, with the peer address.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { Counter, type Registry } from 'prom-client';
import type { Logger } from '../log/logger.ts';
import { perRegistry } from '../metrics.ts';
import { everyMsPerKey } from './gate.ts';
import { type Feed, feedInSlices } from './parsefeed.ts';

export interface ConnectionLimits {
  /** Open connections; at the cap a newcomer displaces the longest-idle one. */
  maxConnections: number;
  /** Open connections from one peer address; 0 is half of maxConnections. */
  maxConnectionsPerPeer?: number;
  /** A response not taken by the client within this closes its connection. */
  writeTimeoutMs: number;
}

/** Requests waiting behind the one being served on a connection: more are not HTTP clients anyone runs (the API server, the kubelet and Prometheus never pipeline). */
export const MAX_QUEUED_PER_CONNECTION = 4;
/** Requests waiting across a server: bounds what pipelining clients together can make it hold. */
export const MAX_QUEUED_PER_SERVER = 256;
/**
 * Bytes of a connection handed to Node's parser at once: a slice of
 * pipelined requests holds a few dozen at most, so a flood is cut after
 * those, not after the ~1,900 a 64 KiB read holds (parsefeed.ts).
 */
export const PARSE_SLICE_BYTES = 2048;
/** Bytes a connection may send while a request of its waits; more closes it. */
export const MAX_HELD_BYTES = 64 * 1024;
/** A request queued behind another may carry at most this much body: nobody reads it meanwhile, so it is held unbudgeted. */
export const MAX_QUEUED_BODY_BYTES = 64 * 1024;

export type CloseReason = 'pipelined' | 'write-timeout' | 'displaced' | 'peer-share';

interface Connection {
  readonly raw: Socket;
  readonly peer: string;
  /** Monotonic ms of the connection's start, its last request's start or its last response's end. */
  lastActive: number;
  /** A request is being served. */
  busy: boolean;
  readonly queue: (() => void)[];
  closed: boolean;
  /** What the connection sends, fed to Node's parser in slices and held while a request waits (parsefeed.ts). */
  feed?: Feed;
}

/** The peer address as one key: an IPv4-mapped IPv6 address is its IPv4 address. */
export function peerOf(socket: Pick<Socket, 'remoteAddress'>): string {
  const address = socket.remoteAddress ?? 'unknown';
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

export class ConnectionGovernor {
  private readonly limits: ConnectionLimits;
  private readonly name: string;
  private readonly log: Logger;
  private readonly closedTotal: Counter;
  private readonly droppedTotal: Counter;
  private readonly byRaw = new Map<Socket, Connection>();
  private readonly bySocket = new WeakMap<Socket, Connection>();
  private readonly perPeer = new Map<string, number>();
  private readonly warn = everyMsPerKey(60_000);
  private queued = 0;

  constructor(limits: ConnectionLimits, name: string, registry: Registry, log: Logger) {
    this.limits = limits;
    this.name = name;
    this.log = log;
    this.closedTotal = connectionsClosedMetric(registry);
    this.droppedTotal = requestsDroppedMetric(registry);
  }

  get open(): number {
    return this.byRaw.size;
  }

  private get peerCap(): number {
    const share = this.limits.maxConnectionsPerPeer ?? 0;
    return share > 0 ? share : Math.max(1, Math.floor(this.limits.maxConnections / 2));
  }

  /**
   * Follows every connection of `server` from its arrival ('connection': the
   * TCP socket, before any TLS). Node's own cap (server.maxConnections) is
   * left at twice ours, as a last resort for connections arriving faster
   * than displaced ones close.
   */
  attach(server: Server): void {
    server.maxConnections = this.limits.maxConnections * 2;
    // Both listeners run after Node's own (added when the server was made), as feedInSlices needs.
    const secure = isTlsServer(server);
    server.on('connection', (raw: Socket) => {
      const connection = this.admit(raw);
      if (!secure) this.feed(raw, connection);
    });
    // Requests on a TLS connection arrive on its TLSSocket, whose _parent is the TCP socket.
    server.on('secureConnection', (socket: TLSSocket) => {
      const parent = (socket as TLSSocket & { _parent?: Socket })._parent;
      const connection = parent ? this.byRaw.get(parent) : undefined;
      if (!connection) return;
      this.bySocket.set(socket, connection);
      this.feed(socket, connection);
    });
  }

  private feed(socket: Socket, connection: Connection): void {
    connection.feed = feedInSlices(socket, {
      sliceBytes: PARSE_SLICE_BYTES,
      maxHeldBytes: MAX_HELD_BYTES,
      mayParse: () => connection.queue.length === 0,
      onOverflow: () => this.close(connection, 'pipelined'),
    });
  }

  private admit(raw: Socket): Connection {
    const connection: Connection = {
      raw,
      peer: peerOf(raw),
      lastActive: performance.now(),
      busy: false,
      queue: [],
      closed: false,
    };
    this.byRaw.set(raw, connection);
    this.bySocket.set(raw, connection);
    const fromPeer = (this.perPeer.get(connection.peer) ?? 0) + 1;
    this.perPeer.set(connection.peer, fromPeer);
    raw.once('close', () => this.forget(connection));
    if (fromPeer > this.peerCap) {
      const victim = this.oldest((c) => c.peer === connection.peer && c !== connection);
      if (victim) this.close(victim, 'peer-share');
    } else if (this.byRaw.size > this.limits.maxConnections) {
      const victim = this.oldest((c) => c !== connection);
      if (victim) this.close(victim, 'displaced');
    }
    return connection;
  }

  /** The longest-idle connection passing `eligible`: one without a request in progress if any, else the longest-busy. */
  private oldest(eligible: (c: Connection) => boolean): Connection | undefined {
    let idle: Connection | undefined;
    let busy: Connection | undefined;
    for (const c of this.byRaw.values()) {
      if (c.closed || !eligible(c)) continue;
      if (!c.busy && c.queue.length === 0) {
        if (!idle || c.lastActive < idle.lastActive) idle = c;
      } else if (!busy || c.lastActive < busy.lastActive) busy = c;
    }
    return idle ?? busy;
  }

  private forget(connection: Connection): void {
    connection.closed = true;
    this.queued -= connection.queue.length;
    connection.queue.length = 0;
    this.byRaw.delete(connection.raw);
    const left = (this.perPeer.get(connection.peer) ?? 1) - 1;
    if (left > 0) this.perPeer.set(connection.peer, left);
    else this.perPeer.delete(connection.peer);
  }

  private close(connection: Connection, reason: CloseReason): void {
    if (connection.closed) return;
    connection.closed = true;
    connection.raw.destroy();
    this.closedTotal.inc({ server: this.name, reason });
    if (this.warn(reason)) this.log.warn(CLOSE_MESSAGES[reason], { server: this.name, peer: connection.peer, reason });
  }

  /**
   * Whether a request just parsed may be served, now or in its turn: false
   * when its connection is closed, or pipelines more than may wait (then it
   * is closed here). Asked before any other work is done for the request:
   * Node goes on parsing the chunk it was reading when the connection was
   * cut (up to 64 KiB: ~1,900 requests of a `GET /metrics` flood, ~40 ms of
   * Node's own work on this machine; neither socket.destroy() nor
   * parser.pause() stops it), and those requests cost nothing more here.
   */
  accepts(req: IncomingMessage): boolean {
    const connection = this.bySocket.get(req.socket);
    if (!connection) return true; // a request injected without a connection this governor saw arrive
    if (connection.closed) {
      this.droppedTotal.inc({ server: this.name });
      return false;
    }
    if (!connection.busy) return true;
    const declared = declaredBodyBytes(req);
    if (
      connection.queue.length < MAX_QUEUED_PER_CONNECTION &&
      this.queued < MAX_QUEUED_PER_SERVER &&
      declared !== undefined &&
      declared <= MAX_QUEUED_BODY_BYTES
    )
      return true;
    this.close(connection, 'pipelined');
    this.droppedTotal.inc({ server: this.name });
    return false;
  }

  /**
   * Runs `serve` (the request's handler) now if its connection has nothing
   * in progress, else once the responses before it are written out. Only
   * for a request `accepts` let in. While it is served, the response must be
   * taken by the client within the write timeout of its last byte being
   * handed to the socket.
   */
  serveInTurn(req: IncomingMessage, res: ServerResponse, serve: () => void): void {
    const connection = this.bySocket.get(req.socket);
    if (!connection) return serve();
    if (connection.closed) return;
    if (!connection.busy) return this.start(connection, res, serve);
    connection.queue.push(() => this.start(connection, res, serve));
    this.queued++;
  }

  private start(connection: Connection, res: ServerResponse, serve: () => void): void {
    connection.busy = true;
    connection.lastActive = performance.now();
    let writing: NodeJS.Timeout | undefined;
    // 'prefinish': the response's last byte is in the socket's hands; 'finish': the kernel took it.
    res.once('prefinish', () => {
      writing = setTimeout(() => this.close(connection, 'write-timeout'), this.limits.writeTimeoutMs);
    });
    res.once('finish', () => clearTimeout(writing));
    res.once('close', () => {
      clearTimeout(writing);
      this.next(connection);
    });
    serve();
  }

  private next(connection: Connection): void {
    connection.busy = false;
    connection.lastActive = performance.now();
    if (connection.closed) return;
    const next = connection.queue.shift();
    if (next) {
      this.queued--;
      next();
    }
    if (connection.queue.length === 0) connection.feed?.resume();
  }
}

/** Content-Length as a number; undefined when the body is chunked or the header unusable; 0 when there is none. */
export function declaredBodyBytes(req: IncomingMessage): number | undefined {
  const header = req.headers['content-length'];
  if (header === undefined) return req.headers['transfer-encoding'] === undefined ? 0 : undefined;
  const length = Number(header);
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined;
}

const CLOSE_MESSAGES: Record<CloseReason, string> = {
  pipelined: 'connection closed: it pipelined more requests than are served in turn',
  'write-timeout': 'connection closed: its client did not read a response within the write timeout',
  displaced: 'connection closed to admit a new one: the server was at its connection cap and this one was idle longest',
  'peer-share':
    'connection closed to admit a new one from the same peer: the peer held its share of the connection cap',
};

export const connectionsClosedMetric = perRegistry(
  (registry) =>
    new Counter({
      name: 'stateward_http_connections_closed_total',
      help: 'Connections a server closed to stay within its bounds, by reason: pipelined (more requests waiting than are served in turn), write-timeout (a response not read in time), displaced (longest-idle, closed at the connection cap to admit a new one), peer-share (the same, within a peer over its share).',
      labelNames: ['server', 'reason'],
      registers: [registry],
    }),
);

export const requestsDroppedMetric = perRegistry(
  (registry) =>
    new Counter({
      name: 'stateward_http_requests_dropped_total',
      help: 'Requests parsed on a connection already closed for pipelining, dropped unanswered: what Node parsed of a slice of the connection (-server.* and -server-tls.* bound what a slice holds).',
      labelNames: ['server'],
      registers: [registry],
    }),
);

/** Whether `server` is a tls.Server (https's included): its requests arrive on the TLSSocket of 'secureConnection'. */
export function isTlsServer(server: Server): boolean {
  return typeof (server as Server & { setSecureContext?: unknown }).setSecureContext === 'function';
}
