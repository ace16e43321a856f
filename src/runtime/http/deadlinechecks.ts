// Node checks the request and header deadlines of a server's connections on
// a timer (connectionsCheckingInterval, 1 s here: see serverOptions) that
// runs from listen to close, whatever the connections are doing. On an idle
// operator that timer was ~10 ms of CPU a minute per server, more than
// rollout-operator uses in all (docs/performance.md).
//
// The check only ever acts on a connection with a request in progress: one
// that has connected and not yet sent a whole request, or has begun its
// next one (Node's "active" connections, from the first byte of a request
// until it has all been read). An idle keep-alive connection is closed by
// its own socket timeout (keepAliveTimeout), not by this check. So here the
// timer runs only while some connection is active: each tick that finds none
// stops it, and it starts again when a connection arrives or sends bytes —
// the only ways a connection becomes active — after Node's parser has seen
// them. A deadline is still counted from where Node counts it.
//
// Before, the timer ran while any connection was open, so a client holding
// an idle keep-alive connection (Prometheus between scrapes, a bench polling
// /metrics) woke the process every second: 15 ms of CPU per idle minute
// with 7,500 ConfigMaps, Secrets and Deployments cached, against 6 without
// the connection (docs/restarts.md).
//
// Node keeps the timer and its connection list under private symbols. On a
// Node without them (the pinned Node 24 has them;
// test/runtime/http/guard.test.ts says when they go), the check
// stays as Node runs it: always on.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { isTlsServer } from './connections.ts';

const TIMER_SYMBOL = 'http.server.connectionsCheckingInterval';
const CONNECTIONS_SYMBOL = 'http.server.connections';

interface NodeTimer {
  _onTimeout?: unknown;
  _idleTimeout?: unknown;
}

/** Node's list of a server's connections (its ConnectionsList): those with a request in progress are "active". */
interface NodeConnections {
  active(): unknown[];
}

const state = new WeakMap<Server, { running: boolean }>();

/** Whether the deadline check of `server` runs now: undefined when Node's timer could not be found (then it always runs). */
export function deadlineChecksRunning(server: Server): boolean | undefined {
  return state.get(server)?.running;
}

/** Call before listen, after the server's other 'connection' and 'secureConnection' listeners are added. */
export function checkDeadlinesOnlyWhileActive(server: Server): void {
  const slots = server as unknown as Record<symbol, unknown>;
  let key: symbol | undefined;
  let tick: (() => void) | undefined;
  let intervalMs = 0;
  const status = { running: false };
  const start = () => {
    if (!key || !tick || status.running) return;
    slots[key] = setInterval(tick, intervalMs).unref();
    status.running = true;
  };
  const stop = () => {
    if (!key || !status.running) return;
    clearInterval(slots[key] as NodeJS.Timeout);
    status.running = false;
  };
  // Node starts its timer in a 'listening' listener of its own, added when
  // the server was constructed, so it exists when this one runs.
  server.on('listening', () => {
    key = symbolNamed(server, TIMER_SYMBOL);
    const connectionsKey = symbolNamed(server, CONNECTIONS_SYMBOL);
    const timer = key ? (slots[key] as NodeTimer | undefined) : undefined;
    const connections = connectionsKey ? (slots[connectionsKey] as NodeConnections | undefined) : undefined;
    if (
      typeof timer?._onTimeout !== 'function' ||
      typeof timer._idleTimeout !== 'number' ||
      typeof connections?.active !== 'function'
    ) {
      key = undefined;
      return;
    }
    const check = timer._onTimeout as () => void;
    tick = () => {
      check.call(server);
      if (connections.active().length === 0) stop();
    };
    intervalMs = timer._idleTimeout;
    state.set(server, status);
    status.running = true;
    stop(); // nobody is connected yet
  });
  // Node's parser of a TLS connection is made at 'secureConnection', and reads the TLSSocket: bytes on the TCP
  // socket are records, and a listener there would take them from TLS.
  server.on(isTlsServer(server) ? 'secureConnection' : 'connection', (socket: Socket) => {
    start();
    socket.on('data', start);
  });
}

function symbolNamed(target: object, description: string): symbol | undefined {
  return Object.getOwnPropertySymbols(target).find((s) => s.description === description);
}
