// Stateward's status page, live: redraws <main> from every report the
// event stream (/status/events/<namespace>) pushes, or, when the stream
// cannot be used, from /status/api/<namespace> every 2 s. The markup comes
// from markup.js, the module the server renders the page with
// (src/web/html.ts), so the live page is the static one, report for report.

import { namespaceBody } from './markup.js';

const POLL_MS = 2000;

const main = document.getElementById('report');
const connection = document.getElementById('connection');
const generated = document.getElementById('generated');
const namespace = main?.dataset.namespace;

function render(report) {
  // markup.js escapes every name from the cluster, as it does for the server's page: this parses only markup it made.
  main.innerHTML = namespaceBody(
    report.namespaces.find((n) => n.namespace === namespace),
    report.generatedAt,
  ).html;
  if (generated) {
    generated.textContent = report.generatedAt;
    generated.setAttribute('datetime', report.generatedAt);
  }
}

function setConnection(state, text) {
  if (!connection) return;
  connection.dataset.connection = state;
  connection.textContent = text;
}

const api = () => `/status/api/${encodeURIComponent(namespace)}`;
const events = () => `/status/events/${encodeURIComponent(namespace)}`;

let polling = false;

function poll() {
  if (polling) return;
  polling = true;
  setConnection('polling', `polling every ${POLL_MS / 1000} s`);
  const tick = async () => {
    try {
      const response = await fetch(api(), { cache: 'no-store', credentials: 'omit' });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      render(await response.json());
      setConnection('polling', `polling every ${POLL_MS / 1000} s`);
    } catch (error) {
      setConnection(
        'offline',
        `cannot reach the operator (${error instanceof Error ? error.message : String(error)}); retrying`,
      );
    }
    setTimeout(() => void tick(), POLL_MS);
  };
  void tick();
}

function listen() {
  if (typeof EventSource !== 'function') return poll();
  const source = new EventSource(events());
  source.addEventListener('open', () => setConnection('live', 'live'));
  source.addEventListener('report', (event) => {
    render(JSON.parse(event.data));
    setConnection('live', 'live');
  });
  source.addEventListener('error', () => {
    // CLOSED: the server refused the stream (e.g. 503, too many clients); the browser will not retry.
    if (source.readyState === EventSource.CLOSED) {
      source.close();
      poll();
    } else {
      setConnection('reconnecting', 'reconnecting…');
    }
  });
}

if (main && namespace) listen();
