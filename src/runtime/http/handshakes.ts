// TLS handshakes in turn (issue 33): a flood of connect–handshake–close
// loops made the event loop spend itself on key exchanges while established
// connections' reviews waited behind them. Here a connection's handshake
// begins only once its client hello has arrived, and from a queue, one per
// turn of the event loop (setImmediate): every ready read of an established
// connection is handled before the next handshake's costly first step
// (the key share and the certificate's signature). A flood then costs its
// handshakes' CPU but no established connection waits behind more than one.
//
// There is no limit on handshakes in progress beyond the connection cap:
// a slot held until the handshake ends could be held by clients that stall
// mid-handshake (a first version with 16 slots let 16 such clients stop
// every new connection for the whole handshake timeout). A connection that
// sends no hello is closed after `timeoutMs`, as Node's handshake timeout
// would.
//
// How: tls.Server wraps each TCP socket in a TLSSocket from its own
// 'connection' listener, which is documented to accept sockets emitted by
// anyone. That listener is taken off and called from the queue instead;
// the hello waits in the TCP socket, where Node's TLSSocket reads it from
// when it wraps it.
import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';

export interface HandshakeQueue {
  /** Connections whose hello arrived, waiting for their handshake to begin. */
  readonly waiting: number;
}

/**
 * Puts the handshakes of `server` in turn. Call once, before any other
 * 'connection' listener is added. Returns undefined (handshakes begin as
 * Node begins them) when Node's listener is not where this expects it.
 */
export function handshakesInTurn(server: TlsServer, timeoutMs: number): HandshakeQueue | undefined {
  const [wrap, ...others] = server.listeners('connection') as ((socket: Socket) => void)[];
  if (wrap === undefined || others.length > 0) return undefined;
  server.removeListener('connection', wrap);
  const queue: Socket[] = [];
  let pumping = false;
  const pump = () => {
    pumping = false;
    let raw = queue.shift();
    while (raw !== undefined && raw.destroyed) raw = queue.shift();
    if (raw !== undefined) wrap.call(server, raw);
    schedule();
  };
  const schedule = () => {
    if (pumping || queue.length === 0) return;
    pumping = true;
    setImmediate(pump);
  };
  server.on('connection', (raw: Socket) => {
    const silent = setTimeout(() => raw.destroy(), timeoutMs);
    silent.unref();
    raw.once('close', () => clearTimeout(silent));
    // 'readable' reads into the socket's buffer and says when the hello is there.
    raw.once('readable', () => {
      clearTimeout(silent);
      queue.push(raw);
      schedule();
    });
  });
  return {
    get waiting() {
      return queue.length;
    },
  };
}
