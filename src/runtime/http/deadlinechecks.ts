// Node checks the request and header deadlines of a server's connections on
// a timer (connectionsCheckingInterval, 1 s here: see serverOptions) that
// runs from listen to close, whether a connection is open or not. On an idle
// operator that timer was ~10 ms of CPU a minute per server, more than
// rollout-operator uses in all (docs/performance.md). The check only ever acts
// on open connections, so here it runs only while one is open: stopped when
// the last connection closes, started again, from Node's own check, when the
// next one arrives. A deadline is still enforced from the connection's start.
//
// Node keeps the timer under a private symbol. On a Node without it (the
// pinned Node 24 has it; test/runtime/http/deadlinechecks.test.ts says when
// it goes), the check stays as Node runs it: always on.
import type { Server } from 'node:http';

const TIMER_SYMBOL = 'http.server.connectionsCheckingInterval';

interface NodeTimer {
  _onTimeout?: unknown;
  _idleTimeout?: unknown;
}

const state = new WeakMap<Server, { running: boolean }>();

/** Whether the deadline check of `server` runs now: undefined when Node's timer could not be found (then it always runs). */
export function deadlineChecksRunning(server: Server): boolean | undefined {
  return state.get(server)?.running;
}

/** Call before listen. */
export function checkDeadlinesOnlyWhileConnected(server: Server): void {
  const slots = server as unknown as Record<symbol, NodeJS.Timeout | undefined>;
  let key: symbol | undefined;
  let check: (() => void) | undefined;
  let intervalMs = 0;
  let open = 0;
  const status = { running: false };
  const start = () => {
    if (!key || !check || status.running) return;
    slots[key] = setInterval(check, intervalMs).unref();
    status.running = true;
  };
  const stop = () => {
    if (!key || !status.running) return;
    clearInterval(slots[key]);
    status.running = false;
  };
  // Node starts its timer in a 'listening' listener of its own, added when
  // the server was constructed, so it exists when this one runs.
  server.on('listening', () => {
    key = Object.getOwnPropertySymbols(server).find((s) => s.description === TIMER_SYMBOL);
    const timer = key ? (slots[key] as NodeTimer | undefined) : undefined;
    if (typeof timer?._onTimeout !== 'function' || typeof timer._idleTimeout !== 'number') {
      key = undefined;
      return;
    }
    check = timer._onTimeout as () => void;
    intervalMs = timer._idleTimeout;
    state.set(server, status);
    status.running = true;
    if (open === 0) stop();
  });
  server.on('connection', (socket: NodeJS.EventEmitter) => {
    open++;
    start();
    socket.once('close', () => {
      open--;
      if (open === 0) stop();
    });
  });
}
