// What a connection sends reaches Node's HTTP parser a slice at a time, and
// not at all while a request of that connection waits its turn (issue 33).
//
// Node's server normally lets its parser read the socket directly (it
// "consumes" the socket's handle) and parses every request in each chunk it
// reads, up to 64 KiB: ~1,900 pipelined `GET /metrics`, each made into a
// request and a response object before anything of ours can say no. 20
// connections sending such a chunk took ~0.9 s of the event loop; nothing
// (socket.pause(), the parser's own pause, destroying the socket) stops the
// parse of a chunk once it began. Here the parser gets the connection's
// bytes through the socket's 'data' events instead, a slice at a time, and
// between slices this asks `mayParse`: once a request waits behind the one
// being served, the rest is held (and the socket paused) until the
// connection's turn comes again. Held bytes beyond `maxHeldBytes` close the
// connection through `onOverflow`.
//
// Node switches its parser from the handle to 'data' events by itself when
// a 'data' listener is added to a socket it serves (so that the listener
// sees the bytes); that listener is added here, after Node's own, and the
// socket's emit is wrapped to hand the parser slices.
import type { Socket } from 'node:net';

export interface FeedOptions {
  /** Bytes handed to the parser at once. */
  sliceBytes: number;
  /** Bytes held while the connection waits; more is an overflow. */
  maxHeldBytes: number;
  /** False while a request of the connection waits its turn. */
  mayParse: () => boolean;
  /** Held bytes went over maxHeldBytes. */
  onOverflow: () => void;
}

export interface Feed {
  /** Hands the parser what was held, for as long as it may parse. */
  resume(): void;
}

export function feedInSlices(socket: Socket, options: FeedOptions): Feed {
  const { sliceBytes, maxHeldBytes, mayParse, onOverflow } = options;
  type Emit = (event: string | symbol, ...args: unknown[]) => boolean;
  // Node's own emit, called on the socket: the wrapper below stands in front of it.
  const emit = socket.emit.bind(socket) as Emit;
  const held: Buffer[] = [];
  let heldBytes = 0;
  const hold = (chunk: Buffer) => {
    held.push(chunk);
    heldBytes += chunk.length;
    if (heldBytes > maxHeldBytes) {
      held.length = 0;
      heldBytes = 0;
      onOverflow();
      return;
    }
    socket.pause();
  };
  /** Delivers `chunk` slice by slice; what may not be parsed yet is held. */
  const deliver = (chunk: Buffer) => {
    for (let at = 0; at < chunk.length; at += sliceBytes) {
      if (socket.destroyed) return;
      if (!mayParse()) return hold(chunk.subarray(at));
      emit('data', chunk.subarray(at, at + sliceBytes));
    }
  };
  socket.emit = ((event: string | symbol, ...args: unknown[]): boolean => {
    if (event !== 'data' || !Buffer.isBuffer(args[0])) return emit(event, ...args);
    if (heldBytes > 0) hold(args[0]);
    else deliver(args[0]);
    return true;
  }) as Socket['emit'];
  // Moves Node's parser onto 'data' events (see above); the listener itself has nothing to do.
  socket.on('data', () => undefined);
  return {
    resume() {
      if (heldBytes === 0 || socket.destroyed) return;
      const chunks = held.splice(0);
      heldBytes = 0;
      for (const chunk of chunks) {
        if (heldBytes > 0) hold(chunk);
        else deliver(chunk);
      }
      if (heldBytes === 0) socket.resume();
    },
  };
}
