// The alert sender and the -webhook-url call against real local HTTP
// receivers (and a real CONNECT proxy): what arrives, what is retried, and
// that nothing waits on a receiver.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import {
  ReloadAlerts,
  ReloadAlertMetrics,
  ReloadWebhookError,
  callReloadWebhook,
  ReloadWebhook,
} from '../../src/restarts/reloadalerts.ts';
import type { ReloadReport } from '../../src/restarts/alertsinks.ts';
import type { AlertTarget } from '../../src/restarts/alertflags.ts';
import { generateSelfSigned } from '../../src/webhooks/tls/generate.ts';
import { recordingLogger } from '../support/logger.ts';
import { waitFor } from '../cluster/probe.ts';
import { connectProxy } from '../support/connect-proxy.ts';

interface Received {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** How the receiver answers its n-th request (0-based); `hold` leaves it unanswered until release(). */
type Answer = number | { status: number; headers?: Record<string, string> } | 'hold';

/** A local HTTP receiver keeping every request it got. */
async function receiver(t: TestContext, answer: (n: number, request: Received) => Answer = () => 200) {
  const received: Received[] = [];
  const held: ServerResponse[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const entry = {
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      const n = received.push(entry) - 1;
      const how = answer(n, entry);
      if (how === 'hold') {
        held.push(response);
        return;
      }
      const { status, headers } = typeof how === 'number' ? { status: how, headers: {} } : how;
      response.writeHead(status, headers).end('ok');
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: (path = '/hook') => new URL(`http://127.0.0.1:${port}${path}`),
    received,
    /** Answers every held request 200. */
    release: () => {
      for (const response of held.splice(0)) response.writeHead(200).end('ok');
    },
  };
}

/** A loopback port nothing listens on (it did a moment ago). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function reportFor(name: string, outcome: ReloadReport['outcome'] = 'reloaded'): ReloadReport {
  return {
    kind: 'Deployment',
    namespace: 'shop',
    name,
    configs: ['configmap/shop/settings'],
    outcome,
    message: outcome === 'failed' ? 'forbidden' : '',
    at: Date.now(),
  };
}

async function metric(registry: Registry, name: string): Promise<number> {
  const found = registry.getSingleMetric(`stateward_config_restart_alerts_${name}_total`);
  assert.ok(found, name);
  return (await found.get()).values[0]?.value ?? 0;
}

/** A sender with quick retries, stopped after the test. */
function sender(
  t: TestContext,
  target: Partial<AlertTarget> & { url: URL },
  options: ConstructorParameters<typeof ReloadAlerts>[2] = {},
) {
  const registry = new Registry();
  const { lines, log } = recordingLogger();
  const alerts = new ReloadAlerts(
    { sink: 'webhook', additionalInfo: '', proxy: undefined, ...target },
    { log, registry },
    { backoffMs: 10, maxBackoffMs: 50, timeoutMs: 2_000, env: {}, ...options },
  );
  t.after(() => alerts.stop(100));
  return { alerts, registry, lines };
}

const wait = { timeoutMs: 5_000, intervalMs: 5 };

describe('reload alerts', () => {
  it('each sink posts its payload, with the additional info, to the webhook', async (t) => {
    const hook = await receiver(t);
    for (const sink of ['slack', 'teams', 'gchat', 'webhook'] as const) {
      const { alerts, registry } = sender(t, { sink, url: hook.url(`/${sink}`), additionalInfo: 'cluster eu-1' });
      alerts.notify(reportFor('api'));
      await waitFor(`${sink} alert sent`, async () => (await metric(registry, 'sent')) === 1, wait);
    }
    const bySink = new Map(hook.received.map((r) => [r.path.slice(1), r]));
    assert.deepEqual([...bySink.keys()], ['slack', 'teams', 'gchat', 'webhook']);
    for (const request of bySink.values()) assert.equal(request.method, 'POST');

    const slack = JSON.parse(bySink.get('slack')!.body) as { attachments: { text: string; color: string }[] };
    assert.equal(bySink.get('slack')!.headers['content-type'], 'application/json');
    assert.equal(slack.attachments[0]!.color, 'good');
    assert.equal(
      slack.attachments[0]!.text,
      'cluster eu-1 : Stateward restarted *Deployment shop/api* after a change to *ConfigMap shop/settings*.',
    );
    const teams = JSON.parse(bySink.get('teams')!.body) as {
      type: string;
      attachments: { contentType: string; content: { body: { text: string }[] } }[];
    };
    assert.equal(teams.type, 'message');
    assert.equal(teams.attachments[0]!.contentType, 'application/vnd.microsoft.card.adaptive');
    assert.match(
      teams.attachments[0]!.content.body[1]!.text,
      /^cluster eu-1 : Stateward restarted \*\*Deployment shop\/api\*\*/,
    );
    assert.deepEqual(JSON.parse(bySink.get('gchat')!.body), {
      text: 'cluster eu-1 : Stateward restarted *Deployment shop/api* after a change to *ConfigMap shop/settings*.',
    });
    assert.equal(bySink.get('webhook')!.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(
      bySink.get('webhook')!.body,
      'cluster eu-1 : Stateward restarted Deployment shop/api after a change to ConfigMap shop/settings.',
    );
  });

  it('retries a 500 and a 429 (after its Retry-After), then counts the alert sent', async (t) => {
    const hook = await receiver(t, (n) => [500, { status: 429, headers: { 'retry-after': '0' } }][n] ?? 200);
    const { alerts, registry } = sender(t, { url: hook.url() });
    alerts.notify(reportFor('api'));
    await waitFor('alert sent', async () => (await metric(registry, 'sent')) === 1, wait);
    assert.equal(hook.received.length, 3);
    assert.equal(new Set(hook.received.map((r) => r.body)).size, 1, 'the same body each time');
    assert.equal(await metric(registry, 'retries'), 2);
    assert.equal(await metric(registry, 'failed'), 0);
  });

  it('does not retry a 400, and gives up after the last attempt of a 503', async (t) => {
    const hook = await receiver(t, (_n, request) => (request.path === '/bad' ? 400 : 503));
    const bad = sender(t, { url: hook.url('/bad') });
    bad.alerts.notify(reportFor('api'));
    await waitFor('400 given up on', async () => (await metric(bad.registry, 'failed')) === 1, wait);
    assert.equal(hook.received.filter((r) => r.path === '/bad').length, 1);
    assert.equal(await metric(bad.registry, 'retries'), 0);
    assert.match(String(bad.lines.find((l) => l.msg === 'reload alert not delivered')?.fields.err), /answered 400/);

    const down = sender(t, { url: hook.url('/down') }, { maxAttempts: 3 });
    down.alerts.notify(reportFor('api'));
    await waitFor('503 given up on', async () => (await metric(down.registry, 'failed')) === 1, wait);
    assert.equal(hook.received.filter((r) => r.path === '/down').length, 3);
    assert.equal(await metric(down.registry, 'sent'), 0);
  });

  it('a receiver that never answers holds no caller: notify returns at once, the timeout ends each attempt', async (t) => {
    const hook = await receiver(t, () => 'hold');
    const { alerts, registry, lines } = sender(t, { url: hook.url() }, { timeoutMs: 200, maxAttempts: 2 });
    const started = performance.now();
    for (let i = 0; i < 10; i++) alerts.notify(reportFor(`w${i}`));
    assert.ok(performance.now() - started < 50, 'ten notify() calls return without waiting for any answer');
    const givenUp = (workload: string) =>
      lines.find((l) => l.msg === 'reload alert not delivered' && l.fields.workload === workload);
    await waitFor('the first alert given up on', () => givenUp('Deployment shop/w0'), wait);
    // Both attempts of the first alert reached the receiver, each ended by its timeout.
    assert.equal(hook.received.filter((r) => r.body.includes('shop/w0')).length, 2);
    assert.ok((await metric(registry, 'failed')) >= 1);
    assert.match(String(givenUp('Deployment shop/w0')?.fields.err), /no answer within 200 ms/);
  });

  it('a full queue drops its oldest alerts, counted, with one warning', async (t) => {
    const hook = await receiver(t, (n) => (n === 0 ? 'hold' : 200));
    const { alerts, registry, lines } = sender(t, { url: hook.url() }, { concurrency: 1, queueSize: 2 });
    alerts.notify(reportFor('w1'));
    await waitFor('the first alert in flight', () => hook.received.length === 1, wait);
    for (const name of ['w2', 'w3', 'w4', 'w5']) alerts.notify(reportFor(name));
    assert.equal(await metric(registry, 'dropped'), 2);
    assert.equal(lines.filter((l) => l.msg.startsWith('reload alert queue full')).length, 1);
    hook.release();
    await waitFor('the rest sent', async () => (await metric(registry, 'sent')) === 3, wait);
    assert.deepEqual(
      hook.received.map((r) => /shop\/(w\d)/.exec(r.body)?.[1]),
      ['w1', 'w4', 'w5'],
    );
  });

  it('goes through ALERT_WEBHOOK_PROXY with a CONNECT, credentials as Proxy-Authorization', async (t) => {
    const hook = await receiver(t);
    const proxy = await connectProxy(t);
    const { alerts, registry, lines } = sender(t, {
      url: hook.url('/services/T0/B0/SECRETTOKEN'),
      proxy: new URL(`http://alice:proxypass@127.0.0.1:${proxy.port}`),
    });
    alerts.notify(reportFor('api'));
    await waitFor('alert sent through the proxy', async () => (await metric(registry, 'sent')) === 1, wait);
    assert.deepEqual(proxy.tunnels, [
      `127.0.0.1:${hook.port} Basic ${Buffer.from('alice:proxypass').toString('base64')}`,
    ]);
    assert.equal(hook.received[0]!.path, '/services/T0/B0/SECRETTOKEN');
    assert.doesNotMatch(JSON.stringify(lines), /proxypass|SECRETTOKEN/);
  });

  it('reaches an https webhook through the proxy: TLS inside the CONNECT tunnel', async (t) => {
    const tls = await generateSelfSigned({
      org: 'test',
      dnsNames: ['localhost'],
      validityMs: 3600_000,
      now: Date.now(),
    });
    const bodies: string[] = [];
    const server = createHttpsServer({ cert: tls.cert, key: tls.key }, (request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        bodies.push(Buffer.concat(chunks).toString('utf8'));
        response.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });
    const port = (server.address() as AddressInfo).port;
    const proxy = await connectProxy(t);
    const { alerts, registry } = sender(
      t,
      {
        sink: 'gchat',
        url: new URL(`https://localhost:${port}/v1/spaces/X/messages?key=K&token=T`),
        proxy: new URL(`http://127.0.0.1:${proxy.port}`),
      },
      { ca: tls.ca },
    );
    alerts.notify(reportFor('api'));
    await waitFor('alert sent over TLS through the proxy', async () => (await metric(registry, 'sent')) === 1, wait);
    assert.deepEqual(proxy.tunnels, [`localhost:${port}`]);
    assert.match((JSON.parse(bodies[0]!) as { text: string }).text, /Deployment shop\/api/);
  });

  it('without a proxy of its own, takes HTTP_PROXY from the environment as API calls do', async (t) => {
    const proxy = await connectProxy(t);
    const hook = await receiver(t);
    // Loopback never goes through an environment proxy, so the webhook is named by a host that is not one.
    const { alerts, registry } = sender(
      t,
      { url: new URL(`http://hooks.example:${hook.port}/x`) },
      { env: { HTTP_PROXY: `127.0.0.1:${proxy.port}` } },
    );
    alerts.notify(reportFor('api'));
    await waitFor('alert sent through the proxy', async () => (await metric(registry, 'sent')) === 1, wait);
    assert.deepEqual(proxy.tunnels, [`hooks.example:${hook.port}`]);
  });

  it('logs name the webhook by scheme and host only', async (t) => {
    const hook = await receiver(t, () => 403);
    const secretUrl = hook.url('/services/T0/B0/SECRETTOKEN?sig=SECRETSIG');
    const refused = sender(t, { sink: 'slack', url: secretUrl });
    refused.alerts.notify(reportFor('api'));
    // A port nothing listens on: the failure comes from the connection.
    const deadUrl = new URL(`http://127.0.0.1:${await closedPort()}/services/T0/B0/SECRETTOKEN?sig=SECRETSIG`);
    const dead = sender(t, { url: deadUrl }, { maxAttempts: 2 });
    dead.alerts.notify(reportFor('api'));
    await waitFor(
      'both given up on',
      async () => (await metric(refused.registry, 'failed')) === 1 && (await metric(dead.registry, 'failed')) === 1,
      wait,
    );
    const logged = JSON.stringify([...refused.lines, ...dead.lines]);
    assert.match(logged, new RegExp(`http://127\\.0\\.0\\.1:${hook.port}`));
    assert.doesNotMatch(logged, /SECRETTOKEN|SECRETSIG|services/);
  });

  it('stop() sends what is queued within its deadline, then gives up on the rest', async (t) => {
    const hook = await receiver(t);
    const { alerts, registry } = sender(t, { url: hook.url() }, { concurrency: 1 });
    for (let i = 0; i < 5; i++) alerts.notify(reportFor(`w${i}`));
    await alerts.stop(5_000);
    assert.equal(await metric(registry, 'sent'), 5);
    alerts.notify(reportFor('late'));
    assert.equal(await metric(registry, 'dropped'), 1, 'an alert after stop is counted, not sent');

    const stuck = await receiver(t, () => 'hold');
    const held = sender(t, { url: stuck.url() }, { concurrency: 1 });
    for (let i = 0; i < 3; i++) held.alerts.notify(reportFor(`w${i}`));
    const started = performance.now();
    await held.alerts.stop(200);
    const took = performance.now() - started;
    assert.ok(took >= 190 && took < 1_500, `stop took ${took} ms`);
    assert.equal(await metric(held.registry, 'dropped'), 2, 'the two queued behind the one in flight');
    assert.equal(await metric(held.registry, 'failed'), 1, 'the one in flight, cut off');
  });
  it('counts on metrics registered ahead of it, which read zero while alerts are off', async (t) => {
    const registry = new Registry();
    const metrics = new ReloadAlertMetrics(registry);
    for (const name of ['sent', 'failed', 'dropped', 'retries']) assert.equal(await metric(registry, name), 0);
    const hook = await receiver(t);
    const alerts = new ReloadAlerts(
      { sink: 'gchat', url: hook.url(), additionalInfo: '', proxy: undefined },
      { log: recordingLogger().log, metrics },
      { env: {} },
    );
    t.after(() => alerts.stop(100));
    alerts.notify(reportFor('api'));
    await waitFor('alert sent', async () => (await metric(registry, 'sent')) === 1, wait);
  });
});

describe('-webhook-url call', () => {
  it("posts Reloader's body with what changed and resolves on 2xx", async (t) => {
    const hook = await receiver(t, () => 204);
    const report = reportFor('api');
    await callReloadWebhook(hook.url('/reload'), report, { signal: AbortSignal.timeout(5_000), env: {} });
    assert.equal(hook.received.length, 1);
    const [request] = hook.received;
    assert.equal(request!.method, 'POST');
    assert.equal(request!.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(request!.body), {
      webhook: 'update successful',
      kind: 'Deployment',
      namespace: 'shop',
      name: 'api',
      configs: ['configmap/shop/settings'],
      at: new Date(report.at).toISOString(),
    });
  });

  it('throws on an error answer, a refused connection and a timeout, without the URL path', async (t) => {
    const hook = await receiver(t, (_n, request) => (request.path.startsWith('/slow') ? 'hold' : 500));
    const webhook = new ReloadWebhook(hook.url('/reload/SECRETTOKEN'), { env: {}, timeoutMs: 200 });
    t.after(() => webhook.close());
    const failure = await webhook.call(reportFor('api'), { signal: AbortSignal.timeout(5_000) }).then(
      () => assert.fail('resolved'),
      (error: unknown) => error,
    );
    assert.ok(failure instanceof ReloadWebhookError);
    assert.equal(failure.status, 500);
    assert.equal(failure.message, `webhook http://127.0.0.1:${hook.port} for Deployment shop/api: answered 500`);

    const slow = new ReloadWebhook(hook.url('/slow/SECRETTOKEN'), { env: {}, timeoutMs: 200 });
    t.after(() => slow.close());
    await assert.rejects(
      slow.call(reportFor('api'), { signal: AbortSignal.timeout(5_000) }),
      /no answer within 200 ms/,
    );

    const refusedUrl = new URL(`http://127.0.0.1:${await closedPort()}/x/SECRETTOKEN`);
    await assert.rejects(
      callReloadWebhook(refusedUrl, reportFor('api'), { signal: AbortSignal.timeout(5_000), env: {} }),
      (error: Error) =>
        error instanceof ReloadWebhookError && error.status === undefined && !error.message.includes('SECRETTOKEN'),
    );
  });

  it('a receiver that answers 200 and then trickles its body, or never ends it, holds a call no longer than its timeout', async (t) => {
    const timers = new Set<NodeJS.Timeout>();
    const server = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'text/plain' });
        if (request.url?.startsWith('/endless')) {
          // As much as it can send, for as long as the socket is open.
          const pump = () => {
            while (!response.destroyed && response.write(Buffer.alloc(16_384, 120)));
            if (!response.destroyed) response.once('drain', pump);
          };
          pump();
          return;
        }
        const timer = setInterval(() => response.write('.'), 20);
        timers.add(timer);
        response.on('close', () => clearInterval(timer));
      });
    });
    const sockets = new Set<Socket>();
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(async () => {
      for (const timer of timers) clearInterval(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    });
    const port = (server.address() as AddressInfo).port;
    const trickle = new ReloadWebhook(new URL(`http://127.0.0.1:${port}/trickle`), { env: {}, timeoutMs: 300 });
    t.after(() => trickle.close());
    // The outer signal is generous: were the call's own timeout not to end it, the message would be the signal's.
    const outcome = await trickle.call(reportFor('api'), { signal: AbortSignal.timeout(30_000) }).then(
      () => 'resolved',
      (error: unknown) => (error as Error).message,
    );
    // A 2xx whose body is cut off by the timeout is not a delivered call: the change stays to be called again.
    assert.match(outcome, /no answer within 300 ms/);
    const endless = new ReloadWebhook(new URL(`http://127.0.0.1:${port}/endless`), { env: {}, timeoutMs: 5_000 });
    t.after(() => endless.close());
    // An endless body is read only up to the answer cap, so the 200 counts at once, well within the timeout.
    await endless.call(reportFor('api'), { signal: AbortSignal.timeout(30_000) });
  });

  it('stops when its signal aborts, with the signal reason', async (t) => {
    const hook = await receiver(t, () => 'hold');
    const controller = new AbortController();
    const call = callReloadWebhook(hook.url(), reportFor('api'), { signal: controller.signal, env: {} });
    await waitFor('request arrived', () => hook.received.length === 1, wait);
    controller.abort(new Error('shutting down'));
    await assert.rejects(call, /shutting down/);
  });
});
