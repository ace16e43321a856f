// TLS handshakes in turn (issue 33): a flood of connect–handshake–close
// loops made the event loop spend itself on key exchanges while established
// connections' reviews waited behind them. Here Node's TLS server starts a
// connection's handshake only from a queue, at most one per turn of the
// event loop (setImmediate: every ready read of an established connection
// is handled before the next handshake's costly first step) and at most
// `maxConcurrent` at once. A client that sent its hello waits a little
// longer; an established connection no longer waits behind a flood.
//
// How: tls.Server wraps each TCP socket in a TLSSocket from its own
// 'connection' listener, which is documented to accept sockets emitted by
// anyone. That listener is taken off and called from the queue instead;
// bytes that arrived meanwhile wait in the TCP socket, where Node's
// TLSSocket reads them from when it wraps it.
import type { Socket } from 'node:net';
import type { Server as TlsServer, TLSSocket } from 'node:tls';

export interface HandshakeGate {
  /** Handshakes begun and not yet ended. */
  readonly inFlight: number;
  /** Connections waiting for their handshake to begin. */
  readonly waiting: number;
}

/**
 * Puts the handshakes of `server` in turn. Call once, before listen. Returns
 * undefined (handshakes start as Node starts them) when Node's listener is
 * not where this expects it.
 */
export function handshakesInTurn(server: TlsServer, maxConcurrent: number): HandshakeGate | undefined {
  const [wrap, ...others] = server.listeners('connection') as ((socket: Socket) => void)[];
  if (wrap === undefined || others.length > 0) return undefined;
  server.removeListener('connection', wrap);
  const queue: Socket[] = [];
  let inFlight = 0;
  let pumping = false;
  const pump = () => {
    pumping = false;
    let raw = queue.shift();
    while (raw !== undefined && raw.destroyed) raw = queue.shift();
    if (raw === undefined) return;
    inFlight++;
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      inFlight--;
      schedule();
    };
    raw.once('close', end);
    wrap.call(server, raw);
    pending.set(raw, end);
    schedule();
  };
  const schedule = () => {
    if (pumping || inFlight >= maxConcurrent || queue.length === 0) return;
    pumping = true;
    setImmediate(pump);
  };
  const pending = new WeakMap<Socket, () => void>();
  server.on('connection', (raw: Socket) => {
    queue.push(raw);
    schedule();
  });
  const done = (socket: TLSSocket) => {
    const raw = (socket as TLSSocket & { _parent?: Socket })._parent;
    if (raw) pending.get(raw)?.();
  };
  server.on('secureConnection', done);
  server.on('tlsClientError', (_error: Error, socket: TLSSocket) => done(socket));
  return {
    get inFlight() {
      return inFlight;
    },
    get waiting() {
      return queue.length;
    },
  };
}
